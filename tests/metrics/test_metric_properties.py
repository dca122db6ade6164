"""Property tests (hypothesis) of the metric functions of ``pdd_metrics``: what must hold for every
input, not only for the worked examples of the docstrings.

- AUC is invariant under strictly increasing transforms of the scores and under permutations of
  the texts; swapping the labels gives 1 - AUC; it lies in [0, 1] and is the share of
  member/non-member pairs ordered right (ties counting one half).
- TPR@FPR lies in [0, 1], does not decrease as the FPR budget grows, and the strict rule never
  exceeds the inclusive one.
- DC-PDD's first-occurrence rule (Eq. 8): repeating a token that already occurred, whatever its
  probability, does not change the score; without the rule the score is the mean over all tokens.
"""

from __future__ import annotations

import numpy as np
import pytest


hypothesis = pytest.importorskip("hypothesis", reason="hypothesis (test extra) is not installed")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from pdd_metrics import dcpdd_score, roc_auc, tpr_at_fpr  # noqa: E402


SETTINGS = settings(max_examples=150, deadline=None)

# Scores on a grid of quarters: ties are frequent (the hard case for AUC and TPR) and every
# transform below stays exact in float64.
score = st.integers(min_value=-40, max_value=40).map(lambda q: q / 4)


@st.composite
def labelled_scores(draw, min_size: int = 2, max_size: int = 40):
    """``(scores, labels)`` with at least one member and one non-member."""
    n = draw(st.integers(min_value=min_size, max_value=max_size))
    labels = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n).filter(lambda ls: 0 < sum(ls) < len(ls)))
    scores = draw(st.lists(score, min_size=n, max_size=n))
    return np.array(scores, dtype=np.float64), np.array(labels, dtype=np.int64)


def pairwise_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """The Mann-Whitney definition: P(member score > non-member score) + 1/2 P(tie)."""
    members, non_members = scores[labels == 1], scores[labels == 0]
    greater = (members[:, None] > non_members[None, :]).sum()
    ties = (members[:, None] == non_members[None, :]).sum()
    return (greater + 0.5 * ties) / (members.size * non_members.size)


MONOTONE = {
    "affine": lambda x: 3.0 * x - 7.0,
    "exp": np.exp,
    "cube": lambda x: x**3,
    "arctan": np.arctan,
}


@SETTINGS
@given(labelled_scores(), st.sampled_from(sorted(MONOTONE)))
def test_auc_is_invariant_under_strictly_increasing_transforms(data, transform):
    scores, labels = data
    assert roc_auc(MONOTONE[transform](scores), labels) == pytest.approx(roc_auc(scores, labels), abs=1e-12)


@SETTINGS
@given(labelled_scores())
def test_swapping_the_labels_gives_one_minus_auc(data):
    scores, labels = data
    assert roc_auc(scores, 1 - labels) == pytest.approx(1.0 - roc_auc(scores, labels), abs=1e-12)


@SETTINGS
@given(labelled_scores())
def test_negating_the_scores_gives_one_minus_auc(data):
    scores, labels = data
    assert roc_auc(-scores, labels) == pytest.approx(1.0 - roc_auc(scores, labels), abs=1e-12)


@SETTINGS
@given(labelled_scores(), st.randoms(use_true_random=False))
def test_auc_and_tpr_do_not_depend_on_the_order_of_the_texts(data, random):
    scores, labels = data
    order = list(range(scores.size))
    random.shuffle(order)
    assert roc_auc(scores[order], labels[order]) == pytest.approx(roc_auc(scores, labels), abs=1e-12)
    for max_fpr in (0.05, 0.3):
        assert tpr_at_fpr(scores[order], labels[order], max_fpr) == tpr_at_fpr(scores, labels, max_fpr)


@SETTINGS
@given(labelled_scores())
def test_auc_is_in_bounds_and_is_the_share_of_pairs_ordered_right(data):
    scores, labels = data
    value = roc_auc(scores, labels)
    assert 0.0 <= value <= 1.0
    assert value == pytest.approx(pairwise_auc(scores, labels), abs=1e-12)


@SETTINGS
@given(labelled_scores(), st.lists(st.floats(0.001, 1.0), min_size=2, max_size=6))
def test_tpr_is_in_bounds_and_monotone_in_the_fpr_budget(data, budgets):
    scores, labels = data
    budgets = sorted(budgets)
    for rule in ("strict", "inclusive"):
        values = [tpr_at_fpr(scores, labels, b, rule) for b in budgets]
        assert all(0.0 <= v <= 1.0 for v in values)
        assert values == sorted(values), (rule, budgets, values)
    for b in budgets:
        assert tpr_at_fpr(scores, labels, b, "strict") <= tpr_at_fpr(scores, labels, b, "inclusive")


@SETTINGS
@given(labelled_scores())
def test_perfect_separation_gives_auc_one_and_full_tpr(data):
    _, labels = data
    scores = labels.astype(np.float64)  # every member above every non-member
    assert roc_auc(scores, labels) == 1.0
    assert tpr_at_fpr(scores, labels, 0.01, "strict") == 1.0


# -- DC-PDD's first-occurrence rule (Eq. 8) ------------------------------------------------------

VOCAB = 12


@st.composite
def token_text(draw, min_size: int = 1, max_size: int = 30):
    """Token ids, their log-probs and a log-frequency table over the vocabulary."""
    n = draw(st.integers(min_size, max_size))
    ids = np.array(draw(st.lists(st.integers(0, VOCAB - 1), min_size=n, max_size=n)), dtype=np.int64)
    logprobs = np.array(draw(st.lists(st.floats(-12.0, 0.0), min_size=n, max_size=n)), dtype=np.float64)
    counts = np.array(draw(st.lists(st.integers(0, 1000), min_size=VOCAB, max_size=VOCAB)), dtype=np.float64)
    log_freq = np.log((counts + 1) / (counts + 1).sum())  # Laplace-smoothed, Eq. 4-5
    return ids, logprobs, log_freq


@SETTINGS
@given(token_text(), st.data(), st.sampled_from([0.01, 10.0, None]))
def test_repeating_a_token_that_already_occurred_does_not_change_dcpdd(text, data, a):
    ids, logprobs, log_freq = text
    position = data.draw(st.integers(0, ids.size - 1), label="position of the repeated token")
    repeated_logprob = data.draw(st.floats(-12.0, 0.0), label="its log-prob at the repeat")
    longer_ids = np.append(ids, ids[position])
    longer_logprobs = np.append(logprobs, repeated_logprob)
    assert dcpdd_score(longer_logprobs, longer_ids, log_freq, a=a) == pytest.approx(
        dcpdd_score(logprobs, ids, log_freq, a=a), rel=1e-12, abs=1e-15
    )


@SETTINGS
@given(token_text(), st.sampled_from([0.01, 10.0, None]))
def test_dcpdd_averages_first_occurrences_only_and_all_tokens_without_the_rule(text, a):
    ids, logprobs, log_freq = text
    alpha = -np.exp(logprobs) * log_freq[ids]  # Eq. 6
    if a is not None:
        alpha = np.minimum(alpha, a)  # Eq. 7
    _, first = np.unique(ids, return_index=True)
    assert dcpdd_score(logprobs, ids, log_freq, a=a) == pytest.approx(
        alpha[np.sort(first)].mean(), rel=1e-12, abs=1e-15
    )
    assert dcpdd_score(logprobs, ids, log_freq, a=a, first_occurrence_only=False) == pytest.approx(
        alpha.mean(), rel=1e-12, abs=1e-15
    )


@SETTINGS
@given(token_text(), st.floats(0.001, 100.0))
def test_dcpdd_is_bounded_by_the_cap(text, a):
    ids, logprobs, log_freq = text
    value = dcpdd_score(logprobs, ids, log_freq, a=a)
    assert 0.0 <= value <= a * (1 + 1e-12)  # a mean of values <= a (float rounding aside)
