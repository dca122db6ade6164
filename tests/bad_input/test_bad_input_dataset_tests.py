"""Bad inputs to the dataset-level tests (pdd_codec, pdd_exchangeability, pdd_contamination), issue 32
items 1 (repeats), 2 (runaway costs), 3 (long examples) and 6 (nested settings): each meets a message
that names the problem and the fix, or an honest result, before the model scores anything."""

from __future__ import annotations

import json
import logging
import re
import time

import pytest
from support.dataset_tests import build_task
from support.harness import REPO, cpu_float32, harness_args, read_results, run_lm_eval
from support.standard_tasks import standard_tasks

from pdd_tasks.dataset_tests import DATASET_TESTS, TooCostly
from pdd_tasks.errors import UserError
from pdd_tasks.registry import SettingError


CONFIGS = REPO / "task_configs"


def write_jsonl(path, texts):
    path.write_text("".join(json.dumps({"text": text}) + "\n" for text in texts))
    return path


def examples(n: int, start: int = 0) -> list[str]:
    return [f"Question {i}: which number follows {i} in the list of whole numbers? Answer: {i + 1}" for i in range(start, start + n)]  # fmt: skip


@pytest.fixture(scope="module")
def tasks_dir(tmp_path_factory):
    directory = standard_tasks(tmp_path_factory.mktemp("bad-input-tasks"))
    (directory / "pdd_contamination.yaml").write_text(f"include: {CONFIGS / 'contamination/pdd_contamination.yaml'}\n")
    return directory


# -- item 6: settings, nested ones included --------------------------------------------------------


@pytest.mark.parametrize(
    "metadata, message",
    [
        ({"source_tasks": ["a"], "exchangeability": {"num_shard": 10}}, "did you mean 'num_shards'"),
        ({"source_tasks": ["a"], "codec": {"context_exmples": 2}}, "did you mean 'context_examples'"),
        ({"source_tasks": ["a"], "codec": {"colour": "red"}}, "'colour' is no setting of CoDeC"),
        ({"source_tasks": ["a"], "exchangeability": {"permutations": 0}}, "exchangeability: metadata permutations=0"),
        ({"source_tasks": ["a"], "codec": {"data_files": "x.jsonl"}}, "name the tasks in source_tasks"),
        ({"source_tasks": ["a"], "max_examples": 200}, "give it in the test's block"),
        ({"source_task": ["a"]}, "did you mean 'source_tasks'"),
        ({"source_tasks": ["a"], "references": ["b"]}, "expected an object mapping a source task"),
        ({"source_tasks": ["a"], "references": {"c": "b"}}, r"references names \['c'\], not in source_tasks"),
        ({"source_tasks": ["a", "b"], "references": {"a": "b"}}, "is both a source task and a reference"),
        (
            {"source_tasks": ["a"], "tests": ["exchangeability"], "references": {"a": "b"}},
            "none of tests=\\['exchangeability'\\] compares to a reference",
        ),
    ],
)
def test_pdd_contamination_checks_every_key_nested_ones_included(metadata, message):
    with pytest.raises(UserError, match=message):
        build_task("contamination", metadata)


def test_a_misspelt_top_level_setting_of_a_test_alone_is_refused():
    with pytest.raises(SettingError, match="did you mean 'context_examples'"):
        build_task("codec", {"data_files": "a.jsonl", "context_example": 2})
    with pytest.raises(SettingError, match="did you mean 'permutations'"):
        build_task("exchangeability", {"data_files": "a.jsonl", "permutation": 2})


def test_codecs_share_passes_must_be_true_or_false_unquoted():
    """A quoted "yes" (or "false", which Python reads as true) is refused, naming the setting and the fix."""
    fix = """: expected true or false, unquoted (e.g. "share_passes": false)."""
    with pytest.raises(SettingError) as refused:
        build_task("codec", {"data_files": "a.jsonl", "share_passes": "yes"})
    assert str(refused.value) == "pdd_codec: metadata share_passes='yes'" + fix
    with pytest.raises(UserError) as refused:
        build_task("contamination", {"source_tasks": ["a"], "codec": {"share_passes": "false"}})
    assert str(refused.value) == "pdd_contamination: codec: metadata share_passes='false'" + fix


def test_every_registered_test_reads_max_requests():
    assert all("max_requests" in {s.name for s in test.all_settings} for test in DATASET_TESTS.values())


# -- item 2: the request count is checked before anything is built ----------------------------------


def test_a_runaway_permutation_count_is_refused_before_anything_is_built(tasks_dir):
    metadata = {
        "source_tasks": ["arc_easy_local"],
        "source_include_path": str(tasks_dir),
        "exchangeability": {"num_shards": 10, "permutations": 1_000_000_000},
    }
    started = time.monotonic()
    with pytest.raises(TooCostly) as refused:
        build_task("contamination", metadata)
    message = str(refused.value)
    assert "10,000,000,010 requests" in message and "num_shards 10 x (permutations 1,000,000,000 + 1)" in message
    # past the ceiling no max_requests lifts (issue 43, item 1): the settings that make the count are named, not the cap
    assert "whatever max_requests says" in message and '"permutations": 100' in message
    assert "raise max_requests" not in message
    assert time.monotonic() - started < 120  # refused, not built: the old code grew to 8.5 GB here


def test_each_test_alone_checks_its_cost(tmp_path):
    data = write_jsonl(tmp_path / "quiz.jsonl", examples(24))
    with pytest.raises(TooCostly, match="48 requests \\(24 examples x 2 requests\\), more than max_requests=40"):
        build_task("codec", {"data_files": str(data), "max_requests": 40})
    with pytest.raises(TooCostly, match="num_shards 4 x \\(permutations 99 \\+ 1\\)"):
        build_task(
            "exchangeability", {"data_files": str(data), "num_shards": 4, "permutations": 99, "max_requests": 399}
        )
    assert len(build_task("exchangeability", {"data_files": str(data), "num_shards": 4, "permutations": 99, "max_requests": 400}).documents) == 4  # fmt: skip


def test_the_planned_requests_are_logged(tasks_dir, caplog):
    metadata = {
        "source_tasks": ["arc_easy_local"],
        "source_include_path": str(tasks_dir),
        "exchangeability": {"num_shards": 4, "permutations": 9},
    }
    with caplog.at_level(logging.INFO, logger="pdd_tasks"):
        build_task("contamination", metadata)
    assert "pdd_contamination: 88 requests planned (codec on arc_easy_local: 48, exchangeability on arc_easy_local: 40)" in caplog.text  # fmt: skip


def test_a_reference_is_scored_by_codec_with_the_tasks_settings_and_a_reference_too_small_is_refused(tasks_dir):
    metadata = {
        "source_tasks": ["arc_easy_local"],
        "source_include_path": str(tasks_dir),
        "references": {"arc_easy_local": "gsm8k_local"},
        "codec": {"seed": 3},
        "exchangeability": {"num_shards": 4, "permutations": 9},
    }
    task = build_task("contamination", metadata)
    roles = [(doc["test"], doc["role"]) for doc in task.documents]
    assert roles.count(("codec", "reference")) == 24 and roles.count(("codec", None)) == 24
    assert ("exchangeability", "reference") not in roles  # only a test that compares to a reference scores it
    assert task.config.metadata["contamination"]["arc_easy_local"]["codec"]["reference"]["task"] == "gsm8k_local"
    reference_doc = next(doc for doc in task.documents if doc["role"] == "reference")
    assert task.process_results(reference_doc, [(-2.0, False), (-3.0, False)]) == {
        f"reference_{metric}/arc_easy_local": -1.0 for metric in DATASET_TESTS["codec"].metrics
    }
    (tasks_dir / "arc_easy_copy.yaml").write_text("include: arc_easy_local.yaml\ntask: arc_easy_copy\n")
    with pytest.raises(
        UserError, match="24 example\\(s\\) of the reference arc_easy_copy are also examples of the task"
    ):
        build_task("contamination", metadata | {"references": {"arc_easy_local": "arc_easy_copy"}})
    (tasks_dir / "data" / "two.jsonl").write_text(
        "".join(line + "\n" for line in (tasks_dir / "data" / "gsm8k_test.jsonl").read_text().splitlines()[:2])
    )
    (tasks_dir / "gsm8k_two.yaml").write_text(
        f"include: gsm8k_local.yaml\ntask: gsm8k_two\ndataset_kwargs:\n  data_files:\n    train: {tasks_dir}/data/gsm8k_train.jsonl\n"
        f"    test: {tasks_dir}/data/two.jsonl\n"
    )
    with pytest.raises(UserError, match="the reference gsm8k_two cannot be scored: .* 2 example.* too few"):
        build_task(
            "contamination",
            metadata | {"references": {"arc_easy_local": "gsm8k_two"}, "codec": {"context_examples": 2}},
        )


# -- item 1: repeated examples ------------------------------------------------------------------------


def test_codec_scores_each_distinct_example_once_and_says_so(tmp_path, caplog):
    texts = examples(10) + [examples(1)[0]] * 40
    data = write_jsonl(tmp_path / "repeats.jsonl", texts)
    with caplog.at_level(logging.WARNING):
        task = build_task("codec", {"data_files": str(data)})
    summary = task.config.metadata["codec_source"]
    assert (summary["examples"], summary["scored"]) == (10, 10)
    assert summary["repeats"]["repeats"] == 40 and summary["repeats"]["distinct"] == 10
    assert "40 of the 50 examples repeat an earlier one" in caplog.text and "example 0 x 41" in caplog.text
    # every in-context example is another text, never a copy of the target
    assert all(doc["prefix"] + doc["continuation"] not in doc["context"] for doc in task.documents)
    kept = build_task("codec", {"data_files": str(data), "keep_duplicates": True})
    assert kept.config.metadata["codec_source"]["scored"] == 50


def test_codec_over_copies_of_one_example_is_refused_not_read_as_clean(tmp_path):
    data = write_jsonl(tmp_path / "one.jsonl", [examples(1)[0]] * 40)
    with pytest.raises(UserError, match="1 example\\(s\\) are too few"):
        build_task("codec", {"data_files": str(data)})


def test_the_exchangeability_test_keeps_repeats_in_the_published_order_and_reports_them(tmp_path, caplog):
    texts = examples(8) + examples(4)
    data = write_jsonl(tmp_path / "order.jsonl", texts)
    with caplog.at_level(logging.WARNING):
        task = build_task("exchangeability", {"data_files": str(data), "num_shards": 3, "permutations": 2})
    summary = task.config.metadata["exchangeability_source"]
    assert summary["examples"] == 12 and summary["repeats"] == {
        "distinct": 8,
        "repeats": 4,
        "examples_of_repeats": [[0, 8], [1, 9], [2, 10]],
        "repeats_dropped": False,
    }
    assert "They are kept" in caplog.text


# -- item 3: one long example ----------------------------------------------------------------------


def test_codec_leaves_out_an_example_longer_than_the_window_naming_it(tiny_model, tmp_path):
    long_one = " ".join(f"word{i}" for i in range(400))  # > 256 tokens of the tiny model, under max_chars
    texts = examples(6)
    texts.insert(3, long_one)
    data = write_jsonl(tmp_path / "long.jsonl", texts)
    args = harness_args(cpu_float32(tiny_model), "pdd_codec", tmp_path / "out", include=CONFIGS, device="cpu", metadata={"data_files": str(data)})  # fmt: skip
    process = run_lm_eval(args, cwd=tmp_path)
    assert "1 example(s) are longer than the model's context window of 256 tokens" in process.stderr
    assert "example 3 (" in process.stderr
    results = read_results(tmp_path / "out")
    summary = results["configs"]["pdd_codec"]["metadata"]["codec_source"]
    assert (summary["examples"], summary["too_long"], summary["scored"]) == (7, 1, 6)
    assert results["results"]["pdd_codec"]["codec_examples,none"] == 6


def test_the_exchangeability_test_names_the_long_example_not_thousands_of_shards(tiny_model, tmp_path):
    texts = examples(12)
    texts[5] = " ".join(f"word{i}" for i in range(2000))
    data = write_jsonl(tmp_path / "long.jsonl", texts)
    with pytest.raises(UserError) as refused:
        build_task("exchangeability", {"data_files": str(data), "num_shards": 3, "pretrained": str(tiny_model)})
    message = str(refused.value)
    assert "example 5 alone is" in message and "more shards cannot help" in message
    assert 'num_shards": ' not in message


def test_the_lm_eval_command_shows_the_planned_requests_before_scoring(tiny_model, tasks_dir, tmp_path):
    metadata = {
        "source_tasks": ["arc_easy_local"],
        "source_include_path": str(tasks_dir),
        "exchangeability": {"num_shards": 12, "permutations": 2},  # 2 examples a shard: within the 256 tokens
    }
    args = harness_args(cpu_float32(tiny_model), "pdd_contamination", tmp_path / "out", include=tasks_dir, device="cpu", metadata=metadata)  # fmt: skip
    process = run_lm_eval(args, cwd=tmp_path, process=True)  # the lm_eval program itself: its logging set-up
    planned = re.search(
        r"pdd_contamination: 84 requests planned, about [\d,]+ tokens "
        r"\(codec on arc_easy_local: 48, exchangeability on arc_easy_local: 36\)",
        process.stderr,
    )  # the tokens: the model is known (tests/tasks/test_contamination_task.py checks their count)
    assert planned is not None, process.stderr[-3000:]
    assert planned.start() < process.stderr.index("Running loglikelihood requests")


# -- issue 43 item 4: degenerate inputs are named, not scored -------------------------------------------


@pytest.mark.parametrize("count", [2, 4])
def test_codec_on_fewer_examples_than_its_test_can_reject_with_is_refused(tmp_path, count):
    """Below 5 examples CoDeC's binomial test cannot reject at 0.05 even when every example drops
    (0.5**4 = 0.0625): 2 examples used to give 1.000 +- 0."""
    data = write_jsonl(tmp_path / "few.jsonl", examples(count))
    with pytest.raises(UserError) as refused:
        build_task("codec", {"data_files": str(data)})
    message = str(refused.value)
    assert (
        f"{count} example(s) would be scored (of the {count} distinct example(s) given), too few for CoDeC" in message
    )
    assert "below 5 even a score of 1.000" in message and "p = 0.5^4 = 0.0625" in message
    assert "Score at least 5 examples" in message
    assert build_task("codec", {"data_files": str(write_jsonl(tmp_path / "five.jsonl", examples(5)))}).documents


def test_codec_under_a_limit_below_its_minimum_is_refused_as_the_same_file_would_be(tiny_model, tmp_path):
    data = write_jsonl(tmp_path / "ten.jsonl", examples(10))
    args = harness_args(cpu_float32(tiny_model), "pdd_codec", tmp_path / "out", include=CONFIGS, device="cpu", metadata={"data_files": str(data)}, limit=2)  # fmt: skip
    process = run_lm_eval(args, cwd=tmp_path, check=False)
    assert process.returncode != 0 and "Traceback" not in process.stderr, process.stderr[-3000:]
    assert "pdd_codec: 2 example(s) would be scored (--limit 2 of 10 examples), too few for CoDeC" in process.stderr
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").rglob("results_*.json"))


def test_a_reference_below_codecs_minimum_is_not_compared_against(tasks_dir):
    (tasks_dir / "data" / "three.jsonl").write_text(
        "".join(line + "\n" for line in (tasks_dir / "data" / "gsm8k_test.jsonl").read_text().splitlines()[:3])
    )
    (tasks_dir / "gsm8k_three.yaml").write_text(
        f"include: gsm8k_local.yaml\ntask: gsm8k_three\ndataset_kwargs:\n  data_files:\n    train: {tasks_dir}/data/gsm8k_train.jsonl\n"
        f"    test: {tasks_dir}/data/three.jsonl\n"
    )
    metadata = {
        "source_tasks": ["arc_easy_local"],
        "source_include_path": str(tasks_dir),
        "references": {"arc_easy_local": "gsm8k_three"},
        "exchangeability": {"num_shards": 4, "permutations": 9},
    }
    with pytest.raises(UserError, match="the reference gsm8k_three cannot be scored: .*3 example\\(s\\) would be scored.*too few for CoDeC"):  # fmt: skip
        build_task("contamination", metadata)


def test_the_exchangeability_test_on_copies_of_one_example_does_not_apply(tmp_path, caplog):
    """40 copies of one example used to give p = 1, as if the order had been tested and found clean."""
    data = write_jsonl(tmp_path / "one.jsonl", [examples(1)[0]] * 40)
    with pytest.raises(UserError) as refused:
        build_task("exchangeability", {"data_files": str(data), "num_shards": 4, "permutations": 9})
    message = str(refused.value)
    assert "4 of the 4 shards hold copies of one text" in message and "it does not apply" in message
    assert "Give examples that differ" in message
    # some shards of copies: the test runs on the others, and says so
    mixed = write_jsonl(tmp_path / "mixed.jsonl", examples(20) + [examples(1)[0]] * 10)
    with caplog.at_level(logging.WARNING):
        task = build_task("exchangeability", {"data_files": str(mixed), "num_shards": 3, "permutations": 9})
    assert len(task.documents) == 3 and "1 of the 3 shards hold copies of one text (shards 2)" in caplog.text


# -- issue 43 item 5: a reference's mistakes are the reference's ------------------------------------


def _task_with_test_file(tasks_dir, name: str, test_file: str | None) -> None:
    """A GSM8K-shaped task ``name`` whose test split is ``test_file`` in the data folder (None: train only)."""
    test = f"    test: {tasks_dir}/data/{test_file}\n" if test_file else ""
    (tasks_dir / f"{name}.yaml").write_text(
        f"include: gsm8k_local.yaml\ntask: {name}\ndataset_kwargs:\n  data_files:\n"
        f"    train: {tasks_dir}/data/gsm8k_train.jsonl\n{test}"
    )


@pytest.fixture(scope="module")
def broken_tasks(tasks_dir):
    data = tasks_dir / "data"
    (data / "empty.jsonl").write_text("")
    lines = (data / "gsm8k_test.jsonl").read_text().splitlines()
    (data / "cut.jsonl").write_text("\n".join([*lines[:5], lines[5][:30], *lines[6:]]) + "\n")
    _task_with_test_file(tasks_dir, "gsm_missing", "nope.jsonl")
    _task_with_test_file(tasks_dir, "gsm_empty", "empty.jsonl")
    _task_with_test_file(tasks_dir, "gsm_cut", "cut.jsonl")
    _task_with_test_file(tasks_dir, "gsm_train_only", None)
    return tasks_dir


@pytest.mark.parametrize(
    "reference, fragments",
    [
        (
            "no_such_task",
            ['the reference \'no_such_task\' (references: {"arc_easy_local": "no_such_task"})', "no such lm-eval task"],
        ),  # fmt: skip
        ("gsm_missing", ["the reference 'gsm_missing'", "nope.jsonl", "not found"]),
        ("gsm_empty", ["the reference 'gsm_empty'", "empty.jsonl is empty (no rows)"]),
        ("gsm_cut", ["the reference 'gsm_cut'", "cut.jsonl:6: not valid JSON"]),
        (
            "gsm_train_only",
            [
                "the reference 'gsm_train_only'",
                "only the split(s) ['train']",
                "test split ('test')",
                'Point references["arc_easy_local"]',
            ],
        ),  # fmt: skip
        ("pdd_wikimia_32", ["the reference 'pdd_wikimia_32'", "is a pdd task", 'Point references["arc_easy_local"]']),
    ],
)
def test_a_references_mistake_names_the_reference_and_its_fix(broken_tasks, reference, fragments):
    """Before: each said "source_task ..." and proposed a source task's fix; a cut row had no line, an empty
    file and a missing split the same "an empty file has no documents"."""
    metadata = {
        "source_tasks": ["arc_easy_local"],
        "source_include_path": str(broken_tasks),
        "references": {"arc_easy_local": reference},
        "exchangeability": {"num_shards": 4, "permutations": 9},
    }
    with pytest.raises(UserError) as caught:
        build_task("contamination", metadata)
    message = str(caught.value)
    assert "source_task" not in message.replace("source_tasks", ""), message
    for fragment in fragments:
        assert fragment in message, message


@pytest.mark.parametrize(
    "task, fragments",
    [
        ("gsm_train_only", ["source_task 'gsm_train_only' has no examples to test", "only the split(s) ['train']"]),
        ("gsm_cut", ["source_task 'gsm_cut'", "cut.jsonl:6: not valid JSON"]),
        ("gsm_empty", ["empty.jsonl is empty (no rows)"]),
    ],
)
def test_a_source_tasks_missing_split_or_broken_file_is_named(broken_tasks, task, fragments):
    with pytest.raises(UserError) as caught:
        build_task("codec", {"source_task": task, "source_include_path": str(broken_tasks)})
    for fragment in fragments:
        assert fragment in str(caught.value), str(caught.value)


def test_references_given_to_pdd_codec_is_refused_naming_pdd_contamination(tasks_dir):
    """Before: a warning ("ignored by the task") and a run against the null, not the reference asked for."""
    metadata = {"source_task": "arc_easy_local", "source_include_path": str(tasks_dir), "references": {"arc_easy_local": "gsm8k_local"}}  # fmt: skip
    with pytest.raises(UserError, match=r"references is a setting of pdd_contamination, not of pdd_codec.*--tasks pdd_contamination"):  # fmt: skip
        build_task("codec", metadata)
    with pytest.raises(UserError, match="source_tasks is a setting of pdd_contamination"):
        build_task("codec", {"source_tasks": ["arc_easy_local"]})


def test_a_settings_block_given_to_pdd_codec_is_refused_and_says_to_lift_it(tasks_dir, caplog):
    """Before: "'codec' ... ignored by the task" and the run went on without the settings."""
    with pytest.raises(UserError, match=r'codec=\{"seed": 1\} is a settings block of pdd_contamination.*"seed": 1'):
        build_task("codec", {"source_task": "arc_easy_local", "source_include_path": str(tasks_dir), "codec": {"seed": 1}})  # fmt: skip


def test_an_unknown_key_of_a_settings_block_is_refused_without_an_ignored_warning_first(caplog):
    """Before: the warning "'colour' ... ignored by the task" came right before the refusal of 'colour'."""
    with caplog.at_level(logging.WARNING), pytest.raises(SettingError, match="'colour' is no setting of CoDeC"):
        build_task("contamination", {"source_tasks": ["a"], "codec": {"colour": "red"}})
    assert "ignored by the task" not in caplog.text
