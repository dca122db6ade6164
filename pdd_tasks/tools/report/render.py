"""The report's documents, rendered from its model (:mod:`pdd_tasks.tools.report.model`) as text.

:func:`render` returns ``report.md``, ``report.html`` (self-contained: inline CSS, the plots of
:mod:`pdd_tasks.tools.report.plots` embedded as data URIs), ``leaderboard.csv`` and ``leaderboard.json``
(:data:`~pdd_tasks.tools.report.model.LEADERBOARD_COLUMNS`) and, where the runs hold ``pdd_contamination``
results, ``contamination.csv`` and ``contamination.json``; :mod:`pdd_tasks.tools.report.write` writes them.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json

from pdd_tasks.tools.report.board_view import BOARD_IMAGE, board_html
from pdd_tasks.tools.report.contamination_board import CONTAMINATION_FILES, contamination_columns
from pdd_tasks.tools.report.model import LEADERBOARD_COLUMNS, PLOT_CAPTIONS, Cell, Report
from pdd_tasks.tools.report.tables import markdown_table, shown


#: The first line of ``report.md`` and the title of ``report.html``: part of the report's mark.
REPORT_TITLE = "Pretraining-data detection report"

#: The documents every report has (the contamination files besides, where the runs hold a board).
REPORT_FILES = ("report.html", "report.md", "leaderboard.csv", "leaderboard.json")


def _csv_text(columns, rows: list[dict]) -> str:
    """A CSV of ``rows`` (dicts) under ``columns``, None as an empty cell, lines ended by CRLF."""
    stream = io.StringIO(newline="")
    writer = csv.DictWriter(stream, fieldnames=columns)
    writer.writeheader()
    writer.writerows({k: "" if v is None else v for k, v in row.items()} for row in rows)
    return stream.getvalue()


def _markdown_cell(cell: str | Cell) -> str:
    if isinstance(cell, str):
        return cell
    return (f"**{cell.text}**" if cell.best else cell.text) + cell.mark


def _html_table_cell(cell: str | Cell) -> str:
    if isinstance(cell, str):
        return html.escape(cell)
    return _html_bold(cell.text) + cell.mark if cell.best else html.escape(cell.text + cell.mark)


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


def render(report: Report, images: dict[str, bytes]) -> dict[str, str]:
    """The report's documents (:data:`REPORT_FILES`, the contamination files only where the runs hold a board):
    file name -> text. ``images`` are the plots drawn (:func:`pdd_tasks.tools.report.plots.draw_plots`),
    embedded in ``report.html`` as data URIs and linked from ``report.md``."""
    runs, contamination = report.runs, report.contamination
    documents: dict[str, str] = {}

    md = [f"# {REPORT_TITLE}", ""]
    body = [f"<h1>{REPORT_TITLE}</h1>"]
    runs_line = f"{len(runs)} run(s): " + ", ".join(f"{shown(run.model)} ({run.file})" for run in runs)
    md += [runs_line, ""]
    body.append(f"<p>{html.escape(runs_line)}</p>")
    damaged = report.damaged
    if damaged:
        line = (
            f"**Damaged values:** {len(damaged)} value(s) of the results JSON are not what their key holds (out of "
            "range, not a number, NaN, missing) and are not shown as numbers:"
        )
        md += [line, ""] + [f"- {line}" for line in damaged] + [""]
        body.append(
            f"<p class='warn'>{html.escape(line).replace('**', '')}</p><ul>"
            + "".join(f"<li>{html.escape(line)}</li>" for line in damaged)
            + "</ul>"
        )
    if contamination is not None:
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
            board_html(contamination, report.groups),
            *(f"<p class='note'>{html.escape(note)}</p>" for note in contamination.notes),
            "<details><summary>Every cell in words</summary>"
            + _html_table(
                ["model", *contamination.benchmarks],
                [
                    [html.escape(m), *(_html_cell(contamination.lines[m][b]) for b in contamination.benchmarks)]
                    for m in contamination.models
                ],
            )
            + "</details>",
            "<p>Contamination files: <a href='contamination.csv'>contamination.csv</a>, "
            "<a href='contamination.json'>contamination.json</a> (one row per model and benchmark); heat map: "
            f"<a href='{BOARD_IMAGE}'>{BOARD_IMAGE}</a>.</p>",
        ]
        csv_name, json_name = CONTAMINATION_FILES
        documents[csv_name] = _csv_text(contamination_columns(), contamination.rows)
        documents[json_name] = json.dumps(contamination.to_json(), indent=1) + "\n"

    for task in report.tasks:
        title = f"{task.task}: {shown(task.run.model)}"
        counts = (
            f"{task.n_members} members, {task.n_non_members} non-members"
            if task.n_members is not None
            else f"{task.counts.total if task.counts.total is not None else '?'} texts"
        )
        md += [f"## {title}", "", f"{counts}; run {task.run.timestamp}.", ""]
        body += [
            f"<h2>{html.escape(title)}</h2>",
            f"<p>{html.escape(counts)}; run {html.escape(task.run.timestamp)}.</p>",
        ]
        if warning := task.warning:
            md += [f"**{warning}**", ""]
            body.append(f"<p class='warn'><b>{html.escape(warning)}</b></p>")
        if task.differing:
            line = f"Settings that differ from the other runs of this model on {task.task}: {task.differing}."
            md += [line, ""]
            body.append(f"<p class='warn'>{html.escape(line)}</p>")
        header, rows = task.table
        md += [markdown_table(header, [[_markdown_cell(cell) for cell in cells] for cells in rows]), ""]
        body.append(_html_table(header, [[_html_table_cell(cell) for cell in cells] for cells in rows]))
        for note in task.notes:
            md += [note, ""]
            body.append(f"<p class='note'>{html.escape(note)}</p>")
        if task.scores:
            for kind, caption in PLOT_CAPTIONS.items():
                name = task.plot_name(kind)
                md += [f"![{task.task} {caption}]({name})", ""]
                data = base64.b64encode(images[name]).decode("ascii")
                body.append(f"<figure><img alt='{html.escape(caption)}' src='data:image/png;base64,{data}'></figure>")
        settings = task.settings_shown
        md += ["Settings in effect:", ""] + [f"- {name}: {value}" for name, value in settings] + [""]
        body.append(
            "<details><summary>Settings in effect</summary><dl>"
            + "".join(f"<dt>{html.escape(n)}</dt><dd>{html.escape(v)}</dd>" for n, v in settings)
            + "</dl></details>"
        )

    for run, found in report.checks:
        title = f"Contamination checks (pdd_contamination): {shown(run.model)}"
        md += [f"## {title}", "", f"Run {run.timestamp}.", "", found.markdown(), ""]
        body += [
            f"<h2>{html.escape(title)}</h2>",
            f"<p>Run {html.escape(run.timestamp)}.</p>",
            _html_table(found.header, [[html.escape(cell) for cell in row] for row in found.rows]),
            "<ul>" + "".join(f"<li>{_html_verdict(line)}</li>" for line in found.verdicts) + "</ul>",
            *(f"<p class='note'>{html.escape(note)}</p>" for note in found.notes),
        ]

    board = report.leaderboard
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
    if report.skipped:
        md += ["Left out of this report (no member/non-member AUC to show):", ""]
        md += [f"- {task} of {shown(run.model)} ({run.file}): {why}." for run, task, why in report.skipped] + [""]
        body.append(
            "<p>Left out of this report (no member/non-member AUC to show):</p><ul>"
            + "".join(
                f"<li>{html.escape(f'{task} of {shown(run.model)} ({run.file}): {why}.')}</li>"
                for run, task, why in report.skipped
            )
            + "</ul>"
        )
    files_line = "Leaderboard files: leaderboard.csv, leaderboard.json (one row per model, task and method)."
    md += [files_line, ""]
    body.append(
        "<p>Leaderboard files: <a href='leaderboard.csv'>leaderboard.csv</a>, "
        "<a href='leaderboard.json'>leaderboard.json</a>; Markdown: <a href='report.md'>report.md</a>.</p>"
    )

    documents["leaderboard.csv"] = _csv_text(LEADERBOARD_COLUMNS, board)
    documents["leaderboard.json"] = json.dumps(board, indent=1) + "\n"
    documents["report.md"] = "\n".join(md)
    documents["report.html"] = (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{REPORT_TITLE}</title>"
        f"<style>{_CSS}</style></head><body>" + "\n".join(body) + "</body></html>\n"
    )
    return documents
