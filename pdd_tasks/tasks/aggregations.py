"""Dataset-level metrics as lm-eval aggregations.

Each receives the per-text ``(score, label)`` pairs a pdd task's ``process_results`` produced
(label 1 = member, higher score = more likely a member) and returns one number. TPR at a fixed FPR
uses the strict convention of the Min-K% and DC-PDD reference code (largest TPR with FPR < the
target), which the metric names state with ``<``.
"""

from __future__ import annotations

import numpy as np

from pdd_metrics import (
    calibrate_threshold,
    dataset_inference_test,
    flag_members,
    roc_auc,
    suspect_vs_reference_test,
    tpr_at_fpr,
)


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


# -- unlabelled texts (pdd_custom without labels): items are (score, is_suspect) pairs ------------


def _split_roles(items) -> tuple[list[float], list[float]]:
    """Scores of the suspect texts (is_suspect = 1) and of the known non-members (0)."""
    suspect = [score for score, is_suspect in items if is_suspect]
    reference = [score for score, is_suspect in items if not is_suspect]
    return suspect, reference


def suspect_mean(items) -> float:
    """Mean score of the suspect texts (no reference set: nothing to decide against)."""
    suspect, _ = _split_roles(items)
    return float(np.mean(suspect))


def contamination_aggregations(target_fpr: float) -> dict:
    """``name -> (aggregation, higher_is_better)`` for suspect texts against known non-members."""

    def threshold(items) -> float:
        return calibrate_threshold(_split_roles(items)[1], target_fpr)

    def flagged(items) -> float:
        suspect, reference = _split_roles(items)
        return float(np.mean(flag_members(suspect, calibrate_threshold(reference, target_fpr))))

    def suspect_auc(items) -> float:
        return suspect_vs_reference_test(*_split_roles(items)).auc

    def pvalue(items) -> float:
        return suspect_vs_reference_test(*_split_roles(items)).p_value

    return {
        "threshold": (threshold, True),
        "flagged": (flagged, True),
        "suspect_auc": (suspect_auc, True),
        "pvalue": (pvalue, False),
    }


# -- dataset inference (pdd_custom unlabelled with references): items are (features, is_suspect) -----


def dataset_inference_aggregations(seed: int) -> dict:
    """``name -> (aggregation, higher_is_better)`` of Maini et al.'s dataset inference
    (:func:`pdd_metrics.dataset_inference_test`); each item is (every method's score of a text,
    is_suspect)."""

    def result(items):
        suspect = [features for features, is_suspect in items if is_suspect]
        reference = [features for features, is_suspect in items if not is_suspect]
        return dataset_inference_test(suspect, reference, seed=seed)

    return {
        "dataset_inference_pvalue": (lambda items: result(items).p_value, False),
        "dataset_inference_t": (lambda items: result(items).t_statistic, True),
    }
