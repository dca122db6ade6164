"""CoDeC, Contamination Detection via Context (Zawalski et al., ICLR 2026): the statistic.

Zawalski, Boubdir, Balazy, Nushi, Ribalta, "Detecting Data Contamination in LLMs via In-Context
Learning", ICLR 2026 (arXiv:2510.27055); the authors' reference code is the demo notebook
``packages/nemo-evaluator/examples/notebooks/contamination_detection_demo.ipynb`` of
``NVIDIA-NeMo/Evaluator`` (class ``CoDeC``, ``contamination_detection_pipeline``).

Idea (paper Sec. 3): in-context examples drawn from the same dataset make an unseen dataset's
examples *more* likely (they show its style and format), but disturb what a model memorised of a
dataset it was trained on, so there they make its examples *less* likely. Per example x of a
dataset D (paper Sec. 3, steps 1-4):

1. baseline: the mean log-likelihood of x's target tokens, logprob_baseline(x);
2. in context: the same with n other examples x_1..x_n of D (drawn at random, x excluded) prepended,
   logprob_in-context(x);
3. Delta(x) = logprob_in-context(x) - logprob_baseline(x);
4. the dataset's contamination score, S_CoDeC(D) = (1/|D|) sum_x 1[Delta(x) < 0]: the share of
   examples whose confidence drops with context. Higher = more likely contaminated; the paper reads
   above about 80% as a red flag and finds unseen datasets mostly below 50-60%.

A tie (Delta = 0) counts as no drop, as in the reference code (``confidence_diff > 0`` of
baseline minus in-context). The sign of Delta is all the score uses; where both terms average the
same tokens (as in ``pdd_codec``, whose two requests score the same continuation), the sign of the
difference of their *sums* is the same, so :func:`codec_deltas` accepts either.

The standard error (:func:`codec_score_stderr`) is the binomial one, sqrt(S (1 - S) / N): the paper
treats each example's indicator as a Bernoulli trial (its Sec. on dataset size: 100 examples give a
stable estimate, 1000 a standard deviation below 1%). The indicators are not exactly independent (an
example may serve as another's context), so it is an approximation; :func:`wilson_interval` gives an
interval that stays inside [0, 1] and is not empty of width at S = 0 or 1 (where the binomial
standard error is 0).

Every function here is pure NumPy; the examples and requests are in :mod:`pdd_tasks.dataset_tests.codec`.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import binom, norm

from ._checks import finite_vector


__all__ = [
    "DEFAULT_CONTEXT_EXAMPLES",
    "codec_deltas",
    "codec_pvalue",
    "codec_score",
    "codec_score_stderr",
    "context_draws",
    "fewest_examples_to_reject",
    "wilson_bounds",
    "wilson_interval",
]

#: n, the in-context examples per target: the reference code's ``num_context_examples=1`` ("we found
#: that 1 is sufficient"; the paper's ablation: n = 1 already separates seen from unseen data).
DEFAULT_CONTEXT_EXAMPLES = 1

_MESSAGES = {
    "not_1d": "{name} must be 1-D (one value per example), got shape {shape}",
    "empty": "{name} is empty: CoDeC needs at least one scored example",
    "non_finite": "{name} has {count} of {size} values that are NaN or infinite (first at {first}: {value})",
}


def _vector(values, name: str) -> np.ndarray:
    return finite_vector(values, name, **_MESSAGES)


def codec_deltas(in_context, baseline) -> np.ndarray:
    """Delta(x) = logprob_in-context(x) - logprob_baseline(x) per example (paper Sec. 3, step 3).

    Args:
        in_context: shape (N,), each example's log-likelihood with the in-context examples prepended.
        baseline: shape (N,), the same tokens' log-likelihood without them (same reduction: both
            means over the target tokens, or both sums over the same tokens).

    Returns:
        float64 array of shape (N,); negative = the context lowered the model's confidence.

    >>> codec_deltas([-10.0, -8.0], [-9.0, -9.0]).tolist()
    [-1.0, 1.0]
    """
    with_context, without = _vector(in_context, "in_context"), _vector(baseline, "baseline")
    if with_context.shape != without.shape:
        raise ValueError(
            f"in_context and baseline must have one value per example each, got {with_context.size} and {without.size}"
        )
    return with_context - without


def codec_score(deltas) -> float:
    """S_CoDeC = share of examples with Delta < 0 (paper Sec. 3, step 4); in [0, 1], higher = more
    likely contaminated. A tie (Delta = 0) is not a drop (the reference code's strict comparison).

    >>> codec_score([-0.5, 0.0, 0.2, -1.0])
    0.5
    """
    return float(np.mean(_vector(deltas, "deltas") < 0))


def codec_score_stderr(deltas) -> float:
    """Binomial standard error of :func:`codec_score`: sqrt(S (1 - S) / N), each example's indicator a
    Bernoulli trial (the paper's reading of its dataset-size ablation). 0 at S = 0 or 1: see
    :func:`wilson_interval` for an interval there.

    >>> round(codec_score_stderr([-1.0, 1.0, -1.0, 1.0]), 4)
    0.25
    """
    values = _vector(deltas, "deltas")
    score = float(np.mean(values < 0))
    return math.sqrt(score * (1.0 - score) / values.size)


def wilson_interval(deltas, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of :func:`codec_score` at ``confidence`` (two-sided): the binomial
    interval that stays in [0, 1] and keeps a width at S = 0 or 1 (Wilson 1927; Brown, Cai and
    DasGupta 2001 recommend it over the Wald interval S +- z SE for small N).

    >>> low, high = wilson_interval([-1.0] * 20)
    >>> round(low, 3), high
    (0.839, 1.0)
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    values = _vector(deltas, "deltas")
    return wilson_bounds(int(np.sum(values < 0)), values.size, confidence)


def wilson_bounds(drops: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """:func:`wilson_interval` from the counts: ``drops`` of ``n`` examples (a score pooled over
    several datasets' counts, :func:`pdd_metrics.combine.pooled_codec`).

    >>> low, high = wilson_bounds(20, 20)
    >>> round(low, 3), high
    (0.839, 1.0)
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1 or not 0 <= drops <= n:
        raise ValueError(f"expected 0 <= drops <= n and n >= 1 whole numbers, got drops={drops!r}, n={n!r}")
    score = drops / n
    z = float(norm.ppf(0.5 + confidence / 2))
    centre = (score + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(score * (1 - score) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def codec_pvalue(drops: int, examples: int) -> float:
    """One-sided exact binomial p-value of a CoDeC score: P(X >= ``drops``) for X ~ Binomial(``examples``,
    1/2), the null hypothesis that context lowers the confidence of at most half the examples.

    Not in the paper, which reads the score against thresholds (about 0.8 a red flag; unseen data
    mostly below 0.5-0.6). It is this project's decision rule for the contamination verdict
    (:mod:`pdd_metrics.verdict`): a score significantly above 1/2. Its assumptions are the
    binomial standard error's (:func:`codec_score_stderr`: independent indicators), plus one that
    can fail: an unseen benchmark scores at most 1/2. The paper's diverse unseen datasets reach about
    0.6, where this test's level is above its nominal one; docs/controls-examples.md gives the level
    measured on benchmark-shaped files.

    >>> codec_pvalue(10, 10) == 0.5**10, codec_pvalue(0, 10)
    (True, 1.0)
    """
    if isinstance(examples, bool) or not isinstance(examples, int) or examples < 1:
        raise ValueError(f"examples must be a positive whole number, got {examples!r}")
    if isinstance(drops, bool) or not isinstance(drops, int) or not 0 <= drops <= examples:
        raise ValueError(f"drops must be a whole number in [0, {examples}], got {drops!r}")
    return float(binom.sf(drops - 1, examples, 0.5))


def fewest_examples_to_reject(alpha: float, null: float = 0.5) -> int:
    """The fewest examples N at which :func:`codec_pvalue` (the one-sided binomial test against
    ``null``) can reject at level ``alpha`` at all. Its smallest p-value over N examples is at a score
    of 1 (every example drops): P(X >= N) = ``null``**N, so N is the least whole number with
    ``null``**N <= ``alpha``, ceil(log(alpha) / log(null)). With fewer examples every score, 1.000
    included, is as likely on a benchmark the model has not seen, so the score is no evidence.

    >>> fewest_examples_to_reject(0.05), 0.5**4, 0.5**5  # 4 examples: p 0.0625 at best
    (5, 0.0625, 0.03125)
    """
    if not 0 < alpha < 1 or not 0 < null < 1:
        raise ValueError(f"alpha and null must be in (0, 1), got {alpha!r} and {null!r}")
    examples = max(1, math.ceil(math.log(alpha) / math.log(null)))
    while null**examples > alpha:  # guard the rounding of the logarithms
        examples += 1
    while examples > 1 and null ** (examples - 1) <= alpha:
        examples -= 1
    return examples


def context_draws(num_examples: int, num_context: int, seed: int) -> np.ndarray:
    """For each example i, the indices of its ``num_context`` in-context examples: drawn uniformly
    without replacement from the other examples (i excluded), as the reference code's
    ``random.sample(dataset[:i] + dataset[i+1:], n)``; example i's draw depends only on ``seed`` and i.

    Returns:
        int64 array of shape (num_examples, num_context).

    Raises:
        ValueError: fewer than ``num_context + 1`` examples, or ``num_context`` < 1.

    >>> draws = context_draws(5, 2, seed=0)
    >>> draws.shape, all(i not in row for i, row in enumerate(draws))
    ((5, 2), True)
    """
    if num_context < 1:
        raise ValueError(f"num_context must be at least 1, got {num_context}")
    if num_examples < num_context + 1:
        raise ValueError(
            f"{num_examples} examples are too few for {num_context} in-context example(s) each: "
            f"CoDeC needs at least {num_context + 1}"
        )
    draws = np.empty((num_examples, num_context), dtype=np.int64)
    for index in range(num_examples):
        rng = np.random.default_rng([seed, index])
        others = rng.choice(num_examples - 1, size=num_context, replace=False)
        draws[index] = others + (others >= index)  # skip the example itself
    return draws
