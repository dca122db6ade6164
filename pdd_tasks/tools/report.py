"""A per-method table (methods as rows, tasks as columns) from an lm-eval results JSON."""

from __future__ import annotations

import json
from pathlib import Path

from pdd_tasks.registry import METHOD_NAMES, SETTINGS, ScoringSettings, label


METRIC_LABELS = {"auc": "AUC", "tpr@fpr<5%": "TPR@FPR<5%", "tpr@fpr<1%": "TPR@FPR<1%"}


def latest_results_file(path: Path) -> Path:
    """``path`` itself if it is a file, else the newest ``results_*.json`` below it."""
    path = Path(path)
    if path.is_file():
        return path
    files = sorted(path.rglob("results_*.json"), key=lambda p: p.stat().st_mtime)
    if not files:
        raise FileNotFoundError(
            f"No results_*.json under {path}; pass lm_eval's --output_path directory or a results file."
        )
    return files[-1]


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


def method_table(results: dict, metrics: tuple[str, ...] = ("auc", "tpr@fpr<5%")) -> str:
    """Markdown table: one row per method, one column per (pdd task, metric).

    A method a task did not score is ``n/a``, explained under the table: Lowercase for a task run
    with ``lowercase: false`` (not applicable to Chinese, which has no letter case), anything else
    as missing from the results.
    """
    tasks = sorted(
        (name for name, values in results["results"].items() if any(k.startswith("dcpdd_auc") for k in values)),
        key=lambda name: (len(name), name),
    )
    if not tasks:
        raise ValueError("The results contain no pdd task (no dcpdd_auc metric).")
    no_lowercase = [task for task in tasks if lowercase_off(results, task)]
    methods = [
        m
        for m in METHOD_NAMES
        if any(f"{m}_auc,none" in results["results"][t] for t in tasks) or (m == "lowercase" and no_lowercase)
    ]
    header = ["method"] + [f"{task} {METRIC_LABELS[metric]}" for task in tasks for metric in metrics]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    missing = []
    for method in methods:
        name = method_label(results, method, tasks)
        cells = [name]
        for task in tasks:
            for metric in metrics:
                value = results["results"][task].get(f"{method}_{metric},none")
                cells.append("n/a" if value is None else f"{value:.3f}")
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
    sizes = ", ".join(
        f"{task}: {results['n-samples'][task]['effective']} texts"
        for task in tasks
        if task in results.get("n-samples", {})
    )
    footer = "\n\n".join(notes + ([sizes] if sizes else []))
    return "\n".join(lines) + (f"\n\n{footer}" if footer else "")


def print_method_table(path: Path) -> str:
    file = latest_results_file(path)
    return method_table(json.loads(file.read_text()))
