"""The full method table of one pdd task through each backend, and the per-document agreement with HF.

    python benchmarks/backend_tables.py [--task pdd_wikimia_32] [--limit N]
        [--backends hf,hf-2proc,local-completions] [--threads 1] [--topk 20] [--keep DIR]

Runs the real ``lm_eval`` command line once per backend on the default model
(``lm-eval-pdd default-model``), every document of ``--task`` unless ``--limit``:
- ``hf``: ``--model hf``, one process, float32, batch size 8;
- ``hf-2proc``: the same under ``ACCELERATE_USE_CPU=true accelerate launch --multi_gpu
  --num_processes 2 -m lm_eval`` (two CPU processes, one thread each);
- ``local-completions``: ``--model local-completions`` against lm-eval-pdd's llama.cpp completions
  server (``python -m pdd_tasks.tools.gguf_server``) on the default model's Q4_1 GGUF, top-``--topk``.

Prints one markdown table (AUC and TPR at FPR < 5% per method and backend), then, per backend, how
far its per-document scores are from ``hf``'s (max absolute difference, Pearson r), and each run's
wall time. ``--model vllm`` needs a GPU and is not run here.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import cpu_name, read_run, run_checked

from pdd_tasks.paths import tasks_path
from pdd_tasks.registry import DEFAULT_METHODS, ScoringSettings, label
from pdd_tasks.tools.default_model import default_gguf_path, ensure_default_model


BACKENDS = ("hf", "hf-2proc", "local-completions")
ENV = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_backend(backend: str, common: list[str], model_dir: Path, out: Path, threads: int) -> float:
    """One ``lm_eval`` run of ``backend`` writing to ``out`` (its printed table to ``out/stdout.txt``,
    progress bars to this script's stderr); returns its wall time in seconds."""
    bin_dir = Path(sys.executable).parent
    hf_args = ["--model", "hf", "--model_args", f"pretrained={model_dir},dtype=float32", "--batch_size", "8"]
    output = ["--output_path", str(out)]
    start = time.perf_counter()
    with (out / "stdout.txt").open("w") as log:
        if backend == "hf":
            run_checked([str(bin_dir / "lm_eval"), *hf_args, *common, *output], capture=False, env=ENV, stdout=log)
        elif backend == "hf-2proc":
            launch = [
                str(bin_dir / "accelerate"), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
                "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(free_port()),
            ]  # fmt: skip
            env = dict(ENV, ACCELERATE_USE_CPU="true", OMP_NUM_THREADS="1")
            run_checked([*launch, "-m", "lm_eval", *hf_args, *common, *output], capture=False, env=env, stdout=log)
        elif backend == "local-completions":
            from pdd_tasks.tools.servers.gguf_server import running_server

            with running_server(default_gguf_path(), n_threads=threads, n_threads_batch=threads) as url:
                model_args = (
                    f"model=smollm2-135m-q4_1,base_url={url},tokenizer={model_dir},tokenizer_backend=huggingface"
                )
                command = [str(bin_dir / "lm_eval"), "--model", "local-completions", "--model_args", model_args]
                run_checked([*command, *common, *output], capture=False, env=ENV, stdout=log)
        else:
            raise ValueError(f"unknown backend {backend!r}; choose from {', '.join(BACKENDS)}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="pdd_wikimia_32")
    parser.add_argument("--limit", type=int, default=None, help="first N documents (default: all)")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads of the completions server")
    parser.add_argument("--topk", type=int, default=20, help="topk_logprobs for local-completions")
    parser.add_argument("--keep", type=Path, default=None, help="keep each run's lm_eval output under DIR/<backend>")
    args = parser.parse_args()
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if "hf" not in backends:
        parser.error("--backends must include hf (the per-document comparison is against it)")
    unknown = sorted(set(backends) - set(BACKENDS))
    if unknown:
        parser.error(f"unknown backend(s) {', '.join(unknown)}; choose from {', '.join(BACKENDS)}")

    model_dir = ensure_default_model()
    common = ["--include_path", tasks_path(), "--tasks", args.task, "--log_samples",
              "--metadata", json.dumps({"topk_logprobs": args.topk})]  # fmt: skip
    if args.limit is not None:
        common += ["--limit", str(args.limit)]
    root = args.keep or Path(tempfile.mkdtemp(prefix="backend_tables_"))
    scores, results, seconds = {}, {}, {}
    for backend in backends:
        out = root / backend
        out.mkdir(parents=True, exist_ok=True)
        print(f"[{backend}] lm_eval -> {out}", file=sys.stderr, flush=True)
        seconds[backend] = run_backend(backend, common, model_dir, out, args.threads)
        scores[backend], results[backend] = read_run(out, args.task)

    task = args.task
    n_docs = len(scores["hf"]["loss"])
    print(f"Machine: {cpu_name()}, {os.cpu_count()} cores. Task {task}, {n_docs} documents (each also lowercased).")
    print(
        f"Model: SmolLM2-135M-Instruct; hf: float32 weights; local-completions: Q4_1 GGUF via "
        f"pdd_tasks.tools.gguf_server (llama.cpp, {args.threads} thread(s)), top-{args.topk} Min-K%++.\n"
    )
    header = ["method"] + [f"{b} {metric}" for b in backends for metric in ("AUC", "TPR@FPR<5%")]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for method in DEFAULT_METHODS:
        cells = [label(method, ScoringSettings())]
        for backend in backends:
            values = results[backend]["results"][task]
            cells += [f"{values[f'{method}_auc,none']:.3f}", f"{values[f'{method}_tpr@fpr<5%,none']:.3f}"]
        print("| " + " | ".join(cells) + " |")
    print()
    for backend in backends:
        mu_sigma = (results[backend]["configs"][task].get("metadata") or {}).get("token_scores", {}).get("mu_sigma")
        print(f"{backend}: {seconds[backend]:.0f} s wall; Min-K%++ mu/sigma: {mu_sigma}")
    for backend in backends:
        if backend == "hf":
            continue
        print(f"\nPer-document scores, {backend} vs hf ({n_docs} documents):\n")
        print("| method | max abs diff | mean abs diff | Pearson r |")
        print("|---|---|---|---|")
        for method in DEFAULT_METHODS:
            docs = sorted(scores["hf"][method])
            if sorted(scores[backend][method]) != docs:
                raise SystemExit(f"{backend} scored other documents than hf for {method}")
            a = np.array([scores[backend][method][d] for d in docs])
            h = np.array([scores["hf"][method][d] for d in docs])
            diff = np.abs(a - h)
            print(
                f"| {label(method, ScoringSettings())} | {diff.max():.2e} | {diff.mean():.2e} | {np.corrcoef(a, h)[0, 1]:.5f} |"
            )


if __name__ == "__main__":
    main()
