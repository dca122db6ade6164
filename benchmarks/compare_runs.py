"""Per-document differences of every method's score between two ``lm_eval --log_samples`` runs.

    python benchmarks/compare_runs.py <output_path A> <output_path B> [--task pdd_wikimia_32]
    python benchmarks/compare_runs.py <A> <B> --task pdd_contamination --items

``--items`` compares a dataset-level test's per-document items instead (every number of every metric's
item: CoDeC's Delta, a shard's canonical and permuted log-likelihoods), per metric, matched by the
document's test, source task and first request, so a change of document order is no difference.

Used to check that a change leaves the scores alone (the layout refactor: before and after, the
largest difference per method) and how far a precision change moves them (float32 vs bfloat16:
Spearman's rank correlation of the per-document scores, and each run's AUC). Methods are the
``*_auc`` metrics both runs have, except the blind baseline (its items are texts, not scores).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from pdd_metrics import roc_auc
from pdd_tasks.loading.files import read_jsonl


def scores(out: Path, task: str) -> tuple[dict[str, dict[int, float]], dict[int, int]]:
    """Per method, doc_id -> score; and doc_id -> label, from a run's ``--log_samples`` file."""
    samples_file = sorted(Path(out).rglob(f"samples_{task}_*.jsonl"))[-1]
    samples = list(read_jsonl(samples_file))
    methods = [key[: -len("_auc")] for key in samples[0] if key.endswith("_auc") and key != "blind_auc"]
    labels = {s["doc_id"]: int(s[f"{methods[0]}_auc"][1]) for s in samples}
    return {m: {s["doc_id"]: float(s[f"{m}_auc"][0]) for s in samples} for m in methods}, labels


def _numbers(value) -> list[float]:
    if isinstance(value, (list, tuple)):
        return [number for part in value for number in _numbers(part)]
    return [float(value)]


def items(out: Path, task: str) -> dict[str, dict[tuple, list[float]]]:
    """Per metric, (test, source task, first request's text) -> every number of the item."""
    samples_file = sorted(Path(out).rglob(f"samples_{task}_*.jsonl"))[-1]
    found: dict[str, dict[tuple, list[float]]] = {}
    for sample in read_jsonl(samples_file):
        doc = sample["doc"]
        arguments = sample["arguments"]  # {"gen_args_0": {"arg_0": context, "arg_1": continuation}, ...}
        first = arguments["gen_args_0"] if isinstance(arguments, dict) else arguments[0]
        key = (doc.get("test"), doc.get("source_task"), json.dumps(first, sort_keys=True))
        for metric in sample["metrics"]:
            found.setdefault(metric, {})[key] = _numbers(sample[metric])
    return found


def compare_items(a: Path, b: Path, task: str) -> None:
    first, second = items(a, task), items(b, task)
    print("| metric | documents | numbers | largest abs difference |")
    print("|---|---|---|---|")
    for metric in [m for m in first if m in second]:
        if sorted(first[metric]) != sorted(second[metric]):
            raise SystemExit(f"{metric}: the runs have different documents")
        x = np.array([v for key in sorted(first[metric]) for v in first[metric][key]])
        y = np.array([v for key in sorted(first[metric]) for v in second[metric][key]])
        print(f"| {metric} | {len(first[metric])} | {x.size} | {np.abs(x - y).max():.3g} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument("--task", default="pdd_wikimia_32")
    parser.add_argument("--items", action="store_true", help="compare a dataset-level test's per-document items")
    args = parser.parse_args()
    if args.items:
        compare_items(args.a, args.b, args.task)
        return
    (a, labels), (b, _) = scores(args.a, args.task), scores(args.b, args.task)
    print("| method | documents | largest abs difference | Spearman | AUC (A) | AUC (B) | AUC change |")
    print("|---|---|---|---|---|---|---|")
    for method in [m for m in a if m in b]:
        docs = sorted(a[method])
        if sorted(b[method]) != docs:
            raise SystemExit(f"{method}: the runs scored different documents")
        x, y = np.array([a[method][d] for d in docs]), np.array([b[method][d] for d in docs])
        y_true = np.array([labels[d] for d in docs])
        auc_a, auc_b = roc_auc(x, y_true), roc_auc(y, y_true)
        rho = spearmanr(x, y).statistic
        print(
            f"| {method} | {len(docs)} | {np.abs(x - y).max():.3g} | {rho:.5f} | {auc_a:.4f} | {auc_b:.4f} | "
            f"{auc_b - auc_a:+.4f} |"
        )


if __name__ == "__main__":
    main()
