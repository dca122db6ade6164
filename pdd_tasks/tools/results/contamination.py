"""What a ``pdd_contamination`` run's results hold, read in one place: per source task, the evidence
of each registered dataset-level test as :func:`pdd_metrics.verdict.decide_table` takes it (each read
by its registry entry), the keys that are damaged or missing, why a test did not apply, and the task's accuracy.

The per-run contamination table (:func:`pdd_tasks.tools.report.tables.contamination_checks`) and the
report's contamination leaderboard (:mod:`pdd_tasks.tools.report.contamination_board`) read them here.
"""

from __future__ import annotations

from dataclasses import dataclass

from pdd_tasks.dataset_tests import DATASET_TESTS
from pdd_tasks.results_schema import reference_metric, result_key, source_metric


#: The accuracy-like metric of a standard task, first found first (multiple choice, then generation).
ACCURACY_METRICS = (
    "acc,none",
    "acc_norm,none",
    "exact_match,strict-match",
    "exact_match,flexible-extract",
    "exact_match,none",
)


def accuracy_of(values: dict | None) -> tuple[str, float | None, float | None] | None:
    """A standard task's accuracy-like metric: (its key in the results, e.g. ``"acc,none"``, its value,
    its standard error), the first of :data:`ACCURACY_METRICS` the task's results hold. The value is
    None where it is damaged (:mod:`pdd_tasks.tools.results.values`), the standard error None where there
    is none; None where the task has no such metric (or was not evaluated)."""
    for key in ACCURACY_METRICS:
        if key in (values or {}) and values[key] is None:  # damaged (pdd_tasks.tools.results.values)
            return key, None, None
        if isinstance((values or {}).get(key), (int, float)):
            name, filter_name = key.split(",")
            stderr = values.get(f"{name}_stderr,{filter_name}")
            usable = isinstance(stderr, (int, float)) and not isinstance(stderr, bool) and stderr == stderr
            return key, float(values[key]), float(stderr) if usable else None
    return None


def reference_values(values: dict, task: str, test) -> dict | None:
    """``test``'s result keys on ``task``'s reference of known-unseen examples (``reference_codec_score/<task>``,
    ...), None where the run scored none (a test that does not compare to a reference, or a key absent)."""
    if not test.compares_to_reference:
        return None
    keys = {key: result_key(source_metric(reference_metric(key), task)) for key in test.reading.result_keys}
    if not all(values.get(found) is not None for found in keys.values()):
        return None
    return {key: values[found] for key, found in keys.items()}


@dataclass(frozen=True)
class ContaminationValues:
    """What one run's ``pdd_contamination`` results hold, read by :func:`contamination_values`.

    ``values``: ``results.pdd_contamination`` (metrics ``<name>/<source task>,none``); ``summary``: its
    ``configs.pdd_contamination.metadata.contamination`` ({} where the results JSON has none); ``tasks``:
    the source tasks; ``found``: task -> test (every registered test,
    :data:`pdd_tasks.dataset_tests.DATASET_TESTS`) -> its :class:`pdd_metrics.verdict.Evidence` as its
    entry's :class:`~pdd_tasks.dataset_tests.core.Reading` reads it, as
    :func:`pdd_metrics.verdict.decide_table` takes it (None where the test did not apply or its values
    are unusable); ``readings``: (task, test) -> (its result keys' values, the reference's or None) of
    each test in ``found``; ``damaged``: (task, test) -> the unusable keys of a test that ran (a value
    the checks replaced by None, a key missing, values that give no p-value).
    """

    values: dict
    summary: dict
    tasks: list[str]
    found: dict[str, dict]
    readings: dict[tuple[str, str], tuple[dict, dict | None]]
    damaged: dict[tuple[str, str], list[str]]

    def metric(self, name: str, task: str):
        """The value of metric ``name`` (``codec_score``, ``exchangeability_shards``, ...) for ``task``, or None."""
        return self.values.get(result_key(source_metric(name, task)))

    def shown(self, task: str, test: str) -> str | None:
        """``test``'s decisive number on ``task`` in a few words (its reading's ``shown``), None where it
        is not in the verdict."""
        if self.found[task].get(test) is None:
            return None
        return DATASET_TESTS[test].reading.shown(*self.readings[task, test])

    def not_applicable(self, task: str) -> dict[str, str]:
        """Test -> why it did not apply to ``task``, as the run's summary says."""
        tests = self.summary.get(task) if isinstance(self.summary.get(task), dict) else {}
        return {
            test: info["not_applicable"]
            for test, info in tests.items()
            if isinstance(info, dict) and info.get("not_applicable")
        }


def contamination_values(results: dict) -> ContaminationValues | None:
    """The tests' values per source task of a ``pdd_contamination`` run (:class:`ContaminationValues`),
    the one place that reads them from a results JSON (the contamination table,
    :func:`pdd_tasks.tools.report.tables.contamination_checks`, and the report's contamination
    leaderboard, :mod:`pdd_tasks.tools.report.contamination_board`), each test through its registry
    entry's :class:`~pdd_tasks.dataset_tests.core.Reading`. None without ``pdd_contamination`` metrics
    in the results."""
    values = results.get("results", {}).get("pdd_contamination")
    if not isinstance(values, dict) or not values:
        return None
    metadata = (results.get("configs", {}).get("pdd_contamination") or {}).get("metadata") or {}
    summary = metadata.get("contamination") if isinstance(metadata.get("contamination"), dict) else {}
    # the source tasks: the run's summary, else the names in the metric keys ("codec_score/<task>,none")
    tasks = list(summary) or list(
        dict.fromkeys(key.split(",", 1)[0].split("/", 1)[1] for key in values if "/" in key.split(",", 1)[0])
    )
    tasks = [task for task in tasks if not task.endswith("_stderr")]
    if not tasks:
        return None
    found: dict[str, dict] = {}
    readings: dict[tuple[str, str], tuple[dict, dict | None]] = {}
    damaged: dict[tuple[str, str], list[str]] = {}
    for task in tasks:
        found[task] = dict.fromkeys(DATASET_TESTS)
        for name, test in DATASET_TESTS.items():
            keys = [result_key(source_metric(key, task)) for key in test.reading.result_keys]
            ran = (summary.get(task) or {}).get(name) if isinstance(summary.get(task), dict) else None
            if not any(key in values for key in keys) and not (isinstance(ran, dict) and "not_applicable" not in ran):
                continue  # the test did not run on this task (its reason, if any, is in the summary)
            unusable = [key for key in keys if values.get(key) is None]
            reference = reference_values(values, task, test)
            if isinstance(ran, dict) and ran.get("reference") and reference is None:
                # the run compared with a reference whose values are gone: not against the null instead
                unusable += [result_key(source_metric(reference_metric(key), task)) for key in test.reading.result_keys]
            own = {key: values.get(found_key) for key, found_key in zip(test.reading.result_keys, keys, strict=True)}
            evidence = None if unusable else test.reading.evidence(own, reference)
            if evidence is None:
                damaged[task, name] = unusable or keys  # left out of the verdict, as a test that did not apply
            else:
                found[task][name] = evidence
                readings[task, name] = (own, reference)
    return ContaminationValues(values, summary, tasks, found, readings, damaged)
