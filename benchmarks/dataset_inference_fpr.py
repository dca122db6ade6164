"""False-positive rate and power of the U tests and of dataset inference, over resampled sets.

Input: the samples log of a labelled pdd run (``pdd_controlled`` or labelled ``pdd_custom`` with
``--log_samples``): every text's score with every method and its label (1 = member). For each seed,

- **members vs non-members**: suspect = k random members, reference = k random non-members;
- **non-members vs non-members** (a true negative): two disjoint random sets of k non-members;

and each set pair is tested as ``pdd_custom`` tests it: per method, the one-sided Mann-Whitney U test
(:func:`pdd_metrics.suspect_vs_reference_test`), and dataset inference over all methods' scores
(:func:`pdd_metrics.dataset_inference_test`, seeded by the seed). The table gives the share of
seeds with p < 0.05: power in the first column, false-positive rate in the second.

    python benchmarks/dataset_inference_fpr.py <output_path>/<model>/samples_pdd_controlled_*.jsonl --size 40 --seeds 200

Without a samples log, ``--synthetic SHIFT`` draws the scores instead: 6 correlated "methods" per
text (a shared latent N(0, 1), shifted by SHIFT for members, plus independent N(0, 0.5) noise per
method), 200 members and 200 non-members.

    python benchmarks/dataset_inference_fpr.py --synthetic 0.5 --size 40 --seeds 200
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from pdd_metrics import dataset_inference_test, suspect_vs_reference_test
from pdd_tasks.registry import DEFAULT_METHODS


def read_scores(path: Path) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Methods, scores (n_texts, n_methods) and labels of a samples log."""
    samples = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    methods = [method for method in DEFAULT_METHODS if f"{method}_auc" in samples[0]]
    scores = np.array([[sample[f"{method}_auc"][0] for method in methods] for sample in samples])
    labels = np.array([int(sample[f"{methods[0]}_auc"][1]) for sample in samples])
    return methods, scores, labels


def synthetic_scores(shift: float, n: int = 200, methods: int = 6, seed: int = 12345):
    """Scores of ``n`` members and ``n`` non-members from correlated synthetic methods."""
    rng = np.random.default_rng(seed)
    labels = np.repeat([1, 0], n)
    latent = rng.normal(size=2 * n) + shift * labels
    scores = latent[:, None] + rng.normal(0, 0.5, size=(2 * n, methods))
    return [f"synthetic {index + 1}" for index in range(methods)], scores, labels


def rejection_rates(scores, labels, size: int, seeds: int, alpha: float = 0.05) -> dict[str, tuple[float, float]]:
    """``name -> (share rejected, members vs non-members; share rejected, non-members vs non-members)``."""
    members, non_members = np.flatnonzero(labels == 1), np.flatnonzero(labels == 0)
    if len(members) < size or len(non_members) < 2 * size:
        raise SystemExit(
            f"--size {size} needs {size} members and {2 * size} non-members; "
            f"the log has {len(members)} and {len(non_members)}."
        )
    rejected: dict[str, list[list[bool]]] = {}
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        others = rng.permutation(non_members)
        pairs = [
            (rng.choice(members, size, replace=False), others[:size]),  # members vs non-members
            (others[size : 2 * size], others[:size]),  # non-members vs non-members
        ]
        for column, (suspect, reference) in enumerate(pairs):
            u_values = []
            for index in range(scores.shape[1]):
                p = suspect_vs_reference_test(scores[suspect, index], scores[reference, index]).p_value
                rejected.setdefault(f"U test, method {index}", [[], []])[column].append(p < alpha)
                u_values.append(p)
            rejected.setdefault("any U test (uncorrected)", [[], []])[column].append(min(u_values) < alpha)
            rejected.setdefault("any U test (Bonferroni)", [[], []])[column].append(
                min(u_values) < alpha / len(u_values)
            )
            p = dataset_inference_test(scores[suspect], scores[reference], seed=seed).p_value
            rejected.setdefault("dataset inference", [[], []])[column].append(p < alpha)
    return {name: (float(np.mean(a)), float(np.mean(b))) for name, (a, b) in rejected.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("samples", type=Path, nargs="?", help="samples_<task>_*.jsonl of a labelled pdd run")
    parser.add_argument("--synthetic", type=float, default=None, metavar="SHIFT", help="synthetic scores instead")
    parser.add_argument("--size", type=int, default=40, help="texts per set (default 40)")
    parser.add_argument("--seeds", type=int, default=200, help="resampled set pairs (default 200)")
    args = parser.parse_args()
    if args.synthetic is not None:
        methods, scores, labels = synthetic_scores(args.synthetic)
        source = f"synthetic scores (member shift {args.synthetic})"
    elif args.samples is not None:
        methods, scores, labels = read_scores(args.samples)
        source = args.samples.name
    else:
        parser.error("give a samples log or --synthetic SHIFT")
    rates = rejection_rates(scores, labels, args.size, args.seeds)
    print(
        f"{source}: {int(labels.sum())} members, {int((labels == 0).sum())} non-members; "
        f"{args.size} texts per set, {args.seeds} seeds, share of seeds with p < 0.05",
        file=sys.stderr,
    )
    print("| test | members vs non-members (power) | non-members vs non-members (FPR) |")
    print("|---|---:|---:|")
    for name, (power, fpr) in rates.items():
        if name.startswith("U test, method "):
            name = f"U test, {methods[int(name.rsplit(' ', 1)[1])]}"
        print(f"| {name} | {power:.3f} | {fpr:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
