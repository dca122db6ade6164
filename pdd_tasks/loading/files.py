"""One way to read the project's files: datasets, corpora, samples logs and results files.

Every reader here detects gzip from the file's magic bytes (the suffix does not matter), decodes
UTF-8 strictly (a UTF-8 byte-order mark at the start is dropped) and turns every way a file can be
unreadable into a :class:`DatasetError` that names the file, the line where it can, and the fix:
a byte that is not UTF-8, a line that is not JSON or not of the expected type, a gzip stream that
ends early, a Parquet file that is not Parquet.

Formats: JSON Lines (:func:`iter_json_lines`, :func:`read_jsonl`), a JSON array or JSON Lines in a
``.json`` (:func:`read_json_rows`), one JSON document (:func:`read_json`), CSV with every value
read as a string (:func:`read_csv_rows`), Parquet (:func:`iter_parquet_records`), plain text
(:func:`read_text`, :func:`iter_text_lines`), and any of those by suffix, also inside a ``.zip``
(:func:`read_rows`).
"""

from __future__ import annotations

import csv
import fnmatch
import gzip
import io
import json
import tempfile
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath

from pdd_tasks.errors import UserError, excerpt


__all__ = [
    "DATA_SUFFIXES",
    "DatasetError",
    "is_data_file",
    "is_gzipped",
    "lone_surrogate",
    "iter_json_lines",
    "iter_jsonl_records",
    "iter_parquet_records",
    "iter_text_lines",
    "read_csv_rows",
    "read_json",
    "read_json_rows",
    "read_json_strings",
    "read_jsonl",
    "read_rows",
    "read_text",
]

#: Suffixes of the data files :func:`read_rows` reads.
DATA_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".csv", ".parquet")
_BOM = "\ufeff"


class DatasetError(UserError):
    """A data file cannot be read, or its rows are not what the task needs."""


def lone_surrogate(text: str) -> str | None:
    """Where ``text`` holds a lone surrogate (a JSON ``\\ud800`` escape without its pair, e.g. a text
    cut inside an emoji: not valid Unicode, so it cannot be encoded as UTF-8, stored by pyarrow or
    tokenized), a phrase saying which and where, for a message; else None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        before = text[max(0, error.start - 20) : error.start]
        return (
            f"a lone surrogate {text[error.start]!r} at character {error.start} (after {before!r}), which is not "
            f"valid Unicode (a JSON \\uD800-\\uDFFF escape without its pair, e.g. a text cut inside an emoji)"
        )
    return None


def is_gzipped(path: str | Path) -> bool:
    """Whether ``path`` starts with gzip's magic bytes."""
    with open(path, "rb") as handle:
        return handle.read(2) == b"\x1f\x8b"


def is_data_file(name: str) -> bool:
    return name.lower().endswith(DATA_SUFFIXES)


def _existing(path: str | Path) -> Path:
    if isinstance(path, (list, tuple)):
        raise DatasetError(f"expected one file path, got a list {excerpt(list(path))}; give one file.")
    path = Path(path).expanduser()
    if not path.is_file():
        raise DatasetError(_not_a_file(path))
    return path


def _not_a_file(path: Path, expected: str = "a data file") -> str:
    """Why ``path`` (which is no file) cannot be read, and what to give instead: a folder's message
    names a few of the data files in it (the readers take files, not folders, and expand no globs)."""
    if path.is_dir():
        found = sorted(p.name for p in path.iterdir() if p.is_file() and is_data_file(p.name))
        held = f"it holds {excerpt(found)}" if found else f"it holds no {', '.join(DATA_SUFFIXES)} file"
        example = str(path / (found[0] if found else "texts.jsonl"))
        return (
            f"Data file {str(path)!r} is a folder, not a file ({held}). Give {expected} in it, e.g. {example!r}; several "
            f'files as a list, e.g. ["{path}/a.jsonl", "{path}/b.jsonl"] (glob patterns are not expanded).'
        )
    pattern = " (glob patterns are not expanded: list the files)" if any(c in str(path) for c in "*?[") else ""
    return f"Data file not found: {str(path)!r}{pattern}. Give the path of {expected} (.jsonl, .json, .csv, .parquet or .zip)."


def _not_utf8(path: Path, line_number: int, error: UnicodeDecodeError) -> DatasetError:
    byte = error.object[error.start : error.start + 1].hex()
    return DatasetError(
        f"{path}:{line_number}: byte 0x{byte} at column {error.start + 1} is not UTF-8. Save the file as "
        f"UTF-8 (e.g. `iconv -f latin1 -t utf-8 {path.name} > fixed_{path.name}`)."
    )


def _truncated(path: Path, line_number: int, error: Exception) -> DatasetError:
    return DatasetError(
        f"{path}: the gzip stream ends early or is corrupt after line {line_number} ({type(error).__name__}: "
        f"{error}); the file was cut short (an interrupted download or copy?). Download or compress it again "
        f"(`gzip -t {path.name}` tests it)."
    )


def _byte_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """``(1-based line number, raw line)``; a truncated gzip stream is a :class:`DatasetError`."""
    opener = gzip.open if is_gzipped(path) else open
    line_number = 0
    try:
        with opener(path, "rb") as handle:
            for line_number, line in enumerate(handle, start=1):  # noqa: B007 (read after the loop)
                yield line_number, line
    except (EOFError, gzip.BadGzipFile, zlib.error) as error:
        raise _truncated(path, line_number, error) from None


def iter_text_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """``(1-based line number, line without its newline)`` of a text file, plain or gzipped."""
    path = _existing(path)
    for line_number, raw in _byte_lines(path):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise _not_utf8(path, line_number, error) from None
        if line_number == 1:
            line = line.removeprefix(_BOM)
        yield line_number, line.rstrip("\r\n")


def read_text(path: str | Path) -> str:
    """The whole text of a file, plain or gzipped (one document), newlines as ``\\n``."""
    path = _existing(path)
    data = b"".join(raw for _, raw in _byte_lines(path))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line_number = data.count(b"\n", 0, error.start) + 1
        start = data.rfind(b"\n", 0, error.start) + 1
        raise _not_utf8(
            path,
            line_number,
            UnicodeDecodeError("utf-8", data[start:], error.start - start, error.end - start, error.reason),
        ) from None
    return text.removeprefix(_BOM).replace("\r\n", "\n").replace("\r", "\n")


def iter_json_lines(
    path: str | Path, expected: type | tuple[type, ...] = dict, what: str = "a JSON object"
) -> Iterator[tuple[int, object]]:
    """``(line number, value)`` for each non-blank line of a JSON Lines file, plain or gzipped.

    A line that is not valid JSON, or not of type ``expected`` (described as ``what``), raises
    :class:`DatasetError` naming the file and the 1-based line number.
    """
    path = _existing(path)
    for line_number, line in iter_text_lines(path):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as error:
            raise DatasetError(f"{path}:{line_number}: not valid JSON ({error}); each line must be {what}.") from None
        if not isinstance(value, expected):
            raise DatasetError(f"{path}:{line_number}: expected {what}, got {type(value).__name__}.")
        yield line_number, value


def iter_jsonl_records(path: str | Path) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` for each non-blank line of a ``.jsonl`` (or gzipped) file."""
    return iter_json_lines(path, dict, "a JSON object")


def read_jsonl(path: str | Path) -> list[dict]:
    """The objects of a JSON Lines file (``--log_samples`` files, datasets, corpora)."""
    return [record for _, record in iter_jsonl_records(path)]


def read_json_strings(path: str | Path, text_field: str | None = None) -> list[str]:
    """The texts of a JSON Lines file of one class: one JSON string per line (MIMIR's ``train``/``test``
    files) or, where ``text_field`` is given, one JSON object per line whose ``text_field`` holds the
    text (OLMo-Detect's ``member_*.jsonl``/``non-member_*.jsonl``); a line may be either."""
    if text_field is None:
        return [text for _, text in iter_json_lines(path, str, "a JSON string (one text per line)")]
    what = f"a JSON string, or a JSON object with a {text_field!r} field"
    texts = []
    for line_number, value in iter_json_lines(path, (str, dict), what):
        if isinstance(value, dict):
            if text_field not in value:
                raise DatasetError(
                    f"{path}:{line_number}: no {text_field!r} field (fields: {', '.join(sorted(value)[:12])}). "
                    f'Name the text field with --metadata \'{{"text_field": "..."}}\'.'
                )
            value = value[text_field]
        texts.append(value)
    return texts


def read_json(path: str | Path) -> object:
    """One JSON document (e.g. a ``results_*.json``), plain or gzipped."""
    path = _existing(path)
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise DatasetError(f"{path}:{error.lineno}: not valid JSON ({error.msg}).") from None


def read_json_rows(path: str | Path) -> list[dict]:
    """Rows of a ``.json``: a JSON array of objects, or one object per line (JSON Lines).

    One JSON object of columns (``{"text": [...], "label": [...]}``, pandas' ``orient="list"``) is
    refused with the one-line conversion to JSON Lines, and so is an object holding the rows under
    one key (``{"data": [{...}, ...]}``); a message shows at most an excerpt of the file's values.
    """
    path = _existing(path)
    start = next((line.lstrip()[:1] for _, line in iter_text_lines(path) if line.strip()), "")
    if start == "{":
        try:
            records = read_jsonl(path)
        except DatasetError as error:  # a pretty-printed object? read it whole; else the line's error
            try:
                records = [read_json(path)]
            except DatasetError:
                raise error from None
        if len(records) == 1 and isinstance(records[0], dict):
            _refuse_wrapped_rows(path, records[0])
        return records
    if start != "[":
        return read_jsonl(path)
    records = read_json(path)
    if not isinstance(records, list) or not all(isinstance(record, dict) for record in records):
        bad = next(r for r in records if not isinstance(r, dict)) if isinstance(records, list) else records
        raise DatasetError(
            f"{path}: expected a JSON array of objects (or one object per line), found {type(bad).__name__} "
            f'{excerpt(bad, 60)}. Write each row as an object, e.g. {{"text": "...", "label": 1}}.'
        )
    return records


def _refuse_wrapped_rows(path: Path, document: dict) -> None:
    """A ``.json`` holding one object: refuse it where it holds columns or rows under one key (else it
    is one row, as a one-line JSON Lines file)."""
    columns = {name: value for name, value in document.items() if isinstance(value, list)}
    if columns and len(columns) == len(document) and not all(isinstance(v, dict) for c in columns.values() for v in c):
        shape = ", ".join(f"{name!r}: {len(value)} values" for name, value in list(columns.items())[:6])
        more = f" and {len(columns) - 6} more" if len(columns) > 6 else ""
        jsonl = path.with_suffix(".jsonl").name
        raise DatasetError(
            f"{path}: column-oriented JSON (one object of columns: {shape}{more}), not rows. Each row must be an "
            f'object, e.g. {{"text": "...", "label": 1}}: convert it to JSON Lines (one object per line) '
            f"and give that file, e.g. `python -c \"import pandas as pd; pd.read_json('{path.name}')"
            f".to_json('{jsonl}', orient='records', lines=True, force_ascii=False)\"` or "
            f"`jq -c '. as $c | range(.[keys[0]] | length) as $i | $c | map_values(.[$i])' {path.name} > {jsonl}`."
        )
    if len(document) == 1:
        ((key, value),) = document.items()
        if isinstance(value, list) and value and all(isinstance(row, dict) for row in value):
            jsonl = path.with_suffix(".jsonl").name
            raise DatasetError(
                f"{path}: the rows are under the key {key!r} ({len(value)} objects), not at the top. Give a JSON "
                f"array of objects or JSON Lines, e.g. `jq -c '.[{json.dumps(key)}][]' {path.name} > {jsonl}`."
            )


def read_csv_rows(path: str | Path) -> list[dict]:
    """Rows of a CSV file with a header line; every value is a string, as written (a column of
    numbers stays text), and an empty cell is ``None``."""
    path = _existing(path)
    reader = csv.DictReader(io.StringIO(read_text(path), newline=""))
    if not reader.fieldnames:
        raise DatasetError(f"{path}: the CSV file has no header line (field names).")
    rows = []
    for row in reader:
        if None in row:
            raise DatasetError(
                f"{path}:{reader.line_num}: more values than the {len(reader.fieldnames)} header fields "
                f"{excerpt(reader.fieldnames)}; quote values that contain commas."
            )
        rows.append({name: (value if value != "" else None) for name, value in row.items()})
    return rows


def _parquet_file(path: Path):
    import pyarrow.parquet

    try:
        return pyarrow.parquet.ParquetFile(path)
    except Exception as error:  # pyarrow raises ArrowInvalid / OSError
        raise DatasetError(f"{path}: not a readable Parquet file ({type(error).__name__}: {error}).") from None


def iter_parquet_records(
    path: str | Path, columns: Sequence[str] | None = None, batch_size: int = 1024
) -> Iterator[tuple[int, dict]]:
    """``(1-based row number, record)`` of a Parquet file, read in record batches (memory does not
    grow with the file). ``columns``: read only these."""
    path = _existing(path)
    parquet = _parquet_file(path)
    row = 0
    try:
        for batch in parquet.iter_batches(batch_size=batch_size, columns=list(columns) if columns else None):
            for record in batch.to_pylist():
                row += 1
                yield row, record
    except OSError as error:
        raise DatasetError(f"{path}: unreadable after row {row} ({error}); the file is damaged.") from None


def parquet_columns(path: str | Path) -> list[str]:
    """The column names of a Parquet file."""
    return list(_parquet_file(_existing(path)).schema_arrow.names)


def read_rows(path: str | Path, zip_member: Sequence[str] = ()) -> list[dict]:
    """Rows of a local data file, by suffix: ``.jsonl`` (or ``.jsonl.gz``), ``.json`` (a JSON array of
    objects, or one per line), ``.csv``, ``.parquet``, or one such file inside a ``.zip``.

    In a zip the file is the one whose name (in any folder) matches one of the ``zip_member`` names
    or glob patterns (case-insensitive), else the only data file in it.
    """
    if isinstance(path, (list, tuple)):
        return [row for one in path for row in read_rows(one, zip_member)]
    path = Path(path).expanduser()
    if not path.is_file():
        raise DatasetError(_not_a_file(path))
    name = path.name.lower()
    if name.endswith(".zip"):
        return _read_zip_rows(path, zip_member)
    if name.endswith(".csv"):
        return read_csv_rows(path)
    if name.endswith(".parquet"):
        return [record for _, record in iter_parquet_records(path)]
    if name.endswith(".json"):
        return read_json_rows(path)
    if name.endswith((".jsonl", ".jsonl.gz")):
        return read_jsonl(path)
    raise DatasetError(
        f"{path}: unsupported file type; use .jsonl (one JSON object per line), .jsonl.gz, .json, .csv, .parquet or .zip."
    )


def _read_zip_rows(path: Path, wanted: Sequence[str]) -> list[dict]:
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile as error:
        raise DatasetError(f"{path}: not a readable zip file ({error}).") from None
    with archive:
        files = [n for n in archive.namelist() if is_data_file(n) and not n.startswith("__MACOSX/")]
        chosen = [n for n in files if any(fnmatch.fnmatch(PurePosixPath(n).name.lower(), w.lower()) for w in wanted)]
        if not chosen and len(files) == 1:
            chosen = files
        if len(chosen) != 1:
            named = f" named {', '.join(wanted)}" if wanted else ""
            raise DatasetError(
                f"{path}: expected one data file{named} in the zip, found {excerpt(chosen or files) if chosen or files else 'none'}. "
                f"Unzip it and pass the file itself as data_source."
            )
        with tempfile.TemporaryDirectory() as folder:
            extracted = archive.extract(chosen[0], folder)
            return read_rows(extracted)
