"""The one file reader (pdd_tasks/loading/files.py): formats, gzip by magic bytes, and messages that
name the file and line."""

from __future__ import annotations

import gzip
import json

import pytest

from pdd_tasks.loading import files
from pdd_tasks.loading.files import DatasetError


ROWS = [{"text": f"text {i}", "label": i % 2} for i in range(50)]


def jsonl_bytes(rows) -> bytes:
    return b"".join(json.dumps(row).encode() + b"\n" for row in rows)


def test_gzip_is_detected_from_the_magic_bytes_not_the_suffix(tmp_path):
    hidden = tmp_path / "rows.jsonl"  # gzipped, named as plain
    hidden.write_bytes(gzip.compress(jsonl_bytes(ROWS)))
    assert files.is_gzipped(hidden)
    assert files.read_jsonl(hidden) == ROWS
    assert files.read_rows(hidden) == ROWS


def test_a_byte_order_mark_is_dropped_and_crlf_lines_read(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + jsonl_bytes(ROWS[:2]).replace(b"\n", b"\r\n"))
    assert files.read_jsonl(path) == ROWS[:2]


def test_a_byte_that_is_not_utf8_names_line_and_column(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(jsonl_bytes(ROWS[:3]) + b'{"text": "ab\xe9"}\n')
    with pytest.raises(DatasetError, match=r"x\.jsonl:4: byte 0xe9 at column 13 is not UTF-8.*iconv"):
        files.read_jsonl(path)
    with pytest.raises(DatasetError, match=r"x\.jsonl:4: byte 0xe9"):
        files.read_text(path)


def test_a_truncated_gzip_names_the_last_whole_line(tmp_path):
    whole = gzip.compress(jsonl_bytes(ROWS * 20))
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(DatasetError, match=r"cut\.jsonl\.gz: the gzip stream ends early or is corrupt after line \d+"):
        files.read_jsonl(path)


@pytest.mark.parametrize(
    "content, message",
    [
        (b'{"a": 1}\n[1, 2]\n', r"t\.jsonl:2: expected a JSON object, got list"),
        (b'{"a": 1}\n{"a": \n', r"t\.jsonl:2: not valid JSON"),
    ],
)
def test_json_lines_errors_name_the_line(tmp_path, content, message):
    path = tmp_path / "t.jsonl"
    path.write_bytes(content)
    with pytest.raises(DatasetError, match=message):
        files.read_jsonl(path)


def test_csv_values_stay_strings_and_empty_cells_are_none(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text('text,label\n007,1\n"a, quoted text",0\n,1\n')
    assert files.read_rows(path) == [
        {"text": "007", "label": "1"},
        {"text": "a, quoted text", "label": "0"},
        {"text": None, "label": "1"},
    ]


def test_csv_row_with_more_values_than_fields_is_named(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("text,label\na,b,1\n")
    with pytest.raises(DatasetError, match=r"t\.csv:2: more values than the 2 header fields"):
        files.read_rows(path)


def test_a_list_of_files_is_read_in_order(tmp_path):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.json"
    first.write_bytes(jsonl_bytes(ROWS[:2]))
    second.write_text(json.dumps(ROWS[2:4]))
    assert files.read_rows([first, second]) == ROWS[:4]


def test_parquet_rows_and_a_file_that_is_not_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "t.parquet"
    pq.write_table(pa.Table.from_pylist(ROWS), path)
    assert files.read_rows(path) == ROWS
    assert [row for _, row in files.iter_parquet_records(path, columns=["text"], batch_size=7)] == [
        {"text": row["text"]} for row in ROWS
    ]
    bogus = tmp_path / "bogus.parquet"
    bogus.write_text("no")
    with pytest.raises(DatasetError, match=r"bogus\.parquet: not a readable Parquet file"):
        files.read_rows(bogus)


def test_missing_file_and_directory_are_named(tmp_path):
    with pytest.raises(DatasetError, match="Data file not found"):
        files.read_rows(tmp_path / "none.jsonl")
    with pytest.raises(DatasetError, match="is a folder, not a file"):
        files.read_jsonl(tmp_path)


def test_read_text_keeps_the_document_as_written(tmp_path):
    path = tmp_path / "doc.txt.gz"
    path.write_bytes(gzip.compress("first line\r\nsecond \u00e9\n".encode()))
    assert files.read_text(path) == "first line\nsecond \u00e9\n"
    assert list(files.iter_text_lines(path)) == [(1, "first line"), (2, "second \u00e9")]


COLUMNS = {"text": [f"text number {i} of the column" for i in range(776)], "label": [i % 2 for i in range(776)]}


@pytest.mark.parametrize("indent", [None, 1], ids=["one-line", "pretty-printed"])
def test_column_oriented_json_is_refused_with_the_conversion_and_an_excerpt(tmp_path, indent):
    path = tmp_path / "columns.json"
    path.write_text(json.dumps(COLUMNS, indent=indent))
    with pytest.raises(DatasetError) as error:
        files.read_rows(path)
    message = str(error.value)
    assert "column-oriented JSON" in message and "'text': 776 values" in message
    assert "orient='records', lines=True" in message and "columns.jsonl" in message and "jq -c" in message
    assert "text number 5 of" not in message and len(message) < 800


def test_rows_under_one_key_are_refused_with_the_conversion(tmp_path):
    path = tmp_path / "wrapped.json"
    path.write_text(json.dumps({"data": [{"text": "a", "label": 1}, {"text": "b", "label": 0}]}, indent=2))
    with pytest.raises(DatasetError, match=r"""under the key 'data' \(2 objects\).*jq -c '\.\["data"\]\[\]'"""):
        files.read_rows(path)


def test_one_object_in_a_json_file_is_one_row(tmp_path):
    path = tmp_path / "one.json"
    path.write_text(json.dumps({"text": "a", "label": 1}, indent=2))
    assert files.read_rows(path) == [{"text": "a", "label": 1}]


@pytest.mark.parametrize(
    "row",
    [
        {"text": COLUMNS["text"], "label": 1},  # a text field holding a list
        {"text": "a text", "label": COLUMNS["label"]},  # a label holding a list
        {f"field_{i}": "x" for i in range(2000)},  # no text field among 2000 fields
    ],
    ids=["list-text", "list-label", "many-fields"],
)
def test_a_message_embeds_at_most_an_excerpt_of_the_data(row):
    from pdd_tasks.loading.benchmark_data import normalise_rows

    with pytest.raises(DatasetError) as error:
        normalise_rows([row], "data.jsonl", "text", "label")
    assert len(str(error.value)) < 600, str(error.value)[:2000]
    assert "characters in all" in str(error.value)


def test_data_files_naming_a_folder_says_folder_and_what_to_give(tmp_path):
    from pdd_tasks.tasks.custom import read_custom_data

    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "part1.jsonl").write_text('{"text": "a", "label": 1}\n')
    with pytest.raises(DatasetError) as error:
        read_custom_data({"data_files": str(folder)})
    message = str(error.value)
    assert "is a folder, not a file" in message and "part1.jsonl" in message
    assert "not found" not in message and "glob patterns are not expanded" in message
    with pytest.raises(DatasetError, match="not found.*glob patterns are not expanded"):
        read_custom_data({"data_files": str(folder / "*.jsonl")})
