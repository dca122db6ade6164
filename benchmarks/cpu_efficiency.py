"""How close the demo's scoring runs to this CPU's matrix-product peak, and where the rest of its time goes
(issue 34, item 2).

    python benchmarks/cpu_efficiency.py [--task pdd_wikimia] [--texts N] [--dtype float32|bfloat16]
        [--batch-size 8] [--json out.json]

1. **The scoring**: the default model as ``HFLM`` (CPU, ``--dtype``, ``--batch-size``) answers the
   per-token requests of every task of ``--task`` (a group, such as the demo's ``pdd_wikimia``: all in one
   ``loglikelihood`` call, as ``lm_eval --tasks pdd_wikimia`` sends them, so prefix sharing applies; the
   first ``--texts`` texts of each task, default all), then each task scores its texts
   (``process_results``, every default method). Timed apart: the model calls (``HFLM._model_call``, the
   forward pass through the LM head: this script wraps the one object's method to time it, nothing else
   changes), the rest of the answering (the capture's statistics over the vocabulary, batching, Python),
   and the scoring. The model calls' inputs are counted: positions forwarded, and the real tokens among
   them (right padding is token 0 after each row's last token; lm-eval's prefix token starts each row).
2. **The work**: floating-point operations per position, counted from the model's config: 2 x the
   weights of every matrix product (attention projections, MLP, LM head), plus 4 x layers x hidden size x
   the batch's padded length for the attention scores and the weighted sum (the full square; the causal
   half is all a position needs). GFLOP/s achieved = that work / the model calls' time, on the real tokens
   (useful work) and on every position forwarded (the padding too).
3. **The peak**: ``torch.mm`` in ``--dtype`` (torch's threads as set: one per core by default), the best
   of 5 timings of each shape: square n = 2,048, and the model's own largest products at the mean batch's
   positions (the MLP's up projection and the LM head). GFLOP/s = 2 M N K / seconds.

Prints the machine, a table of where the time went and a table of the rates; ``--json`` keeps them.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from _common import add_json_option, load_tasks, machine, pdd_and_stock_requests, refuse_existing_json
from lm_eval.models.huggingface import HFLM

from pdd_tasks.tools.default_model import ensure_default_model


#: Timings of each GEMM shape; the best is kept.
GEMM_REPEATS = 5


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="pdd_wikimia", help="a pdd task or group (default: the demo's)")
    parser.add_argument("--texts", type=int, default=None, help="the first N texts of each task (default: all)")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument("--batch-size", type=int, default=8)
    add_json_option(parser)
    args = parser.parse_args()
    refuse_existing_json(args)
    return args


def flops_per_position(config) -> float:
    """Floating-point operations of one position's forward pass through every matrix product of a
    Llama-style decoder and its LM head (2 per multiply-add), attention over the sequence excluded."""
    hidden, layers, vocab = config.hidden_size, config.num_hidden_layers, config.vocab_size
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or hidden // heads
    kv = getattr(config, "num_key_value_heads", None) or heads
    attention = hidden * heads * head_dim + 2 * hidden * kv * head_dim + heads * head_dim * hidden
    mlp = 3 * hidden * config.intermediate_size  # gate, up, down
    return 2.0 * (layers * (attention + mlp) + hidden * vocab)


def attention_flops(config, rows: int, length: int) -> float:
    """The attention scores and weighted sum of a batch of ``rows`` rows of ``length`` positions, over
    the full square (4 x layers x hidden x length per position)."""
    return 4.0 * config.num_hidden_layers * config.hidden_size * length * length * rows


def gemm_gflops(m: int, n: int, k: int, dtype: torch.dtype) -> float:
    """``torch.mm`` of an m x k by a k x n matrix: the best of :data:`GEMM_REPEATS` timings, in GFLOP/s."""
    a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
    torch.mm(a, b)  # warm-up
    best = min(_timed(torch.mm, a, b) for _ in range(GEMM_REPEATS))
    return 2.0 * m * n * k / best / 1e9


def _timed(function, *args) -> float:
    began = time.perf_counter()
    function(*args)
    return time.perf_counter() - began


class CountedModelCalls:
    """Wraps one ``HFLM``'s ``_model_call`` (the instance's attribute only): seconds spent in it, batches,
    positions forwarded, real tokens among them (a row's real tokens end at its last non-zero token id:
    ``pad_and_concat`` right-pads with 0), and the attention work of each batch."""

    def __init__(self, lm: HFLM) -> None:
        self.seconds, self.batches, self.positions, self.tokens, self.attention = 0.0, 0, 0, 0, 0.0
        self._stock, self._config = lm._model_call, lm.model.config
        lm._model_call = self

    def __call__(self, inputs, *args, **kwargs):
        began = time.perf_counter()
        out = self._stock(inputs, *args, **kwargs)
        self.seconds += time.perf_counter() - began
        rows, length = inputs.shape
        nonzero = (inputs != 0).to(torch.long)
        last = length - torch.argmax(nonzero.flip(1), dim=1)  # one past each row's last non-zero id
        self.tokens += int(torch.where(nonzero.any(1), last, torch.ones_like(last)).sum())
        self.batches += 1
        self.positions += rows * length
        self.attention += attention_flops(self._config, rows, length)
        return out


def demo_scoring(task: str, texts: int | None, dtype: str, batch_size: int):
    """The default model as ``HFLM`` (CPU, ``dtype``, ``batch_size``) and the per-token requests of the
    first ``texts`` texts (default all) of every task of ``task``, as ``lm_eval --tasks <task>`` builds
    them: ``(lm, tasks, docs per task, requests)``."""
    tasks = load_tasks(task)
    lm = HFLM(pretrained=str(ensure_default_model()), device="cpu", batch_size=batch_size, dtype=dtype)
    docs, requests = {}, []
    for name, each in tasks.items():
        docs[name] = list(each.test_docs())[:texts]
        requests += pdd_and_stock_requests(each, docs[name], name)[0]
    return lm, tasks, docs, requests


def main() -> None:
    args = parse_args()
    dtype = getattr(torch, args.dtype)
    lm, tasks, docs, requests = demo_scoring(args.task, args.texts, args.dtype, args.batch_size)
    calls = CountedModelCalls(lm)

    began = time.perf_counter()
    answers = lm.loglikelihood(requests, disable_tqdm=True)
    answering = time.perf_counter() - began
    began = time.perf_counter()
    per_doc: dict[tuple[str, int], list] = {}
    for request, answer in zip(requests, answers, strict=True):
        per_doc.setdefault((request.task_name, request.doc_id), []).append(answer)
    for name, task in tasks.items():
        for doc_id, doc in enumerate(docs[name]):
            task.process_results(doc, per_doc[name, doc_id])
    scoring = time.perf_counter() - began

    per_position = flops_per_position(lm.model.config)
    mean_positions = calls.positions // max(calls.batches, 1)
    config = lm.model.config
    peak = {
        "square 2048": gemm_gflops(2048, 2048, 2048, dtype),
        f"MLP up ({mean_positions} x {config.hidden_size} x {config.intermediate_size})": gemm_gflops(
            mean_positions, config.intermediate_size, config.hidden_size, dtype
        ),
        f"LM head ({mean_positions} x {config.hidden_size} x {config.vocab_size})": gemm_gflops(
            mean_positions, config.vocab_size, config.hidden_size, dtype
        ),
    }
    useful = per_position * calls.tokens
    forwarded = per_position * calls.positions + calls.attention
    total = answering + scoring
    result = {
        "machine": machine(f"torch {torch.__version__}", f"{torch.get_num_threads()} threads"),
        "task": args.task,
        "texts": sum(len(d) for d in docs.values()),
        "requests": len(requests),
        "dtype": args.dtype,
        "batch_size": args.batch_size,
        "seconds": {
            "model calls": calls.seconds,
            "rest of the answering": answering - calls.seconds,
            "scoring": scoring,
            "total": total,
        },
        "batches": calls.batches,
        "positions forwarded": calls.positions,
        "real tokens": calls.tokens,
        "gflop per position (matrix products)": per_position / 1e9,
        "gflop/s": {
            "model calls, real tokens (matrix products)": useful / calls.seconds / 1e9,
            "model calls, every position (matrix products and attention)": forwarded / calls.seconds / 1e9,
            "whole scoring, real tokens": useful / total / 1e9,
        },
        "peak gflop/s (torch.mm)": peak,
    }
    print(result["machine"])
    print(
        f"{args.task}: {result['texts']} texts, {len(requests)} requests, {args.dtype}, batch {args.batch_size}: "
        f"{calls.batches} model calls, {calls.positions:,} positions forwarded, {calls.tokens:,} real tokens "
        f"({calls.positions / max(calls.tokens, 1):.2f}x padding); {per_position / 1e9:.3f} GFLOP per position\n"
    )
    print("| part | seconds | share |\n|---|---|---|")
    for part, seconds in result["seconds"].items():
        print(f"| {part} | {seconds:.1f} | {seconds / total:.0%} |")
    square = peak["square 2048"]
    print("\n| rate | GFLOP/s | of the square GEMM's |\n|---|---|---|")
    for what, rate in [*result["gflop/s"].items(), *((f"peak: torch.mm {k}", v) for k, v in peak.items())]:
        print(f"| {what} | {rate:.1f} | {rate / square:.0%} |")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
