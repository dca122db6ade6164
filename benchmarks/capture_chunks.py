"""The HF capture's statistics over the vocabulary at several chunk sizes, side by side (issue 34, item 2).

    python benchmarks/capture_chunks.py [--task pdd_wikimia] [--texts N] [--dtype float32|bfloat16]
        [--chunk-elements 16777216 1048576] [--rounds 2] [--batch-size 8] [--json out.json]

The capture takes a text's log-softmax, top-1, mu and sigma (Min-K%++ Eq. 3-4) a chunk of positions at
a time, each float32 temporary at most ``chunk_elements`` values
(:func:`pdd_tasks.backends.token_stats.position_stats`). One process, one model (the default model as
``HFLM``, CPU, ``--dtype``, ``--batch-size``): the per-token requests of every task of ``--task`` (the
first ``--texts`` texts of each; default all) are answered once per setting of
``--chunk-elements`` in turn, ``--rounds`` times, with the model calls (``HFLM._model_call``) timed
apart from the rest of the answering (the statistics, batching, Python), as in ``cpu_efficiency.py``.
Prints, per setting, the median of each part and the largest per-token difference of every captured
value from the first setting's answers (the chunking must not change them beyond float32 rounding).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import torch
from _common import add_json_option, machine, refuse_existing_json
from cpu_efficiency import CountedModelCalls, demo_scoring

from pdd_tasks.backends import token_stats


FIELDS = ("logprobs", "mu", "sigma", "top1")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="pdd_wikimia", help="a pdd task or group (default: the demo's)")
    parser.add_argument("--texts", type=int, default=None, help="the first N texts of each task (default: all)")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument("--chunk-elements", type=int, nargs="+", default=[2**24, 2**20])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=8)
    add_json_option(parser)
    args = parser.parse_args()
    refuse_existing_json(args)
    if args.rounds < 1 or min(args.chunk_elements) < 1 or (args.texts is not None and args.texts < 1):
        parser.error("--rounds, --texts and every --chunk-elements must be at least 1")
    return args


def largest_differences(answers, reference) -> dict[str, float]:
    """The largest absolute per-token difference of each captured value between two answer lists."""
    return {
        field: max(
            float(np.max(np.abs(getattr(a, field) - getattr(b, field)), initial=0.0))
            for a, b in zip(answers, reference, strict=True)
        )
        for field in FIELDS
    }


def main() -> None:
    args = parse_args()
    lm, _, _, requests = demo_scoring(args.task, args.texts, args.dtype, args.batch_size)
    calls = CountedModelCalls(lm)

    seconds = {chunk: {"model calls": [], "rest of the answering": []} for chunk in args.chunk_elements}
    differences, reference = {}, None
    for _ in range(args.rounds):
        for chunk in args.chunk_elements:
            token_stats.CPU_CHUNK_ELEMENTS = chunk
            in_calls = calls.seconds
            began = time.perf_counter()
            answers = lm.loglikelihood(requests, disable_tqdm=True)
            answering = time.perf_counter() - began
            seconds[chunk]["model calls"].append(calls.seconds - in_calls)
            seconds[chunk]["rest of the answering"].append(answering - (calls.seconds - in_calls))
            reference = reference if reference is not None else answers
            differences[chunk] = largest_differences(answers, reference)

    result = {
        "machine": machine(f"torch {torch.__version__}", f"{torch.get_num_threads()} threads"),
        "task": args.task,
        "requests": len(requests),
        "dtype": args.dtype,
        "batch_size": args.batch_size,
        "rounds": args.rounds,
        "seconds (every round)": {str(chunk): parts for chunk, parts in seconds.items()},
        "largest difference from the first setting": {str(chunk): d for chunk, d in differences.items()},
    }
    print(result["machine"])
    print(
        f"{args.task}: {len(requests)} requests, {args.dtype}, batch {args.batch_size}, median of {args.rounds} rounds\n"
    )
    print("| chunk (values) | MiB a temporary | model calls, s | rest of the answering, s | largest difference |")
    print("|---|---|---|---|---|")
    for chunk, parts in seconds.items():
        largest = max(differences[chunk].values())
        print(
            f"| {chunk:,} | {chunk * 4 / 2**20:g} | {statistics.median(parts['model calls']):.1f} | "
            f"{statistics.median(parts['rest of the answering']):.1f} | {largest:.1e} |"
        )
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
