"""pdd_codec through the real ``lm_eval`` command line with tiny GPT-2 models, and stock lm-eval
tasks (arc_easy, gsm8k) run offline from local files (tests/fixtures/standard_tasks).

The per-example Delta is checked against the model's own log-likelihoods computed here; a model
trained on the examples must get a higher CoDeC score than an untouched one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.dataset_tests import build_task
from support.harness import REPO, cpu_float32, harness_args, read_results, read_samples, run_lm_eval
from support.models import build_bos_model, train_on
from support.standard_tasks import standard_tasks

from pdd_tasks.dataset_tests.codec import split_after_words
from pdd_tasks.errors import UserError


#: This worktree's task configs (``lm-eval-pdd tasks-path`` may point at another checkout).
CONFIGS = REPO / "task_configs"


def write_jsonl(path, texts):
    path.write_text("".join(json.dumps({"text": text}) + "\n" for text in texts))
    return path


def run_codec(model_dir, out, metadata, check=True, limit=None):
    out.parent.mkdir(parents=True, exist_ok=True)
    args = harness_args(
        cpu_float32(model_dir),
        "pdd_codec",
        out,
        include=CONFIGS,
        device="cpu",
        batch_size=16,
        metadata=metadata,
        limit=limit,
    )
    return run_lm_eval(args, cwd=out.parent, check=check)


def metrics(out) -> dict:
    return {key: value for key, value in read_results(out)["results"]["pdd_codec"].items() if key != "alias"}


@pytest.fixture(scope="module")
def local_tasks(tmp_path_factory):
    return standard_tasks(tmp_path_factory.mktemp("standard-tasks"))


# -- stock tasks offline ---------------------------------------------------------------------------


def test_stock_multiple_choice_task_runs_from_local_files(tiny_model, local_tasks, tmp_path):
    args = harness_args(cpu_float32(tiny_model), "arc_easy_local", tmp_path / "out", include=local_tasks, device="cpu")
    run_lm_eval(args, cwd=tmp_path)
    results = read_results(tmp_path / "out")["results"]["arc_easy_local"]
    assert 0 <= results["acc,none"] <= 1 and 0 <= results["acc_norm,none"] <= 1
    samples = read_samples(tmp_path / "out", "arc_easy_local")
    assert len(samples) == 24 and all(
        len(sample["resps"]) == len(sample["doc"]["choices"]["text"]) for sample in samples
    )
    assert samples[0]["arguments"]["gen_args_0"]["arg_0"].startswith("Question: A box holds")


def test_stock_generate_until_task_runs_from_local_files(tiny_model, local_tasks, tmp_path):
    args = harness_args(
        cpu_float32(tiny_model), "gsm8k_local", tmp_path / "out", include=local_tasks, device="cpu", limit=3
    )
    run_lm_eval([*args, "--gen_kwargs", "max_gen_toks=4"], cwd=tmp_path)
    results = read_results(tmp_path / "out")["results"]["gsm8k_local"]
    assert {"exact_match,strict-match", "exact_match,flexible-extract"} <= set(results)
    prompt = read_samples(tmp_path / "out", "gsm8k_local")[0]["arguments"]["gen_args_0"]["arg_0"]
    assert prompt.count("Question:") == 6  # the stock 5-shot prompt, from the local train split


# -- pdd_codec ---------------------------------------------------------------------------------------


def test_codec_on_a_stock_task_by_name(tiny_model, local_tasks, tmp_path):
    """Deltas in --log_samples are the in-context minus the baseline log-likelihood of the same
    continuation; the score is the share of negative ones; the examples are the task's rendered docs."""
    run_codec(tiny_model, tmp_path / "out", {"source_task": "arc_easy_local", "source_include_path": str(local_tasks)})
    result = metrics(tmp_path / "out")
    samples = sorted(read_samples(tmp_path / "out", "pdd_codec"), key=lambda sample: sample["doc"]["example"])
    assert result["codec_examples,none"] == len(samples) == 24
    deltas = [sample["codec_score"] for sample in samples]
    for sample, delta in zip(samples, deltas, strict=True):
        baseline, in_context = (float(resp[0][0]) for resp in sample["resps"])
        assert delta == pytest.approx(in_context - baseline)
        assert sample["arguments"]["gen_args_1"]["arg_0"].endswith("\n\n" + sample["doc"]["prefix"])
        assert sample["arguments"]["gen_args_0"]["arg_0"] == sample["doc"]["prefix"]
        assert sample["doc"]["example"] not in sample["doc"]["context_examples"]
    assert result["codec_score,none"] == pytest.approx(sum(delta < 0 for delta in deltas) / 24)
    assert result["codec_score_stderr,none"] == pytest.approx(
        (result["codec_score,none"] * (1 - result["codec_score,none"]) / 24) ** 0.5
    )
    assert result["codec_score_ci95_low,none"] <= result["codec_score,none"] <= result["codec_score_ci95_high,none"]
    from pdd_tasks.tools.report.tables import left_out

    ((task, why),) = left_out(read_results(tmp_path / "out"))
    assert task == "pdd_codec" and "CoDeC" in why and "of 24" in why
    # each example as arc_easy renders it: "Question: {question}\nAnswer:" + " " + the gold choice
    assert samples[0]["doc"]["prefix"].startswith("Question: A box holds ")
    assert len(samples[0]["doc"]["prefix"].split()) == 8
    assert "?\nAnswer: " in samples[0]["doc"]["continuation"]


def test_codec_deltas_match_the_model_computed_here(tiny_model, tmp_path):
    """The first two examples' Delta recomputed with transformers: the continuation's summed
    log-probs after the context, with and without the in-context example."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    texts = [f"Example number {i} says that the river runs past the old mill towards the sea." for i in range(6)]
    data = write_jsonl(tmp_path / "texts.jsonl", texts)
    run_codec(tiny_model, tmp_path / "out", {"data_files": str(data)})
    samples = sorted(read_samples(tmp_path / "out", "pdd_codec"), key=lambda sample: sample["doc"]["example"])
    assert len(samples) == len(texts)  # one document per example: the two checked below exist
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    model = AutoModelForCausalLM.from_pretrained(tiny_model).eval()

    def continuation_logprob(context: str, continuation: str) -> float:
        context_ids = tokenizer(context).input_ids
        ids = tokenizer(context + continuation).input_ids
        with torch.no_grad():
            logprobs = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), dim=-1)
        return float(sum(logprobs[i - 1, ids[i]] for i in range(len(context_ids), len(ids))))

    for sample in samples[:2]:
        doc = sample["doc"]
        assert (doc["prefix"], doc["continuation"]) == split_after_words(texts[doc["example"]], 8)
        (other,) = doc["context_examples"]
        expected = continuation_logprob(texts[other] + "\n\n" + doc["prefix"], doc["continuation"])
        expected -= continuation_logprob(doc["prefix"], doc["continuation"])
        assert sample["codec_mean_delta"] == pytest.approx(expected, abs=1e-3)


def test_codec_is_deterministic_with_its_seed(tiny_model, tmp_path):
    texts = [f"Line {i}: the quick brown fox number {i} jumps over {i * 3} lazy dogs today." for i in range(12)]
    data = write_jsonl(tmp_path / "texts.jsonl", texts)

    def contexts(name, seed):
        run_codec(tiny_model, tmp_path / name, {"data_files": str(data), "seed": seed})
        samples = sorted(read_samples(tmp_path / name, "pdd_codec"), key=lambda sample: sample["doc"]["example"])
        return [sample["doc"]["context_examples"] for sample in samples], metrics(tmp_path / name)

    first, second, other = contexts("a", 3), contexts("b", 3), contexts("c", 4)
    assert first == second
    assert first[0] != other[0]


@pytest.fixture(scope="module")
def start_token_models(trained_tiny, tmp_path_factory):
    """Two tiny GPT-2s (seed 2) whose tokenizer adds a start token ``<s>``, as Llama's does: one
    trained (support.models' train_on: 300 steps) on trained_tiny's 24 member texts, each after ``<s>``,
    and the same network untouched. With this tokenizer both CoDeC requests begin with ``<s>``, as the
    texts did in training (and as the reference code's requests do for such a tokenizer)."""
    import shutil

    untouched = build_bos_model(tmp_path_factory.mktemp("codec-untouched"), seed=2)
    trained = Path(shutil.copytree(untouched, tmp_path_factory.mktemp("codec-trained") / "model"))
    train_on(trained, trained_tiny["members"], steps=300)
    return {"trained": trained, "untouched": untouched, "members": trained_tiny["members"]}


def test_a_model_trained_on_the_examples_scores_higher(start_token_models, tmp_path):
    """The trained model saw each member text 300 times; the untouched one never did. Context from
    the same texts lowers the trained model's likelihood of most of them (the paper's signature of
    memorisation), and far more often than the untouched model's."""
    data = write_jsonl(tmp_path / "members.jsonl", start_token_models["members"])
    run_codec(start_token_models["trained"], tmp_path / "trained", {"data_files": str(data)})
    run_codec(start_token_models["untouched"], tmp_path / "untouched", {"data_files": str(data)})
    trained, untouched = metrics(tmp_path / "trained"), metrics(tmp_path / "untouched")
    assert trained["codec_examples,none"] == untouched["codec_examples,none"] == 24
    assert trained["codec_score,none"] > untouched["codec_score,none"]
    assert trained["codec_score_ci95_low,none"] > untouched["codec_score_ci95_high,none"]


def test_without_the_start_token_it_was_trained_after_the_same_model_is_not_flagged(trained_tiny, tmp_path):
    """A limit, stated in the docs: trained_tiny saw each member text after its start token, but its
    tokenizer (as GPT-2's) adds none, so neither request starts as the training texts did; the
    baseline loses more than the in-context request and context *raises* most texts' likelihood."""
    data = write_jsonl(tmp_path / "members.jsonl", trained_tiny["members"])
    run_codec(trained_tiny["model"], tmp_path / "out", {"data_files": str(data)})
    assert metrics(tmp_path / "out")["codec_score,none"] < 0.25


def test_too_short_examples_are_counted_not_silently_dropped(tiny_model, tmp_path, caplog):
    texts = ["one two three", "four five six"] + [f"a longer example number {i} with words to score after eight" for i in range(5)]  # fmt: skip
    data = write_jsonl(tmp_path / "texts.jsonl", texts)
    run_codec(tiny_model, tmp_path / "out", {"data_files": str(data)})
    assert metrics(tmp_path / "out")["codec_examples,none"] == 5
    config = read_results(tmp_path / "out")["configs"]["pdd_codec"]["metadata"]["codec_source"]
    assert (config["examples"], config["scored"], config["too_short"]) == (7, 5, 2)


def test_the_task_is_indexed():
    from lm_eval.tasks import TaskManager

    assert "pdd_codec" in TaskManager(include_path=str(CONFIGS)).all_subtasks


@pytest.mark.parametrize(
    "metadata, message",
    [
        ({}, "exactly one source of examples"),
        ({"data_files": "a.jsonl", "source_task": "arc_easy"}, "exactly one source of examples"),
        ({"data_files": "a.jsonl", "context_examples": 0}, "context_examples=0: expected a whole number >= 1"),
        ({"data_files": "a.jsonl", "skip_words": 0}, "skip_words=0"),
        ({"data_files": "a.jsonl", "seed": -1}, "seed=-1"),
        ({"data_files": "a.jsonl", "separator": ""}, "separator=''"),
        ({"data_files": "a.jsonl", "max_examples": 0}, "max_examples=0: expected a whole number >= 1"),
        ({"data_files": "a.jsonl", "max_chars": "long"}, "max_chars='long'"),
    ],
)
def test_bad_settings_are_refused(metadata, message):
    with pytest.raises(UserError, match=message):
        build_task("codec", metadata)


def test_too_few_examples_is_a_clear_error(tiny_model, tmp_path):
    data = write_jsonl(tmp_path / "one.jsonl", ["a single example with more than eight words in it, really"])
    process = run_codec(tiny_model, tmp_path / "out", {"data_files": str(data)}, check=False)
    assert process.returncode == 1 and "Traceback" not in process.stderr
    assert "CodecError" in process.stderr and "1 example(s) are too few" in process.stderr


def test_a_pdd_task_as_source_task_is_refused(tiny_model, tmp_path):
    process = run_codec(
        tiny_model,
        tmp_path / "out",
        {"source_task": "pdd_wikimia_32", "source_include_path": str(CONFIGS)},
        check=False,
    )
    assert process.returncode == 1 and "Traceback" not in process.stderr, process.stderr[-3000:]
    assert "source_task 'pdd_wikimia_32' is a pdd task" in process.stderr
