"""The numbers of a results JSON, checked before ``table``, ``report`` or ``decisions`` shows them.

A results JSON can be edited by hand or damaged (an AUC of 1.7, a p-value of 7.5, a string where a
number was, a value deleted). :func:`check_results` is the one place that reads each metric of a
results JSON against what the harness writes for it (:func:`expected_of`): a rate (AUC, TPR,
p-value, CoDeC score, accuracy) is a number in [0, 1], a count (CoDeC examples, shards) a whole
number, a standard error a number >= 0 or lm-eval's ``"N/A"``. A value that is not what its key
holds is replaced by ``None`` (every table shows ``None`` as ``n/a``, never as a number) and named
in a :class:`BadValue`, which the commands print as a warning line naming the file and the key.

NaN is what the harness itself writes where a number cannot be computed (the blind baseline with
fewer than 2 texts of a class, dataset inference on too few texts, a standard error that is not
defined); there it is shown as ``n/a`` without a warning. Elsewhere a NaN is named like any other
damaged value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from pdd_tasks.errors import UserError, excerpt


#: Metric names (before the ``/<source task>`` of ``pdd_contamination``) that are rates in [0, 1].
RATE_NAMES = frozenset(
    {"codec_score", "codec_score_ci95_low", "codec_score_ci95_high", "exchangeability_pvalue", "acc", "acc_norm"}
)
RATE_SUFFIXES = ("_auc", "_suspect_auc", "_flagged", "_pvalue")
#: Metric names that are whole numbers (counts).
COUNT_NAMES = frozenset(
    {"codec_examples", "exchangeability_shards", "exchangeability_examples", "exchangeability_permutations"}
)
COUNT_SUFFIXES = ("_identified",)
#: Metric names whose NaN the harness writes where the number cannot be computed (shown as n/a).
NAN_WRITTEN_BY_THE_HARNESS = ("blind_", "dataset_inference_")


@dataclass(frozen=True)
class BadValue:
    """A value of a results JSON that is not what its key holds."""

    file: Path
    task: str
    key: str | tuple[str, ...]  # a tuple: a place below the task's entry, e.g. ("metadata", "min_k")
    value: object
    problem: str  # e.g. "out of range: expected a number in [0, 1]"
    section: str = "results"  # the results JSON's section: "results" (the metrics), "n-samples", "configs"
    consequence: str = "shown as n/a, never as a number"

    def where(self) -> str:
        """``results['pdd_wikimia_32']['loss_auc,none']``: the value's place in the results JSON."""
        parts = (self.task, *(self.key if isinstance(self.key, tuple) else (self.key,)))
        return self.section + "".join(f"[{part!r}]" for part in parts if part)

    def line(self) -> str:
        """The warning line: the file, the key, the value and why it is not shown."""
        shown = "missing" if self.value is _MISSING else f"= {excerpt(self.value)}"
        return (
            f"warning: {self.file}: {self.where()} {shown}: {self.problem}; "
            f"{self.consequence}. Re-run lm_eval to write the results again, or restore the file."
        )


class _Missing:
    def __repr__(self) -> str:
        return "missing"


#: The value of a :class:`BadValue` for a key that should be there and is not.
_MISSING = _Missing()


def missing(file: Path, task: str, key: str, why: str) -> BadValue:
    """A :class:`BadValue` for a key the results JSON should hold and does not (``why``: what needs it)."""
    return BadValue(Path(file), task, key, _MISSING, f"missing ({why})")


def _metric_name(key: str) -> tuple[str, bool]:
    """``"codec_score/arc_easy_stderr,none"`` -> ``("codec_score", True)``: the metric's name without
    filter and source task, and whether the key is its standard error."""
    name = key.split(",", 1)[0]
    stderr = name.endswith("_stderr")
    name = name.removesuffix("_stderr")
    return name.split("/", 1)[0], stderr


def expected_of(key: str) -> str | None:
    """What the harness writes under ``key`` (``"rate"``, ``"count"``, ``"number"``), its standard error
    (``"stderr-rate"``, ``"stderr"``), or None for a key this plugin does not read (left as it is)."""
    if "," not in key:
        return None  # "alias", "sample_len", ...
    name, stderr = _metric_name(key)
    if name in RATE_NAMES or name.endswith(RATE_SUFFIXES) or "_tpr@fpr<" in name or name == "exact_match":
        kind = "rate"
    elif name in COUNT_NAMES or name.endswith(COUNT_SUFFIXES):
        kind = "count"
    elif name.endswith(("_threshold", "_t")) or name in ("codec_mean_delta", "exchangeability_mean_difference"):
        kind = "number"
    else:
        return None
    if stderr:
        return "stderr-rate" if kind == "rate" else "stderr"
    return kind


def value_problem(key: str, value) -> str | None:
    """Why ``value`` is not what ``key`` holds (None where it is, or where the key is not checked)."""
    kind = expected_of(key)
    if kind is None:
        return None
    name = key.split(",", 1)[0]
    if kind.startswith("stderr"):
        if value == "N/A" or value is None:  # lm-eval's "no standard error"
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return 'not a number: expected a standard error >= 0 or "N/A"'
        if math.isnan(value):
            return None
        if not 0 <= value <= (1 if kind == "stderr-rate" else math.inf) or math.isinf(value):
            return (
                "out of range: expected a standard error in [0, 1]"
                if kind == "stderr-rate"
                else ("out of range: expected a standard error >= 0")
            )
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"not a number: expected {_wanted(kind)}"
    if math.isnan(value):
        return None if name.startswith(NAN_WRITTEN_BY_THE_HARNESS) else f"NaN: expected {_wanted(kind)}"
    if kind == "rate" and not 0 <= value <= 1:
        return f"out of range: expected {_wanted(kind)}"
    if kind == "count" and (value < 0 or math.isinf(value) or value != int(value)):
        return f"out of range: expected {_wanted(kind)}"
    if kind == "number" and math.isinf(value):
        return f"out of range: expected {_wanted(kind)}"
    return None


def _wanted(kind: str) -> str:
    return {"rate": "a number in [0, 1]", "count": "a whole number >= 0", "number": "a finite number"}[kind]


#: The metrics of a labelled task that every method has (each with its ``_stderr``).
LABELLED_METRICS = ("auc", "tpr@fpr<5%", "tpr@fpr<1%", "tpr@fpr<0.1%")


def _missing_metrics(values: dict) -> list[str]:
    """The ``<method>_<metric>,none`` keys a labelled task's results lack where the same method has
    others (a row a table would otherwise drop, or show in part, without a word)."""
    from pdd_tasks.registry import EM_MIA, METHOD_NAMES
    from pdd_tasks.results_schema import BLIND

    found = []
    for method in (BLIND, *METHOD_NAMES, EM_MIA):
        keys = [f"{method}_{metric},none" for metric in LABELLED_METRICS]
        if any(key in values for key in keys):
            found += [key for key in keys if key not in values]
    return found


def check_results(results: dict, file: Path) -> tuple[dict, list[BadValue]]:
    """``results`` with every value that is not what its key holds replaced by None, and those values.

    Only ``results["results"]`` (the metrics) and ``n-samples`` are checked; keys this plugin does not
    read are left as they are.
    """
    bad: list[BadValue] = []
    checked = dict(results)
    for name in ("config", "configs", "n-samples"):
        if name in results and not isinstance(results[name], dict):
            bad.append(BadValue(Path(file), name, "", results[name], "expected an object", "", _IGNORED))
            checked[name] = {}
    checked["configs"] = _checked_configs(checked.get("configs") or {}, file, bad)
    sections = {}
    for task, values in (results.get("results") or {}).items():
        if not isinstance(values, dict):
            bad.append(BadValue(Path(file), task, "", values, "expected an object of metrics", consequence=_NOT_SHOWN))
            continue
        fixed = dict(values)
        for key, value in values.items():
            problem = value_problem(key, value)
            if problem:
                bad.append(BadValue(Path(file), task, key, value, problem))
                fixed[key] = None
        for key in _missing_metrics(values):
            bad.append(missing(file, task, key, "the method's other metrics are there"))
            fixed[key] = None
        sections[task] = fixed
    checked["results"] = sections
    counts = checked.get("n-samples")
    if isinstance(counts, dict):
        fixed_counts = {}
        for task, entry in counts.items():
            if not isinstance(entry, dict):
                bad.append(BadValue(Path(file), task, "", entry, "expected an object", "n-samples", _IGNORED))
                continue
            effective = entry.get("effective") if isinstance(entry, dict) else None
            if (
                isinstance(entry, dict)
                and "effective" in entry
                and not (isinstance(effective, int) and not isinstance(effective, bool) and effective >= 0)
            ):
                bad.append(
                    BadValue(Path(file), task, "effective", effective, "expected a whole number >= 0", "n-samples")
                )
                entry = {**entry, "effective": None}
            fixed_counts[task] = entry
        checked["n-samples"] = fixed_counts
    return checked, bad


#: What is done with a damaged part of the results JSON that is not a number (a section, a setting).
_IGNORED = "not read (the task is shown without it)"
_DEFAULT = "read as the setting's default"
_NOT_SHOWN = "the task is not shown"


def _checked_configs(configs: dict, file: Path, bad: list[BadValue]) -> dict:
    """The tasks' configs with a config or metadata that is not an object dropped, and a scoring setting
    the run could not have had (``min_k: "abc"``) removed (read as its default), each named in ``bad``."""
    from pdd_tasks.registry import SETTINGS, ScoringSettings

    fixed = {}
    for task, config in configs.items():
        if not isinstance(config, dict):
            bad.append(BadValue(Path(file), task, "", config, "expected an object", "configs", _IGNORED))
            continue
        metadata = config.get("metadata")
        if metadata is None:
            fixed[task] = config
            continue
        if not isinstance(metadata, dict):
            bad.append(BadValue(Path(file), task, "metadata", metadata, "expected an object", "configs", _IGNORED))
            fixed[task] = {**config, "metadata": {}}
            continue
        given = {s.name: metadata[s.name] for s in SETTINGS if s.name in metadata}
        try:
            ScoringSettings.from_metadata(given)
        except UserError:
            metadata = dict(metadata)
            for name, value in given.items():
                try:
                    ScoringSettings.from_metadata({name: value})
                except UserError as error:
                    bad.append(
                        BadValue(
                            Path(file), task, ("metadata", name), value, str(error).rstrip("."), "configs", _DEFAULT
                        )
                    )
                    del metadata[name]
            try:
                ScoringSettings.from_metadata({s.name: metadata[s.name] for s in SETTINGS if s.name in metadata})
            except UserError as error:  # settings that contradict each other: every one read as its default
                bad.append(BadValue(Path(file), task, "metadata", "", str(error).rstrip("."), "configs", _DEFAULT))
                metadata = {k: v for k, v in metadata.items() if k not in {s.name for s in SETTINGS}}
        fixed[task] = {**config, "metadata": metadata}
    return fixed
