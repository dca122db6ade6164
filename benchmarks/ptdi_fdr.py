"""PTDI's realised false discovery rate and power, over resampled suspect and reference sets.

Input: the samples log of a labelled pdd run (``pdd_controlled``, labelled ``pdd_custom`` or a
``pdd_wikimia_*`` task with ``--log_samples``): every text's score with every method and its label
(1 = member). For each seed, disjoint random draws give

- suspects: ``--members`` members and ``--non-members`` non-members;
- references: ``--references`` other non-members (the known unseen texts);

and per method the suspects are identified as ``pdd_custom`` does it (:func:`pdd_metrics.identify_members`:
conformal p-values against the references, Benjamini-Hochberg at ``--target-fdr``). Per method the
table gives the mean false-discovery proportion over seeds (the realised FDR; BH bounds it by
(1 - pi) q, pi the members' share of the suspects), its standard error, the share of seeds with at
least one false identification, and the power (mean share of the suspect members identified).
With ``--members 0`` every identification is false and the FDR is the chance of any.

    python benchmarks/ptdi_fdr.py <output_path>/<model>/samples_pdd_controlled_*.jsonl --seeds 200

``--tiny DIR`` makes the samples log first, on this machine, without any download: a 2-layer GPT-2
(the tests' fixture model, ``tests/support/models.py``) trained for ``--steps`` steps on
``--tiny-members`` WikiMIA-32 texts, then a real ``lm_eval`` run of labelled ``pdd_custom`` on those
texts (label 1) and ``--tiny-unseen`` others (label 0) with ``--log_samples``:

    python benchmarks/ptdi_fdr.py --tiny /tmp/ptdi-tiny --tiny-members 48 --steps 300 --seeds 200
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import numpy as np
from _common import lm_eval_run, machine
from dataset_inference_fpr import read_scores

from pdd_metrics import identify_members


REPO = Path(__file__).resolve().parents[1]


def make_tiny_samples(directory: Path, members: int, unseen: int, steps: int) -> Path:
    """Train the tests' tiny GPT-2 on ``members`` WikiMIA-32 texts and score them with ``unseen``
    others through labelled ``pdd_custom``; the samples log's path (reused if already there)."""
    sys.path.insert(0, str(REPO / "tests"))
    from support.harness import wikimia_rows
    from support.models import build_table_for, build_tiny_model, train_on

    out = directory / "out"
    found = sorted(out.rglob("samples_pdd_custom_*.jsonl"))
    if found:
        return found[-1]
    texts = [row["input"] for row in wikimia_rows(32)]
    random.Random(1).shuffle(texts)
    model = build_tiny_model(directory / "model", seed=2)
    train_on(model, texts[:members], steps=steps)
    table = build_table_for(model, directory / "table.npz")
    rows = [{"text": t, "label": 1} for t in texts[:members]] + [
        {"text": t, "label": 0} for t in texts[members : members + unseen]
    ]
    data = directory / "labelled.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    lm_eval_run(
        model, "pdd_custom", out, metadata={"data_files": str(data), "freq_table": str(table)}, log_samples=True
    )
    return sorted(out.rglob("samples_pdd_custom_*.jsonl"))[-1]


def resample(scores: np.ndarray, labels: np.ndarray, members: int, non_members: int, references: int, seed: int):
    """Suspect scores, which suspects are members, and reference scores of one draw (disjoint)."""
    rng = np.random.default_rng(seed)
    member_rows = rng.permutation(np.flatnonzero(labels == 1))[:members]
    non_member_rows = rng.permutation(np.flatnonzero(labels == 0))
    if members > np.sum(labels == 1) or non_members + references > non_member_rows.size:
        raise SystemExit(
            f"the log has {int(np.sum(labels == 1))} members and {non_member_rows.size} non-members: fewer than "
            f"--members {members} and --non-members {non_members} + --references {references}"
        )
    suspect_rows = np.r_[member_rows, non_member_rows[:non_members]]
    reference_rows = non_member_rows[non_members : non_members + references]
    is_member = np.r_[np.ones(member_rows.size, dtype=bool), np.zeros(non_members, dtype=bool)]
    return scores[suspect_rows], is_member, scores[reference_rows]


def measure(scores, labels, methods, members, non_members, references, seeds, target_fdr) -> list[dict]:
    """Per method: mean FDP, its standard error, P(any false identification), power, mean identified."""
    fdp = np.zeros((seeds, len(methods)))
    any_false = np.zeros((seeds, len(methods)), dtype=bool)
    power = np.zeros((seeds, len(methods)))
    count = np.zeros((seeds, len(methods)))
    for seed in range(seeds):
        suspect, is_member, reference = resample(scores, labels, members, non_members, references, seed)
        for column in range(len(methods)):
            identified = identify_members(suspect[:, column], reference[:, column], target_fdr).identified
            false = int(np.sum(identified & ~is_member))
            fdp[seed, column] = false / max(int(identified.sum()), 1)
            any_false[seed, column] = false > 0
            power[seed, column] = np.sum(identified & is_member) / members if members else np.nan
            count[seed, column] = identified.sum()
    return [
        {
            "method": method,
            "fdr": float(fdp[:, i].mean()),
            "fdr_se": float(fdp[:, i].std(ddof=1) / np.sqrt(seeds)),
            "any_false": float(any_false[:, i].mean()),
            "power": float(np.nanmean(power[:, i])) if members else float("nan"),
            "identified": float(count[:, i].mean()),
        }
        for i, method in enumerate(methods)
    ]


def table(rows: list[dict], bound: float) -> str:
    lines = [
        f"| method | realised FDR (mean FDP) | ± s.e. | FDR / bound {bound:.3g} | P(any false identification) "
        "| power | mean identified |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        power = "n/a" if np.isnan(row["power"]) else f"{row['power']:.3f}"
        lines.append(
            f"| {row['method']} | {row['fdr']:.4f} | {row['fdr_se']:.4f} | {row['fdr'] / bound:.2f} "
            f"| {row['any_false']:.3f} | {power} | {row['identified']:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("samples", nargs="?", type=Path, help="samples log of a labelled pdd run")
    parser.add_argument("--tiny", type=Path, help="make the samples log in this folder (see above)")
    parser.add_argument("--tiny-members", type=int, default=48)
    parser.add_argument("--tiny-unseen", type=int, default=400)
    parser.add_argument("--steps", type=int, default=300, help="training steps of the tiny model")
    parser.add_argument("--members", type=int, default=20, help="members among the suspects per draw")
    parser.add_argument("--non-members", type=int, default=60, help="non-members among the suspects per draw")
    parser.add_argument("--references", type=int, default=200, help="reference (known unseen) texts per draw")
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--target-fdr", type=float, default=0.1)
    args = parser.parse_args(argv)
    if (args.samples is None) == (args.tiny is None):
        parser.error("give a samples log or --tiny DIR (one of them)")
    path = args.samples or make_tiny_samples(args.tiny, args.tiny_members, args.tiny_unseen, args.steps)
    methods, scores, labels = read_scores(path)
    rows = measure(
        scores, labels, methods, args.members, args.non_members, args.references, args.seeds, args.target_fdr
    )
    pi = args.members / (args.members + args.non_members)
    bound = (1 - pi) * args.target_fdr
    print(f"samples: {path} ({int(labels.sum())} members, {int((labels == 0).sum())} non-members)")
    print(
        f"per draw: {args.members} members + {args.non_members} non-members as suspects, {args.references} "
        f"references; target FDR {args.target_fdr} (BH's bound (1 - pi) q = {bound:.3g}); {args.seeds} seeds"
    )
    print(f"machine: {machine()}")
    print(table(rows, bound))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
