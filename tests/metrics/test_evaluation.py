"""Corpus-level metrics of pdd_metrics.evaluation against sklearn, brute force and hand-made cases."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score, roc_curve

from pdd_metrics.evaluation import (
    FPR_RULES,
    OneClassError,
    roc_auc,
    tpr_at_fpr,
    validate_scores_and_labels,
)


def random_case(seed: int, n: int = 300, levels: int | None = 12) -> tuple[np.ndarray, np.ndarray]:
    """Labels 0/1 (both present) and scores that weakly separate them; ``levels`` distinct score
    values (many ties), or continuous scores when None."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    labels[:2] = [0, 1]
    scores = rng.normal(size=n) + 0.7 * labels
    if levels is not None:
        scores = np.round(scores * levels / 6)  # integers: ties within and across classes
    return scores, labels


def brute_force_tpr_at_fpr(scores, labels, max_fpr: float, inclusive: bool) -> float:
    """Max TPR over all thresholds t (predict member iff score >= t, t = +inf included) with
    FPR < max_fpr (or <= when inclusive)."""
    scores, labels = np.asarray(scores, float), np.asarray(labels)
    n_pos, n_neg = (labels == 1).sum(), (labels == 0).sum()
    best = 0.0  # t = +inf: nothing predicted a member, TPR = FPR = 0
    for t in np.unique(scores):
        predicted = scores >= t
        tpr = (predicted & (labels == 1)).sum() / n_pos
        fpr = (predicted & (labels == 0)).sum() / n_neg
        if (fpr <= max_fpr) if inclusive else (fpr < max_fpr):
            best = max(best, tpr)
    return best


# ---------------------------------------------------------------- AUC


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("levels", [3, 12, None])
def test_roc_auc_matches_sklearn(seed, levels):
    scores, labels = random_case(seed, levels=levels)
    assert roc_auc(scores, labels) == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)


def test_roc_auc_hand_made():
    assert roc_auc([3.0, 2.0, 1.0, 0.0], [1, 1, 0, 0]) == 1.0
    assert roc_auc([3.0, 2.0, 1.0, 0.0], [0, 0, 1, 1]) == 0.0
    assert roc_auc([1.0, 1.0, 1.0, 1.0], [0, 1, 0, 1]) == 0.5  # all tied: one half
    # pairs (member, non-member): (0.9, 0.5) (0.9, 0.1) (0.4, 0.1) ordered, (0.4, 0.5) not -> 3/4
    assert roc_auc([0.9, 0.4, 0.5, 0.1], [1, 1, 0, 0]) == 0.75
    assert type(roc_auc([0.9, 0.1], [1, 0])) is float


def test_roc_auc_members_are_the_positive_class():
    # members score higher -> AUC 1, whatever order the labels come in
    assert roc_auc([0.1, 0.9, 0.2, 0.8], [0, 1, 0, 1]) == 1.0
    assert roc_auc(np.array([0.1, 0.9]), np.array([False, True])) == 1.0


# ---------------------------------------------------------------- TPR at FPR


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("levels", [4, 12, None])
@pytest.mark.parametrize("max_fpr", [0.001, 0.01, 0.05, 0.1, 0.3, 1.0])
@pytest.mark.parametrize("rule", FPR_RULES)
def test_tpr_at_fpr_matches_brute_force(seed, levels, max_fpr, rule):
    scores, labels = random_case(seed, levels=levels)
    expected = brute_force_tpr_at_fpr(scores, labels, max_fpr, inclusive=rule == "inclusive")
    assert tpr_at_fpr(scores, labels, max_fpr, rule) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("n_neg", [20, 40, 100])
@pytest.mark.parametrize("seed", range(3))
def test_tpr_at_fpr_matches_brute_force_at_reachable_boundary(seed, n_neg):
    # with 20/40/100 non-members, FPR = 0.05 is exactly reachable
    rng = np.random.default_rng(seed)
    labels = np.r_[np.ones(30, int), np.zeros(n_neg, int)]
    scores = rng.integers(0, 15, labels.size) + 3 * labels
    for rule in FPR_RULES:
        expected = brute_force_tpr_at_fpr(scores, labels, 0.05, inclusive=rule == "inclusive")
        assert tpr_at_fpr(scores, labels, 0.05, rule) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("seed", range(10))
def test_strict_rule_equals_reference_expression_without_ties(seed):
    # the Min-K% / DC-PDD reference code: roc_curve with its defaults, tpr[np.where(fpr < 0.05)[0][-1]]
    scores, labels = random_case(seed, levels=None)
    fpr, tpr, _ = roc_curve(labels, scores)
    assert tpr_at_fpr(scores, labels) == tpr[np.where(fpr < 0.05)[0][-1]]


def test_strict_and_inclusive_differ_when_boundary_is_reachable():
    # 4 members, 20 non-members (one non-member step of FPR = 1/20 = 0.05).
    # threshold 0.8: TPR 2/4, FPR 0; threshold 0.75 adds the non-member: FPR 0.05;
    # thresholds 0.7 and 0.6 add the other members: TPR 4/4 at FPR 0.05.
    scores = [0.9, 0.8, 0.7, 0.6] + [0.75] + [0.1] * 19
    labels = [1, 1, 1, 1] + [0] * 20
    assert tpr_at_fpr(scores, labels, 0.05, rule="strict") == 0.5  # FPR < 0.05
    assert tpr_at_fpr(scores, labels, 0.05, rule="inclusive") == 1.0  # FPR <= 0.05
    assert tpr_at_fpr(scores, labels) == 0.5  # default rule is strict


def test_tied_diagonal_threshold_is_kept():
    # three tied (member, non-member) pairs, then 17 non-members: 3 members, 20 non-members.
    # ROC points (0, 0), (1/20, 1/3), (2/20, 2/3), (3/20, 3/3), (1, 1). (2/20, 2/3) lies midway on
    # a straight stretch and roc_curve's default drop_intermediate removes it; it is an achievable
    # threshold (score >= 3), so TPR at FPR < 0.15 is 2/3, not the 1/3 of the reference expression.
    scores = [4.0, 4.0, 3.0, 3.0, 2.0, 2.0] + [0.0] * 17
    labels = [1, 0, 1, 0, 1, 0] + [0] * 17
    assert brute_force_tpr_at_fpr(scores, labels, 0.15, inclusive=False) == pytest.approx(2 / 3)
    assert tpr_at_fpr(scores, labels, 0.15) == pytest.approx(2 / 3)
    fpr, tpr, _ = roc_curve(labels, scores)  # defaults, as in the reference code
    assert tpr[np.where(fpr < 0.15)[0][-1]] == pytest.approx(1 / 3)


def test_tpr_at_fpr_perfect_and_reversed():
    assert tpr_at_fpr([0.9, 0.8, 0.1, 0.2], [1, 1, 0, 0]) == 1.0
    assert tpr_at_fpr([0.1, 0.2, 0.9, 0.8], [1, 1, 0, 0]) == 0.0


def test_unknown_rule_lists_supported():
    with pytest.raises(ValueError, match=r"rule must be one of \('strict', 'inclusive'\); got 'interp'"):
        tpr_at_fpr([0.9, 0.1], [1, 0], rule="interp")


@pytest.mark.parametrize("max_fpr", [0, 0.0, -0.05, 5, 1.01, float("nan"), "0.05"])
def test_bad_max_fpr_raises(max_fpr):
    with pytest.raises(ValueError, match="max_fpr must be"):
        tpr_at_fpr([0.9, 0.1], [1, 0], max_fpr=max_fpr)


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize("metric", [roc_auc, tpr_at_fpr, validate_scores_and_labels])
def test_one_class_raises_with_counts(metric):
    with pytest.raises(OneClassError, match=r"3 members \(label 1\) and 0 non-members \(label 0\)") as info:
        metric([0.1, 0.2, 0.3], [1, 1, 1])
    assert "undefined" in str(info.value)
    assert "--limit" in str(info.value)
    with pytest.raises(OneClassError, match=r"0 members \(label 1\) and 2 non-members \(label 0\)"):
        metric([0.1, 0.2], [0, 0])


def test_one_class_error_is_a_value_error():
    assert issubclass(OneClassError, ValueError)


@pytest.mark.parametrize("metric", [roc_auc, tpr_at_fpr])
def test_non_finite_scores_raise_with_count(metric):
    with pytest.raises(ValueError, match="2 of 5 scores are not finite"):
        metric([0.1, np.nan, 0.3, np.inf, 0.5], [1, 0, 1, 0, 1])
    with pytest.raises(ValueError, match="1 of 3 scores are not finite"):
        metric([0.1, -np.inf, 0.3], [1, 0, 1])


@pytest.mark.parametrize("labels", [[0, 1, 2], [-1, 1, 0], [0, 1, 0.5], ["0", "1", "1"], [0, 1, np.nan]])
def test_labels_outside_zero_one_raise(labels):
    with pytest.raises(ValueError, match=r"labels must be 0 \(non-member\) or 1 \(member\)"):
        roc_auc([0.1, 0.2, 0.3], labels)


def test_length_mismatch_and_empty_raise():
    with pytest.raises(ValueError, match="got 3 scores but 2 labels"):
        roc_auc([0.1, 0.2, 0.3], [0, 1])
    with pytest.raises(ValueError, match="got 0 documents"):
        roc_auc([], [])


def test_validate_returns_float_and_int_arrays():
    scores, labels = validate_scores_and_labels([1, 2, 3], [True, False, 1.0])
    assert scores.dtype == np.float64
    assert labels.dtype == np.int64
    assert labels.tolist() == [1, 0, 1]
