"""``lm-eval-pdd decisions OUTPUT_PATH``: per-text member/non-member decisions of an unlabelled
``pdd_custom`` run.

Reads the run's results JSON and samples log (:mod:`pdd_tasks.tools.results.decisions`: thresholds
calibrated on the reference texts, PTDI's conformal p-values), prints the per-method summary and
writes one record per suspect text to ``--output`` (:func:`pdd_tasks.tools.outputs.write_file`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pdd_tasks.tools.outputs import OutputNotWritten, write_file


if TYPE_CHECKING:
    from pdd_tasks.tools.results.decisions import MethodDecision


def summary_table(summary: list[MethodDecision]) -> str:
    """Markdown table: per method tau, FPR on the reference set, flagged share, AUC, p-value, and the
    number PTDI identifies at the target FDR."""
    fdr = summary[0].target_fdr
    lines = [
        "| method | threshold tau | reference FPR | flagged as member | suspect-vs-reference AUC | one-sided p "
        f"| identified at FDR {fdr:g} (PTDI) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in summary:
        lines.append(
            f"| {row.method} | {row.threshold:.6g} | {row.reference_fpr:.3f} | {row.flagged}/{row.suspects} "
            f"({row.flagged / row.suspects:.1%}) | {row.suspect_auc:.3f} | {row.p_value:.3g} "
            f"| {row.identified}/{row.suspects} |"
        )
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", type=Path, help="lm_eval --output_path directory or a results_*.json file")
    parser.add_argument("--task", default="pdd_custom", help="the unlabelled task's name (default pdd_custom)")
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        metavar="FILE.jsonl",
        help="per-text decisions (default: decisions_<task>.jsonl next to the results file)",
    )
    parser.add_argument("--force", action="store_true", help="replace the --output file if it exists")


def run(args: argparse.Namespace) -> int:
    from pdd_tasks.tools.results.decisions import decide_newest

    def write_records(path: Path) -> None:
        with open(path, "w", encoding="utf-8") as handle:
            for record in records:
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")

    results = Path(args.results)
    inputs = [results, *(sorted(results.rglob("*.json*")) if results.is_dir() else [])]
    try:
        results_file, (summary, records, rate) = decide_newest(args.results, args.task)
        output = args.output or results_file.parent / f"decisions_{args.task}.jsonl"
        write_file(output, write_records, force=args.force, inputs=inputs)
    except (FileNotFoundError, ValueError, OutputNotWritten) as exc:
        print(f"lm-eval-pdd decisions: {exc}", file=sys.stderr)
        return 1
    print(
        f"Thresholds calibrated for FPR <= {rate} on the reference texts (member iff score > tau); PTDI: conformal "
        f"p-values against the reference texts, Benjamini-Hochberg at FDR {summary[0].target_fdr:g}:"
    )
    print(summary_table(summary))
    print(f"per-text decisions: {output}", file=sys.stderr)
    return 0
