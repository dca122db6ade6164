"""Cost of per-token capture and scoring against the stock HF backend, on the same texts, in one run.

    python benchmarks/capture_overhead.py [--task pdd_wikimia_64] [--texts 128] [--batch-size 8] [--repeats 3]

(a) stock: ``HFLM.loglikelihood`` answering plain requests ``("", text)`` and ``("", text.lower())``,
    exactly what a stock loglikelihood task would send;
(b) pdd: the same requests as the pdd task sends them (per-token capture: log-probs, ids, exact
    mu/sigma over the vocabulary), plus ``process_results`` (all six methods per text).
The runs alternate (a, b, a, b, ...) and the medians are compared. Prints a markdown table.
"""

from __future__ import annotations

import statistics
import time

import torch
from _common import answer_and_score, load_task, machine, pdd_and_stock_requests, timing_parser
from lm_eval.models.huggingface import HFLM

from pdd_tasks.tools.default_model import ensure_default_model


def main() -> None:
    args = timing_parser(__doc__, texts=128).parse_args()

    task = load_task(args.task)
    model_dir = ensure_default_model()
    lm = HFLM(pretrained=str(model_dir), device="cpu", batch_size=args.batch_size, dtype="float32")
    docs = list(task.test_docs())[: args.texts]
    pdd_requests, stock_requests = pdd_and_stock_requests(task, docs, args.task)

    def run_stock():
        lm.loglikelihood(stock_requests, disable_tqdm=True)

    def run_pdd():
        return answer_and_score(lm, task, docs, pdd_requests)

    answers = run_pdd()  # warm-up; also counts tokens
    tokens = sum(len(a.token_ids) for a in answers)
    stock_times, pdd_times = [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        run_stock()
        stock_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        run_pdd()
        pdd_times.append(time.perf_counter() - start)
    stock, pdd = statistics.median(stock_times), statistics.median(pdd_times)
    print("Machine: " + machine(f"{torch.get_num_threads()} torch threads", f"torch {torch.__version__}"))
    print(
        f"Model: {model_dir.name} (float32, CPU), task {args.task}, {len(docs)} texts = {len(pdd_requests)} "
        f"requests ({tokens} scored tokens), batch size {args.batch_size}, median of {args.repeats} alternating runs\n"
    )
    print("| path | wall time (s) | texts/s | requests/s | tokens/s | ratio to stock |")
    print("|---|---|---|---|---|---|")
    for name, seconds in (("stock HF loglikelihood", stock), ("pdd capture + scoring", pdd)):
        print(
            f"| {name} | {seconds:.2f} | {len(docs) / seconds:.1f} | {len(pdd_requests) / seconds:.1f} | "
            f"{tokens / seconds:.0f} | {seconds / stock:.3f} |"
        )


if __name__ == "__main__":
    main()
