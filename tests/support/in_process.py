"""Run a command line's ``main`` inside the test process, as its console script would run it.

A new ``lm_eval`` process costs 5-10 s of imports and about 15 s for lm-eval's index of its ~14,000
task YAMLs (``TaskIndex.build``), the same in every run; the scoring the tests check takes a second.
So the tests run the real entry points (``lm_eval``'s ``cli_evaluate``, ``lm-eval-pdd``'s ``main``)
here, and lm-eval's own task folder is indexed once per test session (:func:`cache_builtin_task_index`).

:func:`run_in_process` gives what the process would: a :class:`subprocess.CompletedProcess` with the
exit status, stdout and stderr. Inside, for the run only: ``sys.argv`` and the current folder are the
command's; stdout and stderr (``print``, tqdm, warnings, lm-eval's log handler) go to buffers; an
uncaught exception is printed as the console script would print it, a :class:`~pdd_tasks.errors.UserError`
as its message under ``lm_eval`` (the excepthook patch ``show-user-errors`` sets exactly that hook in
that program), and exits with status 1. What stays real processes (the tests say why where they do):
the excepthook itself under ``lm_eval``, ``LM_EVAL_PDD_TRACEBACK``, a stock task alone (before any pdd
task has patched lm-eval in this process), ``accelerate launch``, and servers.
"""

from __future__ import annotations

import contextlib
import gc
import io
import logging
import os
import pickle
import subprocess
import sys
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path


def _print_traceback(kind, error, tb) -> None:
    traceback.print_exception(kind, error, tb, file=sys.stderr)


def _exit_status(exit: SystemExit) -> int:
    """The status a process ends with after ``SystemExit(exit.code)`` (a message goes to stderr)."""
    if exit.code is None:
        return 0
    if isinstance(exit.code, int):
        return exit.code
    print(exit.code, file=sys.stderr)
    return 1


def _forget_what_a_new_process_would_not_know() -> None:
    """Per-process state of lm-eval-pdd that a run may leave: warned-once keys and the caches keyed by
    a model's path (a test may save other weights at a path an earlier test used)."""
    from pdd_tasks.prepare import neighbors
    from pdd_tasks.tasks import aggregations, base

    aggregations._warned.clear()
    for cached in (
        base._fingerprint_of,
        base._tokenizer,
        base._output_vocab_size,
        aggregations._blind_items,
        neighbors.load_masked_lm,
    ):
        cached.cache_clear()


@contextlib.contextmanager
def _streams_to(out: io.StringIO, err: io.StringIO, log_level: int):
    """stdout/stderr, Python warnings and log records to ``out``/``err`` for the duration."""
    root = logging.getLogger()
    # With no handler of its own the root logger's records go to logging.lastResort (WARNING and
    # above, the message alone) in the console script; lm-eval-pdd's main sets INFO (basicConfig).
    handler = logging.StreamHandler(err)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.setLevel(log_level)
    previous_level = root.level
    root.addHandler(handler)
    root.setLevel(min(previous_level or logging.WARNING, log_level))
    # Handlers made earlier hold the stream they were made with (lm-eval's and transformers'), which
    # may be a test's captured stderr, closed since: swapped without flushing it (setStream would).
    repointed = []
    for name in ("lm_eval", "transformers"):
        for existing in logging.getLogger(name).handlers:
            if type(existing) is logging.StreamHandler:
                repointed.append((existing, existing.stream))
                existing.stream = err
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            warnings.simplefilter("default")  # shown again in each run, as in a new process
            yield
    finally:
        for existing, stream in repointed:
            existing.stream = stream
        root.removeHandler(handler)
        root.setLevel(previous_level)


def run_in_process(
    main: Callable[[], int | None],
    argv: list[str],
    cwd: Path,
    *,
    user_errors_as_messages: bool = True,
    log_level: int = logging.WARNING,
) -> subprocess.CompletedProcess:
    """Run ``main()`` with ``sys.argv = argv`` in ``cwd``; the exit status and output as a process's.

    ``user_errors_as_messages``: an uncaught UserError is printed as its message (the ``lm_eval``
    program's excepthook), else every uncaught exception with its traceback."""
    from pdd_tasks.errors import excepthook_showing_user_errors

    hook = excepthook_showing_user_errors(_print_traceback) if user_errors_as_messages else _print_traceback
    out, err = io.StringIO(), io.StringIO()
    saved_argv, saved_cwd = sys.argv, os.getcwd()
    _forget_what_a_new_process_would_not_know()
    try:
        sys.argv = list(argv)
        os.chdir(cwd)
        with _streams_to(out, err, log_level):
            try:
                status = main() or 0
            except SystemExit as exit:
                status = _exit_status(exit)
            except Exception as error:  # noqa: BLE001 - what the process would print, then status 1
                hook(type(error), error, error.__traceback__)
                status = 1
    finally:
        sys.argv = saved_argv
        os.chdir(saved_cwd)
        gc.collect()  # the run's model, as the process's exit would
    return subprocess.CompletedProcess(argv, status, out.getvalue(), err.getvalue())


def lm_eval_main() -> None:
    """lm-eval's ``lm_eval`` console script (``lm_eval.__main__:cli_evaluate``)."""
    from lm_eval.__main__ import cli_evaluate

    cli_evaluate()


def lm_eval_pdd_main() -> int:
    """The ``lm-eval-pdd`` console script (``pdd_tasks.tools.cli:main``), reading ``sys.argv``."""
    from pdd_tasks.tools.cli import main

    return main(sys.argv[1:])


def patched_lm_eval_main() -> int:
    """``python -m pdd_tasks.lm_eval_patches`` (lm-eval's command line with the patches applied and ``hf-pdd``
    registered)."""
    from pdd_tasks.lm_eval_patches.__main__ import main

    return main()


def cache_builtin_task_index() -> Callable[[], None]:
    """Index lm-eval's own task folder once for the session: ``TaskIndex.build`` then builds only the
    other folders (``--include_path``) and merges as it does (later folders override, with its
    warning). Each run gets its own copy of the cached entries. Returns the undo."""
    from lm_eval.tasks import _index

    builtin = Path(_index.__file__).resolve().parent
    build = _index.TaskIndex.build
    cached: dict[tuple, bytes] = {}

    def build_with_cache(paths, *, resolve_includes=True):
        index: dict = {}
        for root in paths:
            if Path(root).resolve() == builtin:
                key = (builtin, resolve_includes)
                if key not in cached:
                    cached[key] = pickle.dumps(build([root], resolve_includes=resolve_includes))
                part = pickle.loads(cached[key])
            else:
                part = build([root], resolve_includes=resolve_includes)
            for name, entry in part.items():
                if name in index:
                    _index.log.warning(
                        "Task '%s' from %s overrides existing task from %s",
                        name,
                        entry.yaml_path,
                        index[name].yaml_path,
                    )
                index[name] = entry
        return index

    _index.TaskIndex.build = staticmethod(build_with_cache)
    return lambda: setattr(_index.TaskIndex, "build", staticmethod(build))
