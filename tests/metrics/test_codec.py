"""CoDeC's statistic (pdd_metrics.codec) against direct computations and SciPy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binomtest

from pdd_metrics.codec import (
    codec_deltas,
    codec_pvalue,
    codec_score,
    codec_score_stderr,
    context_draws,
    wilson_interval,
)


def direct_score(in_context, baseline):
    """The reference code's rule, example by example: contaminated if baseline - in context > 0."""
    flags = [1.0 if b - c > 0 else 0.0 for c, b in zip(in_context, baseline, strict=True)]
    return sum(flags) / len(flags)


def test_score_is_the_share_of_drops_as_the_reference_code_counts_them():
    rng = np.random.default_rng(0)
    baseline = rng.normal(-40, 5, size=200)
    in_context = baseline + rng.normal(0.5, 2, size=200)
    in_context[:10] = baseline[:10]  # ties: no drop
    deltas = codec_deltas(in_context, baseline)
    assert np.array_equal(deltas, in_context - baseline)
    assert codec_score(deltas) == pytest.approx(direct_score(in_context, baseline))
    assert 0 < codec_score(deltas) < 0.5


def test_ties_are_not_drops():
    assert codec_score([0.0, 0.0, -1e-9, 1.0]) == 0.25


def test_stderr_is_binomial():
    deltas = [-1.0] * 30 + [1.0] * 70
    assert codec_score_stderr(deltas) == pytest.approx(math.sqrt(0.3 * 0.7 / 100))
    assert codec_score_stderr([-1.0] * 5) == 0.0


@pytest.mark.parametrize("drops, n", [(0, 20), (3, 20), (20, 20), (37, 100), (999, 1000)])
def test_wilson_interval_matches_scipy(drops, n):
    deltas = [-1.0] * drops + [1.0] * (n - drops)
    expected = binomtest(drops, n).proportion_ci(confidence_level=0.95, method="wilson")
    low, high = wilson_interval(deltas)
    assert (low, high) == pytest.approx((expected.low, expected.high), abs=1e-12)
    assert low <= codec_score(deltas) <= high


@pytest.mark.parametrize("drops, n", [(0, 20), (10, 20), (15, 20), (20, 20), (37, 60), (999, 1000)])
def test_pvalue_is_the_one_sided_binomial_test_against_one_half(drops, n):
    expected = binomtest(drops, n, 0.5, alternative="greater").pvalue
    assert codec_pvalue(drops, n) == pytest.approx(expected, rel=1e-9)
    for bad in ((n + 1, n), (-1, n), (1.5, n), (0, 0)):
        with pytest.raises(ValueError):
            codec_pvalue(*bad)


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="one value per example each"):
        codec_deltas([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="empty"):
        codec_score([])
    with pytest.raises(ValueError, match="NaN or infinite"):
        codec_score([1.0, float("nan")])
    with pytest.raises(ValueError, match="confidence"):
        wilson_interval([1.0], confidence=1.0)


def test_context_draws_exclude_the_target_and_are_seeded():
    draws = context_draws(50, 3, seed=7)
    assert draws.shape == (50, 3)
    for index, row in enumerate(draws):
        assert index not in row and len(set(row.tolist())) == 3 and all(0 <= i < 50 for i in row)
    assert np.array_equal(draws, context_draws(50, 3, seed=7))
    assert not np.array_equal(draws, context_draws(50, 3, seed=8))


def test_context_draws_are_uniform_over_the_other_examples():
    counts = np.zeros((5, 5))
    for seed in range(2000):
        for index, (other,) in enumerate(context_draws(5, 1, seed)):
            counts[index, other] += 1
    off_diagonal = counts[~np.eye(5, dtype=bool)]
    assert np.all(np.diag(counts) == 0)
    assert off_diagonal.min() > 400 and off_diagonal.max() < 600  # 500 expected each


def test_too_few_examples_for_the_context_is_an_error():
    with pytest.raises(ValueError, match="at least 3"):
        context_draws(2, 2, seed=0)


def test_doctests():
    import doctest

    import pdd_metrics.codec
    import pdd_tasks.dataset_tests.codec

    for module in (pdd_metrics.codec, pdd_tasks.dataset_tests.codec):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__
