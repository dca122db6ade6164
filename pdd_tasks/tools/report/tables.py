"""The per-method table (``lm-eval-pdd table``), and the contamination table with its verdicts.

The method table has methods as rows and (task, metric) as columns, the blind baseline first where
the run has it, each value with its standard error where the results JSON has one. Every run found
is shown (a folder holding two runs gives two tables, oldest first). A run of ``pdd_contamination``
gets its contamination table (accuracy, each registered dataset-level test's value and p-values, the
verdict per standard task) and a verdict line per task (:func:`verdict_line`), citing the evidence
for the deciding test's level and power by its docs anchor. The report
(:mod:`pdd_tasks.tools.report.write`) shows the same tables. The runs are read by
:mod:`pdd_tasks.tools.results`; the contamination table formats a run's rows as
:func:`pdd_tasks.tools.results.contamination.run_contamination` reads them, and calls nothing back.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pdd_metrics.verdict import Decision
from pdd_tasks.dataset_tests import DATASET_TESTS
from pdd_tasks.dataset_tests.core import GROUP_EVIDENCE_ANCHOR
from pdd_tasks.loading import repeats
from pdd_tasks.loading.files import read_json
from pdd_tasks.registry import EM_MIA, METHOD_NAMES, label
from pdd_tasks.results_schema import BLIND
from pdd_tasks.tools.results.contamination import BenchmarkRow, RunContamination, TestRow, run_contamination
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


def _dataset_test_line(test, values: dict) -> str:
    """What a task that runs one dataset-level test alone (``pdd_codec``) found: its decisive number
    (its reading's ``shown``) and where its metrics are in the results JSON."""
    own = {key: values.get(f"{key},none") for key in test.reading.result_keys}
    number = (
        test.reading.shown(own, None)
        if all(isinstance(v, (int, float)) for v in own.values())
        else "n/a (damaged or missing)"
    )
    return (
        f"a dataset-level test ({test.title}), not a per-text membership score: {number} (results JSON: {test.name}_*)"
    )


def left_out(results: dict) -> list[tuple[str, str]]:
    """(task, why) for each task of a results JSON that the method table and report do not show (no
    member/non-member AUC): unlabelled pdd_custom runs, pdd_exchangeability, pdd_codec, other tasks. Groups are
    not listed (their tasks are). :func:`tasks_left_out` of the results as read here."""
    return tasks_left_out(results, pdd_tasks_of(results), run_contamination(results) is not None)


def tasks_left_out(results: dict, labelled: list[str], checked: bool) -> list[tuple[str, str]]:
    """:func:`left_out` of a run already read: ``labelled``, its labelled pdd tasks
    (:func:`pdd_tasks.tools.results.runs.pdd_tasks_of`); ``checked``, whether it has a contamination table."""
    shown_tasks = set(labelled) | _groups(results)
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
        elif test := next((t for t in DATASET_TESTS.values() if t.reading.result_keys[0] in keys), None):
            why = _dataset_test_line(test, values)
        elif task == "pdd_contamination":
            why = (
                "dataset-level contamination checks of standard tasks: the contamination table below"
                if checked
                else "dataset-level contamination checks of standard tasks, but the results JSON holds none of their "
                f"metrics ({', '.join(f'{t.reading.result_keys[0]}/<task>' for t in DATASET_TESTS.values())}), so "
                "there is no table to show: re-run "
                "lm_eval to write them"
            )
        elif task.startswith("pdd_"):
            why = "no member/non-member AUC in its results"
        else:
            why = "not a pdd membership task"
        out.append((task, why))
    return out


def _accuracy(row: BenchmarkRow) -> str:
    """A standard task's accuracy as ``name value ± stderr``, or a dash where the run did not evaluate it."""
    if not row.evaluated:
        return "- (not in this run)"
    found = row.accuracy
    if found is None:
        return "- (no accuracy metric)"
    key, value, stderr = found
    if value is None:
        return f"{key.split(',')[0]} n/a (damaged in the results JSON)"
    return f"{key.split(',')[0]} {value:.3f}" + (f" ± {stderr:.3f}" if stderr is not None else "")


#: The controls the verdict cites (written by ``benchmarks/contamination_controls.py --package-data``).
CONTROLS_FILE = "contamination_controls.json"

#: The exposure controls in :data:`CONTROLS_FILE`: files of 48 examples, and of CoDeC's default 1,000.
EXPOSURE_KEYS = ("exposure_controls", "exposure_controls_default_size")


def contamination_controls() -> dict | None:
    """The measured level and power of the verdict's rule (:data:`CONTROLS_FILE`, shipped), or None
    where the package has no such file; a shipped file that cannot be read is a broken install and
    raises :class:`DatasetError` naming it (not a silent "not measured")."""
    from pdd_tasks.loading.benchmark_data import PACKAGED_DATA

    file = PACKAGED_DATA / CONTROLS_FILE
    return read_json(Path(str(file))) if file.is_file() else None


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table: the header, its rule and one line per row (a ``|`` inside a cell escaped)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


@dataclass(frozen=True)
class ContaminationChecks:
    """``pdd_contamination``'s results as a table: ``header``, one row per source task, one verdict
    line per task (:func:`verdict_line`) and the notes under the table."""

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


#: The longest reason a verdict line quotes for a test that did not apply (the table has it whole).
REASON_CHARACTERS = 70


def verdict_line(row: BenchmarkRow, decision: Decision) -> str:
    """One task's verdict in one line of about 200 characters at most: the verdict, what was detected,
    the decisive number of each test that decides it (its reading's ``shown``) with its Holm-adjusted
    p-value, what would decide an "inconclusive" or "no verdict", and the docs anchor of the evidence
    for the deciding test's level and power (its reading's ``evidence_anchor``). The full numbers
    are in the table, the results JSON and ``contamination.json``.

    A group's line has the same form, its name marked with its count of leaves (:func:`benchmark_label`)
    and its evidence the group-level tests' (:data:`~pdd_tasks.dataset_tests.core.GROUP_EVIDENCE_ANCHOR`).

    ``row``: the task's row (:class:`pdd_tasks.tools.results.contamination.BenchmarkRow`); ``decision``: its
    verdict in the run's table (:attr:`~pdd_tasks.tools.results.contamination.RunContamination.decisions`)."""
    from pdd_metrics.verdict import ALPHA

    def number(test: str) -> str:
        return f"{DATASET_TESTS[test].reading.label} {row.tests[test].shown}, Holm p {decision.adjusted[test]:.2g}"

    applied = [test for test, flag in decision.flags.items() if flag is not None]
    if decision.verdict == "contaminated":
        deciding = decision.rejecting
        what = " and ".join(DATASET_TESTS[test].reading.detects for test in deciding)
        body = f"{what} ({'; '.join(map(number, deciding))})"
    elif decision.verdict == "inconclusive":
        deciding = [test for test, p in decision.kind_adjusted.items() if p is not None and p <= ALPHA]
        test = row.tests[deciding[0]]
        body = f"{DATASET_TESTS[test.test].reading.label} {test.shown}: {test.advice}"
    elif decision.verdict == "not detected":
        deciding = applied
        body = "; ".join(map(number, deciding))
    else:
        deciding = decision.missing
        reasons = row.not_applicable
        missing = []
        for test in deciding:
            why = reasons.get(test) or ("unusable values" if row.tests[test].unusable is not None else "not run")
            why = why if len(why) <= REASON_CHARACTERS else why[: REASON_CHARACTERS - 3].rstrip() + "..."
            missing.append(f"{DATASET_TESTS[test].reading.label} did not apply ({why})")
        body = "; ".join(missing + [number(test) for test in applied])
    anchor = DATASET_TESTS[deciding[0]].reading.evidence_anchor if deciding else None
    if row.leaves is not None and deciding:
        anchor = GROUP_EVIDENCE_ANCHOR  # the group-level tests' own level and power
    return f"{benchmark_label(row)}: {decision.verdict}: {body}" + (f" [evidence: {anchor}]" if anchor else "")


def benchmark_label(row: BenchmarkRow) -> str:
    """A row's name: a leaf task as it is, a group marked with its count of leaves (``bbh (group of 24)``)."""
    if row.leaves is not None:
        return f"{row.name} (group of {row.leaves})"
    return row.name


def contamination_checks(results: dict) -> ContaminationChecks | None:
    """:func:`checks_table` of a results JSON's ``pdd_contamination`` results
    (:func:`pdd_tasks.tools.results.contamination.run_contamination`); None without them."""
    read = run_contamination(results)
    return None if read is None else checks_table(read)


def _test_cells(test: TestRow, decision: Decision) -> list[str]:
    """A test's three cells in a row of the table: its decisive number, its p-value (" (vs reference)" where it
    was tested against one) and its Holm-adjusted value; "n/a (damaged)" or dashes where it is not shown."""
    if test.unusable is not None:
        return ["n/a (damaged)", "-", "-"]
    if decision.p_values[test.test] is None:
        return ["-", "-", "-"]
    reference = " (vs reference)" if test.reference is not None else ""
    return [test.shown, f"{decision.p_values[test.test]:.3g}{reference}", f"{decision.adjusted[test.test]:.3g}"]


def _not_applied(row: BenchmarkRow, labels: dict[str, str]) -> str:
    """The table's "not applied" cell: why each test did not apply (the run's summary), then each test whose
    values are unusable and why (damaged, missing, no p-value); "-" where none."""
    reasons = [f"{labels[test]}: {why}" for test, why in row.not_applicable.items() if test in labels]
    reasons += [
        f"{labels[test.test]}: not shown, the results JSON's "
        + "; ".join(
            f"{', '.join(found)} {what}"
            for found, what in (
                (test.damaged_keys, "is damaged (see the warnings)"),
                (test.missing_keys, "is missing"),
                (test.no_p_value_keys, "gives no p-value (e.g. no example scored)"),
            )
            if found
        )
        for test in row.tests.values()
        if test.unusable is not None
    ]
    return "; ".join(reasons) or "-"


def checks_table(read: RunContamination) -> ContaminationChecks:
    """A ``pdd_contamination`` run as a table: per source task, its accuracy from the same results JSON (where the
    run evaluated it), each registered dataset-level test's decisive number (its reading's ``shown``),
    its p-value and its Holm-adjusted value across every p-value of the table, why a test did not apply,
    and a verdict that fires on any test and names what it detected
    (:func:`pdd_metrics.verdict.decide_table`), with one verdict line per task (:func:`verdict_line`).
    After the leaf tasks, one row per group of the run (its group-level tests), whose p-values join the
    table's Holm family. ``read``: the run's rows, as
    :func:`pdd_tasks.tools.results.contamination.run_contamination` reads and decides them."""
    from pdd_metrics.verdict import ALPHA

    labels = {name: test.reading.label for name, test in DATASET_TESTS.items()}
    header = ["task", "accuracy"]
    for name in labels.values():
        header += [name, f"{name} p", f"{name} Holm p"]
    header += ["verdict", "not applied"]
    rows, verdicts = [], []
    for row in read.benchmarks:
        decision = read.decisions[row.name]
        cells = [cell for test in DATASET_TESTS for cell in _test_cells(row.tests[test], decision)]
        verdicts.append(verdict_line(row, decision))
        rows.append([benchmark_label(row), _accuracy(row), *cells, decision.verdict, _not_applied(row, labels)])
    notes = (
        []
        if read.has_summary
        else [
            "The results JSON holds no contamination summary (configs.pdd_contamination.metadata.contamination, "
            "which lm_eval writes): the tasks are read from the metric names, and why a test did not apply to a task "
            "is not known. Re-run lm_eval to write it again."
        ]
    )
    controls = contamination_controls()
    notes += [
        f"Holm's correction across the {read.p_values} p-value(s) of this table (every test of every task; family-wise "
        f"error rate {ALPHA}); any test can call a task contaminated, each for the exposure it detects. "
        + VERDICT_RULE
        + (f" Level and power measured with {controls['model']}." if controls and controls.get("model") else "")
    ]
    if read.groups:
        notes.append(GROUP_NOTE)
    return ContaminationChecks(header, rows, verdicts, notes)


#: Under a contamination table or board that has group rows.
GROUP_NOTE = (
    'A group\'s row ("group of N": N leaf tasks, through its nested groups) is one more benchmark, tested from its '
    "leaves' results with no new request: CoDeC on the leaves' examples pooled (summed drops and examples), the "
    "exchangeability test by Fisher's combination of the leaves' p-values. Its p-values join Holm's family like a "
    "leaf's. Level and power: docs/" + GROUP_EVIDENCE_ANCHOR + "."
)


#: What the verdicts mean and where the evidence is, under every contamination table and board.
VERDICT_RULE = (
    "contaminated: a test rejects; inconclusive: none does, but CoDeC's score is significantly above 1/2 and not "
    "above what unseen data of its kind scored in the controls (a reference of known-unseen examples decides it); not "
    "detected: none does and every test applied (no evidence of a clean benchmark); no verdict: none does and a test "
    "did not apply. The rule, its measured level and power: docs/verdict.md#the-verdict-either-test-each-for-its-own-kind-of-exposure."
)


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
