"""The group-level tests' level and power, by simulation (issue 42 item 2).

A group's verdict is read from its leaves' results (:mod:`pdd_metrics.combine`): CoDeC pooled over the
leaves (summed drops and examples, the binomial test against the calibrated null), the
exchangeability p-values combined (Fisher's method; Stouffer's and the Cauchy combination beside it
for comparison). This script draws the leaves' results and counts how often each group test rejects:

- **CoDeC**: each leaf's drops ~ Binomial(examples, rate), the rates those measured on the default
  model's controls (``pdd_tasks/data/contamination_controls.json``; 48-row ARC-shaped files, 12
  steps, example by example): an untouched file 0.02, a file tuned on 0.979 (median of 0.958-0.979),
  an unseen file of the kind tuned on 0.85 (0.812-0.854), and the null's boundary 0.97
  (:data:`pdd_metrics.verdict.CODEC_NULL_SCORE`: the most a rule holding its level may reject there is
  alpha).
- **exchangeability**: each leaf's p-value is Oren et al.'s t-test
  (:func:`pdd_metrics.exchangeability.sharded_comparison_test`) on ``--shards`` shards with one
  permuted order each (``pdd_contamination``'s default), the shards' log-likelihoods drawn
  exchangeable (Student t with 3 degrees of freedom: heavy tails, where a t-test's approximation is
  worst), the canonical order of a seen leaf raised by ``--shift`` (in units of the draws' scale:
  an effect chosen to give one leaf some power alone, not a measured one).

Each scenario: the group's test at level ``alpha`` alone (its level and power), and as the verdict
applies it, Holm over the table of the leaves' and the group's p-values of that test ("group row",
and "any row": some leaf or the group rejects; "leaves only": some leaf rejects in a table without the
group row). Every number is simulated; no model runs.

    python benchmarks/group_level.py --json benchmarks/results/group_level.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
from _common import add_json_option, recorded_command, refuse_existing_json, shard_count
from scipy.stats import cauchy, norm

from pdd_metrics.combine import fisher_combined_pvalue, pooled_drops
from pdd_metrics.exchangeability import sharded_comparison_test
from pdd_metrics.multiple_testing import holm_adjusted
from pdd_metrics.verdict import ALPHA, CODEC_NULL_SCORE, codec_calibrated_pvalue, decide_table
from pdd_tasks.tools.arg_types import positive_int, random_seed


#: CoDeC drop rates measured on the default model's controls (module docstring).
UNTOUCHED, TUNED, UNSEEN_OF_KIND = 0.02, 0.979, 0.85

#: Group shapes: (name, leaves, examples per leaf).
SHAPES = (("3 ARC-shaped files of 48", 3, 48), ("BBH-like: 24 leaves of 250", 24, 250))


def stouffer(p_values) -> float:
    """Stouffer's combination: 1 - Phi(sum Phi^-1(1 - p_i) / sqrt(k)), p clipped to [1e-300, 1 - 1e-16]."""
    p = np.clip(np.asarray(p_values, dtype=float), 1e-300, 1 - 1e-16)
    return float(norm.sf(norm.isf(p).sum() / math.sqrt(p.size)))


def cauchy_combination(p_values) -> float:
    """Liu and Xie's (2020) Cauchy combination, equal weights, p clipped to [1e-300, 1 - 1e-16]."""
    p = np.clip(np.asarray(p_values, dtype=float), 1e-300, 1 - 1e-16)
    return float(cauchy.sf(np.mean(np.tan((0.5 - p) * np.pi))))


COMBINATIONS = {"fisher": fisher_combined_pvalue, "stouffer": stouffer, "cauchy": cauchy_combination}


def holm_rejects(p_values: list[float], alpha: float) -> list[bool]:
    return [bool(p <= alpha) for p in holm_adjusted(p_values)]


def codec_scenarios(rng, replicates: int, alpha: float) -> list[dict]:
    """CoDeC pooled: per group shape and scenario, the rejection rates."""
    out = []
    for shape, leaves, examples in SHAPES:
        scenarios = {
            "null: every leaf untouched (0.02)": [UNTOUCHED] * leaves,
            "null: every leaf an unseen file of the kind (0.85)": [UNSEEN_OF_KIND] * leaves,
            f"null boundary: every leaf at {CODEC_NULL_SCORE}": [CODEC_NULL_SCORE] * leaves,
            "one leaf tuned (0.979), the others of the kind (0.85)": [TUNED] + [UNSEEN_OF_KIND] * (leaves - 1),
            "one leaf tuned (0.979), the others untouched": [TUNED] + [UNTOUCHED] * (leaves - 1),
            "every leaf tuned (0.979)": [TUNED] * leaves,
        }
        for name, rates in scenarios.items():
            alone = group_row = any_row = leaves_only = 0
            for _ in range(replicates):
                drops = [int(rng.binomial(examples, rate)) for rate in rates]
                leaf_p = [codec_calibrated_pvalue(d, examples) for d in drops]
                group_p = codec_calibrated_pvalue(*pooled_drops((d, examples) for d in drops))
                table = holm_rejects(leaf_p + [group_p], alpha)
                alone += group_p <= alpha
                group_row += table[-1]
                any_row += any(table)
                leaves_only += any(holm_rejects(leaf_p, alpha))
            out.append(
                {
                    "test": "codec (pooled)",
                    "group": shape,
                    "scenario": name,
                    "group_alone": alone / replicates,
                    "group_row": group_row / replicates,
                    "any_row": any_row / replicates,
                    "leaves_only": leaves_only / replicates,
                }
            )
    return out


def exchangeability_pvalue(rng, shards: int, shift: float) -> float:
    """One leaf's exchangeability p-value: ``shards`` shards, one permuted order each, log-likelihoods
    Student-t(3) draws, the canonical one raised by ``shift``."""
    canonical = rng.standard_t(3, size=shards) + shift
    permuted = rng.standard_t(3, size=(shards, 1))
    return sharded_comparison_test(canonical, permuted).p_value


def exchangeability_scenarios(rng, replicates: int, alpha: float, shards: int, shift: float) -> list[dict]:
    out = []
    for shape, leaves, _ in SHAPES:
        scenarios = {
            "null: no leaf seen in order": [0.0] * leaves,
            f"one leaf seen in order (shift {shift:g})": [shift] + [0.0] * (leaves - 1),
            f"every leaf seen in order (shift {shift:g})": [shift] * leaves,
        }
        for name, shifts in scenarios.items():
            counts = {f"{method}_{what}": 0 for method in COMBINATIONS for what in ("alone", "group_row", "any_row")}
            leaves_only = 0
            for _ in range(replicates):
                leaf_p = [exchangeability_pvalue(rng, shards, s) for s in shifts]
                leaves_only += any(holm_rejects(leaf_p, alpha))
                for method, combine in COMBINATIONS.items():
                    group_p = combine(leaf_p)
                    table = holm_rejects(leaf_p + [group_p], alpha)
                    counts[f"{method}_alone"] += group_p <= alpha
                    counts[f"{method}_group_row"] += table[-1]
                    counts[f"{method}_any_row"] += any(table)
            out.append(
                {
                    "test": "exchangeability (combined)",
                    "group": shape,
                    "scenario": name,
                    **{key: value / replicates for key, value in counts.items()},
                    "leaves_only": leaves_only / replicates,
                }
            )
    return out


def level(text: str) -> float:
    """``--alpha``: a number strictly between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a level between 0 and 1 (e.g. 0.05), got {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a level between 0 and 1 (e.g. 0.05), got {text}")
    return value


def finite(text: str) -> float:
    """``--shift``: a finite number."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def controls_document(path: Path) -> dict:
    """The ``--json`` of a ``contamination_controls.py --exposure`` run at ``path``; a missing file, or one
    that is not such a run, stops the script with a message naming it."""
    fix = "give the --json of a `contamination_controls.py --exposure` run"
    if not path.is_file():
        raise SystemExit(f"--controls {path}: no such file; {fix}.")
    try:
        document = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise SystemExit(f"--controls {path}: not JSON ({error}); {fix}.") from None
    runs = document.get("runs") if isinstance(document, dict) else None
    if not isinstance(runs, dict) or not any(isinstance(e, dict) and "exposure" in e for e in runs.values()):
        raise SystemExit(f"--controls {path}: no exposure controls' runs in it; {fix}.")
    return document


def group_of_files(name: str, files: list[dict]) -> dict:
    """A group of measured files (each ``{"codec_score", "codec_examples", "exchangeability_pvalue"}``, as
    ``contamination_controls.py`` records a file's tests) read as ``lm-eval-pdd table`` reads a run's group:
    each test's registry reading forms the group's values (:attr:`pdd_tasks.dataset_tests.core.Reading.group`)
    and evidence, and :func:`pdd_metrics.verdict.decide_table` decides the table of the files and their group."""
    from pdd_tasks.dataset_tests import DATASET_TESTS

    leaves = {f"file {i}": f for i, f in enumerate(files)}
    readings = {
        leaf: {
            "codec": ({"codec_score": f["codec_score"], "codec_examples": f["codec_examples"]}, None),
            "exchangeability": (
                {"exchangeability_pvalue": f["exchangeability_pvalue"], "exchangeability_shards": 0},
                None,
            ),
        }
        for leaf, f in leaves.items()
    }
    found = {
        leaf: {test: DATASET_TESTS[test].reading.evidence(*r) for test, r in tests.items()}
        for leaf, tests in readings.items()
    }
    found["group"] = {}
    values = {}
    for test in ("codec", "exchangeability"):
        own, reference = DATASET_TESTS[test].reading.group([readings[leaf][test] for leaf in leaves])
        found["group"][test] = DATASET_TESTS[test].reading.evidence(own, reference)
        values[test] = own
    decisions = decide_table(found)
    return {
        "group": name,
        "files": [{k: f[k] for k in ("codec_score", "codec_examples", "exchangeability_pvalue")} for f in files],
        "pooled_codec_score": round(values["codec"]["codec_score"], 4),
        "pooled_codec_examples": values["codec"]["codec_examples"],
        "group_p": {test: float(f"{p:.3g}") for test, p in decisions["group"].p_values.items()},
        "group_p_holm": {test: float(f"{p:.3g}") for test, p in decisions["group"].adjusted.items()},
        "group_verdict": decisions["group"].verdict,
        "file_verdicts": [decisions[leaf].verdict for leaf in leaves],
    }


def controls_groups(path: Path) -> list[dict]:
    """Groups of the files a ``contamination_controls.py --exposure`` run measured (its ``--json``):
    per tuning seed and epochs, on the tuned model, the file tuned on with the unseen files of its shape
    ("one of N tuned"), and the unseen files alone ("none of N tuned, the kind seen"); of a ``--tune-on all``
    run, the file with the other files tuned on beside it ("all N tuned"); a run of another kind in the same
    file (no ``exposure``) is left out."""
    document = controls_document(path)
    out = []
    for shape, entry in document["runs"].items():
        for run in entry.get("runs", []) if isinstance(entry, dict) and "exposure" in entry else []:
            for epochs, tuned in run["tuned"].items():
                unseen, also_tuned = tuned["unseen"], tuned.get("also_tuned", [])
                where = f"{shape}, seed {run['tuning_seed']}, {epochs} epoch(s), the tuned model"
                if also_tuned:
                    out.append(group_of_files(f"all {len(also_tuned) + 1} tuned ({where})", [tuned, *also_tuned]))
                if unseen:
                    out.append(group_of_files(f"one of {len(unseen) + 1} tuned ({where})", [tuned, *unseen]))
                if len(unseen) >= 2:
                    out.append(group_of_files(f"none of {len(unseen)} tuned, the kind seen ({where})", unseen))
    return out


def shipped_untouched_group() -> dict:
    """The untuned model on the shipped exposure controls' untouched ARC-shaped files (one per tuning seed,
    ``pdd_tasks/data/contamination_controls.json``): a group none of whose files was seen."""
    from pdd_tasks.loading.benchmark_data import PACKAGED_DATA

    controls = json.loads((PACKAGED_DATA / "contamination_controls.json").read_text())["exposure_controls"]
    untuned = controls["shapes"]["multiple_choice"]["untuned"]
    files = [
        {"codec_score": score, "codec_examples": 48, "exchangeability_pvalue": p}
        for score, p in zip(untuned["codec_scores"], untuned["exchangeability_pvalues"], strict=True)
    ]
    return group_of_files("none of 3 tuned, untouched (the untuned model, the shipped controls' files)", files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replicates", type=positive_int, default=4000, help="simulated groups per scenario (default 4000)")  # fmt: skip
    parser.add_argument("--shards", type=shard_count, default=8, help="shards per leaf, one permutation each (default 8)")  # fmt: skip
    parser.add_argument("--shift", type=finite, default=1.0, help="a seen leaf's canonical order's raise (default 1)")
    parser.add_argument("--alpha", type=level, default=ALPHA)
    parser.add_argument("--seed", type=random_seed, default=0)
    parser.add_argument(
        "--controls",
        type=Path,
        nargs="+",
        default=None,
        help="also read groups of the files `contamination_controls.py --exposure` runs measured (each its --json), "
        "and the shipped controls' untouched files",
    )
    parser.add_argument("--controls-only", action="store_true", help="no simulation: only --controls")
    add_json_option(parser)
    args = parser.parse_args(argv)
    if args.controls_only and args.controls is None:
        parser.error("--controls-only reads only the --controls runs: give --controls FILE ..., or leave it out")
    refuse_existing_json(args)
    for path in args.controls or []:  # before the simulation's minutes
        controls_document(path)
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    rows = []
    if not args.controls_only:
        rows = codec_scenarios(rng, args.replicates, args.alpha)
        rows += exchangeability_scenarios(rng, args.replicates, args.alpha, args.shards, args.shift)
    for row in rows:
        numbers = ", ".join(f"{k} {v:.3f}" for k, v in row.items() if isinstance(v, float))
        print(f"{row['test']} | {row['group']} | {row['scenario']}: {numbers}")
    measured = []
    if args.controls is not None:
        measured = [shipped_untouched_group(), *(group for path in args.controls for group in controls_groups(path))]
        for group in measured:
            print(json.dumps(group))
    result = {
        "what": "level and power of the group-level tests (pdd_metrics.combine), simulated (issue 42 item 2)",
        "command": recorded_command("group_level.py", sys.argv[1:] if argv is None else argv),
        "simulated": not args.controls_only,
        "measured_groups": measured,
        "replicates": args.replicates,
        "alpha": args.alpha,
        "seed": args.seed,
        "codec_rates": {"untouched": UNTOUCHED, "tuned": TUNED, "unseen_of_kind": UNSEEN_OF_KIND},
        "codec_null": CODEC_NULL_SCORE,
        "exchangeability": {"shards": args.shards, "permutations": 1, "draws": "student_t(3)", "shift": args.shift},
        "standard_error_at_alpha": math.sqrt(args.alpha * (1 - args.alpha) / args.replicates),
        "minutes": round((time.perf_counter() - start) / 60, 2),
        "rows": rows,
    }
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
