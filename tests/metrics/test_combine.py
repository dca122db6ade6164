"""A group's tests from its leaves' results (pdd_metrics.combine): Fisher's combination of p-values and
CoDeC pooled over the leaves, their level under the null by simulation (fixed seeds; each can fail) and
their values on hand-checked cases."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest
from scipy.stats import combine_pvalues

import pdd_metrics.combine
from pdd_metrics.codec import wilson_bounds, wilson_interval
from pdd_metrics.combine import fisher_combined_pvalue, pooled_codec, pooled_drops
from pdd_metrics.exchangeability import sharded_comparison_test
from pdd_metrics.verdict import CODEC_NULL_SCORE, codec_calibrated_pvalue


def test_doctests():
    result = doctest.testmod(pdd_metrics.combine)
    assert result.failed == 0 and result.attempted > 0  # examples that ran, none failed


def test_fisher_is_scipy_s_fisher():
    for p_values in ([0.01, 0.9, 0.8, 0.7], [0.001, 0.5, 0.5], [0.3]):
        assert fisher_combined_pvalue(p_values) == pytest.approx(combine_pvalues(p_values, method="fisher").pvalue)


@pytest.mark.parametrize("leaves", [2, 5, 24])
def test_fisher_holds_its_level_on_uniform_p_values(leaves):
    rng = np.random.default_rng(leaves)
    draws = 20_000
    rate = np.mean([fisher_combined_pvalue(rng.uniform(size=leaves)) <= 0.05 for _ in range(draws)])
    assert abs(rate - 0.05) < 4 * math.sqrt(0.05 * 0.95 / draws)


def test_fisher_holds_its_level_on_the_exchangeability_test_s_p_values():
    """Each leaf: Oren et al.'s t-test on 8 shards with one permuted order each (pdd_contamination's
    default permutations), heavy-tailed exchangeable log-likelihoods; 5 leaves a group."""
    rng = np.random.default_rng(7)
    draws, rejected = 3000, 0
    for _ in range(draws):
        leaf_p = [
            sharded_comparison_test(rng.standard_t(3, size=8), rng.standard_t(3, size=(8, 1))).p_value for _ in range(5)
        ]
        rejected += fisher_combined_pvalue(leaf_p) <= 0.05
    assert rejected / draws < 0.05 + 3 * math.sqrt(0.05 * 0.95 / draws)


def test_fisher_takes_a_p_of_one_as_no_evidence_and_finds_evidence_spread_over_leaves():
    assert fisher_combined_pvalue([1e-4, 1.0]) < 0.01  # a leaf whose order changes nothing does not veto
    assert all(p > 0.05 for p in [0.08] * 6) and fisher_combined_pvalue([0.08] * 6) < 0.01


def test_pooled_codec_holds_its_level_at_the_null_boundary():
    """Every leaf drops at the calibrated null's rate (the most a leaf not seen may): the pooled
    binomial test rejects at most alpha of the time (exact, so at most; leaves of unequal size)."""
    rng = np.random.default_rng(3)
    sizes = [48, 120, 250, 198]
    draws, rejected = 4000, 0
    for _ in range(draws):
        drops = [int(rng.binomial(n, CODEC_NULL_SCORE)) for n in sizes]
        rejected += codec_calibrated_pvalue(*pooled_drops(zip(drops, sizes, strict=True))) <= 0.05
    assert rejected / draws < 0.05 + 3 * math.sqrt(0.05 * 0.95 / draws)


def test_pooling_gives_small_leaves_the_group_s_power():
    """Three files of 48 each scoring 47 of 48 (the tuned files' 0.979): alone p 0.58 against the
    calibrated null, pooled (141 of 144) p 0.37: more examples, a smaller p, still far from rejecting
    at 144 (codec_examples_needed: about 290 at 0.99); 24 BBH-like leaves of 250 at 0.98 reject pooled."""
    assert codec_calibrated_pvalue(47, 48) > 0.5
    assert pooled_drops([(47, 48)] * 3) == (141, 144)
    assert codec_calibrated_pvalue(141, 144) < codec_calibrated_pvalue(47, 48)
    assert codec_calibrated_pvalue(*pooled_drops([(245, 250)] * 24)) < 1e-3  # BBH-like: 24 leaves of 250 at 0.98


def test_pooled_codec_is_the_count_of_the_union():
    score, low, high, n = pooled_codec([(0.5, 10), (1.0, 30)])
    assert (score, n) == (35 / 40, 40)
    assert (low, high) == wilson_bounds(35, 40)
    assert wilson_bounds(35, 40) == wilson_interval([-1.0] * 35 + [1.0] * 5)  # as a leaf's interval


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: fisher_combined_pvalue([]), "at least one p-value"),
        (lambda: fisher_combined_pvalue([0.5, float("nan")]), "must be in \\[0, 1\\]"),
        (lambda: pooled_drops([(5, 4)]), "0 <= drops <= examples"),
        (lambda: pooled_drops([]), "at least one"),
    ],
)
def test_bad_inputs_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()
