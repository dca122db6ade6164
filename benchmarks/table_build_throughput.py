"""Frequency-table build throughput against the tokenizer's own batch encoding, same texts, one run.

    python benchmarks/table_build_throughput.py [--docs 600] [--repeats 3] [--batch-size 256] [--pile FILE]

Texts: ``--docs`` documents of the Pile test-split sample (../shared/data/pile-test-sample; ``--pile``:
another ``.jsonl[.gz]`` file with a ``text`` field), taken at an even stride so every domain is in,
written once to a temporary ``.jsonl.gz``. The tokenizer is the default model's
(SmolLM2-135M-Instruct). Runs, alternating (a, b, c, d, a, b, ...), medians compared:

(a) ``tokenizer(batch, add_special_tokens=False)`` over the texts in memory, batches of
    ``--batch-size``, ``TOKENIZERS_PARALLELISM=true`` (the tokenizer's own batch encoding, all cores);
(b) the same with the Rust tokenizer's ``encode_batch_fast`` (no offsets; what the builder calls);
(c) ``build_table`` over the same texts in memory (tokenize, cap at 1024 tokens, count);
(d) ``lm-eval-pdd build-table``'s engine from the ``.jsonl.gz`` file (read, decompress, parse,
    tokenize, count, write resumable parts and the table);
(e) (c) on one core (``parallel=False``), to show what the other cores add.

Throughput is given as tokens encoded per second (every token of every text, which is the work all
runs do) and, for the builds, tokens counted per second (the first 1024 of each document). The ratio
is wall time of (a) over wall time of each run: 1.0 = as fast as the tokenizer's own batch encoding,
the target is >= 0.8.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from _common import machine


REPO = Path(__file__).resolve().parents[1]
PILE = REPO.parent / "shared" / "data" / "pile-test-sample" / "pile_test_sample.jsonl.gz"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=600)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--pile", type=Path, default=PILE, help="the corpus file (default: the Pile sample)")
    args = parser.parse_args()

    from transformers import AutoTokenizer

    from pdd_tasks.freq.build import build
    from pdd_tasks.freq.sources import local_sources
    from pdd_tasks.freq.tables import build_table, iter_jsonl_texts, tokenizer_parallelism
    from pdd_tasks.tools.default_model import ensure_default_model

    if not args.pile.is_file():
        raise SystemExit(f"needs the Pile sample at {args.pile}")
    all_texts = list(iter_jsonl_texts(args.pile))
    stride = max(1, len(all_texts) // args.docs)
    texts = all_texts[::stride][: args.docs]
    del all_texts
    tokenizer = AutoTokenizer.from_pretrained(ensure_default_model())
    tmp = Path(tempfile.mkdtemp(prefix="table-throughput-"))
    corpus = tmp / "texts.jsonl.gz"
    with gzip.open(corpus, "wt", encoding="utf-8") as fh:
        for text in texts:
            fh.write(json.dumps({"text": text}) + "\n")
    batches = [texts[i : i + args.batch_size] for i in range(0, len(texts), args.batch_size)]
    backend = tokenizer._tokenizer

    def run_tokenizer() -> tuple[int, int]:
        encoded = 0
        for batch in batches:
            encoded += sum(map(len, tokenizer(batch, add_special_tokens=False)["input_ids"]))
        return encoded, 0

    def run_fast() -> tuple[int, int]:
        encoded = 0
        for batch in batches:
            encoded += sum(len(e.ids) for e in backend.encode_batch_fast(batch, add_special_tokens=False))
        return encoded, 0

    def run_build_memory() -> tuple[int, int]:
        table = build_table(texts, tokenizer, "bench", progress=False, batch_size=args.batch_size)
        return 0, table.total_tokens

    def run_build_file() -> tuple[int, int]:
        out = tmp / "table.npz"
        table = build(local_sources([corpus]), tokenizer, output=out, progress=False, batch_size=args.batch_size)
        return 0, table.total_tokens

    def run_build_one_core() -> tuple[int, int]:
        table = build_table(texts, tokenizer, "bench", progress=False, batch_size=args.batch_size, parallel=False)
        return 0, table.total_tokens

    runs = {
        "(a) tokenizer(batch) [tokenizer's own batch encoding]": run_tokenizer,
        "(b) encode_batch_fast [Rust, no offsets]": run_fast,
        "(c) build_table, texts in memory": run_build_memory,
        "(d) build-table engine from .jsonl.gz": run_build_file,
        "(e) build_table on one core (parallel=False)": run_build_one_core,
    }
    times: dict[str, list[float]] = {name: [] for name in runs}
    encoded_tokens = counted = 0
    with tokenizer_parallelism(True):
        for _ in range(args.repeats):
            for name, fn in runs.items():
                start = time.perf_counter()
                enc, cnt = fn()
                times[name].append(time.perf_counter() - start)
                encoded_tokens = enc or encoded_tokens
                counted = cnt or counted
    shutil.rmtree(tmp)
    medians = {name: statistics.median(values) for name, values in times.items()}
    base = medians[next(iter(runs))]
    chars = sum(map(len, texts))
    import tokenizers
    import transformers

    print("Machine:", machine(f"tokenizers {tokenizers.__version__}", f"transformers {transformers.__version__}"))
    print(
        f"Texts: {len(texts)} documents of {args.pile.name} ({chars:,} characters), {encoded_tokens:,} tokens encoded, "
        f"{counted:,} counted (first 1024 per document); batch size {args.batch_size}, all cores "
        f"(TOKENIZERS_PARALLELISM=true), median of {args.repeats} alternating runs"
    )
    print()
    print("| run | wall time (s) | tokens encoded/s | tokens counted/s | speed vs (a) |")
    print("|---|---|---|---|---|")
    for name, seconds in medians.items():
        count_rate = f"{counted / seconds:,.0f}" if name.startswith(("(c)", "(d)", "(e)")) else "-"
        print(f"| {name} | {seconds:.2f} | {encoded_tokens / seconds:,.0f} | {count_rate} | {base / seconds:.3f} |")


if __name__ == "__main__":
    main()
