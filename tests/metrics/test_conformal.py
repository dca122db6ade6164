"""Conformal p-values and Benjamini-Hochberg (PTDI's identification), against direct computations."""

from __future__ import annotations

import doctest
import itertools

import numpy as np
import pytest
from scipy.stats import false_discovery_control

import pdd_metrics.conformal
from pdd_metrics import benjamini_hochberg, conformal_p_values, identify_members


def test_doctests():
    result = doctest.testmod(pdd_metrics.conformal)
    assert result.failed == 0 and result.attempted > 0  # examples that ran, none failed


# -- conformal p-values ----------------------------------------------------------------------------


def brute_force_p(score: float, reference: list[float]) -> float:
    return (1 + sum(1 for r in reference if r >= score)) / (len(reference) + 1)


def test_p_values_equal_the_count_with_ties():
    reference = [0.0, 1.0, 1.0, 2.0, 2.0, 2.0, 3.0]
    suspect = [-1.0, 0.0, 1.0, 1.5, 2.0, 3.0, 3.5]
    expected = [8 / 8, 8 / 8, 7 / 8, 5 / 8, 5 / 8, 2 / 8, 1 / 8]
    assert conformal_p_values(suspect, reference).tolist() == expected
    assert expected == [brute_force_p(s, reference) for s in suspect]


def test_p_values_against_brute_force_on_random_scores_with_ties():
    rng = np.random.default_rng(0)
    for _ in range(50):
        reference = rng.integers(0, 6, size=rng.integers(1, 30)).astype(float)  # many ties
        suspect = rng.integers(-1, 8, size=rng.integers(1, 30)).astype(float)
        direct = [brute_force_p(s, reference.tolist()) for s in suspect]
        assert conformal_p_values(suspect, reference) == pytest.approx(direct, abs=0, rel=1e-15)


def test_p_values_are_super_uniform_for_exchangeable_non_members():
    """P(p <= u) <= u for a non-member drawn like the references (the property BH relies on), and
    = floor(u (n+1)) / (n+1) exactly without ties: counted over many draws."""
    rng = np.random.default_rng(1)
    n, draws = 19, 20000
    p = np.array([conformal_p_values(rng.normal(size=1), rng.normal(size=n))[0] for _ in range(draws)])
    for u in (0.05, 0.1, 0.25, 0.5):
        exact = np.floor(u * (n + 1)) / (n + 1)
        assert np.mean(p <= u) == pytest.approx(exact, abs=4 * np.sqrt(exact * (1 - exact) / draws))


def test_p_values_refuse_bad_scores():
    with pytest.raises(ValueError, match="reference_scores"):
        conformal_p_values([1.0], [])
    with pytest.raises(ValueError, match="NaN or infinite"):
        conformal_p_values([np.nan], [1.0])


# -- Benjamini-Hochberg ----------------------------------------------------------------------------


def brute_force_bh(p: list[float], q: float) -> list[bool]:
    """The definition: k = the largest i with p_(i) <= i q / m; reject every p <= p_(k)."""
    m = len(p)
    ordered = sorted(p)
    k = max((i for i in range(1, m + 1) if ordered[i - 1] <= i * q / m), default=0)
    return [k > 0 and value <= ordered[k - 1] for value in p]


def test_bh_hand_worked_example():
    # m = 6, q = 0.1: lines i q / m = 0.0167, 0.0333, 0.05, 0.0667, 0.0833, 0.1.
    # sorted: 0.01 (<= 0.0167), 0.04 (> 0.0333), 0.045 (<= 0.05), 0.07 (> 0.0667), 0.2, 0.9: k = 3
    p = [0.9, 0.045, 0.01, 0.2, 0.04, 0.07]
    assert benjamini_hochberg(p, 0.1).tolist() == [False, True, True, False, True, False]


def test_bh_step_up_rejects_a_p_value_above_its_own_line():
    # q = 0.05, m = 3: lines 0.0167, 0.0333, 0.05. 0.04 is above its line (i = 2), and a step-down
    # procedure would stop there; BH steps up from i = 3 (0.045 <= 0.05) and rejects all three.
    p = [0.045, 0.01, 0.04]
    assert benjamini_hochberg(p, 0.05).tolist() == [True, True, True]
    assert benjamini_hochberg(p, 0.04).tolist() == [False, True, False]  # lines .0133 .0267 .04


def test_bh_ties_are_rejected_together_and_nothing_below_every_line():
    assert benjamini_hochberg([0.04, 0.04, 0.04, 0.5], 0.1).tolist() == [True, True, True, False]
    assert not benjamini_hochberg([0.2, 0.3, 0.9], 0.1).any()


def test_bh_against_the_definition_and_scipy():
    """Brute-force definition and scipy's BH-adjusted p-values (reject iff adjusted <= q), with ties
    (conformal p-values from a small reference set)."""
    rng = np.random.default_rng(2)
    for _ in range(300):
        m = int(rng.integers(1, 40))
        n = int(rng.integers(1, 60))
        p = rng.integers(1, n + 2, size=m) / (n + 1)  # conformal-like values, ties common
        q = float(rng.choice([0.01, 0.05, 0.1, 0.2, 0.5]))
        ours = benjamini_hochberg(p, q).tolist()
        assert ours == brute_force_bh(p.tolist(), q)
        assert ours == (false_discovery_control(p, method="bh") <= q + 1e-12).tolist()


@pytest.mark.parametrize("bad", [0, 1, 1.5, -0.1, True, "0.1", None])
def test_bh_refuses_a_rate_outside_zero_one(bad):
    with pytest.raises(ValueError, match="target_fdr"):
        benjamini_hochberg([0.01, 0.2], bad)


def test_bh_refuses_p_values_outside_zero_one():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        benjamini_hochberg([0.5, 1.5], 0.1)


# -- identification: the false discovery rate it promises, by simulation ---------------------------


def test_realised_false_discovery_rate_is_at_most_the_target():
    """Suspects = 30 members (scores shifted up) + 70 non-members, references = 200 other non-members
    from the same distribution: the mean false-discovery proportion over 400 draws stays below q
    (BH's bound is (1 - pi) q = 0.07 here), and members are found."""
    rng = np.random.default_rng(3)
    q, fdp, found = 0.1, [], []
    is_member = np.r_[np.ones(30, dtype=bool), np.zeros(70, dtype=bool)]
    for _ in range(400):
        suspect = rng.normal(size=100) + 2.5 * is_member
        result = identify_members(suspect, rng.normal(size=200), q)
        identified = result.identified
        fdp.append((identified & ~is_member).sum() / max(identified.sum(), 1))
        found.append((identified & is_member).sum() / is_member.sum())
    standard_error = np.std(fdp) / np.sqrt(len(fdp))
    assert np.mean(fdp) <= 0.7 * q + 3 * standard_error
    assert np.mean(found) > 0.3


def test_no_identification_below_the_smallest_p_value():
    # 8 references: the smallest p-value is 1/9 > 0.1, so nothing can be identified at q = 0.1
    result = identify_members([100.0] * 5, list(range(8)), 0.1)
    assert result.p_values.tolist() == [1 / 9] * 5
    assert result.count == 0
    assert identify_members([100.0] * 5, list(range(9)), 0.1).count == 5  # 1/10 <= 0.1


def test_identification_is_invariant_to_monotone_transforms():
    rng = np.random.default_rng(4)
    suspect, reference = rng.normal(size=40) + 1, rng.normal(size=60)
    plain = identify_members(suspect, reference, 0.2)
    moved = identify_members(np.exp(suspect), np.exp(reference), 0.2)
    assert plain.p_values.tolist() == moved.p_values.tolist()
    assert plain.identified.tolist() == moved.identified.tolist()


def test_all_orderings_of_a_small_case_match_the_brute_force():
    reference = [1.0, 2.0, 2.0, 3.0, 5.0, 8.0, 9.0, 9.5, 10.0]
    for suspect in itertools.permutations([2.0, 9.0, 11.0, 12.0]):
        result = identify_members(list(suspect), reference, 0.3)
        p = [brute_force_p(s, reference) for s in suspect]
        assert result.p_values.tolist() == pytest.approx(p)
        assert result.identified.tolist() == brute_force_bh(p, 0.3)
