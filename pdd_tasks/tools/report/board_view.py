"""The contamination leaderboard drawn: a coloured grid in ``report.html`` and a heat map, ``contamination.png``.

:class:`~pdd_tasks.tools.report.contamination_board.ContaminationBoard` holds the verdicts; this module shows them
(docs/report.md, "The contamination leaderboard"):

- **The columns keep the runs' groups.**
  :func:`~pdd_tasks.tools.results.contamination.board_groups` reads each run's groups: ``pdd_contamination``'s
  ``contamination_groups`` (group -> direct children, nested), each leaf's ``contamination.<leaf>.group``, and
  lm-eval's own ``group_subtasks``. :func:`board_columns` lays the benchmarks out as that tree, each group's column
  just before its children's. A group's column shows the group's own row of the board where it has one (a
  group-level verdict), else the count of its leaves' verdicts (not a verdict, so not coloured as one).
- **The grid** (:func:`board_html`): each cell coloured by verdict (:data:`PALETTE`, told apart by lightness and
  hue by colour-blind readers too) and holding the verdict word and the CoDeC score; its title (the tooltip) the
  cell's lines (:attr:`~pdd_tasks.tools.report.contamination_board.ContaminationBoard.lines`). A group's
  leaves fold away under its column header, with no script (a hidden checkbox per group and CSS); top-level groups
  start open, nested ones closed.
- **The heat map** (:func:`write_heat_map`): models as rows, the same columns, colour the verdict, text the CoDeC
  score and the verdict's code (:data:`CODES`); a PNG with no date or software in its metadata, so one board
  gives one file.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path

from pdd_tasks.tools.report.contamination_board import ContaminationBoard


#: The heat map's file name, beside contamination.csv and contamination.json.
BOARD_IMAGE = "contamination.png"

#: The heat map's PNG text chunk (``Title``): the mark by which ``report --force`` knows the file for its own.
BOARD_IMAGE_TITLE = "lm-eval-pdd contamination board"

#: Cell state -> (background, text colour). Paul Tol's colour-blind-safe schemes: red, pale yellow, light blue
#: differ in lightness as well as hue; "no verdict" grey, "not tested" white.
PALETTE = {
    "contaminated": ("#CC3311", "#FFFFFF"),
    "inconclusive": ("#EEDD88", "#222222"),
    "not detected": ("#77AADD", "#222222"),
    "no verdict": ("#DDDDDD", "#222222"),
    "not tested": ("#FFFFFF", "#777777"),
}

#: Cell state -> the short code the heat map and a group's summary write beside (or for) the colour.
CODES = {"contaminated": "C", "inconclusive": "I", "not detected": "ND", "no verdict": "NV", "not tested": "NT"}


@dataclass(frozen=True)
class Column:
    """A column of the grid: a benchmark, or a group (``leaves``: the board's benchmarks under it, nested groups
    included); ``ancestors``: the groups it sits in, outermost first."""

    name: str
    ancestors: tuple[str, ...]
    is_group: bool
    leaves: tuple[str, ...] = ()


def board_columns(board: ContaminationBoard, groups: dict[str, list[str]]) -> list[Column]:
    """The board's benchmarks as a tree of columns, depth first: a group before its children, the groups and
    ungrouped benchmarks in the order the board first names them (or one of their leaves). A group is shown
    where one of its leaves, or its own row, is on the board; a task in two groups sits under the first."""
    on_board = set(board.benchmarks)
    parent: dict[str, str] = {}
    for group, children in groups.items():
        for child in children:
            if child not in parent and child != group:
                parent[child] = group

    def below(group: str, seen: tuple[str, ...]) -> list[str]:
        """The benchmarks of the board under ``group`` (cycles cut)."""
        found = []
        for child in groups.get(group, []):
            if parent.get(child) != group or child in seen:
                continue
            if child in groups:
                found += ([child] if child in on_board else []) + below(child, (*seen, child))
            elif child in on_board:
                found.append(child)
        return found

    def root(name: str) -> tuple[str, ...]:
        chain = (name,)
        while chain[0] in parent and parent[chain[0]] not in chain:
            chain = (parent[chain[0]], *chain)
        return chain

    columns: list[Column] = []
    placed: set[str] = set()

    def place(name: str, ancestors: tuple[str, ...]) -> None:
        if name in placed:
            return
        placed.add(name)
        if name not in groups:
            columns.append(Column(name, ancestors, False))
            return
        leaves = tuple(b for b in below(name, (*ancestors, name)) if b not in groups)
        if not leaves and name not in on_board:
            return
        columns.append(Column(name, ancestors, True, leaves))
        for child in groups[name]:
            if parent.get(child) == name and child not in ancestors and (child in on_board or child in groups):
                place(child, (*ancestors, name))

    for benchmark in board.benchmarks:
        chain = root(benchmark)
        place(chain[0], ())
    return columns


def _state(row: dict | None) -> str:
    return "not tested" if row is None else row["verdict"]


def _score(row: dict | None) -> str:
    """``"0.990"``: the row's CoDeC score, "" where it has none."""
    value = None if row is None else row.get("codec_score")
    return "" if value is None else f"{value:.3f}"


def _slug(state: str) -> str:
    return state.replace(" ", "-")


def _summary(board: ContaminationBoard, model: str, leaves: tuple[str, ...]) -> tuple[str, str]:
    """(``"C 2 · ND 21"``, its words) of a group without its own row: the count of each verdict over its leaves."""
    counts: dict[str, int] = {}
    for leaf in leaves:
        state = _state(board.grid[model].get(leaf))
        counts[state] = counts.get(state, 0) + 1
    order = [state for state in PALETTE if state in counts]
    short = " · ".join(f"{CODES[state]} {counts[state]}" for state in order)
    words = ", ".join(f"{counts[state]} {state}" for state in order)
    return short, f"{len(leaves)} tasks: {words} (no group-level verdict in these runs)"


def legend_html() -> str:
    """The legend: a swatch, the code and the word of each cell state."""
    items = "".join(
        f"<span class='board-key'><span class='board-swatch' style='background:{back}'></span>"
        f"{html.escape(CODES[state])} {html.escape(state)}</span>"
        for state, (back, _) in PALETTE.items()
    )
    return f"<p class='board-legend'>{items}</p>"


_BOARD_CSS = (
    ".board-scroll{overflow-x:auto;max-width:100%}"
    ".board td.v,.board th.col{text-align:center;min-width:6.5em;font-size:0.85em;line-height:1.25}"
    ".board th.col{vertical-align:bottom;font-weight:600;background:#f6f6f6}.board th.grp{background:#e8e8e8}"
    ".board th.row{position:sticky;left:0;background:#fff;text-align:left;z-index:1}"
    ".board td.grp{border-left:3px solid #555}.board th.grp{border-left:3px solid #555}"
    ".board .score{font-variant-numeric:tabular-nums}.board td.summary{background:#f6f6f6;color:#222}"
    ".board .depth{display:block;font-weight:400;color:#666;font-size:0.85em}"
    ".board label{cursor:pointer}.board-toggle{position:absolute;opacity:0;width:1px;height:1px}"
    ".board-toggle:focus-visible~.board-scroll{outline:2px solid #4477AA}"
    ".board-legend{display:flex;flex-wrap:wrap;gap:4px 14px;font-size:0.9em}"
    ".board-swatch{display:inline-block;width:1.1em;height:1.1em;border:1px solid #888;vertical-align:-0.2em;"
    "margin-right:4px}"
    + "".join(
        f".board td.v-{_slug(state)}{{background:{back};color:{text}}}" for state, (back, text) in PALETTE.items()
    )
)


def board_html(board: ContaminationBoard, groups: dict[str, list[str]]) -> str:
    """The grid (module docstring): a legend, a hidden checkbox per group and the table, with its own CSS."""
    columns = board_columns(board, groups)
    ids = {column.name: f"board-g{index}" for index, column in enumerate(c for c in columns if c.is_group)}
    css = [_BOARD_CSS]
    for ident in ids.values():  # a column is shown where every group it sits in is open
        css.append(f"#{ident}:not(:checked)~.board-scroll .in-{ident}{{display:none}}")
        css.append(f"#{ident}~.board-scroll label[for={ident}]::before{{content:'\\25B8  '}}")
        css.append(f"#{ident}:checked~.board-scroll label[for={ident}]::before{{content:'\\25BE  '}}")
    toggles = "".join(
        f"<input type='checkbox' class='board-toggle' id='{ids[c.name]}'"
        f" aria-label='{html.escape('show the tasks of ' + c.name, quote=True)}'"
        f"{' checked' if not c.ancestors else ''}>"
        for c in columns
        if c.is_group
    )

    def classes(column: Column, *more: str) -> str:
        return " ".join([*more, *(f"in-{ids[a]}" for a in column.ancestors), *(["grp"] if column.is_group else [])])

    head = ["<th class='row'>model</th>"]
    for column in columns:
        path = " › ".join(column.ancestors)
        over = f"<span class='depth'>{html.escape(path)}</span>" if path else ""
        if column.is_group:
            label = f"<label for='{ids[column.name]}'>{html.escape(column.name)}</label> ({len(column.leaves)})"
            title = f"group {column.name}: {len(column.leaves)} task(s); click to show or hide them"
        else:
            label, title = html.escape(column.name), column.name
        head.append(
            f"<th class='{classes(column, 'col')}' scope='col' title='{html.escape(title, quote=True)}'>{over}{label}</th>"
        )
    body = []
    for model in board.models:
        cells = [f"<th class='row' scope='row'>{html.escape(model)}</th>"]
        for column in columns:
            row = board.grid[model].get(column.name)
            if column.is_group and row is None:
                short, words = _summary(board, model, column.leaves)
                cells.append(
                    f"<td class='{classes(column, 'v', 'summary')}' title='{html.escape(words, quote=True)}'>"
                    f"{html.escape(short)}</td>"
                )
                continue
            state = _state(row)
            lines = board.lines[model].get(column.name) or ["not tested: the model's runs did not test this benchmark"]
            score = _score(row)
            shown = html.escape(state) + (f"<br><span class='score'>CoDeC {score}</span>" if score else "")
            cells.append(
                f"<td class='{classes(column, 'v', f'v-{_slug(state)}')}' data-verdict='{html.escape(state)}'"
                f" title='{html.escape(chr(10).join(lines), quote=True)}'>{shown}</td>"
            )
        body.append("<tr>" + "".join(cells) + "</tr>")
    table = (
        f"<div class='board-scroll'><table class='board'><thead><tr>{''.join(head)}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )
    return f"<style>{''.join(css)}</style>{legend_html()}<div class='board-grid'>{toggles}{table}</div>"


def write_heat_map(board: ContaminationBoard, groups: dict[str, list[str]], path: Path) -> Path:
    """The heat map (module docstring) as a PNG at ``path``: every column of :func:`board_columns` (a group's column
    only where it has its own row), the verdict's colour, the CoDeC score and the verdict's code in each cell, a
    legend under it. No date or software in the PNG's metadata: the same board gives the same bytes; its title
    (:data:`BOARD_IMAGE_TITLE`) marks it as the report's own."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    columns = [c for c in board_columns(board, groups) if not c.is_group or c.name in board.benchmarks]
    width = max(4.0, 1.8 + 0.85 * len(columns))
    height = max(2.4, 1.9 + 0.5 * len(board.models) + 0.06 * max(len(c.name) for c in columns))
    fig, ax = plt.subplots(figsize=(width, height), dpi=150)
    for y, model in enumerate(board.models):
        for x, column in enumerate(columns):
            row = board.grid[model].get(column.name)
            state = _state(row)
            back, text = PALETTE[state]
            ax.add_patch(Rectangle((x, y), 1, 1, facecolor=back, edgecolor="#888888", linewidth=0.6))
            score = _score(row)
            label = f"{score}\n{CODES[state]}" if score else CODES[state]
            ax.text(x + 0.5, y + 0.5, label, ha="center", va="center", fontsize=7, color=text)
    ax.set_xlim(0, len(columns))
    ax.set_ylim(len(board.models), 0)
    ax.set_xticks([x + 0.5 for x in range(len(columns))])
    ax.set_xticklabels([c.name for c in columns], rotation=45, ha="right", fontsize=7)
    for tick, column in zip(ax.get_xticklabels(), columns, strict=True):
        if column.is_group:
            tick.set_fontweight("bold")
    ax.set_yticks([y + 0.5 for y in range(len(board.models))])
    ax.set_yticklabels(board.models, fontsize=8)
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_title("Contamination verdicts (cell: CoDeC score, verdict code)", fontsize=9)
    handles = [
        Patch(facecolor=back, edgecolor="#888888", label=f"{CODES[state]} {state}")
        for state, (back, _) in PALETTE.items()
    ]
    # a legend of at most 3 columns fits a narrow board; the saved box takes in the legend and labels
    fig.legend(handles=handles, loc="lower center", ncol=min(3, len(handles)), fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.14, 1, 1))
    metadata = {"Software": None, "Title": BOARD_IMAGE_TITLE}
    fig.savefig(path, format="png", metadata=metadata, bbox_inches="tight", pad_inches=0.1)
    plt.close(fig)
    return path
