"""Dataset inference (pdd_metrics.dataset_inference) on synthetic features with a known answer."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import kstest

from pdd_metrics.dataset_inference import dataset_inference_test


def features(rng, n, shift):
    """Three per-text scores: one informative (mean ``shift``), one informative with the opposite
    sign (as a loss is to a log-likelihood), one pure noise."""
    informative = rng.normal(shift, 1.0, size=n)
    return np.column_stack([informative, -informative + rng.normal(0, 0.5, size=n), rng.normal(size=n)])


def test_members_are_detected_and_the_signs_are_learned():
    rng = np.random.default_rng(0)
    result = dataset_inference_test(features(rng, 150, 0.6), features(rng, 150, 0.0), seed=0)
    assert result.p_value < 1e-4
    assert result.t_statistic > 0
    assert result.weights[0] > 0 and result.weights[1] < 0
    assert result.n_fit == (75, 75) and result.n_test == (75, 75)


def test_p_value_is_uniform_on_two_halves_of_one_distribution():
    p_values = []
    for seed in range(300):
        rng = np.random.default_rng(seed)
        p_values.append(dataset_inference_test(features(rng, 60, 0.0), features(rng, 60, 0.0), seed=seed).p_value)
    p_values = np.array(p_values)
    assert kstest(p_values, "uniform").pvalue > 0.01
    assert 0.01 <= np.mean(p_values < 0.05) <= 0.10


def test_a_shifted_reference_set_is_a_false_positive():
    # The documented failure: references that differ in anything but membership (here one feature's
    # scale, as a different period or source would) are told apart without any training.
    rng = np.random.default_rng(1)
    suspect = features(rng, 150, 0.0)
    reference = features(rng, 150, 0.0)
    reference[:, 2] *= 3.0
    suspect[:, 2] += 0.5
    assert dataset_inference_test(suspect, reference, seed=0).p_value < 0.05


def test_seed_changes_the_split_only():
    rng = np.random.default_rng(2)
    suspect, reference = features(rng, 40, 0.3), features(rng, 40, 0.0)
    assert dataset_inference_test(suspect, reference, seed=4) == dataset_inference_test(suspect, reference, seed=4)
    assert dataset_inference_test(suspect, reference, seed=4) != dataset_inference_test(suspect, reference, seed=5)


def test_bad_input_is_refused():
    rng = np.random.default_rng(3)
    with pytest.raises(ValueError, match="same methods"):
        dataset_inference_test(rng.normal(size=(10, 3)), rng.normal(size=(10, 2)))
    with pytest.raises(ValueError, match="at least 2 texts of each set in each split"):
        dataset_inference_test(rng.normal(size=(3, 2)), rng.normal(size=(10, 2)))
    with pytest.raises(ValueError, match="NaN or infinite"):
        dataset_inference_test([[np.nan, 1.0]] * 6, rng.normal(size=(6, 2)))
