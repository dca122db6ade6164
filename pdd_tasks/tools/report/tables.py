"""The per-method table (``lm-eval-pdd table``), and the contamination table with its verdicts.

The method table has methods as rows and (task, metric) as columns, the blind baseline first where
the run has it, each value with its standard error where the results JSON has one. Every run found
is shown (a folder holding two runs gives two tables, oldest first). A run of ``pdd_contamination``
gets its contamination table (accuracy, CoDeC, exchangeability, Holm, verdict per standard task),
each verdict citing the measured level and power of the tests. The report
(:mod:`pdd_tasks.tools.report.files`) shows the same tables. The runs are read by
:mod:`pdd_tasks.tools.results`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pdd_tasks.loading import repeats
from pdd_tasks.loading.files import read_json
from pdd_tasks.registry import EM_MIA, METHOD_NAMES, label
from pdd_tasks.tasks.aggregations import BLIND
from pdd_tasks.tools.results.contamination import (
    TEST_KEYS,
    VERDICT_TESTS,
    accuracy_of,
    contamination_values,
)
from pdd_tasks.tools.results.runs import (
    Counts,
    ResultsError,
    Run,
    SamplesError,
    find_runs,
    lowercase_off,
    pdd_tasks_of,
    task_settings,
    warn_bad_values,
)


METRIC_LABELS = {
    "auc": "AUC",
    "tpr@fpr<5%": "TPR@FPR<5%",
    "tpr@fpr<1%": "TPR@FPR<1%",
    "tpr@fpr<0.1%": "TPR@FPR<0.1%",
}

#: Label of the blind baseline in tables.
BLIND_LABEL = "blind (texts only, no model)"


def shown(model_or_path: str) -> str:
    """A model or file as a report shows it: a local path by its last part, so a report can be shared
    without the folders of the machine it was made on (the results JSON keeps the full path); a hub
    id (``EleutherAI/pythia-2.8b``) as it is."""
    path = Path(model_or_path)
    return path.name if path.is_absolute() or path.exists() else model_or_path


def method_label(results: dict, method: str, tasks: list[str]) -> str:
    """The method's label under the settings of ``tasks`` (" / "-joined where they differ)."""
    labels = dict.fromkeys(label(method, task_settings(results, task)) for task in tasks)
    return " / ".join(labels)


#: Under a table where a value's standard error could not be computed ("± n/a" / "no interval").
NO_STDERR_NOTE = (
    "no standard error could be computed, so no interval: DeLong's is 0 where every member scores above "
    "(or every one below) every non-member (AUC 1 or 0), none is defined with fewer than 2 texts of a class, "
    "and bootstrap_iters=0 turns them all off."
)


def stderr_of(values: dict, key: str) -> float | None:
    """The standard error of ``key`` in a task's results where it is usable for an interval: a finite
    number, and for an AUC not 0 (DeLong's is 0 at AUC 0 and 1, which gives an interval of one point)."""
    stderr = values.get(f"{key}_stderr,none")
    if isinstance(stderr, bool) or not isinstance(stderr, (int, float)) or stderr != stderr:
        return None
    if key.endswith("_auc") and stderr == 0:
        return None
    return float(stderr)


def _cell(values: dict, key: str) -> str:
    value = values.get(f"{key},none")
    if not isinstance(value, (int, float)) or value != value:  # absent, or NaN (e.g. blind with < 2 of a class)
        return "n/a"
    if f"{key}_stderr,none" not in values:  # results without standard errors
        return f"{value:.3f}"
    stderr = stderr_of(values, key)
    return f"{value:.3f} ± {stderr:.3f}" if stderr is not None else f"{value:.3f} ± n/a"


def convention_note(tasks: list[str], reference_code: list[str]) -> str | None:
    """What a reader must know where tasks ran with ``convention: "reference-code"`` (other tokens
    scored than under the default ``"paper"``), else None."""
    if not reference_code:
        return None
    if len(reference_code) < len(tasks):
        return (
            f'Scored tokens: convention "reference-code" for {", ".join(reference_code)} (tokenizer.encode(text) '
            f'without its first token, as the Min-K%++ and DC-PDD scripts); elsewhere "paper" (every text token '
            f"after the model's start token)."
        )
    return (
        'Scored tokens: convention "reference-code" (tokenizer.encode(text) without its first token, '
        "as the Min-K%++ and DC-PDD scripts)."
    )


def _groups(results: dict) -> set[str]:
    return {name for name, subtasks in (results.get("group_subtasks") or {}).items() if subtasks} | set(
        results.get("groups") or {}
    )


def _dataset_test_line(what: str, values: dict, metric: str, count: str, unit: str, keys: str) -> str:
    """``what`` followed by a dataset-level test's value (``metric``), from how many ``unit``, and
    where its metrics are in the results JSON (``keys``)."""
    value, number = values.get(f"{metric},none"), values.get(f"{count},none")
    return (
        f"{what} "
        + (f"{value:.3g}" if isinstance(value, (int, float)) else "n/a")
        + (f" from {number} {unit}" if isinstance(number, int) else "")
        + f" (results JSON: {keys})"
    )


def left_out(results: dict) -> list[tuple[str, str]]:
    """(task, why) for each task of a results JSON that the method table and report do not show (no
    member/non-member AUC): unlabelled pdd_custom runs, pdd_exchangeability, pdd_codec, other tasks. Groups are
    not listed (their tasks are)."""
    shown_tasks = set(pdd_tasks_of(results)) | _groups(results)
    out = []
    for task, values in results["results"].items():
        if task in shown_tasks or not isinstance(values, dict):
            continue
        keys = {key.split(",")[0] for key in values}
        if any(key.endswith(("_suspect_auc", "_threshold", "_flagged")) for key in keys) or any(
            key.startswith("dataset_inference") for key in keys
        ):
            why = (
                "unlabelled texts (pdd_custom without labels): no member/non-member AUC or TPR; its thresholds, "
                "flagged shares, PTDI identification counts and dataset-test p-values are in the results JSON, and `lm-eval-pdd decisions "
                "<output_path>` lists each text's decision"
            )
        elif "exchangeability_pvalue" in keys:
            why = _dataset_test_line(
                "a test of the texts' order (exchangeability), not a per-text membership score: p-value",
                values, "exchangeability_pvalue", "exchangeability_shards", "shards", "exchangeability_*",
            )  # fmt: skip
        elif "codec_score" in keys:
            why = _dataset_test_line(
                "a dataset-level contamination score (CoDeC), not a per-text membership score:",
                values, "codec_score", "codec_examples", "examples", "codec_*",
            )  # fmt: skip
        elif task == "pdd_contamination":
            why = (
                "dataset-level contamination checks of standard tasks: the contamination table below"
                if contamination_checks(results)
                else "dataset-level contamination checks of standard tasks, but the results JSON holds none of their "
                "metrics (codec_score/<task>, exchangeability_pvalue/<task>), so there is no table to show: re-run "
                "lm_eval to write them"
            )
        elif task.startswith("pdd_"):
            why = "no member/non-member AUC in its results"
        else:
            why = "not a pdd membership task"
        out.append((task, why))
    return out


def _accuracy(values: dict | None) -> str:
    """A standard task's accuracy as ``name value ± stderr``, or a dash where the run did not evaluate it."""
    if not values:
        return "- (not in this run)"
    found = accuracy_of(values)
    if found is None:
        return "- (no accuracy metric)"
    key, value, stderr = found
    if value is None:
        return f"{key.split(',')[0]} n/a (damaged in the results JSON)"
    return f"{key.split(',')[0]} {value:.3f}" + (f" ± {stderr:.3f}" if stderr is not None else "")


#: The controls the verdict cites (written by ``benchmarks/contamination_controls.py --package-data``).
CONTROLS_FILE = "contamination_controls.json"

#: A standard task's lm-eval output type -> the shape of the benchmark-shaped files of the controls.
SHAPE_OF_OUTPUT_TYPE = {"multiple_choice": "multiple_choice", "generate_until": "free_answer"}
#: The exposure controls in :data:`CONTROLS_FILE`: files of 48 examples, and of CoDeC's default 1,000.
EXPOSURE_KEYS = ("exposure_controls", "exposure_controls_default_size")
SHAPE_LABELS = {"multiple_choice": "multiple-choice (ARC-shaped)", "free_answer": "free-answer (GSM8K-shaped)"}


TEST_LABELS = {"codec": "CoDeC", "exchangeability": "exchangeability"}


def contamination_controls() -> dict | None:
    """The measured level and power of the verdict's rule (:data:`CONTROLS_FILE`, shipped), or None
    where the package has no such file; a shipped file that cannot be read is a broken install and
    raises :class:`DatasetError` naming it (not a silent "not measured")."""
    from pdd_tasks.loading.benchmark_data import PACKAGED_DATA

    file = PACKAGED_DATA / CONTROLS_FILE
    return read_json(Path(str(file))) if file.is_file() else None


def _share(value: float, files: int) -> str:
    return f"{round(value * files)}/{files}"


def controls_line(controls: dict | None, shape: str | None) -> str:
    """What the controls measured for files of ``shape`` (None: the task's shape is unknown, both are
    cited), per kind of exposure: the exchangeability test on files packed in their order (its level
    on untouched files, its power after each number of epochs), CoDeC on files seen example by
    example (its level at the calibrated null on untouched files and on unseen files of the shape
    with the tuned models, its power), with the commands that measured them."""
    if not controls:
        return "The level and power of the tests were not measured (no contamination_controls.json in the package)."
    from pdd_metrics.verdict import ALPHA

    parts = []
    for name in [shape] if shape in controls["shapes"] else list(controls["shapes"]):
        found = controls["shapes"][name]
        level, files = found["level"], found["level"]["files"]
        epochs = sorted(found["power"], key=int)
        power = "/".join("yes" if found["power"][e]["exchangeability"] else "no" for e in epochs)
        steps = [str(found["power"][e].get("optimizer_steps", "?")) for e in epochs]
        parts.append(
            f"seen in its published order ({SHAPE_LABELS.get(name, name)} files of "
            f"{(found.get('sizes') or controls['sizes'])['examples']} examples packed in blocks of 8): the "
            f"exchangeability test called {_share(level['exchangeability'], files)} untouched files contaminated and detected the "
            f"models tuned {'/'.join(epochs)} epoch(s) ({'/'.join(steps)} optimizer steps): {power} (one model each; "
            f"`{command_of(controls, name)}`)"
        )
    measured = set()
    for key in EXPOSURE_KEYS:
        exposures = controls.get(key) or {}
        measured |= set(exposures.get("shapes", {}))
        parts += _exposure_parts(exposures, shape)
    if shape and shape not in measured:
        parts.append(f"CoDeC on {SHAPE_LABELS.get(shape, shape)} files seen example by example: not measured")
    level = controls.get("exchangeability_level")
    if level:
        rates = ", ".join(
            f"{cell} {min(values):.3f}-{max(values):.3f}" for cell, values in level["rejects_at_alpha"].items()
        )
        parts.append(
            f"the exchangeability test's level on {level['files']} untouched files (random orders of each shard "
            f"resampled as the canonical one; rejections at p <= {level['alpha']:g} per shards x permutations): "
            f"{rates} (`{level['command']}`)"
        )
    diverse = controls.get("diverse_level")
    if diverse:
        files = diverse["files"]
        parts.append(
            f"on {files} untouched files of varied content ({diverse['source']}) CoDeC's binomial p against 1/2 was "
            f"<= {ALPHA} on {_share(diverse['codec_alone'], files)}"
        )
    return f"Measured with {controls['model']}: {'; '.join(parts)}; docs/dataset-tests.md, Controls."


def _exposure_parts(exposures: dict, shape: str | None) -> list[str]:
    """The exposure controls of one size (``exposures``: a summary of ``contamination_controls.py
    --exposure``) for files of ``shape`` (None: every shape measured): CoDeC's level on untouched files
    and on unseen files of the shape with the tuned models, its power on the files tuned on."""
    from pdd_metrics.verdict import CODEC_NULL_SCORE

    parts = []
    measured = exposures.get("shapes", {})
    for name in [shape] if shape in measured else [] if shape else list(measured):
        found = measured[name]
        untuned = found["untuned"]
        tuned = ", ".join(
            f"after {'/'.join(map(str, sorted(set(cells['optimizer_steps']))))} optimizer steps the tuned files scored "
            f"{'/'.join(f'{v:.3f}' for v in cells['file']['codec_scores'])} "
            f"({_share(cells['file']['codec_calibrated_rejects'], cells['file']['files'])} detected at this size) and "
            f"unseen files of the shape {'/'.join(f'{v:.3f}' for v in cells['unseen']['codec_scores'])} "
            f"({_share(cells['unseen']['codec_calibrated_rejects'], cells['unseen']['files'])} flagged)"
            for cells in found["tuned"].values()
        )
        parts.append(
            f"seen example by example ({SHAPE_LABELS.get(name, name)} files of {exposures['sizes']['examples']:,} "
            f"examples): CoDeC against its calibrated null ({CODEC_NULL_SCORE:g}) called "
            f"{_share(untuned['codec_calibrated_rejects'], untuned['files'])} untouched files contaminated, and with the models "
            f"tuned on each file ({exposures['sizes']['tuning_seeds']} seeds) {tuned} (`{found.get('command') or exposures['command']}`)"
        )
    return parts


def command_of(controls: dict, shape: str) -> str:
    """The command that measured the controls of ``shape``."""
    return ((controls.get("runs_of_shapes") or {}).get(shape) or {}).get("command") or controls["command"]


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table: the header, its rule and one line per row (a ``|`` inside a cell escaped)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


@dataclass(frozen=True)
class ContaminationChecks:
    """``pdd_contamination``'s results as a table: ``header``, one row per source task, one verdict
    line per task and the notes under the table."""

    header: list[str]
    rows: list[list[str]]
    verdicts: list[str]
    notes: list[str]

    def markdown(self) -> str:
        return (
            markdown_table(self.header, self.rows)
            + "\n\n"
            + "\n".join(f"- {line}" for line in self.verdicts)
            + "\n\n"
            + "\n".join(self.notes)
        )


def _verdict_text(task: str, decision, shape: str | None, controls: dict | None) -> str:
    from pdd_metrics.verdict import ALPHA, CODEC_NULL_SCORE

    def shown(test: str) -> str:
        if decision.adjusted[test] is None:
            return f"{TEST_LABELS[test]} did not apply"
        if test == "codec" and decision.reference:
            drops, n = decision.reference
            return (
                f"CoDeC against its reference of known-unseen examples (which scored {drops / n:.3f} of {n}) "
                f"Holm-adjusted p {decision.adjusted[test]:.3g}"
            )
        return f"{TEST_LABELS[test]} Holm-adjusted p {decision.adjusted[test]:.3g}"

    tests = ", ".join(shown(test) for test in decision.adjusted)
    rejecting = " and ".join(TEST_LABELS[test] for test, flag in decision.flags.items() if flag)
    missing = " and ".join(TEST_LABELS[test] for test, flag in decision.flags.items() if flag is None)
    why = {  # each built only for its verdict (CoDeC's p against 1/2 exists only where CoDeC applied)
        "contaminated": lambda: (
            f"contaminated: {' and '.join(decision.detected)} ({rejecting} "
            f"{'reject' if ' and ' in rejecting else 'rejects'} at {ALPHA} after Holm's correction over the table; {tests})"
        ),
        "inconclusive": lambda: (
            f"inconclusive: CoDeC's score is above 1/2 (the model has seen this benchmark or data of its "
            f"kind and format; Holm-adjusted p {decision.codec_half_adjusted:.3g}) but not above {CODEC_NULL_SCORE:g}, what "
            f"unseen data of a kind the model was tuned on scored in the controls, so CoDeC cannot tell which ({tests})"
        ),
        "not detected": lambda: (
            f"not detected: no test rejects at {ALPHA} after Holm's correction over the table ({tests}); "
            "that is no evidence of a clean benchmark, given the power below"
        ),
        "no verdict": lambda: (
            f'no verdict: it needs both CoDeC and the exchangeability test to say "not detected" ({missing} '
            f"did not apply, and no test that did rejects; {tests})"
        ),
    }[decision.verdict]()
    return f"**{task}: {why}.** {controls_line(controls, shape)}"


def contamination_checks(results: dict) -> ContaminationChecks | None:
    """A ``pdd_contamination`` run: per source task, its accuracy from the same results JSON (where the
    run evaluated it), CoDeC's score with its 95% interval and its p-value against the calibrated null
    (:func:`pdd_metrics.verdict.codec_calibrated_pvalue`), the exchangeability test's p-value, both
    Holm-adjusted across every p-value of the table, why a test did not apply, and a verdict that
    fires on either test and names what it detected (:func:`pdd_metrics.verdict.decide_table`),
    citing the measured level and power of each test (:func:`controls_line`). None without
    ``pdd_contamination`` in the results."""
    read = contamination_values(results)
    if read is None:
        return None
    values, summary, tasks, found, damaged = read.values, read.summary, read.tasks, read.found, read.damaged
    from pdd_metrics.verdict import CODEC_NULL_SCORE, decide_table

    decisions = decide_table(found)
    count = sum(p is not None for d in decisions.values() for p in d.p_values.values())
    controls = contamination_controls()
    header = [
        "task",
        "accuracy",
        "CoDeC score [95% CI] (examples)",
        f"CoDeC p (null {CODEC_NULL_SCORE:g}, or vs reference)",
        "exchangeability p (shards)",
        "Holm-adjusted p: CoDeC, exchangeability",
        "verdict",
        "not applied",
    ]
    rows, verdicts = [], []
    for task in tasks:
        decision = decisions[task]
        codec = codec_p = exchangeability = "-"
        if decision.p_values["codec"] is not None:
            codec = (
                f"{values[f'codec_score/{task},none']:.3f} [{values[f'codec_score_ci95_low/{task},none']:.3f}, "
                f"{values[f'codec_score_ci95_high/{task},none']:.3f}] ({values[f'codec_examples/{task},none']:.0f})"
            )
            codec_p = f"{decision.p_values['codec']:.3g}"
            if decision.reference:
                task_values = {m: values[f"reference_{m}/{task},none"] for m in TEST_KEYS["codec"]}
                codec += (
                    f"; reference {task_values['codec_score']:.3f} [{task_values['codec_score_ci95_low']:.3f}, "
                    f"{task_values['codec_score_ci95_high']:.3f}] ({task_values['codec_examples']:.0f})"
                )
                codec_p += " (vs reference)"
        if decision.p_values["exchangeability"] is not None:
            exchangeability = (
                f"{decision.p_values['exchangeability']:.3g} ({values[f'exchangeability_shards/{task},none']:.0f})"
            )
        holm = ", ".join(
            f"{decision.adjusted[t]:.3g}" if decision.adjusted[t] is not None else "-" for t in VERDICT_TESTS
        )
        reasons = [f"{test}: {why}" for test, why in read.not_applicable(task).items()]
        reasons += [
            f"{TEST_LABELS[test]}: not shown, the results JSON's "
            + "; ".join(
                f"{', '.join(found)} {what}"
                for found, what in (
                    ([k for k in keys if k in values and k.startswith("codec_examples") and values[k] == 0], "is 0"),
                    ([k for k in keys if k in values and values[k] is None], "is damaged (see the warnings)"),
                    ([k for k in keys if k not in values], "is missing"),
                )
                if found
            )
            for (name, test), keys in damaged.items()
            if name == task
        ]
        if (task, "codec") in damaged:
            codec = "n/a (damaged)"
        if (task, "exchangeability") in damaged:
            exchangeability = "n/a (damaged)"
        output_type = (results.get("configs", {}).get(task) or {}).get("output_type")
        verdicts.append(_verdict_text(task, decision, SHAPE_OF_OUTPUT_TYPE.get(output_type), controls))
        rows.append(
            [
                task,
                _accuracy(results["results"].get(task)),
                codec,
                codec_p,
                exchangeability,
                holm,
                decision.verdict,
                "; ".join(reasons) or "-",
            ]
        )
    notes = (
        []
        if summary
        else [
            "The results JSON holds no contamination summary (configs.pdd_contamination.metadata.contamination, "
            "which lm_eval writes): the tasks are read from the metric names, and why a test did not apply to a task "
            "is not known. Re-run lm_eval to write it again."
        ]
    )
    notes += [
        f"Holm's correction across the {count} p-value(s) of this table (every task's CoDeC and exchangeability "
        "test; family-wise error rate). Either test can call a task contaminated: CoDeC detects a benchmark seen "
        "example by example, the exchangeability test one seen in its published order. CoDeC's p-value is the "
        f"one-sided binomial test of its score against {CODEC_NULL_SCORE:g} (the upper 95% bound of the highest "
        "score measured on unseen data of a kind the model was tuned on), not against 1/2: a model that has seen "
        "data of a benchmark's kind scores its unseen examples far above 1/2 (docs/dataset-tests.md). Where a task "
        "has a reference of known-unseen examples of its kind (pdd_contamination's references), CoDeC's p-value is "
        "instead the one-sided Fisher exact test of the task's score against the reference's."
    ]
    return ContaminationChecks(header, rows, verdicts, notes)


def contamination_table(results: dict) -> str | None:
    """Markdown of :func:`contamination_checks`, or None without ``pdd_contamination`` in the results."""
    checks = contamination_checks(results)
    return checks.markdown() if checks else None


def left_out_note(results: dict) -> str | None:
    """One line naming the tasks of a run that a table leaves out, and why; None if none."""
    items = left_out(results)
    if not items:
        return None
    return "Not in this table: " + "; ".join(f"{task}: {why}" for task, why in items) + "."


def method_table(
    results: dict, metrics: tuple[str, ...] = ("auc", "tpr@fpr<5%"), counts: dict[str, Counts] | None = None
) -> str:
    """Markdown table: one row per method, one column per (pdd task, metric).

    The blind baseline is the first row where the run has it. Values are ``value ± stderr``, or
    ``value ± n/a`` where the results' standard error gives no interval (:func:`stderr_of`), or the
    value alone where the results hold no standard error at all. A method a task
    did not score is ``n/a``, explained under the table: Lowercase for a task run with
    ``lowercase: false`` (not applicable to Chinese, which has no letter case), anything else as
    missing from the results. A task run with ``convention: "reference-code"`` is named under the
    table (its scores are of other tokens), and so is every task of the run the table leaves out
    (:func:`left_out`). ``counts`` (task -> :class:`Counts`, e.g. from :meth:`Run.counts`) puts the
    member and non-member counts under the table, and a task with too few texts gets a bold warning
    as the first line under it; without ``counts`` the results JSON's totals are used. The table's
    header is always the first line.
    """
    tasks = pdd_tasks_of(results)
    if not tasks:
        skipped = [task for task, _ in left_out(results) if task.startswith("pdd_")]
        if skipped:
            raise ResultsError(
                f"No labelled pdd task in the results (no <method>_auc metric). {left_out_note(results)}"
            )
        raise ResultsError(
            "The results contain no labelled pdd task (no <method>_auc metric): was this an lm_eval run of "
            "the pdd tasks (--include_path $(lm-eval-pdd tasks-path) --tasks pdd_...)?"
        )
    counts = {
        task: (counts or {}).get(task) or Counts((results.get("n-samples", {}).get(task) or {}).get("effective"))
        for task in tasks
    }
    warnings = [f"**Too few texts** in {task}: {counts[task].too_few()}" for task in tasks if counts[task].too_few()]
    no_lowercase = [task for task in tasks if lowercase_off(results, task)]
    methods = [
        m
        for m in (BLIND, *METHOD_NAMES, EM_MIA)
        if any(f"{m}_auc,none" in results["results"][t] for t in tasks) or (m == "lowercase" and no_lowercase)
    ]
    header = ["method"] + [f"{task} {METRIC_LABELS[metric]}" for task in tasks for metric in metrics]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    missing, damaged = [], []
    for method in methods:
        name = BLIND_LABEL if method == BLIND else method_label(results, method, tasks)
        cells = [name]
        for task in tasks:
            for metric in metrics:
                values = results["results"][task]
                key = f"{method}_{metric},none"
                cells.append(_cell(values, f"{method}_{metric}"))
                if values.get(key) is None and not (method == "lowercase" and task in no_lowercase):
                    (damaged if key in values else missing).append(f"{name} {METRIC_LABELS[metric]} of {task}")
                elif (
                    key in values
                    and f"{method}_{metric}_stderr,none" in values
                    and (values[f"{method}_{metric}_stderr,none"] is None)
                ):
                    damaged.append(f"the standard error of {name} {METRIC_LABELS[metric]} of {task}")
        lines.append("| " + " | ".join(cells) + " |")
    notes = []
    if any(" ± n/a" in line for line in lines):
        notes.append(f"± n/a: {NO_STDERR_NOTE}")
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
    if damaged:
        notes.append(
            f"n/a: damaged in the results JSON (out of range, not a number, or NaN; the warnings name the file "
            f"and key): {', '.join(damaged)}."
        )
    reference_code = [task for task in tasks if task_settings(results, task).convention == "reference-code"]
    if note := convention_note(tasks, reference_code):
        notes.append(note)
    if note := left_out_note(results):
        notes.append(note)
    notes += [note for task in tasks if (note := repeats.note_of(results, task))]
    sizes = ", ".join(
        f"{task}: {counts[task].describe()}{_held_out(results, task)}"
        for task in tasks
        if counts[task].total is not None
    )
    problems = [f"Samples of {task}: {counts[task].problem}" for task in tasks if counts[task].problem]
    footer = "\n\n".join(warnings + notes + ([sizes] if sizes else []) + problems)
    return "\n".join(lines) + (f"\n\n{footer}" if footer else "")


def _held_out(results: dict, task: str) -> str:
    """How many documents a run held out of the scored set as ReCaLL prefix texts, if any."""
    record = (results.get("configs", {}).get(task, {}).get("metadata") or {}).get("recall_prefixes")
    return f" ({record['held_out']['count']} more held out as ReCaLL prefix texts)" if record else ""


def print_method_table(path: Path) -> str:
    """The method table of every run under ``path`` (one run: just its table; several: each under
    a heading naming its model and results file, oldest first), with the member and non-member
    counts of each task's samples file (:meth:`Run.counts`)."""
    runs = find_runs([Path(path)])
    try:
        if len(runs) == 1:
            return _run_table(runs[0])
        parts = []
        for run in runs:
            try:
                table = _run_table(run)
            except SamplesError:
                raise
            except ResultsError as error:
                table = f"(no pdd table: {error})"
            parts.append(f"### {run.model}: {run.file}\n\n{table}")
        return f"{len(runs)} runs under {path}:\n\n" + "\n\n".join(parts)
    finally:
        warn_bad_values(runs)


def _run_table(run: Run) -> str:
    """The method table of a run, and below it the contamination table where the run has one (a run of
    ``pdd_contamination`` beside standard tasks alone gets the contamination table only)."""
    contamination = contamination_table(run.results)
    if contamination and not pdd_tasks_of(run.results):
        return contamination
    table = method_table(run.results, counts={task: run.counts(task) for task in pdd_tasks_of(run.results)})
    return table + (f"\n\nContamination checks (pdd_contamination):\n\n{contamination}" if contamination else "")
