"""Min-K%++'s mu_i and sigma_i estimated from the top-k log-probs a server returns.

Min-K%++ (Zhang et al., ICLR 2025, Eq. 3-4) standardizes each token's log-prob with the mean and
standard deviation of log p over the model's **full** next-token distribution at that position::

    mu_i      = sum_v p_i(v) log p_i(v)                     (= -entropy)
    sigma_i^2 = sum_v p_i(v) (log p_i(v) - mu_i)^2

An inference server (vLLM ``prompt_logprobs=k``, an OpenAI-compatible ``/v1/completions`` with
``logprobs=k``) returns only the k most likely tokens per position, plus the log-prob of the actual
token. :func:`approximate_mu_sigma` fills in the rest of the distribution and computes both sums.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ._checks import finite_vector


__all__ = ["DEFAULT_MATCH_TOLERANCE", "approximate_mu_sigma"]

#: Two log-probs closer than this (natural-log units) are taken to be the same token; see
#: :func:`approximate_mu_sigma`.
DEFAULT_MATCH_TOLERANCE = 1e-4


def approximate_mu_sigma(
    top_logprobs: Sequence[np.ndarray],
    token_logprobs: np.ndarray,
    vocab_size: int,
    *,
    tolerance: float = DEFAULT_MATCH_TOLERANCE,
) -> tuple[np.ndarray, np.ndarray]:
    """Estimate Min-K%++'s mu_i and sigma_i (Eq. 3-4) from top-k log-probs and the actual token's.

    Per position i the *known* tokens are the top-k alternatives ``top_logprobs[i]`` plus the
    actual token x_i, whose log-prob ``token_logprobs[i]`` a server always echoes, whether or not
    x_i is among the top k. The probability mass nobody reported,
    ``m_i = max(0, 1 - sum_{v known} p_i(v))``, is spread **uniformly** over the
    ``r_i = vocab_size - (number of known tokens)`` tokens left, each getting ``m_i / r_i``::

        mu_i      = sum_{v known} p_v log p_v + m_i log(m_i / r_i)
        sigma_i^2 = sum_{v known} p_v (log p_v - mu_i)^2 + m_i (log(m_i / r_i) - mu_i)^2

    The tail terms are 0 when ``m_i = 0`` or ``r_i = 0``. When every token is known (k = |V|) these
    are exactly Eq. 3-4, as computed from the full distribution.

    **Why a uniform tail.** It is the maximum-entropy completion: among all distributions that
    agree with what was reported, it assumes the least about the tokens nobody reported. It is also
    consistent with the data: with the true top k reported, each unreported token has probability at
    most the k-th largest, and by pigeonhole ``m_i / r_i`` is at most that too. Its bias is known:
    the true tail has lower entropy than a uniform one, so the estimated mu_i is never above the
    true one (ignoring rounding); for a peaked distribution (most mass in the top k) the tail term is
    small and so is the error. Alternatives: renormalize the top k and drop the tail (ignores mass
    that can be large when k = 1); put the whole tail on a single token (the minimum-entropy
    completion, the other extreme); extrapolate a Zipf-like decay of the reported log-probs (more
    assumptions, and unstable for k = 1). The error of this choice against the exact values is
    measured by ``benchmarks/topk_approximation.py`` (docs/fidelity.md, "The top-k estimate's error, measured").

    **Is x_i among the top k?** Servers report the actual token by its log-prob (the token strings
    of OpenAI-compatible servers are not reliable ids), so this is decided by value: x_i counts as
    one of the top k when some reported log-prob is within ``tolerance`` of ``token_logprobs[i]``;
    otherwise x_i is one more known token. A different token with the same log-prob (an exact tie)
    is then mistaken for x_i, which leaves x_i's mass in the tail: an error of one token's mass
    spread over the tail, at most. Callers that know token ids (vLLM) pass lists in which x_i
    already appears, and the value match finds it there.

    Edge cases: a ``-inf`` log-prob is a token of probability 0 (contributes nothing, still counts
    as known); known probabilities summing above 1 (rounding) give ``m_i = 0``, with no
    renormalization, as the full-vocabulary computation; ``r_i = 0`` (k >= |V|) gives no tail term;
    a position with an empty top-k list uses x_i and the tail only. Computed in float64, returned as
    float32 (as the exact values from the HF backend).

    Args:
        top_logprobs: n arrays (one per scored token, in text order), each holding the natural-log
            probabilities of the top-k tokens at that position, in any order; k may differ between
            positions. Values must be <= 0 (up to ``tolerance``) or ``-inf``.
        token_logprobs: shape (n,), log p_i(x_i) of the actual tokens, finite.
        vocab_size: |V|, the size of the model's output distribution; at least the number of known
            tokens at every position.
        tolerance: how close two log-probs must be to count as the same token (> 0 and < 1);
            default 1e-4, far above float32 rounding and JSON printing of log-probs, far below
            the gap between typical distinct log-probs.

    Returns:
        ``(mu, sigma)``: two float32 arrays of shape (n,); sigma >= 0.

    >>> # |V| = 4, all four tokens reported: exact. p = (0.5, 0.25, 0.125, 0.125)
    >>> lp = np.log([0.5, 0.25, 0.125, 0.125])
    >>> mu, sigma = approximate_mu_sigma([lp], np.array([lp[1]]), vocab_size=4)
    >>> round(float(mu[0]), 4), round(float(sum(np.exp(lp) * lp)), 4)
    (-1.213, -1.213)
    >>> # top-2 of the same distribution: the missing 0.25 is spread over the 2 other tokens,
    >>> # 0.125 each, which here is the truth, so the estimate is exact again
    >>> mu2, sigma2 = approximate_mu_sigma([lp[:2]], np.array([lp[0]]), vocab_size=4)
    >>> bool(np.allclose(mu2, mu)), bool(np.allclose(sigma2, sigma))
    (True, True)
    """
    token = _finite_1d(token_logprobs, "token_logprobs")
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, (int, np.integer)) or vocab_size < 1:
        raise ValueError(f"vocab_size must be a positive integer (|V| of the model's output); got {vocab_size!r}")
    if not (isinstance(tolerance, (int, float, np.floating)) and 0 < tolerance < 1):
        raise ValueError(f"tolerance must be a number in (0, 1), e.g. 1e-4; got {tolerance!r}")
    if isinstance(top_logprobs, np.ndarray) and top_logprobs.ndim == 2:
        top_logprobs = list(top_logprobs)
    if len(top_logprobs) != token.size:
        raise ValueError(
            f"top_logprobs has {len(top_logprobs)} positions but token_logprobs has {token.size}; "
            "expected one top-k list per scored token"
        )
    if token.max() > tolerance:
        bad = int(np.argmax(token))
        raise ValueError(f"token_logprobs[{bad}] = {token[bad]} > 0; expected natural-log probabilities (<= 0)")
    rows = [_top_row(row, i, tolerance) for i, row in enumerate(top_logprobs)]
    width = max((row.size for row in rows), default=0)
    known = np.full((token.size, width + 1), -np.inf)
    for i, row in enumerate(rows):
        known[i, : row.size] = row
    counts = np.array([row.size for row in rows], dtype=np.int64)
    matched = np.any(np.abs(known[:, :width] - token[:, None]) <= tolerance, axis=1)
    known[~matched, width] = token[~matched]
    counts += ~matched
    if counts.max() > vocab_size:
        bad = int(np.argmax(counts))
        raise ValueError(
            f"position {bad} has {counts[bad]} known tokens (top-k plus the actual token) but vocab_size "
            f"is {vocab_size}; pass the size of the model's full output distribution"
        )
    known = np.minimum(known, 0.0)  # log(1) printed as 1e-9 and the like
    probs = np.exp(known)  # exp(-inf) = 0: padding and zero-probability tokens
    finite = np.isfinite(known)
    safe_known = np.where(finite, known, 0.0)
    tail_mass = np.clip(1.0 - probs.sum(axis=1), 0.0, None)
    remaining = vocab_size - counts
    has_tail = (tail_mass > 0) & (remaining > 0)
    tail_logprob = np.where(has_tail, np.log(np.where(has_tail, tail_mass, 1.0) / np.maximum(remaining, 1)), 0.0)
    tail_mass = np.where(has_tail, tail_mass, 0.0)
    mu = (probs * safe_known).sum(axis=1) + tail_mass * tail_logprob
    variance = (probs * np.square(safe_known - mu[:, None])).sum(axis=1) + tail_mass * np.square(tail_logprob - mu)
    sigma = np.sqrt(np.clip(variance, 0.0, None))
    return mu.astype(np.float32), sigma.astype(np.float32)


def _finite_1d(values, name: str) -> np.ndarray:
    """``values`` (one per scored token) as a non-empty, finite, 1-D float64 array."""
    shape = "{name} must be a non-empty 1-D array with one value per scored token; got shape {shape}"
    return finite_vector(
        values,
        name,
        not_1d=shape,
        empty=shape,
        non_finite="{name}[{first}] is {value}; expected finite natural-log probabilities of the actual tokens",
    )


def _top_row(row, position: int, tolerance: float) -> np.ndarray:
    try:
        arr = np.asarray(row, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"top_logprobs[{position}] must be an array of numbers ({exc})") from exc
    if arr.ndim != 1:
        raise ValueError(f"top_logprobs[{position}] must be a 1-D array of top-k log-probs; got shape {arr.shape}")
    if np.isnan(arr).any() or (arr > tolerance).any():
        raise ValueError(
            f"top_logprobs[{position}] = {arr.tolist()}: expected natural-log probabilities (<= 0 or -inf), "
            "without NaN -- pass log-probs, not probabilities or logits"
        )
    return arr
