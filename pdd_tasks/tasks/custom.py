"""``pdd_custom``: the user's own texts from a local JSONL or CSV file, with or without labels.

Labelled (every row has the label field, 1 = member, 0 = non-member): the same metrics as every
benchmark (per method AUC, TPR@FPR<5%, TPR@FPR<1%).

Unlabelled (no row has the label field: the contamination check): every text is scored with every
method (per-text scores in ``--log_samples``). With a reference file of **known non-members of the
same kind** (``reference_files``), both sets are scored in the same run and, per method, the task
reports

- ``<method>_threshold``: tau of DC-PDD Eq. 9, calibrated so that at most ``target_fpr`` of the
  reference texts score above it (:func:`pdd_metrics.calibrate_threshold`);
- ``<method>_flagged``: the share of suspect texts scoring above tau (flagged as members);
- ``<method>_suspect_auc`` and ``<method>_pvalue``: the one-sided Mann-Whitney U test of suspect
  against reference scores (:func:`pdd_metrics.suspect_vs_reference_test`): is the suspect set, as
  a whole, scored as more "seen" than the known non-members?
- ``<method>_identified``: PTDI (Liu et al., ICML 2026, arXiv 2510.09717;
  :func:`pdd_metrics.identify_members`): each suspect text's conformal p-value against the reference
  scores, then Benjamini-Hochberg at metadata ``target_fdr`` (default 0.1): the number of suspect
  texts identified as members, of which at most a ``target_fdr`` share is expected to be non-members
  (if the references are exchangeable with the non-member suspects). Per text, ``--log_samples``
  holds ``ptdi``: ``{method: {"p_value": ..., "identified": ...}}``.

With reference texts the task also runs **dataset inference** (Maini et al., NeurIPS 2024;
:func:`pdd_metrics.dataset_inference_test`): every method's per-text score is a feature, a linear
model is fit on a random half of suspects vs references and a one-sided t-test on the other half
gives ``dataset_inference_pvalue`` (and ``dataset_inference_t``); metadata ``di_seed`` (default 0)
seeds the split. It needs at least 4 texts per set and assumes, like the U tests, that the
references differ from the suspects in nothing but membership.

``lm-eval-pdd decisions <output_path>`` turns the samples log into a decision per text.

    --metadata '{"data_files": "suspect.jsonl", "reference_files": "known_nonmembers.jsonl", "target_fpr": 0.05}'
"""

from __future__ import annotations

import difflib
import logging
import math
from collections import Counter
from dataclasses import dataclass

import datasets

from pdd_metrics.repeats import find_repeats
from pdd_tasks.errors import excerpt
from pdd_tasks.loading.benchmark_data import DatasetError, DataSpec, check_texts, normalise_rows, read_local_rows
from pdd_tasks.loading.repeats import distinct_rows, refuse_across_roles, scored_indices
from pdd_tasks.registry import SETTINGS, SettingError
from pdd_tasks.results_schema import (
    REFERENCE,
    SUSPECT,
    target_fdr,
    target_fpr,
)
from pdd_tasks.tasks import aggregations
from pdd_tasks.tasks.base import MembershipInferenceTask
from pdd_tasks.tasks.dataset_methods import EmMiaRunError


logger = logging.getLogger(__name__)

DEFAULT_LABEL_FIELD = "label"
#: The metadata keys of pdd_custom besides the method settings.
CUSTOM_KEYS = ("data_files", "reference_files", "target_fpr", "target_fdr", "text_field", "label_field", "language")


@dataclass(frozen=True)
class CustomData:
    """The texts of a ``pdd_custom`` run and how they are to be scored."""

    dataset: datasets.Dataset  # labelled: text, label; unlabelled: text, role, row
    labelled: bool
    has_reference: bool
    target_fpr: float
    target_fdr: float
    repeats: dict  # what the results JSON records of repeated texts (pdd_tasks.loading.repeats.record_of)


def _check_paths(key: str, value) -> None:
    """``data_files``/``reference_files``: a path or a list of paths (their rows are read in order)."""
    if (
        value is None
        or isinstance(value, str)
        or (isinstance(value, list) and value and all(isinstance(item, str) for item in value))
    ):
        return
    raise DatasetError(
        f'metadata {key}={excerpt(value)}: expected a file path or a list of file paths, e.g. "texts.jsonl" or '
        f'["part1.jsonl", "part2.csv"].'
    )


def _rows_and_places(value) -> tuple[list[dict], list[str]]:
    """The rows of ``data_files``/``reference_files`` (a path or a list of paths, read in order) and where
    each is (``<file> row <i>``, the row counted from 0 in its file; ``(listing <k>)`` after a file the list
    names more than once), for the messages about repeated texts."""
    paths = [value] if isinstance(value, str) else list(value)
    counts = Counter(paths)
    seen: Counter = Counter()
    rows: list[dict] = []
    places: list[str] = []
    for path in paths:
        seen[path] += 1
        name = path if counts[path] == 1 else f"{path} (listing {seen[path]})"
        read = read_local_rows(path)
        rows += read
        places += [f"{name} row {index}" for index in range(len(read))]
    return rows, places


def read_custom_data(metadata: dict, keep_duplicates: bool = False) -> CustomData:
    """Read and check the files named in the task metadata; decide labelled or unlabelled mode; find
    repeated texts within and across the files (:mod:`pdd_tasks.loading.repeats`): a text given as a
    suspect and as a reference is refused, and each other repeated text is kept once unless
    ``keep_duplicates``."""
    path = metadata.get("data_files")
    if not path:
        raise DatasetError(
            'pdd_custom needs a data file: --metadata \'{"data_files": "texts.jsonl"}\' (JSONL or CSV with a '
            "text field and, for labelled data, a 0/1 label field; 1 = member)."
        )
    _check_paths("data_files", path)
    _check_paths("reference_files", metadata.get("reference_files"))
    text_field = metadata.get("text_field", "text")
    label_field = metadata.get("label_field", DEFAULT_LABEL_FIELD)
    reference_path = metadata.get("reference_files")
    rate, fdr = target_fpr(metadata), target_fdr(metadata)
    rows, places = _rows_and_places(path)
    labelled = label_field is not None and any(label_field in row for row in rows)
    if not labelled and label_field not in (None, DEFAULT_LABEL_FIELD):  # a named field no row has: a typo?
        raise DatasetError(_label_field_missing(rows, path, label_field))
    if labelled:
        if reference_path:
            raise DatasetError(
                f"pdd_custom: {path} has labels (field {label_field!r}), so its metrics are AUC and TPR; "
                f"reference_files is for unlabelled texts. Drop reference_files, or set "
                f"--metadata '{{\"label_field\": null}}' to treat {path} as unlabelled."
            )
        ignored = [key for key in ("target_fpr", "target_fdr") if key in metadata]
        if ignored:
            logger.warning(
                "pdd_custom: %s ignored: %s has labels (field %r), so the run reports AUC and TPR at fixed FPRs "
                "(5%%, 1%%, 0.1%%); target_fpr and target_fdr set the threshold and the identification of an "
                "unlabelled run with reference_files. Remove %s, or set --metadata '{\"label_field\": null}' "
                "with reference_files to run it unlabelled.",
                " and ".join(f"{key}={metadata[key]!r}" for key in ignored),
                path,
                label_field,
                "it" if len(ignored) == 1 else "them",
            )
        dataset = normalise_rows(rows, str(path), text_field, label_field)
        dataset, repeats = distinct_rows(
            "pdd_custom", dataset, places, keep_duplicates=keep_duplicates, roles=list(dataset["label"])
        )
        return CustomData(dataset, labelled=True, has_reference=False, target_fpr=rate, target_fdr=fdr, repeats=repeats)

    suspect = check_texts(rows, str(path), text_field)
    reference, reference_places = [], []
    if reference_path:
        reference_rows, reference_places = _rows_and_places(reference_path)
        reference = check_texts(reference_rows, str(reference_path), text_field)
    texts, places = suspect + reference, places + reference_places
    roles = [SUSPECT] * len(suspect) + [REFERENCE] * len(reference)
    refuse_across_roles(
        find_repeats(texts, roles=roles),
        texts,
        places,
        {SUSPECT: "a suspect text (data_files)", REFERENCE: "a known non-member (reference_files)"},
        "Remove it from one of the files: a known non-member is no suspect, and a suspect among the references "
        "would calibrate the threshold and the tests on itself (do data_files and reference_files name the same "
        "file?).",
        "pdd_custom",
    )
    keep, repeats = scored_indices("pdd_custom", texts, places, keep_duplicates=keep_duplicates, roles=roles)
    set_rows = list(range(len(suspect))) + list(range(len(reference)))  # a text's row among its set's rows
    texts, roles, set_rows = ([values[i] for i in keep] for values in (texts, roles, set_rows))
    suspect, reference = texts[: roles.count(SUSPECT)], texts[roles.count(SUSPECT) :]
    rows_of_reference = repeats["by_role"].get(REFERENCE, {}).get("texts", 0)
    held = f"{len(reference)} distinct text ({rows_of_reference} rows)" if rows_of_reference > len(reference) else None
    if not reference:
        logger.warning(
            "pdd_custom: %s has no labels and no reference_files were given: per-text scores only "
            "(in --log_samples), no decisions. A score's scale depends on model, method and text; to "
            'decide, add --metadata \'{"reference_files": "<known non-members of the same kind>"}\'.',
            path,
        )
    elif len(reference) < 2:
        raise DatasetError(
            f"pdd_custom: {reference_path} holds {held or f'{len(reference)} text'}; a threshold and a rank test "
            f"need at least 2 known non-members ({math.ceil(1 / rate)} for target_fpr={rate}). Add texts to it."
        )
    elif len(reference) < math.ceil(1 / rate):
        logger.warning(
            "pdd_custom: %d distinct reference texts are too few for target_fpr=%s: the threshold is the highest "
            "reference score (FPR 0 on the reference set). Give at least %d known non-members.",
            len(reference),
            rate,
            math.ceil(1 / rate),
        )
    dataset = datasets.Dataset.from_dict({"text": texts, "role": roles, "row": set_rows})
    return CustomData(
        dataset, labelled=False, has_reference=bool(reference), target_fpr=rate, target_fdr=fdr, repeats=repeats
    )


def _label_field_missing(rows: list[dict], path, label_field: str) -> str:
    """The message for a ``label_field`` that no row has (a typo would otherwise make the run unlabelled)."""
    fields = sorted({name for row in rows for name in row})
    close = difflib.get_close_matches(label_field, fields, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return (
        f"pdd_custom: label_field={label_field!r}, but no row of {path} has that field (fields: {excerpt(fields)}); "
        f"{hint}Name the label field, or drop label_field (or set it to null) to score the texts unlabelled."
    )


class CustomMembershipTask(MembershipInferenceTask):
    """The user's own texts, labelled (benchmark metrics) or unlabelled (the contamination check)."""

    @classmethod
    def metadata_keys(cls) -> set[str]:
        return {setting.name for setting in SETTINGS} | set(CUSTOM_KEYS)

    def build_metric_list(self, metadata: dict) -> list[dict]:
        given = [key for key in DataSpec.METADATA_KEYS if key in metadata and key not in CUSTOM_KEYS]
        if given:
            raise DatasetError(
                f"pdd_custom: metadata {', '.join(f'{k}={metadata[k]!r}' for k in given)} is a data key of the "
                f"benchmark tasks and does not apply here: pdd_custom scores each text of data_files (and "
                f"reference_files) whole. Drop the key(s); to score shorter texts, cut them in the file (its keys: "
                f"{', '.join(CUSTOM_KEYS)})."
            )
        self.custom = read_custom_data(metadata, keep_duplicates=self.settings.keep_duplicates)
        self.dataset_inference = {} if self.custom.labelled else self.dataset_inference_aggregations(metadata)
        if self.settings.em_mia and not self.custom.labelled:
            raise EmMiaRunError(
                "pdd_custom: em_mia reports the AUC and TPR of its scores against the texts' labels, and these texts "
                "are unlabelled. Give every row a label field (1 = member, 0 = non-member), or drop em_mia."
            )
        if self.custom.labelled:
            return super().build_metric_list(metadata)
        return [
            {"metric": f"{method}_{name}", "aggregation": aggregate, "higher_is_better": higher_is_better}
            for method in self.settings.methods
            for name, (aggregate, higher_is_better) in self.unlabelled_aggregations().items()
        ] + [
            {"metric": name, "aggregation": aggregate, "higher_is_better": higher_is_better}
            for name, (aggregate, higher_is_better) in self.dataset_inference.items()
        ]

    def dataset_inference_aggregations(self, metadata: dict) -> dict:
        """Maini et al.'s dataset inference over every method's scores, where there are references
        (at least 4 texts per set: 2 to fit and 2 to test)."""
        if not self.custom.has_reference:
            return {}
        seed = metadata.get("di_seed", 0)
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise SettingError(f"metadata di_seed={seed!r}: expected a whole number >= 0, e.g. 0.")
        roles = list(self.custom.dataset["role"])
        smallest = min(roles.count(SUSPECT), roles.count(REFERENCE))
        if smallest < 4:
            logger.warning(
                "pdd_custom: no dataset inference: it needs at least 4 suspect and 4 reference texts "
                "(half to fit, half to test); there are %d and %d.",
                roles.count(SUSPECT),
                roles.count(REFERENCE),
            )
            return {}
        return aggregations.dataset_inference_aggregations(seed)

    def unlabelled_aggregations(self) -> dict:
        if not self.custom.has_reference:
            return {"mean": (aggregations.suspect_mean, True)}
        return aggregations.contamination_aggregations(self.custom.target_fpr, self.custom.target_fdr)

    def download(self, dataset_kwargs=None, **kwargs) -> None:
        if self.custom.has_reference:  # the setting PTDI's <method>_identified used, in the results JSON
            self.config.metadata.setdefault("target_fdr", self.custom.target_fdr)
        self.set_split(self.custom.dataset, repeats=self.custom.repeats)

    def annotate_logged_samples(self, samples: list[dict]) -> None:
        """PTDI per suspect text in ``--log_samples``, once every text is scored (called by patch
        ``samples-after-aggregation`` of :mod:`pdd_tasks.lm_eval_patches`): ``sample["ptdi"][method]``
        = its conformal p-value against the reference texts and whether Benjamini-Hochberg at
        ``target_fdr`` identifies it as a member (the texts counted by ``<method>_identified``)."""
        if self.custom.labelled:
            return super().annotate_logged_samples(samples)
        if not self.custom.has_reference:
            return
        suspects = [sample for sample in samples if sample["doc"]["role"] == SUSPECT]
        for method in self.settings.methods:
            items = [sample[f"{method}_identified"] for sample in samples]
            result = aggregations.identification(items, self.custom.target_fpr, self.custom.target_fdr)
            for sample, p_value, identified in zip(suspects, result.p_values, result.identified, strict=True):
                sample.setdefault("ptdi", {})[method] = {"p_value": float(p_value), "identified": bool(identified)}

    def process_results(self, doc: dict, results: list) -> dict:
        if self.custom.labelled:
            return super().process_results(doc, results)
        scores = self.checked_scores(doc, results)
        is_suspect = int(doc["role"] == SUSPECT)
        features = tuple(scores[method] for method in self.settings.methods)
        return {
            f"{method}_{name}": (scores[method], is_suspect)
            for method in self.settings.methods
            for name in self.unlabelled_aggregations()
        } | {name: (features, is_suspect) for name in self.dataset_inference}
