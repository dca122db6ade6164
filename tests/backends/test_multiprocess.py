"""Two processes (``accelerate launch ... -m lm_eval``, CPU) give the same per-document scores and
AUCs as one process, through the real ``accelerate`` and ``lm_eval`` command lines.

On CPU, ``ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2`` starts two
processes that talk over gloo (accelerate's MULTI_CPU); ``accelerate launch --cpu --num_processes 2``
starts only one (accelerate 1.15's simple launcher; more needs ``--mpirun_hostfile``). lm-eval's
HFLM would then have each process score every document; patch ``hf-cpu-processes`` of
pdd_tasks.lm_eval_patches makes it take rank and world size from accelerate
(``pdd_tasks.backends.cpu_parallel``), so the harness splits the documents and gathers the metrics
on rank 0.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support.harness import read_results, read_samples, run_lm_eval, tasks_path

from pdd_tasks.registry import DEFAULT_METHODS


TASK = "pdd_wikimia_32"
LIMIT = 7  # odd: the ranks get 4 and 3 documents, so the harness pads rank 1's requests


def lm_eval_args(model: Path, table: Path, output: Path) -> list[str]:
    return [
        "--model", "hf",
        "--model_args", f"pretrained={model},dtype=float32",
        "--batch_size", "3",
        "--include_path", str(tasks_path()),
        "--tasks", TASK,
        "--limit", str(LIMIT),
        "--metadata", f'{{"freq_table": "{table}"}}',
        "--output_path", str(output),
        "--log_samples",
    ]  # fmt: skip


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_accelerate(args: list[str], cwd: Path, processes: int = 2) -> subprocess.CompletedProcess:
    accelerate = Path(sys.executable).with_name("accelerate")
    env = dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        OMP_NUM_THREADS="1",
        ACCELERATE_USE_CPU="true",  # torch.distributed over gloo on CPU (accelerate's MULTI_CPU)
    )
    command = [
        str(accelerate), "launch",
        "--multi_gpu", "--num_processes", str(processes), "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(free_port()),
        "-m", "lm_eval", *args,
    ]  # fmt: skip
    process = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    if process.returncode != 0:
        raise AssertionError(
            f"accelerate launch failed ({process.returncode}):\n{process.stdout[-4000:]}\n{process.stderr[-8000:]}"
        )
    return process


def metric_values(sample: dict) -> dict[str, float]:
    """Each method's score of the text (the blind baseline's items are texts, not scores: left out)."""
    return {
        key: value[0]
        for key, value in sample.items()
        if isinstance(value, list) and key.endswith("_auc") and not key.startswith("blind_")
    }


@pytest.fixture(scope="module")
def runs(tiny_model, tiny_table, tmp_path_factory):
    one = tmp_path_factory.mktemp("one-process")
    run_lm_eval(lm_eval_args(tiny_model, tiny_table, one / "out"), cwd=one)
    two = tmp_path_factory.mktemp("two-processes")
    launched = run_accelerate(lm_eval_args(tiny_model, tiny_table, two / "out"), cwd=two)
    return one / "out", two / "out", launched


def test_two_processes_split_the_documents(runs):
    _, two, launched = runs
    log = launched.stdout + launched.stderr
    assert f"Building contexts for {TASK} on rank 0" in log
    assert f"Building contexts for {TASK} on rank 1" in log  # the harness split the documents
    assert len(list(two.rglob("results_*.json"))) == 1  # rank 0 alone writes the results


def test_same_per_document_scores(runs):
    one, two, _ = runs
    single = {sample["doc_id"]: sample for sample in read_samples(one, TASK)}
    multi = {sample["doc_id"]: sample for sample in read_samples(two, TASK)}
    assert sorted(multi) == sorted(single) == list(range(LIMIT))  # every document once, none twice
    for doc_id, sample in single.items():
        got, want = metric_values(multi[doc_id]), metric_values(sample)
        assert got.keys() == want.keys() and len(want) == len(DEFAULT_METHODS)
        for key in want:
            assert got[key] == pytest.approx(want[key], rel=1e-5, abs=1e-7), (doc_id, key)
        assert multi[doc_id]["min_k_pp_auc"][1] == sample["min_k_pp_auc"][1]  # labels


def test_same_aucs_and_recorded_settings(runs):
    one, two, _ = runs
    single, multi = read_results(one), read_results(two)
    want = single["results"][TASK]
    got = multi["results"][TASK]
    metrics = [key for key in want if key.endswith(",none") and "_stderr" not in key]
    assert len(metrics) == 4 * (len(DEFAULT_METHODS) + 1)  # (methods + blind) x (AUC, TPR@5%, TPR@1%, TPR@0.1%)
    for key in metrics:
        assert got[key] == pytest.approx(want[key], abs=1e-6), key
    assert multi["n-samples"][TASK]["effective"] == LIMIT
    for name in ("freq_table_used", "token_scores"):  # recorded by rank 0 too
        assert multi["configs"][TASK]["metadata"][name] == single["configs"][TASK]["metadata"][name]
