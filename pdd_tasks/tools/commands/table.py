"""``lm-eval-pdd table OUTPUT_PATH``: the per-method table of every pdd run in an lm_eval output folder
(:func:`pdd_tasks.tools.report.tables.print_method_table`), printed as Markdown."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "results", type=Path, help="lm_eval --output_path directory (every run in it is shown) or a results_*.json file"
    )


def run(args: argparse.Namespace) -> int:
    from pdd_tasks.tools.report.tables import print_method_table
    from pdd_tasks.tools.results.runs import ResultsError

    try:
        print(print_method_table(args.results))
    except ResultsError as error:
        print(f"lm-eval-pdd table: {error}", file=sys.stderr)
        return 1
    return 0
