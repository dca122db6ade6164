"""Threshold calibration on known non-members and the suspect-vs-reference rank test."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from pdd_metrics import calibrate_threshold, flag_members, suspect_vs_reference_test


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("target", [0.0, 0.01, 0.05, 0.1, 0.29, 0.5])
def test_threshold_is_the_lowest_whose_reference_fpr_meets_the_target(seed, target):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 120))
    # rounded scores: many ties
    reference = np.round(rng.normal(size=n), 1)
    tau = calibrate_threshold(reference, target)
    assert tau in reference
    fpr = np.mean(reference > tau)
    assert fpr <= target + 1e-12
    # no lower candidate (another reference score) keeps the FPR within the target
    lower = sorted({value for value in reference if value < tau})
    if lower:
        assert np.mean(reference > lower[-1]) > target


def test_threshold_flags_exactly_m_references_without_ties():
    reference = np.arange(100, dtype=float)
    for target, expected_flagged in [(0.05, 5), (0.01, 1), (0.29, 29), (0.0, 0), (0.999, 99)]:
        tau = calibrate_threshold(reference, target)
        assert int(flag_members(reference, tau).sum()) == expected_flagged


def test_threshold_with_too_few_references_is_the_maximum():
    assert calibrate_threshold([1.0, 5.0, 3.0], 0.05) == 5.0
    assert not flag_members([5.0], 5.0)[0]


@pytest.mark.parametrize(
    "scores, target, message",
    [
        ([], 0.05, "non-empty"),
        ([1.0, float("nan")], 0.05, "NaN"),
        ([1.0, 2.0], 1.0, "target_fpr"),
        ([1.0, 2.0], -0.1, "target_fpr"),
    ],
)
def test_threshold_rejects_bad_input(scores, target, message):
    with pytest.raises(ValueError, match=message):
        calibrate_threshold(scores, target)


def exact_one_sided_p(suspect, reference):
    """P(U >= u_observed) over every split of the pooled scores (no ties), by enumeration."""
    pooled = list(suspect) + list(reference)

    def u_of(group):
        rest = [v for i, v in enumerate(pooled) if i not in group]
        return sum((pooled[i] > r) + 0.5 * (pooled[i] == r) for i in group for r in rest)

    observed = u_of(set(range(len(suspect))))
    splits = list(itertools.combinations(range(len(pooled)), len(suspect)))
    return observed, sum(u_of(set(s)) >= observed - 1e-12 for s in splits) / len(splits)


@pytest.mark.parametrize("seed", range(5))
def test_rank_test_matches_exact_enumeration(seed):
    rng = np.random.default_rng(seed)
    suspect = rng.normal(0.5, 1, size=5)
    reference = rng.normal(0, 1, size=6)
    result = suspect_vs_reference_test(suspect, reference)
    u, p = exact_one_sided_p(suspect, reference)
    assert result.u_statistic == pytest.approx(u)
    assert result.p_value == pytest.approx(p, rel=1e-9)
    assert result.auc == pytest.approx(u / 30)
    assert (result.n_suspect, result.n_reference) == (5, 6)


def test_rank_test_is_one_sided():
    low = np.arange(20.0)
    high = low + 100
    assert suspect_vs_reference_test(high, low).p_value < 1e-6
    assert suspect_vs_reference_test(low, high).p_value > 0.99
    assert suspect_vs_reference_test(high, low).auc == 1.0


def test_rank_test_on_same_distribution_is_calibrated():
    """Under the null (both sets from one distribution) about 5% of p-values fall below 0.05."""
    rng = np.random.default_rng(0)
    p_values = [suspect_vs_reference_test(rng.normal(size=40), rng.normal(size=60)).p_value for _ in range(400)]
    share = np.mean(np.array(p_values) < 0.05)
    assert 0.02 < share < 0.09  # binomial(400, 0.05): mean 0.05, sd 0.011
    assert math.isfinite(share)
