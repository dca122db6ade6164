"""Every change lm-eval-pdd makes to lm-eval's behaviour, in one package, behind one version gate.

The pdd tasks run inside lm-evaluation-harness's own evaluation loop. Most of what they need is
lm-eval's public interface (a task class, aggregations, ``register_model`` for ``hf-pdd``), but a
few things can only be had by replacing a function or property of lm-eval at run time. Each such
replacement is a :class:`Patch` in :data:`PATCHES`, with what it is for and which lm-eval code it
replaces; nothing else in lm-eval-pdd sets attributes on lm-eval's classes or modules. Three patches
replace vLLM code instead, behind a gate of their own (:data:`VLLM_VERSION`):
``vllm-prompt-logprob-arrays`` (exact mode's prompt log-probs kept as arrays in the process that made
the ``vllm.LLM``), ``vllm-worker-prompt-stats`` (exact mode's values computed in vLLM's worker
process, only in an engine made with ``worker_extension_cls`` = :data:`VLLM_WORKER_EXTENSION`, which
the vLLM capture asks to apply it there: :func:`vllm_worker_prompt_stats`) and ``vllm-engine-exit``
(the engine client's threads ended before the interpreter finalises: no SIGABRT at exit); the code
the first two put in place of vLLM's is in :mod:`pdd_tasks.backends.vllm_worker`.

When: :func:`apply` applies them all, idempotently. It is called explicitly where a pdd task is
built (``MembershipInferenceTask.__init__``, ``DatasetTestTask.__init__``) and by
``python -m pdd_tasks.lm_eval_patches`` before lm-eval's command line starts; importing any module of
this package changes nothing in lm-eval (``tests/backends/test_lm_eval_patches.py`` checks it in a fresh
interpreter). A patch that concerns a backend not loaded in this process (vLLM) is applied by the
next call after lm-eval has loaded it: in an ``lm_eval`` run the model is created before the
tasks are built, so that is the call of the first task (docs/architecture.md, "Order in an
lm_eval run").

Version gates: every patch of lm-eval was written against lm-eval :data:`LM_EVAL_VERSION` (which
pyproject.toml pins). :func:`apply` first checks the installed version and refuses another with
:class:`UnsupportedLmEvalVersion`, which names both versions and the pip command. The vLLM patches were
written against vLLM :data:`VLLM_VERSION`; with another vLLM they are not applied and a warning says
so (:func:`vllm_version_problem`): exact mode then reads vLLM's own output, with the same scores at
several times the cost.

The package: :mod:`~pdd_tasks.lm_eval_patches.core` holds the mechanism (:class:`Patch`, the registry
:data:`PATCHES`, the version gates, :func:`apply`); each other module holds the patches of one target
and registers them there when it is imported: :mod:`~pdd_tasks.lm_eval_patches.excepthook`
(``sys.excepthook``), :mod:`~pdd_tasks.lm_eval_patches.huggingface` (``HFLM``),
:mod:`~pdd_tasks.lm_eval_patches.vllm` (lm-eval's ``VLLM`` and vLLM's engine, with
:class:`VllmWorkerExtension`), :mod:`~pdd_tasks.lm_eval_patches.completions` (the completions and
chat-completions clients), :mod:`~pdd_tasks.lm_eval_patches.stderr` (a metric's standard error) and
:mod:`~pdd_tasks.lm_eval_patches.evaluator` (the evaluation loop) and
:mod:`~pdd_tasks.lm_eval_patches.output` (the results and samples files). This module imports them in that
order, which is the order of :data:`PATCHES` and of :func:`apply`, and re-exports the public names.
``python -m pdd_tasks.lm_eval_patches ARGS`` (:mod:`pdd_tasks.lm_eval_patches.__main__`) is lm-eval's
command line with the patches applied first.

The excepthook: lm-eval's ``lm_eval`` command does not catch the exceptions a task raises while
it is loaded or scored, so a user's mistake (:class:`~pdd_tasks.errors.UserError`) would come
under a full traceback. Patch ``show-user-errors`` makes ``sys.excepthook`` print it as its
message (exit status 1), but only where the running program *is* lm-eval's command line
(:func:`running_lm_eval_cli`: ``lm_eval``/``lm-eval``, or ``python -m lm_eval``). In library use
(``simple_evaluate`` from Python, a notebook, pytest) the host program's excepthook is left
alone: a process-wide hook is the program's to set, not a library's. Our own command lines
(``lm-eval-pdd``, ``python -m pdd_tasks.lm_eval_patches``) set no hook: they catch a ``UserError``
themselves (:func:`pdd_tasks.errors.run_reporting_user_errors`).

Not patches (additions through lm-eval's own interfaces, nothing of lm-eval replaced):
``@register_model("hf-pdd")`` in :mod:`pdd_tasks.backends.hf` (a subclass of ``HFLM``, as
lm-eval's ``hf_steered.py``), and values the captures cache on a model *object*
(``_pdd_model_info``, ``_pdd_processes_checked``, ``_pdd_worker_prompt_stats``).
"""

# isort: off
# The order of these imports is the order of PATCHES (each module registers its patches when imported).
from pdd_tasks.lm_eval_patches.core import (
    LM_EVAL_VERSION,
    PATCHES,
    PIP_INSTALL,
    VLLM_VERSION,
    Patch,
    UnsupportedLmEvalVersion,
    applied,
    apply,
    check_lm_eval_version,
    is_lm_eval_cli,
    lm_eval_version_problem,
    running_lm_eval_cli,
    show_log_lines,
    vllm_version_problem,
)
from pdd_tasks.lm_eval_patches.excepthook import SHOW_USER_ERRORS
from pdd_tasks.lm_eval_patches import huggingface
from pdd_tasks.lm_eval_patches.vllm import (
    VLLM_PROMPT_LOGPROB_ARRAYS,
    VLLM_WORKER_EXTENSION,
    WORKER_PROMPT_STATS,
    VllmWorkerExtension,
    vllm_worker_prompt_stats,
)
from pdd_tasks.lm_eval_patches import completions
from pdd_tasks.lm_eval_patches import stderr
from pdd_tasks.lm_eval_patches.evaluator import show_run_tasks
from pdd_tasks.lm_eval_patches.output import OutputNotSaved
# isort: on


__all__ = [
    "LM_EVAL_VERSION",
    "OutputNotSaved",
    "PATCHES",
    "PIP_INSTALL",
    "SHOW_USER_ERRORS",
    "VLLM_PROMPT_LOGPROB_ARRAYS",
    "VLLM_VERSION",
    "VLLM_WORKER_EXTENSION",
    "WORKER_PROMPT_STATS",
    "Patch",
    "UnsupportedLmEvalVersion",
    "VllmWorkerExtension",
    "applied",
    "apply",
    "check_lm_eval_version",
    "completions",
    "huggingface",
    "is_lm_eval_cli",
    "lm_eval_version_problem",
    "running_lm_eval_cli",
    "show_log_lines",
    "show_run_tasks",
    "stderr",
    "vllm_version_problem",
    "vllm_worker_prompt_stats",
]
