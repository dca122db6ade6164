"""The report's plots, drawn from its model (:mod:`pdd_tasks.tools.report.model`) as PNG files.

Per labelled task with samples, ``roc_<task>_<run>.png`` (:func:`plot_roc`: every method's ROC curve on
one plot, FPR on a log scale as the membership-inference literature draws them) and
``scores_<task>_<run>.png`` (:func:`plot_distributions`: member and non-member score histograms, one
panel per method); where the runs hold ``pdd_contamination`` results, the contamination leaderboard's heat
map (:func:`pdd_tasks.tools.report.board_view.write_heat_map`). :func:`draw_plots` draws them all into a
folder and returns each file's bytes, which the documents embed or link
(:mod:`pdd_tasks.tools.report.render`).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from pdd_tasks.results_schema import BLIND, FPR_BUDGETS
from pdd_tasks.tools.report.board_view import BOARD_IMAGE, write_heat_map
from pdd_tasks.tools.report.model import Report, TaskReport


def draw_plots(report: Report, out: Path) -> dict[str, bytes]:
    """Draw every plot of ``report`` into the folder ``out``: the contamination heat map first, then each
    task's ROC and score plots; returns file name -> the PNG's bytes."""
    paths = []
    if report.contamination is not None:
        paths.append(write_heat_map(report.contamination, report.groups, out / BOARD_IMAGE))
    for task in report.tasks:
        if task.scores:
            for kind, plot in (("roc", plot_roc), ("scores", plot_distributions)):
                path = out / task.plot_name(kind)
                plot(task, path)
                paths.append(path)
    return {path.name: path.read_bytes() for path in paths}


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
