"""Exact repeats in a list of texts: which texts are copies of an earlier one, and where the copies are.

A membership score, an AUC and its standard error, a rank test or a dataset-level test all assume
that every text counts once. :func:`find_repeats` finds the texts that are equal after a given
normalisation (``normalise``, e.g. the cut a task applies before scoring), over one list that may
hold several inputs (suspects and references, members and non-members, several files) with a role
per text, so that repeats within an input and across inputs are found by one pass.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import numpy as np


__all__ = ["Repeats", "find_repeats"]


@dataclass(frozen=True)
class Repeats:
    """The exact repeats of a list of ``n_texts`` texts.

    Attributes:
        n_texts: how many texts the list holds.
        first: the index of the first occurrence of each distinct text, ascending (one per distinct text).
        groups: for each text that occurs more than once, the indices of all its copies (the first
            included), ascending; the groups ordered by their first index.
        roles: the role of each text (e.g. ``"suspect"`` / ``"reference"``, a label, a file), or None.
    """

    n_texts: int
    first: tuple[int, ...]
    groups: tuple[tuple[int, ...], ...]
    roles: tuple[Hashable, ...] | None = None

    @property
    def n_distinct(self) -> int:
        """How many distinct texts (after the normalisation)."""
        return len(self.first)

    @property
    def n_extra_copies(self) -> int:
        """How many texts are a copy of an earlier one (``n_texts - n_distinct``); 0 = no repeats."""
        return self.n_texts - self.n_distinct

    @property
    def largest_group(self) -> int:
        """How many copies the most repeated text has (1 where no text repeats, 0 for no texts)."""
        return max((len(group) for group in self.groups), default=min(self.n_texts, 1))

    @property
    def representative(self) -> np.ndarray:
        """Shape (n_texts,): for each text, the index of its first occurrence (itself where it is one)."""
        out = np.arange(self.n_texts)
        for group in self.groups:
            out[list(group)] = group[0]
        return out

    @property
    def keep(self) -> np.ndarray:
        """Shape (n_texts,), boolean: True at the first occurrence of each distinct text."""
        mask = np.zeros(self.n_texts, dtype=bool)
        mask[list(self.first)] = True
        return mask

    def roles_of(self, group: Sequence[int]) -> tuple[Hashable, ...]:
        """The distinct roles of the texts at ``group``, in order of first appearance (needs ``roles``)."""
        if self.roles is None:
            raise ValueError("these repeats were found without roles")
        return tuple(dict.fromkeys(self.roles[i] for i in group))

    @property
    def across_roles(self) -> tuple[tuple[int, ...], ...]:
        """The groups whose copies have more than one role (empty where no roles were given)."""
        if self.roles is None:
            return ()
        return tuple(group for group in self.groups if len(self.roles_of(group)) > 1)

    def summary(self) -> dict:
        """A short JSON-ready summary: ``texts``, ``distinct``, ``repeated_texts`` (texts that occur more
        than once), ``extra_copies``, ``largest_group``; with roles also ``by_role`` (per role: its
        ``texts`` and ``distinct`` texts within the role) and ``across_roles`` (repeated texts found
        under more than one role)."""
        out = {
            "texts": self.n_texts,
            "distinct": self.n_distinct,
            "repeated_texts": len(self.groups),
            "extra_copies": self.n_extra_copies,
            "largest_group": self.largest_group,
        }
        if self.roles is not None:
            representative = self.representative
            by_role: dict = {}
            for i, role in enumerate(self.roles):
                by_role.setdefault(role, {"texts": 0, "distinct": set()})
                by_role[role]["texts"] += 1
                by_role[role]["distinct"].add(int(representative[i]))
            out["by_role"] = {
                str(role): {"texts": entry["texts"], "distinct": len(entry["distinct"])}
                for role, entry in by_role.items()
            }
            out["across_roles"] = len(self.across_roles)
        return out


def find_repeats(
    texts: Sequence[str],
    *,
    normalise: Callable[[str], Hashable] | None = None,
    roles: Sequence[Hashable] | None = None,
) -> Repeats:
    """The exact repeats of ``texts`` after ``normalise`` (None: the texts as given, compared exactly).

    Args:
        texts: the texts, one list for all inputs of a run.
        normalise: a function of one text giving the key two copies share (e.g. the text the task scores:
            its first words, whitespace collapsed); None compares the texts themselves.
        roles: one role per text (which input, which class); kept on the result to tell repeats within
            a role from repeats across roles.

    Returns:
        a :class:`Repeats`.

    >>> r = find_repeats(["a", "b", "a", "c", "a", "b"])
    >>> r.first, r.groups
    ((0, 1, 3), ((0, 2, 4), (1, 5)))
    >>> r.summary()
    {'texts': 6, 'distinct': 3, 'repeated_texts': 2, 'extra_copies': 3, 'largest_group': 3}
    >>> find_repeats(["A x", "a  x"], normalise=lambda t: " ".join(t.lower().split())).groups
    ((0, 1),)
    """
    texts = list(texts)
    if roles is not None:
        roles = tuple(roles)
        if len(roles) != len(texts):
            raise ValueError(f"roles has {len(roles)} entries for {len(texts)} texts; give one role per text")
    positions: dict[Hashable, list[int]] = {}
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"text {index} is {type(text).__name__}, not a str")
        key = text if normalise is None else normalise(text)
        positions.setdefault(key, []).append(index)
    first = tuple(indices[0] for indices in positions.values())  # dicts keep insertion order: ascending
    groups = tuple(tuple(indices) for indices in positions.values() if len(indices) > 1)
    return Repeats(n_texts=len(texts), first=first, groups=groups, roles=roles)
