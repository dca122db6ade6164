"""Smoke runs of benchmark scripts at toy size, so that none rots (issue 31, item 4): each runs its
real code path on the CPU and must print its table; the numbers are not checked here."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import OFFLINE, REPO


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
