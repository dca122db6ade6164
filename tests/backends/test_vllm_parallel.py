"""``--model vllm`` split over several workers: the per-text scores do not depend on the split.

Two ways lm-eval 0.4.13 splits a vLLM run, each on the real CPU engine (``.venv-vllm``; skipped
without it), on the tiny GPT-2 in exact mode (``max_logprobs=-1``, ``exact_mu_sigma``: every
default method exact), each text's scores compared with ``--model hf`` (1e-4):

- ``tensor_parallel_size=2``: one engine, the model's layers split over two workers. On a CPU, vLLM
  binds each worker's threads to a NUMA node and refuses two workers on a one-node machine ("Not
  enough allowed NUMA nodes"); ``VLLM_CPU_OMP_THREADS_BIND="0|1"`` binds them to a core each.
- ``data_parallel_size=2``: lm-eval starts one engine per replica as a Ray task asking for
  ``num_gpus=tensor_parallel_size`` GPUs (``vllm_causallms.py``, line 408). On a machine without GPUs,
  Ray's own cluster has none and the run waits forever; a cluster started with declared resources
  (``ray start --head --num-gpus 2``) schedules the replicas, which then run on the CPU engine. Needs
  Ray in ``.venv-vllm`` (``.venv-vllm/bin/pip install ray``; not installed by ``.ci/install-vllm``):
  skipped without it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

import pytest
from support.harness import OFFLINE, cpu_float32, harness_args, read_samples, run_lm_eval, vllm_venv_or_skip

from pdd_tasks.registry import DEFAULT_METHODS
from pdd_tasks.tools.servers.vllm_server import VLLM_CPU_ENV


pytestmark = pytest.mark.vllm_engine

VENV = vllm_venv_or_skip("python")

TASK = "pdd_wikimia_32"
LIMIT = 8


def has_ray() -> bool:
    found = subprocess.run([str(VENV / "bin" / "python"), "-c", "import ray"], capture_output=True, timeout=120)
    return found.returncode == 0


def scores_by_doc(output_dir) -> dict[int, dict[str, float]]:
    return {s["doc_id"]: {m: s[f"{m}_auc"][0] for m in DEFAULT_METHODS} for s in read_samples(output_dir, TASK)}


@pytest.fixture(scope="module")
def hf_scores(tiny_model, tiny_table, tmp_path_factory):
    out = tmp_path_factory.mktemp("hf") / "out"
    metadata = {"freq_table": str(tiny_table)}
    run_lm_eval(
        harness_args(cpu_float32(tiny_model), TASK, out, batch_size=8, metadata=metadata, limit=LIMIT), out.parent
    )
    return scores_by_doc(out)


def vllm_split_run(tiny_model, tiny_table, directory, split: str, env: dict) -> dict[int, dict[str, float]]:
    out = directory / "out"
    model_args = f"{cpu_float32(tiny_model)},enforce_eager=True,max_logprobs=-1,{split}"
    metadata = {"freq_table": str(tiny_table), "exact_mu_sigma": True}
    args = harness_args(model_args, TASK, out, model="vllm", batch_size="auto", metadata=metadata, limit=LIMIT)
    run_env = dict(os.environ, **OFFLINE, **VLLM_CPU_ENV, **env)
    run_env.pop("VIRTUAL_ENV", None)
    finished = subprocess.run(
        [str(VENV / "bin" / "lm_eval"), *args], cwd=directory, env=run_env, capture_output=True, text=True, timeout=1200
    )
    assert finished.returncode == 0, f"{finished.stdout[-3000:]}\n{finished.stderr[-6000:]}"
    return scores_by_doc(out)


def assert_equal_per_text(split_scores, hf_scores):
    assert len(split_scores) == LIMIT and split_scores.keys() == hf_scores.keys()
    for doc_id, expected in hf_scores.items():
        for method in DEFAULT_METHODS:
            assert split_scores[doc_id][method] == pytest.approx(expected[method], abs=1e-4), (method, doc_id)


def test_tensor_parallel_2_scores_as_one_model(tiny_model, tiny_table, hf_scores, tmp_path):
    split = vllm_split_run(
        tiny_model, tiny_table, tmp_path, "tensor_parallel_size=2", {"VLLM_CPU_OMP_THREADS_BIND": "0|1"}
    )
    assert_equal_per_text(split, hf_scores)


def test_data_parallel_2_on_a_ray_cluster_with_declared_gpus(tiny_model, tiny_table, hf_scores, tmp_path):
    if not has_ray():
        pytest.skip(f"Ray is not installed in {VENV} (.venv-vllm/bin/pip install ray)")
    ray = [str(VENV / "bin" / "ray")]
    ray_tmp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # Ray's socket paths must stay under 108 bytes
    env = dict(os.environ, **VLLM_CPU_ENV, RAY_TMPDIR=ray_tmp)
    env.pop("VIRTUAL_ENV", None)
    port = "6391"
    start = ["start", "--head", "--node-ip-address", "127.0.0.1", "--port", port, "--num-cpus", "2", "--num-gpus", "2"]
    started = subprocess.run(
        [*ray, *start, "--disable-usage-stats", "--include-dashboard=false"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert started.returncode == 0, started.stderr[-4000:]
    try:
        split = vllm_split_run(
            tiny_model,
            tiny_table,
            tmp_path,
            "data_parallel_size=2",
            {"RAY_ADDRESS": f"127.0.0.1:{port}", "RAY_TMPDIR": ray_tmp},
        )
    finally:
        subprocess.run([*ray, "stop", "--force"], env=env, capture_output=True, timeout=300)
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert_equal_per_text(split, hf_scores)
