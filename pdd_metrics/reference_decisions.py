"""Decisions on unlabelled texts: a threshold calibrated on known non-members, and a dataset test.

Without labels a score alone says nothing: its scale depends on the model, the method and the kind
of text. Both functions here therefore compare the suspect texts' scores with those of a
**reference set of known non-members of the same kind** (same source, length, language and time of
writing, but certainly not in the training data), scored by the same model and method.

- :func:`calibrate_threshold` picks the threshold tau of DC-PDD's decision rule (Zhang et al.
  2024, Eq. 9: member iff score >= tau) so that the false positive rate on the reference set is at
  most a target; :func:`flag_members` applies it.
- :func:`suspect_vs_reference_test` answers "was this set, as a whole, in the training data?" with a
  one-sided Mann-Whitney U test of the suspect scores against the reference scores.

Scores are oriented higher = more likely a member, as every score of :mod:`pdd_metrics.methods`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import mannwhitneyu

from ._checks import finite_vector


__all__ = ["RankTestResult", "calibrate_threshold", "flag_members", "suspect_vs_reference_test"]


def _finite_1d(name: str, values) -> np.ndarray:
    """``values`` (one score per document) as a non-empty, finite, 1-D float64 array."""
    shape = "{name}: expected a non-empty 1-D array of scores, got shape {shape}"
    return finite_vector(
        values,
        name,
        not_1d=shape,
        empty=shape,
        non_finite="{name}: {count} of {size} scores are NaN or infinite; every score must be finite",
    )


def calibrate_threshold(reference_scores, target_fpr: float) -> float:
    """Threshold tau such that at most a ``target_fpr`` share of known non-members score above it.

    Decision rule (DC-PDD Eq. 9, with the boundary made explicit): a text is flagged as a member iff
    its score is **strictly greater** than tau. With n reference scores and
    m = floor(target_fpr * n), tau is the (m+1)-th highest reference score, so at most m reference
    texts (FPR <= target_fpr on the reference set) are flagged; fewer where scores tie at tau.
    Where n < 1 / target_fpr, m = 0 and tau is the highest reference score: nothing scoring at or
    below every known non-member is flagged (FPR 0 on the reference set).

    Args:
        reference_scores: shape (n,), scores of known non-members, higher = more likely a member.
        target_fpr: the largest acceptable false positive rate, in [0, 1).

    Returns:
        tau as a float (one of the reference scores).

    >>> calibrate_threshold([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0], 0.2)
    0.8
    >>> calibrate_threshold([0.1, 0.2, 0.3], 0.05)  # too few references for 5%: FPR 0
    0.3
    """
    scores = _finite_1d("reference_scores", reference_scores)
    if not isinstance(target_fpr, (int, float)) or not 0 <= target_fpr < 1:
        raise ValueError(f"target_fpr={target_fpr!r}: expected a rate in [0, 1), e.g. 0.05")
    allowed = math.floor(target_fpr * scores.size + 1e-9)  # 1e-9: 0.29 * 100 is 28.999...
    descending = np.sort(scores)[::-1]
    return float(descending[min(allowed, scores.size - 1)])


def flag_members(scores, threshold: float) -> np.ndarray:
    """Boolean array, True where a score is strictly greater than ``threshold`` (flagged as member).

    >>> flag_members([0.5, 0.8, 0.9], 0.8).tolist()
    [False, False, True]
    """
    return _finite_1d("scores", scores) > float(threshold)


@dataclass(frozen=True)
class RankTestResult:
    """One-sided Mann-Whitney U test of suspect scores against reference (non-member) scores.

    Attributes:
        u_statistic: U of the suspect sample (number of (suspect, reference) pairs where the suspect
            scores higher, ties counted 1/2).
        auc: U / (n_suspect * n_reference), the probability that a random suspect text outscores a
            random reference text (0.5 = no difference; the AUC of suspect vs reference).
        p_value: probability of a U at least this large if both sets come from one distribution.
        n_suspect, n_reference: sample sizes.
    """

    u_statistic: float
    auc: float
    p_value: float
    n_suspect: int
    n_reference: int


def suspect_vs_reference_test(suspect_scores, reference_scores) -> RankTestResult:
    """Are the suspect scores higher than the scores of known non-members? (one-sided U test)

    Null hypothesis: suspect and reference scores come from the same distribution (the suspect set
    was no more seen in training than the reference set). Alternative: suspect scores are
    stochastically greater. The Mann-Whitney U test (scipy, ``alternative="greater"``, exact for
    small samples without ties, else the normal approximation with tie correction) is used because
    it needs no assumption about the shape or scale of a method's scores, which differ from method
    to method and model to model, and its statistic is the AUC of suspect vs reference.

    The test is only valid if the reference set is of the same kind as the suspect set: a reference
    set of another domain, length or period gives small p-values without any contamination. Texts
    are assumed independent.

    >>> result = suspect_vs_reference_test([3.0, 4.0, 5.0], [0.0, 1.0, 2.0])
    >>> result.auc, round(result.p_value, 4)
    (1.0, 0.05)
    """
    suspect = _finite_1d("suspect_scores", suspect_scores)
    reference = _finite_1d("reference_scores", reference_scores)
    result = mannwhitneyu(suspect, reference, alternative="greater")
    u_statistic = float(result.statistic)
    return RankTestResult(
        u_statistic=u_statistic,
        auc=u_statistic / (suspect.size * reference.size),
        p_value=float(result.pvalue),
        n_suspect=int(suspect.size),
        n_reference=int(reference.size),
    )
