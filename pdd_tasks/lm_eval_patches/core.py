"""The mechanism of the lm-eval patches: :class:`Patch`, the registry :data:`PATCHES`, the version gates
and :func:`apply`.

A patch is one replacement of lm-eval code (or of vLLM's, or of ``sys.excepthook``) at run time, with
what it is for and which code it replaces. The patches themselves are in the other modules of
:mod:`pdd_tasks.lm_eval_patches`, one per target, each registering its patches here with
:func:`register` when the package is imported (in the order the package's ``__init__`` imports them,
which is the order :func:`apply` applies them). Registering a patch changes nothing; :func:`apply` does.

Version gates: every patch of lm-eval was written against lm-eval :data:`LM_EVAL_VERSION` (which
pyproject.toml pins). :func:`apply` first checks the installed version and refuses another with
:class:`UnsupportedLmEvalVersion`, which names both versions and the pip command. The vLLM patches were
written against vLLM :data:`VLLM_VERSION`; with another vLLM they are not applied and a warning says
so (:func:`vllm_version_problem`).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import inspect
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pdd_tasks.backends.base import route_requests
from pdd_tasks.errors import UserError
from pdd_tasks.registries import Registry


logger = logging.getLogger("pdd_tasks.lm_eval_patches")

#: The lm-eval release every patch was written against and checked with.
LM_EVAL_VERSION = "0.4.13"

#: How to install it.
PIP_INSTALL = f"pip install 'lm-eval[hf,api]=={LM_EVAL_VERSION}'"

#: The names lm-eval's console scripts are installed under (``sys.argv[0]``).
LM_EVAL_PROGRAMS = ("lm_eval", "lm-eval")

#: The vLLM release (major.minor) the vLLM patches (``vllm-prompt-logprob-arrays``, ``vllm-worker-prompt-stats``,
#: ``vllm-engine-exit``) were written against and checked with.
VLLM_VERSION = "0.32"

#: Attribute that marks a replacement as one of these patches' (its value: the patch's name).
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
    lm_eval_parts = [patch.name for patch in PATCHES.values() if patch.package == "lm_eval"]
    return (
        f"lm-eval {installed} is installed, but lm-eval-pdd works with lm-eval {LM_EVAL_VERSION} only: it "
        f"replaces parts of that release ({', '.join(lm_eval_parts)}: pdd_tasks/lm_eval_patches/). "
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
        f"vLLM {installed} is installed; patch vllm-prompt-logprob-arrays (pdd_tasks/lm_eval_patches/vllm.py), "
        f"which replaces part of vLLM {VLLM_VERSION}'s output processing (vllm/v1/engine/logprobs.py), is not "
        f"applied: exact_mu_sigma reads vLLM's own per-value lists instead, with the same scores at several "
        f"times the cost (docs/backends-evidence.md, 'What exact mu/sigma costs on vLLM'). The top-k mode is not affected."
    )


def _vllm_installed_version() -> str:
    """The installed vLLM's version, as the loaded ``vllm`` module gives it ("unknown" where none is loaded)."""
    return str(getattr(sys.modules.get("vllm"), "__version__", "unknown"))


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
            whose ``changes`` are relative to the ``vllm`` package; ``python`` for ``sys.excepthook``).
            The lm-eval version gate's message names the ``lm_eval`` ones.
        remote_suspend: for a patch whose targets live in another process (vLLM's worker): a context
            in which this process asks that process for the stock behaviour (entered by
            :meth:`suspended`); None for the others.
        before_version_gate: applied by :func:`apply` before the lm-eval version gate (``show-user-errors``:
            so that the gate's refusal, too, is a message), the others after it.
    """

    name: str
    purpose: str
    changes: str
    when: str
    targets: Callable[[], list[tuple[object, str]]]
    replacement: Callable[[object], object]
    package: str = "lm_eval"
    remote_suspend: Callable[[], contextlib.AbstractContextManager] | None = None
    before_version_gate: bool = False

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


#: Every change to lm-eval's behaviour by name, in the order :func:`apply` makes them.
PATCHES: Registry[Patch] = Registry(
    "lm-eval patch", unique_because="a patch's name marks its replacements and must be unique: rename one."
)


def register(*patches: Patch) -> None:
    """Add ``patches`` to :data:`PATCHES`, in this order, after those registered before (a name registered
    twice: :class:`~pdd_tasks.registries.DuplicateNameError`). Nothing is applied."""
    for patch in patches:
        PATCHES.register(patch.name, patch)


def apply() -> None:
    """Apply every patch of :data:`PATCHES` that concerns this process (idempotent).

    The patches marked ``before_version_gate`` first (``show-user-errors``, where it applies), then the
    version gate, then the others, in the order of :data:`PATCHES`; under
    lm-eval's command line the plugin's log lines are shown with lm-eval's (:func:`show_log_lines`).

    Raises:
        UnsupportedLmEvalVersion: the installed lm-eval is not :data:`LM_EVAL_VERSION`.
    """
    for patch in PATCHES.values():
        if patch.before_version_gate:
            patch.apply()
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
    >>> is_lm_eval_cli("/venv/bin/pytest", None), is_lm_eval_cli("-m", "pdd_tasks.lm_eval_patches.__main__")
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
