"""What prefix sharing (``share_prefixes``, on by default) saves: tokens forwarded with and without it,
and optionally the scoring time and per-text scores of both on the default model.

    python benchmarks/prefix_sharing.py [--model DIR] [--wikimia24 DIR] [--limit N [--time]] [--batch-size 8]

Counting needs the tokenizer only (no model, seconds). For every split of WikiMIA (the files shipped
in ``pdd_tasks/data/wikimia``) and of WikiMIA-24 (``--wikimia24``, default ``../shared/data/WikiMIA-24``;
skipped where absent: it is not shipped), the requests the default methods send for each text (the
text and its lowercased copy, :func:`pdd_tasks.registry.extra_requests`) are encoded as the capture
encodes them (:func:`pdd_tasks.backends.base.encode_text`, ``convention: paper``, the default model's
tokenizer); the passes and tokens (start token included) forwarded without sharing and with it
(:func:`pdd_tasks.backends.base.shared_prefixes`) are printed per split and per benchmark run whole
(``--tasks pdd_wikimia``: lm-eval hands every task's requests to one ``loglikelihood`` call, so a
64-word text answers the 32-word text it begins with). ``--limit N``: also the first N texts of each
split in one run, as ``lm_eval --limit N`` sends them.

``--time`` (with ``--limit N``): also runs the real ``lm_eval`` (HF, CPU, float32, ``--batch-size``) on
``--tasks pdd_wikimia --limit N`` (N texts of each split) with sharing and with
``share_prefixes: false``, one after the other, and prints both wall times (whole runs, model load
included) and, per split and default method, the largest difference of a per-text score.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path


for key, value in {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}.items():
    os.environ.setdefault(key, value)

REPO = Path(__file__).resolve().parents[1]
SPLITS = (32, 64, 128, 256)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="model directory (default: the converted default model)")
    parser.add_argument("--wikimia24", type=Path, default=REPO.parent / "shared" / "data" / "WikiMIA-24")
    parser.add_argument("--limit", type=int, default=None, help="also count the first N texts of each split")
    parser.add_argument("--time", action="store_true", help="also time lm_eval on pdd_wikimia --limit N")
    parser.add_argument("--batch-size", type=int, default=8)
    return parser.parse_args()


class Tokenizer:
    """What :func:`~pdd_tasks.backends.base.encode_text` reads of a backend (as HFLM: the start token is
    BOS, else EOS), for a tokenizer alone."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        self.prefix_token_id = int(start)

    def tok_encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return self.tokenizer(text, add_special_tokens=add_special_tokens).input_ids


def encoded_requests(lm, texts: list[str]) -> list[tuple[list[int], list[int]]]:
    """``(start, text tokens)`` of every request the default methods send for ``texts``."""
    from pdd_tasks.backends.base import ContextLimit, PerTokenRequest, encode_text
    from pdd_tasks.registry import ScoringSettings, extra_requests

    settings, fit = ScoringSettings(), ContextLimit(room=10**9, limit="", fixes="", window="")
    pairs = [("", text) for text in texts] + [
        (context, continuation) for text in texts for _, context, continuation in extra_requests(text, settings)
    ]
    encoded = []
    for context, text in pairs:
        request = PerTokenRequest(
            request_type="loglikelihood", doc={"text": text}, arguments=(context, text), idx=0, metadata=("", 0, 1)
        )
        start, tokens, _ = encode_text(lm, request, fit)
        encoded.append((start, tokens))
    return encoded


def count(encoded: list[tuple[list[int], list[int]]]) -> dict:
    """Passes and tokens forwarded without and with sharing."""
    from pdd_tasks.backends.base import shared_prefixes

    owners = shared_prefixes(encoded)
    sizes = [len(start) + len(tokens) for start, tokens in encoded]
    forwarded = [index for index, owner in enumerate(owners) if owner == index]
    return {
        "passes": len(encoded),
        "passes_shared": len(forwarded),
        "tokens": sum(sizes),
        "tokens_shared": sum(sizes[index] for index in forwarded),
    }


def count_table(lm, benchmarks: dict[str, dict[int, list[str]]], limit: int | None) -> None:
    """Per split and per benchmark run whole (and, with ``limit``, its first ``limit`` texts per split)."""
    print("| benchmark | split | texts | passes without / with | tokens without / with | fewer tokens |")
    print("|---|---|---|---|---|---|")
    for name, splits in benchmarks.items():
        encoded = {length: encoded_requests(lm, texts) for length, texts in splits.items()}
        rows = [(str(length), len(splits[length]), count(encoded[length])) for length in splits]
        whole = count([item for length in splits for item in encoded[length]])
        rows.append(("all four, one run", sum(map(len, splits.values())), whole))
        if limit:
            first = [encoded_requests(lm, texts[:limit]) for texts in splits.values()]
            texts = sum(min(limit, len(texts)) for texts in splits.values())
            rows.append((f"--limit {limit}, one run", texts, count([item for part in first for item in part])))
        for split, texts, c in rows:
            print(
                f"| {name} | {split} | {texts} | {c['passes']:,} / {c['passes_shared']:,} | "
                f"{c['tokens']:,} / {c['tokens_shared']:,} | {c['tokens'] / c['tokens_shared']:.2f}x |"
            )


def timed_runs(model: Path, limit: int, batch_size: int) -> None:
    """lm_eval on pdd_wikimia (LIMIT texts per split), sharing on and off; wall times and score differences."""
    from _common import lm_eval_run
    from compare_runs import scores

    from pdd_tasks.registry import DEFAULT_METHODS

    work = Path(tempfile.mkdtemp(prefix="prefix-sharing-"))
    seconds = {}
    for name, metadata in (("shared", None), ("alone", {"share_prefixes": False})):
        seconds[name], _ = lm_eval_run(
            model, "pdd_wikimia", work / name, metadata=metadata, limit=limit, batch_size=batch_size, log_samples=True
        )
    print(
        f"\nlm_eval --tasks pdd_wikimia --limit {limit} (batch {batch_size}, float32): "
        f"share_prefixes on {seconds['shared']:.1f} s, off {seconds['alone']:.1f} s "
        f"({seconds['alone'] / seconds['shared']:.2f}x); outputs in {work}\n"
    )
    print("| split | " + " | ".join(DEFAULT_METHODS) + " |")
    print("|---|" + "---|" * len(DEFAULT_METHODS))
    for length in SPLITS:
        task = f"pdd_wikimia_{length}"
        (shared, _), (alone, _) = scores(work / "shared", task), scores(work / "alone", task)
        cells = []
        for method in DEFAULT_METHODS:
            docs = sorted(alone[method])
            if sorted(shared[method]) != docs:
                raise SystemExit(f"{task} {method}: the runs scored different documents")
            cells.append(f"{max(abs(shared[method][d] - alone[method][d]) for d in docs):.3g}")
        print(f"| {task} ({len(docs)} texts) | " + " | ".join(cells) + " |")


def main() -> None:
    args = parse_args()
    if args.time and not args.limit:
        raise SystemExit("--time scores the first --limit N texts of each split: give --limit (e.g. --limit 40).")
    from _common import machine
    from transformers import AutoTokenizer

    from pdd_tasks.loading.files import read_jsonl
    from pdd_tasks.registry import DEFAULT_METHODS
    from pdd_tasks.tools.default_model import ensure_default_model

    model = Path(args.model) if args.model else ensure_default_model()
    lm = Tokenizer(AutoTokenizer.from_pretrained(model))
    benchmarks = {"pdd_wikimia": {n: REPO / "pdd_tasks" / "data" / "wikimia" for n in SPLITS}}
    if (args.wikimia24 / "WikiMIA_length32.jsonl").exists():
        benchmarks["pdd_wikimia24"] = {n: args.wikimia24 for n in SPLITS}
    else:
        print(f"(WikiMIA-24 not found in {args.wikimia24}: not counted)")
    texts = {
        name: {
            n: [row["input"] for row in read_jsonl(folder / f"WikiMIA_length{n}.jsonl")] for n, folder in splits.items()
        }
        for name, splits in benchmarks.items()
    }
    print("Machine: " + machine())
    print(f"Tokenizer: {model.name}; per text, its own request and those of the default methods: {DEFAULT_METHODS}\n")
    count_table(lm, texts, args.limit)
    if args.time:
        timed_runs(model, args.limit, args.batch_size)


if __name__ == "__main__":
    main()
