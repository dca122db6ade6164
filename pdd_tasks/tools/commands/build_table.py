"""``lm-eval-pdd build-table``: count a reference corpus's tokens into a DC-PDD frequency table.

    lm-eval-pdd build-table --tokenizer T (--input FILE|DIR|GLOB ... | --hf-dataset ID ...) --output X.npz [--install]

Counting, sharding and resuming: :mod:`pdd_tasks.freq.build`; the corpus sources:
:mod:`pdd_tasks.freq.sources`.
"""

from __future__ import annotations

import argparse
import re
import shutil
import time
from pathlib import Path

from pdd_metrics.reference import DEFAULT_MAX_TOKENS_PER_DOC
from pdd_tasks.tools.arg_types import non_negative_int, positive_int
from pdd_tasks.tools.commands._tables import add_output, err, failed, finish, load_tokenizer, need_output


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


def add_arguments(parser: argparse.ArgumentParser) -> None:
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
    add_output(parser)
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
        err(f"lm-eval-pdd {command}: give the corpus as --input PATH... or as --hf-dataset ID (one of them)")
        return False
    if args.shard_index >= args.num_shards:
        err(f"lm-eval-pdd {command}: --shard-index {args.shard_index} must be below --num-shards {args.num_shards}")
        return False
    return need_output(args, command, inputs=[Path(p) for p in args.input])


def _count_corpus(args: argparse.Namespace, sources: list, work_dir: Path | None):
    """Count ``sources`` as ``args`` say, keeping the finished parts in ``work_dir``."""
    from pdd_tasks.freq.build import DEFAULT_DOCS_PER_PART, build
    from pdd_tasks.freq.tables import BuildLimits

    return build(
        sources,
        load_tokenizer(args.tokenizer),
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


def run(args: argparse.Namespace) -> int:
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
        return failed(command, str(exc))
    seconds = time.perf_counter() - start
    empty = _counted_nothing(table, args)
    if empty:
        if work_dir is not None:  # nothing to resume from, and its manifest would refuse a corrected rerun
            remove_work_dir(work_dir)
        return failed(command, empty)
    status = finish(table, args.output, args.install, args.force, command)
    if status == 0 and work_dir is not None and not args.keep_parts:
        shutil.rmtree(work_dir, ignore_errors=True)
    err(
        f"counted {table.total_tokens:,} tokens in {table.documents:,} documents in {seconds:.1f} s "
        f"({table.total_tokens / max(seconds, 1e-9):,.0f} tokens/s); coverage {table.coverage:.2%}; "
        f"fingerprint {table.tokenizer_fingerprint}"
    )
    return status
