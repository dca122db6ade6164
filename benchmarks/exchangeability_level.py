"""The exchangeability test's level on untouched files, at the controls' settings and at its defaults (issue 33).

Under the null hypothesis (the model has not seen the file in its order) and with a file whose order
is itself random, the canonical order of each shard is one more draw from the orders the test
permutes: any scored order could have been the canonical one. So one ``lm_eval`` run of
``pdd_exchangeability`` per file, scoring ``--orders`` random orders of each of ``--shards`` shards
(``--log_samples``: every order's log-likelihood), gives the test's null distribution by resampling
(:func:`resampled_level`): per replicate and shard, one scored order drawn as the canonical one and
``P`` others as its permutations, for each ``(shards, P)`` of ``--cells``, and Oren et al.'s t-test
(:func:`pdd_metrics.exchangeability.sharded_comparison_test`) on them. The share of replicates with
p <= alpha is the level at that setting: 0.05 is a test that holds it; more is a t-test whose
approximation fails there (the differences of few shards, each against the mean of few orders, are
far from normal).

Files: ``--files`` random subsets (seeded) of ``--examples`` texts of the shipped WikiMIA-32 split
(members and non-members alike: the file's order is drawn here, so no model has seen it), in a random
order. Model: the default model unless ``--model``.

    python benchmarks/exchangeability_level.py --workdir /tmp/xl --files 3 --examples 200 --shards 50 --orders 30 \\
        --cells 8x2 8x10 50x1 50x2 50x4 50x10 50x20 --replicates 4000 --force --json benchmarks/results/exchangeability_level.json \\
        --package-data pdd_tasks/data/contamination_controls.json

``--reuse`` resamples the runs already in ``--workdir`` (other ``--cells`` or ``--replicates``) without
running the model again.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from _common import add_json_option, lm_eval_run, machine, recorded_command, refuse_existing_json

from pdd_metrics.exchangeability import sharded_comparison_test
from pdd_tasks.loading.benchmark_data import PACKAGED_DATA
from pdd_tasks.loading.files import read_json, read_jsonl


def untouched_file(path: Path, examples: int, seed: int) -> Path:
    """``examples`` texts of the shipped WikiMIA-32 split, drawn and ordered at random with ``seed``."""
    texts = [row["input"] for row in read_jsonl(PACKAGED_DATA / "wikimia" / "WikiMIA_length32.jsonl")]
    chosen = np.random.default_rng(seed).choice(len(texts), examples, replace=False)
    path.write_text("".join(json.dumps({"text": texts[i]}) + "\n" for i in chosen))
    return path


def scored_orders(out: Path) -> np.ndarray:
    """Shape (shards, orders): the log-likelihood of each scored order of each shard (the canonical first),
    from the run's ``--log_samples`` file."""
    samples = sorted(out.rglob("samples_pdd_exchangeability_*.jsonl"))[-1]
    rows = sorted(read_jsonl(samples), key=lambda row: row["doc_id"])
    return np.array([[float(answer[0]) for answer in row["filtered_resps"]] for row in rows])


def resampled_level(orders: np.ndarray, shards: int, permutations: int, replicates: int, seed: int) -> np.ndarray:
    """The test's p-values over ``replicates`` draws of the null: ``shards`` of the scored shards, and in
    each one scored order as the canonical one and ``permutations`` others as its permutations."""
    rng = np.random.default_rng(seed)
    total_shards, total_orders = orders.shape
    p_values = np.empty(replicates)
    for replicate in range(replicates):
        chosen = rng.choice(total_shards, shards, replace=False)
        picks = np.array([rng.choice(total_orders, permutations + 1, replace=False) for _ in chosen])
        canonical = orders[chosen, picks[:, 0]]
        permuted = np.take_along_axis(orders[chosen], picks[:, 1:], axis=1)
        p_values[replicate] = sharded_comparison_test(canonical, permuted).p_value
    return p_values


def cell(value: str) -> tuple[int, int]:
    shards, permutations = value.lower().split("x")
    return int(shards), int(permutations)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path("exchangeability_level"))
    parser.add_argument("--model", default=None, help="default: the default model")
    parser.add_argument("--files", type=int, default=3)
    parser.add_argument("--examples", type=int, default=200)
    parser.add_argument("--shards", type=int, default=50, help="shards scored per file")
    parser.add_argument("--orders", type=int, default=40, help="random orders scored per shard (besides the file's)")
    parser.add_argument(
        "--cells", type=cell, nargs="+", default=[(8, 2), (8, 10), (50, 1), (50, 2), (50, 4), (50, 10), (50, 20)]
    )
    parser.add_argument("--replicates", type=int, default=4000)
    parser.add_argument("--alpha", type=float, nargs="+", default=[0.05, 0.01])
    parser.add_argument("--batch-size", type=int, default=8)
    add_json_option(parser)
    parser.add_argument("--package-data", type=Path, help="add the summary to this contamination_controls.json")
    parser.add_argument(
        "--reuse", action="store_true", help="resample the runs already in --workdir (other --cells), no model run"
    )
    args = parser.parse_args()
    refuse_existing_json(args)
    if args.model is None:
        from pdd_tasks.tools.default_model import ensure_default_model

        args.model = str(ensure_default_model())
    for shards, permutations in args.cells:
        if shards > args.shards or permutations + 1 > args.orders + 1:
            parser.error(f"cell {shards}x{permutations} needs at most --shards shards and --orders orders")
    args.workdir.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    files = []
    for seed in range(args.files):
        data = untouched_file(args.workdir / f"untouched_{seed}.jsonl", args.examples, seed)  # the same rows again
        out = args.workdir / f"run_{seed}"
        metadata = {"data_files": str(data), "num_shards": args.shards, "permutations": args.orders}
        if args.reuse and list(out.rglob("results_*.json")):
            seconds, results = None, read_json(sorted(out.rglob("results_*.json"))[-1])
        else:
            seconds, results = lm_eval_run(args.model, "pdd_exchangeability", out, metadata=metadata, batch_size=args.batch_size, log_samples=True)  # fmt: skip
        orders = scored_orders(out)
        levels = {}
        for shards, permutations in args.cells:
            p_values = resampled_level(orders, shards, permutations, args.replicates, seed)
            levels[f"{shards}x{permutations}"] = {f"{a:g}": float(np.mean(p_values <= a)) for a in args.alpha}
        files.append(
            {
                "seed": seed,
                "file_order_pvalue": results["results"]["pdd_exchangeability"]["exchangeability_pvalue,none"],
                "seconds": None if seconds is None else round(seconds, 1),
                "levels": levels,
            }
        )
        print(f"file {seed}: {files[-1]}", file=sys.stderr)
    found = {
        "what": "the exchangeability test's level on untouched files, by resampling scored orders (issue 33)",
        "command": recorded_command("exchangeability_level.py", sys.argv[1:]),
        "model": str(args.model),
        "machine": machine(),
        "sizes": {"files": args.files, "examples": args.examples, "shards": args.shards, "orders": args.orders},
        "replicates": args.replicates,
        "minutes": round((time.perf_counter() - began) / 60, 1),
        "files": files,
    }
    print(markdown(found, args.alpha))
    if args.json:
        args.json.write_text(json.dumps(found, indent=1) + "\n")
    if args.package_data:
        package = json.loads(args.package_data.read_text())
        package["exchangeability_level"] = package_summary(found, min(args.alpha, key=lambda a: abs(a - 0.05)))
        args.package_data.write_text(json.dumps(package, indent=1) + "\n")
    return 0


def package_summary(found: dict, alpha: float) -> dict:
    """What the verdict's lines cite (pdd_tasks/data/contamination_controls.json): per shards x
    permutations, each file's rejection rate at ``alpha``."""
    return {
        "command": found["command"],
        "model": found["model"].rsplit("/", 1)[-1],
        "files": len(found["files"]),
        "alpha": alpha,
        "rejects_at_alpha": {
            cell: [f["levels"][cell][f"{alpha:g}"] for f in found["files"]] for cell in found["files"][0]["levels"]
        },
    }


def markdown(found: dict, alphas: list[float]) -> str:
    """One row per (shards x permutations): the rejection rate at each alpha on each file."""
    cells = list(found["files"][0]["levels"])
    header = "| shards x permutations | " + " | ".join(f"rejects at p <= {a:g} (per file)" for a in alphas) + " |"
    lines = [header, "|---|" + "---|" * len(alphas)]
    for name in cells:
        rates = [", ".join(f"{f['levels'][name][f'{a:g}']:.3f}" for f in found["files"]) for a in alphas]
        lines.append(f"| {name} | " + " | ".join(rates) + " |")
    pvalues = ", ".join(f"{f['file_order_pvalue']:.3g}" for f in found["files"])
    return "\n".join(lines) + f"\n\nThe files' own orders: p = {pvalues} ({found['sizes']['shards']} shards x {found['sizes']['orders']} permutations)."  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
