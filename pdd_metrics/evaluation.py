"""Corpus-level metrics for pretraining-data detection: ROC AUC and TPR at a fixed FPR.

Inputs are one score per document (higher = more likely a member, as every score in
:mod:`pdd_metrics.methods`) and one label per document, **members = 1 (positive class),
non-members = 0**. A single-class dataset has no AUC or TPR: it raises :class:`OneClassError`
instead of returning a number. Non-finite scores raise; they are never dropped silently.
"""

from __future__ import annotations

import numpy as np
from sklearn.metrics import auc, roc_curve


__all__ = ["FPR_RULES", "OneClassError", "roc_auc", "tpr_at_fpr", "validate_scores_and_labels"]

#: Supported boundary rules of :func:`tpr_at_fpr`: "strict" (FPR < max_fpr), "inclusive" (<=).
FPR_RULES = ("strict", "inclusive")


class OneClassError(ValueError):
    """The labels contain only members or only non-members, so AUC and TPR@FPR are undefined."""


def validate_scores_and_labels(scores: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Check one score and one label per document; return them as (float64, int64) 1-D arrays.

    Requires: same length, at least one document, labels only 0 (non-member) or 1 (member),
    every score finite, and both classes present (else :class:`OneClassError`).

    Args:
        scores: shape (n,), one score per document, higher = more likely a member.
        labels: shape (n,), 1 = member, 0 = non-member (bool or numbers equal to 0/1).

    >>> s, y = validate_scores_and_labels([0.3, 0.1], [True, False])
    >>> s.dtype, y.tolist()
    (dtype('float64'), [1, 0])
    """
    try:
        scores_arr = np.asarray(scores, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"scores must be numbers, one per document; could not convert ({exc})") from exc
    labels_arr = np.asarray(labels)
    if scores_arr.ndim != 1 or labels_arr.ndim != 1:
        raise ValueError(
            f"scores and labels must be 1-D (one value per document); got shapes {scores_arr.shape} "
            f"and {labels_arr.shape}"
        )
    if scores_arr.size != labels_arr.size:
        raise ValueError(
            f"got {scores_arr.size} scores but {labels_arr.size} labels; expected one score per "
            "labelled document -- check that no document was skipped when scoring"
        )
    if scores_arr.size == 0:
        raise ValueError("got 0 documents; AUC and TPR@FPR need scored documents of both classes")
    if labels_arr.dtype.kind not in "biuf" or not np.isin(labels_arr, (0, 1)).all():
        unexpected = sorted({repr(v) for v in labels_arr.tolist() if v not in (0, 1)})[:5]
        raise ValueError(
            f"labels must be 0 (non-member) or 1 (member); got other values {', '.join(unexpected)} "
            "-- map the dataset's labels to 1 = member, 0 = non-member"
        )
    labels_arr = labels_arr.astype(np.int64)
    n_bad = int(np.count_nonzero(~np.isfinite(scores_arr)))
    if n_bad:
        raise ValueError(
            f"{n_bad} of {scores_arr.size} scores are not finite (NaN or inf); every document needs a "
            "finite score and none is dropped silently -- find out why the method failed on them"
        )
    n_members = int(labels_arr.sum())
    n_non_members = int(labels_arr.size - n_members)
    if n_members == 0 or n_non_members == 0:
        raise OneClassError(
            f"labels have a single class: {n_members} members (label 1) and {n_non_members} "
            "non-members (label 0); AUC and TPR@FPR are undefined with one class -- add documents "
            "of the missing class (if --limit was used, use a larger limit: the first rows of a "
            "dataset may all share one label)"
        )
    return scores_arr, labels_arr


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve, members (label 1) as the positive class.

    ``sklearn.metrics.roc_curve`` then trapezoidal ``sklearn.metrics.auc``: 1.0 = every member
    scores above every non-member, 0.5 = chance; tied scores count one half.

    Args:
        scores: shape (n,), higher = more likely a member.
        labels: shape (n,), 1 = member, 0 = non-member; both classes present.

    >>> roc_auc([0.9, 0.4, 0.5, 0.1], [1, 1, 0, 0])  # 3 of 4 member/non-member pairs ordered
    0.75
    """
    scores_arr, labels_arr = validate_scores_and_labels(scores, labels)
    fpr, tpr, _ = roc_curve(labels_arr, scores_arr, pos_label=1)
    return float(auc(fpr, tpr))


def tpr_at_fpr(scores: np.ndarray, labels: np.ndarray, max_fpr: float = 0.05, rule: str = "strict") -> float:
    """True-positive rate at a false-positive-rate budget: the largest TPR of a threshold whose FPR
    is below ``max_fpr``.

    rule "strict" (default): ``tpr[np.where(fpr < max_fpr)[0][-1]]``, the convention of the Min-K%
    and DC-PDD reference code (the DC-PDD paper's TPR@5%FPR); "inclusive": ``fpr <= max_fpr``, the
    Min-K%++ code. roc_curve's first point (fpr = 0, tpr = 0, threshold +inf) makes the selection
    non-empty for any max_fpr > 0. All thresholds are kept (``drop_intermediate=False``): the
    reference code's default drop can remove a threshold lying on a straight diagonal stretch of
    the curve, which changes the result only when scores are tied; without ties both agree.

    Args:
        scores: shape (n,), higher = more likely a member.
        labels: shape (n,), 1 = member, 0 = non-member; both classes present.
        max_fpr: FPR budget in (0, 1]; default 0.05 (TPR@5%FPR of the DC-PDD paper).
        rule: one of :data:`FPR_RULES`.

    >>> scores = [0.9, 0.8, 0.7, 0.6] + [0.75] + [0.1] * 19  # 4 members, 20 non-members
    >>> labels = [1, 1, 1, 1] + [0] * 20
    >>> tpr_at_fpr(scores, labels, 0.05, "strict"), tpr_at_fpr(scores, labels, 0.05, "inclusive")
    (0.5, 1.0)
    """
    if rule not in FPR_RULES:
        raise ValueError(f"rule must be one of {FPR_RULES}; got {rule!r}")
    is_number = isinstance(max_fpr, (int, float, np.integer, np.floating))
    if isinstance(max_fpr, bool) or not is_number or not 0.0 < max_fpr <= 1.0:
        raise ValueError(f"max_fpr must be a false-positive rate in (0, 1], e.g. 0.05 for 5%; got {max_fpr!r}")
    scores_arr, labels_arr = validate_scores_and_labels(scores, labels)
    fpr, tpr, _ = roc_curve(labels_arr, scores_arr, pos_label=1, drop_intermediate=False)
    within = fpr < max_fpr if rule == "strict" else fpr <= max_fpr
    return float(tpr[np.where(within)[0][-1]])
