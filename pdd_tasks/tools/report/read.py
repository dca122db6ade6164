"""The report's first stage: the runs under the paths given, read once into what the report needs.

:func:`read_runs` reads the runs and, per run and labelled pdd task, the task's values, its settings, its
counts and (where the samples file holds the texts the results JSON counts) its samples, in one call
(:func:`pdd_tasks.tools.results.runs.read_labelled_runs`); every run's
``pdd_contamination`` results as rows, decided per run and per model
(:func:`pdd_tasks.tools.results.contamination.read_contamination`); and the warnings to print about the
runs (damaged values, a model named two ways). The later stages
(:mod:`~pdd_tasks.tools.report.model`, :mod:`~pdd_tasks.tools.report.plots`,
:mod:`~pdd_tasks.tools.report.render`, :mod:`~pdd_tasks.tools.report.write`) take this reading and do
not go back to the files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pdd_tasks.tools.results.contamination import ContaminationReading, read_contamination
from pdd_tasks.tools.results.runs import Run, TaskRead, read_labelled_runs


__all__ = ["Reading", "TaskRead", "read_runs"]


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


def read_runs(paths: list[Path]) -> Reading:
    """Read every run under ``paths`` (module docstring): the runs and their tasks in one call
    (:func:`~pdd_tasks.tools.results.runs.read_labelled_runs`), then their contamination results
    (:func:`~pdd_tasks.tools.results.contamination.read_contamination`). A samples file that cannot be read
    raises :class:`~pdd_tasks.tools.results.runs.SamplesError` once the warnings about the runs are printed."""
    read = read_labelled_runs(paths)
    contamination = read_contamination(read.runs)
    damaged = [line.removeprefix("warning: ") for line in read.bad_values]
    warnings = [*read.bad_values, *read.spellings]
    return Reading(list(paths), read.runs, read.labelled, read.tasks, contamination, damaged, warnings)
