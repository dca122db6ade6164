"""What a ``pdd_contamination`` run's results hold, read in one place: per source task, the evidence
of each registered dataset-level test as :func:`pdd_metrics.verdict.decide_table` takes it (each read
by its registry entry), the keys that are damaged or missing, why a test did not apply, and the task's accuracy.

The per-run contamination table (:func:`pdd_tasks.tools.report.tables.contamination_checks`) and the
report's contamination leaderboard (:mod:`pdd_tasks.tools.report.contamination_board`) read them here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pdd_tasks.dataset_tests import DATASET_TESTS
from pdd_tasks.dataset_tests.core import MIN_GROUP_LEAVES
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

    ``groups``: each group or tag of the run (``configs.pdd_contamination.metadata.contamination_groups``)
    -> its leaf tasks among ``tasks`` (through nested groups), in the run's order. A group is read as one
    more benchmark: ``found[group]`` and ``readings[group, test]`` hold each test's group-level evidence,
    formed from its leaves' readings by the test's :attr:`~pdd_tasks.dataset_tests.core.Reading.group`
    (no new request; None where it applied to fewer than
    :data:`~pdd_tasks.dataset_tests.core.MIN_GROUP_LEAVES` of the leaves; a test with no group reading
    is absent from ``found[group]``, so no part of the group's verdict; ``group_reasons`` says why
    either); ``children``: group -> its direct children as the run recorded them (leaves or groups).
    """

    values: dict
    summary: dict
    tasks: list[str]
    found: dict[str, dict]
    readings: dict[tuple[str, str], tuple[dict, dict | None]]
    damaged: dict[tuple[str, str], list[str]]
    groups: dict[str, list[str]] = field(default_factory=dict)
    children: dict[str, list[str]] = field(default_factory=dict)
    group_reasons: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def benchmarks(self) -> list[str]:
        """The rows of a table: the leaf tasks, then the groups."""
        return [*self.tasks, *self.groups]

    def parent(self, benchmark: str) -> str | None:
        """The group that lists ``benchmark`` (a leaf or a group) among its direct children, None at the top."""
        return next((group for group, children in self.children.items() if benchmark in children), None)

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
        """Test -> why it did not apply to ``task``, as the run's summary says (for a group: why it has
        no group-level test)."""
        if task in self.groups:
            return dict(self.group_reasons.get(task, {}))
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
    children = _children(metadata.get("contamination_groups"))
    groups = {group: leaves for group in children if (leaves := _leaves(group, children, tasks))}
    group_reasons: dict[str, dict[str, str]] = {}
    for group, leaves in groups.items():
        found[group] = {}  # a test without a group-level form is not named: no part of the group's verdict
        for name, test in DATASET_TESTS.items():
            applied = [readings[leaf, name] for leaf in leaves if found[leaf][name] is not None]
            if test.reading.group is None:
                group_reasons.setdefault(group, {})[name] = "no group-level test"
                continue
            found[group][name] = None
            if len(applied) < MIN_GROUP_LEAVES:
                why = f"applied to {len(applied)} of its {len(leaves)} leaves (a group's test needs {MIN_GROUP_LEAVES})"
                group_reasons.setdefault(group, {})[name] = why
                continue
            own, reference = test.reading.group(applied)
            evidence = test.reading.evidence(own, reference)
            if evidence is None:
                group_reasons.setdefault(group, {})[name] = "its leaves' values give no p-value"
                continue
            found[group][name] = evidence
            readings[group, name] = (own, reference)
    return ContaminationValues(values, summary, tasks, found, readings, damaged, groups, children, group_reasons)


def _children(recorded) -> dict[str, list[str]]:
    """``contamination_groups`` as the run recorded it (group -> direct children), the entries that
    are not a list of names left out; {} where there is none."""
    if not isinstance(recorded, dict):
        return {}
    return {
        group: [child for child in children if isinstance(child, str)]
        for group, children in recorded.items()
        if isinstance(group, str) and isinstance(children, list)
    }


def _leaves(group: str, children: dict[str, list[str]], tasks: list[str]) -> list[str]:
    """The leaf tasks of ``group`` among ``tasks``, through its nested groups, in the order of ``tasks``."""
    found, pending, seen = set(), [group], set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue  # a cycle in a damaged record
        seen.add(name)
        if name in children:
            pending.extend(children[name])
        elif name in tasks:
            found.add(name)
    return [task for task in tasks if task in found]
