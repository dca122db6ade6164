"""Throughput of the local-completions pdd path against the stock harness requests, same server, one run.

    python benchmarks/completions_throughput.py [--task pdd_wikimia_32] [--texts 64] [--repeats 3]
        [--threads 2] [--batch-size 1] [--num-concurrent 1] [--topk 20]

Starts lm-eval-pdd's llama.cpp completions server (``python -m pdd_tasks.tools.gguf_server``) on the
default model's GGUF on 127.0.0.1, and a ``local-completions`` client on it, then alternates:
(a) stock: ``LocalCompletionsAPI.loglikelihood`` answering plain requests ``("", text)`` and
    ``("", text.lower())``, what a stock loglikelihood task sends (``logprobs: 1``);
(b) pdd: the same texts as the pdd task sends them (per-token capture: ``logprobs: k``, token
    log-probs, top-k mu/sigma), plus ``process_results`` (all six methods per text).
The server counts the requests and prompts it answers; the capture must send exactly as many as the
stock client (one prompt per text). Prints a markdown table with the medians and the ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import requests
from _common import answer_and_score, load_task, machine, pdd_and_stock_requests
from lm_eval.models.openai_completions import LocalCompletionsAPI

from pdd_tasks import lm_eval_patches
from pdd_tasks.tools.default_model import default_gguf_path, ensure_default_model
from pdd_tasks.tools.servers.gguf_server import running_server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="pdd_wikimia_32")
    parser.add_argument("--texts", type=int, default=64, help="documents (each is scored with its lowercased copy)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1), help="llama.cpp threads")
    parser.add_argument("--batch-size", type=int, default=1, help="client batch_size (prompts per request)")
    parser.add_argument("--num-concurrent", type=int, default=1, help="client num_concurrent")
    parser.add_argument("--topk", type=int, default=20, help="topk_logprobs of the pdd task")
    parser.add_argument("--n-ctx", type=int, default=2048)
    args = parser.parse_args()

    task = load_task(args.task, metadata={"topk_logprobs": args.topk})
    model_dir = ensure_default_model()
    docs = list(task.test_docs())[: args.texts]
    pdd_requests, stock_requests = pdd_and_stock_requests(task, docs, args.task)
    lm_eval_patches.apply()

    with running_server(
        default_gguf_path(), n_ctx=args.n_ctx, n_threads=args.threads, n_threads_batch=args.threads
    ) as url:
        stats_url = url.replace("/v1/completions", "/stats")

        def stats():
            return requests.get(stats_url, timeout=30).json()

        lm = LocalCompletionsAPI(
            model="smollm2-135m-q4_1",
            base_url=url,
            tokenizer=str(model_dir),
            tokenizer_backend="huggingface",
            max_length=args.n_ctx,
            batch_size=args.batch_size,
            num_concurrent=args.num_concurrent,
        )

        def run_stock():
            return lm.loglikelihood(stock_requests, disable_tqdm=True)

        def run_pdd():
            return answer_and_score(lm, task, docs, pdd_requests)

        answers = run_pdd()  # warm-up; includes the one-off server check (probe)
        tokens = sum(len(a.token_ids) for a in answers)
        times = {"stock": [], "pdd": []}
        counts = {}
        for _ in range(args.repeats):
            for name, run in (("stock", run_stock), ("pdd", run_pdd)):
                before = stats()
                start = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - start)
                after = stats()
                counts[name] = (after["requests"] - before["requests"], after["prompts"] - before["prompts"])

    n = len(pdd_requests)
    expected_requests = -(-n // args.batch_size)
    for name, (reqs, prompts) in counts.items():
        assert prompts == n and reqs == expected_requests, (
            f"{name}: {reqs} requests / {prompts} prompts for {n} texts (expected {expected_requests} / {n})"
        )
    stock = statistics.median(times["stock"])
    import llama_cpp

    print("Machine:", machine(f"server threads {args.threads}", f"llama-cpp-python {llama_cpp.__version__}"))
    print(
        f"Model: SmolLM2-135M-Instruct Q4_1 GGUF via pdd_tasks.tools.gguf_server (llama.cpp), task {args.task}, "
        f"{len(docs)} docs = {n} texts ({tokens} scored tokens), client batch_size {args.batch_size}, "
        f"num_concurrent {args.num_concurrent}, pdd k = {args.topk}; median of {args.repeats} alternating runs\n"
    )
    print("| path | wall time (s) | texts/s | tokens/s | requests | prompts | ratio to stock |")
    print("|---|---|---|---|---|---|---|")
    for name, label in (
        ("stock", "stock loglikelihood (logprobs=1)"),
        ("pdd", f"pdd capture (logprobs={args.topk}) + scoring"),
    ):
        t = statistics.median(times[name])
        reqs, prompts = counts[name]
        print(f"| {label} | {t:.2f} | {n / t:.1f} | {tokens / t:.0f} | {reqs} | {prompts} | {t / stock:.3f} |")
    print(
        f"\nOne prompt per text on both paths ({n} texts); the pdd path's server check (one request) is in the warm-up."
    )


if __name__ == "__main__":
    main()
