"""Loading and checking the labelled texts of a pdd task.

Every pdd task's documents are normalised to ``{"text": str, "label": int}`` with label 1 = member
(seen in training) and 0 = non-member, and checked before any model work starts: an empty text, a
missing or non-binary label, or a dataset with one class is an error that names the row and the fix.

Where the rows come from is one setting for every task, ``data_source`` (task metadata, overridden
with ``--metadata '{"data_source": ...}'``): ``hub`` (the default: the real
``datasets.load_dataset`` call, or ``huggingface_hub.hf_hub_download`` for a Hub dataset whose
loader is a script), ``package`` (WikiMIA's shipped copy) or a local path, a file or a directory
holding the split's file. See :class:`DataSpec` and :func:`load_benchmark`.
"""

from __future__ import annotations

import importlib.resources
import logging
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import datasets

from pdd_metrics.repeats import find_repeats
from pdd_tasks.errors import excerpt
from pdd_tasks.loading import chinese, files


logger = logging.getLogger(__name__)

PACKAGED_DATA = importlib.resources.files("pdd_tasks") / "data"


DATA_SUFFIXES = files.DATA_SUFFIXES
DatasetError = files.DatasetError
iter_jsonl_records = files.iter_jsonl_records
read_jsonl = files.read_jsonl
read_json_strings = files.read_json_strings
#: Rows of a local data file (or of each file of a list); see :func:`pdd_tasks.loading.files.read_rows`.
read_local_rows = files.read_rows


_LABEL_TEXTS = {"0": 0, "1": 1}


def check_text_value(text, where: str, text_field: str) -> None:
    """A text must be a string (a number or a list in the text field is a :class:`DatasetError`) of
    valid Unicode: a lone surrogate (JSON ``"\\ud800"`` without its pair, e.g. a text cut inside an
    emoji) cannot be stored, tokenized or written back as UTF-8, so it is refused with the row."""
    if text is not None and not isinstance(text, str):
        raise DatasetError(
            f"{where}: field {text_field!r} holds {type(text).__name__} {excerpt(text)}, not a text. Name the field that "
            f'holds the texts with --metadata \'{{"text_field": "..."}}\', or quote the values as strings.'
        )
    if text is not None and (surrogate := files.lone_surrogate(text)) is not None:
        raise DatasetError(
            f"{where}: field {text_field!r} holds {surrogate}. Fix the escape or remove the character (or the "
            f"row) in the file."
        )


def check_texts(rows: list[dict], source: str, text_field: str) -> list[str]:
    """The texts of ``rows`` (field ``text_field``); a missing field or an empty text is an error."""
    if not rows:
        raise DatasetError(f"{source}: the file has no rows.")
    texts = []
    for index, row in enumerate(rows):
        text = row.get(text_field)
        if text_field not in row:
            raise DatasetError(
                f"{source}, row {index}: no field {text_field!r} (fields: {excerpt(sorted(row))}). "
                f'Name the text field with --metadata \'{{"text_field": "..."}}\'.'
            )
        check_text_value(text, f"{source}, row {index}", text_field)
        if text is None or not text.strip():
            raise DatasetError(
                f"{source}, row {index}: the text is empty; an empty text cannot be scored. Remove the row."
            )
        texts.append(text)
    return texts


def _check_no_text_in_both_classes(
    texts: list[str],
    labels: list[int],
    source: str,
    after: str = "",
    fix: str = "Fix the label of one of them or remove the duplicate.",
) -> None:
    """A text labelled both member and non-member makes AUC and TPR meaningless: refuse it (``after``:
    what made the texts equal, e.g. a cut to their first words, and ``fix``, for the message)."""
    across = find_repeats(texts, roles=labels).across_roles
    if across:
        first = across[0][0]
        other = next(i for i in across[0] if labels[i] != labels[first])
        text = texts[first]
        raise DatasetError(
            f"{source}: rows {first} and {other} hold the same text{after} with label {labels[first]} and "
            f"{labels[other]} ({text[:60]!r}{'...' if len(text) > 60 else ''}); a text cannot be both a member and a "
            f"non-member. {fix}"
        )


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
                f"{source}, row {index}: no field {text_field!r} (fields: {excerpt(sorted(row))}). "
                f'Name the text field with --metadata \'{{"text_field": "..."}}\'.'
            )
        text = row[text_field]
        check_text_value(text, f"{source}, row {index}", text_field)
        if text is None or not text.strip():
            raise DatasetError(
                f"{source}, row {index}: the text is empty; an empty text cannot be scored. Remove the row."
            )
        label = row.get(label_field)
        if isinstance(label, str):  # CSV values are strings
            label = _LABEL_TEXTS.get(label.strip(), label)
        if label is None:
            raise DatasetError(
                f"{source}, row {index}: no label (field {label_field!r}). Every row needs label 1 "
                f'(member) or 0 (non-member); name the label field with --metadata \'{{"label_field": "..."}}\'.'
            )
        if isinstance(label, bool) or label not in (0, 1):
            raise DatasetError(f"{source}, row {index}: label {excerpt(label)}; expected 1 (member) or 0 (non-member).")
        texts.append(text)
        labels.append(int(label))
    _check_no_text_in_both_classes(texts, labels, source)
    members = sum(labels)
    if members in (0, len(labels)):
        raise DatasetError(
            f"{source}: all {len(labels)} rows have label {labels[0]}, so the dataset has one class "
            f"({members} members, {len(labels) - members} non-members). AUC and TPR@FPR need both "
            f"members (1) and non-members (0): add texts of the missing class."
        )
    return datasets.Dataset.from_dict({"text": texts, "label": labels})


# ------------------------------------------------------------------------------ benchmark data

SCHEMAS = ("text_label", "member_nonmember")
WORD_UNITS = ("whitespace", "jieba")


@dataclass(frozen=True)
class DataSpec:
    """Where a task's texts come from and how they become ``{"text", "label"}`` rows.

    Read from the task YAML (``dataset_path`` = HF Hub id, ``dataset_name`` = Hub config,
    ``test_split``) and its metadata; every metadata key can be overridden with
    ``--metadata '{...}'``.

    Attributes:
        task: the task name (for messages).
        dataset: the benchmark's name (metadata ``dataset_label``; for messages).
        hub_id: Hugging Face Hub dataset id, or None where the benchmark is not on the Hub.
        hub_config: Hub config name (``dataset_name``), if any.
        split: the split (``test_split``); a data_source directory is searched for ``<split>.jsonl``
            etc. unless ``local_file`` names the file.
        data_source: ``"hub"`` (default: ``datasets.load_dataset``), ``"package"`` (a copy shipped
            in ``pdd_tasks/data``, WikiMIA only) or a local path: a data file (.jsonl, .jsonl.gz,
            .json, .csv, .parquet, .zip) or a directory holding the split's file.
        packaged_file: path of the shipped copy below ``pdd_tasks/data``.
        local_files: file names (glob patterns allowed) looked for in a data_source directory (and
            its subdirectories) or zip (metadata ``local_file``, a name or a list).
        hub_files: a repository's files of one class each, by role (``member``, ``nonmember``):
            for a Hub dataset whose ``datasets`` loader is a script (MIMIR), fetched with
            ``huggingface_hub.hf_hub_download``; in a data_source directory the same relative paths
            are looked for (also OLMo-Detect's, a GitHub repository: ``hub_id`` None). Each line is
            one JSON string, or one JSON object whose ``text_field`` holds the text.
        schema: ``text_label`` (a text field and a 0/1 label field) or ``member_nonmember`` (a
            member text field and a non-member text field per row, as MIMIR publishes it).
        text_field, label_field: field names for ``text_label``.
        member_field, nonmember_field: field names for ``member_nonmember``.
        max_words: keep the first ``max_words`` words of each text (None: keep whole texts).
        word_unit: ``whitespace`` (English: whitespace-separated words, the original spacing kept)
            or ``jieba`` (Chinese: :func:`pdd_tasks.loading.chinese.first_n_words`).
        source_url: where to get the data when it is not on the Hub.
        hub_note: added to the message when the Hub cannot be reached (e.g. "gated: accept ..."), or,
            without ``hub_id``, to the message saying why the task reads a local copy only.
    """

    task: str
    dataset: str
    hub_id: str | None
    split: str
    hub_config: str | None = None
    data_source: str = "hub"
    packaged_file: str | None = None
    local_files: tuple[str, ...] = ()
    hub_files: tuple[tuple[str, str], ...] = ()
    schema: str = "text_label"
    text_field: str = "text"
    label_field: str = "label"
    member_field: str = "member"
    nonmember_field: str = "nonmember"
    max_words: int | None = None
    word_unit: str = "whitespace"
    source_url: str | None = None
    hub_note: str | None = None

    #: The task metadata keys a spec is read from (``language`` only documents the texts).
    METADATA_KEYS = (
        "hub_id",
        "local_file",
        "hub_files",
        "schema",
        "word_unit",
        "max_words",
        "dataset_label",
        "data_source",
        "packaged_file",
        "text_field",
        "label_field",
        "member_field",
        "nonmember_field",
        "source_url",
        "hub_note",
        "language",
    )

    @classmethod
    def from_task_config(cls, config) -> DataSpec:
        """The spec of an lm-eval ``TaskConfig`` (uses ``task``, ``dataset_path``,
        ``dataset_name``, ``test_split`` and ``metadata``)."""
        metadata = dict(config.metadata or {})
        task = config.task
        hub_id = metadata.get("hub_id", config.dataset_path)
        local = metadata.get("local_file") or []
        local = [local] if isinstance(local, str) else list(local)
        hub_files = metadata.get("hub_files") or {}
        if not isinstance(hub_files, dict) or not set(hub_files) <= {"member", "nonmember"}:
            raise DatasetError(
                f"{task}: metadata hub_files={hub_files!r}: expected {{'member': path, 'nonmember': path}}."
            )
        schema = metadata.get("schema", "text_label")
        if schema not in SCHEMAS:
            raise DatasetError(f"{task}: metadata schema={schema!r}: expected one of {', '.join(SCHEMAS)}.")
        word_unit = metadata.get("word_unit", "whitespace")
        if word_unit not in WORD_UNITS:
            raise DatasetError(f"{task}: metadata word_unit={word_unit!r}: expected one of {', '.join(WORD_UNITS)}.")
        max_words = metadata.get("max_words")
        if max_words is not None and (isinstance(max_words, bool) or not isinstance(max_words, int) or max_words <= 0):
            raise DatasetError(
                f"{task}: metadata max_words={max_words!r}: expected a positive integer (e.g. 512) or null."
            )
        return cls(
            task=task,
            dataset=str(metadata.get("dataset_label") or hub_id or task),
            hub_id=hub_id or None,
            hub_config=config.dataset_name,
            split=config.test_split,
            data_source=str(metadata.get("data_source") or "hub"),
            packaged_file=metadata.get("packaged_file"),
            local_files=tuple(local),
            hub_files=tuple(sorted(hub_files.items())),
            schema=schema,
            text_field=metadata.get("text_field", "text"),
            label_field=metadata.get("label_field", "label"),
            member_field=metadata.get("member_field", "member"),
            nonmember_field=metadata.get("nonmember_field", "nonmember"),
            max_words=max_words,
            word_unit=word_unit,
            source_url=metadata.get("source_url"),
            hub_note=metadata.get("hub_note"),
        )

    @property
    def file_names(self) -> tuple[str, ...]:
        """Names of the split's file looked for in a directory or zip; a ``.jsonl`` file of the task's
        (``local_file``) also gzipped, as the file itself is read (``arxiv_mia.jsonl.gz``)."""
        if self.local_files:
            return tuple(
                name
                for file in self.local_files
                for name in (file, *([f"{file}.gz"] if file.endswith(".jsonl") else []))
            )
        return tuple(f"{self.split}{suffix}" for suffix in DATA_SUFFIXES) + (f"{self.split}-*.parquet",)

    def override_hint(self, placeholder: str = "<path>") -> str:
        """How to point the task at a local copy (for error messages)."""
        if self.hub_files:
            what = f"a directory holding {' and '.join(path for _, path in self.hub_files)}"
        elif self.local_files:
            what = f"a directory holding {' or '.join(self.file_names)}, or that file itself (also in a .zip)"
        else:
            what = (
                f"a directory holding {self.split}.jsonl, .json, .csv or .parquet (or the Hub's "
                f"{self.split}-*.parquet files), or that file itself"
            )
        return f'pass --metadata \'{{"data_source": "{placeholder}"}}\' ({placeholder} = {what})'


def load_benchmark(spec: DataSpec) -> datasets.Dataset:
    """The checked ``{"text", "label"}`` rows (1 = member) of one task, from where ``spec`` says.

    Raises :class:`DatasetError` naming the dataset, its Hub id and the ``data_source`` override
    when the data cannot be read (e.g. offline without a local copy).
    """
    rows, source = _read_rows(spec)
    if spec.schema == "member_nonmember":
        rows = _member_nonmember_rows(rows, source, spec.member_field, spec.nonmember_field)
        text_field, label_field = "text", "label"
    else:
        text_field, label_field = spec.text_field, spec.label_field
    split = normalise_rows(rows, source, text_field, label_field)
    if spec.max_words is not None:
        split = _cut_to_words(split, spec)
        _check_no_text_in_both_classes(
            split["text"],
            split["label"],
            source,
            after=f" once cut to their first {spec.max_words} {spec.word_unit} words (max_words)",
            fix=f"Keep more of each text (--metadata '{{\"max_words\": N}}' with N > {spec.max_words}, or null for "
            f"whole texts), or remove one of them from the data.",
        )
    return split


def _read_rows(spec: DataSpec) -> tuple[list[dict], str]:
    if spec.data_source == "package":
        if spec.packaged_file is None:
            raise DatasetError(
                f"{spec.task}: {spec.dataset} is not shipped with lm-eval-pdd; use data_source 'hub', or for a "
                f"local copy {spec.override_hint()}."
            )
        with importlib.resources.as_file(PACKAGED_DATA / spec.packaged_file) as path:
            return read_jsonl(path), f"{spec.packaged_file} (packaged copy of {spec.hub_id})"
    if spec.data_source == "hub":
        return _read_hub_rows(spec)
    path = Path(spec.data_source).expanduser()
    if path.is_file() and spec.hub_files:
        return _read_member_nonmember_file(path, spec), str(path)
    if path.is_file():
        return read_local_rows(path, zip_member=spec.file_names), str(path)
    if path.is_dir():
        return _read_directory_rows(path, spec)
    raise DatasetError(
        f"{spec.task}: data_source {spec.data_source!r} is neither 'hub', 'package' nor an existing file or "
        f"directory; for a local copy, {spec.override_hint()}."
    )


def _read_member_nonmember_file(path: Path, spec: DataSpec) -> list[dict]:
    """One file as the data_source of a benchmark published as one file per class (``hub_files``, e.g.
    OLMo-Detect): its rows must hold the member and non-member fields; one of the class files itself
    (each line one text) is refused with the folder to pass instead."""
    fields = (spec.member_field, spec.nonmember_field)
    try:
        rows = read_local_rows(path, zip_member=spec.file_names)
    except DatasetError:
        rows = None
    if rows is None or not any(isinstance(row, dict) and any(f in row for f in fields) for row in rows[:1]):
        names = " and ".join(filename for _, filename in spec.hub_files)
        raise DatasetError(
            f"{spec.task}: data_source {path} is one file, but {spec.dataset} comes as two files, one per class "
            f"({names}), read from a clone of its repository"
            + (f" ({spec.source_url})" if spec.source_url else "")
            + f". Pass the clone's folder (the one that holds {PurePosixPath(names.split(' and ')[0]).parts[0]}/): "
            f"{spec.override_hint('<clone>')}. A single file works only if each row holds "
            f"{spec.member_field!r} and/or {spec.nonmember_field!r} fields."
        )
    return rows


def _read_hub_rows(spec: DataSpec) -> tuple[list[dict], str]:
    if spec.hub_id is None:
        where = f"download it from {spec.source_url}, then " if spec.source_url else ""
        hub = (
            f"has no Hugging Face Hub loader here ({spec.hub_note})"
            if spec.hub_note
            else "is not on the Hugging Face Hub"
        )
        raise DatasetError(
            f"{spec.task}: {spec.dataset} {hub}, so it needs a local copy: {where}{spec.override_hint()}."
        )
    config = f", config {spec.hub_config}" if spec.hub_config else ""
    label = f"{spec.dataset} from the Hugging Face Hub (dataset {spec.hub_id}{config}, split {spec.split})"
    try:
        if spec.hub_files:
            from huggingface_hub import hf_hub_download

            rows = []
            for role, filename in spec.hub_files:
                path = hf_hub_download(repo_id=spec.hub_id, filename=filename, repo_type="dataset")
                rows += [
                    {spec.member_field if role == "member" else spec.nonmember_field: text}
                    for text in read_json_strings(path, spec.text_field)
                ]
        else:
            rows = datasets.load_dataset(spec.hub_id, spec.hub_config, split=spec.split).to_list()
    except Exception as error:  # offline, gated, renamed...: say what to do instead
        files = f" --include {' '.join(repr(f) for _, f in spec.hub_files)}" if spec.hub_files else ""
        raise DatasetError(
            f"{spec.task}: could not load {label}: {type(error).__name__}: {str(error).rstrip('.')}. "
            f"To run offline, download it once where there is network "
            f"(`hf download {spec.hub_id} --repo-type dataset{files} --local-dir <dir>`), then "
            f"{spec.override_hint('<dir>')}.{' ' + spec.hub_note if spec.hub_note else ''}"
        ) from error
    return rows, f"{spec.hub_id}{':' + spec.hub_config if spec.hub_config else ''}:{spec.split} (Hugging Face Hub)"


def _read_directory_rows(folder: Path, spec: DataSpec) -> tuple[list[dict], str]:
    if spec.hub_files:  # the Hub repository's layout, or the folder below its top directory
        rows = []
        for role, filename in spec.hub_files:
            parts = PurePosixPath(filename).parts
            candidates = [folder.joinpath(*parts[i:]) for i in range(len(parts))]
            found = next((c for c in candidates if c.is_file()), None)
            if found is None:
                raise DatasetError(
                    f"{spec.task}: data_source directory {folder} does not hold {filename} "
                    f"(looked for {', '.join(str(c) for c in candidates)}). For a local copy, "
                    f"{spec.override_hint('<dir>')}; a single file of rows with {spec.member_field}/"
                    f"{spec.nonmember_field} fields also works."
                )
            field = spec.member_field if role == "member" else spec.nonmember_field
            rows += [{field: text} for text in read_json_strings(found, spec.text_field)]
        return rows, str(folder)
    if (folder / "dataset_dict.json").is_file():  # a datasets.save_to_disk copy
        saved = datasets.load_from_disk(str(folder))
        if spec.split not in saved:
            raise DatasetError(f"{spec.task}: {folder} (save_to_disk) has splits {sorted(saved)}, not {spec.split}.")
        return saved[spec.split].to_list(), f"{folder} [{spec.split}]"
    for pattern in spec.file_names:
        matches = sorted(folder.glob(pattern)) or sorted(folder.rglob(pattern))
        matches = [m for m in matches if m.is_file()]
        if not matches:
            continue
        if len({m.parent for m in matches}) > 1:
            raise DatasetError(
                f"{spec.task}: data_source directory {folder} holds several {pattern}: "
                f"{', '.join(map(str, matches))}. Pass the file itself as data_source."
            )
        rows = []
        for match in matches:  # parquet shards of one split
            rows += read_local_rows(match)
        return rows, ", ".join(map(str, matches))
    raise DatasetError(
        f"{spec.task}: data_source directory {folder} holds none of {', '.join(spec.file_names)} "
        f"(nor in its subdirectories). Put the split's file there, or pass the file itself as data_source."
    )


def _member_nonmember_rows(rows: list[dict], source: str, member_field: str, nonmember_field: str) -> list[dict]:
    """``{"text", "label"}`` rows from rows holding a member text, a non-member text or both
    (MIMIR's schema); member = 1. A row's ``None`` field is skipped."""
    converted = []
    for index, row in enumerate(rows):
        texts = [(row.get(member_field), 1), (row.get(nonmember_field), 0)]
        if all(text is None for text, _ in texts):
            raise DatasetError(
                f"{source}, row {index}: neither {member_field!r} nor {nonmember_field!r} (fields: {excerpt(sorted(row))}). "
                f'Name them with --metadata \'{{"member_field": "...", "nonmember_field": "..."}}\'.'
            )
        converted += [{"text": text, "label": label} for text, label in texts if text is not None]
    return converted


def first_n_whitespace_words(text: str, n: int) -> str:
    """The prefix of ``text`` that ends with its ``n``-th whitespace-separated word (spacing kept).

    >>> first_n_whitespace_words("one  two\\nthree four", 3)
    'one  two\\nthree'
    """
    for count, match in enumerate(re.finditer(r"\S+", text), start=1):
        if count == n:
            return text[: match.end()]
    return text


def _cut_to_words(split: datasets.Dataset, spec: DataSpec) -> datasets.Dataset:
    if spec.word_unit == "jieba":
        cut = chinese.first_n_words
    else:
        cut = first_n_whitespace_words
    texts = [cut(text, spec.max_words) for text in split["text"]]
    changed = sum(new != old for new, old in zip(texts, split["text"], strict=True))
    if changed:
        logger.info(
            "%s: %d of %d texts cut to their first %d %s words",
            spec.task,
            changed,
            len(texts),
            spec.max_words,
            spec.word_unit,
        )
    return datasets.Dataset.from_dict({"text": texts, "label": split["label"]})
