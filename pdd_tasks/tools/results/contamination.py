"""What a ``pdd_contamination`` run's results hold, read in one place: per source task, the evidence
of each registered dataset-level test as :func:`pdd_metrics.verdict.decide_table` takes it (each read
by its registry entry), the keys that are damaged or missing, why a test did not apply, and the task's accuracy.

:func:`contamination_values` reads one results JSON (each test's keys from
:func:`pdd_tasks.results_schema.source_keys`); :func:`contamination_rows` turns that reading into plain rows
(:class:`RunContamination`: a :class:`BenchmarkRow` per benchmark, a :class:`TestRow` per test, every number and
string a table or board shows), and :func:`run_contamination` decides them in the run's own table;
:func:`read_contamination` reads every run given once, gathers each model's cells over its runs
(:class:`ModelContamination`), and decides every run's and every model's table in one call
(:func:`pdd_metrics.verdict.decide_tables`). The per-run
contamination table (:func:`pdd_tasks.tools.report.tables.contamination_checks`) and the report's
contamination leaderboard (:mod:`pdd_tasks.tools.report.contamination_board`) only format these rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from pdd_metrics.verdict import Decision, Evidence, decide_table, decide_tables
from pdd_tasks.dataset_tests import DATASET_TESTS
from pdd_tasks.dataset_tests.core import MIN_GROUP_LEAVES
from pdd_tasks.results_schema import result_key, source_keys, source_metric
from pdd_tasks.tools.results.runs import Run


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
    children = _children(metadata.get("contamination_groups"))
    groups = {group: leaves for group in children if (leaves := _leaves(group, children, tasks))}
    found: dict[str, dict] = {}
    readings: dict[tuple[str, str], tuple[dict, dict | None]] = {}
    damaged: dict[tuple[str, str], list[str]] = {}
    for task in tasks:
        found[task] = dict.fromkeys(DATASET_TESTS)
        for name, test in DATASET_TESTS.items():
            keys, reference_keys = source_keys(test.reading.result_keys, task)
            ran = (summary.get(task) or {}).get(name) if isinstance(summary.get(task), dict) else None
            if not any(key in values for key in keys) and not (isinstance(ran, dict) and "not_applicable" not in ran):
                continue  # the test did not run on this task (its reason, if any, is in the summary)
            unusable = [key for key in keys if values.get(key) is None]
            scored = test.compares_to_reference and all(values.get(key) is not None for key in reference_keys)
            reference = (
                dict(zip(test.reading.result_keys, map(values.get, reference_keys), strict=True)) if scored else None
            )
            if isinstance(ran, dict) and ran.get("reference") and reference is None:
                # the run compared with a reference whose values are gone: not against the null instead
                unusable += reference_keys
            own = {key: values.get(found_key) for key, found_key in zip(test.reading.result_keys, keys, strict=True)}
            evidence = None if unusable else test.reading.evidence(own, reference)
            if evidence is None:
                damaged[task, name] = unusable or keys  # left out of the verdict, as a test that did not apply
            else:
                found[task][name] = evidence
                readings[task, name] = (own, reference)
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


# -- the reading as plain rows: what the contamination table and the board show ---------------------


@dataclass(frozen=True)
class TestRow:
    """One registered test on one benchmark of a run, as read (:func:`run_contamination`).

    ``in_table``: whether the test is named in the benchmark's verdict table (a group's test without a
    group-level form is not); ``evidence``: as :func:`pdd_metrics.verdict.decide_table` takes it (None
    where it did not apply or its values are unusable); ``values`` and ``reference``: its result keys'
    values and the reference's (None where the run scored none), both None without evidence; ``shown``:
    its decisive number in a few words (its reading's ``shown``), None without evidence; ``advice``: what would
    decide the benchmark where this test's weaker null decides an "inconclusive" verdict (its reading's
    ``advice``), None without evidence; ``unusable``:
    the keys that left out a test that ran (None where none did), split into ``damaged_keys`` (a value
    the checks replaced by None), ``missing_keys`` and ``no_p_value_keys`` (values that give no p-value).
    """

    test: str
    in_table: bool
    evidence: Evidence | None = None
    values: dict | None = None
    reference: dict | None = None
    shown: str | None = None
    advice: str | None = None
    unusable: tuple[str, ...] | None = None
    damaged_keys: tuple[str, ...] = ()
    missing_keys: tuple[str, ...] = ()
    no_p_value_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class BenchmarkRow:
    """One benchmark (a leaf task or a group) of a run, as read (:func:`run_contamination`).

    ``group``: the group that lists it among its direct children (None at the top); ``leaves``: a group's
    count of leaf tasks (None for a leaf); ``evaluated``: whether the run evaluated the task itself (its
    own results are there); ``accuracy``: :func:`accuracy_of` its results; ``not_applicable``: test ->
    why it did not apply, as the run's summary says (any test the summary names, in its order; for a
    group: why it has no group-level test); ``tests``: every registered test's :class:`TestRow`, in
    registry order. Its verdict is the run's (:attr:`RunContamination.decisions`) or the model's
    (:attr:`ModelContamination.decisions`)."""

    name: str
    group: str | None
    leaves: int | None
    evaluated: bool
    accuracy: tuple[str, float | None, float | None] | None
    not_applicable: dict[str, str]
    tests: dict[str, TestRow]

    @property
    def found(self) -> dict[str, Evidence | None]:
        """Test -> its evidence, the tests of its verdict table only, as :func:`pdd_metrics.verdict.decide_table` takes it."""
        return {name: row.evidence for name, row in self.tests.items() if row.in_table}


@dataclass(frozen=True)
class RunContamination:
    """One run's ``pdd_contamination`` results as rows: ``benchmarks`` (the leaf tasks, then the groups, as
    :attr:`ContaminationValues.benchmarks`), ``tasks`` (the leaves), ``groups`` (group -> its leaf tasks),
    ``children`` (group -> its direct children as recorded), ``has_summary`` (whether the results JSON holds
    the run's contamination summary) and ``decisions``: benchmark -> its verdict in the run's own table
    (Holm's family: the run's p-values; {} in :func:`contamination_rows`, before they are decided)."""

    benchmarks: list[BenchmarkRow]
    tasks: list[str]
    groups: dict[str, list[str]]
    children: dict[str, list[str]]
    has_summary: bool
    decisions: dict[str, Decision] = field(default_factory=dict)

    @property
    def found(self) -> dict[str, dict[str, Evidence | None]]:
        """Benchmark -> test -> its evidence: the run's table as :func:`pdd_metrics.verdict.decide_table` takes it."""
        return {row.name: row.found for row in self.benchmarks}

    @property
    def p_values(self) -> int:
        """The count of p-values in the run's Holm family."""
        return sum(p is not None for d in self.decisions.values() for p in d.p_values.values())


def _test_row(read: ContaminationValues, benchmark: str, name: str) -> TestRow:
    """:class:`TestRow` of test ``name`` on ``benchmark``, from the run's values."""
    in_table = name in read.found[benchmark]
    if read.found[benchmark].get(name) is not None:
        own, reference = read.readings[benchmark, name]
        reading = DATASET_TESTS[name].reading
        evidence = read.found[benchmark][name]
        return TestRow(
            name, in_table, evidence, own, reference, reading.shown(own, reference), reading.advice(own, reference)
        )
    keys = read.damaged.get((benchmark, name))
    if keys is None:
        return TestRow(name, in_table)
    values = read.values
    return TestRow(
        name,
        in_table,
        unusable=tuple(keys),
        damaged_keys=tuple(k for k in keys if k in values and values[k] is None),
        missing_keys=tuple(k for k in keys if k not in values),
        no_p_value_keys=tuple(k for k in keys if values.get(k) is not None),
    )


def contamination_rows(results: dict) -> RunContamination | None:
    """One results JSON's ``pdd_contamination`` results as rows (:class:`RunContamination`), not yet decided;
    None without ``pdd_contamination`` metrics in the results (as :func:`contamination_values`)."""
    read = contamination_values(results)
    if read is None:
        return None
    evaluated = results["results"]
    rows = [
        BenchmarkRow(
            name=benchmark,
            group=read.parent(benchmark),
            leaves=len(read.groups[benchmark]) if benchmark in read.groups else None,
            evaluated=bool(evaluated.get(benchmark)),
            accuracy=accuracy_of(evaluated.get(benchmark)),
            not_applicable=read.not_applicable(benchmark),
            tests={name: _test_row(read, benchmark, name) for name in DATASET_TESTS},
        )
        for benchmark in read.benchmarks
    ]
    return RunContamination(rows, list(read.tasks), dict(read.groups), dict(read.children), bool(read.summary))


def run_contamination(results: dict) -> RunContamination | None:
    """:func:`contamination_rows` of one results JSON, each benchmark decided in the run's own table
    (:func:`pdd_metrics.verdict.decide_table`); None without ``pdd_contamination`` metrics in the results."""
    rows = contamination_rows(results)
    return None if rows is None else replace(rows, decisions=decide_table(rows.found))


@dataclass(frozen=True)
class ModelContamination:
    """One model's contamination results over the runs given (:func:`read_contamination`): ``identity`` (what its
    name resolves to, :attr:`pdd_tasks.tools.results.runs.Run.model_identity`), ``name`` (the name its first run
    gives it), ``cells``: benchmark -> (the run used, its row), the newest run of the model that tested it (the
    later given where two share a date), ``decisions``: benchmark -> its verdict in the model's table (Holm's
    family: every p-value of the model's cells), and ``spellings``: each name its runs give it -> the first run
    that gives it (more than one where it is named in several ways)."""

    identity: str
    name: str
    cells: dict[str, tuple[Run, BenchmarkRow]]
    decisions: dict[str, Decision]
    spellings: dict[str, Run]


@dataclass(frozen=True)
class ContaminationReading:
    """The ``pdd_contamination`` results of every run given, read once: ``runs`` (each run that holds them, in
    the order given, with its rows), ``models`` (in the order their first run is given), ``superseded``
    ((model identity, benchmark, the run left out) where a newer run of the model tested the benchmark),
    and ``groups`` (:func:`board_groups` of every run given, {} where no run holds contamination results)."""

    runs: list[tuple[Run, RunContamination]]
    models: list[ModelContamination]
    superseded: list[tuple[str, str, Run]]
    groups: dict[str, list[str]]


def read_contamination(runs: list[Run]) -> ContaminationReading:
    """Every run's ``pdd_contamination`` results as rows (:func:`contamination_rows`), and each model's cells over
    its runs (:class:`ModelContamination`: one run per (model, benchmark), the newest); then every table decided
    in one call (:func:`pdd_metrics.verdict.decide_tables`): each run's own, and each model's."""
    groups = board_groups([run.results for run in runs])
    read = [(run, rows) for run in runs if (rows := contamination_rows(run.results))]
    spellings: dict[str, dict[str, Run]] = {}  # each model (its identity) -> its names, the first run of each
    for run, _ in read:
        spellings.setdefault(run.model_identity, {}).setdefault(run.model, run)
    cells: dict[str, dict[str, tuple[Run, BenchmarkRow]]] = {identity: {} for identity in spellings}
    superseded: list[tuple[str, str, Run]] = []
    for run, rows in sorted(read, key=lambda item: item[0].timestamp):  # stable: the later given wins a tie
        used = cells[run.model_identity]
        for row in rows.benchmarks:
            if row.name in used:
                superseded.append((run.model_identity, row.name, used[row.name][0]))
            used[row.name] = (run, row)
    families = [{b: row.found for b, (_, row) in used.items()} for used in cells.values()]
    decided = decide_tables([*(rows.found for _, rows in read), *families])
    models = [
        ModelContamination(identity, next(iter(names)), cells[identity], decisions, names)
        for (identity, names), decisions in zip(spellings.items(), decided[len(read) :], strict=True)
    ]
    runs_read = [(run, replace(rows, decisions=d)) for (run, rows), d in zip(read, decided[: len(read)], strict=True)]
    return ContaminationReading(runs_read, models, superseded, groups if read else {})


def board_groups(results: list[dict]) -> dict[str, list[str]]:
    """Group -> its direct children (tasks or groups), merged over the results JSONs given in order: each run's
    ``configs.pdd_contamination.metadata.contamination_groups``, each leaf's ``contamination.<leaf>.group``, and
    lm-eval's ``group_subtasks`` (groups with subtasks only). Children keep their first-seen order."""
    groups: dict[str, dict[str, None]] = {}

    def add(group: str, children) -> None:
        groups.setdefault(group, {}).update(dict.fromkeys(c for c in children if c != group))

    for result in results:
        metadata = ((result.get("configs") or {}).get("pdd_contamination") or {}).get("metadata") or {}
        for group, children in (metadata.get("contamination_groups") or {}).items():
            add(group, children or [])
        for leaf, summary in (metadata.get("contamination") or {}).items():
            if isinstance(summary, dict) and summary.get("group"):
                add(summary["group"], [leaf])
        for group, children in (result.get("group_subtasks") or {}).items():
            if children:
                add(group, children)
    return {group: list(children) for group, children in groups.items()}
