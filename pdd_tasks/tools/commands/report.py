"""``lm-eval-pdd report OUTPUT_PATH... --out DIR [--force]``: an HTML + Markdown report, plots and
leaderboards of runs (:func:`pdd_tasks.tools.report.write.write_report`; docs/report.md).

Prints the path of ``report.html`` on stdout (how many files it wrote, on stderr).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "output_paths",
        type=Path,
        nargs="+",
        metavar="OUTPUT_PATH",
        help="lm_eval --output_path folders or results files",
    )
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder to write the report to")
    parser.add_argument("--force", action="store_true", help="overwrite the report files already in --out")


def run(args: argparse.Namespace) -> int:
    from pdd_tasks.tools.outputs import OutputNotWritten, OutputRefused
    from pdd_tasks.tools.report.write import write_report
    from pdd_tasks.tools.results.runs import ResultsError

    try:
        written = write_report(args.output_paths, args.out, force=args.force)
    except (ResultsError, OutputRefused, OutputNotWritten) as error:
        print(f"lm-eval-pdd report: {error}", file=sys.stderr)
        return 1
    print(f"lm-eval-pdd report: wrote {len(written)} files to {args.out}", file=sys.stderr)
    print(args.out / "report.html")
    return 0
