"""A group's dataset-level test from its leaves' results: no new requests.

A group of benchmarks (lm-eval's ``bbh``, ``mmlu``, ``leaderboard_gpqa``) is tested leaf by leaf, each
leaf its own dataset. A small leaf (BBH's 250 examples, GPQA-diamond's 198) gives a test little power
alone; the group's question, "was any of these seen?", is answered from the leaves' own results:

- **CoDeC, pooled** (:func:`pooled_codec`). Each example's in-context example was already drawn from
  its own leaf, so each example's drop indicator is the one the leaf's test counted; the group's
  score is the share of drops over all the group's examples, sum_i round(S_i n_i) / sum_i n_i, and its
  test the one-sided binomial test of the summed drops against the leaf's null (the same null: a
  leaf that was not seen drops no more often than unseen data of its kind, so neither does the pool),
  with the Wilson interval of the pooled count (:func:`pdd_metrics.codec.wilson_bounds`, as a leaf's).
  Pooling is most powerful where the leaves were seen alike; one seen leaf of many is diluted by the
  others' drops (it keeps its own row).
- **p-values, combined by Fisher's method** (:func:`fisher_combined_pvalue`; Fisher, *Statistical
  Methods for Research Workers*, 4th ed. 1932, Sec. 21.1): X = -2 sum_i log p_i, referred to
  chi-squared with 2k degrees of freedom. Exact where the k p-values are independent and uniform
  under the null: the leaves are disjoint datasets, each scored with its own seeded permutations,
  and the exchangeability test's p-value was measured uniform at every setting up to the default
  50 shards x 1 permutation (docs/controls-examples.md, "The exchangeability test's level at few
  permutations": 0.047-0.057 at alpha 0.05). A p-value that is conservative (stochastically larger
  than uniform, as a discrete one is) keeps the combination at or below its level.

  Why Fisher's, among the combinations exact under independence (Loughin 2004, "A systematic
  comparison of methods for combining p-values from independent tests", Comput. Stat. Data Anal.
  47:467, compares them): **Stouffer's** sum of z-scores is the most powerful where the evidence is
  spread evenly over the leaves and weak where it sits in a few, and Fisher's the reverse, with a
  better balance between the two cases; the **Cauchy combination** (Liu and Xie 2020, JASA 115:393)
  is the most powerful for one strong leaf among many and valid under dependence, but a leaf's
  p-value of 1 (the exchangeability test's "the order changes nothing") maps to minus infinity and
  makes the group's p-value 1 whatever the other leaves say (and one near 1 pulls it up almost as
  much). Fisher's takes a p of 1 as no evidence (a zero term) and a p of 0 as decisive. The group's
  test is for what the leaves' own rows miss, evidence spread thinly over many small leaves; one
  strongly seen leaf is caught by its own row, which stays in the same Holm family (in a group of 24,
  one leaf at p = 1e-6 with the others at 0.5 gives a Fisher p of 0.12: diluted).

Measured level and power of both: ``benchmarks/group_level.py`` (docs/controls.md, "A verdict per
group: level and power").
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from scipy.stats import chi2

from .codec import wilson_bounds


__all__ = ["fisher_combined_pvalue", "pooled_codec", "pooled_drops"]


def fisher_combined_pvalue(p_values: Iterable[float]) -> float:
    """Fisher's combined p-value of independent p-values (module docstring): P(chi2_{2k} >= -2 sum
    log p_i). A p-value of 0 gives 0, one of 1 adds nothing.

    >>> round(fisher_combined_pvalue([0.5]), 12), round(fisher_combined_pvalue([0.01, 0.9, 0.8, 0.7]), 4)
    (0.5, 0.2266)
    >>> fisher_combined_pvalue([0.0, 1.0]), fisher_combined_pvalue([1.0, 1.0])
    (0.0, 1.0)
    """
    values = [float(p) for p in p_values]
    if not values:
        raise ValueError("fisher_combined_pvalue needs at least one p-value")
    bad = [p for p in values if not 0 <= p <= 1]  # NaN fails this too
    if bad:
        raise ValueError(f"p-values must be in [0, 1], got {bad[0]!r}")
    if min(values) == 0:
        return 0.0
    statistic = -2.0 * math.fsum(math.log(p) for p in values)
    return float(chi2.sf(statistic, 2 * len(values)))


def pooled_drops(counts: Iterable[tuple[int, int]]) -> tuple[int, int]:
    """The summed ``(drops, examples)`` of several datasets' CoDeC counts.

    >>> pooled_drops([(240, 250), (190, 198)])
    (430, 448)
    """
    drops = examples = 0
    for leaf_drops, leaf_examples in counts:
        if not 0 <= leaf_drops <= leaf_examples or leaf_examples < 1:
            raise ValueError(f"expected 0 <= drops <= examples and examples >= 1, got ({leaf_drops}, {leaf_examples})")
        drops, examples = drops + int(leaf_drops), examples + int(leaf_examples)
    if examples == 0:
        raise ValueError("pooled_drops needs at least one dataset's counts")
    return drops, examples


def pooled_codec(leaves: Iterable[tuple[float, int]], confidence: float = 0.95) -> tuple[float, float, float, int]:
    """The CoDeC score of a group from its leaves' ``(score, examples)``: each leaf's drops are
    round(score x examples) (its score is drops / examples); returns (pooled score, the Wilson interval's
    low and high ends at ``confidence``, pooled examples).

    >>> score, low, high, n = pooled_codec([(0.96, 250), (0.5, 198)])
    >>> round(score, 4), round(low, 3), round(high, 3), n
    (0.7567, 0.715, 0.794, 448)
    """
    drops, examples = pooled_drops((round(score * n), int(n)) for score, n in leaves)
    return (drops / examples, *wilson_bounds(drops, examples, confidence), examples)
