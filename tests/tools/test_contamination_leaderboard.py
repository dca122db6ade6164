"""``lm-eval-pdd report``'s contamination leaderboard (pdd_tasks/tools/report/contamination_board.py): the models x
benchmarks matrix of verdicts, Holm's correction per model, the duplicate-run rule and the files.

The runs are hand-made results JSONs with the keys the real ``pdd_contamination`` run writes (that run:
tests/tasks/test_contamination_task.py; the builder: tests/support/results.py ``results_of``), laid out as lm_eval
writes them (``<output_path>/<model>/results_<date>.json``)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from support.results import results_of

from pdd_metrics.multiple_testing import holm_adjusted
from pdd_metrics.verdict import Evidence, codec_calibrated_pvalue, codec_evidence, decide
from pdd_tasks.tools.cli import main
from pdd_tasks.tools.report.contamination_board import contamination_board, contamination_columns, model_names
from pdd_tasks.tools.report.tables import contamination_checks
from pdd_tasks.tools.results.runs import find_runs


ROOT = Path(__file__).resolve().parents[2]

#: Model A, a local checkpoint (shown by its last part), tested in two runs; model B, a hub id, in two
#: runs that both test arc_easy (the older one left out). Each task: (CoDeC drops of 1,000, exchangeability p).
MODEL_A, MODEL_B = "/checkpoints/model-a", "org/model-b"
RUNS = [
    (MODEL_A, "2026-01-01T00-00-00.000000", {"arc_easy": (990, 0.6), "gsm8k": (20, 0.015)}),
    (MODEL_A, "2026-01-02T00-00-00.000000", {"hellaswag": (500, 0.4)}),
    (MODEL_B, "2026-01-01T00-00-00.000000", {"arc_easy": (990, 0.6)}),
    (MODEL_B, "2026-01-03T00-00-00.000000", {"arc_easy": (850, 0.5), "gsm8k": (30, None)}),
]


def write_run(root: Path, model: str, date: str, tasks: dict) -> Path:
    """A results JSON of ``pdd_contamination`` on ``tasks`` (and arc_easy's accuracy), where lm_eval puts it."""
    results = results_of(tasks)
    results["config"] = {"model": "hf", "model_args": f"pretrained={model},dtype=float32"}
    file = root / model.strip("/").replace("/", "__") / f"results_{date}.json"
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(json.dumps(results, indent=2))
    return file


@pytest.fixture
def runs(tmp_path) -> tuple[Path, list[Path]]:
    root = tmp_path / "out"
    return root, [write_run(root, *run) for run in RUNS]


def report(capsys, *args) -> tuple[int, str]:
    returncode = main(["report", *map(str, args)])
    return returncode, capsys.readouterr().err


def test_the_matrix_decides_per_model_over_all_its_runs(runs, tmp_path, capsys):
    root, files = runs
    returncode, stderr = report(capsys, root, "--out", tmp_path / "report")
    assert returncode == 0, stderr
    board = json.loads((tmp_path / "report" / "contamination.json").read_text())
    assert board["models"] == ["model-a", "org/model-b"]  # a local path by its last part, as the report names it
    assert board["benchmarks"] == ["arc_easy", "gsm8k", "hellaswag"]
    assert board["holm_family"] == "model" and board["codec_null"] == 0.97
    assert board["matrix"] == {
        "model-a": {"arc_easy": "contaminated", "gsm8k": "not detected", "hellaswag": "not detected"},
        "org/model-b": {"arc_easy": "inconclusive", "gsm8k": "no verdict", "hellaswag": None},
    }
    rows = {(row["model"], row["benchmark"]): row for row in board["rows"]}
    assert len(board["rows"]) == 5

    # model A: one Holm family of its 6 p-values across its two runs
    a = [rows["model-a", task] for task in ("arc_easy", "gsm8k", "hellaswag")]
    raw = [codec_calibrated_pvalue(drops, 1000) for drops in (990, 20, 500)] + [0.6, 0.015, 0.4]
    adjusted = holm_adjusted(raw)
    assert [row["codec_p"] for row in a] == pytest.approx(raw[:3])
    assert [row["codec_p_holm"] for row in a] == pytest.approx(adjusted[:3])
    assert [row["exchangeability_p_holm"] for row in a] == pytest.approx(adjusted[3:])
    # gsm8k's exchangeability p 0.015 rejects alone, and in its run's own table (Holm over 4), not over the model's 6
    assert decide({"codec": codec_evidence(20, 1000), "exchangeability": Evidence(0.015)}).verdict == "contaminated"
    table = {row[0]: row for row in contamination_checks(json.loads(files[0].read_text())).rows}
    assert table["gsm8k"][8] == "contaminated"
    assert adjusted[4] == pytest.approx(0.075) and rows["model-a", "gsm8k"]["verdict"] == "not detected"
    assert rows["model-a", "arc_easy"]["detected"] == "seen example by example"
    assert rows["model-a", "hellaswag"]["run"] == str(files[1])

    # model B: the newest run's arc_easy (0.850: inconclusive), not the older one's 0.990; Holm over its 3 p-values
    b = rows["org/model-b", "arc_easy"]
    assert b["run"] == str(files[3]) and b["codec_score"] == 0.85 and b["codec_examples"] == 1000
    raw_b = [codec_calibrated_pvalue(850, 1000), 0.5, codec_calibrated_pvalue(30, 1000)]
    adjusted_b = holm_adjusted(raw_b)
    assert (b["codec_p_holm"], b["exchangeability_p_holm"]) == pytest.approx((adjusted_b[0], adjusted_b[1]))
    assert b["codec_kind_p_holm"] < 0.05 and b["detected"] == ""
    assert b["accuracy_metric"] == "acc,none" and (b["accuracy"], b["accuracy_stderr"]) == (0.5, 0.05)
    gsm8k = rows["org/model-b", "gsm8k"]
    assert gsm8k["exchangeability_p"] is None and gsm8k["exchangeability_shards"] is None
    assert gsm8k["not_applied"] == "exchangeability: 2 shards are longer than the context"
    assert gsm8k["accuracy"] is None  # the run did not evaluate gsm8k
    left_out = [note for note in board["notes"] if note.startswith("Left out")]
    assert left_out == [
        f"Left out: the run {files[2]} (2026-01-01T00-00-00.000000) of org/model-b for arc_easy; a newer run of the "
        f"model tested it and is used ({files[3]})."
    ]
    assert "p-values per model: model-a 6, org/model-b 3" in board["notes"][0]


def test_the_csv_the_markdown_and_the_html(runs, tmp_path, capsys):
    root, _ = runs
    out = tmp_path / "report"
    assert report(capsys, root, "--out", out)[0] == 0
    board = json.loads((out / "contamination.json").read_text())
    with (out / "contamination.csv").open() as stream:
        rows = list(csv.DictReader(stream))
    assert tuple(rows[0]) == contamination_columns()
    assert [(r["model"], r["benchmark"], r["verdict"]) for r in rows] == [
        (r["model"], r["benchmark"], r["verdict"]) for r in board["rows"]
    ]
    for row, expected in zip(rows, board["rows"], strict=True):
        assert float(row["codec_p_holm"]) == expected["codec_p_holm"]
        assert row["exchangeability_p"] == (
            "" if expected["exchangeability_p"] is None else str(expected["exchangeability_p"])
        )

    markdown = (out / "report.md").read_text()
    assert "## Contamination leaderboard" in markdown
    assert "| model | arc_easy | gsm8k | hellaswag |" in markdown
    assert (
        "| model-a | **contaminated: seen example by example**; CoDeC 0.990 [0.000, 1.000] of 1000, Holm p " in markdown
    )
    assert "| org/model-b | **inconclusive**; CoDeC 0.850" in markdown
    assert "| **no verdict**; CoDeC 0.030 [0.000, 1.000] of 1000" in markdown
    assert "exchangeability did not apply; why: exchangeability: 2 shards are longer than the context | - |" in markdown
    assert "## Leaderboard" not in markdown  # no labelled pdd task: no membership leaderboard table
    page = (out / "report.html").read_text()
    assert "<h2>Contamination leaderboard</h2>" in page
    assert "<td><b>contaminated: seen example by example</b><br>CoDeC 0.990 [0.000, 1.000] of 1000" in page
    assert "exchangeability p 0.6 over 10 shards, Holm p 1</td>" in page
    assert "<a href='contamination.csv'>contamination.csv</a>" in page


def test_an_existing_matrix_is_kept_without_force_and_a_stale_one_removed_with_it(runs, tmp_path, capsys):
    root, _ = runs
    out = tmp_path / "report"
    out.mkdir()
    (out / "contamination.csv").write_text("mine\n")
    returncode, stderr = report(capsys, root, "--out", out)
    assert returncode == 1 and "already holds a report (contamination.csv); pass --force" in stderr
    assert "Traceback" not in stderr and (out / "contamination.csv").read_text() == "mine\n"

    returncode, stderr = report(capsys, root, "--out", out, "--force")  # no report wrote it: kept
    assert returncode == 1 and "contamination.csv, of a report file's name but not written by" in stderr
    assert (out / "contamination.csv").read_text() == "mine\n"

    # a report of runs without pdd_contamination leaves no matrix of an earlier report behind
    (out / "contamination.csv").write_text("model,benchmark,verdict\n")  # an earlier report's
    labelled = tmp_path / "labelled" / "model" / "results_2026-01-04T00-00-00.000000.json"
    labelled.parent.mkdir(parents=True)
    labelled.write_text(json.dumps({"results": {"pdd_custom": {"loss_auc,none": 0.6, "loss_auc_stderr,none": 0.05}}}))
    returncode, stderr = report(capsys, labelled.parent.parent, "--out", out, "--force")
    assert returncode == 0, stderr
    assert not (out / "contamination.csv").exists() and not (out / "contamination.json").exists()
    assert "Contamination leaderboard" not in (out / "report.md").read_text()


def test_a_damaged_value_leaves_its_test_out_and_says_so(tmp_path):
    file = write_run(tmp_path / "out", MODEL_B, "2026-01-01T00-00-00.000000", {"arc_easy": (990, 0.001)})
    results = json.loads(file.read_text())
    results["results"]["pdd_contamination"]["codec_score/arc_easy,none"] = 1.5  # out of range: read as None
    file.write_text(json.dumps(results))
    (row,) = contamination_board(find_runs([tmp_path / "out"])).rows
    assert row["codec_score"] is None and row["codec_p"] is None and row["codec_examples"] is None
    assert row["not_applied"] == "codec: unusable values in the results JSON (codec_score/arc_easy)"
    # the exchangeability test alone, Holm over its one p-value
    assert (row["exchangeability_p_holm"], row["verdict"]) == (0.001, "contaminated")


def test_two_checkpoints_of_one_name_keep_their_full_names():
    assert model_names(["/a/ckpt", "/b/ckpt", "org/m"]) == {
        "/a/ckpt": "/a/ckpt",
        "/b/ckpt": "/b/ckpt",
        "org/m": "org/m",
    }
    assert model_names(["/a/ckpt"]) == {"/a/ckpt": "ckpt"}


def test_every_column_is_documented():
    page = (ROOT / "docs" / "report.md").read_text(encoding="utf-8")
    section = page[page.index("### Contamination leaderboard columns") :]
    assert [column for column in contamination_columns() if f"`{column}`" not in section] == []


@pytest.mark.parametrize("second_name", ["{path}/", "{relative}", "./{relative}/"])
def test_one_model_named_two_ways_is_one_row_and_one_holm_family(tmp_path, monkeypatch, capsys, second_name):
    """Issue 43 item 3: ``.../tiny`` and ``.../tiny/`` (or a relative path of the folder) are one model: one
    row per benchmark, one Holm family, the adjusted p-values those of one run that tested both benchmarks."""
    model = tmp_path / "models" / "tiny"
    model.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)  # the relative name resolves from where the report runs
    other = second_name.format(path=model, relative="models/tiny")
    apart, together = tmp_path / "apart", tmp_path / "together"
    first = write_run(apart, str(model), "2026-01-01T00-00-00.000000", {"arc_easy": (990, 0.6)})
    write_run(apart / "second", other, "2026-01-02T00-00-00.000000", {"gsm8k": (20, 0.015)})
    write_run(together, str(model), "2026-01-01T00-00-00.000000", {"arc_easy": (990, 0.6), "gsm8k": (20, 0.015)})

    returncode, stderr = report(capsys, apart, "--out", tmp_path / "report-apart")
    assert returncode == 0, stderr
    assert f"the runs name one model in 2 ways ({str(model)!r} in {first}, {other!r} in " in stderr
    assert "so the report takes them as one model (one row of the contamination leaderboard, one Holm family)" in stderr
    assert report(capsys, together, "--out", tmp_path / "report-together")[0] == 0
    board, expected = (
        json.loads((tmp_path / name / "contamination.json").read_text()) for name in ("report-apart", "report-together")
    )
    assert board["models"] == expected["models"] == ["tiny"]
    assert "p-values per model: tiny 4" in board["notes"][0]
    assert any(note.startswith("The runs name one model in 2 ways") for note in board["notes"])
    columns = ("model", "benchmark", "verdict", "codec_p", "codec_p_holm", "exchangeability_p_holm")
    assert [[row[c] for c in columns] for row in board["rows"]] == [
        [row[c] for c in columns] for row in expected["rows"]
    ]
    # the rule the rows follow: gsm8k's exchangeability p 0.015 is adjusted over the model's 4 p-values, not 2
    adjusted = holm_adjusted([codec_calibrated_pvalue(990, 1000), codec_calibrated_pvalue(20, 1000), 0.6, 0.015])
    assert board["rows"][1]["exchangeability_p_holm"] == pytest.approx(adjusted[3])


def test_a_hub_name_is_taken_as_written_and_a_path_of_another_machine_by_its_folder(tmp_path, monkeypatch):
    from pdd_tasks.tools.results.runs import model_identity

    monkeypatch.chdir(tmp_path)
    assert model_identity("EleutherAI/pythia-160m") == "EleutherAI/pythia-160m"
    assert (
        model_identity("/no/such/machine/tiny/") == model_identity("/no/such/machine//tiny") == "/no/such/machine/tiny"
    )
    assert model_identity("org/model-a") != model_identity("org/model-b")
