"""``lm-eval-pdd report`` and ``table`` on real runs made here by the ``lm_eval`` CLI with a tiny model."""

from __future__ import annotations

import base64
import csv
import json
from html.parser import HTMLParser

import pytest
from conftest import run_lm_eval, tasks_path
from PIL import Image

from pdd_tasks.registry import DEFAULT_METHODS
from pdd_tasks.tasks.aggregations import AGGREGATIONS
from pdd_tasks.tools.cli import main
from pdd_tasks.tools.report_files import COLUMN_OF_METRIC, LEADERBOARD_COLUMNS


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def lm_eval_run(model, table, out, metadata):
    run_lm_eval(
        [
            "--model", "hf",
            "--model_args", f"pretrained={model},dtype=float32",
            "--device", "cpu",
            "--include_path", tasks_path(),
            "--tasks", "pdd_wikimia_32",
            "--batch_size", "8",
            "--limit", "24",
            "--metadata", json.dumps({"freq_table": str(table), **metadata}),
            "--output_path", str(out),
            "--log_samples",
        ],
        cwd=out.parent,
    )  # fmt: skip


@pytest.fixture(scope="module")
def two_runs(tiny_model, tiny_table, tmp_path_factory):
    """Two runs (Min-K% k = 0.2, then 0.1) in one output folder."""
    out = tmp_path_factory.mktemp("report") / "out"
    lm_eval_run(tiny_model, tiny_table, out, {})
    lm_eval_run(tiny_model, tiny_table, out, {"min_k": 0.1})
    files = sorted(out.rglob("results_*.json"))
    assert len(files) == 2
    return out, [json.loads(file.read_text()) for file in files], files


def cli(capsys, *args):
    returncode = main(list(args))
    captured = capsys.readouterr()
    return returncode, captured.out, captured.err


def test_results_json_has_a_stderr_for_every_auc_and_tpr(two_runs):
    _, results, _ = two_runs
    values = results[0]["results"]["pdd_wikimia_32"]
    prefixes = ["blind", *DEFAULT_METHODS]
    for prefix in prefixes:
        for metric in AGGREGATIONS:
            stderr = values[f"{prefix}_{metric}_stderr,none"]
            assert isinstance(stderr, float) and 0 <= stderr < 1, (prefix, metric, stderr)
    assert values["dcpdd_auc_stderr,none"] > 0


class Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links = []

    def handle_starttag(self, tag, attrs):
        self.links += [value for name, value in attrs if name in ("src", "href")]


def test_report_numbers_plots_and_html(two_runs, tiny_model, tiny_table, tmp_path, capsys):
    out, results, files = two_runs
    report = tmp_path / "report"
    returncode, stdout, stderr = cli(capsys, "report", str(out), "--out", str(report))
    assert returncode == 0, stderr
    written = {path.name for path in report.iterdir()}
    assert {"report.html", "report.md", "leaderboard.csv", "leaderboard.json"} <= written

    # the leaderboard: one row per (run, task, method) of both runs, numbers equal to the results JSON
    board = json.loads((report / "leaderboard.json").read_text())
    assert len(board) == 2 * 7 and {row["run"] for row in board} == {str(f) for f in files}
    by_file = dict(zip(map(str, files), results, strict=True))
    for row in board:
        values = by_file[row["run"]]["results"][row["task"]]
        for metric, column in COLUMN_OF_METRIC.items():
            assert row[column] == values[f"{row['method']}_{metric},none"]
            assert row[f"{column}_stderr"] == values[f"{row['method']}_{metric}_stderr,none"]
        assert row["auc_ci95_low"] <= row["auc"] <= row["auc_ci95_high"]
        assert row["n_members"] + row["n_non_members"] == 24
    with (report / "leaderboard.csv").open() as stream:
        rows = list(csv.DictReader(stream))
    assert tuple(rows[0]) == LEADERBOARD_COLUMNS and len(rows) == len(board)
    assert [float(r["auc"]) for r in rows] == [r["auc"] for r in board]

    # the Markdown shows both runs, the blind row first, each AUC as in the results JSON
    markdown = (report / "report.md").read_text()
    assert "Min-K% (k=0.1)" in markdown and "Min-K% (k=0.2)" in markdown
    first_table_row = next(line for line in markdown.splitlines() if line.startswith("| blind"))
    assert f"{results[0]['results']['pdd_wikimia_32']['blind_auc,none']:.3f}" in first_table_row
    for row in board:
        assert f"{row['auc']:.3f} [{row['auc_ci95_low']:.3f}, {row['auc_ci95_high']:.3f}]" in markdown

    # no folder of this machine: the model (a local directory) and the table by their names
    for shared in (markdown, (report / "report.html").read_text(), (report / "leaderboard.csv").read_text()):
        assert str(tiny_model) not in shared and str(tiny_table) not in shared
    assert f"- model: {tiny_model.name}" in markdown and {row["model"] for row in board} == {tiny_model.name}

    # every PNG is a valid image; the Markdown references exactly the PNGs written
    pngs = sorted(report.glob("*.png"))
    assert len(pngs) == 2 * 2  # ROC and score distributions per run
    for png in pngs:
        assert png.read_bytes()[:8] == PNG_SIGNATURE
        with Image.open(png) as image:
            image.verify()
        assert f"]({png.name})" in markdown

    # the HTML parses and references only files it wrote (plots are embedded as data URIs)
    parser = Links()
    parser.feed((report / "report.html").read_text())
    parser.close()
    assert parser.links
    embedded = [link for link in parser.links if link.startswith("data:")]
    assert len(embedded) == len(pngs)
    for link in embedded:
        assert base64.b64decode(link.removeprefix("data:image/png;base64,"))[:8] == PNG_SIGNATURE
    for link in parser.links:
        assert link.startswith("data:image/png;base64,") or link in written, link

    # an existing report is not overwritten without --force
    returncode, _, stderr = cli(capsys, "report", str(out), "--out", str(report))
    assert returncode == 1 and "--force" in stderr
    assert cli(capsys, "report", str(out), "--out", str(report), "--force")[0] == 0


def test_table_shows_both_runs_of_a_folder(two_runs, capsys):
    out, results, files = two_runs
    returncode, stdout, _ = cli(capsys, "table", str(out))
    assert returncode == 0
    assert "2 runs under" in stdout and all(str(file) in stdout for file in files)
    assert "| Min-K% (k=0.2) |" in stdout and "| Min-K% (k=0.1) |" in stdout
    assert stdout.count("| blind (texts only, no model) |") == 2
    dcpdd = results[1]["results"]["pdd_wikimia_32"]
    assert f"{dcpdd['dcpdd_auc,none']:.3f} ± {dcpdd['dcpdd_auc_stderr,none']:.3f}" in stdout


@pytest.mark.parametrize("command", ["table", "report"])
def test_a_folder_that_is_not_a_results_folder_gets_a_message(tmp_path, capsys, command):
    (tmp_path / "notes.txt").write_text("not a run")
    args = [command, str(tmp_path)] + (["--out", str(tmp_path / "r")] if command == "report" else [])
    returncode, _, stderr = cli(capsys, *args)
    assert returncode == 1
    assert "is not an lm_eval output folder: no results_*.json" in stderr and "--output_path" in stderr
    bad = tmp_path / "results_x.json"
    bad.write_text("{broken")
    returncode, _, stderr = cli(capsys, *([command, str(bad)] + args[2:]))
    assert returncode == 1 and "is not an lm_eval results file" in stderr
