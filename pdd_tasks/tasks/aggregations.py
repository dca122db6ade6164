"""Dataset-level metrics as lm-eval aggregations, with their standard errors.

Each receives the per-text ``(score, label)`` pairs a pdd task's ``process_results`` produced
(label 1 = member, higher score = more likely a member) and returns one number. TPR at a fixed FPR
uses the strict convention of the Min-K% and DC-PDD reference code (largest TPR with FPR < the
target), which the metric names state with ``<``.

Standard errors: lm-eval 0.4.13 computes ``<metric>_stderr`` only for a fixed list of its own
aggregations (``lm_eval.api.metrics.stderr_for_metric``; every other aggregation gets ``N/A``).
each aggregation here carries its own as its attribute ``stderr``
(:func:`pdd_tasks.registry.with_stderr`): DeLong's closed form for AUC and a stratified bootstrap of
``bootstrap_iters`` draws (the number the harness passes; 100,000 by default) for TPR at FPR
(:mod:`pdd_metrics.intervals`). The harness asks for it through patch ``stderr-for-metric`` of
:mod:`pdd_tasks.lm_eval_patches`; every other aggregation still goes to lm-eval's own function.

A dataset of one class (e.g. cut so by ``--limit``) has no AUC or TPR: pdd_metrics' ``OneClassError``
reaches the user as :class:`OneClassDataset`, a :class:`~pdd_tasks.errors.UserError` with the same message.

The dataset-level methods (:mod:`pdd_tasks.tasks.dataset_methods`: the blind baseline and EM-MIA)
score a text from every text of the run, so their per-text items are not scores: their aggregations
(:data:`BLIND_AGGREGATIONS`, :data:`EM_MIA_AGGREGATIONS`) first turn the items of the whole run into
``(score, label)`` pairs, once per run (the blind baseline: ``(text, label)`` items to out-of-fold
classifier scores, :func:`pdd_metrics.blind.blind_scores`; EM-MIA: each text's column of the ReCaLL
matrix to :func:`pdd_metrics.em_mia_scores`), then compute the same metrics as for every method.
"""

from __future__ import annotations

import functools
import logging
import math

import numpy as np

from pdd_metrics import (
    Identification,
    calibrate_threshold,
    dataset_inference_test,
    em_mia_scores,
    flag_members,
    identify_members,
    roc_auc,
    suspect_vs_reference_test,
    tpr_at_fpr,
)
from pdd_metrics.blind import TooFewTexts, blind_scores
from pdd_metrics.evaluation import OneClassError
from pdd_metrics.intervals import (
    delong_auc_stderr,
    null_auc_standard_error,
    smallest_fpr_step,
    tpr_at_fpr_stderr,
)
from pdd_tasks.errors import UserError
from pdd_tasks.registry import EM_MIA, with_stderr
from pdd_tasks.results_schema import BLIND, FEW_TEXTS, FPR_BUDGETS


logger = logging.getLogger(__name__)

_warned: set[tuple] = set()


def _warn_once_per(key: tuple, message: str, *args) -> None:
    """Log ``message`` at warning level once per ``key`` in this process (the harness aggregates each
    metric, and the standard error's bootstrap calls the aggregation many times)."""
    if key not in _warned:
        _warned.add(key)
        logger.warning(message, *args)


def _unzip(items):
    scores, labels = zip(*items, strict=True)
    return list(scores), list(labels)


def _warn_sample_size(labels: list[int]) -> None:
    """Say how little a handful of texts can tell (once per class sizes and metric kind)."""
    members = sum(1 for label in labels if label == 1)
    non_members = len(labels) - members
    if 0 < min(members, non_members) < FEW_TEXTS:
        _warn_once_per(
            ("auc", members, non_members),
            "AUC from %d members and %d non-members only: its standard error is about %.2f (at AUC 0.5), so "
            "differences smaller than about %.2f between methods are noise. Score more texts (at least %d per class).",
            members,
            non_members,
            null_auc_standard_error(members, non_members),
            2 * null_auc_standard_error(members, non_members),
            FEW_TEXTS,
        )


class OneClassDataset(UserError, OneClassError):
    """The scored texts are all of one class (AUC and TPR are undefined); the message names the fix."""


def _one_class_is_a_user_error(aggregate):
    """``aggregate``, raising :class:`OneClassDataset` (a :class:`UserError`) where pdd_metrics raises
    ``OneClassError``: the message is pdd_metrics', shown without a traceback."""

    def checked(items) -> float:
        try:
            return aggregate(items)
        except OneClassDataset:
            raise
        except OneClassError as error:
            raise OneClassDataset(str(error)) from None

    checked.__name__ = checked.__qualname__ = aggregate.__name__
    checked.__doc__ = aggregate.__doc__
    return checked


def auc_stderr(items, iters: int) -> float:
    """DeLong's standard error (closed form; ``iters`` is not used)."""
    return delong_auc_stderr(*_unzip(items))


@with_stderr(auc_stderr)
@_one_class_is_a_user_error
def auc(items) -> float:
    scores, labels = _unzip(items)
    _warn_sample_size(labels)
    return roc_auc(scores, labels)


def _warn_if_unresolved(labels, max_fpr: float) -> None:
    """Say (once per budget and size) where the FPR budget is below what the non-members resolve."""
    n_non_members = len(labels) - int(np.sum(labels))
    if n_non_members and smallest_fpr_step(n_non_members) >= max_fpr:
        _warn_once_per(
            ("tpr", n_non_members, max_fpr),
            "TPR@FPR<%g%%: with %d non-members the smallest non-zero FPR is 1/%d = %.2g%%, so no false "
            "positive fits the budget: the value is the TPR at FPR 0, not a %g%% operating point "
            "(more than %d non-members are needed).",
            100 * max_fpr,
            n_non_members,
            n_non_members,
            100 / n_non_members,
            100 * max_fpr,
            math.floor(1 / max_fpr),
        )


def _tpr_metric(max_fpr: float):
    @_one_class_is_a_user_error
    def aggregate(items) -> float:
        scores, labels = _unzip(items)
        _warn_if_unresolved(labels, max_fpr)
        return tpr_at_fpr(scores, labels, max_fpr=max_fpr, rule="strict")

    def stderr(items, iters: int) -> float:
        return tpr_at_fpr_stderr(*_unzip(items), max_fpr=max_fpr, rule="strict", iters=iters)

    aggregate.__name__ = aggregate.__qualname__ = f"tpr_at_fpr_below_{max_fpr:g}"
    return with_stderr(stderr)(aggregate)


#: Metric name -> aggregation over ``(score, label)`` items (each carries its ``stderr``).
AGGREGATIONS = {"auc": auc, **{name: _tpr_metric(budget) for name, budget in FPR_BUDGETS.items()}}


# -- the blind baseline: items are (text, label) pairs ---------------------------------------------


@functools.lru_cache(maxsize=4)
def _blind_items(items: tuple) -> tuple | None:
    """``(score, label)`` items of the blind classifier's out-of-fold scores (fitted once per
    dataset; every blind metric and its stderr reuse it), or None where a class has fewer than 2
    texts (no cross-validation possible: the blind metrics are then NaN, with a warning)."""
    texts, labels = zip(*items, strict=True)
    try:
        scores = blind_scores(list(texts), list(labels))
    except TooFewTexts as error:
        logger.warning("blind baseline not computed (its metrics are NaN): %s", error)
        return None
    return tuple(zip(scores.tolist(), labels, strict=True))


def _rescored(prefix: str, scored_items, aggregate):
    """``aggregate`` and its standard error over the ``(score, label)`` items that
    ``scored_items(items)`` makes of a dataset-level method's items (None: the metrics are NaN)."""
    stderr = aggregate.stderr

    def rescored_aggregate(items) -> float:
        scored = scored_items(tuple(map(tuple, items)))
        return math.nan if scored is None else aggregate(scored)

    def rescored_stderr(items, iters: int) -> float:
        scored = scored_items(tuple(map(tuple, items)))
        return math.nan if scored is None else stderr(scored, iters)

    rescored_aggregate.__name__ = rescored_aggregate.__qualname__ = f"{prefix}_{aggregate.__name__}"
    return with_stderr(rescored_stderr)(rescored_aggregate)


#: Metric name -> aggregation over ``(text, label)`` items (the blind baseline).
BLIND_AGGREGATIONS = {name: _rescored(BLIND, _blind_items, aggregate) for name, aggregate in AGGREGATIONS.items()}


# -- EM-MIA: items are (place, column of R, initial score, label) ---------------------------------

#: EM-MIA's updates (the authors' ``emmia.py``: ``--max_iter`` 10).
EM_MIA_ITERATIONS = 10


class IncompleteEmMiaSet(UserError):
    """The EM-MIA items of a run do not make up the whole scored set (each text's column of R)."""


def _em_mia_places(items) -> dict[int, tuple]:
    """Place -> ``(column, initial, label)`` of the distinct texts of the scored set, from the per-text
    items; copies of a text (kept with ``keep_duplicates``) share its place and its values."""
    placed: dict[int, tuple] = {}
    for place, column, initial, label in items:
        placed.setdefault(int(place), (column, initial, label))
    m = len(placed)
    if sorted(placed) != list(range(m)) or any(len(column) != m for column, _, _ in placed.values()):
        raise IncompleteEmMiaSet(
            f"EM-MIA: the {len(items)} scored texts do not each carry a column of the ReCaLL matrix of the "
            f"{m} distinct texts of the set (a text scored after a set of another size, or a text missing). Its "
            f"requests must be built for the set the run scores: run the task again without --cache_requests, and "
            f"with the same --limit/--samples on every process."
        )
    return placed


def em_mia_matrix(items) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """``(R, f_0, labels)`` of the distinct texts of the scored set from the per-text items of ``em_mia_*``.

    Each item is ``(place, column, initial, label)``: ``place`` the text's index among the distinct
    texts of the scored set (the prefixes; copies of a text share it), ``column[i] = R[i, j] =
    LL(x_j | x_i) / LL(x_j)`` for the text x_j at that place, ``initial`` its score f_0, ``label`` its label.
    """
    placed = _em_mia_places(items)
    columns, initial, labels = zip(*(placed[j] for j in range(len(placed))), strict=True)
    return np.column_stack([np.asarray(column, dtype=float) for column in columns]), np.array(initial), list(labels)


@functools.lru_cache(maxsize=4)
def _em_mia_place_scores(items: tuple) -> tuple[float, ...]:
    """EM-MIA's final score of each distinct text (:func:`pdd_metrics.em_mia_scores` over the matrix of
    :func:`em_mia_matrix`; computed once per run, every metric and stderr reuses it)."""
    matrix, initial, _ = em_mia_matrix(items)
    return tuple(em_mia_scores(matrix, initial, iterations=EM_MIA_ITERATIONS).tolist())


def _em_mia_items(items: tuple) -> tuple:
    """``(score, label)`` items of EM-MIA's final scores, one per scored text (a copy kept with
    ``keep_duplicates`` gets its text's score)."""
    scores = _em_mia_place_scores(items)
    return tuple((scores[int(place)], int(label)) for place, _, _, label in items)


def _em_mia_scored(items) -> tuple:
    """:func:`_em_mia_items` of items whose parts may be lists (hashable for its cache)."""
    return _em_mia_items(tuple((int(p), tuple(c), float(f), int(label)) for p, c, f, label in items))


def em_mia_final_scores(items) -> list[float]:
    """EM-MIA's final score of each distinct text of the scored set (by place), from the per-text items."""
    return list(_em_mia_place_scores(tuple((int(p), tuple(c), float(f), int(label)) for p, c, f, label in items)))


#: Metric name -> aggregation over EM-MIA's ``(place, column, initial, label)`` items.
EM_MIA_AGGREGATIONS = {name: _rescored(EM_MIA, _em_mia_scored, aggregate) for name, aggregate in AGGREGATIONS.items()}


# -- unlabelled texts (pdd_custom without labels): items are (score, is_suspect) pairs ------------


class TooFewReferenceTexts(UserError):
    """The reference set of an unlabelled run is too small to calibrate a threshold on."""


def _split_roles(items, target_fpr: float | None = None) -> tuple[list[float], list[float]]:
    """Scores of the suspect texts (is_suspect = 1) and of the known non-members (0); with
    ``target_fpr``, the reference set is checked (none or one text is an error; fewer than
    1 / target_fpr a warning)."""
    suspect = [score for score, is_suspect in items if is_suspect]
    reference = [score for score, is_suspect in items if not is_suspect]
    if target_fpr is not None:
        _check_reference_size(len(suspect), len(reference), target_fpr)
    return suspect, reference


def _check_reference_size(suspects: int, references: int, target_fpr: float) -> None:
    if references < 2:
        raise TooFewReferenceTexts(
            f"{references} reference text(s) were scored (and {suspects} suspect texts): a threshold and a rank "
            f"test need at least 2 known non-members, and {math.ceil(1 / target_fpr)} for target_fpr={target_fpr}. "
            f"Give more texts in reference_files; with --limit, note that the reference texts come after the "
            f"suspect texts, so a --limit below the number of suspect texts leaves none (drop --limit)."
        )
    if references < math.ceil(1 / target_fpr):
        _warn_once_per(
            ("reference", references, target_fpr),
            "only %d reference texts were scored (--limit?): too few for target_fpr=%s; the threshold is the "
            "highest reference score (FPR 0 on the reference set). Give at least %d known non-members.",
            references,
            target_fpr,
            math.ceil(1 / target_fpr),
        )


def suspect_mean(items) -> float:
    """Mean score of the suspect texts (no reference set: nothing to decide against)."""
    suspect, _ = _split_roles(items)
    return float(np.mean(suspect))


def identification(items, target_fpr: float, target_fdr: float) -> Identification:
    """PTDI on ``(score, is_suspect)`` items (:func:`pdd_metrics.identify_members`): each suspect
    text's conformal p-value against the reference texts, and the texts Benjamini-Hochberg
    identifies at ``target_fdr``, in the items' order. Warns (once per size) where the reference
    set is too small for any p-value to reach ``target_fdr``."""
    suspect, reference = _split_roles(items, target_fpr)
    if 1 / (len(reference) + 1) > target_fdr:
        _warn_once_per(
            ("fdr", len(reference), target_fdr),
            "PTDI identifies no text: with %d reference texts no conformal p-value is below 1/%d = %.3g, above "
            "target_fdr=%s. Give at least %d known non-members (many more for power), or raise target_fdr.",
            len(reference),
            len(reference) + 1,
            1 / (len(reference) + 1),
            target_fdr,
            math.ceil(1 / target_fdr - 1),
        )
    return identify_members(suspect, reference, target_fdr)


def contamination_aggregations(target_fpr: float, target_fdr: float) -> dict:
    """``name -> (aggregation, higher_is_better)`` for suspect texts against known non-members;
    ``identified`` is the number of suspect texts PTDI identifies at ``target_fdr``."""

    def threshold(items) -> float:
        return calibrate_threshold(_split_roles(items, target_fpr)[1], target_fpr)

    def flagged(items) -> float:
        suspect, reference = _split_roles(items, target_fpr)
        return float(np.mean(flag_members(suspect, calibrate_threshold(reference, target_fpr))))

    def suspect_auc(items) -> float:
        return suspect_vs_reference_test(*_split_roles(items, target_fpr)).auc

    def pvalue(items) -> float:
        return suspect_vs_reference_test(*_split_roles(items, target_fpr)).p_value

    def identified(items) -> int:
        return identification(items, target_fpr, target_fdr).count

    return {
        "threshold": (threshold, True),
        "flagged": (flagged, True),
        "suspect_auc": (suspect_auc, True),
        "pvalue": (pvalue, False),
        "identified": (identified, True),
    }


# -- dataset inference (pdd_custom unlabelled with references): items are (features, is_suspect) -----


def dataset_inference_aggregations(seed: int) -> dict:
    """``name -> (aggregation, higher_is_better)`` of Maini et al.'s dataset inference
    (:func:`pdd_metrics.dataset_inference_test`); each item is (every method's score of a text,
    is_suspect)."""

    def result(items):
        suspect = [features for features, is_suspect in items if is_suspect]
        reference = [features for features, is_suspect in items if not is_suspect]
        if min(len(suspect), len(reference)) < 4:  # e.g. a reference set cut by --limit
            _warn_once_per(
                ("dataset_inference", len(suspect), len(reference)),
                "no dataset inference (its metrics are NaN): it needs at least 4 suspect and 4 reference texts "
                "(half to fit, half to test); %d and %d were scored (--limit?).",
                len(suspect),
                len(reference),
            )
            return None
        return dataset_inference_test(suspect, reference, seed=seed)

    def p_value(items) -> float:
        test = result(items)
        return math.nan if test is None else test.p_value

    def t_statistic(items) -> float:
        test = result(items)
        return math.nan if test is None else test.t_statistic

    return {"dataset_inference_pvalue": (p_value, False), "dataset_inference_t": (t_statistic, True)}
