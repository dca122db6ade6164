"""Per-text decisions of an unlabelled ``pdd_custom`` run, from its ``--log_samples`` output.

The harness aggregates per-text values into dataset-level numbers and cannot write a decision per
text, so ``lm-eval-pdd decisions <output_path>`` re-reads the samples log: per method it calibrates
tau on the reference texts' scores exactly as the task's ``<method>_threshold`` metric did (same
function, same target FPR, read from the results JSON) and flags each suspect text scoring above
it (DC-PDD Eq. 9). Beside it, PTDI: each suspect text's conformal p-value against the reference
texts and whether Benjamini-Hochberg at the run's ``target_fdr`` identifies it (the same function
as the task's ``<method>_identified`` metric and its ``ptdi`` entries in the samples log).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

from pdd_metrics import calibrate_threshold, flag_members, identify_members, suspect_vs_reference_test
from pdd_tasks.errors import UserError, excerpt
from pdd_tasks.loading.files import read_jsonl
from pdd_tasks.results_schema import REFERENCE, SUSPECT, target_fdr, target_fpr
from pdd_tasks.tools.results.runs import ResultsError, SamplesError, read_checked_results, read_results, results_files


@dataclass(frozen=True)
class MethodDecision:
    method: str
    threshold: float
    reference_fpr: float
    flagged: int
    suspects: int
    suspect_auc: float
    p_value: float
    identified: int
    target_fdr: float


def _samples_file(results_file: Path, task: str) -> Path:
    """``samples_<task>_<timestamp>.jsonl`` of the same run as ``results_file`` (never another run's)."""
    timestamp = results_file.stem.removeprefix("results_")
    file = results_file.parent / f"samples_{task}_{timestamp}.jsonl"
    if not file.is_file():
        others = sorted(p.name for p in results_file.parent.glob(f"samples_{task}_*.jsonl"))
        raise FileNotFoundError(
            f"No {file.name} next to {results_file}: the run of {task} at {timestamp} was made without --log_samples "
            "(run lm_eval again with --log_samples)."
            + (f" The samples files there ({', '.join(others)}) are of other runs." if others else "")
        )
    return file


class NotUnlabelled(ValueError):
    """The run decided on is a labelled one (its samples hold no suspect/reference roles)."""


def runs_of(output_path: Path, task: str) -> list[Path]:
    """The results files of the runs of ``task`` under ``output_path``, oldest first."""
    return [file for file in results_files(Path(output_path)) if task in read_results(file)["results"]]


def run_of(output_path: Path, task: str) -> Path:
    """The results file of the newest run of ``task`` under ``output_path`` (a folder may hold runs of other
    tasks and models, or a results file itself); a folder with several runs of ``task`` is said on stderr."""
    files = results_files(Path(output_path))
    with_task = runs_of(output_path, task)
    if not with_task:
        listed = ", ".join(f"{file} ({', '.join(read_results(file)['results']) or 'no task'})" for file in files[:5])
        raise ValueError(
            f"No run of {task} under {output_path}: the {len(files)} run(s) there are of other tasks ({listed}"
            f"{', ...' if len(files) > 5 else ''}). Pass the --output_path of the {task} run, or --task <its name>."
        )
    if len(with_task) > 1:
        print(
            f"lm-eval-pdd decisions: {len(with_task)} runs of {task} under {output_path}; deciding on the newest, "
            f"{with_task[-1]} (pass another run's results_*.json to decide on it).",
            file=sys.stderr,
        )
    return with_task[-1]


def _score(sample: dict, key: str, file: Path, line: int) -> float:
    """A text's score in the samples log (``[score, role]``), checked: a finite number."""
    entry = sample.get(key)
    value = entry[0] if isinstance(entry, list) and entry else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SamplesError(
            f"{file}:{line}: {key} is {excerpt(entry)}, not [a finite score, role]: the samples log was edited or "
            "damaged. Re-run lm_eval with --log_samples to write it again."
        )
    return float(value)


def decide(output_path: Path, task: str = "pdd_custom") -> tuple[list[MethodDecision], list[dict], float]:
    """Per-method summary, one record per suspect text (its row, text, scores, flags, PTDI p-values
    and identifications), and the target FPR the thresholds were calibrated for."""
    return decide_run(run_of(output_path, task), task)


def decide_newest(output_path: Path, task: str = "pdd_custom") -> tuple[Path, tuple]:
    """``(results file, decide_run's result)`` of the newest run of ``task`` under ``output_path``; where that
    run is labelled and the folder holds other runs of ``task``, the refusal names them (one of them may be
    the unlabelled run meant)."""
    results_file = run_of(output_path, task)
    try:
        return results_file, decide_run(results_file, task)
    except NotUnlabelled as error:
        others = [file for file in runs_of(output_path, task) if file != results_file]
        if not others:
            raise
        raise NotUnlabelled(
            f"{error} {output_path} also holds {len(others)} other run(s) of {task}: "
            f"{', '.join(map(str, others[-5:]))}; pass the unlabelled run's results_*.json: "
            f"lm-eval-pdd decisions {others[-1]}."
        ) from None


def decide_run(results_file: Path, task: str = "pdd_custom") -> tuple[list[MethodDecision], list[dict], float]:
    """:func:`decide` on the run of ``results_file``."""
    results, _ = read_checked_results(results_file)
    metadata = (results["configs"].get(task) or {}).get("metadata") or {}
    try:
        rate, fdr = target_fpr(metadata), target_fdr(metadata)
    except UserError as error:
        raise ResultsError(
            f"{results_file}: configs[{task!r}].metadata: {error} The run checked this setting before it scored, so "
            "the results JSON was edited or damaged: restore it, or re-run lm_eval."
        ) from None
    samples_file = _samples_file(results_file, task)
    samples = read_jsonl(samples_file)
    if not samples or "role" not in samples[0]["doc"]:
        raise NotUnlabelled(f"{task} in {results_file} was not an unlabelled run (no suspect/reference roles).")
    methods = [key.removesuffix("_flagged") for key in samples[0] if key.endswith("_flagged")]
    if not methods:
        raise ValueError(
            f"{task} in {results_file} has no reference set, so there is nothing to calibrate a decision on: "
            f'add --metadata \'{{"reference_files": "<known non-members>"}}\' and run again.'
        )
    suspects = sorted((s for s in samples if s["doc"]["role"] == SUSPECT), key=lambda s: s["doc"]["row"])
    references = [s for s in samples if s["doc"]["role"] == REFERENCE]
    records = [{"row": s["doc"]["row"], "text": s["doc"]["text"]} for s in suspects]
    summary = []
    line_of = {id(sample): number for number, sample in enumerate(samples, start=1)}
    for method in methods:
        key = f"{method}_flagged"
        reference_scores = [_score(s, key, samples_file, line_of[id(s)]) for s in references]
        suspect_scores = [_score(s, key, samples_file, line_of[id(s)]) for s in suspects]
        tau = calibrate_threshold(reference_scores, rate)
        flags = flag_members(suspect_scores, tau)
        test = suspect_vs_reference_test(suspect_scores, reference_scores)
        ptdi = identify_members(suspect_scores, reference_scores, fdr)
        for record, score, flag, p_value, identified in zip(
            records, suspect_scores, flags, ptdi.p_values, ptdi.identified, strict=True
        ):
            record[f"{method}_score"] = score
            record[f"{method}_member"] = bool(flag)
            record[f"{method}_pvalue"] = float(p_value)
            record[f"{method}_identified"] = bool(identified)
        summary.append(
            MethodDecision(
                method=method,
                threshold=tau,
                reference_fpr=float(flag_members(reference_scores, tau).mean()),
                flagged=int(flags.sum()),
                suspects=len(suspect_scores),
                suspect_auc=test.auc,
                p_value=test.p_value,
                identified=ptdi.count,
                target_fdr=fdr,
            )
        )
    return summary, records, rate
