"""What a ``pdd_contamination`` run's results hold, read in one place: per source task, the values
of each test of the verdict (CoDeC, the exchangeability test) as :func:`pdd_metrics.verdict.decide_table`
takes them, the keys that are damaged or missing, why a test did not apply, and the task's accuracy.

The per-run contamination table (:func:`pdd_tasks.tools.report.tables.contamination_checks`) and the
report's contamination leaderboard (:mod:`pdd_tasks.tools.report.contamination_board`) read them here.
"""

from __future__ import annotations

from dataclasses import dataclass


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


#: The tests of the verdict, as named in ``pdd_contamination``'s ``tests``.
VERDICT_TESTS = ("codec", "exchangeability")
#: The metrics (``<name>/<source task>``) each test's cells read; the first is the test's own value.
TEST_KEYS = {
    "codec": ("codec_score", "codec_score_ci95_low", "codec_score_ci95_high", "codec_examples"),
    "exchangeability": ("exchangeability_pvalue", "exchangeability_shards"),
}


def reference_drops(values: dict, task: str) -> tuple[int, int] | None:
    """``(drops, examples)`` of CoDeC on ``task``'s reference of known-unseen examples
    (``reference_codec_score/<task>``), None where the run had none (or it scored no example)."""
    score, examples = (
        values.get(f"reference_codec_score/{task},none"),
        values.get(f"reference_codec_examples/{task},none"),
    )
    if score is None or not examples:
        return None
    return round(score * int(examples)), int(examples)


@dataclass(frozen=True)
class ContaminationValues:
    """What one run's ``pdd_contamination`` results hold, read by :func:`contamination_values`.

    ``values``: ``results.pdd_contamination`` (metrics ``<name>/<source task>,none``); ``summary``: its
    ``configs.pdd_contamination.metadata.contamination`` ({} where the results JSON has none); ``tasks``:
    the source tasks; ``found``: per task the tests' values as :func:`pdd_metrics.verdict.decide_table`
    takes them (``{"codec": (drops, examples) or None, "exchangeability": p-value or None}``, None where
    the test did not apply or its values are unusable); ``damaged``: (task, test) -> the unusable keys
    of a test that ran (a value the checks replaced by None, a key missing, no CoDeC example scored).
    """

    values: dict
    summary: dict
    tasks: list[str]
    found: dict[str, dict]
    damaged: dict[tuple[str, str], list[str]]

    def metric(self, name: str, task: str):
        """The value of metric ``name`` (``codec_score``, ``exchangeability_shards``, ...) for ``task``, or None."""
        return self.values.get(f"{name}/{task},none")

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
    leaderboard, :mod:`pdd_tasks.tools.report.contamination_board`). None without
    ``pdd_contamination`` metrics in the results."""
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
    from pdd_metrics.verdict import REFERENCE

    found: dict[str, dict] = {}
    damaged: dict[tuple[str, str], list[str]] = {}
    for task in tasks:
        found[task] = dict.fromkeys(VERDICT_TESTS)
        for test, names in TEST_KEYS.items():
            keys = [f"{name}/{task},none" for name in names]
            ran = (summary.get(task) or {}).get(test) if isinstance(summary.get(task), dict) else None
            if not any(key in values for key in keys) and not (isinstance(ran, dict) and "not_applicable" not in ran):
                continue  # the test did not run on this task (its reason, if any, is in the summary)
            unusable = [key for key in keys if values.get(key) is None]
            if test == "codec" and not unusable and values[keys[3]] == 0:
                unusable = [keys[3]]  # no example scored: no score, no p-value
            reference = reference_drops(values, task) if test == "codec" else None
            if test == "codec" and isinstance(ran, dict) and ran.get("reference") and reference is None:
                # the run compared with a reference whose values are gone: not against the null instead
                unusable += [f"reference_codec_score/{task},none", f"reference_codec_examples/{task},none"]
            if unusable:
                damaged[task, test] = unusable  # left out of the verdict, as a test that did not apply
            elif test == "codec":
                n = int(values[keys[3]])
                found[task][test] = (round(values[keys[0]] * n), n)
                found[task][REFERENCE] = reference
            else:
                found[task][test] = values[keys[0]]
    return ContaminationValues(values, summary, tasks, found, damaged)
