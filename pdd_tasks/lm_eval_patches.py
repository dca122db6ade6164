"""Every change lm-eval-pdd makes to lm-eval's behaviour, in one place, behind one version gate.

The pdd tasks run inside lm-evaluation-harness's own evaluation loop. Most of what they need is
lm-eval's public interface (a task class, aggregations, ``register_model`` for ``hf-pdd``), but a
few things can only be had by replacing a function or property of lm-eval at run time. Each such
replacement is a :class:`Patch` in :data:`PATCHES`, with what it is for and which lm-eval code it
replaces; nothing else in this package sets attributes on lm-eval's classes or modules. Three patches
replace vLLM code instead, behind a gate of their own (:data:`VLLM_VERSION`):
``vllm-prompt-logprob-arrays`` (exact mode's prompt log-probs kept as arrays in the process that made
the ``vllm.LLM``), ``vllm-worker-prompt-stats`` (exact mode's values computed in vLLM's worker
process, only in an engine made with ``worker_extension_cls`` = :data:`VLLM_WORKER_EXTENSION`, which
the vLLM capture asks to apply it there: :func:`vllm_worker_prompt_stats`) and ``vllm-engine-exit``
(the engine client's threads ended before the interpreter finalises: no SIGABRT at exit); the code
the first two put in place of vLLM's is in :mod:`pdd_tasks.backends.vllm_worker`.

When: :func:`apply` applies them all, idempotently. It is called explicitly where a pdd task is
built (``MembershipInferenceTask.__init__``, ``DatasetTestTask.__init__``) and by
``python -m pdd_tasks.backends`` before lm-eval's command line starts; importing any module of
this package changes nothing in lm-eval (``tests/backends/test_lm_eval_patches.py`` checks it in a fresh
interpreter). A patch that concerns a backend not loaded in this process (vLLM) is applied by the
next call after lm-eval has loaded it: in an ``lm_eval`` run the model is created before the
tasks are built, so that is the call of the first task (docs/architecture.md, "Order in an
lm_eval run").

Version gates: every patch of lm-eval was written against lm-eval :data:`LM_EVAL_VERSION` (which
pyproject.toml pins). :func:`apply` first checks the installed version and refuses another with
:class:`UnsupportedLmEvalVersion`, which names both versions and the pip command. The vLLM patch was
written against vLLM :data:`VLLM_VERSION`; with another vLLM it is not applied and a warning says
so (:func:`vllm_version_problem`): exact mode then reads vLLM's own output, with the same scores at
several times the cost.

The excepthook: lm-eval's ``lm_eval`` command does not catch the exceptions a task raises while
it is loaded or scored, so a user's mistake (:class:`~pdd_tasks.errors.UserError`) would come
under a full traceback. Patch ``show-user-errors`` makes ``sys.excepthook`` print it as its
message (exit status 1), but only where the running program *is* lm-eval's command line
(:func:`running_lm_eval_cli`: ``lm_eval``/``lm-eval``, or ``python -m lm_eval``). In library use
(``simple_evaluate`` from Python, a notebook, pytest) the host program's excepthook is left
alone: a process-wide hook is the program's to set, not a library's. Our own command lines
(``lm-eval-pdd``, ``python -m pdd_tasks.backends``) set no hook: they catch a ``UserError``
themselves (:func:`pdd_tasks.errors.run_reporting_user_errors`).

Not patches (additions through lm-eval's own interfaces, nothing of lm-eval replaced):
``@register_model("hf-pdd")`` in :mod:`pdd_tasks.backends.hf` (a subclass of ``HFLM``, as
lm-eval's ``hf_steered.py``), and values the captures cache on a model *object*
(``_pdd_model_info``, ``_pdd_processes_checked``, ``_pdd_worker_prompt_stats``).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import importlib.metadata
import inspect
import logging
import math
import sys
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pdd_tasks.backends.base import route_requests
from pdd_tasks.backends.completions import refuse_chat_completions, score_per_token_api
from pdd_tasks.backends.cpu_parallel import adopt_accelerator_processes
from pdd_tasks.backends.hf import score_per_token_hf
from pdd_tasks.backends.seeded_sampling import is_seeded, sample_seeded
from pdd_tasks.backends.vllm import VLLM_MODULE, score_per_token_vllm
from pdd_tasks.backends.vllm_worker import (
    VLLM_WORKER_EXTENSION,
    adopt_worker_runner,
    asking_for_stock_worker_output,
    computing_prompt_stats_on_the_worker,
    keeping_prompt_logprob_arrays,
    worker_prompt_stats,
    worker_runners,
)
from pdd_tasks.errors import UserError, excepthook_showing_user_errors
from pdd_tasks.registries import Registry


__all__ = [
    "LM_EVAL_VERSION",
    "PATCHES",
    "Patch",
    "VLLM_VERSION",
    "UnsupportedLmEvalVersion",
    "VLLM_WORKER_EXTENSION",
    "VllmWorkerExtension",
    "applied",
    "apply",
    "check_lm_eval_version",
    "is_lm_eval_cli",
    "lm_eval_version_problem",
    "running_lm_eval_cli",
    "vllm_version_problem",
    "vllm_worker_prompt_stats",
]

logger = logging.getLogger(__name__)

#: The lm-eval release every patch was written against and checked with.
LM_EVAL_VERSION = "0.4.13"

#: How to install it.
PIP_INSTALL = f"pip install 'lm-eval[hf,api]=={LM_EVAL_VERSION}'"

#: The names lm-eval's console scripts are installed under (``sys.argv[0]``).
LM_EVAL_PROGRAMS = ("lm_eval", "lm-eval")

#: The vLLM release (major.minor) patch ``vllm-prompt-logprob-arrays`` was written against and checked with.
VLLM_VERSION = "0.32"

#: vLLM's module of the output processing that patch replaces in part (loaded with a ``vllm.LLM``).
VLLM_LOGPROBS_MODULE = "vllm.v1.engine.logprobs"

#: vLLM's module of the engine client whose exit cleanup patch ``vllm-engine-exit`` completes (loaded with a ``vllm.LLM``).
VLLM_CORE_CLIENT_MODULE = "vllm.v1.engine.core_client"

#: The threads a vLLM 0.32 engine client runs in the process that made the ``vllm.LLM``
#: (``vllm/v1/engine/core_client.py``): the output thread and the engine-process liveness monitor.
VLLM_CLIENT_THREADS = ("EngineCoreOutputQueueThread", "MPClientEngineMonitor")

#: How long patch ``vllm-engine-exit`` waits for each of those threads to end, in seconds.
VLLM_THREAD_JOIN_SECONDS = 30.0

#: Attribute that marks a replacement as this module's (its value: the patch's name).
_MARK = "__lm_eval_pdd_patch__"

#: Attribute of a replacement that holds the value it replaced (restored by :meth:`Patch.suspended`).
_STOCK = "__lm_eval_pdd_stock__"


# -- the version gate -------------------------------------------------------------------------------


class UnsupportedLmEvalVersion(UserError):
    """The installed lm-eval is not the release the patches were written against."""


def lm_eval_version_problem(installed: str) -> str | None:
    """The message refusing lm-eval ``installed``, or None for :data:`LM_EVAL_VERSION`.

    >>> lm_eval_version_problem(LM_EVAL_VERSION) is None
    True
    """
    if installed == LM_EVAL_VERSION:
        return None
    lm_eval_parts = [
        patch.name for patch in PATCHES.values() if patch is not SHOW_USER_ERRORS and patch.package == "lm_eval"
    ]
    return (
        f"lm-eval {installed} is installed, but lm-eval-pdd works with lm-eval {LM_EVAL_VERSION} only: it "
        f"replaces parts of that release ({', '.join(lm_eval_parts)}: pdd_tasks/lm_eval_patches.py). "
        f"Install it: {PIP_INSTALL}"
    )


@functools.cache
def _installed_lm_eval_version() -> str:
    return importlib.metadata.version("lm_eval")


def check_lm_eval_version(installed: str | None = None) -> None:
    """Refuse an lm-eval other than :data:`LM_EVAL_VERSION` (default: the installed one).

    Raises:
        UnsupportedLmEvalVersion: with :func:`lm_eval_version_problem`'s message.
    """
    problem = lm_eval_version_problem(installed if installed is not None else _installed_lm_eval_version())
    if problem is not None:
        raise UnsupportedLmEvalVersion(problem)


def vllm_version_problem(installed: str) -> str | None:
    """Why patch ``vllm-prompt-logprob-arrays`` is not applied with vLLM ``installed``, or None for
    :data:`VLLM_VERSION` (any patch release, any local label such as ``+cpu``).

    >>> vllm_version_problem("0.32.0") is None, vllm_version_problem("0.32.1+cpu") is None
    (True, True)
    >>> vllm_version_problem("0.33.0").split(";")[0]
    'vLLM 0.33.0 is installed'
    """
    if installed.split("+")[0].split(".")[:2] == VLLM_VERSION.split("."):
        return None
    return (
        f"vLLM {installed} is installed; patch vllm-prompt-logprob-arrays (pdd_tasks/lm_eval_patches.py), "
        f"which replaces part of vLLM {VLLM_VERSION}'s output processing (vllm/v1/engine/logprobs.py), is not "
        f"applied: exact_mu_sigma reads vLLM's own per-value lists instead, with the same scores at several "
        f"times the cost (docs/backends.md, 'Where the time goes'). The top-k mode is not affected."
    )


@functools.cache
def _warn(message: str) -> None:
    logger.warning(message)


# -- the patches ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Patch:
    """One replacement of lm-eval code (or of ``sys.excepthook``).

    Attributes:
        name: short name, used in messages, docs and the mark on the replacement.
        purpose: what the pdd tasks need it for.
        changes: the code replaced, as ``file: name`` (paths relative to the ``lm_eval`` package).
        when: when :func:`apply` applies it.
        targets: the ``(owner, attribute)`` pairs it replaces in this process; empty where it does
            not apply (yet), e.g. vLLM not loaded.
        replacement: the stock value of a target -> what replaces it.
        package: the package whose code it replaces (``lm_eval``; ``vllm`` for the vLLM patches,
            whose ``changes`` are relative to the ``vllm`` package).
        remote_suspend: for a patch whose targets live in another process (vLLM's worker): a context
            in which this process asks that process for the stock behaviour (entered by
            :meth:`suspended`); None for the others.
    """

    name: str
    purpose: str
    changes: str
    when: str
    targets: Callable[[], list[tuple[object, str]]]
    replacement: Callable[[object], object]
    package: str = "lm_eval"
    remote_suspend: Callable[[], contextlib.AbstractContextManager] | None = None

    def is_applied(self) -> bool:
        """Whether every target of this process carries this patch (False where none applies)."""
        targets = self.targets()
        return bool(targets) and all(_patch_on(owner, name) == self.name for owner, name in targets)

    def apply(self) -> None:
        """Replace each target not replaced yet (idempotent)."""
        for owner, name in self.targets():
            if _patch_on(owner, name) != self.name:
                stock = inspect.getattr_static(owner, name)
                setattr(owner, name, _marked(self.replacement(stock), stock, self.name))

    @contextlib.contextmanager
    def suspended(self):
        """Within the block, the stock values where this patch is applied (for a comparison of the two,
        e.g. ``benchmarks/vllm_cost.py``); the replacements again after it. A patch applied in another
        process is asked there for the stock behaviour (``remote_suspend``)."""
        replaced = [(owner, name) for owner, name in self.targets() if _patch_on(owner, name) == self.name]
        replacements = [vars(owner)[name] for owner, name in replaced]
        for (owner, name), value in zip(replaced, replacements, strict=True):
            setattr(owner, name, getattr(_function(value), _STOCK))
        try:
            with (self.remote_suspend or contextlib.nullcontext)():
                yield
        finally:
            for (owner, name), value in zip(replaced, replacements, strict=True):
                setattr(owner, name, value)


def _function(value):
    """The function of a property (its getter), a classmethod, or a function."""
    if isinstance(value, property):
        return value.fget
    if isinstance(value, classmethod):
        return value.__func__
    return value


def _patch_on(owner: object, name: str) -> str | None:
    """The name of the patch that replaced ``owner.<name>`` (its own, not inherited), or None."""
    return getattr(_function(vars(owner).get(name)), _MARK, None)


def _marked(new, stock, patch_name: str):
    """``new`` marked as ``patch_name``'s, with ``__wrapped__`` = ``stock`` and its docstring where
    ``new`` has none (on the getter, for a property; on the function, for a classmethod)."""
    function, original = _function(new), _function(stock)
    setattr(function, _MARK, patch_name)
    setattr(function, _STOCK, stock)
    function.__wrapped__ = original
    if function.__doc__ is None:
        function.__doc__ = getattr(original, "__doc__", None)
    return new


def _routing_to(score_per_token: Callable) -> Callable:
    """Replacement of a backend's ``loglikelihood``: per-token requests to ``score_per_token``, every
    other request to the stock method, in one call and unchanged (:func:`route_requests`)."""

    def replacement(stock):
        def loglikelihood(self, requests, disable_tqdm: bool = False, **kwargs):
            return route_requests(self, requests, stock, score_per_token, disable_tqdm, **kwargs)

        return loglikelihood

    return replacement


def _adopting_accelerator_processes(stock: property) -> property:
    """Replacement of ``HFLM.rank`` / ``HFLM.world_size``: the stock property after
    :func:`adopt_accelerator_processes`."""

    def getter(self):
        adopt_accelerator_processes(self)
        return stock.fget(self)

    return property(getter, doc=stock.__doc__)


def _refusing_per_token_requests(stock):
    """Replacement of a chat-completions client's ``loglikelihood``: per-token requests refused with
    the fix (:func:`refuse_chat_completions`), the others to the stock method."""

    def loglikelihood(self, requests, *args, **kwargs):
        refuse_chat_completions(self, requests)
        return stock(self, requests, *args, **kwargs)

    return loglikelihood


def _sampling_seeded_requests(stock):
    """Replacement of ``HFLM.generate_until``: requests with a ``seed`` generation key (SaMIA's
    continuations) sampled many to a batch, each row under its own seed
    (:func:`~pdd_tasks.backends.seeded_sampling.sample_seeded`); the others by the stock method, in one
    call and unchanged (:func:`route_requests`)."""

    def generate_until(self, requests, disable_tqdm: bool = False):
        return route_requests(self, requests, stock, sample_seeded, disable_tqdm, ours=is_seeded)

    return generate_until


def _with_pdd_stderrs(stock):
    """Replacement of ``evaluator_utils.stderr_for_metric``: an aggregation that carries its standard
    error (attribute ``stderr``, :func:`pdd_tasks.registry.with_stderr`: the pdd tasks' aggregations)
    gets it, every other one lm-eval's.

    The harness asks for one only when ``bootstrap_iters > 0`` (``bootstrap_iters=0`` turns every stderr
    off, ours included). An undefined standard error (NaN: fewer than 2 texts of a class) is ``N/A``, as
    the harness writes for one it cannot compute."""

    def stderr_for_metric(metric, bootstrap_iters: int):
        stderr = getattr(metric, "stderr", None)
        if stderr is None:
            return stock(metric, bootstrap_iters)
        if bootstrap_iters <= 0:
            return None

        def compute(items):
            value = stderr(items, bootstrap_iters)
            return "N/A" if isinstance(value, float) and math.isnan(value) else value

        return compute

    return stderr_for_metric


def _annotating_samples(stock):
    """Replacement of ``evaluator_utils._collect_results``: the stock function (every task's metrics
    aggregated), then each task that has ``annotate_logged_samples`` adds to its logged samples the
    per-text values that depend on every text of the run (pdd_custom: PTDI's p-values and decisions)."""

    def _collect_results(eval_results_acc, *args, **kwargs):
        result = stock(eval_results_acc, *args, **kwargs)
        for name, acc in eval_results_acc.items():
            annotate = getattr(acc["task"], "annotate_logged_samples", None)
            if annotate is not None and result.samples.get(name):
                annotate(result.samples[name])
        return result

    return _collect_results


def _showing_tasks_the_run(stock):
    """Replacement of ``evaluator.evaluate``: before the stock function, each task of the run that has
    ``see_run_tasks`` (``pdd_contamination``: :meth:`~pdd_tasks.tasks.dataset_test.ContaminationTask.see_run_tasks`)
    is given the run's leaf tasks and groups (:func:`show_run_tasks`), then the stock function evaluates
    them all, unchanged. ``simple_evaluate`` (and so ``lm_eval``'s command line) calls ``evaluate`` through
    its module, after the tasks are built: a task learns the run's other tasks here, whatever their order
    in ``--tasks``."""

    def evaluate(*args, **kwargs):
        task_dict = kwargs["task_dict"] if "task_dict" in kwargs else args[1] if len(args) > 1 else None
        if isinstance(task_dict, dict):
            show_run_tasks(task_dict)
        return stock(*args, **kwargs)

    return evaluate


def show_run_tasks(task_dict: dict) -> None:
    """Call ``see_run_tasks(tasks, groups)`` of each task of ``task_dict`` (``TaskManager.load``'s result,
    or the legacy nested dict of ``get_task_dict``) that has it: ``tasks`` maps each leaf task's name to
    its task, ``groups`` each group's name to its direct children's names (nested groups kept)."""
    if "tasks" in task_dict:
        groups, tasks = task_dict.get("groups") or {}, task_dict["tasks"]
    else:
        groups, tasks = _evaluator_utils()._handle_back_comp(task_dict)
    group_map = {name: list(group.child_names) for name, group in groups.items()}
    for task in list(tasks.values()):
        see = getattr(task, "see_run_tasks", None)
        if callable(see):
            see(dict(tasks), group_map)


def _vllm_logprobs_processor() -> list[tuple[object, str]]:
    """vLLM's ``LogprobsProcessor`` methods that patch ``vllm-prompt-logprob-arrays`` replaces, where
    vLLM's output processing is loaded and is :data:`VLLM_VERSION`'s (else none, with a warning)."""
    cls = getattr(sys.modules.get(VLLM_LOGPROBS_MODULE), "LogprobsProcessor", None)
    if cls is None:
        return []
    problem = vllm_version_problem(str(getattr(sys.modules.get("vllm"), "__version__", "unknown")))
    if problem is not None:
        _warn(problem)
        return []
    return [(cls, "from_new_request"), (cls, "_update_prompt_logprobs")]


def _joining_client_threads(stock):
    """Replacement of vLLM 0.32's ``BackgroundResources.__call__`` (``vllm/v1/engine/core_client.py``): the
    cleanup of an engine client (``SyncMPClient`` of a ``vllm.LLM``) that vLLM runs from a
    ``weakref.finalize`` at interpreter exit (``atexit``), from ``MPClient.shutdown`` or when the client is
    collected. The stock cleanup stops the engine processes (SIGTERM, then SIGKILL after
    ``VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS``), closes the input socket and *sends* the client's output
    thread a message to stop, then returns without waiting for it; the liveness monitor thread leaves its
    loop up to a second later. Both are daemon threads, so the interpreter then finalises while they may
    still be running: each must take the GIL again to return from the call it blocks in (a ZMQ poll, a
    ``poll``) and to close its sockets, and Python 3.11 ends a daemon thread that takes the GIL during
    finalisation with ``pthread_exit``, a forced unwind of its native stack, which ends in ``std::terminate``
    (the process aborts) where a ``noexcept`` C++ frame is on it ("terminate called without an active exception",
    SIGABRT, after the results were written: docs/backends.md, "An abort at exit"). The replacement runs the
    stock cleanup, then waits (at most :data:`VLLM_THREAD_JOIN_SECONDS` each) for this client's threads of
    :data:`VLLM_CLIENT_THREADS` to end, so that none is running when the interpreter finalises. A thread is
    this client's when its target closes over this cleanup's object or its engine manager (the other
    clients' are left alone).

    Applying it also registers :func:`_shut_down_vllm_clients` to run at exit (once per process), which
    covers the other way the threads outlive the interpreter: at exit, vLLM's finalizers run newest first,
    so the engine processes' finalizer (made after the client's) stops them *before* the client's cleanup
    runs; the monitor thread then takes their end for a crash and runs the client's shutdown from its own
    thread, and the main thread, finding that cleanup already claimed, finalises while it runs."""
    _register_exit_shutdown()

    def __call__(self):
        stock(self)
        owned = {id(value) for value in (self, getattr(self, "engine_manager", None)) if value is not None}
        for thread in _vllm_client_threads():
            if owned & {id(value) for value in _closure_values(thread)}:
                thread.join(VLLM_THREAD_JOIN_SECONDS)

    return __call__


def _vllm_client_threads() -> list[threading.Thread]:
    """The running threads of vLLM engine clients (:data:`VLLM_CLIENT_THREADS`), but the calling one."""
    current = threading.current_thread()
    return [thread for thread in threading.enumerate() if thread.name in VLLM_CLIENT_THREADS and thread is not current]


def _closure_values(thread: threading.Thread) -> list:
    """The values a thread's target function closes over (empty cells and a target without a closure: none)."""
    values = []
    for cell in getattr(getattr(thread, "_target", None), "__closure__", None) or ():
        with contextlib.suppress(ValueError):  # an empty cell
            values.append(cell.cell_contents)
    return values


def _shut_down_vllm_clients() -> None:
    """At exit, before vLLM's own finalizers: shut down, in this (the main) thread, every vLLM engine client
    whose cleanup has not run (``MPClient.shutdown``, its public teardown: engine processes stopped, then the
    cleanup that :func:`_joining_client_threads` completes), then wait for every client thread still running
    (a monitor thread that took an engine's end for a crash may be running a shutdown of its own). A client
    is found through its liveness monitor thread, which closes over a weak reference to it (vLLM 0.32's
    ``MPClient.start_engine_core_monitor``)."""
    for thread in _vllm_client_threads():
        if thread.name != "MPClientEngineMonitor":
            continue
        for value in _closure_values(thread):
            client = value() if isinstance(value, weakref.ref) else None
            finalizer = getattr(client, "_finalizer", None)
            if finalizer is not None and finalizer.alive:
                client.shutdown()
    for thread in _vllm_client_threads():
        thread.join(VLLM_THREAD_JOIN_SECONDS)


def _register_exit_shutdown() -> None:
    """Register :func:`_shut_down_vllm_clients` with ``atexit`` (once per process) so that it runs before
    every ``weakref.finalize`` at exit. ``atexit`` runs the last registered first, and ``weakref.finalize``
    registers its exit function when the first finalizer of the process is made: making one here first
    (of a throwaway object kept for the process's life) puts this registration after it whether or not vLLM
    has made its clients yet."""
    global _EXIT_SHUTDOWN_REGISTERED
    if _EXIT_SHUTDOWN_REGISTERED:
        return
    weakref.finalize(_EXIT_ORDER_ANCHOR, lambda: None)
    atexit.register(_shut_down_vllm_clients)
    _EXIT_SHUTDOWN_REGISTERED = True


class _ExitOrderAnchor:
    """A weak-referenceable object that lives as long as this module (see :func:`_register_exit_shutdown`)."""


_EXIT_ORDER_ANCHOR = _ExitOrderAnchor()
_EXIT_SHUTDOWN_REGISTERED = False


def _vllm_client_cleanup() -> list[tuple[object, str]]:
    """vLLM's ``BackgroundResources.__call__``, which patch ``vllm-engine-exit`` replaces, where vLLM's engine
    client is loaded and is :data:`VLLM_VERSION`'s (else none, with a warning)."""
    cls = getattr(sys.modules.get(VLLM_CORE_CLIENT_MODULE), "BackgroundResources", None)
    if cls is None:
        return []
    installed = _vllm_installed_version()
    if vllm_version_problem(installed) is not None:
        _warn(
            f"vLLM {installed} is installed; patch vllm-engine-exit (pdd_tasks/lm_eval_patches.py), which completes "
            f"vLLM {VLLM_VERSION}'s exit cleanup of its engine client (vllm/v1/engine/core_client.py), is not "
            f"applied: vLLM's own cleanup runs"
        )
        return []
    return [(cls, "__call__")]


class VllmWorkerExtension:
    """vLLM worker extension (engine argument ``worker_extension_cls``, :data:`VLLM_WORKER_EXTENSION`):
    vLLM adds this class to the bases of the engine's worker class in the worker process, and the vLLM
    capture calls :meth:`lm_eval_pdd_prompt_stats` there once (``LLM.collective_rpc``) before its first
    exact request. Only engines made with this argument get it; other programs (``vllm serve``) and
    other engines are untouched.

    It stays in this module, under the path users pass (:data:`VLLM_WORKER_EXTENSION`), because what it
    does is apply a patch of :data:`PATCHES` in the worker process, which loads this module by that
    path; the worker code it applies is in :mod:`pdd_tasks.backends.vllm_worker`."""

    def lm_eval_pdd_prompt_stats(self) -> str | None:
        """Apply patch ``vllm-worker-prompt-stats`` to this worker's model runner class (in this worker
        process); returns None, or why it was not applied (another vLLM, another model runner)."""
        problem = vllm_version_problem(_vllm_installed_version())
        if problem is not None:
            return problem.replace("vllm-prompt-logprob-arrays", "vllm-worker-prompt-stats")
        problem = adopt_worker_runner(getattr(self, "model_runner", None))
        if problem is not None:
            return problem
        WORKER_PROMPT_STATS.apply()
        return None


def _vllm_installed_version() -> str:
    return str(getattr(sys.modules.get("vllm"), "__version__", "unknown"))


def vllm_worker_prompt_stats(lm) -> bool:
    """Whether exact requests sent to ``lm``'s engine (lm-eval's ``VLLM``) get their per-position values
    from its worker (patch ``vllm-worker-prompt-stats``): the engine was made with
    :data:`VLLM_WORKER_EXTENSION`, its worker applied the patch (asked once, kept on the model object as
    ``_pdd_worker_prompt_stats``: :func:`~pdd_tasks.backends.vllm_worker.worker_prompt_stats`), and this
    process keeps exact mode's output as arrays (patch ``vllm-prompt-logprob-arrays``). Otherwise exact
    mode reads the full prompt log-probs, with one warning that says why."""
    return worker_prompt_stats(lm) and VLLM_PROMPT_LOGPROB_ARRAYS.is_applied()


def _hflm() -> list[type]:
    from lm_eval.models.huggingface import HFLM

    return [HFLM]


def _vllm() -> list[type]:
    """lm-eval's ``VLLM`` where lm-eval has imported its vLLM backend (vLLM needs CUDA: never imported here)."""
    cls = getattr(sys.modules.get(VLLM_MODULE), "VLLM", None)
    return [cls] if cls is not None else []


def _completions() -> list[type]:
    from lm_eval.models.openai_completions import LocalCompletionsAPI

    return [LocalCompletionsAPI]


def _chat_completions() -> list[type]:
    from lm_eval.models.openai_completions import LocalChatCompletion, OpenAIChatCompletion

    return [LocalChatCompletion, OpenAIChatCompletion]


def _evaluator_utils():
    import lm_eval.evaluator_utils

    return lm_eval.evaluator_utils


def _evaluator():
    import lm_eval.evaluator

    return lm_eval.evaluator


#: The excepthook patch (applied first, so that the version gate's refusal, too, is a message).
SHOW_USER_ERRORS = Patch(
    name="show-user-errors",
    purpose=(
        "a user's mistake (UserError) raised while lm_eval loads or scores a pdd task is printed as its "
        "message, exit status 1, instead of under a traceback (LM_EVAL_PDD_TRACEBACK=1 shows it)"
    ),
    changes="Python's sys.excepthook",
    when="only where the running program is lm-eval's command line (running_lm_eval_cli)",
    targets=lambda: [(sys, "excepthook")] if running_lm_eval_cli() else [],
    replacement=excepthook_showing_user_errors,
)

#: Every change to lm-eval's behaviour by name, in the order :func:`apply` makes them.
PATCHES: Registry[Patch] = Registry(
    "lm-eval patch", unique_because="a patch's name marks its replacements and must be unique: rename one."
)
for _patch in (
    SHOW_USER_ERRORS,
    Patch(
        name="hf-loglikelihood",
        purpose=(
            "--model hf answers the pdd tasks' PerTokenRequests with per-token log-probs, mu and sigma "
            "(score_per_token_hf), as --model hf-pdd does; other requests reach the stock method unchanged"
        ),
        changes="models/huggingface.py: HFLM.loglikelihood",
        when="always",
        targets=lambda: [(cls, "loglikelihood") for cls in _hflm()],
        replacement=_routing_to(score_per_token_hf),
    ),
    Patch(
        name="hf-seeded-generation",
        purpose=(
            "--model hf honours a generate_until request's seed key (SaMIA's samples; vLLM and completion "
            "servers take it natively): requests that differ only in their seed are sampled together, each row "
            "from a generator of its own seed, so a continuation depends on its seed, not on the batch or order"
        ),
        changes="models/huggingface.py: HFLM.generate_until",
        when="always",
        targets=lambda: [(cls, "generate_until") for cls in _hflm()],
        replacement=_sampling_seeded_requests,
    ),
    Patch(
        name="hf-cpu-processes",
        purpose=(
            "a multi-process CPU launch (accelerate launch --multi_gpu on CPU) splits the documents over "
            "the processes instead of every process scoring all of them (adopt_accelerator_processes)"
        ),
        changes="models/huggingface.py: HFLM.rank, HFLM.world_size",
        when="always",
        targets=lambda: [(cls, name) for cls in _hflm() for name in ("rank", "world_size")],
        replacement=_adopting_accelerator_processes,
    ),
    Patch(
        name="vllm-loglikelihood",
        purpose=(
            "--model vllm answers PerTokenRequests with per-token log-probs and top-k (or exact) mu/sigma "
            "(score_per_token_vllm); other requests reach the stock method unchanged"
        ),
        changes="models/vllm_causallms.py: VLLM.loglikelihood",
        when="once lm-eval has imported its vLLM backend (a --model vllm model exists)",
        targets=lambda: [(cls, "loglikelihood") for cls in _vllm()],
        replacement=_routing_to(functools.partial(score_per_token_vllm, worker_stats=vllm_worker_prompt_stats)),
    ),
    VLLM_PROMPT_LOGPROB_ARRAYS := Patch(
        name="vllm-prompt-logprob-arrays",
        purpose=(
            "exact_mu_sigma on --model vllm: the full-vocabulary prompt log-probs stay the arrays vLLM's engine "
            "sent (PromptLogprobArrays) instead of four Python list entries per value, which cost exact mode "
            "about nine tenths of its extra time; only requests the vLLM capture marks (exact, no detokenization)"
        ),
        changes="vllm/v1/engine/logprobs.py: LogprobsProcessor.from_new_request, LogprobsProcessor._update_prompt_logprobs",
        when=(
            f"once vLLM's output processing is loaded (a vllm.LLM exists in this process), with vLLM {VLLM_VERSION} "
            "only (another: not applied, a warning, vLLM's own lists read instead)"
        ),
        targets=_vllm_logprobs_processor,
        replacement=keeping_prompt_logprob_arrays,
        package="vllm",
    ),
    WORKER_PROMPT_STATS := Patch(
        name="vllm-worker-prompt-stats",
        purpose=(
            "exact_mu_sigma on --model vllm: vLLM's worker computes per prompt position log p(x_i), the most "
            "likely token, max log p, mu and sigma (prompt_stats_rows, as the HF capture) and sends those 4 "
            "values instead of sorting all |V| log-probs and sending them; only requests the vLLM capture marks"
        ),
        changes="vllm/v1/worker/gpu_model_runner.py: GPUModelRunner._get_prompt_logprobs_dict (on the worker's runner class)",
        when=(
            f"in the worker process of an engine made with worker_extension_cls={VLLM_WORKER_EXTENSION} "
            f"(--model_args), when the vLLM capture first sends exact requests (collective_rpc), with vLLM "
            f"{VLLM_VERSION} only (otherwise: not applied, a warning, the full prompt log-probs read instead)"
        ),
        targets=worker_runners,
        replacement=computing_prompt_stats_on_the_worker,
        package="vllm",
        remote_suspend=asking_for_stock_worker_output,
    ),
    Patch(
        name="vllm-engine-exit",
        purpose=(
            "--model vllm (and any vllm.LLM in a process that applied the patches): at exit, each engine client is "
            "shut down in the main thread before vLLM's finalizers stop its engine processes, and the client's output "
            "and liveness-monitor threads have ended before the interpreter finalises, instead of racing it as daemon "
            "threads (an intermittent SIGABRT at exit, 'terminate called without an active exception', after the "
            "results were written: docs/backends.md)"
        ),
        changes=(
            "vllm/v1/engine/core_client.py: BackgroundResources.__call__ (the client's cleanup, run at exit); and an "
            "atexit function that runs before vLLM's weakref finalizers (registered when the patch is applied)"
        ),
        when=(
            f"once vLLM's engine client is loaded (a vllm.LLM exists in this process), with vLLM {VLLM_VERSION} only "
            "(another: not applied, a warning, vLLM's own cleanup runs)"
        ),
        targets=_vllm_client_cleanup,
        replacement=_joining_client_threads,
        package="vllm",
    ),
    Patch(
        name="completions-loglikelihood",
        purpose=(
            "--model local-completions (and openai-completions, its subclass) answers PerTokenRequests "
            "from a /v1/completions server's echoed log-probs, after a probe of the server "
            "(score_per_token_api); other requests reach the stock method unchanged"
        ),
        changes="models/openai_completions.py: LocalCompletionsAPI.loglikelihood (inherited from api/model.py TemplateLM)",
        when="always",
        targets=lambda: [(cls, "loglikelihood") for cls in _completions()],
        replacement=_routing_to(score_per_token_api),
    ),
    Patch(
        name="chat-completions-refusal",
        purpose=(
            "--model local-chat-completions / openai-chat-completions refuse PerTokenRequests with a message "
            "naming the backend that can answer them (a chat API returns no prompt log-probs)"
        ),
        changes="models/openai_completions.py: LocalChatCompletion.loglikelihood, OpenAIChatCompletion.loglikelihood",
        when="always",
        targets=lambda: [(cls, "loglikelihood") for cls in _chat_completions()],
        replacement=_refusing_per_token_requests,
    ),
    Patch(
        name="stderr-for-metric",
        purpose=(
            "the results table shows standard errors of the pdd metrics (DeLong for AUC, a stratified "
            "bootstrap of bootstrap_iters draws for TPR at FPR) instead of N/A; lm-eval's own aggregations "
            "keep lm-eval's"
        ),
        changes="evaluator_utils.py: stderr_for_metric (imported there from api/metrics.py)",
        when="always",
        targets=lambda: [(_evaluator_utils(), "stderr_for_metric")],
        replacement=_with_pdd_stderrs,
    ),
    Patch(
        name="samples-after-aggregation",
        purpose=(
            "--log_samples holds per-text values that need every text of the run: pdd_custom's PTDI p-value "
            "and identification per method, EM-MIA's final score (annotate_logged_samples), added after the "
            "metrics are aggregated, "
            "on the process that writes the samples (also in a multi-process run)"
        ),
        changes="evaluator_utils.py: _collect_results (called by _process_results)",
        when="always",
        targets=lambda: [(_evaluator_utils(), "_collect_results")],
        replacement=_annotating_samples,
    ),
    Patch(
        name="run-tasks-to-contamination",
        purpose=(
            "pdd_contamination without source_tasks checks the other tasks of its own run (lm_eval --tasks "
            "arc_easy,gsm8k,pdd_contamination): before evaluating, each task with see_run_tasks is given the run's "
            "leaf tasks and groups (show_run_tasks); the evaluation itself is the stock function's, unchanged"
        ),
        changes="evaluator.py: evaluate (called by simple_evaluate after the tasks are built)",
        when="always",
        targets=lambda: [(_evaluator(), "evaluate")],
        replacement=_showing_tasks_the_run,
    ),
):
    PATCHES.register(_patch.name, _patch)
del _patch


# -- patch "output-save-failures": lm_eval's --output_path on a full or read-only disk -----------------


class OutputNotSaved(UserError):
    """lm-eval could not write its results or samples file under ``--output_path`` (a full disk, a
    read-only folder); lm-eval itself logs a warning and exits 0 (``loggers/evaluation_tracker.py``)."""


class _SaveFailureLog:
    """Stands in for ``evaluation_tracker.eval_logger`` during one save: forwards every call, and records
    lm-eval's ``Could not save ...`` warning and the ``repr`` of its exception (the ``info`` that follows)."""

    def __init__(self, logger) -> None:
        self.logger, self.failure, self.cause = logger, None, None

    def warning(self, message, *args, **kwargs):
        if str(message).startswith("Could not save"):
            self.failure = str(message)
        return self.logger.warning(message, *args, **{"stacklevel": 2, **kwargs})  # lm-eval's line, not this one

    def info(self, message, *args, **kwargs):
        if self.failure is not None and self.cause is None:
            self.cause = str(message)
        return self.logger.info(message, *args, **{"stacklevel": 2, **kwargs})

    def __getattr__(self, name):
        return getattr(self.logger, name)


def _print_results(results: dict | None) -> None:
    """The results table lm_eval prints after saving (which an :class:`OutputNotSaved` would skip)."""
    if results and isinstance(results.get("results"), dict):
        from lm_eval.utils import make_table

        print(make_table(results))
        if results.get("groups"):
            print(make_table(results, "groups"))


def _failing_on_unsaved_output(stock):
    """Replacement of ``EvaluationTracker.save_results_aggregated`` / ``save_results_samples``: the stock
    method, with the module's logger watched (:class:`_SaveFailureLog`); where lm-eval could not save, the
    results table is printed (lm_eval would print it next) and :class:`OutputNotSaved` names the output
    path, the cause and the fix: exit status 1 under ``lm_eval`` (patch ``show-user-errors``), not 0."""
    module = sys.modules[stock.__module__]

    def save(self, *args, **kwargs):
        log = _SaveFailureLog(module.eval_logger)
        module.eval_logger = log
        try:
            result = stock(self, *args, **kwargs)
        finally:
            module.eval_logger = log.logger
        results = kwargs.get("results", args[0] if args and isinstance(args[0], dict) else None)
        if stock.__name__ == "save_results_aggregated":
            self._pdd_results, self._pdd_results_saved = results, log.failure is None
        if log.failure is None:
            return result
        _print_results(getattr(self, "_pdd_results", None))
        task = kwargs.get("task_name", args[0] if args and isinstance(args[0], str) else None)
        what = (
            f"the samples of {task} (its samples file may be cut: table and report name a cut one)"
            if task
            else "the results"
        )
        saved = " The results JSON was saved." if task and getattr(self, "_pdd_results_saved", False) else ""
        raise OutputNotSaved(
            f"lm_eval --output_path {self.output_path}: lm-eval could not save {what}: {log.cause or log.failure} "
            f"(lm-eval alone would exit 0 with a warning).{saved} The results are printed above. Free space on that "
            "disk or give --output_path a folder you can write to, then run again."
        )

    return save


def _evaluation_tracker() -> list[type]:
    import lm_eval.loggers.evaluation_tracker

    return [lm_eval.loggers.evaluation_tracker.EvaluationTracker]


PATCHES.register(
    "output-save-failures",
    Patch(
        name="output-save-failures",
        purpose=(
            "lm_eval --output_path on a full disk or a read-only folder: lm-eval logs 'Could not save results "
            "aggregated' (or '... sample results') and exits 0, a samples file cut; with this patch the run "
            "prints its results table and stops with OutputNotSaved (path, cause, fix), exit status 1"
        ),
        changes=(
            "loggers/evaluation_tracker.py: EvaluationTracker.save_results_aggregated, "
            "EvaluationTracker.save_results_samples (their module's eval_logger watched during the call)"
        ),
        when="always",
        targets=lambda: [
            (cls, name) for cls in _evaluation_tracker() for name in ("save_results_aggregated", "save_results_samples")
        ],
        replacement=_failing_on_unsaved_output,
    ),
)


def apply() -> None:
    """Apply every patch of :data:`PATCHES` that concerns this process (idempotent).

    ``show-user-errors`` first (where it applies), then the version gate, then the others; under
    lm-eval's command line the plugin's log lines are shown with lm-eval's (:func:`show_log_lines`).

    Raises:
        UnsupportedLmEvalVersion: the installed lm-eval is not :data:`LM_EVAL_VERSION`.
    """
    SHOW_USER_ERRORS.apply()
    check_lm_eval_version()
    for patch in PATCHES.values():
        patch.apply()
    if running_lm_eval_cli():
        show_log_lines()


def show_log_lines() -> None:
    """The plugin's loggers (``pdd_tasks.*``) write through lm-eval's handler at lm-eval's level
    (``--verbosity``, ``LMEVAL_LOG_LEVEL``; INFO by default), formatted as lm-eval's lines: without it
    their INFO lines (the planned request counts, what prefix sharing saved, documents held out) are
    dropped by Python's last-resort handler, which shows warnings only. lm-eval's own loggers are not
    touched. Idempotent; nothing where lm-eval has not set up its logging."""
    source, target = logging.getLogger("lm_eval"), logging.getLogger("pdd_tasks")
    if not source.handlers or any(handler in target.handlers for handler in source.handlers):
        return
    target.setLevel(source.level)
    for handler in source.handlers:
        target.addHandler(handler)
    target.propagate = False


def applied() -> list[str]:
    """The names of the patches in effect in this process."""
    return [name for name, patch in PATCHES.items() if patch.is_applied()]


# -- is this lm-eval's command line? -----------------------------------------------------------------


def is_lm_eval_cli(argv0: str, main_module: str | None) -> bool:
    """Whether a program is lm-eval's command line, from ``sys.argv[0]`` and the name ``__main__`` was
    run as (``__main__.__spec__.name``; None for a script).

    >>> is_lm_eval_cli("/venv/bin/lm_eval", None), is_lm_eval_cli("-m", "lm_eval.__main__")
    (True, True)
    >>> is_lm_eval_cli("/venv/bin/pytest", None), is_lm_eval_cli("-m", "pdd_tasks.backends.__main__")
    (False, False)
    """
    if main_module is not None:
        return main_module in ("lm_eval", "lm_eval.__main__")
    return Path(argv0).name in LM_EVAL_PROGRAMS


def running_lm_eval_cli() -> bool:
    """Whether this process is lm-eval's command line (``lm_eval ...``, ``python -m lm_eval ...``,
    also under ``accelerate launch``)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    argv0 = sys.argv[0] if sys.argv else ""
    return is_lm_eval_cli(argv0, getattr(spec, "name", None))
