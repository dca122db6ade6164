"""Per-document differences of every method's score between two ``lm_eval --log_samples`` runs.

    python benchmarks/compare_runs.py <output_path A> <output_path B> [--task pdd_wikimia_32]

Used to check that a change leaves the scores alone (the layout refactor: before and after, the
largest difference per method). Methods are the ``*_auc`` metrics both runs have, except the blind
baseline (its items are texts, not scores).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pdd_tasks.loading.files import read_jsonl


def scores(out: Path, task: str) -> dict[str, dict[int, float]]:
    samples_file = sorted(Path(out).rglob(f"samples_{task}_*.jsonl"))[-1]
    samples = list(read_jsonl(samples_file))
    methods = [key[: -len("_auc")] for key in samples[0] if key.endswith("_auc") and key != "blind_auc"]
    return {m: {s["doc_id"]: float(s[f"{m}_auc"][0]) for s in samples} for m in methods}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument("--task", default="pdd_wikimia_32")
    args = parser.parse_args()
    a, b = scores(args.a, args.task), scores(args.b, args.task)
    print("| method | documents | largest abs difference |")
    print("|---|---|---|")
    for method in [m for m in a if m in b]:
        docs = sorted(a[method])
        if sorted(b[method]) != docs:
            raise SystemExit(f"{method}: the runs scored different documents")
        diff = max(abs(a[method][d] - b[method][d]) for d in docs)
        print(f"| {method} | {len(docs)} | {diff:.3g} |")


if __name__ == "__main__":
    main()
