"""Reading lm-eval output folders: the runs under a path, each run's results JSON (its values
checked first, :mod:`pdd_tasks.tools.results.values`), its ``--log_samples`` records and how many
texts each task scored.

A path is an lm_eval ``--output_path`` folder (every ``results_*.json`` below it is a run, oldest
first) or a results file; anything else is a :class:`ResultsError` whose message says the fix.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from pdd_tasks.errors import UserError
from pdd_tasks.loading.files import DatasetError, read_json, read_jsonl
from pdd_tasks.registry import EM_MIA, METHOD_NAMES, SETTINGS, ScoringSettings
from pdd_tasks.results_schema import BLIND
from pdd_tasks.tools.results.counts import Counts, counts_of
from pdd_tasks.tools.results.values import BadValue, check_results


_FIX = (
    "Pass the --output_path folder of an lm_eval run of the pdd tasks (it holds "
    "<model>/results_<date>.json, and samples_<task>_<date>.jsonl with --log_samples), or a results_*.json file."
)


class ResultsError(UserError):
    """A path that is not an lm_eval output folder or results file; the message says the fix."""


class SamplesError(ResultsError):
    """A ``--log_samples`` file that cannot be read (e.g. cut mid-line); the message names the file,
    the line and the fix."""


def results_files(path: Path) -> list[Path]:
    """``path`` itself if it is a file, else every ``results_*.json`` below it, oldest first
    (by the date in the name, which lm_eval writes sortably)."""
    path = Path(path)
    if not path.exists():
        raise ResultsError(f"{path} does not exist. {_FIX}")
    if path.is_file():
        return [path]
    found = sorted(path.rglob("results_*.json"), key=lambda p: (p.name, str(p)))
    files = [file for file in found if file.is_file()]  # a folder of that name is no results file
    if not files:
        folders = [str(folder) for folder in [path, *found] if folder.is_dir() and folder.match("results_*.json")]
        named = f" ({', '.join(folders[:3])} {'is a folder' if len(folders) == 1 else 'are folders'}, not a file)"
        raise ResultsError(
            f"{path} is not an lm_eval output folder: no results_*.json file below it{named if folders else ''}. {_FIX}"
        )
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


def read_checked_results(file: Path) -> tuple[dict, list[BadValue]]:
    """:func:`read_results`, its values checked (:func:`pdd_tasks.tools.results.values.check_results`):
    a value that is not what its key holds is None in the dict returned, and named in the list."""
    return check_results(read_results(file), file)


def bad_value_lines(runs: list[Run]) -> list[str]:
    """A warning line (file and key) for every damaged value of ``runs`` read so far."""
    return [bad.line() for run in runs if "_checked" in run.__dict__ for bad in run.bad_values]


def warn_bad_values(runs: list[Run]) -> None:
    """Print :func:`bad_value_lines` on stderr."""
    for line in bad_value_lines(runs):
        print(line, file=sys.stderr)


def pdd_tasks_of(results: dict) -> list[str]:
    """The labelled pdd tasks of a results JSON (those with a method's or the blind AUC), by name."""
    prefixes = (*METHOD_NAMES, EM_MIA, BLIND)
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
    _samples: dict = field(default_factory=dict, init=False, repr=False, compare=False, hash=False)

    @cached_property
    def _checked(self) -> tuple[dict, list[BadValue]]:
        return read_checked_results(self.file)

    @property
    def results(self) -> dict:
        """The results JSON, every value that is not what its key holds replaced by None."""
        return self._checked[0]

    @property
    def bad_values(self) -> list[BadValue]:
        """The values of the results JSON that are not what their keys hold (shown as n/a)."""
        return self._checked[1]

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

    @property
    def model_identity(self) -> str:
        """The model :attr:`model` names, as :func:`model_identity` resolves it: two runs of one model
        given by two spellings of its path share it."""
        return model_identity(self.model)

    def samples_file(self, task: str) -> Path | None:
        """``samples_<task>_<timestamp>.jsonl`` beside the results file, or None (no --log_samples)."""
        file = self.file.parent / f"samples_{task}_{self.timestamp}.jsonl"
        return file if file.is_file() else None

    def samples(self, task: str) -> list[dict] | None:
        """The ``--log_samples`` records of ``task`` (:func:`pdd_tasks.loading.files.read_jsonl`), or None.

        Raises:
            SamplesError: the file is not JSON Lines (e.g. cut mid-line by an interrupted run); the
                message names the file and line and the fix.
        """
        if task not in self._samples:
            file = self.samples_file(task)
            try:
                self._samples[task] = None if file is None else read_jsonl(file)
            except DatasetError as error:
                raise SamplesError(
                    f"{error} That is the --log_samples file of {task} in the run {self.file}; a file cut mid-line "
                    "is what an interrupted run or a full disk leaves. Re-run lm_eval with --log_samples to "
                    f"write it again, or remove {file} to report the run from its results JSON alone (no plots, "
                    "no member/non-member counts)."
                ) from None
        return self._samples[task]

    def total(self, task: str) -> int | None:
        """The texts ``task`` scored as the results JSON counts them (``n-samples``), None where it does not."""
        total = (self.results.get("n-samples", {}).get(task) or {}).get("effective")
        return total if isinstance(total, int) and not isinstance(total, bool) else None

    def counts(self, task: str) -> Counts:
        """The texts ``task`` scored (:func:`pdd_tasks.tools.results.counts.counts_of` its total and its
        samples file)."""
        return counts_of(self.total(task), self.samples_file(task), self.samples(task), self.file.name)


def model_identity(name: str) -> str:
    """The model a ``pretrained=`` name stands for, so that two spellings of one model are one model
    (one row of the contamination leaderboard, one Holm family).

    - A name that exists as a path from the current directory is a local model: its real path
      (:func:`os.path.realpath`: absolute, symbolic links followed, a trailing ``/`` and ``./`` gone).
      A relative path in a results JSON is relative to the folder lm_eval ran in, which the JSON does
      not record; the report resolves it from the folder it runs in, so run it from there to have a
      relative name and an absolute one taken as one model.
    - Any other name (a Hub id such as ``EleutherAI/pythia-160m``, or a path of another machine) is
      compared as written, less what cannot change the folder it names (:func:`os.path.normpath`: a
      trailing ``/``, ``./``, ``//``); a Hub id is unchanged by it.

    >>> model_identity("org/no-such-model/") == model_identity("./org//no-such-model") == "org/no-such-model"
    True
    """
    name = name.strip()
    if not name:
        return name
    if os.path.exists(name):
        return os.path.realpath(name)
    return os.path.normpath(name)


#: The line for one model named in several ways (:func:`model_spellings`): ``{count}`` names, ``{names}``
#: (``'name' in <results file>``, ...), ``{identity}``; the warning on stderr, and the contamination board's note.
SPELLINGS_LINE = (
    "the runs name one model in {count} ways ({names}); all are {identity}, so the report takes them as one model "
    "(one row of the contamination leaderboard, one Holm family). Name a model one way in every run to keep this "
    "warning away."
)


def spelling_lines(runs: list[Run]) -> list[str]:
    """:data:`SPELLINGS_LINE` of each model that ``runs`` name in more than one way (:func:`model_identity`),
    each name with the first run that gives it; none where every model is named one way."""
    names: dict[str, dict[str, Run]] = {}
    for run in runs:
        names.setdefault(run.model_identity, {}).setdefault(run.model, run)
    return [
        SPELLINGS_LINE.format(
            count=len(spelt),
            names=", ".join(f"{name!r} in {run.file}" for name, run in spelt.items()),
            identity=identity,
        )
        for identity, spelt in names.items()
        if len(spelt) > 1
    ]


def model_spellings(runs: list[Run]) -> list[str]:
    """A warning line per model that ``runs`` (those read so far) name in more than one way
    (:func:`spelling_lines`): the names, a run of each, and that the report takes them as one model;
    none where every model is named one way."""
    return [f"warning: {line}" for line in spelling_lines([run for run in runs if "_checked" in run.__dict__])]


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


def lowercase_off(results: dict, task: str) -> bool:
    """Whether the task ran with ``lowercase: false`` (e.g. Chinese text, which has no letter case)."""
    metadata = results.get("configs", {}).get(task, {}).get("metadata") or {}
    return metadata.get("lowercase") is False


@dataclass(frozen=True)
class TaskRead:
    """One labelled pdd task of one run, as read (:func:`read_labelled_runs`)."""

    run: Run
    task: str
    values: dict  # the results JSON's values of the task
    settings: ScoringSettings
    counts: Counts  # the texts scored; classes only where the samples file holds the results' texts
    too_few: str | None  # :meth:`Counts.too_few`
    samples: list[dict] | None  # None without a samples file, or where it is not the results' texts


@dataclass(frozen=True)
class RunsRead:
    """Every run under the paths given (in the order given) and what a report needs of them
    (:func:`read_labelled_runs`): ``labelled``, each run's labelled pdd tasks (:func:`pdd_tasks_of`);
    ``tasks``, each of them read; ``bad_values`` and ``spellings``, the warnings about the runs
    (:func:`bad_value_lines`, :func:`model_spellings`)."""

    runs: list[Run]
    labelled: dict[Run, list[str]]
    tasks: list[TaskRead]
    bad_values: list[str]
    spellings: list[str]


def _read_task(run: Run, task: str) -> TaskRead:
    """``task`` of ``run``: its values, settings and total, then its samples file and the counts from it."""
    settings, total, file = task_settings(run.results, task), run.total(task), run.samples_file(task)
    samples = run.samples(task)
    counts = counts_of(total, file, samples, run.file.name)
    kept = samples if counts.members is not None else None
    return TaskRead(run, task, run.results["results"][task], settings, counts, counts.too_few(), kept)


def read_labelled_runs(paths: list[Path]) -> RunsRead:
    """Every run under ``paths`` (:func:`find_runs`), its results JSON checked, and per run and labelled pdd
    task its values, settings, counts and (where the samples file holds the texts the results JSON counts)
    its samples, in one pass (:class:`RunsRead`). A samples file that cannot be read raises
    :class:`SamplesError` once the warnings about the runs are printed."""
    runs = find_runs(paths)
    labelled = {run: pdd_tasks_of(run.results) for run in runs}  # every results JSON read and checked
    bad, spellings = bad_value_lines(runs), model_spellings(runs)
    try:
        tasks = [_read_task(run, task) for run in runs for task in labelled[run]]
    except BaseException:
        for line in [*bad, *spellings]:
            print(line, file=sys.stderr)
        raise
    return RunsRead(runs, labelled, tasks, bad, spellings)
