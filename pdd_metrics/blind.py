"""The blind baseline: how well the texts alone predict the labels, without any model.

Das, Zhang and Tramèr (2024, "Blind Baselines Beat Membership Inference Attacks for Foundation
Models") show that benchmarks whose members and non-members were collected differently (e.g.
Wikipedia pages from before and after a date) can be told apart by a bag-of-words classifier
that never sees the model. Where that classifier scores high, a detection method's AUC on the
benchmark is no evidence that the model saw the members.

This module's classifier is deliberately plain and fixed (no tuning on the data it is scored on):
TF-IDF of word unigrams and bigrams (sublinear tf) and an L2-regularised logistic regression (C = 10, liblinear),
scored out of fold with stratified k-fold cross-validation under a fixed seed, so every text's
score comes from a classifier that did not see it. Its scores are oriented as every method's:
higher = more likely a member.
"""

from __future__ import annotations

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import make_pipeline

from .evaluation import validate_scores_and_labels


__all__ = ["BLIND_FOLDS", "BLIND_SEED", "TooFewTexts", "blind_scores"]

#: Cross-validation folds and seed of :func:`blind_scores`.
BLIND_FOLDS = 5
BLIND_SEED = 0


class TooFewTexts(ValueError):
    """Fewer than 2 members or 2 non-members: no cross-validation is possible."""


def _classifier():
    return make_pipeline(
        TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=1),
        LogisticRegression(C=10.0, solver="liblinear"),
    )


def blind_scores(texts: list[str], labels, folds: int = BLIND_FOLDS, seed: int = BLIND_SEED) -> np.ndarray:
    """Out-of-fold member probabilities of a bag-of-n-grams classifier trained on the texts alone.

    The texts are put in a canonical order (sorted by text, then label) before the folds are
    drawn, so the scores do not depend on the order the texts come in (e.g. how a multi-process
    run gathered them); they are returned in the input order.

    Args:
        texts: the N texts.
        labels: shape (N,), 1 = member, 0 = non-member; both classes present.
        folds: k of the stratified k-fold; lowered to the size of the smaller class when that has
            fewer texts (at least 2 of each class are needed).
        seed: seed of the fold assignment.

    Returns:
        shape (N,), each text's member probability from the classifier fitted on the other folds.

    Raises:
        TooFewTexts: fewer than 2 texts of a class.
    """
    labels_arr = validate_scores_and_labels(np.zeros(len(texts)), labels)[1]
    smaller_class = int(min(labels_arr.sum(), labels_arr.size - labels_arr.sum()))
    if smaller_class < 2:
        raise TooFewTexts(
            f"the blind baseline needs at least 2 members and 2 non-members for cross-validation; got "
            f"{int(labels_arr.sum())} members and {int(labels_arr.size - labels_arr.sum())} non-members"
        )
    order = sorted(range(len(texts)), key=lambda i: (texts[i], int(labels_arr[i])))
    sorted_texts = np.array([texts[i] for i in order], dtype=object)
    sorted_labels = labels_arr[order]
    scores_sorted = np.empty(len(texts))
    splitter = StratifiedKFold(n_splits=min(folds, smaller_class), shuffle=True, random_state=seed)
    for train, test in splitter.split(sorted_texts, sorted_labels):
        model = _classifier().fit(list(sorted_texts[train]), sorted_labels[train])
        scores_sorted[test] = model.predict_proba(list(sorted_texts[test]))[:, 1]
    scores = np.empty(len(texts))
    scores[order] = scores_sorted
    return scores
