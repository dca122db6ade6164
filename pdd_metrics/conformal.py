"""Identification of member texts with a controlled false discovery rate: conformal p-values from
known non-members, then Benjamini-Hochberg (PTDI, Liu et al., ICML 2026, arXiv 2510.09717).

A threshold calibrated on known non-members (:func:`pdd_metrics.calibrate_threshold`) bounds the
share of *non-members* flagged, not the share of *flagged texts* that are non-members. PTDI
("Provable Training Data Identification") bounds the latter:

1. :func:`conformal_p_values`: each suspect text's score is ranked among the scores of a reference
   set of known non-members; under the null hypothesis "this text is a non-member", and with the
   reference texts exchangeable with the non-member suspects, the p-value is super-uniform
   (P(p <= u) <= u for every u) whatever the score's distribution.
2. :func:`benjamini_hochberg`: the step-up procedure on those p-values identifies a set of texts
   whose expected share of non-members (the false discovery rate, which PTDI calls the false
   identification rate) is at most the target. Conformal p-values sharing one reference set are
   positively dependent (PRDS, Bates et al. 2023, Ann. Statist. 51(1), "Testing for outliers with
   conformal p-values"), under which BH keeps its guarantee.

Where this differs from the paper: PTDI also estimates the share pi of members among the suspects
(v1: a "subtraction" estimator; v2: a jackknife-corrected Beta boundary estimator) and scales the
p-values by it before BH, which raises power when many suspects are members. That step is left
out here (the scale factor is 1, i.e. pi estimated as 0): BH on unscaled conformal p-values still
keeps FDR <= (1 - pi) * q <= q, at some loss of power when pi is large.

Scores are oriented higher = more likely a member, as every score of :mod:`pdd_metrics.methods`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .reference_decisions import _finite_1d


__all__ = ["Identification", "benjamini_hochberg", "conformal_p_values", "identify_members"]


def conformal_p_values(scores, reference_scores) -> np.ndarray:
    """Conformal p-value of each score against the scores of known non-members.

    p_j = (1 + #{i : r_i >= s_j}) / (n + 1), where r_1..r_n are the reference scores and s_j the
    score of suspect text j: the marginal conformal p-value of Bates et al. (2023, Sec. 2) with a
    high score as the "outlier" (member) direction, as PTDI computes it from known unseen data. A
    reference score tied with s_j counts against the text (ties make p larger, never smaller), so
    the p-value stays valid with tied scores. The smallest possible value is 1 / (n + 1).

    Args:
        scores: shape (m,), the suspect texts' scores, higher = more likely a member.
        reference_scores: shape (n,), scores of known non-members by the same model and method.

    Returns:
        shape (m,) float64, each in [1 / (n + 1), 1].

    >>> conformal_p_values([0.5, 2.0, 9.0], [1.0, 2.0, 3.0]).tolist()
    [1.0, 0.75, 0.25]
    """
    suspect = _finite_1d("scores", scores)
    reference = np.sort(_finite_1d("reference_scores", reference_scores))
    at_least = reference.size - np.searchsorted(reference, suspect, side="left")  # #{r_i >= s_j}
    return (1.0 + at_least) / (reference.size + 1.0)


def _check_fdr(target_fdr) -> float:
    if isinstance(target_fdr, bool) or not isinstance(target_fdr, (int, float)) or not 0 < target_fdr < 1:
        raise ValueError(f"target_fdr={target_fdr!r}: expected a rate in (0, 1), e.g. 0.1")
    return float(target_fdr)


def benjamini_hochberg(p_values, target_fdr: float) -> np.ndarray:
    """Which hypotheses the Benjamini-Hochberg step-up procedure rejects at false discovery rate q.

    With the m p-values sorted, p_(1) <= ... <= p_(m), k = max{i : p_(i) <= i q / m}, and the k
    smallest are rejected (Benjamini & Hochberg 1995, J. R. Statist. Soc. B 57(1), Sec. 3); none
    where no i qualifies. Step-up: a p-value above its own line i q / m is still rejected when a
    larger one is below its line. Tied p-values are all rejected or all kept.

    Args:
        p_values: shape (m,), each in [0, 1].
        target_fdr: q, in (0, 1).

    Returns:
        shape (m,) bool, True where rejected (here: identified as a member).

    >>> benjamini_hochberg([0.01, 0.04, 0.03, 0.5], 0.1).tolist()  # lines 0.025, 0.05, 0.075, 0.1
    [True, True, True, False]
    >>> benjamini_hochberg([0.03, 0.04], 0.05).tolist()  # 0.03 > 0.025, but 0.04 <= 0.05: both (step-up)
    [True, True]
    >>> benjamini_hochberg([0.02, 0.06], 0.05).tolist()  # 0.02 <= 0.025, 0.06 > 0.05: the first only
    [True, False]
    """
    p = _finite_1d("p_values", p_values)
    q = _check_fdr(target_fdr)
    if np.any((p < 0) | (p > 1)):
        raise ValueError("p_values: every p-value must be in [0, 1]")
    m = p.size
    ordered = np.sort(p)
    below = np.flatnonzero(ordered <= q * np.arange(1, m + 1) / m)
    if below.size == 0:
        return np.zeros(m, dtype=bool)
    return p <= ordered[below[-1]]


@dataclass(frozen=True)
class Identification:
    """Suspect texts identified as members at a target false discovery rate (PTDI without the
    scaling by an estimated member share; see the module docstring).

    Attributes:
        p_values: shape (m,), each suspect text's conformal p-value (:func:`conformal_p_values`).
        identified: shape (m,) bool, True where Benjamini-Hochberg at ``target_fdr`` identifies the
            text as a member.
        target_fdr: q, the bound on the expected share of non-members among the identified texts.
        n_reference: how many known non-members calibrated the p-values.
    """

    p_values: np.ndarray
    identified: np.ndarray
    target_fdr: float
    n_reference: int

    @property
    def count(self) -> int:
        """How many suspect texts are identified."""
        return int(self.identified.sum())


def identify_members(suspect_scores, reference_scores, target_fdr: float) -> Identification:
    """Conformal p-values of the suspects against known non-members, then Benjamini-Hochberg at
    ``target_fdr``: the expected share of non-members among the identified texts is at most
    ``target_fdr`` if the reference texts are exchangeable with the non-member suspects (same
    source, length, language and period; the score not fitted on the reference texts).

    With n reference texts no p-value is below 1 / (n + 1), so nothing can be identified where
    1 / (n + 1) > target_fdr (n < 1 / target_fdr - 1).

    >>> result = identify_members([5.0, 6.0, 0.0], [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5], 0.25)
    >>> result.p_values.tolist(), result.identified.tolist()
    ([0.1, 0.1, 1.0], [True, True, False])
    """
    p_values = conformal_p_values(suspect_scores, reference_scores)
    q = _check_fdr(target_fdr)
    return Identification(
        p_values=p_values,
        identified=benjamini_hochberg(p_values, q),
        target_fdr=q,
        n_reference=int(np.size(reference_scores)),
    )
