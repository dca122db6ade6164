"""EM-MIA's label-free iteration against the authors' loop (gyuwankim/em-mia, ``emmia.py``,
``-m NegPref -p AUC-ROC``), written out with their sklearn calls, on the same inputs."""

from __future__ import annotations

import doctest

import numpy as np
import pytest
from sklearn.metrics import auc, roc_curve

import pdd_metrics.em_mia
from pdd_metrics import em_mia_scores


def authors_em_mia(recall_all_scores: np.ndarray, init: np.ndarray, max_iter: int) -> np.ndarray:
    """``emmia.py``'s NegPref loop with the AUC-ROC prefix score (``calc_auc(x, y > np.median(y))``)."""

    def calc_auc(scores, labels):
        return auc(*roc_curve(labels, scores)[:2])

    membership_scores = init.copy()
    membership_scores[np.isnan(membership_scores)] = 0
    for _ in range(max_iter):
        prefix_scores = np.array(
            [
                calc_auc(recall_all_scores[idx], membership_scores > np.median(membership_scores))
                for idx in range(len(init))
            ]
        )
        membership_scores = -prefix_scores
        membership_scores[np.isnan(membership_scores)] = 0
    return membership_scores


def test_doctests():
    result = doctest.testmod(pdd_metrics.em_mia)
    assert result.failed == 0 and result.attempted > 0  # examples that ran, none failed


@pytest.mark.parametrize("seed", range(10))
def test_each_update_equals_the_authors_on_the_same_scores(seed):
    """Random ReCaLL matrices (with ties every other seed), initial scores with a NaN: each update, from
    the same current scores, equals the authors'. (Whole runs can part: their AUCs are trapezoid sums,
    whose rounding breaks some exact ties between prefix scores and so moves a text across the median;
    here equal AUCs stay equal.)"""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 25))
    matrix = rng.normal(1.0, 0.1, (n, n))
    if seed % 2:
        matrix = np.round(matrix, 1)
    scores = rng.normal(size=n)
    scores[0] = np.nan
    for _ in range(5):
        expected = authors_em_mia(matrix, scores, 1)
        np.testing.assert_allclose(em_mia_scores(matrix, scores, 1), expected, rtol=1e-12, atol=1e-12)
        scores = expected


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")
def test_equal_initial_scores_give_no_labels_and_zeros():
    """No text above the median: every prefix score is undefined (NaN in the authors' code) and becomes 0."""
    matrix = np.eye(4) + 1.0
    np.testing.assert_array_equal(em_mia_scores(matrix, np.ones(4), 3), authors_em_mia(matrix, np.ones(4), 3))
    assert not em_mia_scores(matrix, np.ones(4), 3).any()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ((np.ones((3, 2)), np.ones(3)), "must be n x n"),
        ((np.ones((3, 3)), np.ones(2)), "must be n x n"),
        ((np.ones((2, 2)), np.ones(2), 0), "iterations must be a whole number >= 1"),
    ],
)
def test_refuses_mismatched_shapes_and_no_iteration(arguments, message):
    with pytest.raises(ValueError, match=message):
        em_mia_scores(*arguments)
