"""The prefixes of ReCaLL and Con-ReCall: which known texts go before each scored text.

A prefix is ``recall_shots`` known non-member texts (ReCaLL, Con-ReCall) or known member texts
(Con-ReCall), joined with no separator, as the authors' code joins them (``"".join(prefix)``). They
come from

- a pool file the user names (metadata ``recall_prefix_file``: JSONL, JSON, CSV or Parquet with a
  ``text`` field and a ``label`` field, 0 = known non-member, 1 = known member; a file without any
  ``label`` holds non-members only). The first ``recall_shots`` texts of each kind are taken, in
  file order; or
- the benchmark's own documents: ``recall_shots`` label-0 documents (and, for Con-ReCall,
  ``recall_shots`` label-1 documents) drawn with seed ``recall_seed``.

**A text used in a prefix is never scored.** Every document of the evaluated split whose text is a
prefix text is held out: removed from the split before the harness builds its requests (so also
before ``--limit``), and listed in the results JSON under ``configs.<task>.metadata.recall_prefixes``
(its index in the loaded split, its label and the first 12 hex digits of the SHA-256 of its text).
The authors' scripts hold their prefix documents out the same way; fast-mia draws its prefixes from
the texts it then scores, which puts a scored text's own label into the prefix.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pdd_tasks.errors import UserError, excerpt
from pdd_tasks.loading.files import DatasetError, read_rows


class PrefixError(UserError):
    """ReCaLL's prefixes cannot be formed from the settings and the data (too few texts, no labels)."""


#: How prefix texts are joined (the authors' code: ``"".join(prefix)``).
SEPARATOR = ""


def text_hash(text: str) -> str:
    """The first 12 hex digits of the SHA-256 of the UTF-8 text (how the results JSON names a text).

    >>> text_hash("abc")
    'ba7816bf8f01'
    """
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


@dataclass(frozen=True)
class Prefixes:
    """What ReCaLL and Con-ReCall use for one run (the result of their ``prepare``).

    Attributes:
        nonmember: the non-member prefix P (joined texts).
        member: the member prefix of Con-ReCall, or None where Con-ReCall is off.
        held_out: indices (in the loaded split) of the documents that must not be scored.
        record: what the results JSON records (``recall_prefixes``).
    """

    nonmember: str
    member: str | None
    held_out: tuple[int, ...]
    record: dict = field(compare=False)

    def recorded(self) -> dict:
        """Metadata entries for the results JSON."""
        return {"recall_prefixes": self.record}


def draw_documents(labels: Sequence[int], label: int, shots: int, seed: int) -> list[int]:
    """Indices of ``shots`` documents with ``label``, drawn with ``seed`` (one stream per label,
    so the non-member draw is the same with Con-ReCall on or off).

    >>> draw_documents([0, 1, 0, 0, 1], 0, 2, seed=0) == draw_documents([0, 1, 0, 0, 1], 0, 2, seed=0)
    True
    >>> sorted(draw_documents([0, 1, 0, 0, 1], 1, 2, seed=3))
    [1, 4]
    """
    candidates = np.flatnonzero(np.asarray(labels) == label)
    order = np.random.default_rng([seed, label]).permutation(candidates)
    return [int(index) for index in order[:shots]]


def read_pool(path: str) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """``(non-members, members)`` of a prefix pool file, each a list of ``(row, text)`` in file order."""
    rows = read_rows(path)
    if not rows:
        raise DatasetError(f"recall_prefix_file {path}: the file has no rows; give known non-member texts.")
    labelled = any("label" in row for row in rows)
    nonmembers, members = [], []
    for index, row in enumerate(rows):
        text = row.get("text")
        if not isinstance(text, str) or not text.strip():
            raise DatasetError(
                f"recall_prefix_file {path}, row {index}: no non-empty text in field 'text' (fields: {excerpt(sorted(row))}). "
                f'Each row needs {{"text": "...", "label": 0}} (0 = known non-member, 1 = known member).'
            )
        label = row.get("label", 0 if not labelled else None)
        label = {"0": 0, "1": 1}.get(label.strip(), label) if isinstance(label, str) else label
        if isinstance(label, bool) or label not in (0, 1):
            raise DatasetError(
                f"recall_prefix_file {path}, row {index}: label {excerpt(label)}; expected 0 (known non-member) or 1 "
                f"(known member). A file without any label field holds non-members only."
            )
        (members if label == 1 else nonmembers).append((index, text))
    return nonmembers, members


def prefixes_for(split, settings, task: str) -> Prefixes:
    """The prefixes of a run and the documents of ``split`` they hold out (see the module docstring).

    Args:
        split: the loaded split (a ``datasets.Dataset`` with ``text`` and, for benchmarks, ``label``).
        settings: the run's ``ScoringSettings`` (``recall_shots``, ``con_recall``, ``recall_prefix_file``,
            ``recall_seed``).
        task: the task name, for messages.
    """
    shots, contrast = settings.recall_shots, settings.con_recall
    if shots < 1:
        raise PrefixError(
            f"{task}: con_recall is on but recall_shots is 0; Con-ReCall needs recall_shots >= 1 (the number of "
            f"known non-member and member texts in its prefixes, e.g. 7)."
        )
    texts = list(split["text"])
    labels = list(split["label"]) if "label" in split.column_names else None
    kinds = ("nonmember", "member") if contrast else ("nonmember",)
    chosen: dict[str, list[tuple[int, str]]] = {}
    if settings.recall_prefix_file:
        path = settings.recall_prefix_file
        pool = dict(zip(("nonmember", "member"), read_pool(path), strict=True))
        for kind in kinds:
            if len(pool[kind]) < shots:
                label = 0 if kind == "nonmember" else 1
                raise DatasetError(
                    f"{task}: recall_shots={shots}, but recall_prefix_file {path} has {len(pool[kind])} "
                    f"{kind.replace('nonmember', 'non-member')} text(s) (label {label}); add texts or lower recall_shots."
                )
            chosen[kind] = pool[kind][:shots]
        source = {"source": "recall_prefix_file", "path": str(path)}
        position = "row"
    else:
        if labels is None:
            raise PrefixError(
                f"{task}: ReCaLL needs known non-member texts for its prefix, and these texts have no labels to "
                f'take them from. Name a file of known non-members: --metadata \'{{"recall_prefix_file": "known.jsonl"}}\'.'
            )
        for kind, label in zip(kinds, (0, 1), strict=False):
            available = labels.count(label)
            if available <= shots:
                raise PrefixError(
                    f"{task}: recall_shots={shots} would hold out {shots} of the {available} documents with label "
                    f"{label}, leaving none to score. Lower recall_shots, or name a file of known texts with "
                    f"recall_prefix_file."
                )
            chosen[kind] = [(i, texts[i]) for i in draw_documents(labels, label, shots, settings.recall_seed)]
        source = {"source": "held-out benchmark documents", "seed": settings.recall_seed}
        position = "index"

    prefix_texts = {text for kind in kinds for _, text in chosen[kind]}
    held_out = tuple(i for i, text in enumerate(texts) if text in prefix_texts)
    if labels is not None:
        for label in (0, 1):
            if all(labels[i] != label for i in set(range(len(texts))) - set(held_out)):
                raise PrefixError(
                    f"{task}: every document with label {label} is a prefix text, so none is left to score; "
                    f"lower recall_shots or use other prefix texts."
                )
    elif len(held_out) == len(texts):
        raise PrefixError(f"{task}: every text is a prefix text, so none is left to score.")
    record = {
        **source,
        "shots": shots,
        "separator": SEPARATOR,
        **{f"{kind}_prefix": [{position: i, "sha256": text_hash(text)} for i, text in chosen[kind]] for kind in kinds},
        "held_out": {
            "count": len(held_out),
            "documents": [
                {"index": i, **({"label": int(labels[i])} if labels is not None else {}), "sha256": text_hash(texts[i])}
                for i in held_out
            ],
        },
    }
    return Prefixes(
        nonmember=SEPARATOR.join(text for _, text in chosen["nonmember"]),
        member=SEPARATOR.join(text for _, text in chosen["member"]) if contrast else None,
        held_out=held_out,
        record=record,
    )


def prepare_prefixes(task, settings) -> Prefixes:
    """The ``prepare`` hook of ReCaLL and Con-ReCall: the prefixes of the task's loaded split."""
    return prefixes_for(task.dataset[task.config.test_split], settings, task.config.task)
