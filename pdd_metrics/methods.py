"""Per-text pretraining-data detection scores.

Every function takes NumPy arrays (one value per scored token of ONE text) and returns a Python
float. Convention everywhere: **a higher score means "more likely a member"** (seen in
pretraining); where a paper's raw quantity goes the other way the sign is flipped and the
docstring says so. Log-probabilities are natural logs, ``log p_i = log p(x_i | x_<i)`` for the
n tokens of the text scored after the start token (see docs/methods.md). Inputs of any float
dtype are computed in float64.
"""

from __future__ import annotations

import math
import zlib

import numpy as np

from ._checks import finite_vector


__all__ = [
    "DCPDD_ABLATIONS",
    "dcpdd_score",
    "gap_k_score",
    "loss_score",
    "lowercase_score",
    "lowest_k_count",
    "min_k_plus_plus_score",
    "min_k_score",
    "small_ref_score",
    "zlib_score",
]

_EMPTY_HINT = "an empty text cannot be scored -- remove empty texts from the dataset"


def _float_array(values: np.ndarray, name: str) -> np.ndarray:
    """``values`` (the tokens of one text) as a non-empty, finite, 1-D float64 array, else a ValueError naming ``name``."""
    return finite_vector(
        values,
        name,
        not_1d="{name} must be a 1-D array with one value per token of one text; got shape {shape} -- score texts "
        "one at a time",
        empty="{name}: got 0 tokens; " + _EMPTY_HINT,
        non_finite="{name} has {count} non-finite value(s) (first at position {first}: {value}); expected finite "
        "natural-log values -- check the model output for this text (a -inf is a token given probability 0, a NaN "
        "an overflow in low precision)",
    )


def _same_length(first: np.ndarray, first_name: str, other: np.ndarray, other_name: str) -> None:
    if first.shape != other.shape:
        raise ValueError(
            f"{first_name} has {first.size} values but {other_name} has {other.size}; expected one "
            "value per token in both -- they must come from the same tokenization of the same text"
        )


def _check_k(k: float) -> float:
    if isinstance(k, bool) or not isinstance(k, (int, float, np.integer, np.floating)):
        raise ValueError(f"k must be a number in (0, 1]; got {k!r}")
    if not (0.0 < k <= 1.0):  # also rejects NaN
        raise ValueError(f"k must be a fraction in (0, 1], e.g. 0.2 for the lowest 20% of tokens; got {k!r}")
    return float(k)


def lowest_k_count(n: int, k: float) -> int:
    """Number of tokens in the "lowest k%" selection of Min-K% and Min-K%++: ``max(1, floor(n*k))``.

    At least one token is always taken, so a short text never gives an empty slice (and a NaN
    mean). The floor is taken of ``n*k + 1e-9`` so that float rounding does not lose a token
    (``100 * 0.29 == 28.999999999999996`` in floating point, yet 29% of 100 tokens is 29).

    Args:
        n: number of tokens in the text, >= 1.
        k: fraction of tokens, in (0, 1].

    >>> lowest_k_count(100, 0.29)
    29
    >>> lowest_k_count(4, 0.2)  # 0.8 tokens -> at least one
    1
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive integer number of tokens; got {n!r}; {_EMPTY_HINT}")
    k = _check_k(k)
    return max(1, min(int(n), math.floor(int(n) * k + 1e-9)))


def loss_score(token_logprobs: np.ndarray) -> float:
    """Loss attack (Yeom et al. 2018; Carlini et al. 2021): ``mean_i log p_i``.

    This is ``-log PPL``, the negated mean token loss, so that higher = more likely a member
    (members have low perplexity).

    Args:
        token_logprobs: shape (n,), log p_i of the n tokens of one text.

    >>> loss_score(np.array([-1.0, -2.0, -3.0]))
    -2.0
    """
    return float(np.mean(_float_array(token_logprobs, "token_logprobs")))


def zlib_score(token_logprobs: np.ndarray, text: str) -> float:
    """Zlib attack (Carlini et al. 2021, Sec. 6.1): ``mean_i log p_i / len(zlib.compress(text))``.

    Carlini et al. rank by log PPL / zlib entropy, low = memorized; this is its negation
    (``-log PPL`` over the zlib entropy), so that higher = more likely a member. The zlib entropy is
    the length in bytes of ``zlib.compress(text.encode("utf-8"))`` at zlib's default level, on the
    raw text.

    Args:
        token_logprobs: shape (n,), log p_i of the n tokens of ``text``.
        text: the scored text, non-empty.

    >>> len(zlib.compress(b"hello"))
    13
    >>> zlib_score(np.array([-1.0, -2.0, -3.0]), "hello")  # -2 / 13
    -0.15384615384615385
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be a str (the raw scored text); got {type(text).__name__}")
    if not text:
        raise ValueError(f"text is empty; {_EMPTY_HINT}")
    mean_logprob = loss_score(token_logprobs)
    return mean_logprob / len(zlib.compress(text.encode("utf-8")))


def lowercase_score(token_logprobs: np.ndarray, lowercase_token_logprobs: np.ndarray) -> float:
    """Lowercase attack (Carlini et al. 2021, Sec. 6.1): ``mean log p(lower(x)) / mean log p(x)``.

    Equal to ``log PPL_lower / log PPL``: a member has a low perplexity on its original casing but
    not on the lowercased copy, so the ratio is high -- higher = more likely a member. (Codebases
    differ here; some use the inverse or its negation.) The two arrays come from separate
    tokenizations and may have different lengths. Not meaningful for scripts without case.

    Args:
        token_logprobs: shape (n,), log p_i of the original text.
        lowercase_token_logprobs: shape (m,), log p_i of ``text.lower()``.

    >>> lowercase_score(np.array([-1.0, -1.0]), np.array([-2.0, -4.0, -3.0]))  # -3 / -1
    3.0
    """
    original = loss_score(token_logprobs)
    lower = float(np.mean(_float_array(lowercase_token_logprobs, "lowercase_token_logprobs")))
    if original == 0.0:
        raise ValueError(
            "the mean log-probability of the original text is exactly 0 (every token has "
            "probability 1, so log PPL = 0) and the ratio log PPL_lower / log PPL is undefined -- "
            "check that the log-probabilities are not all zero (e.g. a masked or padded output)"
        )
    return lower / original


def small_ref_score(token_logprobs: np.ndarray, reference_logprobs: np.ndarray) -> float:
    """Reference-model attack "Small-Ref" (Carlini et al. 2021, Sec. 6.1; DC-PDD Appendix A.1):
    ``mean_i log p_target(x_i) - mean_j log p_ref(x_j)``.

    The target's log-likelihood calibrated by a reference model's: a text that is merely easy
    (low perplexity under any model) scores near 0, a text the target saw scores above. Higher =
    more likely a member. This is the difference of mean log-likelihoods (the "Ref" baseline of the
    DC-PDD and Min-K%++ tables); Carlini et al. rank by the ratio of the two log-perplexities
    instead. Each model tokenizes the text with its own tokenizer, so the arrays may differ in length.

    Args:
        token_logprobs: shape (n,), log p_i of the text's tokens under the target model.
        reference_logprobs: shape (m,), log p_j of the text's tokens under the reference model.

    >>> small_ref_score(np.array([-1.0, -2.0]), np.array([-3.0, -2.0, -4.0]))  # -1.5 - (-3)
    1.5
    """
    return loss_score(token_logprobs) - float(np.mean(_float_array(reference_logprobs, "reference_logprobs")))


def min_k_score(token_logprobs: np.ndarray, k: float = 0.2) -> float:
    """Min-K% Prob (Shi et al., ICLR 2024, Sec. 3): mean of the lowest-k fraction of log p_i.

    Takes the ``lowest_k_count(n, k) = max(1, floor(n*k))`` smallest log p_i and averages them.
    Members have fewer outlier low-probability tokens, so higher = more likely a member. Ties do
    not matter: every choice among tied values gives the same mean.

    Args:
        token_logprobs: shape (n,), log p_i of one text.
        k: fraction in (0, 1]; default 0.2 (20%, the paper's choice).

    >>> min_k_score(np.array([-0.5, -4.0, -1.0, -2.0, -3.0]), k=0.4)  # (-4 + -3) / 2
    -3.5
    """
    values = _float_array(token_logprobs, "token_logprobs")
    count = lowest_k_count(values.size, k)
    return float(np.mean(np.sort(values)[:count]))


def _standardized(token_logprobs, center, center_name: str, sigma, sigma_floor: float) -> np.ndarray:
    """``(log p_i - center_i) / max(sigma_i, sigma_floor)`` in float64, after checking the three arrays
    (finite, one value per token) and ``sigma >= 0``, ``sigma_floor > 0``: Min-K%++'s z_i (center
    mu_i) and Gap-K%'s g_i (center the top-1 log-prob)."""
    values = _float_array(token_logprobs, "token_logprobs")
    center = _float_array(center, center_name)
    sigma = _float_array(sigma, "sigma")
    _same_length(values, "token_logprobs", center, center_name)
    _same_length(values, "token_logprobs", sigma, "sigma")
    if np.any(sigma < 0):
        raise ValueError(
            f"sigma must be >= 0 (a standard deviation); got minimum {sigma.min()} -- pass the "
            "square root of the variance, clipping a slightly negative variance to 0 first"
        )
    if not (isinstance(sigma_floor, (int, float, np.integer, np.floating)) and sigma_floor > 0):
        raise ValueError(f"sigma_floor must be a positive number, e.g. 1e-6; got {sigma_floor!r}")
    return (values - center) / np.maximum(sigma, float(sigma_floor))


def min_k_plus_plus_score(
    token_logprobs: np.ndarray,
    mu: np.ndarray,
    sigma: np.ndarray,
    k: float = 0.2,
    sigma_floor: float = 1e-6,
) -> float:
    """Min-K%++ (Zhang et al., ICLR 2025, Eq. 3-4): mean of the lowest-k fraction of z_i.

    ``z_i = (log p_i - mu_i) / max(sigma_i, sigma_floor)``, where ``mu_i = sum_v p_v log p_v`` and
    ``sigma_i^2 = sum_v p_v (log p_v)^2 - mu_i^2`` are the mean and standard deviation of log p over
    the model's full next-token distribution at position i. The score is the mean of the
    ``max(1, floor(n*k))`` smallest z_i; higher = more likely a member (the paper's direction).
    ``sigma_floor`` guards a near-deterministic distribution (sigma_i -> 0; this project's choice,
    the paper has no guard). Computed in float64 whatever the input dtype.

    Args:
        token_logprobs: shape (n,), log p_i of one text.
        mu: shape (n,), mu_i per position.
        sigma: shape (n,), sigma_i >= 0 per position.
        k: fraction in (0, 1]; default 0.2 (the paper's default).
        sigma_floor: lower bound on sigma_i, > 0; default 1e-6.

    >>> lp, mu, sigma = np.array([-1.0, -3.0]), np.array([-2.0, -2.0]), np.array([0.5, 2.0])
    >>> min_k_plus_plus_score(lp, mu, sigma, k=0.5)  # z = [2.0, -0.5]; lowest one
    -0.5
    """
    z = _standardized(token_logprobs, mu, "mu", sigma, sigma_floor)
    count = lowest_k_count(z.size, k)
    return float(np.mean(np.sort(z)[:count]))


def gap_k_score(
    token_logprobs: np.ndarray,
    top1_logprobs: np.ndarray,
    sigma: np.ndarray,
    k: float = 0.2,
    window: int = 3,
    sigma_floor: float = 1e-4,
) -> float:
    """Gap-K% (Kwak and Kim, ACL 2026, arXiv 2601.19936): mean of the lowest-k fraction of windowed
    top-1 gaps.

    ``g_i = (log p_i - max_v log p_i(v)) / max(sigma_i, sigma_floor)``: how far the actual token's
    log-prob falls below the most likely token's at position i (0 where x_i is the top-1), in units
    of sigma_i, the standard deviation of log p over the full next-token distribution (Min-K%++
    Eq. 4). A moving average over ``window`` consecutive positions,
    ``s_j = (g_j + ... + g_{j+w-1}) / w`` for j = 1..n-w+1, smooths them; a text of fewer than
    ``window`` tokens keeps its g_i unsmoothed (as the authors' ``window_lowmean``). The score is the
    mean of the ``max(1, floor(m*k))`` smallest of the m values. Every g_i <= 0; higher = more
    likely a member (the paper's direction: training penalizes a gap to the top-1 token). g_i is the
    paper's g_t (as its project page writes it); the window and the lowest-k mean are written from
    the authors' scripts (the paper's equation numbers could not be read offline).

    Defaults are those of the authors' scripts (meaoww/gap-k): k = 0.2 (``RATIO``); window 3
    (``--window_size``; their ``wikimia.sh`` uses 6 for LLaMA models); ``sigma_floor`` 1e-4, the
    square root of the variance clamp ``1e-8`` of their ``wikimia.py``. Computed in float64.

    Args:
        token_logprobs: shape (n,), log p_i of one text.
        top1_logprobs: shape (n,), max_v log p_i(v), the most likely token's log-prob per position;
            >= token_logprobs (up to 1e-4 for rounding).
        sigma: shape (n,), sigma_i >= 0 per position.
        k: fraction in (0, 1]; default 0.2.
        window: whole number >= 1 of positions per moving average; 1 = no smoothing. Default 3.
        sigma_floor: lower bound on sigma_i, > 0; default 1e-4.

    >>> lp, top1 = np.array([-1.0, -3.0, -0.5, -2.0]), np.array([-1.0, -1.0, -0.5, -1.0])
    >>> sigma = np.array([1.0, 2.0, 1.0, 0.5])  # g = [0, -1, 0, -2]
    >>> gap_k_score(lp, top1, sigma, k=0.5, window=2)  # windows [-0.5, -0.5, -1.0]; lowest one
    -1.0
    """
    gaps = _standardized(token_logprobs, top1_logprobs, "top1_logprobs", sigma, sigma_floor)
    values, top1 = np.asarray(token_logprobs, dtype=np.float64), np.asarray(top1_logprobs, dtype=np.float64)
    if np.any(top1 < values - 1e-4):
        first = int(np.flatnonzero(top1 < values - 1e-4)[0])
        raise ValueError(
            f"top1_logprobs[{first}] = {top1[first]} is below token_logprobs[{first}] = {values[first]}; expected "
            "the most likely token's log-prob at each position, never below the actual token's -- pass "
            "max_v log p(v | x_<i) of the same positions"
        )
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1:
        raise ValueError(f"window must be a whole number >= 1 of positions, e.g. 3; got {window!r}")
    if gaps.size >= window:
        gaps = np.lib.stride_tricks.sliding_window_view(gaps, int(window)).mean(axis=1)
    count = lowest_k_count(gaps.size, k)
    return float(np.mean(np.sort(gaps)[:count]))


#: Keyword arguments of :func:`dcpdd_score` for the ablations named in the DC-PDD paper.
#: "cld": uncapped alpha, all tokens; "lup": capped at the caller's ``a``, all tokens;
#: "sfo": capped, first occurrences only (= DC-PDD). "cld" sets ``a`` itself, so merge rather than
#: pass ``a`` twice: ``dcpdd_score(lp, ids, log_freq, **{"a": a, **DCPDD_ABLATIONS[name]})``.
DCPDD_ABLATIONS: dict[str, dict] = {
    "cld": dict(a=None, first_occurrence_only=False),
    "lup": dict(first_occurrence_only=False),
    "sfo": dict(first_occurrence_only=True),
}


def dcpdd_score(
    token_logprobs: np.ndarray,
    token_ids: np.ndarray,
    log_reference_freq: np.ndarray,
    a: float | None = 0.01,
    first_occurrence_only: bool = True,
) -> float:
    """DC-PDD (Zhang et al., EMNLP 2024, Eq. 3-8): divergence-calibrated score beta.

    ``p_i = exp(log p_i)`` (Eq. 3); ``alpha_i = -p_i * log f(x_i)`` (Eq. 6), with
    ``log f(x_i) = log_reference_freq[token_ids[i]]``; ``alpha_i = min(alpha_i, a)`` (Eq. 7) when
    ``a`` is not None; beta = mean of alpha_i over the positions where a token id occurs for the
    first time in the text (FOS, Eq. 8) when ``first_occurrence_only``, else over all positions.
    Higher beta = more likely a member (the paper's direction, Eq. 9).

    Paper ablations: CLD = ``(a=None, first_occurrence_only=False)``; +LUP = ``(a,
    first_occurrence_only=False)``; +SFO = ``(a, first_occurrence_only=True)`` = DC-PDD. See
    :data:`DCPDD_ABLATIONS`.

    Args:
        token_logprobs: shape (n,), log p_i of one text.
        token_ids: shape (n,), integer token ids of the same tokens (target model's tokenizer).
        log_reference_freq: shape (V,), V >= max id + 1, log f(v) per token id: Laplace-smoothed
            reference-corpus frequencies (Eq. 4-5), so finite and <= 0.
        a: upper bound on alpha_i (> 0), or None for no bound; default 0.01 (the paper's
            recommendation for practice; its main table used a = 10 for BookMIA).
        first_occurrence_only: average over first occurrences only (default True, Eq. 8).

    >>> lp = np.log(np.array([0.5, 0.25, 0.5]))
    >>> log_f = np.log(np.array([0.5, 0.25, 0.25]))
    >>> ids = np.array([1, 0, 1])  # id 1 repeats: FOS = positions 0 and 1
    >>> round(dcpdd_score(lp, ids, log_f, a=None), 6)  # (0.5*log 4 + 0.25*log 2) / 2
    0.433217
    """
    values = _float_array(token_logprobs, "token_logprobs")
    ids = np.asarray(token_ids)
    if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(
            f"token_ids must be a 1-D integer array (one id per token); got shape {ids.shape}, "
            f"dtype {ids.dtype} -- convert with np.asarray(ids, dtype=np.int64)"
        )
    _same_length(values, "token_logprobs", ids, "token_ids")
    log_freq = np.asarray(log_reference_freq, dtype=np.float64)
    if log_freq.ndim != 1 or log_freq.size == 0:
        raise ValueError(
            "log_reference_freq must be a non-empty 1-D array of log-frequencies indexed by token "
            f"id; got shape {log_freq.shape}"
        )
    out_of_range = (ids < 0) | (ids >= log_freq.size)
    if out_of_range.any():
        bad_id = int(ids[np.flatnonzero(out_of_range)[0]])
        raise ValueError(
            f"token id {bad_id} is outside log_reference_freq, which has {log_freq.size} entries "
            f"(valid ids 0..{log_freq.size - 1}) -- build the frequency table with the target "
            "model's tokenizer and its full vocabulary size |V|"
        )
    log_f = log_freq[ids]
    bad = np.flatnonzero(~np.isfinite(log_f))
    if bad.size:
        raise ValueError(
            f"log_reference_freq[{int(ids[bad[0]])}] is {log_f[bad[0]]}; expected finite "
            "log-frequencies -- use the Laplace-smoothed table of Eq. 5, (count + 1) / (N' + |V|)"
        )
    if a is not None and not (isinstance(a, (int, float, np.integer, np.floating)) and a > 0):
        raise ValueError(f"a must be a positive number (the cap of Eq. 7) or None; got {a!r}")
    alpha = -np.exp(values) * log_f
    if a is not None:
        alpha = np.minimum(alpha, float(a))
    if first_occurrence_only:
        _, first_positions = np.unique(ids, return_index=True)
        alpha = alpha[first_positions]
    return float(np.mean(alpha))
