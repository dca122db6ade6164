"""The results schema: the keys the tasks write into lm-eval's results JSON and samples log, and the
settings the tools need to read them back, in one module below both (the tasks write through it, the
tools read through it; neither imports the other to learn a key).

- A metric is written as ``<metric>,<filter>`` (lm-eval's key; this plugin's filter is ``none``):
  :func:`result_key`.
- ``pdd_contamination`` writes each test's metric per source task: ``codec_score/arc_easy``
  (:func:`source_metric`), and a test's metric on a task's reference of known-unseen examples as
  ``reference_codec_score/arc_easy`` (:func:`reference_metric`).
- The membership metrics are ``<method>_auc``, ``<method>_tpr@fpr<5%`` ... (:data:`FPR_BUDGETS`), the
  blind baseline's prefix is :data:`BLIND`, and an AUC from fewer than :data:`FEW_TEXTS` texts of a class
  is reported with a warning.
- An unlabelled ``pdd_custom`` run's texts carry a role, :data:`SUSPECT` or :data:`REFERENCE`, and its
  thresholds read ``target_fpr`` and ``target_fdr`` from the task's metadata (:func:`target_fpr`,
  :func:`target_fdr`: the same readers the task and ``lm-eval-pdd decisions`` use).

This module imports nothing of the project but :mod:`pdd_tasks.errors`.
"""

from __future__ import annotations

from pdd_tasks.errors import SettingError


#: lm-eval's filter name in every metric key this plugin writes.
FILTER = "none"

#: The roles of an unlabelled ``pdd_custom`` run's texts (``doc["role"]`` in the samples log).
SUSPECT, REFERENCE = "suspect", "reference"

DEFAULT_TARGET_FPR = 0.05
DEFAULT_TARGET_FDR = 0.1

#: Metric prefix of the blind baseline (a method name in tables, first row).
BLIND = "blind"

#: FPR budgets of the ``tpr@fpr<x`` metrics, by metric name.
FPR_BUDGETS = {"tpr@fpr<5%": 0.05, "tpr@fpr<1%": 0.01, "tpr@fpr<0.1%": 0.001}

#: Below this many texts of a class, an AUC is reported with a warning about its standard error.
FEW_TEXTS = 30


def result_key(metric: str, filter_name: str = FILTER) -> str:
    """A metric's key in the results JSON: ``codec_score`` -> ``codec_score,none``."""
    return f"{metric},{filter_name}"


def source_metric(metric: str, source_task: str | None) -> str:
    """A dataset-level test's metric for one source task of ``pdd_contamination``: ``codec_score/arc_easy``
    (``codec_score`` where the test runs alone, ``source_task`` None)."""
    return metric if source_task is None else f"{metric}/{source_task}"


def reference_metric(metric: str) -> str:
    """A test's metric on a reference of known-unseen examples: ``codec_score`` -> ``reference_codec_score``."""
    return f"reference_{metric}"


def source_keys(metrics: tuple[str, ...], source_task: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The results JSON's keys of a dataset-level test's ``metrics`` for one source task, and of the same
    metrics on the task's reference: ``(("codec_score/arc_easy,none", ...), ("reference_codec_score/arc_easy,none", ...))``."""
    own = tuple(result_key(source_metric(metric, source_task)) for metric in metrics)
    return own, tuple(result_key(source_metric(reference_metric(metric), source_task)) for metric in metrics)


def _rate(metadata: dict, key: str, default: float, examples: str) -> float:
    value = metadata.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise SettingError(f"metadata {key}={value!r}: expected a rate in (0, 1), e.g. {examples}.")
    return float(value)


def target_fpr(metadata: dict) -> float:
    """The ``target_fpr`` of a ``pdd_custom`` run's metadata (default :data:`DEFAULT_TARGET_FPR`), checked."""
    return _rate(metadata, "target_fpr", DEFAULT_TARGET_FPR, "0.05 or 0.01")


def target_fdr(metadata: dict) -> float:
    """The ``target_fdr`` of a ``pdd_custom`` run's metadata (default :data:`DEFAULT_TARGET_FDR`), checked:
    the false discovery rate at which PTDI identifies members (Benjamini-Hochberg)."""
    return _rate(metadata, "target_fdr", DEFAULT_TARGET_FDR, "0.1 or 0.05")
