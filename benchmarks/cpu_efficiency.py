"""How close the demo's scoring runs to this CPU's matrix-product peak, and where the rest of its time goes
(issue 34, item 2).

    python benchmarks/cpu_efficiency.py [--task pdd_wikimia] [--texts N] [--dtype float32|bfloat16]
        [--batch-size 8] [--profile BATCHES] [--json out.json]

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

4. **Where the model calls' time goes** (``--profile N``, after the timed run): ``N`` of the run's own
   batches (evenly spaced through its length-sorted order) forwarded again under ``torch.profiler``
   (``record_shapes``), and each op's self time as a share of theirs: the matrix products by weight
   shape (named: attention projections, MLP, LM head) with their GFLOP/s, the attention kernel, and the
   other ops (RMSNorm, SiLU, rotary embedding, copies) by name. Shares of one run's time hold under a
   busy machine better than seconds do.

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
    parser.add_argument("--profile", type=int, default=0, metavar="BATCHES", help="profile this many model calls")
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
        self.inputs: list[torch.Tensor] = []  # every batch's padded input ids, for --profile
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
        self.inputs.append(inputs)
        return out


def weight_names(config) -> dict[tuple[int, int], str]:
    """The matrix products of a Llama-style decoder by their weight's (in, out) shape."""
    hidden, heads = config.hidden_size, config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or hidden // heads
    kv = (getattr(config, "num_key_value_heads", None) or heads) * head_dim
    names = {
        (hidden, heads * head_dim): "q and o projections",
        (hidden, kv): "k and v projections",
        (hidden, config.intermediate_size): "MLP gate and up",
        (config.intermediate_size, hidden): "MLP down",
        (hidden, config.vocab_size): "LM head",
    }
    if (heads * head_dim, hidden) != (hidden, heads * head_dim):
        names[heads * head_dim, hidden] = "o projection"
    return names


def profile_model_calls(call, batches: list[torch.Tensor], config) -> list[dict]:
    """``call`` on each of ``batches`` under ``torch.profiler``: every op's share of the self time, the
    matrix products (``aten::mm``/``addmm``/``bmm``) by weight shape with their GFLOP/s, largest first."""
    from torch.profiler import ProfilerActivity, profile

    with torch.inference_mode(), profile(activities=[ProfilerActivity.CPU], record_shapes=True) as profiler:
        for inputs in batches:
            call(inputs)
    names = weight_names(config)
    rows: dict[str, dict] = {}
    total = 0.0
    for event in profiler.key_averages(group_by_input_shape=True):
        seconds = event.self_cpu_time_total / 1e6
        total += seconds
        flops = 0.0
        if event.key in ("aten::mm", "aten::addmm") and len(event.input_shapes) >= 2:
            shapes = [s for s in event.input_shapes if len(s) == 2][-2:]
            (m, k), (_, n) = shapes
            key = f"matrix product: {names.get((k, n), f'{k} x {n}')}"
            flops = 2.0 * m * k * n * event.count
        elif "scaled_dot_product" in event.key or "flash_attention" in event.key:
            key = "attention (SDPA kernel)" if "flash" in event.key or "_for_cpu" in event.key else event.key
        else:
            key = event.key
        row = rows.setdefault(key, {"op": key, "seconds": 0.0, "flops": 0.0})
        row["seconds"] += seconds
        row["flops"] += flops
    table = []
    for row in sorted(rows.values(), key=lambda r: -r["seconds"]):
        if row["seconds"] <= 0:
            continue
        entry = {"op": row["op"], "share": row["seconds"] / total, "seconds": row["seconds"]}
        if row["flops"]:
            entry["gflop/s"] = row["flops"] / row["seconds"] / 1e9
        table.append(entry)
    return table


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
    if args.profile > 0:
        step = max(1, len(calls.inputs) // args.profile)
        chosen = calls.inputs[::step][: args.profile]
        result["profile"] = {
            "batches": len(chosen),
            "positions": sum(x.numel() for x in chosen),
            "ops": profile_model_calls(calls._stock, chosen, config),
        }
        print(f"\nProfile of {len(chosen)} model calls (op self time; matrix products by weight shape):\n")
        print("| op | share of the model calls | GFLOP/s | of the square GEMM's |\n|---|---|---|---|")
        for row in result["profile"]["ops"]:
            if row["share"] >= 0.002:
                rate = row.get("gflop/s")
                shown = f"{rate:.1f} | {rate / square:.0%}" if rate else " | "
                print(f"| {row['op']} | {row['share']:.1%} | {shown} |")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
