"""How many texts a task scored (:class:`Counts`): the results JSON's total, and the members and non-members
of its ``--log_samples`` file where that file holds exactly the texts the total counts (:func:`counts_of`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pdd_metrics.intervals import null_auc_standard_error
from pdd_tasks.registry import METHOD_NAMES
from pdd_tasks.results_schema import BLIND, FEW_TEXTS


@dataclass(frozen=True)
class Counts:
    """How many texts a task scored.

    ``total`` is the results JSON's (``n-samples``: the texts its AUCs and TPRs are computed from);
    ``members`` and ``non_members`` come from the samples file, and only where it holds exactly
    those texts. Otherwise they are None; without a samples file (no ``--log_samples``) that is
    all, and for a samples file that holds fewer or more texts than the results JSON counts (or no
    labels) ``problem`` names the file and what it holds.
    """

    total: int | None
    members: int | None = None
    non_members: int | None = None
    problem: str | None = None

    def too_few(self) -> str | None:
        """Why the counts are too small to read the AUCs and TPRs as evidence, where a class has fewer
        than :data:`FEW_TEXTS` texts (the run log's warning, for the outputs people read), else None."""
        if self.members is not None and self.non_members is not None:
            if 0 < min(self.members, self.non_members) < FEW_TEXTS:
                se = null_auc_standard_error(self.members, self.non_members)
                return (
                    f"{_plural(self.members, 'member')} and {_plural(self.non_members, 'non-member')}, fewer than "
                    f"{FEW_TEXTS} of a class. An AUC from so few has a standard error of about {se:.2f} at AUC 0.5, "
                    "so an AUC or TPR of 1.000 (or 0.000) here is no evidence of membership; score at least "
                    f"{FEW_TEXTS} texts of each class."
                )
        elif self.total is not None and self.total < 2 * FEW_TEXTS:
            return (
                f"{self.total} texts in all, so fewer than {FEW_TEXTS} of a class (how many members and "
                "non-members is not known without a complete samples file). AUCs and TPRs from so few are no "
                f"evidence of membership; score at least {FEW_TEXTS} texts of each class."
            )
        return None

    def describe(self) -> str:
        """``"20 texts (10 members, 10 non-members)"``, or ``"20 texts"`` where the classes are unknown."""
        text = f"{self.total if self.total is not None else '?'} texts"
        if self.members is not None and self.non_members is not None:
            text += f" ({_plural(self.members, 'member')}, {_plural(self.non_members, 'non-member')})"
        return text


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _labels(samples: list[dict]) -> list[int] | None:
    """Each record's label (the second item of a ``<method>_auc`` entry), or None where the records
    hold no labelled metric."""
    key = next((f"{m}_auc" for m in (BLIND, *METHOD_NAMES) if samples and f"{m}_auc" in samples[0]), None)
    if key is None:
        return None
    try:
        return [int(sample[key][1]) for sample in samples]
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def counts_of(total: int | None, file: Path | None, samples: list[dict] | None, results_name: str) -> Counts:
    """The texts a task scored: ``total`` from the results JSON (named ``results_name``), the classes from
    ``samples``, the records of its samples file ``file`` (None without one), where they are the same texts;
    a samples file holding another number of texts is named in ``problem``."""
    if file is None:
        return Counts(total)
    samples = samples or []
    labels = _labels(samples)
    held = f"{len(samples)} texts" + (
        f" ({sum(labels)} members, {len(labels) - sum(labels)} non-members)" if labels is not None else ""
    )
    if total is not None and len(samples) != total:
        what, fix = (
            ("is incomplete", "a complete samples file")
            if len(samples) < total
            else (
                "holds more texts than the run scored (a samples file of another run of this task, left from "
                "an earlier run into the same folder?)",
                "a samples file of this run",
            )
        )
        return Counts(
            total,
            problem=(
                f"the samples file {file} {what}: it holds {held}, but the results JSON {results_name} "
                f"counts {total} texts scored, and its AUCs and TPRs are computed from all {total}. Member "
                "and non-member counts, plots and the FPR-budget marks (†) are left out for this task; re-run "
                f"lm_eval with --log_samples for {fix}."
            ),
        )
    if labels is None:
        return Counts(total, problem=f"the samples file {file} holds no labelled metric")
    return Counts(len(samples), sum(labels), len(labels) - sum(labels))
