"""Positive and negative controls of ``pdd_exchangeability`` on this machine (the table in docs/controls-ordered-earlier.md).

For each number of epochs, ``lm-eval-pdd make-ordered`` fine-tunes the base model (default: the
default model, SmolLM2-135M-Instruct) on the first N examples of a file in their canonical order;
then ``pdd_exchangeability`` runs through the real ``lm_eval`` command on

- the tuned model with the canonical file (positive control: should be detected),
- the tuned model with a shuffled copy of the file (negative control: an order the model never saw),
- the untuned base model with the canonical file (negative control: no contamination),

and the script prints one Markdown row per run: p-value, t, mean difference, wall time.

    python benchmarks/exchangeability_controls.py --examples 60 --epochs 1 3 --shards 10 --permutations 10
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from _common import cpu_name, lm_eval_run


def run_task(model: Path | str, data: Path, out: Path, shards: int, permutations: int, batch_size: int) -> tuple:
    metadata = {"data_files": str(data), "num_shards": shards, "permutations": permutations}
    seconds, results = lm_eval_run(model, "pdd_exchangeability", out, metadata=metadata, batch_size=batch_size)
    return results["results"]["pdd_exchangeability"], seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path("exchangeability_controls"))
    parser.add_argument("--model", default=None, help="base model (default: the default model)")
    parser.add_argument("--examples", type=int, default=60)
    parser.add_argument("--epochs", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--shards", type=int, default=10)
    parser.add_argument("--permutations", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--skip-base", action="store_true", help="do not run the untuned model")
    parser.add_argument(
        "--base-only", action="store_true", help="only the untuned model, on the file of the first --epochs run"
    )
    args = parser.parse_args()

    from pdd_tasks.tools.builders.fine_tuning import TuningSettings
    from pdd_tasks.tools.builders.ordered import make_ordered
    from pdd_tasks.tools.default_model import ensure_default_model

    base = args.model or ensure_default_model()
    args.workdir.mkdir(parents=True, exist_ok=True)
    print(f"machine: {cpu_name()}, {os.cpu_count()} cores; load before: {os.getloadavg()}", file=sys.stderr)
    header = "| model | file | examples | epochs | shards x perms | p-value | t | mean diff (nats) | wall (s) |"
    rows = [header, "|---|---|---:|---:|---|---:|---:|---:|---:|"]

    def row(model_name, file_name, epochs, results, seconds):
        rows.append(
            f"| {model_name} | {file_name} | {args.examples} | {epochs} | {args.shards} x {args.permutations} | "
            f"{results['exchangeability_pvalue,none']:.2g} | {results['exchangeability_t,none']:.2f} | "
            f"{results['exchangeability_mean_difference,none']:.2f} | {seconds:.0f} |"
        )
        print(rows[-1], file=sys.stderr, flush=True)

    canonical = None
    for epochs in [] if args.base_only else args.epochs:
        directory = args.workdir / f"ordered-n{args.examples}-e{epochs}"
        if not directory.exists():
            settings = TuningSettings(epochs=epochs, learning_rate=1e-4, batch_size=4, max_tokens=1024)
            began = time.perf_counter()
            make_ordered(directory, base, examples=args.examples, settings=settings, progress=False)
            print(f"tuned {epochs} epochs in {time.perf_counter() - began:.0f} s", file=sys.stderr)
        canonical = directory / "canonical.jsonl"
        for file_name in ("canonical.jsonl", "shuffled.jsonl"):
            out = args.workdir / f"run-e{epochs}-{file_name.split('.')[0]}"
            results, seconds = run_task(
                directory / "model", directory / file_name, out, args.shards, args.permutations, args.batch_size
            )
            row("tuned", file_name, epochs, results, seconds)
    if args.base_only:
        canonical = args.workdir / f"ordered-n{args.examples}-e{args.epochs[0]}" / "canonical.jsonl"
    if not args.skip_base and canonical is not None:
        results, seconds = run_task(
            base, canonical, args.workdir / "run-base", args.shards, args.permutations, args.batch_size
        )
        row("untuned", "canonical.jsonl", 0, results, seconds)
    print(f"load after: {os.getloadavg()}", file=sys.stderr)
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
