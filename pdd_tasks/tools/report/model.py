"""The report's model: what each (run, task) shows, the leaderboard, and the whole report, as data.

:func:`build_report` takes the runs as read (:mod:`pdd_tasks.tools.report.read`) and returns a
:class:`Report`: per labelled pdd task a :class:`TaskReport` (its methods' values and standard errors,
the scores to plot, the table's cells, the notes a reader must not miss, the settings in effect and
those in which its run differs from the model's other runs of the task: :func:`differing_settings`),
the tasks left out (:func:`pdd_tasks.tools.report.tables.left_out`), the contamination checks and
board, and the leaderboard's rows (:data:`LEADERBOARD_COLUMNS`). Nothing here writes a file or knows
HTML: the plots (:mod:`~pdd_tasks.tools.report.plots`) and the documents
(:mod:`~pdd_tasks.tools.report.render`) are drawn from this model.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pdd_metrics.blind import BLIND_FOLDS, BLIND_SEED, TooFewTexts, blind_scores
from pdd_metrics.intervals import normal_interval, smallest_fpr_step
from pdd_tasks import registry
from pdd_tasks.loading import repeats
from pdd_tasks.registry import METHOD_NAMES, RECORDED_KEYS, SETTINGS, ScoringSettings
from pdd_tasks.results_schema import BLIND, FPR_BUDGETS
from pdd_tasks.tools.report.contamination_board import ContaminationBoard, board_of
from pdd_tasks.tools.report.read import Reading, TaskRead
from pdd_tasks.tools.report.tables import (
    BLIND_LABEL,
    METRIC_LABELS,
    NO_STDERR_NOTE,
    ContaminationChecks,
    checks_table,
    convention_note,
    shown,
    tasks_left_out,
)
from pdd_tasks.tools.results.runs import Counts, ResultsError, Run


#: Metric name in the results JSON -> column name in the leaderboard (stable; documented in docs/report.md).
COLUMN_OF_METRIC = {
    "auc": "auc",
    "tpr@fpr<5%": "tpr_at_fpr_lt_5pct",
    "tpr@fpr<1%": "tpr_at_fpr_lt_1pct",
    "tpr@fpr<0.1%": "tpr_at_fpr_lt_0_1pct",
}

LEADERBOARD_COLUMNS = (
    "model",
    "run",
    "task",
    "method",
    "method_label",
    "n_members",
    "n_non_members",
    "auc",
    "auc_stderr",
    "auc_ci95_low",
    "auc_ci95_high",
    *(f"{column}{suffix}" for column in list(COLUMN_OF_METRIC.values())[1:] for suffix in ("", "_stderr")),
    "convention",
    "too_few_texts",
    "differing_settings",
)

#: The plots of a task with samples (:meth:`TaskReport.plot_name`): their kind and the caption the documents give it.
PLOT_CAPTIONS = {"roc": "ROC curves (log FPR)", "scores": "score distributions"}


# -- what one (run, task) shows ---------------------------------------------------------------------


@dataclass
class MethodRow:
    method: str  # metric prefix, or BLIND
    label: str
    values: dict[str, float | None]  # metric name -> value
    stderrs: dict[str, float | None]  # metric name -> stderr


@dataclass(frozen=True)
class Cell:
    """A value of a task's method table: its text, whether it is the best of its column (shown bold) and
    the mark after it (" †" where the FPR budget allows no false positive)."""

    text: str
    best: bool = False
    mark: str = ""


@dataclass
class TaskReport:
    run: Run
    run_id: str
    task: str
    rows: list[MethodRow]
    scores: dict[str, tuple[np.ndarray, np.ndarray]] | None  # method -> (scores, labels), None without samples
    counts: Counts  # the texts scored; classes only where the samples file holds the results' texts
    settings: ScoringSettings  # the settings the task ran with
    too_few: str | None = None  # why the counts are too few to read as evidence (:meth:`Counts.too_few`)
    differing: str = ""  # the settings that differ from the other runs of this model on this task
    table: tuple[list[str], list[list[str | Cell]]] = ([], [])  # :func:`table_rows`
    notes: list[str] = field(default_factory=list)  # :func:`task_notes`
    settings_shown: list[tuple[str, str]] = field(default_factory=list)  # :func:`settings_in_effect`

    @property
    def n_members(self) -> int | None:
        return self.counts.members

    @property
    def n_non_members(self) -> int | None:
        return self.counts.non_members

    @property
    def warning(self) -> str | None:
        """The warning above the task's table where a class has too few texts."""
        return f"Too few texts: {self.too_few}" if self.too_few else None

    def plot_name(self, kind: str) -> str:
        """The file name of the task's plot ``kind`` (``roc``, ``scores``)."""
        return f"{kind}_{self.task}_{self.run_id}.png"


def _number(value) -> float | None:
    """A finite number of the results JSON, else None (absent, "N/A", NaN)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _rows(read: TaskRead) -> list[MethodRow]:
    rows = []
    for method in (BLIND, *METHOD_NAMES):
        if f"{method}_auc,none" not in read.values:
            continue
        label = BLIND_LABEL if method == BLIND else registry.label(method, read.settings)
        rows.append(
            MethodRow(
                method,
                label,
                {metric: _number(read.values.get(f"{method}_{metric},none")) for metric in METRIC_LABELS},
                {metric: _number(read.values.get(f"{method}_{metric}_stderr,none")) for metric in METRIC_LABELS},
            )
        )
    return rows


def _scores(samples: list[dict] | None, methods: list[str]) -> dict[str, tuple[np.ndarray, np.ndarray]] | None:
    if not samples:
        return None
    scores = {}
    for method in methods:
        key = f"{method}_auc"
        if key not in samples[0]:
            continue
        values, labels = zip(*(sample[key] for sample in samples), strict=True)
        labels = np.asarray(labels, dtype=np.int64)
        if method == BLIND:  # items are the texts: the same out-of-fold scores the harness computed
            try:
                scores[method] = (blind_scores(list(values), labels), labels)
            except TooFewTexts:  # the harness reported NaN for it; nothing to plot
                continue
        else:
            scores[method] = (np.asarray(values, dtype=np.float64), labels)
    return scores


def _run_ids(runs: list[Run]) -> dict[Run, str]:
    """Short unique names for file names: the model's last path part and the run's date."""
    ids = {}
    for run in runs:
        base = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(run.model).name or run.model).strip("-") or "model"
        ids[run] = f"{base}_{re.sub(r'[^0-9T]', '', run.timestamp)[:15]}"
    counts: dict[str, int] = {}
    for run, name in ids.items():
        counts[name] = counts.get(name, 0) + 1
        if counts[name] > 1:
            ids[run] = f"{name}-{counts[name]}"
    return ids


def collect(reading: Reading) -> list[TaskReport]:
    """One :class:`TaskReport` per (run, labelled pdd task) read, runs in the order given.

    Counts and plots come from the samples file only where it holds the texts the results JSON's
    numbers are computed from (:meth:`Run.counts`); an incomplete one is named in the task's notes.
    """
    ids = _run_ids(reading.runs)
    reports = []
    for read in reading.tasks:
        rows = _rows(read)
        scores = _scores(read.samples, [r.method for r in rows]) if read.counts.members is not None else None
        reports.append(
            TaskReport(read.run, ids[read.run], read.task, rows, scores, read.counts, read.settings, read.too_few)
        )
    for report, differing in zip(reports, differing_settings(reports), strict=True):
        report.differing = differing
    for report in reports:
        report.table = table_rows(report)
        report.notes = task_notes(report)
        report.settings_shown = settings_in_effect(report.run, report.task, report.settings)
    return reports


def _shown_value(value) -> str:
    if isinstance(value, str):
        return shown(value) if ("/" in value or "\\" in value) else value
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_shown_value(item) for item in value) + "]"
    return "none" if value is None else json.dumps(value) if isinstance(value, dict) else str(value)


def comparable_settings(run: Run, task: str, settings: ScoringSettings) -> dict[str, str]:
    """What a task ran with, as ``name -> value`` to compare runs: every scoring setting (defaults
    filled in), the other metadata keys given (data files, model arguments), the backend, the
    reference table used, ``--limit`` and ``bootstrap_iters``. Paths by their last part, as the
    report shows them."""
    metadata = (run.results.get("configs", {}).get(task, {}) or {}).get("metadata") or {}
    items: dict[str, object] = {s.name: getattr(settings, s.name) for s in SETTINGS}
    items.update({k: v for k, v in metadata.items() if k not in RECORDED_KEYS and k not in items and k != "pretrained"})
    scoring = metadata.get("token_scores") or {}
    items["backend"] = scoring.get("backend")
    items["mu_sigma"] = scoring.get("mu_sigma")
    items["reference table"] = (metadata.get("freq_table_used") or {}).get("path")
    config = run.results.get("config") or {}
    items["limit"] = config.get("limit")
    items["bootstrap_iters"] = config.get("bootstrap_iters")
    return {name: _shown_value(value) for name, value in items.items()}


def differing_settings(reports: list[TaskReport]) -> list[str]:
    """Per report, ``"min_k=0.1, convention=reference-code"``: the settings in which its run differs
    from the other runs of the same model on the same task ("" where it has no such other run, or
    none differs)."""
    settings = [comparable_settings(report.run, report.task, report.settings) for report in reports]
    groups: dict[tuple[str, str], list[int]] = {}
    for index, report in enumerate(reports):
        groups.setdefault((report.run.model_identity, report.task), []).append(index)
    out = [""] * len(reports)
    for members in groups.values():
        if len(members) < 2:
            continue
        names = dict.fromkeys(name for index in members for name in settings[index])
        differ = [name for name in names if len({settings[index].get(name, "none") for index in members}) > 1]
        for index in members:
            out[index] = ", ".join(f"{name}={settings[index].get(name, 'none')}" for name in differ)
    return out


# -- the task's table and notes --------------------------------------------------------------------------------------------


def _unresolved(report: TaskReport, metric: str) -> bool:
    """Whether the FPR budget of ``metric`` allows no false positive with this many non-members."""
    return (
        metric in FPR_BUDGETS
        and report.n_non_members is not None
        and smallest_fpr_step(report.n_non_members) >= FPR_BUDGETS[metric]
    )


def _best(report: TaskReport, metric: str) -> float | None:
    values = [row.values[metric] for row in report.rows if row.method != BLIND and row.values[metric] is not None]
    return max(values) if values else None


def _usable_stderr(row: MethodRow, metric: str) -> float | None:
    """The stderr of an interval: None where there is none, and for an AUC where it is 0 (DeLong's
    at AUC 0 or 1: an interval of one point would claim certainty the texts cannot give)."""
    stderr = row.stderrs[metric]
    return None if stderr is None or (metric == "auc" and stderr == 0) else stderr


def auc_interval(row: MethodRow) -> tuple[float | None, float | None]:
    """The AUC's 95% interval, or (None, None) where it cannot be computed."""
    auc, stderr = row.values["auc"], _usable_stderr(row, "auc")
    return normal_interval(auc, stderr) if auc is not None and stderr is not None else (None, None)


def _format(row: MethodRow, metric: str, report: TaskReport) -> Cell:
    value, stderr = row.values[metric], _usable_stderr(row, metric)
    if value is None:
        return Cell("n/a")
    if metric == "auc":
        low, high = auc_interval(row)
        text = f"{value:.3f} [{low:.3f}, {high:.3f}]" if low is not None else f"{value:.3f} [no interval]"
    else:
        text = f"{value:.3f} ± {stderr:.3f}" if stderr is not None else f"{value:.3f} ± n/a"
    best = row.method != BLIND and value == _best(report, metric)
    return Cell(text, best, " †" if _unresolved(report, metric) else "")


def table_rows(report: TaskReport) -> tuple[list[str], list[list[str | Cell]]]:
    """Header and rows of a task's method table: the method's label, then a :class:`Cell` per metric."""
    header = ["method", "AUC [95% CI]", *(f"{METRIC_LABELS[m]} ± se" for m in FPR_BUDGETS)]
    rows = [[row.label, *(_format(row, metric, report) for metric in METRIC_LABELS)] for row in report.rows]
    return header, rows


def task_notes(report: TaskReport) -> list[str]:
    """What a reader of the task's table must know: best marks, missing intervals, blind, unresolved
    budgets, the scored tokens, an incomplete samples file, plots."""
    notes = [
        "Best value of a column among the model's methods in bold (the blind baseline is not a method of the "
        "model). AUC interval: DeLong standard error, 95% normal interval; TPR: ± its stratified-bootstrap "
        "standard error."
    ]
    if any(row.values[m] is not None and _usable_stderr(row, m) is None for row in report.rows for m in METRIC_LABELS):
        notes.append(f"no interval, ± n/a: {NO_STDERR_NOTE}")
    blind = next((row for row in report.rows if row.method == BLIND), None)
    if blind is not None and blind.values["auc"] is not None:
        notes.append(
            f"The blind baseline (a bag-of-n-grams classifier on the texts alone, {BLIND_FOLDS}-fold out-of-fold "
            f"scores, seed {BLIND_SEED}) reaches AUC {blind.values['auc']:.3f}: "
            + (
                "the labels are predictable without the model, so a method's AUC here is no evidence of membership."
                if blind.values["auc"] >= 0.6
                else "the texts alone predict the labels little on this benchmark."
            )
        )
    unresolved = [m for m in FPR_BUDGETS if _unresolved(report, m)]
    if unresolved:
        notes.append(
            f"†: with {report.n_non_members} non-members the smallest non-zero FPR is 1/{report.n_non_members} = "
            f"{100 / report.n_non_members:.2g}%, so {', '.join(METRIC_LABELS[m] for m in unresolved)} allow no false "
            f"positive: those columns are the TPR at FPR 0, not the named operating point."
        )
    if note := convention_note([report.task], _reference_code(report)):
        notes.append(note)
    notes += [note] if (note := repeats.note_of(report.run.results, report.task)) else []
    if report.counts.problem:
        notes.append(f"Samples: {report.counts.problem}")
    elif not report.scores:
        notes.append(
            "No plots: the run has no samples file for this task (run lm_eval with --log_samples to get them)."
        )
    return notes


def _reference_code(report: TaskReport) -> list[str]:
    return [report.task] if report.settings.convention == "reference-code" else []


def settings_in_effect(run: Run, task: str, settings: ScoringSettings) -> list[tuple[str, str]]:
    """(name, value) of the settings a task ran with, from the results JSON."""
    metadata = (run.results.get("configs", {}).get(task, {}) or {}).get("metadata") or {}
    scoring = metadata.get("token_scores") or {}
    table = metadata.get("freq_table_used") or {}
    config = run.results.get("config") or {}
    items = [
        ("model", shown(run.model)),
        ("backend", str(scoring.get("backend", "not recorded"))),
        ("Min-K%++ mu/sigma", str(scoring.get("mu_sigma", "not recorded"))),
        (
            "DC-PDD reference table",
            f"{shown(table['path'])} ({table.get('source', '')}; {table.get('counts_from', '')}: {table.get('corpus', '')})"
            if table
            else "not recorded (DC-PDD not scored)",
        ),
        ("methods in effect", "; ".join(registry.label(name, settings) for name in settings.methods)),
        (
            "scored tokens (convention)",
            '"reference-code": tokenizer.encode(text) without its first token, as the Min-K%++ and DC-PDD scripts'
            if settings.convention == "reference-code"
            else '"paper": every text token after the model\'s start token',
        ),
        ("TPR convention", "largest TPR with FPR < budget (strict, as the Min-K% and DC-PDD reference code)"),
        (
            "standard errors",
            f"AUC: DeLong; TPR: stratified bootstrap, {config.get('bootstrap_iters', 'not recorded')} draws",
        ),
        (
            "blind baseline",
            f"TF-IDF word 1-2-grams + logistic regression, {BLIND_FOLDS}-fold out-of-fold, seed {BLIND_SEED}",
        ),
        ("limit", str(config.get("limit")) if config.get("limit") else "none (every text)"),
        ("results file", str(run.file)),
    ]
    return items


# -- leaderboard -------------------------------------------------------------------------------------


def leaderboard(reports: list[TaskReport]) -> list[dict]:
    """One row per (run, task, method), the columns of :data:`LEADERBOARD_COLUMNS`."""
    rows = []
    for report in reports:
        for row in report.rows:
            record = {
                "run": str(report.run.file),
                "task": report.task,
                "method": row.method,
                "method_label": row.label,
                "n_members": report.n_members,
                "n_non_members": report.n_non_members,
            }
            for metric, column in COLUMN_OF_METRIC.items():
                record[column] = row.values[metric]
                record[f"{column}_stderr"] = row.stderrs[metric]
            record["auc_ci95_low"], record["auc_ci95_high"] = auc_interval(row)
            record["convention"] = report.settings.convention
            record["too_few_texts"] = True if report.too_few else False if report.counts.members is not None else None
            record["differing_settings"] = report.differing
            record["model"] = shown(report.run.model)
            rows.append({column: record[column] for column in LEADERBOARD_COLUMNS})
    return rows


# -- the report -------------------------------------------------------------------------------------


@dataclass
class Report:
    """Everything the report shows, in the order of its documents."""

    runs: list[Run]
    damaged: list[str]  # the results JSONs' damaged values, one line each
    contamination: ContaminationBoard | None  # the contamination leaderboard, None without pdd_contamination runs
    groups: dict[str, list[str]]  # the benchmarks' groups, for the board's columns (results.contamination.board_groups)
    tasks: list[TaskReport]
    checks: list[tuple[Run, ContaminationChecks]]  # each pdd_contamination run's table and verdicts
    leaderboard: list[dict]  # :func:`leaderboard`
    skipped: list[tuple[Run, str, str]]  # (run, task, why) of the tasks left out (:func:`left_out`)


def build_report(reading: Reading) -> Report:
    """The :class:`Report` of the runs read.

    Raises:
        ResultsError: the runs hold no labelled pdd task and no contamination checks.
    """
    runs = reading.runs
    tasks = collect(reading)
    board = leaderboard(tasks)
    read = reading.contamination
    checked = {run for run, _ in read.runs}
    skipped = [
        (run, task, why)
        for run in runs
        for task, why in tasks_left_out(run.results, reading.labelled[run], run in checked)
    ]
    checks = [(run, checks_table(rows)) for run, rows in read.runs]
    if not tasks and not checks:
        raise ResultsError(
            f"No labelled pdd task in the {len(runs)} run(s) under {', '.join(map(str, reading.paths))} (no "
            "<method>_auc metric). The report reads runs of the labelled pdd tasks (--tasks pdd_wikimia, pdd_custom "
            "with labels, ...)." + "".join(f" {task} of {run.file}: {why}." for run, task, why in skipped)
        )
    contamination = board_of(read)
    groups = read.groups
    return Report(runs, reading.damaged, contamination, groups, tasks, checks, board, skipped)
