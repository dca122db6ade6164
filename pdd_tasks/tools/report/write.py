"""``lm-eval-pdd report``: an HTML page, a Markdown file, PNG plots and a leaderboard from runs.

    lm-eval-pdd report OUTPUT_PATH... --out DIR [--force]

Reads every run (results JSON, and the samples of ``--log_samples``) under the given lm_eval
output folders and writes to DIR:

- ``report.html``: self-contained (inline CSS, the plots embedded as data URIs);
- ``report.md``: the same content, the plots as the PNG files beside it;
- per run and task, ``roc_<task>_<run>.png`` (every method's ROC curve on one plot, FPR on a log
  scale as the membership-inference literature draws them) and ``scores_<task>_<run>.png``
  (member and non-member score histograms, one panel per method);
- ``leaderboard.csv`` and ``leaderboard.json``: one row per (model, task, method), the columns of
  :data:`~pdd_tasks.tools.report.model.LEADERBOARD_COLUMNS`;
- where the runs hold ``pdd_contamination`` results, ``contamination.csv`` and ``contamination.json``:
  the contamination leaderboard, a models x benchmarks matrix of verdicts, Holm's correction per model
  (:mod:`pdd_tasks.tools.report.contamination_board`), also a section of both documents (in the HTML a
  grid coloured by verdict, groups folding to their tasks), and ``contamination.png``, its heat map
  (:mod:`pdd_tasks.tools.report.board_view`).

A run of ``pdd_contamination`` gets its contamination table (accuracy, CoDeC, exchangeability, Holm,
verdict per standard task) and verdict lines (:func:`pdd_tasks.tools.report.tables.contamination_checks`)
in both documents, also when the run has no labelled pdd task.

Every number of the tables is the results JSON's (value and ``_stderr``); the 95% interval is
``value -/+ 1.96 stderr`` clipped to [0, 1] (:func:`pdd_metrics.intervals.normal_interval`). The
plots need the per-text scores, so a run without ``--log_samples`` gets its tables only (and says
so). The blind baseline's per-text items are the texts; its plotted scores are recomputed with the
same out-of-fold classifier the harness ran (:func:`pdd_metrics.blind.blind_scores`, fixed seed).

What a reader must not miss is written beside the numbers (docs/report.md, "What the report
marks"): a task with too few texts of a class, an AUC interval that cannot be computed, the
``reference-code`` convention, the settings in which runs of one model and task differ
(:func:`~pdd_tasks.tools.report.model.differing_settings`), a samples file that does not hold the texts the results JSON counts
(:meth:`pdd_tasks.tools.results.runs.Run.counts`), and the tasks left out (:func:`pdd_tasks.tools.report.tables.left_out`).

The report is made in stages, its data flowing one way (docs/architecture.md, "The tools package"):
:mod:`~pdd_tasks.tools.report.read` (the runs, read once) -> :mod:`~pdd_tasks.tools.report.model` (what the
report shows, as data) -> :mod:`~pdd_tasks.tools.report.plots` and :mod:`~pdd_tasks.tools.report.render` (the
PNGs and the documents) -> this module, which writes them (:func:`write_report`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from pdd_tasks.tools.outputs import make_shareable, not_written, refuse_path_through_a_file, refuse_unsafe_output
from pdd_tasks.tools.report.board_view import BOARD_IMAGE, BOARD_IMAGE_TITLE
from pdd_tasks.tools.report.contamination_board import CONTAMINATION_FILES
from pdd_tasks.tools.report.model import build_report
from pdd_tasks.tools.report.plots import draw_plots
from pdd_tasks.tools.report.read import read_runs
from pdd_tasks.tools.report.render import REPORT_FILES, REPORT_TITLE, render
from pdd_tasks.tools.results.runs import ResultsError


class ReportExists(ResultsError):
    """The output folder already holds a report and --force was not given, or holds a file of a report's
    name that no report wrote (its mark: :func:`carries_report_mark`), which --force does not replace."""


def carries_report_mark(path: Path) -> bool:
    """Whether ``path`` (a file of a report's name in ``--out``) reads as this command wrote it: the report's
    title in ``report.md`` / ``report.html``, a leaderboard's columns in ``leaderboard.csv`` /
    ``contamination.csv`` (their first three), a list of leaderboard rows in ``leaderboard.json``, the board's
    keys in ``contamination.json``, the heat map's title in ``contamination.png``. ``--force`` replaces only
    such files: a user's own ``leaderboard.csv`` is kept."""
    if path.name == BOARD_IMAGE:
        try:
            with path.open("rb") as stream:
                head = stream.read(4096)  # matplotlib writes the text chunks before the image data
        except OSError:
            return False
        return head.startswith(b"\x89PNG") and b"Title\x00" + BOARD_IMAGE_TITLE.encode() in head
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    first = text.split("\n", 1)[0].strip()
    if path.name == "report.md":
        return first == f"# {REPORT_TITLE}"
    if path.name == "report.html":
        return f"<title>{REPORT_TITLE}</title>" in text[:2000]
    if path.name in ("leaderboard.csv", "contamination.csv"):
        return first.startswith("model,run,task," if path.name == "leaderboard.csv" else "model,benchmark,")
    try:
        document = json.loads(text)
    except ValueError:
        return False
    if path.name == "leaderboard.json":
        return isinstance(document, list) and all(isinstance(row, dict) and "method" in row for row in document)
    if path.name == "contamination.json":
        return isinstance(document, dict) and {"models", "benchmarks", "matrix", "rows"} <= set(document)
    return False


#: The staging folders of :func:`staged_report` (a glob: in ``--out``, and beside a new ``--out`` named DIR).
STAGING_INSIDE, STAGING_BESIDE = ".report-new-*", ".{name}-new-*"


def _in_use(folder: Path) -> bool | None:
    """Whether a report running now holds ``folder`` (its lock: :func:`_lock`); None where locks are not
    available here."""
    try:
        import fcntl
    except ImportError:
        return None
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:
        return True  # gone or unreadable: not ours to remove
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(handle)  # closing releases the lock
    return False


def _lock(folder: Path) -> int | None:
    """Hold ``folder`` (a staging folder) locked while the report is written: a report killed midway
    releases the lock with its process, so a later run knows the folder is a leftover. Returns the handle
    to close, or None where locks are not available."""
    try:
        import fcntl
    except ImportError:
        return None
    handle = os.open(folder, os.O_RDONLY)
    fcntl.flock(handle, fcntl.LOCK_EX)
    return handle


def remove_leftover_staging(out: Path) -> None:
    """Remove the staging folders an interrupted report (killed, out of power) left in or beside ``out``:
    only folders of :func:`staged_report`'s own names (:data:`STAGING_INSIDE`, :data:`STAGING_BESIDE`), and
    only those no running report holds; each is named on stderr. Where the lock cannot be read (no
    ``fcntl``) the folders are named, not removed."""
    found = [*out.glob(STAGING_INSIDE)] if out.is_dir() else []
    if out.parent.is_dir():
        found += out.parent.glob(STAGING_BESIDE.format(name=glob_escape(out.name)))
    for folder in sorted(path for path in found if path.is_dir() and not path.is_symlink()):
        in_use = _in_use(folder)
        if in_use is None:
            print(
                f"warning: {folder} is the staging folder of a report that did not finish; remove it.", file=sys.stderr
            )
        elif not in_use:
            shutil.rmtree(folder, ignore_errors=True)
            print(f"note: removed {folder}, the staging folder of a report that did not finish.", file=sys.stderr)


def glob_escape(name: str) -> str:
    """``name`` with the glob characters ``*?[`` taken literally."""
    return re.sub(r"([*?\[])", r"[\1]", name)


def write_report(paths: list[Path], out: Path, force: bool = False) -> list[Path]:
    """Write the report of every run under ``paths`` to ``out``; returns the files written.

    The stages in turn: read the runs (:func:`~pdd_tasks.tools.report.read.read_runs`), build the report
    (:func:`~pdd_tasks.tools.report.model.build_report`), draw the plots
    (:func:`~pdd_tasks.tools.report.plots.draw_plots`) and render the documents
    (:func:`~pdd_tasks.tools.report.render.render`) into a staging folder, moved into ``out`` at the end
    (:func:`staged_report`).

    Raises:
        ResultsError: a path is not an lm_eval output folder, or holds no labelled pdd task.
        ReportExists: ``out`` holds a report already and ``force`` is false.
    """
    out = Path(out)
    refuse_unsafe_output(out, paths, option="--out")  # before any run is read
    reading = read_runs(paths)
    try:
        report = build_report(reading)
        refuse_to_replace(out, force)
        with staged_report(out) as staging:
            images = draw_plots(report, staging)
            documents = render(report, images)
            for name, text in documents.items():
                (staging / name).write_text(text, newline="" if name.endswith(".csv") else None)
        if report.contamination is None:  # an earlier report's matrix (--force) would be read as this one's
            for name in (*CONTAMINATION_FILES, BOARD_IMAGE):
                (out / name).unlink(missing_ok=True)
        return [out / name for name in (*images, *documents)]
    finally:
        for line in reading.warnings:
            print(line, file=sys.stderr)


def refuse_to_replace(out: Path, force: bool) -> None:
    """Refuse an ``out`` that is a file, one that holds a report already (without ``force``) and one that
    holds a file of a report's name that no report wrote (:func:`carries_report_mark`)."""
    if out.exists() and not out.is_dir():
        raise ResultsError(f"--out {out} is a file; name a folder for the report.")
    existing = [out / name for name in (*REPORT_FILES, *CONTAMINATION_FILES, BOARD_IMAGE) if (out / name).exists()]
    if existing and not force:
        raise ReportExists(
            f"{out} already holds a report ({', '.join(p.name for p in existing)}); pass --force to overwrite its "
            "files, or choose another --out folder."
        )
    foreign = [path for path in existing if not carries_report_mark(path)]
    if foreign:
        raise ReportExists(
            f"{out} holds {', '.join(p.name for p in foreign)}, of a report file's name but not written by "
            "lm-eval-pdd report (not its content), which --force does not replace. Move "
            f"{'it' if len(foreign) == 1 else 'them'} out of the folder, or choose another --out folder."
        )


@contextlib.contextmanager
def staged_report(out: Path) -> Iterator[Path]:
    """A staging folder for the report's files (yielded), moved into ``out`` when the block ends.

    A missing ``out`` is the staging folder itself, renamed into place in one step. Into an existing
    ``out`` (which may hold other files of the user's) each file is renamed in turn, ``report.html``
    last, each rename whole: a reader never finds half a file, and a failure leaves no new file. An
    ``OSError`` (read-only folder or mount, full disk) is an
    :class:`~pdd_tasks.tools.outputs.OutputNotWritten` naming ``out`` and the cause; the staging folder
    is removed. The staging folder is locked while in use; those a killed report left are removed first
    (:func:`remove_leftover_staging`).
    """
    refuse_path_through_a_file(out, "--out")
    lock = None
    try:
        remove_leftover_staging(out)
        if out.is_dir():
            staging = Path(tempfile.mkdtemp(prefix=STAGING_INSIDE.removesuffix("*"), dir=out))
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(
                tempfile.mkdtemp(prefix=STAGING_BESIDE.format(name=out.name).removesuffix("*"), dir=out.parent)
            )
        lock = _lock(staging)
        make_shareable(staging)
    except OSError as error:
        raise not_written(out, error, "--out") from None
    try:
        yield staging
        if staging.parent != out:
            os.replace(staging, out)
            return
        last = [staging / name for name in ("report.md", "report.html")]
        for path in [*(p for p in sorted(staging.iterdir()) if p not in last), *last]:
            os.replace(path, out / path.name)
        staging.rmdir()
    except OSError as error:
        shutil.rmtree(staging, ignore_errors=True)
        raise not_written(out, error, "--out") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        if lock is not None:
            os.close(lock)
