"""PTDI in pdd_custom's unlabelled mode, end to end through the real ``lm_eval`` and ``lm-eval-pdd
decisions``: a tiny model trained on 24 texts; suspects = those 24 and 24 texts it never saw;
references = 100 other unseen texts of the same file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.harness import cpu_float32, harness_args, read_results, read_samples, run_lm_eval, run_lm_eval_pdd

from pdd_metrics import benjamini_hochberg, conformal_p_values
from pdd_tasks.registry import DEFAULT_METHODS


REPO = Path(__file__).resolve().parents[2]
MEMBERS, UNSEEN_SUSPECTS, REFERENCES = 24, 24, 100


def run_custom(trained, out: Path, suspect: list[str], reference: list[str], **metadata) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    files = {}
    for name, texts in (("suspect", suspect), ("reference", reference)):
        files[name] = out.parent / f"{name}.jsonl"
        files[name].write_text("".join(json.dumps({"text": text}) + "\n" for text in texts))
    meta = {"data_files": str(files["suspect"]), "reference_files": str(files["reference"])}
    meta |= {"freq_table": str(trained["table"]), **metadata}
    model_args = cpu_float32(trained["model"])
    include = REPO / "task_configs"
    args = harness_args(model_args, "pdd_custom", out, include=include, batch_size=8, metadata=meta, device="cpu")
    run_lm_eval(args, cwd=out.parent)


@pytest.fixture(scope="module")
def mixed(trained_tiny, tmp_path_factory):
    """The run on 24 members + 24 unseen suspects (members first), 100 unseen references."""
    unseen = trained_tiny["unseen"]
    suspect = trained_tiny["members"] + unseen[:UNSEEN_SUSPECTS]
    reference = unseen[UNSEEN_SUSPECTS : UNSEEN_SUSPECTS + REFERENCES]
    out = tmp_path_factory.mktemp("ptdi") / "out"
    run_custom(trained_tiny, out, suspect, reference)
    return {"out": out, "trained": trained_tiny, "is_member": [True] * MEMBERS + [False] * UNSEEN_SUSPECTS}


def suspects_in_order(samples: list[dict]) -> list[dict]:
    return sorted((s for s in samples if s["doc"]["role"] == "suspect"), key=lambda s: s["doc"]["row"])


def test_results_json_holds_the_count_and_the_setting(mixed):
    results = read_results(mixed["out"])
    metrics = results["results"]["pdd_custom"]
    assert results["configs"]["pdd_custom"]["metadata"]["target_fdr"] == 0.1  # the default, recorded
    samples = read_samples(mixed["out"], "pdd_custom")
    for method in DEFAULT_METHODS:
        identified = [s["ptdi"][method]["identified"] for s in suspects_in_order(samples)]
        assert metrics[f"{method}_identified,none"] == sum(identified), method


def test_samples_hold_each_texts_p_value_and_decision_as_computed_directly(mixed):
    samples = read_samples(mixed["out"], "pdd_custom")
    suspects = suspects_in_order(samples)
    assert len(suspects) == MEMBERS + UNSEEN_SUSPECTS
    assert all("ptdi" not in s for s in samples if s["doc"]["role"] == "reference")
    for method in DEFAULT_METHODS:
        reference = [s[f"{method}_identified"][0] for s in samples if s["doc"]["role"] == "reference"]
        scores = [s[f"{method}_identified"][0] for s in suspects]
        p_values = conformal_p_values(scores, reference)
        assert [s["ptdi"][method]["p_value"] for s in suspects] == pytest.approx(p_values.tolist(), rel=1e-12)
        expected = benjamini_hochberg(p_values, 0.1).tolist()
        assert [s["ptdi"][method]["identified"] for s in suspects] == expected, method


def test_members_are_found_with_few_false_identifications(mixed):
    """The realised false-identification proportion of one run (BH bounds its expectation by
    (1 - pi) q = 0.05) and the share of the 24 members found, for the methods that separate this
    model's members well."""
    suspects = suspects_in_order(read_samples(mixed["out"], "pdd_custom"))
    for method in ("loss", "zlib", "min_k", "dcpdd"):
        identified = [s["ptdi"][method]["identified"] for s in suspects]
        true = sum(i and m for i, m in zip(identified, mixed["is_member"], strict=True))
        false = sum(i and not m for i, m in zip(identified, mixed["is_member"], strict=True))
        assert true >= MEMBERS // 2, (method, true, false)
        assert false / max(true + false, 1) <= 0.2, (method, true, false)


def test_unseen_suspects_are_not_identified(trained_tiny, tmp_path):
    """No member among the suspects: every identification is false, and BH at q = 0.1 makes any
    identification (per method) a 10% event; a stricter target identifies none."""
    unseen = trained_tiny["unseen"]
    out = tmp_path / "out"
    run_custom(trained_tiny, out, unseen[200:240], unseen[240:340], target_fdr=0.05)
    metrics = read_results(out)["results"]["pdd_custom"]
    counts = {method: metrics[f"{method}_identified,none"] for method in DEFAULT_METHODS}
    assert sum(counts.values()) <= 2, counts


def test_decisions_command_shows_ptdi_beside_the_thresholds(mixed):
    out = mixed["out"]
    process = run_lm_eval_pdd(["decisions", str(out)])
    assert process.returncode == 0, process.stderr
    assert "identified at FDR 0.1 (PTDI)" in process.stdout
    records = [json.loads(line) for line in next(out.rglob("decisions_pdd_custom.jsonl")).read_text().splitlines()]
    suspects = suspects_in_order(read_samples(out, "pdd_custom"))
    metrics = read_results(out)["results"]["pdd_custom"]
    for method in DEFAULT_METHODS:
        assert [r[f"{method}_pvalue"] for r in records] == [s["ptdi"][method]["p_value"] for s in suspects]
        assert [r[f"{method}_identified"] for r in records] == [s["ptdi"][method]["identified"] for s in suspects]
        count = int(metrics[f"{method}_identified,none"])
        assert f"| {method} |" in process.stdout and f"| {count}/48 |" in process.stdout
