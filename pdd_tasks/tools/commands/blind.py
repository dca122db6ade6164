"""``lm-eval-pdd blind TASK [--metadata JSON]``: the blind baseline of a labelled pdd task, no model.

Loads the task's texts and labels exactly as ``lm_eval`` would (same task config, same
``--metadata``), fits the out-of-fold bag-of-n-grams classifier of :mod:`pdd_metrics.blind` and
prints its AUC with a 95% interval (DeLong) and TPR at 5%, 1% and 0.1% FPR with their bootstrap
standard errors: the numbers a harness run reports as ``blind_*``. A group (``pdd_wikimia``)
gives one row per task. As ``lm-eval-pdd table`` shows them: an AUC whose DeLong standard error is 0
or undefined has "no interval", and a class of fewer than 30 texts gets a **Too few texts** warning.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass

import numpy as np

from pdd_metrics import roc_auc, tpr_at_fpr
from pdd_metrics.blind import BLIND_FOLDS, BLIND_SEED, blind_scores
from pdd_metrics.intervals import delong_auc_stderr, normal_interval, smallest_fpr_step, tpr_at_fpr_stderr
from pdd_tasks.results_schema import FPR_BUDGETS
from pdd_tasks.tools.arg_types import bootstrap_iters
from pdd_tasks.tools.report.tables import NO_STDERR_NOTE
from pdd_tasks.tools.results.runs import Counts


@dataclass(frozen=True)
class BlindResult:
    task: str
    n_members: int
    n_non_members: int
    auc: float
    auc_stderr: float
    tpr: dict[str, float]  # metric name (tpr@fpr<x%) -> value
    tpr_stderr: dict[str, float]

    def auc_interval(self) -> tuple[float, float] | None:
        """The AUC's 95% interval (DeLong), or None where its standard error gives none: 0 (every member
        scored above every non-member, or every one below) or undefined (fewer than 2 texts of a
        class), as ``lm-eval-pdd table`` shows it ("no interval")."""
        if not np.isfinite(self.auc_stderr) or self.auc_stderr == 0:
            return None
        return normal_interval(self.auc, self.auc_stderr)

    def as_dict(self) -> dict:
        interval = self.auc_interval()
        return {
            "task": self.task,
            "n_members": self.n_members,
            "n_non_members": self.n_non_members,
            "auc": self.auc,
            "auc_stderr": None if np.isnan(self.auc_stderr) else self.auc_stderr,
            "auc_ci95": None if interval is None else list(interval),
            "too_few_texts": Counts(self.n_members + self.n_non_members, self.n_members, self.n_non_members).too_few(),
            **{name: value for name, value in self.tpr.items()},
            **{f"{name}_stderr": None if np.isnan(value) else value for name, value in self.tpr_stderr.items()},
        }


def evaluate_blind(task: str, texts: list[str], labels: list[int], bootstrap_iters: int = 100_000) -> BlindResult:
    """The blind baseline's metrics on one task's texts (as the harness computes ``blind_*``)."""
    labels_arr = np.asarray(labels, dtype=np.int64)
    scores = blind_scores(texts, labels_arr)
    return BlindResult(
        task=task,
        n_members=int(labels_arr.sum()),
        n_non_members=int(labels_arr.size - labels_arr.sum()),
        auc=roc_auc(scores, labels_arr),
        auc_stderr=delong_auc_stderr(scores, labels_arr),
        tpr={name: tpr_at_fpr(scores, labels_arr, budget, "strict") for name, budget in FPR_BUDGETS.items()},
        tpr_stderr={
            name: tpr_at_fpr_stderr(scores, labels_arr, budget, "strict", iters=bootstrap_iters)
            for name, budget in FPR_BUDGETS.items()
        },
    )


def load_labelled_texts(task: str, metadata: dict) -> dict[str, tuple[list[str], list[int]]]:
    """``task name -> (texts, labels)`` of a pdd task or group, loaded by the harness's TaskManager."""
    from lm_eval.tasks import TaskManager

    from pdd_tasks.paths import tasks_path
    from pdd_tasks.tasks.base import MembershipInferenceTask

    manager = TaskManager(include_path=tasks_path(), metadata=metadata)
    if not manager.match_tasks([task]):
        raise ValueError(
            f"no task or group {task!r} among the pdd tasks; `lm_eval ls tasks --include_path "
            '"$(lm-eval-pdd tasks-path)"` lists them (e.g. pdd_wikimia, pdd_wikimia_32, pdd_custom).'
        )
    loaded = manager.load(task)["tasks"]
    found = {}
    for name, task_object in loaded.items():
        if not isinstance(task_object, MembershipInferenceTask):
            continue
        docs = list(task_object.test_docs())
        if docs and "label" not in docs[0]:
            raise ValueError(
                f"{name}: the texts have no labels (an unlabelled pdd_custom run), so there is nothing for a "
                "classifier to predict. The blind baseline needs a labelled file (a 0/1 label field, 1 = member)."
            )
        found[str(name)] = ([doc["text"] for doc in docs], [int(doc["label"]) for doc in docs])
    if not found:
        raise ValueError(f"{task!r} holds no labelled pdd task.")
    return found


def format_results(results: list[BlindResult]) -> str:
    header = ["task", "members", "non-members", "blind AUC [95% CI]", *(f"TPR@FPR<{k[8:]} ± se" for k in FPR_BUDGETS)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    notes = []
    warnings = []
    for result in results:
        interval = result.auc_interval()
        cells = [
            result.task,
            str(result.n_members),
            str(result.n_non_members),
            f"{result.auc:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"
            if interval
            else f"{result.auc:.3f} [no interval]",
        ]
        if interval is None and f"no interval: {NO_STDERR_NOTE}" not in notes:
            notes.append(f"no interval: {NO_STDERR_NOTE}")
        counts = Counts(result.n_members + result.n_non_members, result.n_members, result.n_non_members)
        if too_few := counts.too_few():
            warnings.append(f"**Too few texts** in {result.task}: {too_few}")
        for name, budget in FPR_BUDGETS.items():
            unresolved = smallest_fpr_step(result.n_non_members) >= budget
            stderr = result.tpr_stderr[name]
            spread = " ± n/a" if np.isnan(stderr) else f" ± {stderr:.3f}"
            cells.append(f"{result.tpr[name]:.3f}{spread}" + (" †" if unresolved else ""))
            if unresolved:
                notes.append(
                    f"† {result.task}: with {result.n_non_members} non-members, FPR<{name[8:]} allows no false positive "
                    "(TPR at FPR 0)."
                )
        lines.append("| " + " | ".join(cells) + " |")
    explanation = (
        f"Blind baseline: TF-IDF word 1-2-grams + logistic regression on the texts alone (no model), "
        f"{BLIND_FOLDS}-fold out-of-fold scores, seed {BLIND_SEED}. Where it is high, the labels are predictable "
        "without the model and a detection method's AUC on this benchmark is no evidence of membership."
    )
    return "\n".join(lines + [""] + warnings + notes + ([""] if warnings or notes else []) + [explanation])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("task", help="a labelled pdd task or group, e.g. pdd_wikimia_32, pdd_wikimia, pdd_custom")
    parser.add_argument(
        "--metadata",
        default="{}",
        help='task metadata as for lm_eval, JSON (e.g. \'{"data_files": "texts.jsonl"}\' for pdd_custom, '
        '\'{"data_source": "/path/to/WikiMIA-24"}\' for a local copy)',
    )
    parser.add_argument(
        "--bootstrap-iters",
        type=bootstrap_iters,
        default=100_000,
        help="bootstrap draws of the TPR standard errors (default 100000; 0: no standard errors)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    try:
        metadata = json.loads(args.metadata)
        if not isinstance(metadata, dict):
            raise ValueError("expected a JSON object")
    except ValueError as error:
        print(f"lm-eval-pdd blind: --metadata {args.metadata!r} is not a JSON object ({error}); e.g. "
              "--metadata '{\"data_files\": \"texts.jsonl\"}'.", file=sys.stderr)  # fmt: skip
        return 2
    try:
        texts = load_labelled_texts(args.task, metadata)
        results = [evaluate_blind(name, *data, bootstrap_iters=args.bootstrap_iters) for name, data in texts.items()]
    except (ValueError, OSError) as error:
        print(f"lm-eval-pdd blind: {error}", file=sys.stderr)
        return 1
    print(json.dumps([r.as_dict() for r in results], indent=1) if args.json else format_results(results))
    return 0
