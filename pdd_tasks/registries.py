"""One registry mechanism for every table of named entries in the package, as lm-eval's own
``lm_eval.api.registry.Registry`` is for its models, tasks, metrics, filters, ...

A :class:`Registry` holds entries by name, in registration order (the order of tables, of metrics, of
the patches applied, of ``lm-eval-pdd --help``). It is a read-only :class:`~collections.abc.Mapping`
(``name in registry``, ``registry[name]``, ``keys()``, ``values()``, ``items()``, ``len``), filled by
:meth:`Registry.register` only, which refuses a name registered twice (:class:`DuplicateNameError`).
An entry may be given lazily as the path of what it is, ``"module:attribute"`` (or ``"module"`` for a
module itself), as lm-eval names its lazy entries: the module is imported when the entry is first
looked up, not when it is registered. An unknown name raises :class:`UnknownNameError` (a
:class:`KeyError`) whose message lists the close names (``did you mean ...``) and every known one.

The registries: :data:`pdd_tasks.registry.METHODS` (the per-text methods),
:data:`pdd_tasks.dataset_tests.DATASET_TESTS` (the dataset-level tests),
:data:`pdd_tasks.tasks.dataset_methods.DATASET_METHODS` (EM-MIA, the blind baseline),
:data:`pdd_tasks.lm_eval_patches.PATCHES` (the changes to lm-eval) and
:data:`pdd_tasks.tools.cli.COMMANDS` (the ``lm-eval-pdd`` commands, lazy: one command's module is
imported when it runs).

This module imports nothing of the project: it is the lowest layer of :mod:`pdd_tasks`.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar


__all__ = ["DuplicateNameError", "Registry", "UnknownNameError", "load_path"]

T = TypeVar("T")

#: A lazy entry's path: ``module`` or ``module:attribute``, each a dotted name of identifiers.
_PATH = re.compile(r"(?!\d)\w+(\.(?!\d)\w+)*(:(?!\d)\w+(\.(?!\d)\w+)*)?")

#: The most close names an unknown name's message suggests.
_CLOSE_NAMES = 3


class DuplicateNameError(ValueError):
    """A name registered twice in one registry (a programming error, as in lm-eval's registry)."""


class UnknownNameError(KeyError):
    """A name no entry of the registry has; the message names the close ones and every known one."""

    def __str__(self) -> str:  # KeyError's own shows the repr of its message, quotes and \n included
        return str(self.args[0]) if self.args else ""


def load_path(path: str) -> Any:
    """What ``path`` names, imported now: ``"package.module:name"`` -> that attribute of the module
    (a dotted name walks attributes), ``"package.module"`` -> the module itself.

    >>> load_path("collections.abc:Mapping").__name__, load_path("collections.abc").__name__
    ('Mapping', 'collections.abc')
    """
    module, _, attribute = path.partition(":")
    found: Any = importlib.import_module(module)
    for part in attribute.split(".") if attribute else ():
        found = getattr(found, part)
    return found


class _Lazy:
    """A registered entry not imported yet: its path."""

    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path

    def __repr__(self) -> str:
        return f"<lazy {self.path}>"


class Registry(Mapping[str, T], Generic[T]):
    """Entries of one kind by name, in registration order, registered once each.

    Args:
        kind: what an entry is, for messages (``"method"``, ``"lm-eval-pdd command"``).
        duplicate_error: the :class:`DuplicateNameError` subclass a second registration of a name raises.
        unique_because: why a name must be unique, with the fix (ends the duplicate's message).
        describe: ``describe(entry)`` -> how the duplicate's message tells two loaded entries of one
            name apart (e.g. their citations); a lazy entry is shown as its path.
    """

    def __init__(
        self,
        kind: str,
        *,
        duplicate_error: type[DuplicateNameError] = DuplicateNameError,
        unique_because: str = "",
        describe: Callable[[T], str] | None = None,
    ) -> None:
        self.kind = kind
        self._duplicate_error = duplicate_error
        self._unique_because = unique_because
        self._describe = describe
        self._entries: dict[str, T | _Lazy] = {}
        self._summaries: dict[str, str] = {}

    # -- registering ---------------------------------------------------------------------------------

    def register(self, name: str, entry: T | str, *, summary: str = "") -> T | str:
        """Add ``entry`` under ``name``, after every entry registered before it; returns ``entry``.

        A ``str`` entry is lazy: the path ``"module:attribute"`` (or ``"module"``) of the entry,
        imported when ``name`` is first looked up (:func:`load_path`); a registry never holds plain
        strings. ``summary``: one line about the entry, known without importing it
        (:meth:`summary`; ``lm-eval-pdd --help`` lists the commands' summaries).

        Raises:
            DuplicateNameError: (the registry's subclass) ``name`` is registered already; the first
                entry stays.
            ValueError: a lazy path that is no ``module:attribute``.
        """
        if name in self._entries:
            raise self._duplicate_error(self._duplicate_message(name, entry))
        if isinstance(entry, str):
            if not _PATH.fullmatch(entry):
                raise ValueError(
                    f"{self.kind} {name!r}: the lazy entry {entry!r} is no 'package.module:attribute' (or 'package.module')"
                )
            self._entries[name] = _Lazy(entry)
        else:
            self._entries[name] = entry
        if summary:
            self._summaries[name] = summary
        return entry

    def registering(self, name: str, *, summary: str = "") -> Callable[[T], T]:
        """Decorator form of :meth:`register`: ``@REGISTRY.registering("name")`` above a class or
        function registers it under ``name`` (registration order is then definition order)."""

        def decorate(entry: T) -> T:
            self.register(name, entry, summary=summary)
            return entry

        return decorate

    @contextlib.contextmanager
    def added(self, name: str, entry: T | str, *, summary: str = "") -> Iterator[T | str]:
        """For tests: ``entry`` registered under ``name`` (the duplicate rule applies) for the duration
        of a ``with`` block, removed after it."""
        self.register(name, entry, summary=summary)
        try:
            yield entry
        finally:
            del self._entries[name]
            self._summaries.pop(name, None)

    def _duplicate_message(self, name: str, entry: T | str) -> str:
        shown = [self._shown(self._entries[name]), self._shown(_Lazy(entry) if isinstance(entry, str) else entry)]
        told = f" ({' and '.join(shown)})" if all(shown) else ""
        return f"{self.kind} {name!r} is registered twice{told}" + (
            f": {self._unique_because}" if self._unique_because else "."
        )

    def _shown(self, entry: T | _Lazy) -> str:
        if isinstance(entry, _Lazy):
            return entry.path
        return self._describe(entry) if self._describe else ""

    # -- looking up ----------------------------------------------------------------------------------

    def __getitem__(self, name: str) -> T:
        """The entry ``name``, imported now if it was registered lazily.

        Raises:
            UnknownNameError: no entry has that name (the message suggests close ones).
        """
        try:
            entry = self._entries[name]
        except (KeyError, TypeError):
            raise UnknownNameError(self.unknown_message(name)) from None
        if isinstance(entry, _Lazy):
            entry = self._entries[name] = load_path(entry.path)
        return entry

    def get(self, name: str, default: Any = ...) -> T:
        """``registry[name]``; with a ``default``, that default for an unknown name (as ``dict.get``)."""
        if default is not ... and name not in self:
            return default
        return self[name]

    def __contains__(self, name: object) -> bool:
        """Whether ``name`` is registered (imports nothing)."""
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        """The names, in registration order (imports nothing; ``values()``/``items()`` import lazy entries)."""
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def summary(self, name: str) -> str:
        """The one line registered with ``name`` (``""`` if none), without importing its entry."""
        if name not in self._entries:
            raise UnknownNameError(self.unknown_message(name))
        return self._summaries.get(name, "")

    def is_loaded(self, name: str) -> bool:
        """Whether entry ``name`` is imported (a lazy entry not looked up yet is not)."""
        return not isinstance(self._entries[name], _Lazy)

    def unknown_message(self, name: object) -> str:
        """The message for an unknown ``name``: the close names, then every known one."""
        known = list(self._entries)
        close = difflib.get_close_matches(str(name), known, n=_CLOSE_NAMES) if isinstance(name, str) else []
        hint = f"; did you mean {' or '.join(repr(match) for match in close)}?" if close else "."
        listing = ", ".join(known) if known else "none registered"
        return f"no {self.kind} is named {name!r}{hint} (every {self.kind}: {listing})"

    def __repr__(self) -> str:
        return f"<Registry of {len(self)} {self.kind} entries: {', '.join(self._entries)}>"
