"""Scoring time and peak memory against the number of texts and their length (issue 45, item 3), so
that a run's cost can be predicted before it starts.

    python benchmarks/scoring_cost.py [--texts 100 300 1000] [--words 32 128]
        [--wikimia 32 64 128 256] [--dtype bfloat16|float32] [--batch-size 8] [--model default|<dir>]
        [--freq-table T.npz] [--json benchmarks/results/scoring_cost.json] [--plot docs/img/scoring_cost.png]

Each cell runs in a fresh process, as one ``lm_eval --model hf --tasks pdd_wikimia_<n>`` run scores
its texts on the CPU: the model loaded as lm-eval's ``HFLM`` (``--dtype``, default what ``lm-eval-pdd
cpu-dtype`` picks for this CPU, as ``.ci/demo`` does; ``--batch-size``), the task's per-token requests
built (``construct_requests``), answered in one ``loglikelihood`` call, and every text scored by every
default method (``process_results``). The cells:

- **WikiMIA** (``--wikimia``): all texts of ``pdd_wikimia_<n>`` (the shipped data: 776, 542, 250 and 82
  texts of 32, 64, 128 and 256 words), each split alone;
- **synthetic** (``--texts`` x ``--words``): N texts of exactly W words, each W consecutive words of the
  shipped WikiMIA texts joined (a seeded random start per text), labels alternating, sent through
  ``pdd_wikimia_32``'s task object (the same requests and methods).

Per cell: the seconds of the scoring (requests, answers, per-text scores; the model's loading is
timed apart; the first forward pass's one-time set-up is part of it), the tokens scored, the resident
memory after loading the model, and its peak while scoring (``psutil``, sampled every 10 ms; the
process's ``ru_maxrss`` is kept too, but loading the weights sets it). Then a least-squares line per length, seconds = a + b x texts (the scoring's time
grows linearly in the texts at a fixed length), and one over every cell in the tokens scored
(seconds = a + b x tokens), which the plot shows extended to 10,000 texts. Prints a table; ``--json``
keeps every number, ``--plot`` draws time and memory against the number of texts (matplotlib).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import threading
import time
from pathlib import Path

from _common import add_json_option, child_result, machine, recorded_command, refuse_existing_json


#: The task whose object scores the synthetic texts (its requests and methods are every WikiMIA split's).
SYNTHETIC_TASK = "pdd_wikimia_32"

#: The plot's fitted lines run to this many texts.
PREDICT_UP_TO = 10_000


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, nargs="*", default=[100, 300, 1000], help="synthetic cells' N")
    parser.add_argument("--words", type=int, nargs="*", default=[32, 128], help="synthetic cells' words per text")
    parser.add_argument("--wikimia", type=int, nargs="*", default=[32, 64, 128, 256], help="WikiMIA splits to score")
    parser.add_argument("--wikimia-texts", type=int, default=None, help="the first N texts of each split (default all)")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default=None, help="default: lm-eval-pdd cpu-dtype")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--model", default="default", help="'default' (the default model) or a model directory")
    parser.add_argument(
        "--freq-table", default=None, help="DC-PDD's reference table (default: the model's shipped one)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", type=Path, default=None, help="write the plot here (PNG)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    add_json_option(parser)
    args = parser.parse_args(argv)
    if any(n < 1 for n in [*args.texts, *args.words, *args.wikimia, args.batch_size, args.wikimia_texts or 1]):
        parser.error("--texts, --words, --wikimia, --wikimia-texts and --batch-size must be at least 1")
    if not args.child:
        refuse_existing_json(args)
    return args


def wikimia_words() -> list[str]:
    """Every word of the shipped WikiMIA texts (all four lengths), in file order."""
    from pdd_tasks.loading.benchmark_data import PACKAGED_DATA

    words = []
    for size in (32, 64, 128, 256):
        path = PACKAGED_DATA / "wikimia" / f"WikiMIA_length{size}.jsonl"
        for line in path.read_text().splitlines():
            if line.strip():
                words += json.loads(line)["input"].split()
    return words


def synthetic_docs(count: int, words: int, seed: int) -> list[dict]:
    """``count`` documents of exactly ``words`` words (consecutive words of the joined WikiMIA texts from
    a seeded random start each), labels alternating 1, 0 (both classes, for the AUCs)."""
    pool = wikimia_words()
    if words > len(pool):
        raise SystemExit(f"--words {words}: the shipped texts hold {len(pool)} words")
    rng = random.Random(seed)
    starts = [rng.randrange(len(pool) - words + 1) for _ in range(count)]
    return [{"text": " ".join(pool[s : s + words]), "label": (i + 1) % 2} for i, s in enumerate(starts)]


def resident_mib() -> float:
    """This process's resident memory now (``psutil``), in MiB."""
    import psutil

    return psutil.Process().memory_info().rss / 2**20


class PeakResident:
    """The largest resident memory seen while the ``with`` block runs (sampled every 10 ms on a thread)."""

    def __enter__(self):
        self.peak, self._done = resident_mib(), threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def _watch(self) -> None:
        while not self._done.wait(0.01):
            self.peak = max(self.peak, resident_mib())

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()
        self.peak = max(self.peak, resident_mib())


def child(config: dict) -> dict:
    """One cell in this process: load the model, build the requests, answer and score them."""
    from lm_eval.models.huggingface import HFLM

    sys.path.insert(0, str(Path(__file__).parent))
    from _common import load_tasks, pdd_and_stock_requests

    began = time.perf_counter()
    metadata = {"freq_table": config["freq_table"]} if config["freq_table"] else None
    name = f"pdd_wikimia_{config['words']}" if config["kind"] == "wikimia" else SYNTHETIC_TASK
    task = load_tasks(name, metadata)[name]
    if config["kind"] == "wikimia":
        docs = list(task.test_docs())[: config["limit"]]
    else:
        docs = synthetic_docs(config["texts"], config["words"], config["seed"])
    lm = HFLM(pretrained=config["model"], device="cpu", batch_size=config["batch_size"], dtype=config["dtype"])
    loading = time.perf_counter() - began
    loaded = resident_mib()

    began = time.perf_counter()
    with PeakResident() as scoring:
        requests = pdd_and_stock_requests(task, docs, name)[0]
        answers = lm.loglikelihood(requests, disable_tqdm=True)
        per_doc: dict[int, list] = {}
        for request, answer in zip(requests, answers, strict=True):
            per_doc.setdefault(request.doc_id, []).append(answer)
        for doc_id, doc in enumerate(docs):
            task.process_results(doc, per_doc[doc_id])
    seconds = time.perf_counter() - began
    return {
        "kind": config["kind"],
        "texts": len(docs),
        "words": config["words"],
        "requests": len(requests),
        "tokens": sum(len(a.token_ids) for a in answers),
        "seconds": seconds,
        "loading seconds": loading,
        "resident after loading MiB": loaded,
        "peak MiB": scoring.peak,
        "process peak MiB (ru_maxrss, loading included)": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def line_fit(xs: list[float], ys: list[float]) -> dict:
    """Least-squares ``y = intercept + slope x`` (the slope alone through 0 for one point)."""
    n = len(xs)
    if n == 1:
        return {"intercept": 0.0, "slope": ys[0] / xs[0]}
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    spread = sum((x - mean_x) ** 2 for x in xs)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread if spread else 0.0
    return {"intercept": mean_y - slope * mean_x, "slope": slope}


def fits(cells: list[dict]) -> dict:
    """Seconds against texts for each length's synthetic cells, and seconds against tokens over every cell."""
    by_words: dict[int, list[dict]] = {}
    for cell in cells:
        if cell["kind"] == "synthetic":
            by_words.setdefault(cell["words"], []).append(cell)
    per_length = {}
    for words, group in sorted(by_words.items()):
        per_length[str(words)] = {
            "seconds vs texts": line_fit([c["texts"] for c in group], [c["seconds"] for c in group]),
            "tokens per text": sum(c["tokens"] for c in group) / sum(c["texts"] for c in group),
            "peak MiB vs texts": line_fit([c["texts"] for c in group], [c["peak MiB"] for c in group]),
        }
    every = line_fit([c["tokens"] for c in cells], [c["seconds"] for c in cells])
    return {"per length (synthetic)": per_length, "seconds vs tokens (every cell)": every}


def plot(result: dict, path: Path) -> None:
    """Scoring seconds and peak memory against texts: each length's cells, its fitted line to
    :data:`PREDICT_UP_TO` texts, and the WikiMIA splits."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells, fitted = result["cells"], result["fits"]["per length (synthetic)"]
    figure, (time_axes, memory_axes) = plt.subplots(1, 2, figsize=(11, 4.2))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for index, (words, fit) in enumerate(fitted.items()):
        colour = colours[index % len(colours)]
        group = [c for c in cells if c["kind"] == "synthetic" and str(c["words"]) == words]
        xs = [c["texts"] for c in group]
        line = fit["seconds vs texts"]
        label = f"{words} words ({fit['tokens per text']:.0f} tokens): {line['slope'] * 1000:.0f} s per 1,000 texts"
        time_axes.plot(xs, [c["seconds"] for c in group], "o", color=colour, label=label)
        span = [min(xs), PREDICT_UP_TO]
        time_axes.plot(span, [line["intercept"] + line["slope"] * x for x in span], "--", color=colour, lw=1)
        memory_axes.plot(xs, [c["peak MiB"] for c in group], "o-", color=colour, label=f"{words} words")
    wikimia = [c for c in cells if c["kind"] == "wikimia"]
    if wikimia:
        time_axes.plot([c["texts"] for c in wikimia], [c["seconds"] for c in wikimia], "k^", label="WikiMIA splits")
        memory_axes.plot([c["texts"] for c in wikimia], [c["peak MiB"] for c in wikimia], "k^", label="WikiMIA splits")
        for c in wikimia:
            time_axes.annotate(f"{c['words']}w", (c["texts"], c["seconds"]), fontsize=7, xytext=(3, -9),
                               textcoords="offset points")  # fmt: skip
    for axes in (time_axes, memory_axes):
        axes.set_xscale("log")
        axes.set_xlabel("texts scored")
        axes.grid(alpha=0.3, which="both")
        axes.legend(fontsize=7)
    time_axes.set_yscale("log")
    time_axes.set_ylabel("scoring seconds (model loading excluded)")
    time_axes.set_title("Time: dashed lines are the fits, extended", fontsize=9)
    memory_axes.set_ylabel("peak resident memory (MiB)")
    memory_axes.set_title("Peak resident memory while scoring (psutil, every 10 ms)", fontsize=9)
    figure.suptitle(f"{result['model']}, {result['dtype']}, batch {result['batch_size']}: {result['machine']}",
                    fontsize=8)  # fmt: skip
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)


def main() -> None:
    args = parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    import torch

    from pdd_tasks.tools.cpu_dtype import choose_dtype, cpu_flags
    from pdd_tasks.tools.default_model import ensure_default_model

    dtype = args.dtype or choose_dtype(cpu_flags())[0]
    model = str(ensure_default_model() if args.model == "default" else Path(args.model).resolve())
    base = {"model": model, "dtype": dtype, "batch_size": args.batch_size, "seed": args.seed, "freq_table": None}
    if args.freq_table:
        base["freq_table"] = str(Path(args.freq_table).resolve())
    configs = [{**base, "kind": "wikimia", "words": n, "limit": args.wikimia_texts} for n in args.wikimia]
    configs += [{**base, "kind": "synthetic", "words": w, "texts": n} for w in args.words for n in args.texts]
    result = {
        "command": recorded_command("scoring_cost.py", sys.argv[1:]),
        "machine": machine(f"torch {torch.__version__}", f"{torch.get_num_threads()} threads"),
        "model": Path(model).name,
        "dtype": dtype,
        "batch_size": args.batch_size,
        "cells": [],
    }
    print(result["machine"])
    print(f"{result['model']}, {dtype}, batch {args.batch_size}; one fresh process per cell\n")
    print("| cell | texts | words | tokens | scoring s | ms per token | peak MiB scoring (after loading) |")
    print("|---|---|---|---|---|---|---|")
    for config in configs:
        cell = child_result(__file__, config)  # a fresh process: its own peak memory
        result["cells"].append(cell)
        print(
            f"| {cell['kind']} | {cell['texts']:,} | {cell['words']} | {cell['tokens']:,} | {cell['seconds']:.1f} | "
            f"{1000 * cell['seconds'] / max(cell['tokens'], 1):.3f} | {cell['peak MiB']:.0f} "
            f"({cell['resident after loading MiB']:.0f}) |",
            flush=True,
        )
    result["fits"] = fits(result["cells"])
    print("\n| words | seconds = a + b x texts | tokens per text | predicted at 10,000 texts |\n|---|---|---|---|")
    for words, fit in result["fits"]["per length (synthetic)"].items():
        line = fit["seconds vs texts"]
        predicted = line["intercept"] + line["slope"] * PREDICT_UP_TO
        print(
            f"| {words} | {line['intercept']:.1f} + {line['slope']:.4f} x texts | {fit['tokens per text']:.1f} | "
            f"{predicted:.0f} s |"
        )
    every = result["fits"]["seconds vs tokens (every cell)"]
    print(f"\nEvery cell: seconds = {every['intercept']:.1f} + {every['slope'] * 1000:.3f} ms x tokens scored")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    if args.plot:
        plot(result, args.plot)


if __name__ == "__main__":
    main()
