"""Reference corpora for frequency tables: local files and Hugging Face datasets, read as streams.

A corpus is a sorted list of :class:`Source` units (one local file, or one data-file pattern of a
Hub dataset); each yields its documents' texts in a fixed order, so a build over the same units is
deterministic, and shard ``i`` of ``n`` (:func:`select_shard`) is the same on every machine.

Local formats (by suffix, or ``--format``): JSON Lines (``.jsonl``, ``.json``, ``.ndjson``, each
optionally ``.gz``; gzip is detected from the magic bytes), Parquet (``.parquet``, read in record
batches with pyarrow), plain text (``.txt``/``.md``, optionally ``.gz``: one document per file, or one
per non-empty line with ``--format lines``). Records can be filtered with ``where`` conditions
(``field=value``, dotted fields for nested objects, e.g. ``meta.pile_set_name=Github``).

Hub datasets are read with ``datasets.load_dataset(..., streaming=True)``: nothing is downloaded up
front and memory does not grow with the corpus. Brace patterns in data files expand to one unit per
file (``en/c4-train.{00000..00014}-of-01024.json.gz`` = the paper's 15 C4 shards).
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pdd_tasks.errors import UserError, excerpt
from pdd_tasks.loading import files


__all__ = [
    "FORMATS",
    "Source",
    "TableSourceError",
    "expand_braces",
    "hub_sources",
    "local_sources",
    "parse_where",
    "select_shard",
]

#: ``--format`` values; ``auto`` picks by suffix.
FORMATS = ("auto", "jsonl", "parquet", "text", "lines")
_SUFFIX_FORMATS = {
    ".jsonl": "jsonl",
    ".json": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
    ".txt": "text",
    ".md": "text",
}


class TableSourceError(UserError):
    """A corpus source cannot be read (missing file, unknown format, missing field, offline Hub)."""


# ------------------------------------------------------------------------------- patterns

_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)$")


def expand_braces(pattern: str) -> list[str]:
    """Expand shell-style braces: ``a{1,2}b`` -> ``a1b``, ``a2b``; ``{00000..00002}`` ->
    ``00000``, ``00001``, ``00002`` (zero-padded to the endpoints' width, as bash does). Nested
    groups expand left to right. A pattern without braces is returned as is.

    >>> expand_braces("c4-train.{00000..00002}-of-01024.json.gz")
    ['c4-train.00000-of-01024.json.gz', 'c4-train.00001-of-01024.json.gz', 'c4-train.00002-of-01024.json.gz']
    >>> expand_braces("{a,b}/{1..2}")
    ['a/1', 'a/2', 'b/1', 'b/2']
    """
    match = re.search(r"\{([^{}]*)\}", pattern)
    if match is None:
        return [pattern]
    body = match.group(1)
    ranged = _RANGE.match(body)
    if ranged:
        lo_text, hi_text = ranged.groups()
        lo, hi = int(lo_text), int(hi_text)
        padded = any(len(t.lstrip("-")) > 1 and t.lstrip("-").startswith("0") for t in (lo_text, hi_text))
        width = max(len(lo_text), len(hi_text)) if padded else 0
        step = 1 if hi >= lo else -1
        choices = [str(v).zfill(width) for v in range(lo, hi + step, step)]
    elif "," in body:
        choices = body.split(",")
    else:  # "{x}" is literal in bash
        choices = ["{" + body + "}"]
        head, tail = pattern[: match.end()], pattern[match.end() :]
        return [head + rest for rest in expand_braces(tail)]
    out: list[str] = []
    for choice in choices:
        out.extend(expand_braces(pattern[: match.start()] + choice + pattern[match.end() :]))
    return out


def parse_where(conditions: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """``["domain=github"]`` -> ``(("domain", "github"),)``; a record matches when every field's
    value, as a string, equals the given one."""
    parsed = []
    for condition in conditions:
        name, sep, value = condition.partition("=")
        if not sep or not name:
            raise TableSourceError(f"--where {condition!r}: expected FIELD=VALUE, e.g. domain=github")
        parsed.append((name.strip(), value))
    return tuple(parsed)


def _lookup(record: dict, dotted: str) -> Any:
    value: Any = record
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(dotted)
        value = value[part]
    return value


def _record_filter(where: tuple[tuple[str, str], ...]) -> Callable[[dict], bool]:
    def keep(record: dict) -> bool:
        for name, wanted in where:
            try:
                value = _lookup(record, name)
            except KeyError:
                return False
            if str(value) != wanted:
                return False
        return True

    return keep


def _text_of(record: dict, text_field: str, where_label: str) -> str:
    try:
        text = _lookup(record, text_field)
    except KeyError:
        raise TableSourceError(
            f"{where_label}: no field {text_field!r} (found {excerpt(sorted(record))}); choose the text field with --text-field"
        ) from None
    if not isinstance(text, str):
        raise TableSourceError(f"{where_label}: field {text_field!r} is {type(text).__name__}, expected str")
    if (surrogate := files.lone_surrogate(text)) is not None:
        raise TableSourceError(
            f"{where_label}: field {text_field!r} holds {surrogate}. Fix the escape or remove the character (or the "
            f"record) in the corpus."
        )
    return text


# ------------------------------------------------------------------------------- sources


@dataclass(frozen=True)
class Source:
    """One unit of a corpus: a local file or one data-file pattern of a Hub dataset.

    ``name`` identifies it (path, or ``hf:<dataset>/<config>/<split>/<data_files>``); ``texts()``
    yields its documents' texts, in file order, after the ``where`` filter.
    """

    name: str
    kind: str  # "file" or "hub"
    format: str = "jsonl"
    text_field: str = "text"
    where: tuple[tuple[str, str], ...] = ()
    hub: dict = field(default_factory=dict, compare=False)

    def texts(self) -> Iterator[str]:
        if self.kind == "hub":
            return _hub_texts(self)
        return _file_texts(self)

    def describe(self) -> str:
        where = "".join(f" [{name}={value}]" for name, value in self.where)
        return f"{self.name}{where}"


def _detect_format(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    fmt = _SUFFIX_FORMATS.get(suffixes[-1] if suffixes else "")
    if fmt is None:
        raise TableSourceError(
            f"{path}: cannot tell the format from the suffix; pass --format "
            f"{{jsonl,parquet,text,lines}} (known suffixes: {', '.join(sorted(_SUFFIX_FORMATS))}, "
            f"optionally .gz)"
        )
    return fmt


def local_sources(
    inputs: Sequence[str | os.PathLike],
    text_field: str = "text",
    fmt: str = "auto",
    where: tuple[tuple[str, str], ...] = (),
) -> list[Source]:
    """Sources for local paths: files, directories (every file of a known suffix below them) and
    glob/brace patterns; sorted by path, duplicates removed. Errors name a pattern that matches
    nothing."""
    if fmt not in FORMATS:
        raise TableSourceError(f"--format {fmt!r}: expected one of {FORMATS}")
    paths: list[Path] = []
    for raw in inputs:
        for pattern in expand_braces(str(raw)):
            path = Path(pattern)
            if path.is_dir():
                found = [p for p in sorted(path.rglob("*")) if p.is_file() and not p.name.startswith(".") and _known(p)]
                if not found:
                    raise TableSourceError(
                        f"{path}: directory holds no corpus file ({', '.join(sorted(_SUFFIX_FORMATS))}, optionally .gz)"
                    )
                paths.extend(found)
            elif path.is_file():
                paths.append(path)
            elif glob.has_magic(pattern):
                found = [Path(p) for p in sorted(glob.glob(pattern, recursive=True)) if Path(p).is_file()]
                if not found:
                    raise TableSourceError(f"--input {pattern!r} matches no file")
                paths.extend(found)
            else:
                raise TableSourceError(f"corpus file {pattern!r} not found")
    unique = sorted(dict.fromkeys(paths), key=str)
    sources = []
    for path in unique:
        file_format = _detect_format(path) if fmt == "auto" else fmt
        if where and file_format in ("text", "lines"):
            raise TableSourceError(f"{path}: --where needs records (JSON Lines or Parquet), not plain text")
        sources.append(Source(name=str(path), kind="file", format=file_format, text_field=text_field, where=where))
    return sources


def _known(path: Path) -> bool:
    try:
        _detect_format(path)
    except TableSourceError:
        return False
    return True


def _file_texts(source: Source) -> Iterator[str]:
    path = Path(source.name)
    if not path.is_file():
        raise TableSourceError(f"corpus file {source.name!r} not found")
    keep = _record_filter(source.where)
    try:
        if source.format == "jsonl":
            for lineno, record in files.iter_jsonl_records(path):
                if keep(record):
                    yield _text_of(record, source.text_field, f"{path}:{lineno}")
        elif source.format == "parquet":
            yield from _parquet_texts(path, source, keep)
        elif source.format == "text":
            yield files.read_text(path)
        elif source.format == "lines":
            for _, line in files.iter_text_lines(path):
                if line.strip():
                    yield line
        else:
            raise TableSourceError(f"unknown format {source.format!r}")
    except files.DatasetError as exc:  # not UTF-8, bad JSON, a truncated .gz, not Parquet
        raise TableSourceError(str(exc)) from None


def _parquet_texts(path: Path, source: Source, keep: Callable[[dict], bool]) -> Iterator[str]:
    names = files.parquet_columns(path)
    wanted = [source.text_field.split(".")[0]] + [name.split(".")[0] for name, _ in source.where]
    missing = [name for name in dict.fromkeys(wanted) if name not in names]
    if missing and missing[0] == wanted[0]:
        raise TableSourceError(
            f"{path}: no column {wanted[0]!r} (found {names}); choose the text field with --text-field"
        )
    columns = [name for name in dict.fromkeys(wanted) if name in names]
    for row, record in files.iter_parquet_records(path, columns=columns):
        if keep(record):
            yield _text_of(record, source.text_field, f"{path}: row {row}")


# ----------------------------------------------------------------------------------- hub


def hub_sources(
    dataset: str,
    config: str | None = None,
    split: str = "train",
    data_files: Sequence[str] = (),
    text_field: str = "text",
    where: tuple[tuple[str, str], ...] = (),
    revision: str | None = None,
) -> list[Source]:
    """One source per data file of a Hugging Face dataset (brace patterns expanded; a glob pattern
    stays one source, resolved by ``datasets``), or one source for the whole split without
    ``data_files``. ``dataset`` is a Hub id, or a local directory / builder name (``json``,
    ``parquet``), read by the same streaming code."""
    files = [f for pattern in data_files for f in expand_braces(pattern)]
    base = f"hf:{dataset}" + (f"/{config}" if config else "") + f"/{split}"
    info = {"dataset": dataset, "config": config, "split": split, "revision": revision}
    if not files:
        return [Source(name=base, kind="hub", text_field=text_field, where=where, hub={**info, "data_files": None})]
    return [
        Source(name=f"{base}/{f}", kind="hub", text_field=text_field, where=where, hub={**info, "data_files": f})
        for f in sorted(dict.fromkeys(files))
    ]


def _offline_hint(source: Source, exc: BaseException) -> TableSourceError:
    hub = source.hub
    offline = [
        name
        for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
        if os.environ.get(name, "").lower() in {"1", "true", "yes", "on"}
    ]
    state = f"{' and '.join(offline)} set" if offline else "the Hub may be unreachable from this machine"
    files = hub.get("data_files") or "*"
    return TableSourceError(
        f"cannot stream Hugging Face dataset {hub['dataset']!r} (config {hub.get('config')!r}, split "
        f"{hub.get('split')!r}, data files {files!r}): {type(exc).__name__}: {exc}. Offline? ({state}.) "
        f"Download the files where the Hub is reachable, e.g. `huggingface-cli download "
        f"{hub['dataset']} --repo-type dataset --include '{files}' --local-dir corpus/`, and build "
        f"from them with `--input corpus/...`."
    )


def _hub_texts(source: Source) -> Iterator[str]:
    import datasets

    hub = source.hub
    kwargs: dict[str, Any] = {"split": hub["split"], "streaming": True}
    if hub.get("data_files"):
        kwargs["data_files"] = {hub["split"]: hub["data_files"]}
    if hub.get("revision"):
        kwargs["revision"] = hub["revision"]
    try:
        stream = datasets.load_dataset(hub["dataset"], hub.get("config"), **kwargs)
    except Exception as exc:  # offline, missing dataset or file pattern, network errors
        raise _offline_hint(source, exc) from exc
    keep = _record_filter(source.where)
    iterator = iter(stream)
    row = 0
    while True:
        try:
            record = next(iterator)
        except StopIteration:
            return
        except (ConnectionError, OSError, TimeoutError) as exc:
            raise _offline_hint(source, exc) from exc
        row += 1
        if keep(record):
            yield _text_of(record, source.text_field, f"{source.name}: row {row}")


# ------------------------------------------------------------------------------ sharding


def select_shard(sources: Sequence[Source], shard_index: int, num_shards: int) -> list[Source]:
    """Shard ``shard_index`` of ``num_shards`` by file: the sources at positions ``shard_index,
    shard_index + num_shards, ...`` of the list sorted by name. The shards partition the list."""
    if num_shards <= 0 or not 0 <= shard_index < num_shards:
        raise TableSourceError(f"--shard-index {shard_index} --num-shards {num_shards}: expected 0 <= index < shards")
    ordered = sorted(sources, key=lambda s: s.name)
    return ordered[shard_index::num_shards]
