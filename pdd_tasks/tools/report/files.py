"""``lm-eval-pdd report``: an HTML page, a Markdown file, PNG plots and a leaderboard from runs.

    lm-eval-pdd report OUTPUT_PATH... --out DIR [--force]

Reads every run (results JSON, and the samples of ``--log_samples``) under the given lm_eval
output folders and writes to DIR:

- ``report.html``: self-contained (inline CSS, the plots embedded as data URIs);
- ``report.md``: the same content, the plots as the PNG files beside it;
- per run and task, ``roc_<task>_<run>.png`` (every method's ROC curve on one plot, FPR on a log
  scale as the membership-inference literature draws them) and ``scores_<task>_<run>.png``
  (member and non-member score histograms, one panel per method);
- ``leaderboard.csv`` and ``leaderboard.json``: one row per (model, task, method), the columns of
  :data:`LEADERBOARD_COLUMNS`;
- where the runs hold ``pdd_contamination`` results, ``contamination.csv`` and ``contamination.json``:
  the contamination leaderboard, a models x benchmarks matrix of verdicts, Holm's correction per model
  (:mod:`pdd_tasks.tools.report.contamination_board`), also a section of both documents (in the HTML a
  grid coloured by verdict, groups folding to their tasks), and ``contamination.png``, its heat map
  (:mod:`pdd_tasks.tools.report.board_view`).

A run of ``pdd_contamination`` gets its contamination table (accuracy, CoDeC, exchangeability, Holm,
verdict per standard task) and verdict lines (:func:`pdd_tasks.tools.report.tables.contamination_checks`)
in both documents, also when the run has no labelled pdd task.

Every number of the tables is the results JSON's (value and ``_stderr``); the 95% interval is
``value -/+ 1.96 stderr`` clipped to [0, 1] (:func:`pdd_metrics.intervals.normal_interval`). The
plots need the per-text scores, so a run without ``--log_samples`` gets its tables only (and says
so). The blind baseline's per-text items are the texts; its plotted scores are recomputed with the
same out-of-fold classifier the harness ran (:func:`pdd_metrics.blind.blind_scores`, fixed seed).

What a reader must not miss is written beside the numbers (docs/report.md, "What the report
marks"): a task with too few texts of a class, an AUC interval that cannot be computed, the
``reference-code`` convention, the settings in which runs of one model and task differ
(:func:`differing_settings`), a samples file that does not hold the texts the results JSON counts
(:meth:`pdd_tasks.tools.results.runs.Run.counts`), and the tasks left out (:func:`pdd_tasks.tools.report.tables.left_out`).
"""

from __future__ import annotations

import base64
import contextlib
import csv
import html
import json
import math
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pdd_metrics.blind import BLIND_FOLDS, BLIND_SEED, TooFewTexts, blind_scores
from pdd_metrics.intervals import normal_interval, smallest_fpr_step
from pdd_tasks import registry
from pdd_tasks.loading import repeats
from pdd_tasks.registry import METHOD_NAMES, RECORDED_KEYS, SETTINGS
from pdd_tasks.results_schema import BLIND, FPR_BUDGETS
from pdd_tasks.tools.outputs import make_shareable, not_written, refuse_path_through_a_file, refuse_unsafe_output
from pdd_tasks.tools.report.board_view import BOARD_IMAGE, board_groups, board_html, write_heat_map
from pdd_tasks.tools.report.contamination_board import CONTAMINATION_FILES, ContaminationBoard, contamination_board
from pdd_tasks.tools.report.tables import (
    BLIND_LABEL,
    METRIC_LABELS,
    NO_STDERR_NOTE,
    contamination_checks,
    convention_note,
    left_out,
    markdown_table,
    method_label,
    shown,
)
from pdd_tasks.tools.results.runs import (
    Counts,
    ResultsError,
    Run,
    find_runs,
    model_spellings,
    pdd_tasks_of,
    task_settings,
    warn_bad_values,
)


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

#: Files the report writes besides the plots.
REPORT_FILES = ("report.html", "report.md", "leaderboard.csv", "leaderboard.json")


class ReportExists(ResultsError):
    """The output folder already holds a report and --force was not given, or holds a file of a report's
    name that no report wrote (its mark: :func:`carries_report_mark`), which --force does not replace."""


#: The first line of ``report.md`` and the title of ``report.html``: part of the report's mark.
REPORT_TITLE = "Pretraining-data detection report"


def carries_report_mark(path: Path) -> bool:
    """Whether ``path`` (a file of a report's name in ``--out``) reads as this command wrote it: the report's
    title in ``report.md`` / ``report.html``, a leaderboard's columns in ``leaderboard.csv`` /
    ``contamination.csv`` (their first three), a list of leaderboard rows in ``leaderboard.json``, the board's
    keys in ``contamination.json``. ``--force`` replaces only such files: a user's own ``leaderboard.csv``
    is kept."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    first = text.split("\n", 1)[0].strip()
    if path.name == "report.md":
        return first == f"# {REPORT_TITLE}"
    if path.name == "report.html":
        return f"<title>{REPORT_TITLE}</title>" in text[:2000]
    if path.name in ("leaderboard.csv", "contamination.csv"):
        return first.startswith("model,run,task," if path.name == "leaderboard.csv" else "model,benchmark,")
    try:
        document = json.loads(text)
    except ValueError:
        return False
    if path.name == "leaderboard.json":
        return isinstance(document, list) and all(isinstance(row, dict) and "method" in row for row in document)
    if path.name == "contamination.json":
        return isinstance(document, dict) and {"models", "benchmarks", "matrix", "rows"} <= set(document)
    return False


#: The staging folders of :func:`staged_report` (a glob: in ``--out``, and beside a new ``--out`` named DIR).
STAGING_INSIDE, STAGING_BESIDE = ".report-new-*", ".{name}-new-*"


def _in_use(folder: Path) -> bool | None:
    """Whether a report running now holds ``folder`` (its lock: :func:`_lock`); None where locks are not
    available here."""
    try:
        import fcntl
    except ImportError:
        return None
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:
        return True  # gone or unreadable: not ours to remove
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(handle)  # closing releases the lock
    return False


def _lock(folder: Path) -> int | None:
    """Hold ``folder`` (a staging folder) locked while the report is written: a report killed midway
    releases the lock with its process, so a later run knows the folder is a leftover. Returns the handle
    to close, or None where locks are not available."""
    try:
        import fcntl
    except ImportError:
        return None
    handle = os.open(folder, os.O_RDONLY)
    fcntl.flock(handle, fcntl.LOCK_EX)
    return handle


def remove_leftover_staging(out: Path) -> None:
    """Remove the staging folders an interrupted report (killed, out of power) left in or beside ``out``:
    only folders of :func:`staged_report`'s own names (:data:`STAGING_INSIDE`, :data:`STAGING_BESIDE`), and
    only those no running report holds; each is named on stderr. Where the lock cannot be read (no
    ``fcntl``) the folders are named, not removed."""
    found = [*out.glob(STAGING_INSIDE)] if out.is_dir() else []
    if out.parent.is_dir():
        found += out.parent.glob(STAGING_BESIDE.format(name=glob_escape(out.name)))
    for folder in sorted(path for path in found if path.is_dir() and not path.is_symlink()):
        in_use = _in_use(folder)
        if in_use is None:
            print(
                f"warning: {folder} is the staging folder of a report that did not finish; remove it.", file=sys.stderr
            )
        elif not in_use:
            shutil.rmtree(folder, ignore_errors=True)
            print(f"note: removed {folder}, the staging folder of a report that did not finish.", file=sys.stderr)


def glob_escape(name: str) -> str:
    """``name`` with the glob characters ``*?[`` taken literally."""
    return re.sub(r"([*?\[])", r"[\1]", name)


# -- what one (run, task) shows ---------------------------------------------------------------------


@dataclass
class MethodRow:
    method: str  # metric prefix, or BLIND
    label: str
    values: dict[str, float | None]  # metric name -> value
    stderrs: dict[str, float | None]  # metric name -> stderr


@dataclass
class TaskReport:
    run: Run
    run_id: str
    task: str
    rows: list[MethodRow]
    scores: dict[str, tuple[np.ndarray, np.ndarray]] | None  # method -> (scores, labels), None without samples
    counts: Counts  # the texts scored; classes only where the samples file holds the results' texts
    differing: str = ""  # the settings that differ from the other runs of this model on this task

    @property
    def n_members(self) -> int | None:
        return self.counts.members

    @property
    def n_non_members(self) -> int | None:
        return self.counts.non_members


def _number(value) -> float | None:
    """A finite number of the results JSON, else None (absent, "N/A", NaN)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _rows(run: Run, task: str) -> list[MethodRow]:
    values = run.results["results"][task]
    rows = []
    for method in (BLIND, *METHOD_NAMES):
        if f"{method}_auc,none" not in values:
            continue
        label = BLIND_LABEL if method == BLIND else method_label(run.results, method, [task])
        rows.append(
            MethodRow(
                method,
                label,
                {metric: _number(values.get(f"{method}_{metric},none")) for metric in METRIC_LABELS},
                {metric: _number(values.get(f"{method}_{metric}_stderr,none")) for metric in METRIC_LABELS},
            )
        )
    return rows


def _scores(run: Run, task: str, methods: list[str]) -> dict[str, tuple[np.ndarray, np.ndarray]] | None:
    samples = run.samples(task)
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


def collect(runs: list[Run]) -> list[TaskReport]:
    """One :class:`TaskReport` per (run, labelled pdd task), runs in the order given.

    Counts and plots come from the samples file only where it holds the texts the results JSON's
    numbers are computed from (:meth:`Run.counts`); an incomplete one is named in the task's notes.
    """
    ids = _run_ids(runs)
    reports = []
    for run in runs:
        for task in pdd_tasks_of(run.results):
            rows = _rows(run, task)
            counts = run.counts(task)
            scores = _scores(run, task, [r.method for r in rows]) if counts.members is not None else None
            reports.append(TaskReport(run, ids[run], task, rows, scores, counts))
    for report, differing in zip(reports, differing_settings(reports), strict=True):
        report.differing = differing
    return reports


def _shown_value(value) -> str:
    if isinstance(value, str):
        return shown(value) if ("/" in value or "\\" in value) else value
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_shown_value(item) for item in value) + "]"
    return "none" if value is None else json.dumps(value) if isinstance(value, dict) else str(value)


def comparable_settings(run: Run, task: str) -> dict[str, str]:
    """What a task ran with, as ``name -> value`` to compare runs: every scoring setting (defaults
    filled in), the other metadata keys given (data files, model arguments), the backend, the
    reference table used, ``--limit`` and ``bootstrap_iters``. Paths by their last part, as the
    report shows them."""
    metadata = (run.results.get("configs", {}).get(task, {}) or {}).get("metadata") or {}
    settings = task_settings(run.results, task)
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
    settings = [comparable_settings(report.run, report.task) for report in reports]
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


# -- plots -------------------------------------------------------------------------------------------


def _roc_points(scores: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.metrics import roc_curve

    fpr, tpr, _ = roc_curve(labels, scores, pos_label=1)
    return fpr, tpr


def _or_nan(value: float | None) -> float:
    return math.nan if value is None else value


def plot_roc(report: TaskReport, path: Path) -> None:
    """Every method's ROC curve on one plot, FPR on a log axis from 1 / (2 n) (FPR 0 drawn there)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels_by_method = {row.method: row.label for row in report.rows}
    auc_by_method = {row.method: row.values["auc"] for row in report.rows}
    floor = 0.5 / report.n_non_members
    fig, ax = plt.subplots(figsize=(6.4, 5.2), dpi=110)
    for method, (scores, labels) in report.scores.items():
        fpr, tpr = _roc_points(scores, labels)
        style = {"color": "black", "linestyle": "--", "linewidth": 2} if method == BLIND else {"linewidth": 1.5}
        ax.step(
            np.maximum(fpr, floor),
            tpr,
            where="post",
            label=f"{labels_by_method[method]}  AUC {_or_nan(auc_by_method[method]):.3f}",
            **style,
        )
    grid = np.logspace(np.log10(floor), 0, 200)
    ax.plot(grid, grid, color="grey", linewidth=0.8, linestyle=":", label="chance")
    for budget in FPR_BUDGETS.values():
        if budget > floor:
            ax.axvline(budget, color="lightgrey", linewidth=0.6)
    ax.set_xscale("log")
    ax.set_xlim(floor, 1)
    ax.set_ylim(0, 1.01)
    ax.set_xlabel(f"false-positive rate (log; FPR 0 drawn at {floor:.1g})")
    ax.set_ylabel("true-positive rate")
    ax.set_title(
        f"{report.task}: {Path(report.run.model).name}\n{report.n_members} members, {report.n_non_members} non-members",
        fontsize=10,
    )
    ax.legend(fontsize=7, loc="center left")
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)


def plot_distributions(report: TaskReport, path: Path) -> None:
    """Member and non-member score histograms, one panel per method (scores as each method gives
    them, higher = more likely a member)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels_by_method = {row.method: row.label for row in report.rows}
    methods = list(report.scores)
    columns = min(3, len(methods))
    lines = -(-len(methods) // columns)
    fig, axes = plt.subplots(lines, columns, figsize=(4.0 * columns, 2.8 * lines), dpi=100, squeeze=False)
    for ax, method in zip(axes.flat, methods, strict=False):
        scores, labels = report.scores[method]
        bins = np.histogram_bin_edges(scores, bins=30)
        ax.hist(scores[labels == 0], bins=bins, alpha=0.55, label="non-members", color="tab:blue")
        ax.hist(scores[labels == 1], bins=bins, alpha=0.55, label="members", color="tab:red")
        ax.set_title(labels_by_method[method], fontsize=9)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(methods) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.suptitle(f"{report.task}: score distributions ({Path(report.run.model).name})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)


# -- tables --------------------------------------------------------------------------------------------


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


def _format(row: MethodRow, metric: str, report: TaskReport, bold) -> str:
    value, stderr = row.values[metric], _usable_stderr(row, metric)
    if value is None:
        return "n/a"
    if metric == "auc":
        low, high = auc_interval(row)
        text = f"{value:.3f} [{low:.3f}, {high:.3f}]" if low is not None else f"{value:.3f} [no interval]"
    else:
        text = f"{value:.3f} ± {stderr:.3f}" if stderr is not None else f"{value:.3f} ± n/a"
    if row.method != BLIND and value == _best(report, metric):
        text = bold(text)
    return text + (" †" if _unresolved(report, metric) else "")


def table_rows(report: TaskReport, bold) -> tuple[list[str], list[list[str]]]:
    """Header and rows of a task's method table (cells as text; ``bold`` marks the best)."""
    header = ["method", "AUC [95% CI]", *(f"{METRIC_LABELS[m]} ± se" for m in FPR_BUDGETS)]
    rows = [[row.label, *(_format(row, metric, report, bold) for metric in METRIC_LABELS)] for row in report.rows]
    return header, rows


def too_few_line(report: TaskReport) -> str | None:
    """The warning above a task's table where a class has too few texts (:meth:`Counts.too_few`)."""
    warning = report.counts.too_few()
    return f"Too few texts: {warning}" if warning else None


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
    return [report.task] if task_settings(report.run.results, report.task).convention == "reference-code" else []


def settings_in_effect(run: Run, task: str) -> list[tuple[str, str]]:
    """(name, value) of the settings a task ran with, from the results JSON."""
    metadata = (run.results.get("configs", {}).get(task, {}) or {}).get("metadata") or {}
    settings = task_settings(run.results, task)
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
                "model": shown(report.run.model),
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
            record["convention"] = task_settings(report.run.results, report.task).convention
            record["too_few_texts"] = (
                True if report.counts.too_few() else False if report.counts.members is not None else None
            )
            record["differing_settings"] = report.differing
            rows.append({column: record[column] for column in LEADERBOARD_COLUMNS})
    return rows


def _leaderboard_notes(row: dict) -> str:
    """What sets a leaderboard row apart: too few texts, the reference-code convention, the settings
    its run differs in from the model's other runs of the task."""
    notes = []
    if row["too_few_texts"]:
        counts = f" ({row['n_members']} + {row['n_non_members']})" if row["n_members"] is not None else ""
        notes.append(f"too few texts{counts}")
    if row["convention"] == "reference-code":
        notes.append("convention reference-code")
    if row["differing_settings"]:
        notes.append(f"differs: {row['differing_settings']}")
    return "; ".join(notes)


# -- the documents -------------------------------------------------------------------------------------


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(cell)}</th>" for cell in header)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _html_bold(text: str) -> str:
    return f"<b>{html.escape(text)}</b>"


def _html_cell(lines: list[str] | None) -> str:
    """A cell of the contamination matrix in HTML: its first line (the verdict) bold, one line each;
    a dash where the model's runs did not test the benchmark."""
    if lines is None:
        return "-"
    return "<br>".join([_html_bold(lines[0]), *map(html.escape, lines[1:])])


def _html_verdict(line: str) -> str:
    """A verdict line of :class:`pdd_tasks.tools.report.tables.ContaminationChecks` (``task: verdict: why``)
    in HTML, ``task: verdict`` bold."""
    task, _, rest = line.partition(": ")
    verdict, _, why = rest.partition(": ")
    return f"<b>{html.escape(f'{task}: {verdict}')}</b>: {html.escape(why)}"


_CSS = (
    "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
    "table{border-collapse:collapse;margin:0.8em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
    "td:first-child,th:first-child{text-align:left}img{max-width:100%}dl{display:grid;grid-template-columns:"
    "max-content auto;gap:2px 12px}dt{font-weight:600}.note{color:#555;font-size:0.92em}.warn{color:#a40000}"
)


def write_report(paths: list[Path], out: Path, force: bool = False) -> list[Path]:
    """Write the report of every run under ``paths`` to ``out``; returns the files written.

    Raises:
        ResultsError: a path is not an lm_eval output folder, or holds no labelled pdd task.
        ReportExists: ``out`` holds a report already and ``force`` is false.
    """
    out = Path(out)
    refuse_unsafe_output(out, paths, option="--out")  # before any run is read
    runs = find_runs(paths)
    try:
        reports = collect(runs)
        skipped = [(run, task, why) for run in runs for task, why in left_out(run.results)]
        checks = [(run, found) for run in runs if (found := contamination_checks(run.results))]
        if not reports and not checks:
            raise ResultsError(
                f"No labelled pdd task in the {len(runs)} run(s) under {', '.join(map(str, paths))} (no <method>_auc "
                "metric). The report reads runs of the labelled pdd tasks (--tasks pdd_wikimia, pdd_custom with labels, ...)."
                + "".join(f" {task} of {run.file}: {why}." for run, task, why in skipped)
            )
        if out.exists() and not out.is_dir():
            raise ResultsError(f"--out {out} is a file; name a folder for the report.")
        existing = [out / name for name in (*REPORT_FILES, *CONTAMINATION_FILES, BOARD_IMAGE) if (out / name).exists()]
        if existing and not force:
            raise ReportExists(
                f"{out} already holds a report ({', '.join(p.name for p in existing)}); pass --force to overwrite its "
                "files, or choose another --out folder."
            )
        foreign = [path for path in existing if not carries_report_mark(path)]
        if foreign:
            raise ReportExists(
                f"{out} holds {', '.join(p.name for p in foreign)}, of a report file's name but not written by "
                "lm-eval-pdd report (not its content), which --force does not replace. Move "
                f"{'it' if len(foreign) == 1 else 'them'} out of the folder, or choose another --out folder."
            )
        contamination = contamination_board(runs)
        with staged_report(out) as staging:
            written = _write_documents(runs, reports, skipped, checks, contamination, staging)
        if contamination is None:  # an earlier report's matrix (--force) would be read as this one's
            for name in (*CONTAMINATION_FILES, BOARD_IMAGE):
                (out / name).unlink(missing_ok=True)
        return [out / path.name for path in written]
    finally:
        warn_bad_values(runs)
        for line in model_spellings(runs):
            print(line, file=sys.stderr)


def _write_documents(runs, reports, skipped, checks, contamination: ContaminationBoard | None, out: Path) -> list[Path]:
    """Write the report's files into ``out`` (the staging folder); returns them, the documents last."""
    written: list[Path] = []

    md = [f"# {REPORT_TITLE}", ""]
    body = [f"<h1>{REPORT_TITLE}</h1>"]
    runs_line = f"{len(runs)} run(s): " + ", ".join(f"{shown(run.model)} ({run.file})" for run in runs)
    md += [runs_line, ""]
    body.append(f"<p>{html.escape(runs_line)}</p>")
    damaged = [bad for run in runs for bad in run.bad_values]
    if damaged:
        line = (
            f"**Damaged values:** {len(damaged)} value(s) of the results JSON are not what their key holds (out of "
            "range, not a number, NaN, missing) and are not shown as numbers:"
        )
        md += [line, ""] + [f"- {bad.line().removeprefix('warning: ')}" for bad in damaged] + [""]
        body.append(
            f"<p class='warn'>{html.escape(line).replace('**', '')}</p><ul>"
            + "".join(f"<li>{html.escape(bad.line().removeprefix('warning: '))}</li>" for bad in damaged)
            + "</ul>"
        )
    if contamination is not None:
        groups = board_groups([run.results for run in runs])
        written.append(write_heat_map(contamination, groups, out / BOARD_IMAGE))
        md += [
            "## Contamination leaderboard",
            "",
            f"![contamination verdicts, models x benchmarks]({BOARD_IMAGE})",
            "",
            contamination.markdown(),
            "",
        ]
        body += [
            "<h2>Contamination leaderboard</h2>",
            board_html(contamination, groups),
            *(f"<p class='note'>{html.escape(note)}</p>" for note in contamination.notes),
            "<details><summary>Every cell in words</summary>"
            + _html_table(
                ["model", *contamination.benchmarks],
                [
                    [html.escape(m), *(_html_cell(contamination.cell_lines(m, b)) for b in contamination.benchmarks)]
                    for m in contamination.models
                ],
            )
            + "</details>",
            "<p>Contamination files: <a href='contamination.csv'>contamination.csv</a>, "
            "<a href='contamination.json'>contamination.json</a> (one row per model and benchmark); heat map: "
            f"<a href='{BOARD_IMAGE}'>{BOARD_IMAGE}</a>.</p>",
        ]
        written += contamination.write(out)

    for report in reports:
        title = f"{report.task}: {shown(report.run.model)}"
        counts = (
            f"{report.n_members} members, {report.n_non_members} non-members"
            if report.n_members is not None
            else f"{report.counts.total if report.counts.total is not None else '?'} texts"
        )
        md += [f"## {title}", "", f"{counts}; run {report.run.timestamp}.", ""]
        body += [
            f"<h2>{html.escape(title)}</h2>",
            f"<p>{html.escape(counts)}; run {html.escape(report.run.timestamp)}.</p>",
        ]
        if warning := too_few_line(report):
            md += [f"**{warning}**", ""]
            body.append(f"<p class='warn'><b>{html.escape(warning)}</b></p>")
        if report.differing:
            line = f"Settings that differ from the other runs of this model on {report.task}: {report.differing}."
            md += [line, ""]
            body.append(f"<p class='warn'>{html.escape(line)}</p>")
        header, rows = table_rows(report, lambda text: f"**{text}**")
        md += [markdown_table(header, rows), ""]
        html_header, html_rows = table_rows(report, _html_bold)
        html_rows = [
            [html.escape(cells[0]), *(c if c.startswith("<b>") else html.escape(c) for c in cells[1:])]
            for cells in html_rows
        ]
        body.append(_html_table(html_header, html_rows))
        for note in task_notes(report):
            md += [note, ""]
            body.append(f"<p class='note'>{html.escape(note)}</p>")
        if report.scores:
            for kind, plot in (("roc", plot_roc), ("scores", plot_distributions)):
                path = out / f"{kind}_{report.task}_{report.run_id}.png"
                plot(report, path)
                written.append(path)
                caption = "ROC curves (log FPR)" if kind == "roc" else "score distributions"
                md += [f"![{report.task} {caption}]({path.name})", ""]
                data = base64.b64encode(path.read_bytes()).decode("ascii")
                body.append(f"<figure><img alt='{html.escape(caption)}' src='data:image/png;base64,{data}'></figure>")
        settings = settings_in_effect(report.run, report.task)
        md += ["Settings in effect:", ""] + [f"- {name}: {value}" for name, value in settings] + [""]
        body.append(
            "<details><summary>Settings in effect</summary><dl>"
            + "".join(f"<dt>{html.escape(n)}</dt><dd>{html.escape(v)}</dd>" for n, v in settings)
            + "</dl></details>"
        )

    for run, found in checks:
        title = f"Contamination checks (pdd_contamination): {shown(run.model)}"
        md += [f"## {title}", "", f"Run {run.timestamp}.", "", found.markdown(), ""]
        body += [
            f"<h2>{html.escape(title)}</h2>",
            f"<p>Run {html.escape(run.timestamp)}.</p>",
            _html_table(found.header, [[html.escape(cell) for cell in row] for row in found.rows]),
            "<ul>" + "".join(f"<li>{_html_verdict(line)}</li>" for line in found.verdicts) + "</ul>",
            *(f"<p class='note'>{html.escape(note)}</p>" for note in found.notes),
        ]

    board = leaderboard(reports)
    if len(runs) > 1 and board:
        header = ["model", "task", "method", "AUC [95% CI]", "TPR@FPR<1%", "notes"]
        ranked = sorted(board, key=lambda r: (r["task"], -(r["auc"] or 0.0)))
        rows = [
            [
                r["model"],
                r["task"],
                r["method_label"],
                "n/a"
                if r["auc"] is None
                else f"{r['auc']:.3f} [{r['auc_ci95_low']:.3f}, {r['auc_ci95_high']:.3f}]"
                if r["auc_ci95_low"] is not None
                else f"{r['auc']:.3f} [no interval]",
                "n/a" if r["tpr_at_fpr_lt_1pct"] is None else f"{r['tpr_at_fpr_lt_1pct']:.3f}",
                _leaderboard_notes(r),
            ]
            for r in ranked
        ]
        md += ["## Leaderboard", "", markdown_table(header, rows), ""]
        body += ["<h2>Leaderboard</h2>", _html_table(header, [[html.escape(c) for c in row] for row in rows])]
    if skipped:
        md += ["Left out of this report (no member/non-member AUC to show):", ""]
        md += [f"- {task} of {shown(run.model)} ({run.file}): {why}." for run, task, why in skipped] + [""]
        body.append(
            "<p>Left out of this report (no member/non-member AUC to show):</p><ul>"
            + "".join(
                f"<li>{html.escape(f'{task} of {shown(run.model)} ({run.file}): {why}.')}</li>"
                for run, task, why in skipped
            )
            + "</ul>"
        )
    files_line = "Leaderboard files: leaderboard.csv, leaderboard.json (one row per model, task and method)."
    md += [files_line, ""]
    body.append(
        "<p>Leaderboard files: <a href='leaderboard.csv'>leaderboard.csv</a>, "
        "<a href='leaderboard.json'>leaderboard.json</a>; Markdown: <a href='report.md'>report.md</a>.</p>"
    )

    with (out / "leaderboard.csv").open("w", newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=LEADERBOARD_COLUMNS)
        writer.writeheader()
        writer.writerows({k: "" if v is None else v for k, v in row.items()} for row in board)
    (out / "leaderboard.json").write_text(json.dumps(board, indent=1) + "\n")
    (out / "report.md").write_text("\n".join(md))
    page = (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{REPORT_TITLE}</title>"
        f"<style>{_CSS}</style></head><body>" + "\n".join(body) + "</body></html>\n"
    )
    (out / "report.html").write_text(page)
    return written + [out / name for name in REPORT_FILES]


@contextlib.contextmanager
def staged_report(out: Path) -> Iterator[Path]:
    """A staging folder for the report's files (yielded), moved into ``out`` when the block ends.

    A missing ``out`` is the staging folder itself, renamed into place in one step. Into an existing
    ``out`` (which may hold other files of the user's) each file is renamed in turn, ``report.html``
    last, each rename whole: a reader never finds half a file, and a failure leaves no new file. An
    ``OSError`` (read-only folder or mount, full disk) is an
    :class:`~pdd_tasks.tools.outputs.OutputNotWritten` naming ``out`` and the cause; the staging folder
    is removed. The staging folder is locked while in use; those a killed report left are removed first
    (:func:`remove_leftover_staging`).
    """
    refuse_path_through_a_file(out, "--out")
    lock = None
    try:
        remove_leftover_staging(out)
        if out.is_dir():
            staging = Path(tempfile.mkdtemp(prefix=STAGING_INSIDE.removesuffix("*"), dir=out))
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(
                tempfile.mkdtemp(prefix=STAGING_BESIDE.format(name=out.name).removesuffix("*"), dir=out.parent)
            )
        lock = _lock(staging)
        make_shareable(staging)
    except OSError as error:
        raise not_written(out, error, "--out") from None
    try:
        yield staging
        if staging.parent != out:
            os.replace(staging, out)
            return
        last = [staging / name for name in ("report.md", "report.html")]
        for path in [*(p for p in sorted(staging.iterdir()) if p not in last), *last]:
            os.replace(path, out / path.name)
        staging.rmdir()
    except OSError as error:
        shutil.rmtree(staging, ignore_errors=True)
        raise not_written(out, error, "--out") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        if lock is not None:
            os.close(lock)
