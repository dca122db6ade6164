"""The contamination leaderboard drawn (pdd_tasks/tools/report/board_view.py): the grid of ``report.html`` with its
groups, the heat map ``contamination.png``, and the page as a real browser (Debian's Chromium, headless) shows it.

The runs are hand-made results JSONs (tests/support/results.py ``results_of``) with the groups a real
``pdd_contamination`` run records (``contamination_groups`` and each leaf's ``group``: tests/tasks)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from support.results import results_of

from pdd_tasks.tools.cli import main
from pdd_tasks.tools.report.board_view import (
    PALETTE,
    board_columns,
    board_html,
    write_heat_map,
)
from pdd_tasks.tools.report.contamination_board import ContaminationBoard, contamination_board
from pdd_tasks.tools.results.contamination import board_groups
from pdd_tasks.tools.results.runs import find_runs


#: lm-eval's leaderboard shape in small: a top-level group, two nested groups, and a task of no group.
GROUPS = {"leaderboard": ["leaderboard_bbh", "leaderboard_gpqa"], "leaderboard_bbh": ["bbh_a", "bbh_b"]}
GPQA = {"leaderboard_gpqa": ["gpqa_x"]}  # recorded only as lm-eval's group_subtasks and the leaf's "group"
#: model -> task -> (CoDeC drops of 1,000, exchangeability p or None). model-a: contaminated on arc_easy
#: and bbh_b, inconclusive on gsm8k, no verdict on gpqa_x; model-b tests three tasks, none detected.
MODELS = {
    "/ck/model-a": {
        "arc_easy": (990, 0.6),
        "bbh_a": (500, 0.4),
        "bbh_b": (980, 0.001),
        "gpqa_x": (30, None),
        "gsm8k": (850, 0.5),
    },
    "org/model-b": {"arc_easy": (500, 0.5), "bbh_a": (500, 0.5), "gpqa_x": (500, 0.5)},
}

CHROMIUM = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="Debian's chromium is not installed (apt-get install chromium; .ci/install installs it in CI)",
)


def write_runs(root: Path) -> Path:
    """One results JSON per model of :data:`MODELS`, where lm_eval writes it, with the groups recorded."""
    for model, tasks in MODELS.items():
        results = results_of(tasks)
        results["config"] = {"model": "hf", "model_args": f"pretrained={model},dtype=float32"}
        metadata = results["configs"]["pdd_contamination"]["metadata"]
        metadata["contamination_groups"] = GROUPS
        if "gpqa_x" in metadata["contamination"]:
            metadata["contamination"]["gpqa_x"]["group"] = "leaderboard_gpqa"
        results["group_subtasks"] = {**GPQA, "pdd_contamination": []}
        file = root / model.strip("/").replace("/", "__") / "results_2026-01-01T00-00-00.000000.json"
        file.parent.mkdir(parents=True)
        file.write_text(json.dumps(results))
    return root


@pytest.fixture
def report(tmp_path, capsys) -> Path:
    out = tmp_path / "report"
    assert main(["report", str(write_runs(tmp_path / "out")), "--out", str(out)]) == 0, capsys.readouterr().err
    return out


def board_of(tmp_path) -> tuple[ContaminationBoard, dict]:
    runs = find_runs([write_runs(tmp_path / "runs")])
    return contamination_board(runs), board_groups([run.results for run in runs])


def test_the_groups_are_read_from_every_record_and_laid_out_as_a_tree(tmp_path):
    board, groups = board_of(tmp_path)
    assert groups == {**GROUPS, **GPQA}  # pdd_contamination's groups, the leaf's group, lm-eval's group_subtasks
    columns = board_columns(board, groups)
    assert [(c.name, c.ancestors, c.is_group, c.leaves) for c in columns] == [
        ("arc_easy", (), False, ()),
        ("leaderboard", (), True, ("bbh_a", "bbh_b", "gpqa_x")),
        ("leaderboard_bbh", ("leaderboard",), True, ("bbh_a", "bbh_b")),
        ("bbh_a", ("leaderboard", "leaderboard_bbh"), False, ()),
        ("bbh_b", ("leaderboard", "leaderboard_bbh"), False, ()),
        ("leaderboard_gpqa", ("leaderboard",), True, ("gpqa_x",)),
        ("gpqa_x", ("leaderboard", "leaderboard_gpqa"), False, ()),
        ("gsm8k", (), False, ()),
    ]
    # a group none of whose tasks is on the board is not a column
    assert [c.name for c in board_columns(board, {**groups, "mmlu": ["mmlu_x"]})] == [c.name for c in columns]


def test_the_grid_colours_each_cell_and_a_group_shows_its_own_row_or_its_leaves_count(tmp_path):
    with_rows, groups = board_of(tmp_path)
    # the board's group-level verdicts fill their groups' cells: leaderboard pools its 3 tasks
    assert with_rows.is_group("leaderboard") and with_rows.cell("model-a", "leaderboard") is not None
    verdict = with_rows.cell("model-a", "leaderboard")["verdict"]
    page = board_html(with_rows, groups)
    assert f"class='v v-{verdict.replace(' ', '-')} in-board-g0 grp' data-verdict='{verdict}'" in page
    # the same board without group-level rows (runs read before they existed): the leaves' count
    board = ContaminationBoard(
        with_rows.models,
        [b for b in with_rows.benchmarks if not with_rows.is_group(b)],
        [r for r in with_rows.rows if not with_rows.is_group(r["benchmark"])],
        [],
    )
    page = board_html(board, groups)
    assert "data-verdict='contaminated' title='contaminated: seen example by example\nCoDeC 0.990" in page
    assert "contaminated<br><span class='score'>CoDeC 0.990</span>" in page
    assert "class='v v-not-tested' data-verdict='not tested'" in page  # model-b did not test gsm8k
    for state, (background, _) in PALETTE.items():
        assert f".board td.v-{state.replace(' ', '-')}{{background:{background};" in page
    # no group-level row: the group's cell counts its leaves' verdicts, not coloured as a verdict
    assert "title='3 tasks: 1 contaminated, 1 not detected, 1 no verdict (no group-level verdict" in page
    assert ">C 1 · ND 1 · NV 1</td>" in page
    # top-level groups start open, nested ones closed; a leaf sits in every group above it
    assert "id='board-g0' aria-label='show the tasks of leaderboard' checked>" in page
    assert "id='board-g1' aria-label='show the tasks of leaderboard_bbh'>" in page
    assert "class='v v-contaminated in-board-g0 in-board-g1' data-verdict='contaminated'" in page

    # a group's own row (a group-level verdict), where the board has one, fills the group's column
    own = dict(board.cell("model-a", "bbh_b"), benchmark="leaderboard_bbh")
    with_group = ContaminationBoard(board.models, [*board.benchmarks, "leaderboard_bbh"], [*board.rows, own], [])
    page = board_html(with_group, groups)
    assert "class='v v-contaminated in-board-g0 grp' data-verdict='contaminated'" in page
    assert [c.name for c in board_columns(with_group, groups)] == [c.name for c in board_columns(board, groups)]


def test_the_heat_map_is_the_verdicts_colours_and_the_same_bytes_each_time(tmp_path):
    import matplotlib.image

    board, groups = board_of(tmp_path)
    first, second = write_heat_map(board, groups, tmp_path / "a.png"), write_heat_map(board, groups, tmp_path / "b.png")
    assert first.read_bytes() == second.read_bytes()
    assert b"Software" not in first.read_bytes() and b"Creation" not in first.read_bytes()
    pixels = colours(matplotlib.image.imread(first))
    # every verdict's colour fills cells (a cell is far more than the legend's swatch)
    for state in ("contaminated", "inconclusive", "not detected", "no verdict"):
        assert pixels.get(PALETTE[state][0], 0) > 5000, state


def test_report_force_replaces_its_own_heat_map_and_keeps_a_users_png_of_its_name(report, tmp_path, capsys):
    """Before: a second contamination report into the same --out was refused: contamination.png carried no mark."""
    runs = str(tmp_path / "out")
    assert main(["report", runs, "--out", str(report), "--force"]) == 0, capsys.readouterr().err
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "contamination.png").write_bytes((report / "contamination.png").read_bytes().replace(b"Title", b"Other"))
    assert main(["report", runs, "--out", str(mine), "--force"]) != 0
    assert "contamination.png, of a report file's name but not written by lm-eval-pdd report" in capsys.readouterr().err
    assert sorted(p.name for p in mine.iterdir()) == ["contamination.png"]


def test_the_report_links_the_heat_map_and_the_left_out_list_follows_the_results(report):
    page, markdown = (report / "report.html").read_text(), (report / "report.md").read_text()
    assert (report / "contamination.png").is_file()
    assert "<a href='contamination.png'>contamination.png</a>" in page
    assert "![contamination verdicts, models x benchmarks](contamination.png)" in markdown
    # the board leads, before each run's own table
    assert page.index("<h2>Contamination leaderboard</h2>") < page.index("<h2>Contamination checks")


def colours(image: np.ndarray) -> dict[str, int]:
    """Pixel count of each colour of an RGB(A) image read by matplotlib (floats 0..1), as ``#RRGGBB``."""
    rgb = np.round(image[..., :3] * 255).astype(np.int64).reshape(-1, 3)
    codes, counts = np.unique(rgb[:, 0] << 16 | rgb[:, 1] << 8 | rgb[:, 2], return_counts=True)
    return {f"#{code:06X}": int(count) for code, count in zip(codes, counts, strict=True)}


def chromium(page: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        "--window-size=1200,900",
        *args,
        page.as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


@needs_chromium
def test_chromium_shows_the_coloured_grid(report, tmp_path):
    import matplotlib.image

    shot = tmp_path / "shot.png"
    chromium(report / "report.html", tmp_path, f"--screenshot={shot}")
    pixels = colours(matplotlib.image.imread(shot))
    # the grid's cells, not only the legend's swatches (17 x 17 pixels each): a cell is about 120 x 40
    for state in ("contaminated", "inconclusive", "not detected"):
        assert pixels.get(PALETTE[state][0], 0) > 2000, (state, sorted(pixels.items(), key=lambda kv: -kv[1])[:8])


@needs_chromium
def test_chromium_folds_a_group_to_its_header_and_opens_it_on_a_click(report, tmp_path):
    """The page as Chromium lays it out: a probe script (added to a copy of the page; the page itself has no
    script) records which cells are displayed, clicks the nested group's header, and records again."""
    probe = """<script>
    const shown = () => [...document.querySelectorAll('table.board tr:nth-child(1) td')]
      .filter(td => getComputedStyle(td).display !== 'none').map(td => td.dataset.verdict || td.textContent).join('|');
    document.body.dataset.before = shown();
    document.querySelector("label[for='board-g1']").click();
    document.body.dataset.after = shown();
    </script></body>"""
    page = tmp_path / "probe.html"
    page.write_text((report / "report.html").read_text().replace("</body>", probe))
    dom = chromium(page, tmp_path, "--dump-dom").stdout
    assert "<script" not in (report / "report.html").read_text()
    before = dom.split('data-before="')[1].split('"')[0]
    after = dom.split('data-after="')[1].split('"')[0]
    # model-a's row: arc_easy, leaderboard (open), leaderboard_bbh (closed: its tasks hidden), leaderboard_gpqa
    # (closed), gsm8k; a click on leaderboard_bbh shows bbh_a and bbh_b
    # the groups' own verdicts (leaderboard and leaderboard_bbh pool their tasks; leaderboard_gpqa has one
    # task, so no group-level test: its cell counts it)
    assert before == "contaminated|contaminated|contaminated|NV 1|inconclusive"
    assert after == "contaminated|contaminated|contaminated|not detected|contaminated|NV 1|inconclusive"
