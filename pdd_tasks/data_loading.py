"""Loading and checking the labelled texts of a pdd task.

Every pdd task's documents are normalised to ``{"text": str, "label": int}`` with label 1 = member
(seen in training) and 0 = non-member, and checked before any model work starts: an empty text, a
missing or non-binary label, or a dataset with one class is an error that names the row and the fix.
"""

from __future__ import annotations

import gzip
import importlib.resources
import json
from collections.abc import Iterator
from pathlib import Path

import datasets


PACKAGED_DATA = importlib.resources.files("pdd_tasks") / "data"


class DatasetError(ValueError):
    pass


def iter_jsonl_records(path: str | Path) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` for each non-blank line of a ``.jsonl`` or gzipped ``.jsonl.gz``.

    Gzip is detected from the file's magic bytes. A line that is not a JSON object raises
    :class:`DatasetError` naming the file and the 1-based line number.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"file {str(path)!r} not found")
    with open(path, "rb") as handle:
        opener = gzip.open if handle.read(2) == b"\x1f\x8b" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise DatasetError(f"{path}:{line_number}: not valid JSON ({error})") from None
            if not isinstance(record, dict):
                raise DatasetError(f"{path}:{line_number}: expected a JSON object, got {type(record).__name__}")
            yield line_number, record


def read_jsonl(path: str | Path) -> list[dict]:
    return [record for _, record in iter_jsonl_records(path)]


def read_local_rows(path: str | Path) -> list[dict]:
    """Rows of a local ``.jsonl``/``.json`` (one object per line) or ``.csv`` file."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise DatasetError(f"Data file not found: {path}. Give the path of a .jsonl or .csv file.")
    if path.suffix == ".csv":
        return datasets.load_dataset("csv", data_files=str(path), split="train").to_list()
    if path.suffix in (".jsonl", ".json"):
        return read_jsonl(path)
    raise DatasetError(f"{path}: unsupported file type {path.suffix!r}; use .jsonl (one JSON object per line) or .csv.")


def normalise_rows(rows: list[dict], source: str, text_field: str, label_field: str) -> datasets.Dataset:
    """Check and convert rows to a Dataset with columns ``text`` and ``label`` (1 = member).

    Raises :class:`DatasetError` for an empty dataset, a row without the text or label field, an
    empty text, a label other than 0/1, or a dataset of one class (AUC and TPR are undefined there).
    """
    if not rows:
        raise DatasetError(f"{source}: the dataset has no rows.")
    texts, labels = [], []
    for index, row in enumerate(rows):
        if text_field not in row:
            raise DatasetError(
                f"{source}, row {index}: no field {text_field!r} (fields: {sorted(row)}). "
                f"Name the text field with --metadata '{{\"text_field\": \"...\"}}'."
            )
        text = row[text_field]
        if not isinstance(text, str) or not text.strip():
            raise DatasetError(f"{source}, row {index}: the text is empty; an empty text cannot be scored. Remove the row.")
        label = row.get(label_field)
        if label is None:
            raise DatasetError(
                f"{source}, row {index}: no label (field {label_field!r}). Every row needs label 1 "
                f"(member) or 0 (non-member); name the label field with --metadata '{{\"label_field\": \"...\"}}'."
            )
        if isinstance(label, bool) or label not in (0, 1):
            raise DatasetError(f"{source}, row {index}: label {label!r}; expected 1 (member) or 0 (non-member).")
        texts.append(text)
        labels.append(int(label))
    members = sum(labels)
    if members in (0, len(labels)):
        raise DatasetError(
            f"{source}: all {len(labels)} rows have label {labels[0]}, so the dataset has one class "
            f"({members} members, {len(labels) - members} non-members). AUC and TPR@FPR need both "
            f"members (1) and non-members (0): add texts of the missing class."
        )
    return datasets.Dataset.from_dict({"text": texts, "label": labels})


def load_split(
    *,
    hub_id: str,
    split: str,
    packaged_file: str | None,
    data_source: str,
    text_field: str,
    label_field: str,
) -> datasets.Dataset:
    """One split of a benchmark, from the package, a local directory or the HF Hub.

    ``data_source``: ``"package"`` (the copy shipped in ``pdd_tasks/data``), ``"hub"``
    (``datasets.load_dataset(hub_id, split=split)``; needs network), or a local directory that
    holds ``<split>.jsonl``.
    """
    if data_source == "package":
        if packaged_file is None:
            raise DatasetError(f"{hub_id} is not shipped with lm-eval-pdd; use data_source 'hub' or a local directory.")
        with importlib.resources.as_file(PACKAGED_DATA / packaged_file) as path:
            rows = read_jsonl(path)
        source = f"{packaged_file} (packaged copy of {hub_id})"
    elif data_source == "hub":
        try:
            rows = datasets.load_dataset(hub_id, split=split).to_list()
        except Exception as error:  # network or hub errors: say what to do instead
            raise DatasetError(
                f"Could not load {hub_id} split {split} from the Hugging Face Hub ({type(error).__name__}: {error}). "
                f"Offline, put {split}.jsonl in a directory and pass --metadata '{{\"data_source\": \"<dir>\"}}'."
            ) from error
        source = f"{hub_id}:{split} (Hugging Face Hub)"
    else:
        path = Path(data_source).expanduser() / f"{split}.jsonl"
        if not path.is_file():
            raise DatasetError(
                f"data_source {data_source!r}: expected a local directory holding {split}.jsonl (or 'package' "
                f"or 'hub'), but {path} does not exist."
            )
        rows = read_jsonl(path)
        source = str(path)
    return normalise_rows(rows, source, text_field, label_field)
