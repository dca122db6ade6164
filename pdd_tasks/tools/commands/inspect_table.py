"""``lm-eval-pdd inspect-table``: a frequency table's identity, size, coverage and most frequent tokens.

lm-eval-pdd inspect-table X.npz [--tokenizer T]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pdd_tasks.tools.arg_types import non_negative_int
from pdd_tasks.tools.commands._tables import load_table, load_tokenizer


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("table", type=Path, metavar="TABLE.npz")
    parser.add_argument(
        "--tokenizer",
        default=None,
        metavar="NAME_OR_PATH",
        help="decode the top tokens with it and check that the table matches it",
    )
    parser.add_argument("--top", type=non_negative_int, default=20, help="how many frequent tokens to list")


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from pdd_tasks.freq.tables import tokenizer_fingerprint

    table = load_table(args.table, "inspect-table")
    if table is None:
        return 1
    tokenizer = load_tokenizer(args.tokenizer) if args.tokenizer else None
    seen = int(np.count_nonzero(table.counts))
    kinds = {
        "corpus": "corpus (counted in a corpus)",
        "estimate": "ESTIMATE (not counted in a corpus; estimated from a word-frequency list)",
        "uniform": "UNIFORM (all counts equal: DC-PDD without calibration by frequency)",
    }
    lines = [
        f"table: {args.table}",
        f"format version: {table.format_version}",
        f"counts from: {kinds[table.counts_from]}",
        f"tokenizer: {table.tokenizer_name}",
        f"tokenizer fingerprint: {table.tokenizer_fingerprint}",
        f"tokenizer vocab size: {table.tokenizer_vocab_size}",
        f"corpus: {table.corpus}",
        f"documents: {table.documents}",
        f"text bytes: {table.text_bytes if table.text_bytes is not None else 'unknown'}",
        f"max tokens per doc: {table.max_tokens_per_doc if table.max_tokens_per_doc else 'all'}",
        f"total tokens: {table.total_tokens}",
        f"coverage: {seen}/{table.tokenizer_vocab_size} ids with count > 0 ({table.coverage:.2%})",
    ]
    if tokenizer is not None:
        fingerprint = tokenizer_fingerprint(tokenizer)
        if fingerprint != table.tokenizer_fingerprint:
            verdict = "DOES NOT MATCH"
        elif len(tokenizer) != table.tokenizer_vocab_size:
            verdict = (
                f"DOES NOT MATCH: the same fingerprint, but the tokenizer has {len(tokenizer)} ids and the table "
                f"{table.tokenizer_vocab_size} counts"
            )
        else:
            verdict = "matches"
        lines.append(f"--tokenizer {args.tokenizer}: fingerprint {fingerprint} ({verdict})")
    top = max(0, min(args.top, table.counts.size))
    if top:
        order = np.argsort(-table.counts, kind="stable")[:top]
        lines.append(f"top {top} tokens (rank, id, count, share{', token' if tokenizer else ''}):")
        total = max(1, table.total_tokens)
        for rank, idx in enumerate(order, start=1):
            count = int(table.counts[idx])
            row = f"{rank:>5} {int(idx):>8} {count:>12} {count / total:8.4%}"
            if tokenizer is not None:
                row += f"  {tokenizer.decode([int(idx)])!r}"
            lines.append(row)
    if table.is_estimate:
        lines.append(f"NOTE: {kinds[table.counts_from]}")
    print("\n".join(lines))
    return 0
