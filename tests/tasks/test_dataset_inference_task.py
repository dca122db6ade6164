"""Dataset inference in pdd_custom's unlabelled mode, end to end through the real ``lm_eval``."""

from __future__ import annotations

import json

import pytest
from support.harness import cpu_float32, harness_args, read_results, read_samples, run_lm_eval

from pdd_metrics import dataset_inference_test
from pdd_tasks.registry import DEFAULT_METHODS


def run_custom(model_dir, table, out, suspect, reference, **metadata):
    out.parent.mkdir(parents=True, exist_ok=True)
    files = {}
    for name, texts in (("suspect", suspect), ("reference", reference)):
        files[name] = out.parent / f"{name}.jsonl"
        files[name].write_text("".join(json.dumps({"text": text}) + "\n" for text in texts))
    meta = {"data_files": str(files["suspect"]), "reference_files": str(files["reference"]), "freq_table": str(table)}
    args = harness_args(
        cpu_float32(model_dir), "pdd_custom", out, device="cpu", batch_size=8, metadata={**meta, **metadata}
    )
    run_lm_eval(args, cwd=out.parent)
    return read_results(out)["results"]["pdd_custom"]


@pytest.fixture(scope="module")
def trained(trained_tiny, tmp_path_factory):
    """A tiny model trained on 24 texts (``texts[:24]``); the texts after them it never saw."""
    texts = trained_tiny["members"] + trained_tiny["unseen"]
    return {**trained_tiny, "texts": texts, "tmp": tmp_path_factory.mktemp("di")}


def test_members_against_known_non_members(trained):
    out = trained["tmp"] / "members" / "out"
    metrics = run_custom(trained["model"], trained["table"], out, trained["texts"][:24], trained["texts"][24:64])
    assert metrics["dataset_inference_pvalue,none"] < 0.01
    assert metrics["dataset_inference_t,none"] > 0
    # the same number from the per-text scores in the samples log, through pdd_metrics directly
    samples = read_samples(out, "pdd_custom")
    features = {
        role: [s["dataset_inference_pvalue"][0] for s in samples if s["doc"]["role"] == role]
        for role in ("suspect", "reference")
    }
    assert all(len(row) == len(DEFAULT_METHODS) for row in features["suspect"])
    direct = dataset_inference_test(features["suspect"], features["reference"], seed=0)
    assert direct.p_value == pytest.approx(metrics["dataset_inference_pvalue,none"])


def test_non_members_against_non_members(trained):
    out = trained["tmp"] / "nonmembers" / "out"
    texts = trained["texts"]
    metrics = run_custom(trained["model"], trained["table"], out, texts[24:56], texts[56:96], di_seed=1)
    assert metrics["dataset_inference_pvalue,none"] > 0.05
