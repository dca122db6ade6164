"""What the pdd tasks read of the registry once every method is registered: :data:`SETTINGS` (every
setting, each declared once), :class:`ScoringSettings` (their values, read from a task's metadata,
and the methods in effect), the requests of the methods in effect, their scores and table labels,
and :data:`DEFAULT_METHODS`.

The method families are imported here one by one, in table order: each registers its entries when it
is imported, and registration order is table order. A new family module goes into that list at its
place.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import field
from typing import Any

from pdd_tasks.registry.core import METHODS, TextInputs
from pdd_tasks.registry.em_mia import DATASET_METHOD_SETTINGS, EM_MIA, EM_MIA_SETTINGS
from pdd_tasks.registry.settings import GENERAL_SETTINGS, Setting


# The method families, in table order: each import registers the family's entries (not sorted by name).
# isort: off
from pdd_tasks.registry import reference_free  # noqa: F401
from pdd_tasks.registry import reference_based  # noqa: F401
# isort: on


logger = logging.getLogger(__name__)


#: Every method name, in table order.
METHOD_NAMES: tuple[str, ...] = tuple(METHODS)


def _all_settings() -> tuple[Setting, ...]:
    declared: dict[str, Setting] = {}
    for setting in (
        [s for method in METHODS.values() for s in method.settings] + list(EM_MIA_SETTINGS) + list(GENERAL_SETTINGS)
    ):
        if declared.setdefault(setting.name, setting) is not setting:
            raise RuntimeError(f"setting {setting.name!r} is declared twice in the method registry")
    return tuple(declared.values())


SETTINGS: tuple[Setting, ...] = _all_settings()


def _from_metadata(cls, metadata: dict):
    """The settings in ``metadata`` (absent keys take their defaults), each checked; a warning names
    settings given for methods that are off (:func:`settings_of_methods_off`)."""
    settings = cls(**{setting.name: setting.read(metadata) for setting in SETTINGS})
    idle = settings_of_methods_off(metadata, settings)
    if idle:
        logger.warning(
            "metadata %s given, but only read by method(s) that are off with these settings: %s. "
            "Turn the method on (see its settings in docs/methods.md), or drop the key.",
            ", ".join(map(repr, idle)),
            "; ".join(
                f"{name} (its settings: {', '.join(s.name for s in readers)})"
                for name, readers in [(name, METHODS[name].settings) for name in METHODS]
                + list(DATASET_METHOD_SETTINGS.items())
                if not _in_effect(name, settings) and any(s.name in idle for s in readers)
            ),
        )
    return settings


def settings_of_methods_off(metadata: dict, settings) -> list[str]:
    """Keys of ``metadata`` that only methods that are off read (e.g. ``neighbor_count`` without
    ``neighbor_model``): given, and without effect."""
    read = {s.name for name in settings.methods for s in METHODS[name].settings}
    read |= {s.name for s in GENERAL_SETTINGS}
    read |= {s.name for name, readers in DATASET_METHOD_SETTINGS.items() if _in_effect(name, settings) for s in readers}
    every = [s for method in METHODS.values() for s in method.settings]
    every += [s for readers in DATASET_METHOD_SETTINGS.values() for s in readers]
    switches = {s.name for s in every if s.switch}
    return [key for key in metadata if key in {s.name for s in every} and key not in read and key not in switches]


def _in_effect(name: str, settings) -> bool:
    """Whether method ``name`` (a per-text or a dataset-level one, whose switch is its name) is in effect."""
    return name in settings.methods or bool(getattr(settings, name, False))


def _methods_in_effect(self) -> tuple[str, ...]:
    return tuple(name for name, method in METHODS.items() if method.enabled(self))


#: The values of every setting of :data:`SETTINGS` (frozen; attributes named as the settings).
ScoringSettings = dataclasses.make_dataclass(
    "ScoringSettings",
    [(s.name, Any, field(default=s.default)) for s in SETTINGS],
    frozen=True,
    namespace={
        "from_metadata": classmethod(_from_metadata),
        "methods": property(_methods_in_effect, doc="Names of the methods in effect, in table order."),
        "__doc__": "Method and scoring settings read from a task's metadata; see pdd_tasks.registry.SETTINGS.",
    },
)
ScoringSettings.__module__ = __name__


def _requests_of(kind: str, text: str, settings, prepared: dict[str, Any] | None) -> list[tuple[str, str, Any]]:
    """``(method name, context, second argument)`` of every request the methods in effect list in their
    attribute ``kind`` (``extra_requests`` or ``generations``), in request order."""
    prepared = prepared or {}
    return [
        (name, context, argument)
        for name in settings.methods
        if getattr(METHODS[name], kind) is not None
        for context, argument in getattr(METHODS[name], kind)(text, settings, prepared.get(name))
    ]


def extra_requests(text: str, settings, prepared: dict[str, Any] | None = None) -> list[tuple[str, str, str]]:
    """``(method name, context, continuation)`` of every extra request of the methods in effect, in
    request order. ``prepared``: method name -> what its ``prepare`` returned for this run."""
    return _requests_of("extra_requests", text, settings, prepared)


def generation_requests(text: str, settings, prepared: dict[str, Any] | None = None) -> list[tuple[str, str, dict]]:
    """``(method name, context, gen_kwargs)`` of every generation request of the methods in effect, in
    request order (after the loglikelihood requests of :func:`extra_requests`)."""
    return _requests_of("generations", text, settings, prepared)


def planned_requests(texts: int, settings) -> tuple[int, list[tuple[str, int]]]:
    """At most how many requests ``texts`` texts send under ``settings`` (EM-MIA's aside), and per
    method in effect with more requests than the text's own, how many it adds per text."""
    extra = [(name, METHODS[name].requests_per_text(settings)) for name in settings.methods]
    extra = [(name, count) for name, count in extra if count]
    return texts * (1 + sum(count for _, count in extra)), extra


def count_setting(name: str, settings) -> str | None:
    """The setting of method ``name`` whose value is its per-text request count, as ``setting=value``
    (``pac_augmentations=5``, ``samia_samples=10``, ``neighbor_count=25``): what to lower where that count
    makes a run too large; None where no setting of the method is that count (a fixed one request)."""
    count = METHODS[name].requests_per_text(settings)
    named = [
        setting.name
        for setting in METHODS[name].settings
        if not isinstance(getattr(settings, setting.name), bool) and getattr(settings, setting.name) == count
    ]
    return f"{named[0]}={count:,}" if count > 1 and named else None


def score_text(inputs: TextInputs, settings) -> dict[str, float]:
    """Every method's score of one text (higher = more likely a member), for the methods in effect."""
    return {name: METHODS[name].score(inputs, settings) for name in settings.methods}


def label(name: str, settings) -> str:
    """The table label of method ``name`` under ``settings`` (e.g. "Min-K% (k=0.1)"; EM-MIA's names its start)."""
    if name == EM_MIA:
        return f"EM-MIA (from {label(settings.em_mia_init, settings)})"
    return METHODS[name].label(settings)


#: The methods in effect with every setting at its default.
DEFAULT_METHODS: tuple[str, ...] = ScoringSettings().methods
