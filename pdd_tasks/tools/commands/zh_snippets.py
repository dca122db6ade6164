"""``lm-eval-pdd zh-snippets``: cut the texts of a JSONL file to their first N jieba words.

The rule is :func:`pdd_tasks.loading.chinese.first_n_words` (DC-PDD's PatentMIA snippets); the file
is written by :func:`pdd_tasks.tools.outputs.write_file` (never over ``--input``, an existing file
only with ``--force``, all or nothing).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pdd_tasks.errors import excerpt
from pdd_tasks.loading.chinese import PAPER_WORDS, first_n_words
from pdd_tasks.loading.files import DatasetError, iter_jsonl_records
from pdd_tasks.tools.arg_types import positive_int
from pdd_tasks.tools.outputs import OutputRefused, write_file


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input", required=True, type=Path, metavar="FILE", help="JSONL (or .jsonl.gz), one object per line"
    )
    parser.add_argument("--output", required=True, type=Path, metavar="FILE", help="JSONL to write")
    parser.add_argument("--force", action="store_true", help="replace the --output file if it exists")
    parser.add_argument("--text-field", default="text", help="field holding the text (default: text)")
    parser.add_argument(
        "--words",
        type=positive_int,
        default=PAPER_WORDS,
        metavar="N",
        help=f"jieba words to keep (default {PAPER_WORDS}, DC-PDD)",
    )


def run(args: argparse.Namespace) -> int:
    """Write each record of ``args.input`` with its text cut to the first ``args.words`` jieba words."""
    counts = {"written": 0, "cut": 0}

    def write(path: Path) -> None:
        with open(path, "w", encoding="utf-8") as out:
            for line_number, record in iter_jsonl_records(args.input):
                text = record.get(args.text_field)
                if not isinstance(text, str):
                    raise DatasetError(
                        f"{args.input}:{line_number}: no text field {args.text_field!r} (fields: {excerpt(sorted(record))}); "
                        f"name it with --text-field."
                    )
                snippet = first_n_words(text, args.words)
                counts["cut"] += snippet != text
                out.write(json.dumps({**record, args.text_field: snippet}, ensure_ascii=False) + "\n")
                counts["written"] += 1

    args.output.parent.mkdir(parents=True, exist_ok=True)
    try:
        write_file(args.output, write, force=args.force, inputs=[args.input])
    except (FileNotFoundError, DatasetError, OutputRefused) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(
        f"wrote {counts['written']} records to {args.output} ({counts['cut']} cut to {args.words} jieba words)",
        file=sys.stderr,
    )
    return 0
