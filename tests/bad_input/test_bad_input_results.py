"""Bad input, round 3 (issue 32, items 4, 5 and 7): ``lm-eval-pdd table``, ``report`` and ``decisions`` over
edited or damaged results files, over folders mixing runs, and ``report --out`` where the system refuses
the write (a path through a file, a read-only mount, a full disk).

The labelled and unlabelled runs are real ``lm_eval`` runs of the tiny GPT-2 (``conftest.py``), then
edited as a user's editor or a damaged disk would; the ``pdd_contamination`` results are hand-made with
the keys the real run writes (that run: ``tests/tasks/test_contamination_task.py``; the same shape:
``tests/metrics/test_verdict.py``). Every command line is the real one (:func:`support.harness.run_lm_eval_pdd`, or
the console script in a new process where the test mounts a file system for it).
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.bad_input import assert_refused
from support.harness import read_results, run_lm_eval, run_lm_eval_pdd, tasks_path, wikimia_rows
from support.results import lm_eval_run, results_of


@pytest.fixture(scope="module")
def labelled_run(tiny_model, tiny_table, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("labelled") / "out"
    lm_eval_run(tiny_model, tiny_table, out, {})
    return out


def edited_copy(run: Path, where: Path, edit) -> tuple[Path, Path]:
    """A copy of the run folder ``run`` at ``where`` whose results JSON ``edit(results)`` changed
    (written with NaN as the harness writes it); returns the folder and the results file."""
    shutil.copytree(run, where)
    file = next(where.rglob("results_*.json"))
    results = json.loads(file.read_text())
    edit(results)
    file.write_text(json.dumps(results, indent=2))
    return where, file


def table_row(table: str, label: str) -> str:
    return next(line for line in table.splitlines() if line.startswith(f"| {label}"))


# -- item 4: damaged values are named per file and key, shown as n/a, never as numbers -------------------


def _set(key: str, value):
    def edit(results):
        if value is KeyError:
            del results["results"]["pdd_wikimia_32"][key]
        else:
            results["results"]["pdd_wikimia_32"][key] = value

    return edit


@pytest.mark.parametrize(
    "key, value, problem",
    [
        ("loss_auc,none", 1.7, "out of range: expected a number in [0, 1]"),
        ("loss_auc,none", -0.2, "out of range: expected a number in [0, 1]"),
        ("loss_auc,none", "0.8", "not a number: expected a number in [0, 1]"),
        ("loss_auc,none", math.nan, "NaN: expected a number in [0, 1]"),
        ("loss_auc,none", KeyError, "missing (the method's other metrics are there)"),
        ("loss_auc_stderr,none", 7.5, "out of range: expected a standard error in [0, 1]"),
        ("loss_tpr@fpr<5%,none", [0.5], "not a number: expected a number in [0, 1]"),
    ],
    ids=["auc-1.7", "auc-negative", "auc-string", "auc-nan", "auc-missing", "stderr-7.5", "tpr-list"],
)
def test_table_and_report_name_a_damaged_value_and_never_print_it(labelled_run, tmp_path, key, value, problem):
    folder, file = edited_copy(labelled_run, tmp_path / "run", _set(key, value))
    table = run_lm_eval_pdd(["table", folder], tmp_path)
    assert table.returncode == 0 and "Traceback" not in table.stderr, table.stderr[-3000:]
    warning = f"warning: {file}: results['pdd_wikimia_32'][{key!r}]"
    assert warning in table.stderr and problem in table.stderr, table.stderr[-3000:]
    cells = [cell.strip() for cell in table_row(table.stdout, "Loss").strip("|").split("|")]
    metric = "AUC" if "auc" in key else "TPR@FPR<5%"
    if key.startswith("loss_auc_stderr"):
        assert cells[1].endswith("± n/a") and "7.5" not in cells[1]
    else:
        assert cells[1 if metric == "AUC" else 2] == "n/a", cells
    assert "n/a: damaged in the results JSON" in table.stdout or "missing" in problem
    assert "1.700" not in table.stdout and "7.500" not in table.stdout

    report = run_lm_eval_pdd(["report", folder, "--out", tmp_path / "report"], tmp_path)
    assert report.returncode == 0 and "Traceback" not in report.stderr, report.stderr[-3000:]
    assert warning in report.stderr
    board = json.loads((tmp_path / "report" / "leaderboard.json").read_text())
    loss = next(row for row in board if row["method"] == "loss")
    column = {"AUC": "auc", "TPR@FPR<5%": "tpr_at_fpr_lt_5pct"}[metric]
    if key.startswith("loss_auc_stderr"):
        assert loss["auc_stderr"] is None and loss["auc_ci95_low"] is None
    else:
        assert loss[column] is None
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "**Damaged values:** 1 value(s)" in markdown and repr(key) in markdown


def _structure(path: tuple, value):
    def edit(results):
        place = results
        for part in path[:-1]:
            place = place[part]
        place[path[-1]] = value

    return edit


@pytest.mark.parametrize(
    "path, value, named",
    [
        (("configs",), "x", "['configs'] = 'x': expected an object"),
        (("configs", "pdd_wikimia_32"), [], "configs['pdd_wikimia_32'] = []: expected an object"),
        (("configs", "pdd_wikimia_32", "metadata"), 3, "configs['pdd_wikimia_32']['metadata'] = 3"),
        (
            ("configs", "pdd_wikimia_32", "metadata", "min_k"),
            "abc",
            "configs['pdd_wikimia_32']['metadata']['min_k'] = 'abc': metadata min_k='abc': expected a fraction",
        ),
        (("n-samples", "pdd_wikimia_32"), "x", "n-samples['pdd_wikimia_32'] = 'x': expected an object"),
        (("config",), None, "['config'] = None: expected an object"),
        (("results", "pdd_wikimia_32"), "x", "results['pdd_wikimia_32'] = 'x': expected an object of metrics"),
    ],
    ids=["configs", "task-config", "metadata", "setting", "n-samples", "config", "task-results"],
)
def test_a_damaged_part_of_a_results_file_is_named_not_a_traceback(labelled_run, tmp_path, path, value, named):
    folder, file = edited_copy(labelled_run, tmp_path / "run", _structure(path, value))
    for command in (["table", folder], ["report", folder, "--out", tmp_path / "report"]):
        process = run_lm_eval_pdd(command, tmp_path)
        assert "Traceback" not in process.stderr, process.stderr[-3000:]
        assert f"warning: {file}: {named}" in process.stderr, process.stderr[-3000:]
        if path[0] != "results":
            assert process.returncode == 0, process.stderr[-3000:]


def test_an_undamaged_run_gets_no_warning(labelled_run, tmp_path):
    table = run_lm_eval_pdd(["table", labelled_run], tmp_path)
    assert table.returncode == 0 and "warning:" not in table.stderr and "damaged" not in table.stdout


def contamination_run(folder: Path, results: dict) -> Path:
    file = folder / "model" / "results_2026-01-01T00-00-00.000000.json"
    file.parent.mkdir(parents=True)
    file.write_text(json.dumps(results, indent=2))
    return file


@pytest.mark.parametrize(
    "key, value, problem",
    [
        ("exchangeability_pvalue/arc_easy,none", 7.5, "out of range"),
        ("exchangeability_pvalue/arc_easy,none", math.nan, "NaN"),
        ("exchangeability_pvalue/arc_easy,none", "0.01", "not a number"),
        ("codec_score/arc_easy,none", 1.5, "out of range"),
        ("codec_examples/arc_easy,none", 12.5, "expected a whole number >= 0"),
        ("codec_score_ci95_low/arc_easy,none", KeyError, None),
    ],
    ids=["p-7.5", "p-nan", "p-string", "codec-1.5", "examples-12.5", "ci-missing"],
)
def test_a_damaged_contamination_value_is_named_and_its_test_left_out(tmp_path, key, value, problem):
    results = results_of({"arc_easy": (38, 0.001), "gsm8k": (30, 0.2)})
    if value is KeyError:
        del results["results"]["pdd_contamination"][key]
    else:
        results["results"]["pdd_contamination"][key] = value
    file = contamination_run(tmp_path / "out", results)
    table = run_lm_eval_pdd(["table", tmp_path / "out"], tmp_path)
    assert table.returncode == 0 and "Traceback" not in table.stderr, table.stderr[-3000:]
    if problem:
        assert f"warning: {file}: results['pdd_contamination'][{key!r}]" in table.stderr
        assert problem in table.stderr
    row = table_row(table.stdout, "arc_easy")
    test = "exchangeability" if key.startswith("exchangeability") else "CoDeC"
    assert "n/a (damaged)" in row and f"{test}: not shown, the results JSON's {key}" in row, row
    # the damaged test counts as not applied: the verdict rests on the other test (either test can fire):
    # the exchangeability test rejects here (p 0.001), CoDeC (38 of the examples) does not
    assert ("| contaminated |" if test == "CoDeC" else "| no verdict |") in row, row
    assert "7.5" not in row and "1.500" not in row
    # the other task's tests are untouched, Holm now over the 3 p-values left
    assert "| n/a (damaged) |" not in table_row(table.stdout, "gsm8k")
    report = run_lm_eval_pdd(["report", tmp_path / "out", "--out", tmp_path / "report"], tmp_path)
    assert report.returncode == 0 and "Traceback" not in report.stderr, report.stderr[-3000:]
    assert "n/a (damaged)" in (tmp_path / "report" / "report.html").read_text()


def test_a_contamination_run_without_its_summary_prints_the_table_it_promises(tmp_path):
    results = results_of({"arc_easy": (38, 0.001)})
    del results["configs"]["pdd_contamination"]
    contamination_run(tmp_path / "out", results)
    table = run_lm_eval_pdd(["table", tmp_path / "out"], tmp_path)
    assert table.returncode == 0, table.stderr[-3000:]
    assert table_row(table.stdout, "arc_easy").count(" | ") >= 7
    assert "holds no contamination summary" in table.stdout

    results["results"]["pdd_contamination"] = {"alias": "pdd_contamination"}  # no metric at all
    contamination_run(tmp_path / "empty", results)
    table = run_lm_eval_pdd(["table", tmp_path / "empty"], tmp_path)
    assert_refused(table, "pdd_contamination: dataset-level contamination checks", "no table to show")
    assert "the contamination table below" not in table.stderr


# -- item 7: decisions over a folder mixing runs ---------------------------------------------------------


def test_decisions_over_a_folder_mixing_runs_decides_on_the_run_of_its_task(
    unlabelled_run,  # noqa: F811
    labelled_run,
    tmp_path,
):
    folder = tmp_path / "mixed"
    shutil.copytree(unlabelled_run, folder)
    later = folder / "labelled"
    shutil.copytree(labelled_run, later)
    for file in later.rglob("*_20*"):  # the labelled run is the newest in the folder
        stamp = file.stem.rsplit("_", 1)[1]
        file.rename(file.with_name(file.name.replace(stamp, "2099-01-01T00-00-00.000000")))
    custom_results = next(f for f in folder.rglob("results_*.json") if "labelled" not in str(f))
    process = run_lm_eval_pdd(["decisions", folder], tmp_path)
    assert process.returncode == 0, process.stderr[-3000:]
    assert f"per-text decisions: {custom_results.parent / 'decisions_pdd_custom.jsonl'}" in process.stderr
    assert len((custom_results.parent / "decisions_pdd_custom.jsonl").read_text().splitlines()) == 3

    # the labelled run alone: its task is named, and where the run of pdd_custom would be
    process = run_lm_eval_pdd(["decisions", later], tmp_path)
    assert_refused(process, f"No run of pdd_custom under {later}", "pdd_wikimia_32", "--task")


def test_decisions_never_reads_the_samples_of_another_run(unlabelled_run, tmp_path):  # noqa: F811
    folder = tmp_path / "run"
    shutil.copytree(unlabelled_run, folder)
    samples = next(folder.rglob("samples_pdd_custom_*.jsonl"))
    samples.rename(samples.with_name("samples_pdd_custom_2000-01-01T00-00-00.000000.jsonl"))
    process = run_lm_eval_pdd(["decisions", folder], tmp_path)
    assert_refused(process, "was made without --log_samples", "are of other runs")


def test_decisions_names_a_damaged_setting_or_score(unlabelled_run, tmp_path):  # noqa: F811
    def fpr(results):
        results["configs"]["pdd_custom"]["metadata"]["target_fpr"] = 7.5

    folder, file = edited_copy(unlabelled_run, tmp_path / "fpr", fpr)
    process = run_lm_eval_pdd(["decisions", folder], tmp_path)
    assert_refused(process, f"{file}: configs['pdd_custom'].metadata", "target_fpr=7.5", "edited or damaged")

    folder = tmp_path / "score"
    shutil.copytree(unlabelled_run, folder)
    samples = next(folder.rglob("samples_pdd_custom_*.jsonl"))
    lines = samples.read_text().splitlines()
    record = json.loads(lines[1])
    record["loss_flagged"][0] = "high"
    lines[1] = json.dumps(record)
    samples.write_text("\n".join(lines) + "\n")
    process = run_lm_eval_pdd(["decisions", folder], tmp_path)
    assert_refused(process, f"{samples}:2: loss_flagged is ['high'", "edited or damaged")


# -- item 5: report --out where the system refuses the write -----------------------------------------


def test_report_into_a_path_through_a_file_names_the_path_and_cause(labelled_run, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    process = run_lm_eval_pdd(["report", labelled_run, "--out", blocker / "report"], tmp_path)
    assert_refused(process, f"--out {blocker / 'report'}: cannot write there: Not a directory", "is a file")
    assert blocker.read_text() == "not a folder"


def test_report_folder_gets_the_mode_of_a_plain_mkdir_not_0700(labelled_run, tmp_path):
    umask = os.umask(0o022)
    try:
        assert run_lm_eval_pdd(["report", labelled_run, "--out", tmp_path / "report"], tmp_path).returncode == 0
    finally:
        os.umask(umask)
    assert (tmp_path / "report").stat().st_mode & 0o777 == 0o755
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging folder left


def in_a_mount(options: str, script: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run ``script`` (bash) with a tmpfs mounted at ``$MNT`` with ``options``, in a mount namespace of its
    own (``unshare``), so the mount is real and needs no privileges here and vanishes with the process."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode:
        pytest.skip("unshare -rm (a user and mount namespace) is not available here, so no tmpfs can be mounted")
    mount = cwd / "mnt"
    mount.mkdir()
    command = f'mount -t tmpfs -o {options} tmpfs "$MNT" && {script}'
    env = dict(os.environ, MNT=str(mount), PDD=str(Path(sys.executable).with_name("lm-eval-pdd")))
    return subprocess.run(
        ["unshare", "-rm", "bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def test_report_onto_a_read_only_mount_names_the_path_and_cause(labelled_run, tmp_path):
    process = in_a_mount("ro,size=1m", f'"$PDD" report {labelled_run} --out "$MNT/report"; echo "rc=$?"', tmp_path)
    assert "rc=1" in process.stdout, process.stdout + process.stderr[-3000:]
    assert_refused_text(
        process.stderr, f"--out {tmp_path / 'mnt' / 'report'}: cannot write there: Read-only file system"
    )
    assert "mounted read-only" in process.stderr


def test_report_onto_a_full_disk_names_the_cause_and_leaves_nothing(labelled_run, tmp_path):
    script = f'"$PDD" report {labelled_run} --out "$MNT/report"; echo "rc=$?"; ls -A "$MNT"; echo end'
    process = in_a_mount("size=64k", script, tmp_path)  # the plots alone are larger
    assert "rc=1" in process.stdout, process.stdout + process.stderr[-3000:]
    assert_refused_text(process.stderr, "cannot write there: No space left on device", "free space on that disk")
    assert process.stdout.split("rc=1", 1)[1].split() == ["end"]  # nothing left on the disk, not even a folder


def test_report_over_an_earlier_report_on_a_full_disk_keeps_the_earlier_one_whole(labelled_run, tmp_path):
    script = (
        f'"$PDD" report {labelled_run} --out "$MNT/report" >/dev/null 2>&1 && md5sum "$MNT"/report/* > "$MNT/../sums" && '
        'cat /dev/zero > "$MNT/filler" 2>/dev/null; '
        f'"$PDD" report {labelled_run} --out "$MNT/report" --force; echo "rc=$?"; '
        'cd "$MNT/report" && md5sum -c ../../sums --quiet && echo same; ls -A "$MNT/report"'
    )
    process = in_a_mount("size=4m", script, tmp_path)
    assert "rc=1" in process.stdout, process.stdout + process.stderr[-3000:]
    assert "No space left on device" in process.stderr and "Traceback" not in process.stderr
    assert "same" in process.stdout  # every file of the earlier report as it was
    assert not [name for name in process.stdout.split() if name.startswith(".report-new-")]


def assert_refused_text(stderr: str, *fragments: str) -> None:
    assert "Traceback" not in stderr, stderr[-3000:]
    for fragment in fragments:
        assert fragment in stderr, f"{fragment!r} not in:\n{stderr[-3000:]}"


# -- item 5: lm-eval's --use_cache on a full disk ----------------------------------------------------------


def test_use_cache_on_a_full_disk_names_the_file_and_a_rerun_reuses_what_was_written(tiny_model, tiny_table, tmp_path):
    texts = tmp_path / "texts.jsonl"
    chosen = wikimia_rows(32)[:60]
    texts.write_text("".join(json.dumps({"text": r["input"], "label": r["label"]}) + "\n" for r in chosen))
    metadata = json.dumps({"data_files": str(texts), "freq_table": str(tiny_table)})
    args = ["--model", "hf", "--model_args", f"pretrained={tiny_model},dtype=float32", "--device", "cpu"]
    args += ["--include_path", tasks_path(), "--tasks", "pdd_custom", "--batch_size", "8", "--metadata", metadata]
    lm_eval = Path(sys.executable).with_name("lm_eval")
    quoted = " ".join(shlex.quote(str(arg)) for arg in [lm_eval, *args])
    script = (
        f'{quoted} --output_path {tmp_path / "full"} --use_cache "$MNT/cache"; echo "rc=$?"; '
        f'cp "$MNT/cache_rank0.db" {tmp_path / "kept_rank0.db"}'
    )
    process = in_a_mount("size=96k", script, tmp_path)  # room for the cache's start, not for every answer
    assert "rc=1" in process.stdout, process.stdout + process.stderr[-3000:]
    assert_refused_text(
        process.stderr,
        "error: CacheWriteError: --use_cache: could not write the answer of pdd_custom doc",
        f"to {tmp_path / 'mnt' / 'cache_rank0.db'} (database or disk is full)",
        "run the same command again: it reuses those answers",
    )
    assert not (tmp_path / "full").exists()  # no results written for a run that did not finish

    resumed = run_lm_eval(
        [*args, "--output_path", str(tmp_path / "resumed"), "--use_cache", str(tmp_path / "kept")], tmp_path
    )
    cached = int(re.search(r"Cached requests: (\d+), Requests remaining: (\d+)", resumed.stderr).group(1))
    assert 0 < cached < 120  # some answers were kept, not all
    run_lm_eval([*args, "--output_path", str(tmp_path / "fresh")], tmp_path)
    assert read_results(tmp_path / "resumed")["results"] == read_results(tmp_path / "fresh")["results"]


# -- issue 43 item 6: decisions on a full disk, a killed report's leftovers, --force and a user's file ---


def test_decisions_onto_a_full_disk_is_one_line_and_keeps_the_old_file(unlabelled_run, tmp_path):  # noqa: F811
    """Before: a raw OSError traceback (ENOSPC names no file, so it was not taken for the output's)."""
    script = (
        f'cp -r {shlex.quote(str(unlabelled_run))} "$MNT/run" && echo old > "$MNT/d.jsonl" && '
        'cat /dev/zero > "$MNT/filler" 2>/dev/null; '
        '"$PDD" decisions "$MNT/run" --output "$MNT/d.jsonl" --force; echo "rc=$?"; cat "$MNT/d.jsonl"; ls -A "$MNT"'
    )
    process = in_a_mount("size=512k", script, tmp_path)
    assert "rc=1" in process.stdout, process.stdout + process.stderr[-3000:]
    assert_refused_text(process.stderr, "cannot write there: No space left on device", "free space on that disk")
    assert process.stdout.split("rc=1", 1)[1].split()[0] == "old"  # the old file as it was
    assert not [name for name in process.stdout.split() if ".tmp-" in name]


def test_write_file_names_a_full_disk_that_names_no_file(tmp_path):
    """/dev/full: the kernel's ENOSPC on a write, as a full disk gives it (no file named in the error)."""
    from pdd_tasks.tools.outputs import OutputNotWritten, write_file

    def write(path: Path) -> None:
        path.write_text("partial")
        with open("/dev/full", "w") as full:
            full.write("x" * 100_000)

    output = tmp_path / "d.jsonl"
    output.write_text("old")
    with pytest.raises(OutputNotWritten, match="cannot write there: No space left on device"):
        write_file(output, write, force=True)
    assert output.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["d.jsonl"]


def test_a_killed_reports_staging_folders_are_removed_by_the_next_run_and_a_running_ones_kept(labelled_run, tmp_path):
    """Before: ``.report-new-*`` (in --out) and ``.<out>-new-*`` (beside it) stayed, unmentioned, forever."""
    from pdd_tasks.tools.report.write import _lock

    out = tmp_path / "rep"
    assert run_lm_eval_pdd(["report", labelled_run, "--out", out], tmp_path).returncode == 0
    inside, beside = out / ".report-new-abc123", tmp_path / ".rep-new-def456"
    running = out / ".report-new-running"
    for folder in (inside, beside, running):
        folder.mkdir()
        (folder / "roc_partial.png").write_bytes(b"\x89PNG partial")
    users = out / ".report-new-notes.txt"  # a file of the pattern's name: not a staging folder
    users.write_text("mine")
    other = tmp_path / ".report-new-elsewhere"  # the pattern, but not where this --out stages
    other.mkdir()
    lock = _lock(running)  # a report writing now holds its staging folder
    try:
        process = run_lm_eval_pdd(["report", labelled_run, "--out", out, "--force"], tmp_path)
    finally:
        os.close(lock)
    assert process.returncode == 0, process.stderr[-3000:]
    assert not inside.exists() and not beside.exists()
    assert f"removed {inside}" in process.stderr and f"removed {beside}" in process.stderr
    assert running.is_dir() and users.read_text() == "mine" and other.is_dir()


def test_report_force_keeps_a_users_own_file_of_a_report_name(labelled_run, tmp_path):
    """Before: --force replaced a leaderboard.csv the command never wrote (docs/mistakes.md: never what is there)."""
    out = tmp_path / "rep"
    out.mkdir()
    (out / "leaderboard.csv").write_text("name,score\nmine,1\n")
    process = run_lm_eval_pdd(["report", labelled_run, "--out", out, "--force"], tmp_path)
    assert_refused(process, "leaderboard.csv, of a report file's name but not written by lm-eval-pdd report", "Move it")
    assert (out / "leaderboard.csv").read_text() == "name,score\nmine,1\n"
    assert sorted(p.name for p in out.iterdir()) == ["leaderboard.csv"]
    (out / "leaderboard.csv").unlink()
    assert run_lm_eval_pdd(["report", labelled_run, "--out", out], tmp_path).returncode == 0
    again = run_lm_eval_pdd(["report", labelled_run, "--out", out, "--force"], tmp_path)  # its own files: replaced
    assert again.returncode == 0, again.stderr[-3000:]


# -- issue 43 item 7: decisions on a folder of a labelled and an unlabelled run -------------------------


def test_decisions_on_a_labelled_run_names_the_unlabelled_run_beside_it(
    unlabelled_run, tiny_model, tiny_table, tmp_path
):  # noqa: F811
    """Before: "was not an unlabelled run", the unlabelled run in the same folder not named."""
    from support.bad_input import MEMBERS, NON_MEMBERS, lm_eval_custom, rows, write_jsonl

    folder = tmp_path / "runs"
    shutil.copytree(unlabelled_run, folder)
    unlabelled = next(folder.rglob("results_*.json"))
    data = write_jsonl(tmp_path / "labelled.jsonl", rows(*[(t, 1) for t in MEMBERS], *[(t, 0) for t in NON_MEMBERS]))
    lm_eval_custom(tiny_model, data, folder / "labelled", {"freq_table": str(tiny_table)}, extra=["--log_samples"])
    process = run_lm_eval_pdd(["decisions", folder], tmp_path)
    assert_refused(process, "was not an unlabelled run", f"also holds 1 other run(s) of pdd_custom: {unlabelled}")
    assert f"lm-eval-pdd decisions {unlabelled}" in process.stderr
    assert run_lm_eval_pdd(["decisions", unlabelled], tmp_path).returncode == 0


@pytest.mark.parametrize("command", ["table", "decisions", "report"])
def test_a_folder_named_like_a_results_file_is_named_as_a_folder(command, tmp_path):
    """Before: the folder was read as a data file, with the data loader's advice ("Give a data file in it")."""
    folder = tmp_path / "out" / "model" / "results_2026-01-01T00-00-00.000000.json"
    folder.mkdir(parents=True)
    args = [command, tmp_path / "out"] + (["--out", tmp_path / "report"] if command == "report" else [])
    process = run_lm_eval_pdd(args, tmp_path)
    assert_refused(process, "no results_*.json file below it", f"{folder} is a folder, not a file", "--output_path")
    assert "Give a data file in it" not in process.stderr


# -- issue 43 item 8: lm_eval --output_path on a read-only or full disk ----------------------------------


def _lm_eval_into_mount(
    tiny_model, tiny_table, options: str, tmp_path, before: str = ""
) -> subprocess.CompletedProcess:
    args = [
        "--model", "hf", "--model_args", f"pretrained={tiny_model},dtype=float32", "--device", "cpu",
        "--include_path", tasks_path(), "--tasks", "pdd_wikimia_32", "--batch_size", "8", "--limit", "24",
        "--metadata", json.dumps({"freq_table": str(tiny_table)}), "--log_samples",
    ]  # fmt: skip
    script = f'{before}"$(dirname "$PDD")/lm_eval" {shlex.join(args)} --output_path "$MNT/out"; echo "rc=$?"'
    return in_a_mount(options, script, tmp_path)


def test_lm_eval_output_path_on_a_read_only_disk_exits_1_with_one_line(tiny_model, tiny_table, tmp_path):
    """Before: 'Could not save results aggregated' as a WARNING, exit status 0, nothing saved."""
    process = _lm_eval_into_mount(tiny_model, tiny_table, "ro,size=1m", tmp_path)
    assert "rc=1" in process.stdout, process.stdout[-2000:] + process.stderr[-3000:]
    assert_refused_text(
        process.stderr, "OutputNotSaved: lm_eval --output_path", "could not save the results", "Read-only file system"
    )
    assert "|pdd_wikimia_32|" in process.stdout.replace(" ", "")  # the results table is still printed


def test_lm_eval_samples_on_a_full_disk_exits_1_naming_the_cut_file(tiny_model, tiny_table, tmp_path):
    """Before: exit status 0 with a WARNING and a cut samples file. The results JSON (small) fits, the
    samples do not: the disk is filled up to 64 KiB before the run (measured on this run: the results JSON
    25 KiB, a little more with a longer model path; the samples file 100 KiB)."""
    fill = 'head -c $(( $(df --output=avail -B1 "$MNT" | tail -1) - 65536 )) /dev/zero > "$MNT/filler" 2>/dev/null; '
    process = _lm_eval_into_mount(tiny_model, tiny_table, "size=1m", tmp_path, before=fill)
    assert "rc=1" in process.stdout, process.stdout[-2000:] + process.stderr[-3000:]
    assert_refused_text(
        process.stderr,
        "could not save the samples of pdd_wikimia_32 (its samples file may be cut",
        "No space left on device",
        "The results JSON was saved.",
        "Free space on that disk",
    )
