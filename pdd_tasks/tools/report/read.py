"""The report's first stage: the runs under the paths given, read once into what the report needs.

:func:`read_runs` finds the runs (:func:`pdd_tasks.tools.results.runs.find_runs`) and reads, per run and
labelled pdd task, the task's values, its settings, its counts and (where the samples file holds the
texts the results JSON counts, :meth:`~pdd_tasks.tools.results.runs.Run.counts`) its samples; every run's
``pdd_contamination`` results as rows, decided per run and per model
(:func:`pdd_tasks.tools.results.contamination.read_contamination`); and the warnings to print about the
runs (damaged values, a model named two ways). The later stages
(:mod:`~pdd_tasks.tools.report.model`, :mod:`~pdd_tasks.tools.report.plots`,
:mod:`~pdd_tasks.tools.report.render`, :mod:`~pdd_tasks.tools.report.write`) take this reading and do
not go back to the files.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from pdd_tasks.registry import ScoringSettings
from pdd_tasks.tools.results.contamination import ContaminationReading, read_contamination
from pdd_tasks.tools.results.runs import (
    Counts,
    Run,
    bad_value_lines,
    find_runs,
    model_spellings,
    pdd_tasks_of,
    task_settings,
)


@dataclass(frozen=True)
class TaskRead:
    """One labelled pdd task of one run, as read."""

    run: Run
    task: str
    values: dict  # the results JSON's values of the task
    settings: ScoringSettings
    counts: Counts  # the texts scored; classes only where the samples file holds the results' texts
    too_few: str | None  # :meth:`Counts.too_few`
    samples: list[dict] | None  # None without a samples file, or where it is not the results' texts


@dataclass(frozen=True)
class Reading:
    """Every run under ``paths`` (in the order given) and what the report needs of them."""

    paths: list[Path]
    runs: list[Run]
    labelled: dict[Run, list[str]]  # each run's labelled pdd tasks (pdd_tasks_of)
    tasks: list[TaskRead]
    contamination: ContaminationReading  # the runs' pdd_contamination results, as rows
    damaged: list[str]  # the damaged values of the results JSONs, one line each
    warnings: list[str]  # what to print on stderr once the report is done (or failed)


def _read_task(run: Run, task: str) -> TaskRead:
    counts = run.counts(task)
    samples = run.samples(task) if counts.members is not None else None
    settings = task_settings(run.results, task)
    return TaskRead(run, task, run.results["results"][task], settings, counts, counts.too_few(), samples)


def read_runs(paths: list[Path]) -> Reading:
    """Read every run under ``paths`` (module docstring). A samples file that cannot be read raises
    :class:`~pdd_tasks.tools.results.runs.SamplesError` once the warnings about the runs read so far
    are printed."""
    runs = find_runs(paths)
    labelled = {run: pdd_tasks_of(run.results) for run in runs}
    try:
        tasks = [_read_task(run, task) for run in runs for task in labelled[run]]
    except BaseException:
        for line in [*bad_value_lines(runs), *model_spellings(runs)]:
            print(line, file=sys.stderr)
        raise
    bad, spellings = bad_value_lines(runs), model_spellings(runs)
    damaged = [line.removeprefix("warning: ") for line in bad]
    return Reading(list(paths), runs, labelled, tasks, read_contamination(runs), damaged, [*bad, *spellings])
