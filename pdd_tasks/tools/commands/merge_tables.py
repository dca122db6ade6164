"""``lm-eval-pdd merge-tables``: add up tables of corpus shards (same tokenizer) into one table.

lm-eval-pdd merge-tables PART.npz ... --output X.npz [--install]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pdd_tasks.tools.commands._tables import add_output, err, failed, finish, need_output


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "tables", nargs="+", type=Path, metavar="TABLE.npz|DIR", help="tables (or directories of .npz tables) to add up"
    )
    add_output(parser)
    parser.add_argument(
        "--corpus", default=None, help="description stored in the merged table (default: the parts' descriptions)"
    )


def run(args: argparse.Namespace) -> int:
    from pdd_tasks.freq.tables import FrequencyTable, FrequencyTableError, FrequencyTableMismatchError, merge_tables

    command = "merge-tables"
    paths: list[Path] = []
    for path in args.tables:
        if path.is_dir():
            found = sorted(p for p in path.glob("*.npz") if not p.name.startswith("."))
            if not found:
                return failed(command, f"directory {path} holds no .npz table")
            paths.extend(found)
        else:
            paths.append(path)
    twice = sorted({str(p) for p in paths if sum(q.resolve() == p.resolve() for q in paths) > 1})
    if twice:
        return failed(command, f"{', '.join(twice)} given more than once; its counts would be added twice.")
    if not need_output(args, command, inputs=paths):
        return 1
    try:
        tables = [FrequencyTable.load(path) for path in paths]
        table = merge_tables(tables, corpus=args.corpus)
    except FrequencyTableMismatchError as exc:
        return failed(command, f"refused: {exc}")
    except (FileNotFoundError, FrequencyTableError, ValueError) as exc:
        return failed(command, str(exc))
    if table.total_tokens == 0:
        return failed(command, f"the {len(tables)} tables counted no token at all; nothing written.")
    err(f"{merged_line(paths, tables)}: {table.total_tokens:,} tokens, {table.documents:,} documents")
    return finish(table, args.output, args.install, args.force, command)


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
