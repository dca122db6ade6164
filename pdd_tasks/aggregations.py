"""Dataset-level metrics as lm-eval aggregations.

Each receives the per-text ``(score, label)`` pairs a pdd task's ``process_results`` produced
(label 1 = member, higher score = more likely a member) and returns one number. TPR at a fixed FPR
uses the strict convention of the Min-K% and DC-PDD reference code (largest TPR with FPR < the
target), which the metric names state with ``<``.
"""

from __future__ import annotations

from pdd_metrics import roc_auc, tpr_at_fpr


def _unzip(items):
    scores, labels = zip(*items, strict=True)
    return list(scores), list(labels)


def auc(items) -> float:
    return roc_auc(*_unzip(items))


def tpr_at_fpr_below_5pct(items) -> float:
    return tpr_at_fpr(*_unzip(items), max_fpr=0.05, rule="strict")


def tpr_at_fpr_below_1pct(items) -> float:
    return tpr_at_fpr(*_unzip(items), max_fpr=0.01, rule="strict")


AGGREGATIONS = {
    "auc": auc,
    "tpr@fpr<5%": tpr_at_fpr_below_5pct,
    "tpr@fpr<1%": tpr_at_fpr_below_1pct,
}
