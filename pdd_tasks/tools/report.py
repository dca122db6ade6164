"""Reading lm-eval output folders, and the per-method table (``lm-eval-pdd table``).

The table has methods as rows and (task, metric) as columns, the blind baseline first where the
run has it, each value with its standard error where the results JSON has one. Every run found
is shown (a folder holding two runs gives two tables, oldest first).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from pdd_tasks.loading.files import DatasetError, read_json, read_jsonl
from pdd_tasks.registry import METHOD_NAMES, SETTINGS, ScoringSettings, label
from pdd_tasks.tasks.aggregations import BLIND


METRIC_LABELS = {
    "auc": "AUC",
    "tpr@fpr<5%": "TPR@FPR<5%",
    "tpr@fpr<1%": "TPR@FPR<1%",
    "tpr@fpr<0.1%": "TPR@FPR<0.1%",
}

#: Label of the blind baseline in tables.
BLIND_LABEL = "blind (texts only, no model)"

_FIX = (
    "Pass the --output_path folder of an lm_eval run of the pdd tasks (it holds "
    "<model>/results_<date>.json, and samples_<task>_<date>.jsonl with --log_samples), or a results_*.json file."
)


class ResultsError(ValueError):
    """A path that is not an lm_eval output folder or results file; the message says the fix."""


def results_files(path: Path) -> list[Path]:
    """``path`` itself if it is a file, else every ``results_*.json`` below it, oldest first
    (by the date in the name, which lm_eval writes sortably)."""
    path = Path(path)
    if not path.exists():
        raise ResultsError(f"{path} does not exist. {_FIX}")
    if path.is_file():
        return [path]
    files = sorted(path.rglob("results_*.json"), key=lambda p: (p.name, str(p)))
    if not files:
        raise ResultsError(f"{path} is not an lm_eval output folder: no results_*.json below it. {_FIX}")
    return files


def latest_results_file(path: Path) -> Path:
    """The newest ``results_*.json`` of :func:`results_files`."""
    return results_files(path)[-1]


def read_results(file: Path) -> dict:
    """An lm-eval results JSON (read by :func:`pdd_tasks.loading.files.read_json`); anything else is a
    :class:`ResultsError` naming the file."""
    try:
        results = read_json(file)
    except (OSError, DatasetError) as error:
        raise ResultsError(f"{file} is not an lm_eval results file ({error}). {_FIX}") from None
    if not isinstance(results, dict) or not isinstance(results.get("results"), dict):
        raise ResultsError(f"{file} is not an lm_eval results file (no 'results' section). {_FIX}")
    return results


def pdd_tasks_of(results: dict) -> list[str]:
    """The labelled pdd tasks of a results JSON (those with a method's or the blind AUC), by name."""
    prefixes = (*METHOD_NAMES, BLIND)
    return sorted(
        (
            name
            for name, values in results["results"].items()
            if any(f"{prefix}_auc,none" in values for prefix in prefixes)
        ),
        key=lambda name: (len(name), name),
    )


@dataclass(frozen=True)
class Run:
    """One lm_eval run: its results file (and the samples files beside it)."""

    file: Path

    @cached_property
    def results(self) -> dict:
        return read_results(self.file)

    @property
    def timestamp(self) -> str:
        return self.file.stem.removeprefix("results_")

    @property
    def model(self) -> str:
        """The model's name or path as given to lm_eval (``pretrained=``), else the model type."""
        config = self.results.get("config") or {}
        args = config.get("model_args")
        if isinstance(args, dict) and args.get("pretrained"):
            return str(args["pretrained"])
        if isinstance(args, str) and "pretrained=" in args:
            return args.split("pretrained=", 1)[1].split(",", 1)[0]
        return str(self.results.get("model_name") or config.get("model") or "unknown model")

    def samples_file(self, task: str) -> Path | None:
        """``samples_<task>_<timestamp>.jsonl`` beside the results file, or None (no --log_samples)."""
        file = self.file.parent / f"samples_{task}_{self.timestamp}.jsonl"
        return file if file.is_file() else None

    def samples(self, task: str) -> list[dict] | None:
        """The ``--log_samples`` records of ``task`` (:func:`pdd_tasks.loading.files.read_jsonl`), or None."""
        file = self.samples_file(task)
        return None if file is None else read_jsonl(file)


def find_runs(paths: list[Path]) -> list[Run]:
    """Every run under ``paths`` (folders or results files), each once, in the order given."""
    runs: dict[Path, Run] = {}
    for path in paths:
        for file in results_files(path):
            runs.setdefault(file.resolve(), Run(file))
    return list(runs.values())


def task_settings(results: dict, task: str) -> ScoringSettings:
    """The settings a task ran with, from its metadata in the results JSON (defaults elsewhere)."""
    metadata = results.get("configs", {}).get(task, {}).get("metadata") or {}
    return ScoringSettings.from_metadata({s.name: metadata[s.name] for s in SETTINGS if s.name in metadata})


def method_label(results: dict, method: str, tasks: list[str]) -> str:
    """The method's label under the settings of ``tasks`` (" / "-joined where they differ)."""
    labels = dict.fromkeys(label(method, task_settings(results, task)) for task in tasks)
    return " / ".join(labels)


def lowercase_off(results: dict, task: str) -> bool:
    """Whether the task ran with ``lowercase: false`` (e.g. Chinese text, which has no letter case)."""
    metadata = results.get("configs", {}).get(task, {}).get("metadata") or {}
    return metadata.get("lowercase") is False


def _cell(values: dict, key: str) -> str:
    value = values.get(f"{key},none")
    if not isinstance(value, (int, float)) or value != value:  # absent, or NaN (e.g. blind with < 2 of a class)
        return "n/a"
    stderr = values.get(f"{key}_stderr,none")
    return f"{value:.3f} ± {stderr:.3f}" if isinstance(stderr, (int, float)) else f"{value:.3f}"


def method_table(results: dict, metrics: tuple[str, ...] = ("auc", "tpr@fpr<5%")) -> str:
    """Markdown table: one row per method, one column per (pdd task, metric).

    The blind baseline is the first row where the run has it. Values are ``value ± stderr`` where
    the results hold a numeric stderr. A method a task did not score is ``n/a``, explained under
    the table: Lowercase for a task run with ``lowercase: false`` (not applicable to Chinese, which
    has no letter case), anything else as missing from the results. A task run with
    ``convention: "reference-code"`` is named under the table (its scores are of other tokens).
    """
    tasks = pdd_tasks_of(results)
    if not tasks:
        raise ResultsError(
            "The results contain no labelled pdd task (no <method>_auc metric): was this an lm_eval run of "
            "the pdd tasks (--include_path $(lm-eval-pdd tasks-path) --tasks pdd_...)?"
        )
    no_lowercase = [task for task in tasks if lowercase_off(results, task)]
    methods = [
        m
        for m in (BLIND, *METHOD_NAMES)
        if any(f"{m}_auc,none" in results["results"][t] for t in tasks) or (m == "lowercase" and no_lowercase)
    ]
    header = ["method"] + [f"{task} {METRIC_LABELS[metric]}" for task in tasks for metric in metrics]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    missing = []
    for method in methods:
        name = BLIND_LABEL if method == BLIND else method_label(results, method, tasks)
        cells = [name]
        for task in tasks:
            for metric in metrics:
                value = results["results"][task].get(f"{method}_{metric},none")
                cells.append(_cell(results["results"][task], f"{method}_{metric}"))
                if value is None and not (method == "lowercase" and task in no_lowercase):
                    missing.append(f"{name} {METRIC_LABELS[metric]} of {task}")
        lines.append("| " + " | ".join(cells) + " |")
    notes = []
    for task in no_lowercase:
        language = (results["configs"][task].get("metadata") or {}).get("language")
        if language in ("zh", "ja"):
            notes.append(
                f"n/a: Lowercase does not apply to {task} (its texts ({language}) have no letter case; "
                f"task setting `lowercase: false`)."
            )
        else:
            notes.append(f"n/a: Lowercase was not scored for {task} (setting `lowercase: false`).")
    if missing:
        notes.append(f"n/a: not in the results: {', '.join(missing)}.")
    reference_code = [task for task in tasks if task_settings(results, task).convention == "reference-code"]
    if reference_code:
        notes.append(
            f'Scored tokens: convention "reference-code" for {", ".join(reference_code)} (tokenizer.encode(text) '
            f'without its first token, as the Min-K%++ and DC-PDD scripts); elsewhere "paper" (every text token '
            f"after the model's start token)."
            if len(reference_code) < len(tasks)
            else 'Scored tokens: convention "reference-code" (tokenizer.encode(text) without its first token, '
            "as the Min-K%++ and DC-PDD scripts)."
        )
    sizes = ", ".join(
        f"{task}: {results['n-samples'][task]['effective']} texts{_held_out(results, task)}"
        for task in tasks
        if task in results.get("n-samples", {})
    )
    footer = "\n\n".join(notes + ([sizes] if sizes else []))
    return "\n".join(lines) + (f"\n\n{footer}" if footer else "")


def _held_out(results: dict, task: str) -> str:
    """How many documents a run held out of the scored set as ReCaLL prefix texts, if any."""
    record = (results.get("configs", {}).get(task, {}).get("metadata") or {}).get("recall_prefixes")
    return f" ({record['held_out']['count']} more held out as ReCaLL prefix texts)" if record else ""


def print_method_table(path: Path) -> str:
    """The method table of every run under ``path`` (one run: just its table; several: each under
    a heading naming its model and results file, oldest first)."""
    runs = find_runs([Path(path)])
    if len(runs) == 1:
        return method_table(runs[0].results)
    parts = []
    for run in runs:
        try:
            table = method_table(run.results)
        except ResultsError as error:
            table = f"(no pdd table: {error})"
        parts.append(f"### {run.model}: {run.file}\n\n{table}")
    return f"{len(runs)} runs under {path}:\n\n" + "\n\n".join(parts)
