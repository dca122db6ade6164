"""Smoke runs of benchmark scripts at toy size, so that none rots (issue 31, item 4): each runs its
real code path on the CPU and must print its table; the numbers are not checked here."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from support.harness import OFFLINE, REPO


def run_script(name: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **OFFLINE}
    return subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / name), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_gpu_check_runs_on_the_cpu_at_toy_size(tmp_path):
    out = tmp_path / "gpu_check.json"
    process = run_script(
        "gpu_check.py", "--device", "cpu", "--layers", "1", "--hidden", "32", "--texts", "2", "--agreement-texts", "1",
        "--repeats", "1", "--batch-size", "2", "--json", str(out),
    )  # fmt: skip
    assert process.returncode == 0, process.stderr[-3000:]
    assert "| pdd capture + scoring |" in process.stdout and "- dcpdd: largest per-text difference 0" in process.stdout
    result = json.loads(out.read_text())
    assert result["capture"]["texts"] == 2 and result["capture"]["tokens"] > 0 and result["agreement"]["texts"] == 1


def test_prefix_sharing_counts_wikimia_without_a_model():
    process = run_script("prefix_sharing.py", "--limit", "3", "--wikimia24", str(REPO / "no-such-folder"))
    assert process.returncode == 0, process.stderr[-3000:]
    # the shipped WikiMIA's four splits in one run: 1,650 texts, 3,300 passes without sharing, 1,552 with
    assert "| pdd_wikimia | all four, one run | 1650 | 3,300 / 1,552 | 351,305 / 211,066 | 1.66x |" in process.stdout


def test_dataset_inference_fpr_runs_on_synthetic_scores():
    process = run_script("dataset_inference_fpr.py", "--synthetic", "0.5", "--seeds", "5", "--size", "20")
    assert process.returncode == 0, process.stderr[-3000:]
    assert "| dataset inference |" in process.stdout


def test_exchangeability_level_runs_and_resamples_at_toy_size(tmp_path):
    package = tmp_path / "controls.json"
    package.write_text("{}")
    args = ["--workdir", str(tmp_path / "work"), "--files", "1", "--examples", "24", "--shards", "6", "--orders", "4"]
    process = run_script(
        "exchangeability_level.py", *args, "--cells", "4x1", "6x3", "--replicates", "50", "--package-data", str(package)
    )
    assert process.returncode == 0, process.stderr[-3000:]
    assert "| 4x1 | " in process.stdout and "| 6x3 | " in process.stdout
    level = json.loads(package.read_text())["exchangeability_level"]
    assert level["files"] == 1 and set(level["rejects_at_alpha"]) == {"4x1", "6x3"}
    # --reuse: other cells from the same run, no model run
    again = run_script("exchangeability_level.py", *args, "--cells", "2x2", "--replicates", "50", "--reuse")
    assert again.returncode == 0 and "| 2x2 | " in again.stdout, again.stderr[-3000:]


def test_contamination_cost_counts_the_check_beside_the_eval():
    process = run_script("contamination_cost.py", "--examples", "40", "--settings", "4x1", "2x3")
    assert process.returncode == 0, process.stderr[-3000:]
    assert "| the eval itself (arc_easy, 0-shot) | 160 | " in process.stdout
    assert "| exchangeability 4 x 1 | 8 | " in process.stdout and "| exchangeability 2 x 3 | 8 | " in process.stdout
