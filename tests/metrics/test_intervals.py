"""Standard errors of AUC (DeLong) and TPR at FPR (stratified bootstrap), and the harness hook."""

from __future__ import annotations

import numpy as np
import pytest
from lm_eval.api import metrics as lm_metrics

from pdd_metrics import roc_auc, tpr_at_fpr
from pdd_metrics.intervals import (
    delong_auc_stderr,
    normal_interval,
    smallest_fpr_step,
    tpr_at_fpr_bootstrap,
    tpr_at_fpr_stderr,
)
from pdd_tasks.tasks import aggregations


def sample(n_members: int, n_non_members: int, shift: float = 0.8, seed: int = 0, ties: bool = False):
    rng = np.random.default_rng(seed)
    scores = np.r_[rng.normal(shift, 1, n_members), rng.normal(0, 1, n_non_members)]
    if ties:
        scores = np.round(scores, 1)
    labels = np.r_[np.ones(n_members, int), np.zeros(n_non_members, int)]
    return scores, labels


def direct_delong(scores, labels) -> float:
    """DeLong et al. 1988 written out: psi over every (member, non-member) pair."""
    x, y = scores[labels == 1], scores[labels == 0]
    psi = (x[:, None] > y[None, :]) + 0.5 * (x[:, None] == y[None, :])
    v10, v01 = psi.mean(axis=1), psi.mean(axis=0)
    return float(np.sqrt(v10.var(ddof=1) / x.size + v01.var(ddof=1) / y.size))


def explicit_bootstrap(scores, labels, statistic, iters: int, seed: int = 1) -> np.ndarray:
    """Resample members and non-members with replacement and recompute ``statistic`` each time."""
    rng = np.random.default_rng(seed)
    members, non_members = scores[labels == 1], scores[labels == 0]
    resampled_labels = np.r_[np.ones(members.size, int), np.zeros(non_members.size, int)]
    return np.array(
        [
            statistic(
                np.r_[rng.choice(members, members.size), rng.choice(non_members, non_members.size)], resampled_labels
            )
            for _ in range(iters)
        ]
    )


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("sizes", [(30, 50), (200, 150)])
def test_delong_equals_the_pairwise_definition(sizes, ties):
    scores, labels = sample(*sizes, ties=ties, seed=sum(sizes))
    assert delong_auc_stderr(scores, labels) == pytest.approx(direct_delong(scores, labels), rel=1e-12)


def test_delong_agrees_with_a_direct_bootstrap():
    scores, labels = sample(150, 150, seed=3)
    draws = explicit_bootstrap(scores, labels, roc_auc, iters=1500)
    assert delong_auc_stderr(scores, labels) == pytest.approx(draws.std(ddof=1), rel=0.1)


@pytest.mark.parametrize("max_fpr", [0.05, 0.01, 0.001])
@pytest.mark.parametrize("ties", [False, True])
def test_tpr_bootstrap_matches_explicit_resampling(max_fpr, ties):
    scores, labels = sample(120, 300, seed=5, ties=ties)
    direct = explicit_bootstrap(scores, labels, lambda s, y: tpr_at_fpr(s, y, max_fpr, "strict"), iters=2000)
    fast = tpr_at_fpr_bootstrap(scores, labels, max_fpr, "strict", iters=100_000)
    # the same distribution: mean and spread agree within Monte Carlo error of the 2000 direct draws
    assert fast.mean() == pytest.approx(direct.mean(), abs=4 * direct.std() / np.sqrt(2000) + 1e-3)
    assert fast.std(ddof=1) == pytest.approx(direct.std(ddof=1), rel=0.1)
    assert np.quantile(fast, [0.1, 0.5, 0.9]) == pytest.approx(np.quantile(direct, [0.1, 0.5, 0.9]), abs=0.02)


def test_tpr_bootstrap_inclusive_rule_matches_explicit_resampling():
    scores, labels = sample(80, 100, seed=9, ties=True)
    direct = explicit_bootstrap(scores, labels, lambda s, y: tpr_at_fpr(s, y, 0.05, "inclusive"), iters=2000)
    fast = tpr_at_fpr_bootstrap(scores, labels, 0.05, "inclusive", iters=50_000)
    assert fast.std(ddof=1) == pytest.approx(direct.std(ddof=1), rel=0.1)


def test_the_bootstrap_takes_the_number_of_draws_and_is_seeded():
    scores, labels = sample(40, 60)
    assert tpr_at_fpr_bootstrap(scores, labels, iters=123).shape == (123,)
    assert tpr_at_fpr_stderr(scores, labels, iters=500) == tpr_at_fpr_stderr(scores, labels, iters=500)
    assert np.isnan(tpr_at_fpr_stderr(scores, labels, iters=1))


@pytest.mark.parametrize("metric", ["auc", "tpr@fpr<5%"])
def test_intervals_contain_the_estimate_and_shrink_with_more_documents(metric):
    widths = []
    for n in (50, 200, 800):
        scores, labels = sample(n, n, seed=n)
        if metric == "auc":
            estimate, stderr = roc_auc(scores, labels), delong_auc_stderr(scores, labels)
        else:
            estimate, stderr = tpr_at_fpr(scores, labels, 0.05), tpr_at_fpr_stderr(scores, labels, 0.05)
        low, high = normal_interval(estimate, stderr)
        assert low <= estimate <= high
        widths.append(high - low)
    assert widths[0] > widths[1] > widths[2]


def test_undefined_variance_and_unresolved_budgets():
    assert np.isnan(delong_auc_stderr([0.9, 0.1, 0.2], [1, 0, 0]))
    assert smallest_fpr_step(1000) == 0.001  # FPR < 0.1% needs more than 1000 non-members


def test_harness_gets_our_stderr_for_our_aggregations_only():
    from lm_eval import evaluator_utils

    from pdd_tasks import lm_eval_patches

    lm_eval_patches.apply()

    scores, labels = sample(60, 80)
    items = list(zip(scores.tolist(), labels.tolist(), strict=True))
    lookup = evaluator_utils.stderr_for_metric
    assert lookup(aggregations.AGGREGATIONS["auc"], 100)(items) == delong_auc_stderr(scores, labels)
    tpr = aggregations.AGGREGATIONS["tpr@fpr<1%"]
    assert lookup(tpr, 777)(items) == tpr_at_fpr_stderr(scores, labels, 0.01, iters=777)  # bootstrap_iters honoured
    assert lookup(lm_metrics.mean, 100) is lm_metrics.mean_stderr  # lm-eval's own still answer as before
    assert lookup(lm_metrics.median, 0) is None
    undefined = [(0.9, 1), (0.1, 0), (0.2, 0)]
    assert lookup(aggregations.AGGREGATIONS["auc"], 100)(undefined) == "N/A"


def test_docstring_examples():
    import doctest

    import pdd_metrics.intervals

    result = doctest.testmod(pdd_metrics.intervals)
    assert result.failed == 0 and result.attempted > 0  # examples that ran, none failed
