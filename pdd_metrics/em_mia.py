"""EM-MIA (Kim et al., EACL 2026, "Detecting Training Data of Large Language Models via Expectation
Maximization", arXiv 2410.07582; code: github.com/gyuwankim/em-mia, ``emmia.py``): membership scores
of a test set refined without labels, from ReCaLL scores of every text after every other.

Input: the ReCaLL matrix ``R[i, j] = LL(x_j | x_i) / LL(x_j)`` (LL the mean token log-likelihood;
text ``x_i`` as the prefix of text ``x_j``: the authors' ``ReCaLL-all``, n x n forward passes) and
initial membership scores ``f_0`` (e.g. Loss or Min-K%++). Each iteration alternates:

- prefix scores ``g(i) = AUC(R[i, :], f > median(f))``: how well ``x_i`` as a prefix separates the
  texts that the current scores call members (the ``AUC-ROC`` update of ``emmia.py``);
- membership scores ``f(i) = -g(i)``: a text that is a good ReCaLL prefix is a non-member (ReCaLL's
  premise), so the negated prefix score is the new membership score (``NegPref``).

Higher = more likely a member. :func:`em_mia_scores` is the loop; the task metric ``em_mia`` builds
R from a run's answers and runs it over the scored set (``pdd_tasks/tasks/aggregations.py``;
docs/methods.md, "EM-MIA").
"""

from __future__ import annotations

import numpy as np


def _auc(scores: np.ndarray, positives: np.ndarray) -> float:
    """The area under the ROC curve of ``scores`` for the boolean ``positives`` (ties count one half,
    as ``sklearn.metrics.auc(roc_curve(...))``); NaN where one class is empty."""
    positive, negative = scores[positives], scores[~positives]
    if positive.size == 0 or negative.size == 0:
        return float("nan")
    greater = (positive[:, None] > negative[None, :]).sum()
    ties = (positive[:, None] == negative[None, :]).sum()
    return float((greater + 0.5 * ties) / (positive.size * negative.size))


def em_mia_scores(recall_matrix: np.ndarray, initial_scores: np.ndarray, iterations: int = 10) -> np.ndarray:
    """EM-MIA's membership scores after ``iterations`` updates (``emmia.py``, ``-m NegPref -p AUC-ROC``;
    its ``--max_iter`` default 10).

    Args:
        recall_matrix: ``R[i, j] = LL(x_j | x_i) / LL(x_j)``, shape (n, n): row i = every text scored
            after text i (the diagonal, a text after itself, included as in the authors' code).
        initial_scores: f_0, shape (n,), higher = member; NaN counts as 0 (as the authors' code).
        iterations: updates of the prefix and membership scores (>= 1).

    Returns:
        f after the last update, shape (n,); a text whose prefix score is undefined (every current
        score equal, so no text is above the median) gets 0, as in the authors' code.

    >>> R = np.array([[1.0, 1.2, 0.9], [1.1, 1.0, 1.3], [0.8, 1.4, 1.0]])
    >>> em_mia_scores(R, np.array([0.0, 1.0, 2.0]), iterations=1)  # only text 2 above the median: AUCs 0, 1, 1/2
    array([ 0. , -1. , -0.5])
    """
    matrix = np.asarray(recall_matrix, dtype=float)
    scores = np.nan_to_num(np.asarray(initial_scores, dtype=float), nan=0.0)
    if matrix.ndim != 2 or matrix.shape != (scores.size, scores.size) or scores.ndim != 1:
        raise ValueError(
            f"recall_matrix must be n x n and initial_scores n values for the same n texts; got shapes "
            f"{matrix.shape} and {scores.shape}"
        )
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise ValueError(f"iterations must be a whole number >= 1; got {iterations!r}")
    for _ in range(iterations):
        members = scores > np.median(scores)
        prefix_scores = np.array([_auc(row, members) for row in matrix])
        scores = np.nan_to_num(-prefix_scores, nan=0.0) + 0.0  # + 0.0: no negative zeros
    return scores
