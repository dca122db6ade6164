"""The sharded likelihood comparison test of Oren et al. (ICLR 2024): was a benchmark seen in order?

Oren, Meister, Chatterji, Ladhak and Hashimoto, "Proving Test Set Contamination in Black Box
Language Models", ICLR 2024 (arXiv:2310.17623); reference code ``tatsu-lab/test_set_contamination``
(``compute_sharded_comparison_test.py``).

Idea (paper Sec. 3): if a benchmark's examples x_1..x_n are exchangeable (their published,
*canonical* order carries no information a model could know without having seen the file), then
without contamination the model's log-likelihood of the examples in the canonical order is
distributed like their log-likelihood in a random order. A model that saw the file in its canonical
order prefers that order.

The sharded test (paper Sec. 3.3, the "sharded likelihood comparison test"):

1. split the n examples into r shards of consecutive examples (:func:`shard_sizes`: the first
   ``n mod r`` shards get one more example, as the reference code);
2. in shard i, score the concatenation of its examples in the canonical order, log p(S_i), and in
   P random orders pi_1..pi_P, log p(pi_j(S_i));
3. s_i = log p(S_i) - (1/P) sum_j log p(pi_j(S_i)): under the null, E[s_i] = 0;
4. a one-sided one-sample t-test of the mean of s_1..s_r against 0 (H1: mean > 0).

The p-value of step 4 is asymptotically valid in the number of shards r (a t-test: a CLT over
shards), not exact; the exact permutation test of the paper (Sec. 3.2) needs far more permutations.

Every function here is pure NumPy/SciPy; the shards and requests are in :mod:`pdd_tasks.dataset_tests.exchangeability`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import t as student_t


__all__ = [
    "DEFAULT_NUM_SHARDS",
    "DEFAULT_PERMUTATIONS",
    "ExchangeabilityResult",
    "TooFewExamples",
    "shard_bounds",
    "shard_permutations",
    "shard_sizes",
    "sharded_comparison_test",
]

#: Defaults of the reference code (``num_shards=50``, ``permutations_per_shard=250``).
DEFAULT_NUM_SHARDS = 50
DEFAULT_PERMUTATIONS = 250

#: A shard of one example has a single order: nothing to compare.
MIN_EXAMPLES_PER_SHARD = 2


class TooFewExamples(ValueError):
    """The source has fewer examples than the shards need (at least 2 per shard)."""


def shard_sizes(num_examples: int, num_shards: int) -> list[int]:
    """Sizes of ``num_shards`` shards of consecutive examples, as the reference code splits them.

    Every shard gets ``num_examples // num_shards`` examples and the first ``num_examples %
    num_shards`` shards one more. Each shard needs at least 2 examples (one example has one order).

    Raises:
        TooFewExamples: fewer than ``2 * num_shards`` examples, or fewer than 2 shards.

    >>> shard_sizes(11, 3)
    [4, 4, 3]
    """
    if not isinstance(num_shards, int) or num_shards < 2:
        raise TooFewExamples(
            f"num_shards={num_shards!r}: the t-test over shards needs at least 2 shards "
            f"(the paper's default is {DEFAULT_NUM_SHARDS})."
        )
    needed = MIN_EXAMPLES_PER_SHARD * num_shards
    if num_examples < needed:
        most = num_examples // MIN_EXAMPLES_PER_SHARD
        fix = (
            f"lower num_shards to at most {most}, e.g. --metadata '{{\"num_shards\": {most}}}'"
            if most >= 2
            else "the test needs at least 4 examples"
        )
        raise TooFewExamples(
            f"{num_examples} examples are too few for {num_shards} shards: every shard needs at least "
            f"{MIN_EXAMPLES_PER_SHARD} examples ({needed} in all); {fix}. More shards give the t-test "
            f"more power, more examples per shard more signal per shard."
        )
    base, extra = divmod(num_examples, num_shards)
    return [base + 1 if index < extra else base for index in range(num_shards)]


def shard_bounds(num_examples: int, num_shards: int) -> list[tuple[int, int]]:
    """``(start, stop)`` indices of each shard into the canonical list of examples.

    >>> shard_bounds(11, 3)
    [(0, 4), (4, 8), (8, 11)]
    """
    stops = np.cumsum(shard_sizes(num_examples, num_shards)).tolist()
    return list(zip([0, *stops[:-1]], stops, strict=True))


def shard_permutations(shard_size: int, num_permutations: int, seed: int, shard_index: int) -> np.ndarray:
    """``num_permutations`` uniformly random orders of a shard, shape (P, shard_size).

    Drawn with replacement from all orders (the identity may occur, as in the reference code's
    ``random.sample``), from a generator seeded by ``(seed, shard_index)``: a shard's orders do not
    depend on how many shards are scored (``--limit``) or in which order.

    >>> shard_permutations(3, 2, seed=0, shard_index=0).shape
    (2, 3)
    """
    rng = np.random.default_rng([seed, shard_index])
    return np.stack([rng.permutation(shard_size) for _ in range(num_permutations)])


@dataclass(frozen=True)
class ExchangeabilityResult:
    """The sharded likelihood comparison test on r shards.

    Attributes:
        p_value: one-sided p-value of H1 "the canonical order is more likely than random orders".
        t_statistic: mean(s) / (std(s, ddof=1) / sqrt(r)), s_i = canonical - mean permuted
            log-likelihood of shard i (nats).
        mean_difference: mean(s) in nats: how much more likely (log) a shard is in its canonical order.
        num_shards: r.
    """

    p_value: float
    t_statistic: float
    mean_difference: float
    num_shards: int


def sharded_comparison_test(canonical_logprobs, permuted_logprobs) -> ExchangeabilityResult:
    """Oren et al.'s sharded likelihood comparison test from the shards' log-likelihoods.

    s_i = log p(S_i) - mean_j log p(pi_j(S_i)) per shard (paper Sec. 3.3); the statistic is the
    one-sample t statistic of s_1..s_r, t = mean(s) / (std(s) / sqrt(r)) with the sample standard
    deviation (ddof=1), and the p-value is P(T_{r-1} >= t) for Student's t with r-1 degrees of
    freedom (one-sided: only a preference *for* the canonical order is evidence of contamination).
    The reference code divides by ``np.std`` (ddof=0), which makes its t larger by a factor
    sqrt(r/(r-1)) (1.01 at its default r=50); here the textbook t-test is used.

    Where every s_i is 0 (the scores do not depend on the order at all), there is no evidence:
    t = 0 and p = 1.

    Args:
        canonical_logprobs: shape (r,), log-likelihood of each shard in its canonical order.
        permuted_logprobs: shape (r, P), log-likelihoods of each shard in P random orders.

    Returns:
        :class:`ExchangeabilityResult`.

    >>> result = sharded_comparison_test([-10.0, -12.0, -9.0], [[-11.0, -12.0], [-13.0, -13.5], [-9.5, -10.5]])
    >>> round(result.mean_difference, 4), round(result.t_statistic, 3), round(result.p_value, 4)
    (1.25, 8.66, 0.0065)
    """
    canonical = np.asarray(canonical_logprobs, dtype=np.float64)
    permuted = np.asarray(permuted_logprobs, dtype=np.float64)
    if canonical.ndim != 1 or canonical.size < 2:
        raise ValueError(f"canonical_logprobs: expected shape (r,) with r >= 2 shards, got {canonical.shape}")
    if permuted.ndim != 2 or permuted.shape[0] != canonical.size or permuted.shape[1] < 1:
        raise ValueError(
            f"permuted_logprobs: expected shape ({canonical.size}, P) with P >= 1 permutations, got {permuted.shape}"
        )
    if not (np.isfinite(canonical).all() and np.isfinite(permuted).all()):
        raise ValueError("log-likelihoods must be finite; a shard scored -inf or NaN")
    differences = canonical - permuted.mean(axis=1)
    r = differences.size
    mean = float(differences.mean())
    std = float(differences.std(ddof=1))
    if std == 0.0 and mean == 0.0:  # the scores do not depend on the order: no evidence
        return ExchangeabilityResult(p_value=1.0, t_statistic=0.0, mean_difference=0.0, num_shards=r)
    t_value = float(np.copysign(np.inf, mean)) if std == 0.0 else mean / (std / np.sqrt(r))
    p_value = float(student_t.sf(t_value, df=r - 1))
    return ExchangeabilityResult(p_value=p_value, t_statistic=float(t_value), mean_difference=mean, num_shards=r)
