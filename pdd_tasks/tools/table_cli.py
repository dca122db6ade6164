"""The frequency-table subcommands of ``lm-eval-pdd`` (registered in :mod:`pdd_tasks.tools.cli`).

    lm-eval-pdd build-table --tokenizer T (--input FILE|DIR|GLOB ... | --hf-dataset ID ...) --output X.npz [--install]
    lm-eval-pdd merge-tables PART.npz ... --output X.npz [--install]
    lm-eval-pdd estimate-table --tokenizer T --from {wordfreq,jieba,uniform} --output X.npz
    lm-eval-pdd inspect-table X.npz [--tokenizer T]
    lm-eval-pdd install-table X.npz [--force]
    lm-eval-pdd list-tables

Each prints the path it wrote on stdout (messages go to stderr) and exits 1 with a message naming the
problem on bad input.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import shutil
import sys
import time
from pathlib import Path

from pdd_metrics.reference import DEFAULT_MAX_TOKENS_PER_DOC
from pdd_tasks.tools.arg_types import non_negative_int, positive_float, positive_int
from pdd_tasks.tools.outputs import OutputRefused, check_output_file


__all__ = [
    "add_build_table",
    "add_estimate_table",
    "add_inspect_table",
    "add_install_table",
    "add_list_tables",
    "add_merge_tables",
    "parse_size",
    "run_build_table",
    "run_estimate_table",
    "run_inspect_table",
    "run_install_table",
    "run_list_tables",
    "run_merge_tables",
]


def _err(message: str) -> None:
    print(message, file=sys.stderr)


def _max_tokens(text: str) -> int | None:
    if text.lower() in {"none", "all", "0"}:
        return None
    return positive_int(text)


_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}


def parse_size(text: str) -> int:
    """``"15GB"`` -> 15e9, ``"2GiB"`` -> 2 * 2**30, ``"1e6"`` -> 10**6, ``"500k"`` -> 500,000.

    >>> parse_size("15GB"), parse_size("2GiB"), parse_size("1e6"), parse_size("500k")
    (15000000000, 2147483648, 1000000, 500000)
    """
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([kmgt]i?)?b?\s*", text.lower())
    if not match:
        raise argparse.ArgumentTypeError(f"expected a size like 15GB, 500M, 2GiB or 1e9, got {text!r}")
    value = int(float(match.group(1)) * _UNITS[match.group(2) or ""])
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive size, got {text!r}")
    return value


def _load_tokenizer(name_or_path: str):
    from transformers import AutoTokenizer

    with contextlib.redirect_stdout(sys.stderr):
        try:
            return AutoTokenizer.from_pretrained(name_or_path)
        except Exception as exc:
            raise SystemExit(
                f"lm-eval-pdd: cannot load tokenizer {name_or_path!r} ({type(exc).__name__}: {exc}); "
                f"pass a local model directory or a Hub name reachable from this machine"
            ) from None


def _failed(command: str, message: str) -> int:
    """Exit status 1 after ``lm-eval-pdd COMMAND: message`` on stderr."""
    _err(f"lm-eval-pdd {command}: {message}")
    return 1


def _finish(table, output: Path | None, install: bool, force: bool, command: str) -> int:
    from pdd_tasks.freq.tables import install_table

    if output is not None:
        table.save(output)
    if install:
        try:
            cached = install_table(table, force=force)
        except FileExistsError as exc:
            return _failed(command, str(exc))
        _err(f"installed for tokenizer fingerprint {table.tokenizer_fingerprint[:16]}... at {cached}")
        if output is None:
            output = cached
    print(output)
    return 0


def _load_table(path: Path, command: str):
    """The table at ``path``, or None after a message saying why it cannot be read."""
    from pdd_tasks.freq.tables import FrequencyTable, FrequencyTableError

    try:
        return FrequencyTable.load(path)
    except (FileNotFoundError, FrequencyTableError) as exc:
        _err(f"lm-eval-pdd {command}: {exc}")
        return None


def _add_output(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", type=Path, default=None, metavar="TABLE.npz", help="where to write the table")
    parser.add_argument(
        "--install",
        action="store_true",
        help="also install the table in the cache, where the tasks find it for every model with "
        "this tokenizer (see list-tables)",
    )
    parser.add_argument(
        "--force", action="store_true", help="replace an existing --output file, or with --install an installed table"
    )


def _need_output(args: argparse.Namespace, command: str, inputs: list[Path] = ()) -> bool:
    """Whether the command may write: an output is given, and it replaces no file unless --force
    (never one of the command's own inputs, which it is still reading)."""
    if args.output is None and not args.install:
        _err(f"lm-eval-pdd {command}: pass --output TABLE.npz, --install, or both")
        return False
    if args.output is None:
        return True
    try:
        check_output_file(args.output, force=args.force, inputs=inputs, missing_folder_ok=True)
    except OutputRefused as exc:
        _err(f"lm-eval-pdd {command}: {exc}")
        return False
    return True


# ------------------------------------------------------------------------------- build-table


def add_build_table(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tokenizer",
        required=True,
        metavar="NAME_OR_PATH",
        help="the target model's tokenizer (HF name or local directory)",
    )
    source = parser.add_argument_group("corpus (local files or a Hugging Face dataset)")
    source.add_argument(
        "--input",
        action="extend",
        nargs="+",
        default=[],
        metavar="PATH",
        help="files, directories or glob/brace patterns: .jsonl/.json/.ndjson[.gz], .parquet, .txt/.md[.gz]",
    )
    source.add_argument(
        "--format",
        default="auto",
        choices=("auto", "jsonl", "parquet", "text", "lines"),
        help="file format (default: by suffix; 'text' = one document per file, 'lines' = per non-empty line)",
    )
    source.add_argument(
        "--hf-dataset", default=None, metavar="ID", help="Hugging Face dataset id (streamed), e.g. allenai/c4"
    )
    source.add_argument("--hf-config", default=None, metavar="NAME", help="dataset config, e.g. en")
    source.add_argument("--hf-split", default="train", metavar="SPLIT")
    source.add_argument(
        "--hf-data-files",
        action="extend",
        nargs="+",
        default=[],
        metavar="PATTERN",
        help="data files inside the dataset repository; brace patterns give one unit per file, e.g. "
        "'en/c4-train.{00000..00014}-of-01024.json.gz'",
    )
    source.add_argument("--hf-revision", default=None)
    source.add_argument(
        "--text-field", default="text", help="field holding the text (dotted for nested; default 'text')"
    )
    source.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="count only records whose FIELD equals VALUE (repeatable)",
    )
    counting = parser.add_argument_group("counting")
    counting.add_argument(
        "--max-tokens-per-doc",
        type=_max_tokens,
        default=DEFAULT_MAX_TOKENS_PER_DOC,
        metavar="N",
        help="count only the first N tokens of each document (default 1024, the DC-PDD reference code's rule; 'none' = all)",
    )
    counting.add_argument("--limit-docs", type=positive_int, default=None, metavar="N", help="stop after N documents")
    counting.add_argument(
        "--limit-tokens", type=parse_size, default=None, metavar="N", help="stop once N tokens are counted (e.g. 1G)"
    )
    counting.add_argument(
        "--limit-bytes",
        type=parse_size,
        default=None,
        metavar="SIZE",
        help="stop once SIZE of UTF-8 text is read (e.g. 15GB, the paper's C4 subset)",
    )
    counting.add_argument("--batch-size", type=positive_int, default=256, help="documents per tokenizer call")
    counting.add_argument("--no-parallel", action="store_true", help="tokenize on one core (default: all cores)")
    shards = parser.add_argument_group("sharding and resuming")
    shards.add_argument("--num-shards", type=positive_int, default=1, metavar="N")
    shards.add_argument(
        "--shard-index", type=non_negative_int, default=0, metavar="I", help="build shard I of N (0-based)"
    )
    shards.add_argument(
        "--shard-by",
        choices=("file", "document"),
        default="file",
        help="shard by input file (default) or by document stride",
    )
    shards.add_argument(
        "--docs-per-part",
        type=positive_int,
        default=None,
        metavar="N",
        help="documents per resumable part (default 100000)",
    )
    shards.add_argument(
        "--work-dir",
        type=Path,
        default=None,
        help="where finished parts are kept (default: <output>.parts); a rerun resumes from it",
    )
    shards.add_argument("--keep-parts", action="store_true", help="keep the work directory after the merge")
    _add_output(parser)
    parser.add_argument(
        "--corpus", default=None, help="description stored in the table (default: the sources, shard and limits)"
    )
    parser.add_argument(
        "--tokenizer-name",
        default=None,
        help="tokenizer name stored in the table (default: --tokenizer as given); matching uses the vocabulary fingerprint, never this name",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _corpus_sources(args: argparse.Namespace) -> list:
    """The corpus units of ``--input`` or ``--hf-dataset`` (raises TableSourceError)."""
    from pdd_tasks.freq.sources import hub_sources, local_sources, parse_where

    where = parse_where(args.where)
    if args.input:
        return local_sources(args.input, args.text_field, args.format, where)
    return hub_sources(
        args.hf_dataset, args.hf_config, args.hf_split, args.hf_data_files, args.text_field, where, args.hf_revision
    )


def _check_build_arguments(args: argparse.Namespace, command: str) -> bool:
    if bool(args.input) == bool(args.hf_dataset):
        _err(f"lm-eval-pdd {command}: give the corpus as --input PATH... or as --hf-dataset ID (one of them)")
        return False
    if args.shard_index >= args.num_shards:
        _err(f"lm-eval-pdd {command}: --shard-index {args.shard_index} must be below --num-shards {args.num_shards}")
        return False
    return _need_output(args, command, inputs=[Path(p) for p in args.input])


def _count_corpus(args: argparse.Namespace, sources: list, work_dir: Path | None):
    """Count ``sources`` as ``args`` say, keeping the finished parts in ``work_dir``."""
    from pdd_tasks.freq.build import DEFAULT_DOCS_PER_PART, build
    from pdd_tasks.freq.tables import BuildLimits

    return build(
        sources,
        _load_tokenizer(args.tokenizer),
        corpus=args.corpus,
        output=None,
        work_dir=work_dir,
        max_tokens_per_doc=args.max_tokens_per_doc,
        limits=BuildLimits(args.limit_docs, args.limit_tokens, args.limit_bytes),
        shard_index=args.shard_index,
        num_shards=args.num_shards,
        shard_by=args.shard_by,
        docs_per_part=args.docs_per_part or DEFAULT_DOCS_PER_PART,
        batch_size=args.batch_size,
        progress=not args.no_progress,
        tokenizer_name=args.tokenizer_name or args.tokenizer,
        parallel=not args.no_parallel,
        keep_parts=True,
    )


def _counted_nothing(table, args: argparse.Namespace) -> str | None:
    """The message for a table that counted no token (none for an empty shard, which merges)."""
    if table.total_tokens or args.num_shards > 1:
        return None
    where = f" (--where {' '.join(args.where)} matched no record?)" if args.where else ""
    return (
        f"counted no token in {table.documents} documents of {table.corpus}{where}; nothing written. A table "
        f"counted from nothing would calibrate DC-PDD by nothing: check --input, --text-field and --where."
    )


def run_build_table(args: argparse.Namespace) -> int:
    from pdd_tasks.freq.build import BuildResumeError, remove_work_dir
    from pdd_tasks.freq.sources import TableSourceError
    from pdd_tasks.freq.tables import FrequencyTableError

    command = "build-table"
    if not _check_build_arguments(args, command):
        return 1
    # Finished parts are kept here until the table is written; a rerun resumes from them.
    work_dir = args.work_dir
    if work_dir is None and args.output is not None:
        work_dir = args.output.with_name(args.output.name + ".parts")
    start = time.perf_counter()
    try:
        table = _count_corpus(args, _corpus_sources(args), work_dir)
    except (TableSourceError, BuildResumeError, FrequencyTableError, FileNotFoundError) as exc:
        return _failed(command, str(exc))
    seconds = time.perf_counter() - start
    empty = _counted_nothing(table, args)
    if empty:
        if work_dir is not None:  # nothing to resume from, and its manifest would refuse a corrected rerun
            remove_work_dir(work_dir)
        return _failed(command, empty)
    status = _finish(table, args.output, args.install, args.force, command)
    if status == 0 and work_dir is not None and not args.keep_parts:
        shutil.rmtree(work_dir, ignore_errors=True)
    _err(
        f"counted {table.total_tokens:,} tokens in {table.documents:,} documents in {seconds:.1f} s "
        f"({table.total_tokens / max(seconds, 1e-9):,.0f} tokens/s); coverage {table.coverage:.2%}; "
        f"fingerprint {table.tokenizer_fingerprint}"
    )
    return status


# ------------------------------------------------------------------------------ merge-tables


def add_merge_tables(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "tables", nargs="+", type=Path, metavar="TABLE.npz|DIR", help="tables (or directories of .npz tables) to add up"
    )
    _add_output(parser)
    parser.add_argument(
        "--corpus", default=None, help="description stored in the merged table (default: the parts' descriptions)"
    )


def run_merge_tables(args: argparse.Namespace) -> int:
    from pdd_tasks.freq.tables import FrequencyTable, FrequencyTableError, FrequencyTableMismatchError, merge_tables

    command = "merge-tables"
    paths: list[Path] = []
    for path in args.tables:
        if path.is_dir():
            found = sorted(p for p in path.glob("*.npz") if not p.name.startswith("."))
            if not found:
                return _failed(command, f"directory {path} holds no .npz table")
            paths.extend(found)
        else:
            paths.append(path)
    twice = sorted({str(p) for p in paths if sum(q.resolve() == p.resolve() for q in paths) > 1})
    if twice:
        return _failed(command, f"{', '.join(twice)} given more than once; its counts would be added twice.")
    if not _need_output(args, command, inputs=paths):
        return 1
    try:
        tables = [FrequencyTable.load(path) for path in paths]
        table = merge_tables(tables, corpus=args.corpus)
    except FrequencyTableMismatchError as exc:
        return _failed(command, f"refused: {exc}")
    except (FileNotFoundError, FrequencyTableError, ValueError) as exc:
        return _failed(command, str(exc))
    if table.total_tokens == 0:
        return _failed(command, f"the {len(tables)} tables counted no token at all; nothing written.")
    _err(f"{merged_line(paths, tables)}: {table.total_tokens:,} tokens, {table.documents:,} documents")
    return _finish(table, args.output, args.install, args.force, command)


def merged_line(paths: list[Path], tables: list) -> str:
    """What merge-tables added up: the table files by name, and those that were themselves merges of parts
    (their corpus description joins the parts' with " + ", as :func:`pdd_tasks.freq.tables.merge_tables`
    writes it), so that "3 tables" is never read as 3 parts of the corpus."""
    line = f"merged {len(tables)} table files ({', '.join(path.name for path in paths)})"
    merges = [
        f"{path.name} is itself a merge of {table.corpus!r}"
        for path, table in zip(paths, tables, strict=True)
        if " + " in table.corpus
    ]
    return line + (f"; {'; '.join(merges)}" if merges else "")


# ---------------------------------------------------------------------------- estimate-table


def add_estimate_table(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tokenizer", required=True, metavar="NAME_OR_PATH")
    parser.add_argument(
        "--from",
        dest="source",
        required=True,
        choices=("wordfreq", "jieba", "uniform"),
        help="wordfreq: a wordfreq word list (--language); jieba: jieba's Chinese dictionary; "
        "uniform: all counts equal (no calibration)",
    )
    parser.add_argument("--language", default="en", help="wordfreq language, e.g. en or zh (default en)")
    parser.add_argument("--wordlist", default="best", help="wordfreq list: best, large or small (default best)")
    parser.add_argument(
        "--scale", type=positive_float, default=1e9, help="wordfreq: nominal corpus size in words (default 1e9)"
    )
    parser.add_argument(
        "--jieba-dict", type=Path, default=None, help="jieba: a dictionary file (default: jieba's dict.txt)"
    )
    parser.add_argument("--tokenizer-name", default=None)
    _add_output(parser)


def run_estimate_table(args: argparse.Namespace) -> int:
    from pdd_tasks.freq.estimates import estimate_table, jieba_word_counts, uniform_table, wordfreq_word_counts

    command = "estimate-table"
    if not _need_output(args, command, inputs=[args.jieba_dict] if args.jieba_dict else []):
        return 1
    tokenizer = _load_tokenizer(args.tokenizer)
    name = args.tokenizer_name or args.tokenizer
    try:
        if args.source == "uniform":
            table = uniform_table(tokenizer, name)
        elif args.source == "wordfreq":
            pairs, desc = wordfreq_word_counts(args.language, args.wordlist, args.scale)
            table = estimate_table(pairs, tokenizer, desc, args.language, name)
        else:
            pairs, desc = jieba_word_counts(args.jieba_dict)
            table = estimate_table(pairs, tokenizer, desc, "zh", name)
    except (ValueError, FileNotFoundError) as exc:
        return _failed(command, str(exc))
    _err(f"{table.description}; coverage {table.coverage:.2%}")
    return _finish(table, args.output, args.install, args.force, command)


# ------------------------------------------------------------------------------ inspect-table


def add_inspect_table(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("table", type=Path, metavar="TABLE.npz")
    parser.add_argument(
        "--tokenizer",
        default=None,
        metavar="NAME_OR_PATH",
        help="decode the top tokens with it and check that the table matches it",
    )
    parser.add_argument("--top", type=non_negative_int, default=20, help="how many frequent tokens to list")


def run_inspect_table(args: argparse.Namespace) -> int:
    import numpy as np

    from pdd_tasks.freq.tables import tokenizer_fingerprint

    table = _load_table(args.table, "inspect-table")
    if table is None:
        return 1
    tokenizer = _load_tokenizer(args.tokenizer) if args.tokenizer else None
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


# ---------------------------------------------------------------------- install / list tables


def add_install_table(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("table", type=Path, metavar="TABLE.npz")
    parser.add_argument("--force", action="store_true", help="replace a table already installed for this tokenizer")


def run_install_table(args: argparse.Namespace) -> int:
    table = _load_table(args.table, "install-table")
    if table is None:
        return 1
    return _finish(table, None, True, args.force, "install-table")


def add_list_tables(parser: argparse.ArgumentParser) -> None:
    pass


def run_list_tables(args: argparse.Namespace) -> int:
    from pdd_tasks.freq.tables import FrequencyTable, FrequencyTableError, default_table_path, table_cache_dir

    directory = table_cache_dir()
    lines = [f"installed tables (used for a model whose tokenizer fingerprint is the file name): {directory}"]
    found = sorted(directory.glob("*.npz")) if directory.is_dir() else []
    for path in found:
        try:
            lines.append(f"  {path.name}: {FrequencyTable.load(path).description}")
        except FrequencyTableError as exc:
            lines.append(f"  {path.name}: UNREADABLE ({exc})")
    if not found:
        lines.append("  (none; install one with `lm-eval-pdd build-table ... --install` or `install-table`)")
    shipped = default_table_path()
    lines.append(f"fallback (shipped, for the default model's tokenizer): {shipped}")
    lines.append(f"  {FrequencyTable.load(shipped).description}")
    print("\n".join(lines))
    return 0
