"""Standard errors and 95% intervals of the corpus-level metrics of :mod:`pdd_metrics.evaluation`.

- AUC: DeLong's closed-form variance (DeLong, DeLong, Clarke-Pearson 1988, Eq. 2-5; computed from
  mid-ranks as Sun and Xu 2014, O(n log n)). No resampling, so it costs about as much as the AUC.
- TPR at FPR < x: a stratified bootstrap (members and non-members resampled separately, their
  counts fixed) with ``iters`` draws. It is drawn exactly and without materialising resamples:
  the resampled threshold is an order statistic of the non-member resample, whose distribution
  is binomial, and given the threshold the number of resampled members above it is binomial too
  (:func:`tpr_at_fpr_bootstrap`). Cost O(n log n + iters), independent of ``iters * n``.

Labels are 1 = member, 0 = non-member; higher score = more likely a member.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import binom, norm, rankdata

from .evaluation import validate_scores_and_labels


__all__ = [
    "delong_auc_stderr",
    "normal_interval",
    "null_auc_standard_error",
    "smallest_fpr_step",
    "tpr_at_fpr_bootstrap",
    "tpr_at_fpr_stderr",
]

#: Seed of the bootstrap draws (results are reproducible run to run).
BOOTSTRAP_SEED = 0


def _split(scores, labels) -> tuple[np.ndarray, np.ndarray]:
    scores_arr, labels_arr = validate_scores_and_labels(scores, labels)
    return scores_arr[labels_arr == 1], scores_arr[labels_arr == 0]


def delong_auc_stderr(scores: np.ndarray, labels: np.ndarray) -> float:
    """DeLong's standard error of the ROC AUC (members as the positive class).

    With m members X and n non-members Y, psi(x, y) = 1 if x > y, 1/2 if tied, else 0, the
    structural components are V10(X_i) = mean_j psi(X_i, Y_j) and V01(Y_j) = mean_i psi(X_i, Y_j),
    and Var(AUC) = S10 / m + S01 / n with S10, S01 their sample variances (DeLong et al. 1988).
    V10 and V01 come from mid-ranks: V10(X_i) = (rank of X_i among all - rank among X) / n.

    Args:
        scores: shape (N,), higher = more likely a member.
        labels: shape (N,), 1 = member, 0 = non-member; both classes present.

    Returns:
        The standard error, or NaN with fewer than 2 members or 2 non-members (no variance).

    >>> round(delong_auc_stderr([0.9, 0.8, 0.3, 0.4, 0.2, 0.1], [1, 1, 1, 0, 0, 0]), 4)
    0.1571
    """
    members, non_members = _split(scores, labels)
    m, n = members.size, non_members.size
    if m < 2 or n < 2:
        return math.nan
    ranks_all = rankdata(np.concatenate([members, non_members]))
    v10 = (ranks_all[:m] - rankdata(members)) / n
    v01 = 1.0 - (ranks_all[m:] - rankdata(non_members)) / m
    return float(math.sqrt(np.var(v10, ddof=1) / m + np.var(v01, ddof=1) / n))


def _allowed_false_positives(n_non_members: int, max_fpr: float, rule: str) -> int:
    """The most non-members a threshold may let through while its FPR stays within budget."""
    counts = np.arange(n_non_members + 1)
    within = counts / n_non_members < max_fpr if rule == "strict" else counts / n_non_members <= max_fpr
    return int(np.count_nonzero(within)) - 1


def smallest_fpr_step(n_non_members: int) -> float:
    """1 / n: the smallest non-zero FPR a set of n non-members can show. A budget at or below it
    (e.g. FPR < 0.1% with 1,000 non-members or fewer) allows no false positive at all, so the
    TPR there is the TPR at FPR 0, the same for every budget below 1 / n."""
    return 1.0 / n_non_members


def tpr_at_fpr_bootstrap(
    scores: np.ndarray,
    labels: np.ndarray,
    max_fpr: float = 0.05,
    rule: str = "strict",
    iters: int = 10_000,
    seed: int = BOOTSTRAP_SEED,
) -> np.ndarray:
    """``iters`` draws of :func:`pdd_metrics.tpr_at_fpr` over stratified bootstrap resamples.

    TPR at FPR < x equals the share of members scoring above t, the (c + 1)-th highest non-member
    score, where c is the most false positives the budget allows. In a resample, t is the
    non-member at sorted position K, the (c + 1)-th smallest of n uniform draws of a position,
    so P(K <= k) = P(Binomial(n, (k + 1) / n) >= c + 1); K is drawn by inverting that CDF. Given t,
    the count of resampled members above it is Binomial(m, share of members above t). Both are
    the exact distributions of resampling with replacement, so the draws equal (in
    distribution) recomputing ``tpr_at_fpr`` on ``iters`` explicit resamples.

    Args:
        scores: shape (N,), higher = more likely a member.
        labels: shape (N,), 1 = member, 0 = non-member; both classes present.
        max_fpr: the FPR budget, as in :func:`pdd_metrics.tpr_at_fpr`.
        rule: "strict" (FPR < max_fpr) or "inclusive" (<=).
        iters: number of bootstrap draws.
        seed: seed of the draws.

    Returns:
        shape (iters,), the TPR of each resample.
    """
    members, non_members = _split(scores, labels)
    m, n = members.size, non_members.size
    allowed = _allowed_false_positives(n, max_fpr, rule)
    if allowed >= n:  # the budget allows every non-member through: TPR = 1 in every resample
        return np.ones(iters)
    descending = np.sort(non_members)[::-1]
    # P(K <= k), K = position of the (allowed + 1)-th highest resampled non-member
    cdf = binom.sf(allowed, n, np.arange(1, n + 1) / n)
    rng = np.random.default_rng(seed)
    positions = np.minimum(np.searchsorted(cdf, rng.random(iters), side="left"), n - 1)
    thresholds = descending[positions]
    ascending_members = np.sort(members)
    share_above = (m - np.searchsorted(ascending_members, thresholds, side="right")) / m
    return rng.binomial(m, share_above) / m


def tpr_at_fpr_stderr(
    scores: np.ndarray,
    labels: np.ndarray,
    max_fpr: float = 0.05,
    rule: str = "strict",
    iters: int = 10_000,
    seed: int = BOOTSTRAP_SEED,
) -> float:
    """Bootstrap standard error of TPR at FPR < ``max_fpr``: the standard deviation (ddof=1) of
    :func:`tpr_at_fpr_bootstrap`'s draws, as lm-eval's ``bootstrap_stderr``. NaN for iters < 2."""
    if iters < 2:
        return math.nan
    return float(np.std(tpr_at_fpr_bootstrap(scores, labels, max_fpr, rule, iters, seed), ddof=1))


def normal_interval(estimate: float, stderr: float, level: float = 0.95) -> tuple[float, float]:
    """``estimate -/+ z * stderr`` (z = 1.96 for 95%), clipped to [0, 1] (AUC and TPR are rates).

    >>> normal_interval(0.9, 0.05)
    (0.8020018007729973, 0.9979981992270027)
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), e.g. 0.95; got {level!r}")
    half = float(norm.ppf(0.5 + level / 2)) * stderr
    return max(0.0, float(estimate) - half), min(1.0, float(estimate) + half)


def null_auc_standard_error(members: int, non_members: int) -> float:
    """Standard error of an AUC of 0.5 from ``members`` and ``non_members`` texts (the Mann-Whitney
    U statistic's null variance, Hanley & McNeil 1982): sqrt((m + n + 1) / (12 m n)).

    >>> round(null_auc_standard_error(50, 50), 3)
    0.058
    """
    return math.sqrt((members + non_members + 1) / (12 * members * non_members))
