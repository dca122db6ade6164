"""An eval and ``pdd_contamination`` in one ``lm_eval`` run share forward passes (a request is answered from
the longest pass of its call that holds its tokens: patch ``hf-shared-passes``) and are answered as alone;
CoDeC's ``share_passes`` switch (tiny GPT-2, real command line)."""

from __future__ import annotations

import math

import pytest
from lm_eval.api.instance import Instance
from lm_eval.models.huggingface import HFLM
from support.harness import REPO, cpu_float32, harness_args, read_results, read_samples, run_lm_eval
from support.standard_tasks import standard_tasks

from pdd_tasks import lm_eval_patches
from pdd_tasks.dataset_tests.codec import split_after_words


@pytest.fixture(scope="module")
def tasks_dir(tmp_path_factory):
    """The local ARC-shaped task, and pdd_contamination's YAML beside it (one --include_path)."""
    directory = standard_tasks(tmp_path_factory.mktemp("shared-passes"))
    (directory / "pdd_contamination.yaml").write_text(
        f"include: {REPO / 'task_configs' / 'contamination' / 'pdd_contamination.yaml'}\n"
    )
    return directory


def _forwarding(monkeypatch) -> list[list[int]]:
    """The rows of each model call from now on (HFLM._model_call watched, nothing changed)."""
    calls: list[list[int]] = []
    stock_call = HFLM._model_call

    def counting(self, inps, *args, **kwargs):
        calls.append(inps.shape[0])
        return stock_call(self, inps, *args, **kwargs)

    monkeypatch.setattr(HFLM, "_model_call", counting)
    return calls


QUESTION = 'Question: Which word fills the blank in "the cat sat on the ____"?\nAnswer:'


def test_each_request_is_answered_from_the_longest_pass_that_holds_it_as_alone(tiny_model, monkeypatch):
    """An eval's gold request, CoDeC's no-context request of the same question (the same tokens split
    elsewhere), a one-token choice and the in-context request that has the question as its context example:
    forwarded in one pass, each answered as alone (float rounding: a pass of another length), is_greedy too.
    A request cut to the window shares nothing. Stock lm-eval forwards more passes (and, for the first two,
    read the eval's answer at CoDeC's first positions)."""
    lm_eval_patches.apply()
    lm = HFLM(pretrained=str(tiny_model), batch_size=4, device="cpu", dtype="float32", max_length=96)
    first_words, rest = split_after_words(QUESTION + " mat", 8)
    target_words, target_rest = split_after_words("The dog lay down on the rug by the door of the house.", 8)
    requests = [
        Instance("loglikelihood", {}, (QUESTION, " mat"), 0),
        Instance("loglikelihood", {}, (first_words, rest), 1),
        Instance("loglikelihood", {}, (QUESTION, " a"), 2),
        Instance("loglikelihood", {}, (QUESTION + " mat\n\n" + target_words, target_rest), 3),
        Instance("loglikelihood", {}, ("word " * 100, " end"), 4),  # cut to the 96-token window
    ]
    alone = [lm.loglikelihood([request])[0] for request in requests]
    rows = _forwarding(monkeypatch)
    together = lm.loglikelihood(requests)
    assert sum(rows) == 2  # the in-context request's pass, and the cut one
    for (value, greedy), (value_alone, greedy_alone) in zip(together, alone, strict=True):
        assert value == pytest.approx(value_alone, rel=1e-5, abs=1e-5)
        assert greedy == greedy_alone
    rows.clear()
    with lm_eval_patches.PATCHES["hf-shared-passes"].suspended():
        stock = lm.loglikelihood(requests)
    assert sum(rows) == 4  # the logits cache joins only the same inputs (the gold and CoDeC's no-context)
    assert stock[0][0] != pytest.approx(alone[0][0], rel=1e-3)  # and reads the gold at CoDeC's first positions


def test_rolling_requests_and_the_automatic_batch_size_are_answered_as_stock(tiny_model):
    """loglikelihood_rolling (windows with no request string of their own) and --batch_size auto (lm-eval's
    batch-size probe on the longest request) take the same path: the same answers as the stock method."""
    lm_eval_patches.apply()
    lm = HFLM(pretrained=str(tiny_model), batch_size="auto", device="cpu", dtype="float32", max_length=32)
    text = " ".join(f"word{i}" for i in range(80))
    rolling = [
        Instance("loglikelihood_rolling", {}, (text,), 0),
        Instance("loglikelihood_rolling", {}, (text[:60],), 1),
    ]
    ours = lm.loglikelihood_rolling(rolling) + [a for a, _ in lm.loglikelihood([Instance("loglikelihood", {}, (QUESTION, " mat"), 0)])]  # fmt: skip
    with lm_eval_patches.PATCHES["hf-shared-passes"].suspended():
        stock = lm.loglikelihood_rolling(rolling) + [a for a, _ in lm.loglikelihood([Instance("loglikelihood", {}, (QUESTION, " mat"), 0)])]  # fmt: skip
    assert ours == pytest.approx(stock, rel=1e-5, abs=1e-5)


def _run(tiny_model, tasks_dir, out, tasks: str, metadata: dict | None, monkeypatch) -> tuple[dict, int]:
    """One run; its results and how many rows the model forwarded."""
    rows = []
    stock_call = HFLM._model_call

    def counting(self, inps, *args, **kwargs):
        rows.append(inps.shape[0])
        return stock_call(self, inps, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(HFLM, "_model_call", counting)
        args = harness_args(cpu_float32(tiny_model), tasks, out, include=tasks_dir, device="cpu", batch_size=1, metadata=metadata)  # fmt: skip
        run_lm_eval(args, cwd=out.parent)
    return read_results(out), sum(rows)


def _eval_answers(out) -> dict:
    return {
        sample["doc_id"]: [float(resp[0][0]) for resp in sample["resps"]]
        for sample in read_samples(out, "arc_easy_local")
    }


def _deltas(out) -> dict:
    return {
        sample["doc"]["example"]: sample["codec_score/arc_easy_local"]
        for sample in read_samples(out, "pdd_contamination")
        if sample["doc"]["test"] == "codec"
    }


def test_the_check_beside_its_eval_forwards_each_question_once_with_the_same_scores(
    tiny_model, tasks_dir, tmp_path, monkeypatch
):
    base = {
        "source_tasks": ["arc_easy_local"],
        "source_include_path": str(tasks_dir),
        "exchangeability": {"num_shards": 12, "permutations": 2},
    }
    _, eval_rows = _run(tiny_model, tasks_dir, tmp_path / "eval", "arc_easy_local", None, monkeypatch)
    runs = {}
    for share in (True, False):
        metadata = {**base, "codec": {"share_passes": share}}
        runs[share] = _run(tiny_model, tasks_dir, tmp_path / str(share), "arc_easy_local,pdd_contamination", metadata, monkeypatch)  # fmt: skip
    (shared, shared_rows), (apart, apart_rows) = runs[True], runs[False]
    # with batch size 1 a row is a pass: each CoDeC example's no-context request rides on the eval's pass of
    # its question with the gold answer (apart, only where it is another example's context), and the eval's
    # pass of a question on the in-context request that has it as its context example
    examples = int(shared["results"]["pdd_contamination"]["codec_examples/arc_easy_local,none"])
    assert examples == 24
    assert apart_rows - shared_rows >= examples
    assert shared_rows > eval_rows
    # the eval's answers: as alone, with the check beside it, shared or not (float rounding at most)
    alone = _eval_answers(tmp_path / "eval")
    for share in (True, False):
        beside = _eval_answers(tmp_path / str(share))
        assert beside.keys() == alone.keys()
        for doc_id, answers in alone.items():
            assert beside[doc_id] == pytest.approx(answers, rel=1e-5, abs=1e-5)
    # the check: every example's Delta and its sign (CoDeC's indicator), and every value of the results
    on, off = _deltas(tmp_path / "True"), _deltas(tmp_path / "False")
    assert on.keys() == off.keys() and len(on) == examples
    for example, delta in on.items():
        assert delta == pytest.approx(off[example], rel=1e-5, abs=1e-5)
        assert (delta < 0) == (off[example] < 0)
    values_on, values_off = (run["results"]["pdd_contamination"] for run in (shared, apart))
    assert values_on.keys() == values_off.keys()
    for key, value in values_on.items():
        if isinstance(value, float) and not math.isnan(value):
            assert value == pytest.approx(values_off[key], rel=1e-6, abs=1e-9), key
    assert values_on["codec_score/arc_easy_local,none"] == values_off["codec_score/arc_easy_local,none"]
    assert values_on["exchangeability_pvalue/arc_easy_local,none"] == values_off["exchangeability_pvalue/arc_easy_local,none"]  # fmt: skip
