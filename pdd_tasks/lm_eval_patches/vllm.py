"""The patches of lm-eval's vLLM model (``lm_eval/models/vllm_causallms.py``, ``VLLM``) and of vLLM 0.32
itself (its engine's output processing, its worker's model runner, its engine client's exit cleanup),
and the worker extension that applies one of them in vLLM's worker process."""

from __future__ import annotations

import atexit
import contextlib
import functools
import sys
import threading
import weakref

from pdd_tasks.backends.shared_passes import loglikelihood_tokens_shared_vllm
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
from pdd_tasks.lm_eval_patches.core import (
    VLLM_VERSION,
    Patch,
    _routing_to,
    _vllm_installed_version,
    _warn,
    register,
    vllm_version_problem,
)


#: vLLM's module of the output processing that patch replaces in part (loaded with a ``vllm.LLM``).
VLLM_LOGPROBS_MODULE = "vllm.v1.engine.logprobs"

#: vLLM's module of the engine client whose exit cleanup patch ``vllm-engine-exit`` completes (loaded with a ``vllm.LLM``).
VLLM_CORE_CLIENT_MODULE = "vllm.v1.engine.core_client"

#: The threads a vLLM 0.32 engine client runs in the process that made the ``vllm.LLM``
#: (``vllm/v1/engine/core_client.py``): the output thread and the engine-process liveness monitor.
VLLM_CLIENT_THREADS = ("EngineCoreOutputQueueThread", "MPClientEngineMonitor")

#: How long patch ``vllm-engine-exit`` waits for each of those threads to end, in seconds.
VLLM_THREAD_JOIN_SECONDS = 30.0


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
    SIGABRT, after the results were written: docs/vllm-exit.md, "An abort at exit"). The replacement runs the
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
            f"vLLM {installed} is installed; patch vllm-engine-exit (pdd_tasks/lm_eval_patches/vllm.py), which completes "
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

    It stays in the patches package, under the path users pass (:data:`VLLM_WORKER_EXTENSION`: the package
    re-exports it), because what it does is apply a patch of
    :data:`~pdd_tasks.lm_eval_patches.core.PATCHES` in the worker process, which imports the package by
    that path; the worker code it applies is in :mod:`pdd_tasks.backends.vllm_worker`."""

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


def vllm_worker_prompt_stats(lm) -> bool:
    """Whether exact requests sent to ``lm``'s engine (lm-eval's ``VLLM``) get their per-position values
    from its worker (patch ``vllm-worker-prompt-stats``): the engine was made with
    :data:`VLLM_WORKER_EXTENSION`, its worker applied the patch (asked once, kept on the model object as
    ``_pdd_worker_prompt_stats``: :func:`~pdd_tasks.backends.vllm_worker.worker_prompt_stats`), and this
    process keeps exact mode's output as arrays (patch ``vllm-prompt-logprob-arrays``). Otherwise exact
    mode reads the full prompt log-probs, with one warning that says why."""
    return worker_prompt_stats(lm) and VLLM_PROMPT_LOGPROB_ARRAYS.is_applied()


def _sharing_passes(stock):
    """Replacement of ``VLLM._loglikelihood_tokens``: :func:`loglikelihood_tokens_shared_vllm`."""

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False):
        return loglikelihood_tokens_shared_vllm(self, requests, disable_tqdm=disable_tqdm)

    return _loglikelihood_tokens


def _vllm() -> list[type]:
    """lm-eval's ``VLLM`` where lm-eval has imported its vLLM backend (vLLM needs CUDA: never imported here)."""
    cls = getattr(sys.modules.get(VLLM_MODULE), "VLLM", None)
    return [cls] if cls is not None else []


register(
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
    Patch(
        name="vllm-shared-passes",
        purpose=(
            "a loglikelihood request whose tokens begin a longer request of the same call is read from that "
            "one's prompt log-probs instead of sent again (stock sends every request): an eval's gold answer and "
            "CoDeC's no-context request ride on the CoDeC in-context request that has the question as its "
            "context example"
        ),
        changes="models/vllm_causallms.py: VLLM._loglikelihood_tokens",
        when="once lm-eval has imported its vLLM backend (a --model vllm model exists)",
        # where the class has the method (lm-eval 0.4.13's VLLM does; a class standing in for it may not)
        targets=lambda: [(cls, "_loglikelihood_tokens") for cls in _vllm() if hasattr(cls, "_loglikelihood_tokens")],
        replacement=_sharing_passes,
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
            "results were written: docs/vllm-exit.md)"
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
)
