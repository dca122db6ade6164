"""``make-ordered --exposure``: the training texts of each exposure (issue 33), with a tiny model.

The controls of the contamination tests need a model that has seen a file in a known way: each
example its own training text (how the CoDeC authors' notebook contaminates), blocks of consecutive
examples in the file's order (a copy of the file in a corpus), or blocks in a random order. The
command writes the training texts it tuned on (``training.jsonl``); these tests read them.
"""

from __future__ import annotations

import json

import pytest
from support.harness import run_lm_eval_pdd, wikimia_rows

from pdd_tasks.tools.builders.ordered import training_texts


def examples(n: int) -> list[str]:
    return [" ".join(row["input"].split()[:6]) for row in wikimia_rows(32)[:n]]


def lines(path, field="text") -> list[str]:
    return [json.loads(line)[field] for line in path.read_text().splitlines()]


@pytest.mark.parametrize("exposure", ["examples", "ordered", "shuffled"])
def test_each_exposure_tunes_on_the_texts_it_names(tiny_model, tmp_path, exposure):
    data = tmp_path / "bench.jsonl"
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in examples(12)))
    output = tmp_path / exposure
    made = run_lm_eval_pdd(
        ["make-ordered", "--model", str(tiny_model), "--data", str(data), "--examples", "10", "--block-examples", "4",
         "--epochs", "2", "--batch-size", "3", "--exposure", exposure, "--no-progress", "--output", str(output)]
    )  # fmt: skip
    assert made.returncode == 0, made.stderr[-2000:]
    file = examples(10)
    trained = lines(output / "training.jsonl")
    manifest = json.loads((output / "manifest.json").read_text())
    assert lines(output / "canonical.jsonl") == file
    assert manifest["exposure"] == exposure and manifest["blocks"] == len(trained)
    if exposure == "examples":  # each example alone: 10 texts, 4 steps of 3 an epoch
        assert trained == file and manifest["training"]["steps"] == 2 * 4
    else:  # blocks of 4, 4 and 2 examples joined by the separator: 1 step of 3 an epoch
        assert [len(block.split("\n")) for block in trained] == [4, 4, 2] and manifest["training"]["steps"] == 2
        joined = [example for block in trained for example in block.split("\n")]
        assert sorted(joined) == sorted(file)
        assert (joined == file) is (exposure == "ordered")
    # the start token: before every block (as lm-eval scores a whole text); before an example alone only
    # where the tokenizer adds one (as CoDeC's requests encode it), and the tiny GPT-2's adds none
    if exposure == "examples":
        assert manifest["start_token"] == {"id": None, "text": None, "how": "as the tokenizer adds it"}
    else:
        assert (manifest["start_token"]["text"], manifest["start_token"]["how"]) == ("<|endoftext|>", "always")
    # the tokens trained on say the same: every token of a text predicted, less the first where nothing
    # precedes it (2 epochs)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(output / "model")
    lengths = [len(tokenizer(text, add_special_tokens=False).input_ids) for text in trained]
    expected = sum(lengths) - len(lengths) if exposure == "examples" else sum(lengths)
    assert manifest["training"]["trained_tokens"] == 2 * expected


def test_training_texts_refuses_an_unknown_exposure():
    with pytest.raises(ValueError, match="exposure must be one of"):
        training_texts(["a", "b"], "interleaved", 2, "\n", 0)
    assert training_texts(list("abcdefgh"), "shuffled", 3, "", 1) != training_texts(
        list("abcdefgh"), "ordered", 3, "", 1
    )


@pytest.mark.parametrize("exposure", ["examples", "ordered"])
def test_a_tokenizer_that_adds_a_start_token_trains_each_example_after_it(tiny_llama, tmp_path, exposure):
    """With a start token added by the tokenizer (Llama, Gemma), an example alone is trained after it,
    as lm-eval encodes CoDeC's requests for that model; a block is after it too (``tiny_llama``: a
    tokenizer that adds ``<s>``)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_llama)
    start = tokenizer.bos_token_id
    assert tokenizer("a b").input_ids[0] == start is not None  # the fixture is what it claims
    data = tmp_path / "bench.jsonl"
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in examples(8)))
    output = tmp_path / exposure
    made = run_lm_eval_pdd(
        ["make-ordered", "--model", str(tiny_llama), "--data", str(data), "--examples", "8", "--block-examples", "4",
         "--epochs", "1", "--batch-size", "4", "--exposure", exposure, "--no-progress", "--output", str(output)]
    )  # fmt: skip
    assert made.returncode == 0, made.stderr[-2000:]
    manifest = json.loads((output / "manifest.json").read_text())
    how = "as the tokenizer adds it" if exposure == "examples" else "always"
    assert manifest["start_token"] == {"id": start, "text": "<s>", "how": how}
    # every token of each text is predicted after the start token: as many trained tokens as text tokens
    trained = lines(output / "training.jsonl")
    assert manifest["training"]["trained_tokens"] == sum(
        len(tokenizer(text, add_special_tokens=False).input_ids) for text in trained
    )
