"""The contamination leaderboard of ``lm-eval-pdd report``: a models x benchmarks matrix of verdicts.

Every ``pdd_contamination`` result of the runs given (read and decided by
:func:`pdd_tasks.tools.results.contamination.read_contamination`, which this module only formats) gives a
cell per (model, benchmark): the
benchmark is a source task of ``pdd_contamination``, the model the run's, named as the rest of the
report names it (:func:`pdd_tasks.tools.report.tables.shown` of :attr:`pdd_tasks.tools.results.runs.Run.model`; the
full name where two models would be shown alike).

- **A model is what its name resolves to** (:func:`pdd_tasks.tools.results.runs.model_identity`): runs
  that name one model in two ways (``.../tiny`` and ``.../tiny/``, a relative and an absolute path of
  one folder) are one model, shown by the name its first run gives it, and the notes say so; two rows
  would split its Holm family in two and make its adjusted p-values too small.

- **Holm's family is the model.** A verdict is about a model, so each model's benchmarks, across all
  the runs given, form one table, decided by :func:`pdd_metrics.verdict.decide_table`: Holm's
  correction over every p-value of that table (CoDeC and the exchangeability test of each
  benchmark). A p-value that rejects alone, or in one run's own table (the report's per-run sections,
  corrected over that run's tests), may not reject here.
- **One run per (model, benchmark).** Where several runs of a model tested the same benchmark, the
  newest (by the date in its results file's name, which lm_eval writes sortably; the later given
  where two share it) is used, and each run left out is named in the notes.

The report writes it as ``contamination.csv`` (one row per (model, benchmark), the columns of
:func:`contamination_columns`), ``contamination.json`` (those rows, the matrix of verdicts, the notes)
and a section of ``report.html`` and ``report.md`` (docs/report.md, "The contamination leaderboard").
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from pdd_metrics.verdict import ALPHA, CODEC_NULL_SCORE, Decision
from pdd_tasks.dataset_tests import DATASET_TESTS
from pdd_tasks.results_schema import reference_metric
from pdd_tasks.tools.report.tables import GROUP_NOTE, VERDICT_RULE, markdown_table, shown
from pdd_tasks.tools.results.contamination import (
    BenchmarkRow,
    ContaminationReading,
    ModelContamination,
    read_contamination,
)
from pdd_tasks.tools.results.runs import SPELLINGS_LINE, Run


def columns_of_test(name: str) -> tuple[str, ...]:
    """The columns of one dataset-level test (its registry entry's reading): its result keys, the
    reference's where it compares to one, its p-value, Holm-adjusted, and Holm-adjusted against its
    weaker null (``<test>_kind_p_holm``, empty for a test without one)."""
    test = DATASET_TESTS[name]
    keys = test.reading.result_keys
    reference = tuple(reference_metric(key) for key in keys) if test.compares_to_reference else ()
    return (*keys, *reference, f"{name}_p", f"{name}_p_holm", f"{name}_kind_p_holm")


def contamination_columns() -> tuple[str, ...]:
    """The columns of ``contamination.csv`` and of the rows of ``contamination.json``: the cell, the
    verdict, every registered test's columns (:func:`columns_of_test`, in registry order), why a test did
    not apply, the benchmark's accuracy and the run (docs/report.md)."""
    tests = tuple(column for name in DATASET_TESTS for column in columns_of_test(name))
    return (
        "model",
        "benchmark",
        "group",
        "leaves",
        "verdict",
        "detected",
        *tests,
        "not_applied",
        "accuracy_metric",
        "accuracy",
        "accuracy_stderr",
        "run",
    )


#: The files of the contamination leaderboard.
CONTAMINATION_FILES = ("contamination.csv", "contamination.json")


@dataclass(frozen=True)
class ContaminationBoard:
    """The matrix: ``models`` (rows, as shown) by ``benchmarks`` (columns: the leaf tasks, then the
    groups), one row of :func:`contamination_columns` per (model, benchmark) tested in ``rows``, the
    ``notes`` a reader must know (Holm's family, the runs left out, untested cells), and ``groups``:
    each group of the runs -> its direct children (leaf tasks or groups), as the runs recorded them.
    A group's row has ``leaves`` (its count of leaf tasks); every row has ``group``, the group that
    lists it (empty at the top), so a renderer can fold a group's columns into it. ``grid``: model -> benchmark ->
    its row (None: not tested), and ``lines``: model -> benchmark -> :meth:`cell_lines`, every cell of the matrix
    as data, built with the board, for its views to read."""

    models: list[str]
    benchmarks: list[str]
    rows: list[dict]
    notes: list[str]
    groups: dict[str, list[str]] = field(default_factory=dict)
    grid: dict[str, dict[str, dict | None]] = field(init=False, repr=False, compare=False)
    lines: dict[str, dict[str, list[str] | None]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        grid = {model: {b: self.cell(model, b) for b in self.benchmarks} for model in self.models}
        lines = {model: {b: self.cell_lines(model, b) for b in self.benchmarks} for model in self.models}
        object.__setattr__(self, "grid", grid)
        object.__setattr__(self, "lines", lines)

    def is_group(self, benchmark: str) -> bool:
        """Whether ``benchmark`` is a group (a column of group-level tests)."""
        return benchmark in self.groups

    def label(self, benchmark: str) -> str:
        """A column's name: a group marked with its count of leaves (``bbh (group of 24)``; the most any
        model's run pooled), a leaf task as it is."""
        leaves = [row["leaves"] for row in self.rows if row["benchmark"] == benchmark and row["leaves"]]
        return f"{benchmark} (group of {max(leaves)})" if leaves else benchmark

    def cell(self, model: str, benchmark: str) -> dict | None:
        """The row of (``model``, ``benchmark``), or None where the model's runs did not test it."""
        return next((r for r in self.rows if r["model"] == model and r["benchmark"] == benchmark), None)

    def matrix(self) -> dict[str, dict[str, str | None]]:
        """Model -> benchmark -> verdict (None: not tested)."""
        return {
            model: {b: row["verdict"] if (row := self.cell(model, b)) else None for b in self.benchmarks}
            for model in self.models
        }

    def cell_lines(self, model: str, benchmark: str) -> list[str] | None:
        """A matrix cell as lines: the verdict (and what was detected), each test's decisive number (its
        reading's ``shown``) and its Holm-adjusted p-value, and why a test did not apply; None where the model's runs did not test the
        benchmark."""
        row = self.cell(model, benchmark)
        if row is None:
            return None
        verdict = row["verdict"] + (f": {row['detected']}" if row["detected"] else "")
        lines = [verdict]
        for name, test in DATASET_TESTS.items():
            if row[f"{name}_p"] is None:
                lines.append(f"{test.reading.label} did not apply")
                continue
            own = {key: row[key] for key in test.reading.result_keys}
            reference = (
                {key: row[reference_metric(key)] for key in test.reading.result_keys}
                if test.compares_to_reference and row[reference_metric(test.reading.result_keys[0])] is not None
                else None
            )
            lines.append(
                f"{test.reading.label} {test.reading.shown(own, reference)}, Holm p {row[f'{name}_p_holm']:.3g}"
            )
        return lines + ([f"why: {row['not_applied']}"] if row["not_applied"] else [])

    def markdown(self) -> str:
        """The matrix as a Markdown table (a cell's lines joined by "; ", the verdict bold; "-": not
        tested) and the notes under it."""

        def cell(model: str, benchmark: str) -> str:
            lines = self.cell_lines(model, benchmark)
            return "-" if lines is None else "; ".join([f"**{lines[0]}**", *lines[1:]])

        table = markdown_table(
            ["model", *map(self.label, self.benchmarks)],
            [[m, *(cell(m, b) for b in self.benchmarks)] for m in self.models],
        )
        return table + "\n\n" + "\n\n".join(self.notes)

    def to_json(self) -> dict:
        """What ``contamination.json`` holds: the rule, the models and benchmarks, the matrix of verdicts,
        the rows (long form, the CSV's columns) and the notes."""
        return {
            "alpha": ALPHA,
            "codec_null": CODEC_NULL_SCORE,
            "holm_family": "model",
            "models": self.models,
            "benchmarks": self.benchmarks,
            "groups": self.groups,
            "matrix": self.matrix(),
            "rows": self.rows,
            "notes": self.notes,
        }


def contamination_board(runs: list[Run]) -> ContaminationBoard | None:
    """The contamination leaderboard of ``runs`` (module docstring), or None where none of them holds
    ``pdd_contamination`` results: :func:`board_of` their reading."""
    return board_of(read_contamination(runs))


def board_of(read: ContaminationReading) -> ContaminationBoard | None:
    """The contamination leaderboard (module docstring) of the runs' contamination results as read and decided
    per model (:func:`pdd_tasks.tools.results.contamination.read_contamination`), or None where none holds any."""
    if not read.runs:
        return None
    first = {model.identity: model.name for model in read.models}
    shown_as = model_names(list(first.values()))
    names = {identity: shown_as[name] for identity, name in first.items()}
    leaves = dict.fromkeys(task for _, rows in read.runs for task in rows.tasks)
    groups = {group: children for _, rows in read.runs for group, children in rows.children.items()}
    benchmarks = [
        *leaves,
        *dict.fromkeys(group for _, rows in read.runs for group in rows.groups if group not in leaves),
    ]
    rows = []
    for model in read.models:
        for benchmark in (b for b in benchmarks if b in model.cells):
            run, row = model.cells[benchmark]
            rows.append(_row(names[model.identity], run, row, model.decisions[benchmark]))
    board = ContaminationBoard([names[model.identity] for model in read.models], benchmarks, rows, [], groups)
    used = {names[model.identity]: model.cells for model in read.models}
    superseded = [(names[identity], benchmark, run) for identity, benchmark, run in read.superseded]
    board.notes.extend(_notes(board, used, superseded))
    board.notes.extend(_spellings_note(model) for model in read.models if len(model.spellings) > 1)
    return board


def _spellings_note(model: ModelContamination) -> str:
    """The note on a model its runs name in several ways (:data:`pdd_tasks.tools.results.runs.SPELLINGS_LINE`)."""
    names = ", ".join(f"{name!r} in {run.file}" for name, run in model.spellings.items())
    line = SPELLINGS_LINE.format(count=len(model.spellings), names=names, identity=model.identity)
    return line[0].upper() + line[1:]


def model_names(models: list[str]) -> dict[str, str]:
    """Each model as the report shows it (:func:`pdd_tasks.tools.report.tables.shown`), or its full name where
    two of ``models`` would be shown alike (two local checkpoints of one name)."""
    short = {model: shown(model) for model in models}
    counts = Counter(short.values())
    return {model: name if counts[name] == 1 else model for model, name in short.items()}


def _row(model: str, run: Run, read: BenchmarkRow, decision: Decision) -> dict:
    """The row of :func:`contamination_columns` of one (model, benchmark): the values of the run used,
    the decision of the model's table. A test's columns are empty where it did not apply or its values
    are unusable (``not_applied`` says which)."""
    accuracy = read.accuracy or (None, None, None)
    row = {
        "model": model,
        "benchmark": read.name,
        "group": read.group,
        "leaves": read.leaves,
        "verdict": decision.verdict,
        "detected": "; ".join(DATASET_TESTS[test].reading.detects for test in decision.rejecting),
        "not_applied": _not_applied(read),
        "accuracy_metric": accuracy[0],
        "accuracy": accuracy[1],
        "accuracy_stderr": accuracy[2],
        "run": str(run.file),
    }
    for name in DATASET_TESTS:
        test = read.tests[name]
        row |= dict.fromkeys(columns_of_test(name))
        if test.evidence is not None:
            row |= test.values | {reference_metric(key): value for key, value in (test.reference or {}).items()}
        row |= {
            f"{name}_p": decision.p_values.get(name),
            f"{name}_p_holm": decision.adjusted.get(name),
            f"{name}_kind_p_holm": decision.kind_adjusted.get(name),
        }
    return {column: row[column] for column in contamination_columns()}


def _not_applied(read: BenchmarkRow) -> str:
    """``"exchangeability: 2 shards are longer than the context"``: each test left out of the verdict
    and why (the run's summary; values unusable in the results JSON; not in the results), "; "-joined."""
    reasons = dict(read.not_applicable)
    for name, test in read.tests.items():
        if test.evidence is None and name not in reasons:
            reasons[name] = (
                f"unusable values in the results JSON ({', '.join(key.removesuffix(',none') for key in test.unusable)})"
                if test.unusable
                else "not in the results"
            )
    return "; ".join(f"{test}: {why}" for test, why in reasons.items())


def _notes(board: ContaminationBoard, used: dict, superseded: list[tuple[str, str, Run]]) -> list[str]:
    """What a reader of the matrix must know: Holm's family (each model's count of p-values), what a
    verdict means, each run left out and the cells not tested."""
    tests = Counter(row["model"] for row in board.rows for test in DATASET_TESTS if row[f"{test}_p"] is not None)
    counts = ", ".join(f"{model} {tests[model]}" for model in board.models)
    notes = [
        f"One row per model, one column per benchmark (a source task of pdd_contamination). Holm's correction "
        f"runs per model, over every p-value of that model's benchmarks in these runs (every test of each; "
        f"p-values per model: {counts}), family-wise error rate {ALPHA}: a verdict is about a model, so a p-value "
        "that rejects alone, or in a run's own contamination table, may not reject here. "
        + VERDICT_RULE
        + " Every number per model and benchmark: contamination.csv, contamination.json (docs/report.md)."
    ]
    left_out: dict[tuple[str, Run], list[str]] = {}
    for model, benchmark, run in superseded:
        left_out.setdefault((model, run), []).append(benchmark)
    for (model, run), benchmarks in left_out.items():
        newer = dict.fromkeys(str(used[model][b][0].file) for b in benchmarks)
        notes.append(
            f"Left out: the run {run.file} ({run.timestamp}) of {model} for {', '.join(benchmarks)}; a newer run of "
            f"the model tested {'it' if len(benchmarks) == 1 else 'them'} and is used ({', '.join(newer)})."
        )
    if board.groups:
        notes.append(GROUP_NOTE)
    if any(board.cell(m, b) is None for m in board.models for b in board.benchmarks):
        notes.append("-: the model's runs did not test this benchmark.")
    return notes
