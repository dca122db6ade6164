"""Repeated texts in the inputs of a membership run: found, said, and (by default) scored once.

Every number a membership task reports (AUC and its standard error, TPR at FPR, the blind baseline,
a threshold, a U test, PTDI, dataset inference, EM-MIA) assumes that each text counts once: a text
given 4 times counts 4 times in a rank statistic and shrinks its standard error as if there were 4
independent texts, and its copies land on both sides of the blind baseline's cross-validation folds.
So a task looks for exact repeats of the texts it scores (after its own cut, e.g. ``max_words``)
within and across every input of the run (:func:`pdd_metrics.find_repeats`), and

- refuses the same text under two roles that exclude each other (member and non-member; suspect and
  known non-member), naming two places and the fix (:class:`RepeatedAcrossRoles`);
- otherwise scores each distinct text once (its first copy) and drops the others, unless the run
  sets ``keep_duplicates: true``; either way a warning says how many and where (a few places), and
  the results JSON records it under ``configs.<task>.metadata.repeats`` (:data:`METADATA_KEY`).
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Sequence

from pdd_metrics.repeats import Repeats, find_repeats
from pdd_tasks.loading.files import DatasetError


logger = logging.getLogger(__name__)

#: Where the results JSON records a run's repeats: ``configs.<task>.metadata.repeats``.
METADATA_KEY = "repeats"
#: How many repeated texts a message or the results JSON names by their places.
EXAMPLES = 3
#: The setting that keeps every copy.
SETTING = "keep_duplicates"


class RepeatedAcrossRoles(DatasetError):
    """The same text under two roles that exclude each other (a member and a non-member; a suspect and a
    known non-member)."""


def _quoted(text: str, limit: int = 60) -> str:
    return f"{text[:limit]!r}{'...' if len(text) > limit else ''}"


def refuse_across_roles(
    repeats: Repeats, texts: Sequence[str], places: Sequence[str], what: dict[Hashable, str], fix: str, source: str
) -> None:
    """Raise :class:`RepeatedAcrossRoles` where a repeated text has two roles: the first such text, two of
    its places with their roles (``what``: role -> how a message names it) and how many such texts."""
    across = repeats.across_roles
    if not across:
        return
    group = across[0]
    first = group[0]
    other = next(i for i in group if repeats.roles[i] != repeats.roles[first])
    more = f" ({len(across)} texts are so; this is the first)" if len(across) > 1 else ""
    raise RepeatedAcrossRoles(
        f"{source}: {places[first]} and {places[other]} hold the same text{more}, as {what[repeats.roles[first]]} "
        f"and as {what[repeats.roles[other]]} ({_quoted(texts[first])}); a text cannot be both. {fix}"
    )


def record_of(repeats: Repeats, places: Sequence[str], keep_duplicates: bool) -> dict:
    """What the results JSON records of a run's repeats: :meth:`pdd_metrics.Repeats.summary`, how many
    texts are scored, the setting, and the places of the first :data:`EXAMPLES` repeated texts."""
    return {
        **repeats.summary(),
        "scored": repeats.n_texts if keep_duplicates else repeats.n_distinct,
        SETTING: bool(keep_duplicates),
        "examples": [[places[i] for i in group] for group in repeats.groups[:EXAMPLES]],
    }


def _places_text(group: Sequence[int], places: Sequence[str], limit: int = 4) -> str:
    shown = [places[i] for i in group[:limit]]
    more = f" and {len(group) - limit} more" if len(group) > limit else ""
    return " = ".join(shown) + more


def warn(task: str, repeats: Repeats, texts: Sequence[str], places: Sequence[str], keep_duplicates: bool) -> None:
    """The log warning of a run with repeats: how many, where (:data:`EXAMPLES` texts' places), and what
    the run does with them."""
    examples = "; ".join(
        f"{_places_text(group, places)} ({_quoted(texts[group[0]], 40)})" for group in repeats.groups[:EXAMPLES]
    )
    more = f"; and {len(repeats.groups) - EXAMPLES} more repeated text(s)" if len(repeats.groups) > EXAMPLES else ""
    if keep_duplicates:
        then = (
            f"every copy is scored ({SETTING}: true): each repeated text counts once per copy in every metric, "
            f"its standard error and the blind baseline (only EM-MIA's prefixes are the distinct texts)"
        )
    else:
        then = (
            f"each distinct text is scored once (its first copy; the {repeats.n_extra_copies} other copies are "
            f"dropped); to score every copy, set --metadata '{{\"{SETTING}\": true}}'"
        )
    logger.warning(
        "%s: %d texts hold %d distinct texts: %d text(s) repeated, %d extra copies (at most %d copies of one), "
        "e.g. %s%s. A repeated text would count once per copy in AUC, its standard error, the blind baseline and "
        "every test; %s. The results JSON records them (configs.%s.metadata.%s).",
        task,
        repeats.n_texts,
        repeats.n_distinct,
        len(repeats.groups),
        repeats.n_extra_copies,
        repeats.largest_group,
        examples,
        more,
        then,
        task,
        METADATA_KEY,
    )


def scored_indices(
    task: str,
    texts: Sequence[str],
    places: Sequence[str],
    *,
    keep_duplicates: bool,
    roles: Sequence[Hashable] | None = None,
) -> tuple[list[int], dict]:
    """The indices of ``texts`` a run scores and the record of their repeats (:func:`record_of`).

    ``places`` names where each text is (e.g. ``"suspect.jsonl row 3"``), for the warning (given where
    a text repeats) and the record. Repeats under several ``roles`` must have been refused before
    (:func:`refuse_across_roles`); here roles only count repeats per role.
    """
    repeats = find_repeats(texts, roles=roles)
    record = record_of(repeats, places, keep_duplicates)
    if not repeats.groups:
        return list(range(len(texts))), record
    warn(task, repeats, texts, places, keep_duplicates)
    return (list(range(len(texts))) if keep_duplicates else list(repeats.first)), record


def distinct_rows(
    task: str,
    dataset,
    places: Sequence[str],
    *,
    keep_duplicates: bool,
    roles: Sequence[Hashable] | None = None,
):
    """``(dataset less the later copies of each repeated text (all of it with keep_duplicates), the
    record of its repeats)`` (:func:`scored_indices` over the dataset's ``text`` column)."""
    keep, record = scored_indices(task, dataset["text"], places, keep_duplicates=keep_duplicates, roles=roles)
    return (dataset if len(keep) == len(dataset) else dataset.select(keep)), record


def note_of(results: dict, task: str) -> str | None:
    """The line ``lm-eval-pdd table`` and ``report`` print under a task that scored repeated texts (from
    the results JSON's ``configs.<task>.metadata.repeats``), or None where it had none (or no record)."""
    record = (results.get("configs", {}).get(task, {}).get("metadata") or {}).get(METADATA_KEY)
    if not isinstance(record, dict) or not record.get("extra_copies"):
        return None
    examples = "; ".join(" = ".join(map(str, places)) for places in (record.get("examples") or [])[:1])
    if record.get(SETTING):
        then = f"every copy scored ({SETTING}: true): the metrics count a repeated text once per copy"
    else:
        then = f"each distinct text scored once ({record.get('scored')} texts; {SETTING}: true would score every copy)"
    return (
        f"Repeated texts in {task}: {record.get('texts')} texts hold {record.get('distinct')} distinct "
        f"({record.get('extra_copies')} extra copies, at most {record.get('largest_group')} of one"
        f"{', e.g. ' + examples if examples else ''}); {then}."
    )
