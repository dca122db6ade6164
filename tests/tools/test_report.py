"""``lm-eval-pdd report`` and ``table`` on real runs made here by the ``lm_eval`` CLI with a tiny model."""

from __future__ import annotations

import base64
import csv
import json
import shutil
from html.parser import HTMLParser

import pytest
from PIL import Image
from support.harness import cpu_float32, harness_args, run_lm_eval, wikimia_rows
from support.results import lm_eval_run

from pdd_tasks.registry import DEFAULT_METHODS
from pdd_tasks.tasks.aggregations import AGGREGATIONS
from pdd_tasks.tools.cli import main
from pdd_tasks.tools.report.model import COLUMN_OF_METRIC, LEADERBOARD_COLUMNS


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def two_runs(tiny_model, tiny_table, tmp_path_factory):
    """Two runs in one output folder: Min-K% k = 0.2 and the default convention, then k = 0.1 and
    ``convention: "reference-code"``."""
    out = tmp_path_factory.mktemp("report") / "out"
    lm_eval_run(tiny_model, tiny_table, out, {})
    lm_eval_run(tiny_model, tiny_table, out, {"min_k": 0.1, "convention": "reference-code"})
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
    assert len(board) == 2 * (1 + len(DEFAULT_METHODS)) and {row["run"] for row in board} == {str(f) for f in files}
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

    # the second run is marked as reference-code, and each run's rows say how its settings differ
    first, second = (str(file) for file in files)
    for row in board:
        assert row["convention"] == ("reference-code" if row["run"] == second else "paper")
        assert row["differing_settings"] == (
            "min_k=0.1, convention=reference-code" if row["run"] == second else "min_k=0.2, convention=paper"
        )
        assert row["too_few_texts"] is True  # 24 texts: fewer than 30 of a class

    # the Markdown shows both runs, the blind row first, each AUC as in the results JSON
    markdown = (report / "report.md").read_text()
    assert "Min-K% (k=0.1)" in markdown and "Min-K% (k=0.2)" in markdown
    assert "Settings that differ from the other runs of this model on pdd_wikimia_32: min_k=0.1, " in markdown
    assert 'Scored tokens: convention "reference-code"' in markdown
    assert "convention reference-code; differs: min_k=0.1, convention=reference-code |" in markdown
    members, non_members = board[0]["n_members"], board[0]["n_non_members"]
    assert f"**Too few texts: {members} members and {non_members} non-members, fewer than 30" in markdown
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
    assert stdout.count('Scored tokens: convention "reference-code"') == 1
    assert stdout.count("**Too few texts** in pdd_wikimia_32: ") == 2


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


# -- runs a hurried user makes: tiny, unlabelled, of another kind, cut short ---------------------------


def labelled_texts(path, members, non_members):
    rows = wikimia_rows(32)
    chosen = [r for r in rows if r["label"] == 1][:members] + [r for r in rows if r["label"] == 0][:non_members]
    path.write_text("".join(json.dumps({"text": r["input"], "label": r["label"]}) + "\n" for r in chosen))
    return path


def plain_texts(path, texts):
    path.write_text("".join(json.dumps({"text": text}) + "\n" for text in texts))
    return path


@pytest.fixture(scope="module")
def odd_runs(tiny_model, tiny_table, tmp_path_factory):
    """Four runs in one folder: pdd_custom with 1 + 1 and with 3 + 3 labelled texts, pdd_custom
    without labels (6 suspect texts, 10 reference texts), and pdd_exchangeability (16 texts)."""
    tmp = tmp_path_factory.mktemp("odd")
    out = tmp / "out"
    texts = [r["input"] for r in wikimia_rows(32)]
    runs = [
        ("pdd_custom", {"data_files": str(labelled_texts(tmp / "one.jsonl", 1, 1))}),
        ("pdd_custom", {"data_files": str(labelled_texts(tmp / "three.jsonl", 3, 3))}),
        (
            "pdd_custom",
            {
                "data_files": str(plain_texts(tmp / "suspect.jsonl", texts[:6])),
                "reference_files": str(plain_texts(tmp / "reference.jsonl", texts[6:16])),
                "label_field": None,
            },
        ),
        (
            "pdd_exchangeability",
            {
                "data_files": str(plain_texts(tmp / "ordered.jsonl", [" ".join(t.split()[:8]) for t in texts[:16]])),
                "num_shards": 4,
                "permutations": 3,
            },
        ),
    ]
    for task, metadata in runs:
        metadata = {"freq_table": str(tiny_table), **metadata}
        run_lm_eval(
            harness_args(cpu_float32(tiny_model), task, out, device="cpu", batch_size=8, metadata=metadata), tmp
        )
    files = sorted(out.rglob("results_*.json"))
    assert len(files) == 4
    return out, files


def test_tiny_runs_are_marked_with_their_counts_and_intervals_that_cannot_be_computed_say_so(
    odd_runs, tmp_path, capsys
):
    out, files = odd_runs
    returncode, stdout, stderr = cli(capsys, "table", str(out))
    assert returncode == 0, stderr
    assert "**Too few texts** in pdd_custom: 1 member and 1 non-member, fewer than 30 of a class" in stdout
    assert "**Too few texts** in pdd_custom: 3 members and 3 non-members" in stdout
    assert "pdd_custom: 6 texts (3 members, 3 non-members)" in stdout

    assert cli(capsys, "report", str(out), "--out", str(tmp_path / "r"))[0] == 0
    markdown = (tmp_path / "r" / "report.md").read_text()
    page = (tmp_path / "r" / "report.html").read_text()
    for counts in ("1 member and 1 non-member", "3 members and 3 non-members"):
        assert f"**Too few texts: {counts}, fewer than 30 of a class." in markdown
        assert f"Too few texts: {counts}, fewer than 30 of a class." in page
    board = json.loads((tmp_path / "r" / "leaderboard.json").read_text())
    assert board and all(row["too_few_texts"] is True for row in board)
    assert "too few texts (1 + 1)" in markdown and "too few texts (3 + 3)" in markdown

    # an AUC whose DeLong stderr is 0 (classes fully separated) or undefined (1 text a class) has no
    # interval, and says so; it is never shown as [x, x]. The blind baseline separates these 3 + 3
    # texts (it sees the texts alone, so this does not depend on the model).
    three = json.loads(files[1].read_text())["results"]["pdd_custom"]
    assert three["blind_auc,none"] == 1.0 and three["blind_auc_stderr,none"] == 0.0
    degenerate = [row for row in board if row["auc"] is not None and not row["auc_stderr"]]
    assert len(degenerate) >= 1 + 6  # blind of 3 + 3, every method of 1 + 1
    for row in degenerate:
        assert row["auc_ci95_low"] is None and row["auc_ci95_high"] is None
    assert "[no interval]" in markdown and "no interval, ± n/a: no standard error could be computed" in markdown
    for value in ("0.000", "1.000"):
        assert f"[{value}, {value}]" not in markdown
    assert "| blind (texts only, no model) | 1.000 ± n/a |" in stdout and "AUC 1 or 0" in stdout


def test_unlabelled_and_exchangeability_runs_are_named_not_dropped(odd_runs, tmp_path, capsys):
    out, files = odd_runs
    assert cli(capsys, "report", str(out), "--out", str(tmp_path / "r"))[0] == 0
    markdown = (tmp_path / "r" / "report.md").read_text()
    assert "Left out of this report (no member/non-member AUC to show):" in markdown
    # below the results (issue 42 item 5), not leading the report
    assert markdown.index("Left out of this report") > markdown.index("## pdd_custom")
    assert f"- pdd_custom of {files[2].parent.name}" not in markdown  # the model by its name, not the folder
    left = [line for line in markdown.splitlines() if line.startswith("- pdd_")]
    assert len(left) == 2
    assert str(files[2]) in left[0] and "unlabelled texts" in left[0] and "lm-eval-pdd decisions" in left[0]
    pvalue = json.loads(files[3].read_text())["results"]["pdd_exchangeability"]["exchangeability_pvalue,none"]
    assert str(files[3]) in left[1] and f"p {pvalue:.2g} over 4 shards" in left[1] and "exchangeability test" in left[1]

    returncode, stdout, _ = cli(capsys, "table", str(out))
    assert returncode == 0
    assert (
        "No labelled pdd task in the results (no <method>_auc metric). Not in this table: pdd_custom: unlabelled"
        in stdout
    )
    assert "Not in this table: pdd_exchangeability: a dataset-level test (the exchangeability test)" in stdout
    # alone, they are a message naming why, not a traceback
    returncode, _, stderr = cli(capsys, "report", str(files[3]), "--out", str(tmp_path / "r2"))
    assert returncode == 1 and "pdd_exchangeability of " in stderr and "over 4 shards" in stderr


@pytest.fixture
def one_run_copy(two_runs, tmp_path):
    """The first run of :func:`two_runs` (results and samples), copied to be damaged."""
    _, _, files = two_runs
    out = tmp_path / "out" / files[0].parent.name
    out.mkdir(parents=True)
    shutil.copy(files[0], out)
    samples = next(files[0].parent.glob(f"samples_pdd_wikimia_32_{files[0].stem.removeprefix('results_')}.jsonl"))
    shutil.copy(samples, out)
    return tmp_path / "out", out / samples.name


def test_a_samples_file_cut_short_is_named_and_its_counts_are_not_shown(one_run_copy, tmp_path, capsys):
    out, samples = one_run_copy
    lines = samples.read_text().splitlines(keepends=True)
    assert len(lines) == 24
    samples.write_text("".join(lines[:12]))
    held = [json.loads(line)["loss_auc"][1] for line in lines[:12]]
    members, non_members = sum(held), 12 - sum(held)

    assert cli(capsys, "report", str(out), "--out", str(tmp_path / "r"))[0] == 0
    markdown = (tmp_path / "r" / "report.md").read_text()
    assert f"{members} members, {non_members} non-members;" not in markdown
    assert "24 texts; run " in markdown
    assert (
        f"the samples file {samples} is incomplete: it holds 12 texts ({members} members, {non_members} "
        "non-members), but the results JSON" in markdown
    )
    assert "counts 24 texts scored, and its AUCs and TPRs are computed from all 24" in markdown
    assert not list((tmp_path / "r").glob("*.png"))  # no plots of half the texts
    board = json.loads((tmp_path / "r" / "leaderboard.json").read_text())
    assert {(row["n_members"], row["n_non_members"]) for row in board} == {(None, None)}

    returncode, stdout, _ = cli(capsys, "table", str(out))
    assert returncode == 0 and "pdd_wikimia_32: 24 texts\n" in stdout
    assert f"Samples of pdd_wikimia_32: the samples file {samples} is incomplete: it holds 12 texts" in stdout


def test_a_samples_file_with_more_texts_than_its_results_is_not_called_incomplete(one_run_copy, capsys):
    """Before: a stale samples file of 36 texts beside results counting 24 was called "incomplete"."""
    out, samples = one_run_copy
    lines = samples.read_text().splitlines(keepends=True)
    samples.write_text("".join(lines + lines[:12]))
    returncode, stdout, _ = cli(capsys, "table", str(out))
    assert returncode == 0
    assert f"the samples file {samples} holds more texts than the run scored" in stdout
    assert "incomplete" not in stdout and "a samples file of this run" in stdout


@pytest.mark.parametrize("command", ["report", "table"])
def test_a_samples_file_cut_mid_line_gets_a_message_naming_file_line_and_fix(one_run_copy, tmp_path, capsys, command):
    out, samples = one_run_copy
    text = samples.read_text()
    cut = text.index("\n", len(text) // 2) + 100  # the 100 first characters of a line
    samples.write_text(text[:cut])
    line = text[:cut].count("\n") + 1
    args = [command, str(out)] + (["--out", str(tmp_path / "r")] if command == "report" else [])
    returncode, _, stderr = cli(capsys, *args)
    assert returncode == 1
    assert f"{samples}:{line}: not valid JSON" in stderr
    assert "Re-run lm_eval with --log_samples" in stderr and f"or remove {samples}" in stderr
    assert "Traceback" not in stderr
