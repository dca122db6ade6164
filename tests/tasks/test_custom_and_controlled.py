"""``pdd_custom`` without labels (thresholds on known non-members, the dataset test, per-text
decisions) and the controlled fine-tuning benchmark, end to end through the real CLIs."""

from __future__ import annotations

import json
import subprocess

import pytest
from support.harness import (
    SHARED,
    cpu_float32,
    harness_args,
    read_results,
    read_samples,
    run_lm_eval,
    run_lm_eval_pdd,
    wikimia_rows,
)
from support.models import build_table_for, build_tiny_model

from pdd_metrics import calibrate_threshold
from pdd_tasks.registry import DEFAULT_METHODS
from pdd_tasks.tools.builders.controlled import load_pool, make_controlled, split_pool
from pdd_tasks.tools.builders.fine_tuning import TuningSettings


def lm_eval_pdd(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    process = run_lm_eval_pdd(list(args))
    if check and process.returncode != 0:
        raise AssertionError(f"lm-eval-pdd {args} failed:\n{process.stderr[-4000:]}")
    return process


def run_task(model_dir, out, task, metadata, check=True):
    out.parent.mkdir(parents=True, exist_ok=True)
    args = harness_args(cpu_float32(model_dir), task, out, device="cpu", batch_size=8, metadata=metadata)
    return run_lm_eval(args, cwd=out.parent, check=check)


def write_texts(path, texts, **extra):
    path.write_text("".join(json.dumps({"text": text, **extra}) + "\n" for text in texts))
    return path


@pytest.fixture(scope="module")
def contaminated(trained_tiny, tmp_path_factory):
    """A tiny model trained on 24 texts (the suspect set) and 40 unseen texts of the same kind."""
    tmp = tmp_path_factory.mktemp("contaminated")
    suspect, reference = trained_tiny["members"], trained_tiny["unseen"][:40]
    model_dir, table = trained_tiny["model"], trained_tiny["table"]
    data = write_texts(tmp / "suspect.jsonl", suspect)
    known = write_texts(tmp / "reference.jsonl", reference)
    out = tmp / "out"
    metadata = {"data_files": str(data), "reference_files": str(known), "target_fpr": 0.1, "freq_table": str(table)}
    run_task(model_dir, out, "pdd_custom", metadata)
    return {"model": model_dir, "table": table, "out": out, "suspect": suspect, "reference": reference, "tmp": tmp}


def test_unlabelled_run_reports_thresholds_and_the_dataset_test(contaminated):
    metrics = read_results(contaminated["out"])["results"]["pdd_custom"]
    for method in DEFAULT_METHODS:
        for name in ("threshold", "flagged", "suspect_auc", "pvalue"):
            assert f"{method}_{name},none" in metrics
        assert f"{method}_auc,none" not in metrics  # no labels: no AUC against labels
    # the model was trained on the suspect texts: the test must see it, and most are flagged
    for method in ("loss", "min_k", "dcpdd"):
        assert metrics[f"{method}_pvalue,none"] < 1e-3, method
        assert metrics[f"{method}_suspect_auc,none"] > 0.8, method
        assert metrics[f"{method}_flagged,none"] > 0.5, method


def test_samples_log_holds_every_texts_scores(contaminated):
    samples = read_samples(contaminated["out"], "pdd_custom")
    assert len(samples) == len(contaminated["suspect"]) + len(contaminated["reference"])
    roles = {(s["doc"]["role"], s["doc"]["row"]) for s in samples}
    assert roles == {("suspect", i) for i in range(24)} | {("reference", i) for i in range(40)}
    for sample in samples:
        assert sample["doc"]["text"] in (contaminated["suspect"] + contaminated["reference"])
        score, is_suspect = sample["loss_flagged"]
        assert is_suspect == (sample["doc"]["role"] == "suspect")
        assert score < 0  # mean log-prob


def test_decisions_command_agrees_with_the_metrics(contaminated):
    out = contaminated["out"]
    process = lm_eval_pdd("decisions", str(out))
    metrics = read_results(out)["results"]["pdd_custom"]
    decisions_file = next(out.rglob("decisions_pdd_custom.jsonl"))
    records = [json.loads(line) for line in decisions_file.read_text().splitlines()]
    assert [r["row"] for r in records] == list(range(24))
    assert [r["text"] for r in records] == contaminated["suspect"]
    samples = read_samples(out, "pdd_custom")
    for method in DEFAULT_METHODS:
        reference_scores = [s[f"{method}_flagged"][0] for s in samples if s["doc"]["role"] == "reference"]
        tau = calibrate_threshold(reference_scores, 0.1)
        assert tau == pytest.approx(metrics[f"{method}_threshold,none"])
        flagged = [r[f"{method}_member"] for r in records]
        assert flagged == [r[f"{method}_score"] > tau for r in records]
        assert sum(flagged) / 24 == pytest.approx(metrics[f"{method}_flagged,none"])
        assert sum(score > tau for score in reference_scores) <= 0.1 * 40
    assert "| loss |" in process.stdout and "FPR <= 0.1" in process.stdout


def test_unlabelled_without_reference_gives_scores_only(contaminated, tmp_path):
    out = tmp_path / "out"
    data = contaminated["tmp"] / "suspect.jsonl"
    process = run_task(
        contaminated["model"], out, "pdd_custom", {"data_files": str(data), "freq_table": str(contaminated["table"])}
    )
    assert "no reference_files were given" in process.stderr
    metrics = read_results(out)["results"]["pdd_custom"]
    assert {key for key in metrics if key.endswith(",none") and "stderr" not in key} == {
        f"{m}_mean,none" for m in DEFAULT_METHODS
    }
    refused = lm_eval_pdd("decisions", str(out), check=False)
    assert refused.returncode == 1
    assert "reference_files" in refused.stderr


def test_labelled_file_with_reference_is_refused(contaminated, tmp_path):
    data = tmp_path / "labelled.jsonl"
    data.write_text(
        json.dumps({"text": "a text", "label": 1}) + "\n" + json.dumps({"text": "another", "label": 0}) + "\n"
    )
    process = run_task(
        contaminated["model"],
        tmp_path / "out",
        "pdd_custom",
        {
            "data_files": str(data),
            "reference_files": str(contaminated["tmp"] / "reference.jsonl"),
            "freq_table": str(contaminated["table"]),
        },
        check=False,
    )
    assert process.returncode != 0
    assert "reference_files is for unlabelled texts" in process.stderr


@pytest.mark.parametrize("target", [0, 1, 1.5, "0.05", True])
def test_bad_target_fpr_is_refused(contaminated, tmp_path, target):
    from pdd_tasks.tasks.custom import read_custom_data

    with pytest.raises(ValueError, match="target_fpr"):
        read_custom_data({"data_files": str(contaminated["tmp"] / "suspect.jsonl"), "target_fpr": target})


# -- the controlled benchmark -----------------------------------------------------------------------


def test_pool_split_is_a_seeded_partition():
    texts = [f"text {i}" for i in range(11)]
    members, non_members = split_pool(texts, seed=3)
    assert sorted(members + non_members) == sorted(texts)
    assert (len(members), len(non_members)) == (5, 6)
    assert split_pool(texts, seed=3) == (members, non_members)
    assert split_pool(texts, seed=4) != (members, non_members)


@pytest.mark.skipif(not (SHARED / "data" / "WikiMIA-24").is_dir(), reason="needs ../shared/data/WikiMIA-24")
def test_default_pool_is_wikimia24_non_members():
    texts, description = load_pool(str(SHARED / "data" / "WikiMIA-24"), 64)
    rows = [
        json.loads(line)
        for line in (SHARED / "data" / "WikiMIA-24" / "WikiMIA_length64.jsonl").read_text().splitlines()
    ]
    assert set(texts) == {row["input"] for row in rows if row["label"] == 0}
    assert "non-members" in description


def test_pool_from_the_hub_offline_names_the_override(monkeypatch):
    from pdd_tasks.loading.benchmark_data import DatasetError

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DatasetError, match=r"wjfu99/WikiMIA-24.*--pool <dir>"):
        load_pool("hub", 64)


@pytest.fixture(scope="module")
def controlled(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("controlled")
    base = build_tiny_model(tmp / "base", seed=3)
    pool = write_texts(tmp / "pool.jsonl", [row["input"] for row in wikimia_rows(32)[:48]])
    # The benchmark is defined with 1 epoch on the default model; the tiny random model needs more
    # passes to memorise anything, which is what this test checks the pipeline can detect.
    settings = TuningSettings(seed=0, learning_rate=3e-3, batch_size=4, epochs=25)
    directory = make_controlled(
        tmp / "benchmark", base, pool=str(pool), text_field="text", settings=settings, progress=False
    )
    return {"dir": directory, "base": base, "tmp": tmp, "pool": pool}


def test_make_controlled_writes_model_data_and_manifest(controlled):
    directory = controlled["dir"]
    rows = [json.loads(line) for line in (directory / "data.jsonl").read_text().splitlines()]
    pool = [json.loads(line)["text"] for line in controlled["pool"].read_text().splitlines()]
    members, non_members = split_pool(pool, seed=0)
    assert sorted(r["text"] for r in rows if r["label"] == 1) == sorted(members)
    assert sorted(r["text"] for r in rows if r["label"] == 0) == sorted(non_members)
    manifest = json.loads((directory / "manifest.json").read_text())
    assert manifest["members"] == 24 and manifest["non_members"] == 24
    assert manifest["training"]["steps"] == 25 * 6
    assert manifest["training"]["last_loss"] < manifest["training"]["first_loss"]
    assert (directory / "model" / "config.json").is_file()
    assert not list(directory.parent.glob(".benchmark-*"))  # no temporary directory left behind


def test_pdd_controlled_detects_the_tuned_on_texts(controlled):
    directory = controlled["dir"]
    table = build_table_for(directory / "model", controlled["tmp"] / "table.npz")
    out = controlled["tmp"] / "out"
    run_task(directory / "model", out, "pdd_controlled", {"controlled_dir": str(directory), "freq_table": str(table)})
    metrics = read_results(out)["results"]["pdd_controlled"]
    for method in ("loss", "min_k", "dcpdd"):
        assert metrics[f"{method}_auc,none"] > 0.8, (method, metrics[f"{method}_auc,none"])


def test_pdd_controlled_refuses_another_model(controlled, tmp_path):
    table = build_table_for(controlled["base"], tmp_path / "table.npz")
    process = run_task(
        controlled["base"],
        tmp_path / "out",
        "pdd_controlled",
        {"controlled_dir": str(controlled["dir"]), "freq_table": str(table)},
        check=False,
    )
    assert process.returncode != 0
    assert f"Run it with --model_args pretrained={controlled['dir'] / 'model'}" in process.stderr


def test_pdd_controlled_without_a_benchmark_says_how_to_make_it(controlled, tmp_path):
    process = run_task(
        controlled["base"], tmp_path / "out", "pdd_controlled", {"controlled_dir": str(tmp_path / "none")}, check=False
    )
    assert process.returncode != 0
    assert "lm-eval-pdd make-controlled --output" in process.stderr
