"""Dataset-level metrics as lm-eval aggregations.

Each receives the per-text ``(score, label)`` pairs a pdd task's ``process_results`` produced
(label 1 = member, higher score = more likely a member) and returns one number. TPR at a fixed FPR
uses the strict convention of the Min-K% and DC-PDD reference code (largest TPR with FPR < the
target), which the metric names state with ``<``.
"""

from __future__ import annotations

import logging
import math

import numpy as np

from pdd_metrics import calibrate_threshold, flag_members, roc_auc, suspect_vs_reference_test, tpr_at_fpr
from pdd_tasks.errors import UserError


logger = logging.getLogger(__name__)

#: Below this many texts of a class, an AUC is reported with a warning about its standard error.
FEW_TEXTS = 30
_warned: set[tuple] = set()


def _warn_once(key: tuple, message: str, *args) -> None:
    if key not in _warned:
        _warned.add(key)
        logger.warning(message, *args)


def null_auc_standard_error(members: int, non_members: int) -> float:
    """Standard error of an AUC of 0.5 from ``members`` and ``non_members`` texts (the Mann-Whitney
    U statistic's null variance, Hanley & McNeil 1982): sqrt((m + n + 1) / (12 m n))."""
    return math.sqrt((members + non_members + 1) / (12 * members * non_members))


def _unzip(items):
    scores, labels = zip(*items, strict=True)
    return list(scores), list(labels)


def _warn_sample_size(labels: list[int], max_fpr: float | None = None) -> None:
    """Say how little a handful of texts can tell (once per class sizes and metric kind)."""
    members = sum(1 for label in labels if label == 1)
    non_members = len(labels) - members
    if 0 < min(members, non_members) < FEW_TEXTS:
        _warn_once(
            ("auc", members, non_members),
            "AUC from %d members and %d non-members only: its standard error is about %.2f (at AUC 0.5), so "
            "differences smaller than about %.2f between methods are noise. Score more texts (at least %d per class).",
            members,
            non_members,
            null_auc_standard_error(members, non_members),
            2 * null_auc_standard_error(members, non_members),
            FEW_TEXTS,
        )
    if max_fpr is not None and 0 < non_members < math.ceil(1 / max_fpr):
        _warn_once(
            ("tpr", max_fpr, non_members),
            "TPR@FPR<%g%% from %d non-members: FPR < %g%% allows no false positive, so it is the share of "
            "members scored above every non-member. It needs at least %d non-members to mean what its name says.",
            100 * max_fpr,
            non_members,
            100 * max_fpr,
            math.ceil(1 / max_fpr),
        )


def auc(items) -> float:
    scores, labels = _unzip(items)
    _warn_sample_size(labels)
    return roc_auc(scores, labels)


def tpr_at_fpr_below_5pct(items) -> float:
    scores, labels = _unzip(items)
    _warn_sample_size(labels, 0.05)
    return tpr_at_fpr(scores, labels, max_fpr=0.05, rule="strict")


def tpr_at_fpr_below_1pct(items) -> float:
    scores, labels = _unzip(items)
    _warn_sample_size(labels, 0.01)
    return tpr_at_fpr(scores, labels, max_fpr=0.01, rule="strict")


AGGREGATIONS = {
    "auc": auc,
    "tpr@fpr<5%": tpr_at_fpr_below_5pct,
    "tpr@fpr<1%": tpr_at_fpr_below_1pct,
}


# -- unlabelled texts (pdd_custom without labels): items are (score, is_suspect) pairs ------------


class TooFewReferenceTexts(UserError):
    """The reference set of an unlabelled run is too small to calibrate a threshold on."""


def _split_roles(items, target_fpr: float | None = None) -> tuple[list[float], list[float]]:
    """Scores of the suspect texts (is_suspect = 1) and of the known non-members (0); with
    ``target_fpr``, the reference set is checked (none or one text is an error; fewer than
    1 / target_fpr a warning)."""
    suspect = [score for score, is_suspect in items if is_suspect]
    reference = [score for score, is_suspect in items if not is_suspect]
    if target_fpr is not None:
        _check_reference_size(len(suspect), len(reference), target_fpr)
    return suspect, reference


def _check_reference_size(suspects: int, references: int, target_fpr: float) -> None:
    if references < 2:
        raise TooFewReferenceTexts(
            f"{references} reference text(s) were scored (and {suspects} suspect texts): a threshold and a rank "
            f"test need at least 2 known non-members, and {math.ceil(1 / target_fpr)} for target_fpr={target_fpr}. "
            f"Give more texts in reference_files; with --limit, note that the reference texts come after the "
            f"suspect texts, so a --limit below the number of suspect texts leaves none (drop --limit)."
        )
    if references < math.ceil(1 / target_fpr):
        _warn_once(
            ("reference", references, target_fpr),
            "only %d reference texts were scored (--limit?): too few for target_fpr=%s; the threshold is the "
            "highest reference score (FPR 0 on the reference set). Give at least %d known non-members.",
            references,
            target_fpr,
            math.ceil(1 / target_fpr),
        )


def suspect_mean(items) -> float:
    """Mean score of the suspect texts (no reference set: nothing to decide against)."""
    suspect, _ = _split_roles(items)
    return float(np.mean(suspect))


def contamination_aggregations(target_fpr: float) -> dict:
    """``name -> (aggregation, higher_is_better)`` for suspect texts against known non-members."""

    def threshold(items) -> float:
        return calibrate_threshold(_split_roles(items, target_fpr)[1], target_fpr)

    def flagged(items) -> float:
        suspect, reference = _split_roles(items, target_fpr)
        return float(np.mean(flag_members(suspect, calibrate_threshold(reference, target_fpr))))

    def suspect_auc(items) -> float:
        return suspect_vs_reference_test(*_split_roles(items, target_fpr)).auc

    def pvalue(items) -> float:
        return suspect_vs_reference_test(*_split_roles(items, target_fpr)).p_value

    return {
        "threshold": (threshold, True),
        "flagged": (flagged, True),
        "suspect_auc": (suspect_auc, True),
        "pvalue": (pvalue, False),
    }
