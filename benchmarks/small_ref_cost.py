"""Cost of Small-Ref's reference pass, and a self-check, on the default model.

    python benchmarks/small_ref_cost.py OUT_DIR [--limit 100] [--task pdd_wikimia_32] [--batch-size 8]

Runs the real ``lm_eval`` command line three times on the first ``--limit`` texts of ``--task``,
target = the default model (hf, CPU, float32), in a fresh ``LM_EVAL_PDD_HOME`` under OUT_DIR:
(1) without Small-Ref; (2) with ``small_ref_model`` = the default model itself (an empty cache:
the reference model loads and scores every text); (3) the same again (every text from the cache).
Prints each run's wall time, the reference pass's own time (``small_ref_used.reference_pass_seconds``
of the results JSON) per 100 texts, and the largest |Small-Ref score|: with the target as its own
reference it must be ~0 (the reference pass scores each text exactly as the target's capture).
The load (``os.getloadavg``) is printed before and after: the machine is shared.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from _common import cpu_name, lm_eval_run

from pdd_tasks.loading.files import read_jsonl
from pdd_tasks.tools.default_model import ensure_default_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--task", default="pdd_wikimia_32")
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args()
    model = ensure_default_model()
    home = args.out / "home"
    print(f"machine: {cpu_name()}, {os.cpu_count()} cores; load before: {os.getloadavg()}")
    runs = [
        ("target only", {}),
        ("with Small-Ref (empty cache)", {"small_ref_model": str(model), "small_ref_batch_size": args.batch_size}),
        ("with Small-Ref (cached)", {"small_ref_model": str(model), "small_ref_batch_size": args.batch_size}),
    ]
    print(
        "| run | wall s | reference pass s | reference pass s / 100 texts | texts scored / from cache | max abs Small-Ref |"
    )
    print("|---|---|---|---|---|---|")
    for index, (name, metadata) in enumerate(runs):
        out = args.out / f"run{index}"
        wall, results = lm_eval_run(
            model,
            args.task,
            out,
            metadata=metadata,
            limit=args.limit,
            batch_size=args.batch_size,
            log_samples=True,
            env={"LM_EVAL_PDD_HOME": str(home)},
        )
        if not metadata:
            print(f"| {name} | {wall:.1f} | - | - | - | - |")
            continue
        used = results["configs"][args.task]["metadata"]["small_ref_used"]
        samples = read_jsonl(sorted(out.rglob(f"samples_{args.task}_*.jsonl"))[-1])
        worst = max(abs(sample["small_ref_auc"][0]) for sample in samples)
        seconds = used["reference_pass_seconds"]
        print(
            f"| {name} | {wall:.1f} | {seconds:.1f} | {100 * seconds / len(samples):.1f} | "
            f"{used['texts_scored']} / {used['texts_from_cache']} | {worst:.1e} |"
        )
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
