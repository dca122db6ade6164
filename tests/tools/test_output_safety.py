"""``--force`` replaces what a command wrote before, never what is there (issue 22's data-loss cases).

Each case asserts that the user's files survive byte for byte and that the message names the fix.
The rules themselves (pdd_tasks/tools/outputs.py) are tested in-process; the three reported cases,
and one command per kind of output, through the real ``lm-eval-pdd`` command.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.bad_input import MEMBERS, NON_MEMBERS, assert_refused, run_pdd, write_jsonl

from pdd_tasks.tools.outputs import (
    OWNED_FILES,
    OutputRefused,
    check_output_file,
    refuse_unsafe_output,
    replace_folder,
    write_file,
)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# -- the rules, in-process --------------------------------------------------------------------------


def test_an_output_that_is_or_holds_an_input_is_refused(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    pool = data / "pool.jsonl"
    pool.write_text("{}\n")
    with pytest.raises(OutputRefused, match="is also one of the inputs.*Choose another --output"):
        refuse_unsafe_output(pool, [pool])
    with pytest.raises(OutputRefused, match="holds an input of this command"):
        refuse_unsafe_output(data, [pool])
    with pytest.raises(OutputRefused, match="lies inside an input"):
        refuse_unsafe_output(data / "new", [data], replaces_folder=True)
    # a new file inside an input folder is fine for a file output (decisions writes into the run folder)
    assert refuse_unsafe_output(data / "decisions.jsonl", [data]) == (data / "decisions.jsonl").resolve()
    # a hub id or a missing path is no file of the user's
    assert refuse_unsafe_output(tmp_path / "out", ["gpt2", "hub", None, tmp_path / "missing"])


def test_a_folder_output_that_is_or_holds_the_current_or_home_folder_is_refused(tmp_path, monkeypatch):
    home = tmp_path / "home"
    work = home / "project"
    work.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    for output, fragment in (
        (".", "the current folder"),
        (home, "your home folder"),
        (tmp_path, "a folder that holds"),
    ):
        with pytest.raises(OutputRefused, match=fragment):
            refuse_unsafe_output(output, replaces_folder=True)
    assert refuse_unsafe_output(work / "controlled", replaces_folder=True) == work / "controlled"


def test_force_replaces_only_a_folder_the_command_wrote(tmp_path):
    output = tmp_path / "out"
    with replace_folder(output, force=False, command="make-x") as tmp:
        (tmp / "a.txt").write_text("first")
    assert json.loads((output / OWNED_FILES).read_text())["files"] == ["a.txt"]
    with pytest.raises(OutputRefused, match="pass --force to replace what lm-eval-pdd make-x wrote"):
        with replace_folder(output, force=False, command="make-x"):
            pass
    with replace_folder(output, force=True, command="make-x") as tmp:
        (tmp / "b.txt").write_text("second")
    assert sorted(snapshot(output)) == [OWNED_FILES, "b.txt"]
    (output / "notes.md").write_text("mine")
    before = snapshot(output)
    with pytest.raises(OutputRefused, match=r"holds 1 files that lm-eval-pdd make-x did not write \(notes.md\)"):
        with replace_folder(output, force=True, command="make-x"):
            pass
    assert snapshot(output) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temporary folder left


def test_a_failure_while_building_leaves_the_old_folder_alone(tmp_path):
    output = tmp_path / "out"
    with replace_folder(output, force=False, command="make-x") as tmp:
        (tmp / "a.txt").write_text("first")
    before = snapshot(output)
    with pytest.raises(RuntimeError), replace_folder(output, force=True, command="make-x") as tmp:
        (tmp / "half.txt").write_text("half")
        raise RuntimeError("interrupted")
    assert snapshot(output) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_write_file_is_atomic_and_needs_force_to_replace(tmp_path):
    output = tmp_path / "d.jsonl"
    output.write_text("keep me")
    with pytest.raises(OutputRefused, match="already exists; pass --force"):
        write_file(output, lambda path: path.write_text("new"), force=False)

    def fail(path: Path) -> None:
        path.write_text("half")
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        write_file(output, fail, force=True)
    assert output.read_text() == "keep me"
    assert [p.name for p in tmp_path.iterdir()] == ["d.jsonl"]
    write_file(output, lambda path: path.write_text("new"), force=True)
    assert output.read_text() == "new"
    with pytest.raises(OutputRefused, match="is a folder"):
        check_output_file(tmp_path, force=True)


# -- the reported cases, through the real command ---------------------------------------------------


def test_make_controlled_output_dot_force_refuses_and_deletes_nothing(tiny_model, tmp_path):
    folder = tmp_path / "work"
    folder.mkdir()
    write_jsonl(folder / "pool.jsonl", [{"input": t} for t in MEMBERS + NON_MEMBERS])
    (folder / "thesis.tex").write_text("years of work")
    before = snapshot(folder)
    process = run_pdd(
        ["make-controlled", "--model", tiny_model, "--pool", "pool.jsonl", "--output", ".", "--force", "--no-progress"],
        folder,
    )
    assert_refused(process, "--output . is the current folder", "Choose another --output")
    assert snapshot(folder) == before


def test_make_ordered_output_holding_its_model_refuses_and_deletes_nothing(tiny_model, tmp_path):
    import shutil

    folder = tmp_path / "D"
    shutil.copytree(tiny_model, folder / "model")
    (folder / "notes.txt").write_text("mine")
    before = snapshot(folder)
    process = run_pdd(
        ["make-ordered", "--model", folder / "model", "--output", folder, "--force", "--no-progress"], tmp_path
    )
    assert_refused(process, "holds an input of this command", "Choose another --output")
    assert snapshot(folder) == before


def test_make_controlled_force_replaces_its_own_output(tiny_model, tmp_path):
    pool = write_jsonl(tmp_path / "pool.jsonl", [{"input": t} for t in MEMBERS + NON_MEMBERS])
    output = tmp_path / "controlled"
    command = ["make-controlled", "--model", tiny_model, "--pool", pool, "--output", output, "--no-progress"]
    command += ["--epochs", "1", "--batch-size", "8"]
    assert run_pdd(command, tmp_path).returncode == 0
    assert_refused(run_pdd(command, tmp_path), "pass --force")
    assert run_pdd([*command, "--force", "--seed", "1"], tmp_path).returncode == 0
    manifest = json.loads((output / "manifest.json").read_text())
    assert manifest["settings"]["seed"] == 1
    assert set(json.loads((output / OWNED_FILES).read_text())["files"]) == set(snapshot(output)) - {OWNED_FILES}


def test_decisions_never_writes_over_its_own_samples_file(unlabelled_run, tmp_path):  # noqa: F811
    samples = sorted(unlabelled_run.rglob("samples_*.jsonl"))[-1]
    before = samples.read_bytes()
    process = run_pdd(["decisions", unlabelled_run, "--output", samples, "--force"], tmp_path)
    assert_refused(process, "is also one of the inputs", "Choose another --output")
    assert samples.read_bytes() == before
    assert run_pdd(["decisions", unlabelled_run, "--output", tmp_path / "d.jsonl"], tmp_path).returncode == 0


def test_zh_snippets_never_writes_over_its_input(tmp_path):
    source = write_jsonl(tmp_path / "zh.jsonl", [{"text": "本发明公开了一种图像识别方法。"}])
    before = source.read_bytes()
    for extra in ([], ["--force"]):
        process = run_pdd(["zh-snippets", "--input", source, "--output", source, "--words", "3", *extra], tmp_path)
        assert_refused(process, "is also one of the inputs", "Choose another --output")
    assert source.read_bytes() == before
    output = tmp_path / "out.jsonl"
    assert run_pdd(["zh-snippets", "--input", source, "--output", output, "--words", "3"], tmp_path).returncode == 0
    assert_refused(run_pdd(["zh-snippets", "--input", source, "--output", output], tmp_path), "pass --force")


# -- every command that writes, against its inputs, the current folder and a folder of the user's ---

#: What each command refuses in the three cases; None where a case does not apply, with the reason.
#: install-table is not listed: it writes only into the table cache, never to a path the user names.
WRITERS = {
    # command: (output kind, option, case (a) --output = an input, (b) --output ., (c) a folder of the user's)
    "make-controlled": ("folder", "--output", "is also one of the inputs", "is the current folder", "did not write"),
    "make-ordered": ("folder", "--output", "is also one of the inputs", "is the current folder", "did not write"),
    # the current folder, for a command writing one file: a folder, and one holding its inputs
    "decisions": ("file", "--output", "is also one of the inputs", "is a folder|holds an input", "is a folder"),
    "build-table": ("file", "--output", "is also one of the inputs", "is a folder|holds an input", "is a folder"),
    "merge-tables": ("file", "--output", "is also one of the inputs", "is a folder|holds an input", "is a folder"),
    # estimate-table's only file input is --jieba-dict (wordfreq and uniform read no file of the user's)
    "estimate-table": ("file", "--output", "is also one of the inputs", "is a folder|holds an input", "is a folder"),
    "zh-snippets": ("file", "--output", "is also one of the inputs", "is a folder|holds an input", "is a folder"),
    # report writes only its own file names (report.html, report.md, leaderboard.*, plots) into --out and
    # leaves every other file there, so case (c) does not apply (tests/tools/test_report.py checks that it
    # replaces only those names, and tests/bad_input/test_bad_input_results.py that --force replaces only
    # those carrying its mark); case (b) is refused where the current folder holds the run it reads.
    "report": ("files", "--out", "is also one of the inputs", "holds an input", None),
}
CASES = ("output-is-an-input", "output-is-the-current-folder", "output-holds-a-user-file")


def _writer_command(name: str, work: Path, model: Path, table: Path, run: Path | None) -> tuple[list, Path]:
    """The command line of ``name`` run in ``work`` (whose inputs it creates there) without its output
    option, and one of its inputs (for case (a))."""
    corpus = write_jsonl(work / "corpus.jsonl", [{"text": t, "input": t} for t in MEMBERS + NON_MEMBERS])
    if name == "make-controlled":
        return ["make-controlled", "--model", model, "--pool", "corpus.jsonl", "--no-progress"], corpus
    if name == "make-ordered":
        return ["make-ordered", "--model", model, "--data", "corpus.jsonl", "--no-progress"], corpus
    if name == "build-table":
        return ["build-table", "--tokenizer", model, "--input", "corpus.jsonl", "--no-progress"], corpus
    if name == "merge-tables":
        (work / "part.npz").write_bytes(table.read_bytes())
        return ["merge-tables", "part.npz"], work / "part.npz"
    if name == "estimate-table":
        (work / "dict.txt").write_text("的 100 uj\n", encoding="utf-8")
        return [
            "estimate-table",
            "--tokenizer",
            model,
            "--from",
            "jieba",
            "--jieba-dict",
            "dict.txt",
        ], work / "dict.txt"
    if name == "zh-snippets":
        return ["zh-snippets", "--input", "corpus.jsonl", "--words", "3"], corpus
    import shutil

    shutil.copytree(run, work / "run")
    samples = sorted((work / "run").rglob("samples_*.jsonl"))[-1]
    if name == "decisions":
        return ["decisions", "run"], samples
    return ["report", "run"], work / "run"  # report


@pytest.mark.parametrize(
    "name, case",
    [(name, case) for name in sorted(WRITERS) for i, case in enumerate(CASES) if WRITERS[name][2 + i] is not None],
)
def test_every_writing_command_keeps_the_users_files(name, case, tiny_model, tiny_table, unlabelled_run, tmp_path):  # noqa: F811
    """Each writing command with ``--force``, its output (a) one of its inputs, (b) the current folder,
    (c) a folder holding a user's file: refused with the fix, before any model work, and every file of
    the user's byte for byte as it was."""
    kind, option, *refusals = WRITERS[name]
    expected = dict(zip(CASES, refusals, strict=True))
    work = tmp_path / "work"
    work.mkdir()
    (work / "thesis.tex").write_text("years of work")
    mine = work / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine too")
    command, an_input = _writer_command(name, work, tiny_model, tiny_table, unlabelled_run)
    output = {"output-is-an-input": an_input, "output-is-the-current-folder": ".", "output-holds-a-user-file": mine}
    before = snapshot(work)
    process = run_pdd([*command, option, output[case], "--force"], work)
    after = snapshot(work)
    assert_refused(process)
    assert any(problem in process.stderr for problem in expected[case].split("|")), process.stderr[-3000:]
    assert any(fix in process.stderr for fix in ("Choose another", "give a file name in it", "Move those")), (
        process.stderr
    )
    assert after == before
