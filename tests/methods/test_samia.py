"""SaMIA: the score against the authors' formula (nlp-titech/samia, ``src/eval_samia.py``) on the same
inputs, its settings and requests, and an lm_eval run whose generations are seeded per text and sample."""

from __future__ import annotations

import doctest
import zlib
from collections import Counter

import numpy as np
import pytest
import torch
from lm_eval.api.instance import Instance
from lm_eval.api.model import CachingLM
from lm_eval.models.huggingface import HFLM
from support.harness import cpu_float32, harness_args, read_samples, run_lm_eval
from transformers import AutoModelForCausalLM, AutoTokenizer

import pdd_metrics.samia
from pdd_metrics import samia_score, samia_split
from pdd_tasks import lm_eval_patches
from pdd_tasks.registry import METHODS, SamiaTextError, ScoringSettings, SettingError, generation_requests


def authors_rouge_n(candidate: list, reference: list, n: int = 1) -> float:
    """``rouge_n`` of the authors' ``eval_samia.py`` (recall of the reference's n-grams), rewritten."""
    if not candidate or not reference:
        return 0

    def ngrams(words):
        return Counter(zip(*[words[i:] for i in range(n)], strict=False))

    overlap = ngrams(reference) & ngrams(candidate)
    return sum(overlap.values()) / len(reference)


def authors_samia(text: str, outputs: list[str], zlib_weighted: bool) -> float:
    """The authors' score of one text: its words after half of them (``get_suffix``, words split on
    " "), each output's words (here the continuation alone: the authors drop the prefix's words from
    the decoded prompt + output), ROUGE-1 recall, times the output's zlib size with ``--zlib``, averaged."""
    words = [word for word in text.split(" ") if word != ""]
    reference = words[round(len(words) * 0.5) :]
    scores = []
    for output in outputs:
        candidate = [word for word in output.split(" ") if word != ""]
        score = authors_rouge_n(candidate, reference, n=1)
        if zlib_weighted:
            score *= len(zlib.compress(" ".join(candidate).encode("utf-8")))
        scores.append(score)
    return float(np.array(scores).mean())


def test_doctests():
    result = doctest.testmod(pdd_metrics.samia)
    assert result.attempted > 0 and result.failed == 0  # examples dropped fail too


WORDS = "the The cat sat on a mat, Paris Paris. 1912 in of and é 東京".split()


@pytest.mark.parametrize("zlib_weighted", [False, True])
@pytest.mark.parametrize("seed", range(12))
def test_samia_equals_the_authors_formula(seed, zlib_weighted):
    """Texts of an even number of words (the authors' prefix is int(n/2) words, their reference starts
    at round(n/2)), outputs with repeats, case, punctuation and non-ASCII words."""
    rng = np.random.default_rng(seed)
    text = " ".join(rng.choice(WORDS, size=2 * int(rng.integers(1, 10))))
    outputs = [" ".join(rng.choice(WORDS, size=int(rng.integers(0, 25)))) for _ in range(int(rng.integers(1, 6)))]
    _, reference = samia_split(text, 0.5)
    expected = authors_samia(text, outputs, zlib_weighted)
    assert samia_score(reference, outputs, zlib_weighted=zlib_weighted) == pytest.approx(expected, rel=1e-12)


def test_rouge_is_recall_over_the_reference_words_with_case_and_punctuation():
    assert samia_score("Paris is in France.", ["paris is in France"]) == 0.5  # "is", "in"; not "Paris", "France."
    assert samia_score("a a b", ["a b b b"]) == pytest.approx(2 / 3)  # each word counted at most as often as in both
    assert samia_score("a b", [""]) == 0.0
    assert samia_score("a b", ["a b"], zlib_weighted=True) == len(zlib.compress(b"a b"))


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("a", []), "at least one generated continuation"),
        (("a", "a b"), "at least one generated continuation"),
        (("  ", ["a"]), "reference: got an empty text"),
    ],
)
def test_samia_score_refuses_what_it_cannot_score(arguments, message):
    with pytest.raises(ValueError, match=message):
        samia_score(*arguments)


def test_split_keeps_a_word_on_each_side():
    assert samia_split("a b c d e", 0.5) == ("a b", "c d e")  # floor(2.5) = 2, as the authors' get_prefix
    assert samia_split("a\nb  c", 0.9) == ("a b", "c")  # floor(2.7) = 2; whitespace runs become one space
    assert samia_split("a b", 0.99) == ("a", "b")
    with pytest.raises(ValueError, match="at least two words"):
        samia_split("word", 0.5)
    with pytest.raises(ValueError, match=r"prefix_ratio must be in \(0, 1\)"):
        samia_split("a b", 1.0)


def test_off_by_default_its_requests_seeded_per_text_and_sample_and_its_label():
    assert "samia" not in ScoringSettings().methods
    settings = ScoringSettings.from_metadata({"samia": True, "samia_samples": 3, "samia_max_tokens": 16})
    requests = generation_requests("one two three four five", settings)
    assert [(name, context) for name, context, _ in requests] == [("samia", "one two")] * 3
    kwargs = [gen_kwargs for _, _, gen_kwargs in requests]
    assert {k: v for k, v in kwargs[0].items() if k != "seed"} == {
        "until": [],
        "max_gen_toks": 16,
        "do_sample": True,
        "temperature": 1.0,
        "top_k": 50,
        "top_p": 1.0,
    }
    seeds = [gen_kwargs["seed"] for gen_kwargs in kwargs]
    assert len(set(seeds)) == 3  # distinct requests: no --use_cache entry answers two samples
    assert seeds == [k["seed"] for _, _, k in generation_requests("one two three four five", settings)]
    assert seeds != [k["seed"] for _, _, k in generation_requests("one two three four six", settings)]
    other_seed = ScoringSettings.from_metadata({"samia": True, "samia_samples": 3, "samia_seed": 1})
    assert seeds != [k["seed"] for _, _, k in generation_requests("one two three four five", other_seed)]
    assert METHODS["samia"].label(settings) == "SaMIA (m=3, prefix 0.5)"
    assert METHODS["samia"].label(ScoringSettings.from_metadata({"samia": True, "samia_zlib": True})) == (
        "SaMIA*zlib (m=10, prefix 0.5)"
    )


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ({"samia": True, "samia_prefix_ratio": 1}, r"samia_prefix_ratio=1: expected a fraction in \(0, 1\)"),
        ({"samia": True, "samia_samples": 0}, r"samia_samples=0: expected a whole number >= 1"),
        ({"samia": "yes"}, r"samia='yes': expected true or false"),
    ],
)
def test_bad_settings_name_the_key(metadata, message):
    with pytest.raises(SettingError, match=message):
        ScoringSettings.from_metadata(metadata)


def test_a_one_word_text_is_refused_with_the_fix():
    settings = ScoringSettings.from_metadata({"samia": True})
    with pytest.raises(SamiaTextError, match="at least two words.*run without SaMIA"):
        generation_requests("Hello", settings)


def direct_generation(model, tokenizer, prefix: str, gen_kwargs: dict) -> str:
    """The continuation of ``prefix`` sampled token by token without ``generate``: each step one full
    forward pass of prefix + tokens so far (no key-value cache), the top-k logits kept, softmax at the
    temperature, one ``torch.multinomial`` draw from a generator seeded with the request's seed; until
    the end-of-text token or ``max_gen_toks`` tokens."""
    assert gen_kwargs["top_p"] == 1.0
    tokens = tokenizer(prefix, add_special_tokens=False).input_ids
    generator = torch.Generator().manual_seed(gen_kwargs["seed"])
    new = []
    with torch.no_grad():
        for _ in range(gen_kwargs["max_gen_toks"]):
            logits = model(torch.tensor([tokens + new])).logits[0, -1].float() / gen_kwargs["temperature"]
            kth = torch.topk(logits, gen_kwargs["top_k"]).values[-1]
            probs = torch.softmax(logits.masked_fill(logits < kth, -float("inf")), dim=-1)
            new.append(int(torch.multinomial(probs, 1, generator=generator)))
            if new[-1] == tokenizer.eos_token_id:
                break
    return tokenizer.decode(new).split(tokenizer.eos_token)[0]


def test_lm_eval_run_samples_each_continuation_under_its_seed(tiny_model, tiny_table, tmp_path):
    """Through lm_eval (--model hf, in-process, batch size 2): the generate_until requests continue each
    text's first half; a text's 3 continuations are sampled in batches of 2 (patch hf-seeded-generation),
    yet each is what the token-by-token sampler draws from that prefix alone under the request's seed
    (so it depends on neither the batch nor the order); the logged score is the authors' formula on
    those continuations."""
    metadata = {"freq_table": str(tiny_table), "lowercase": False, "samia": True, "samia_samples": 3}
    metadata |= {"samia_max_tokens": 6}
    out = tmp_path / "out"
    args = harness_args(cpu_float32(tiny_model), "pdd_wikimia_32", out, batch_size=2, metadata=metadata, limit=2)
    run_lm_eval([*args, "--device", "cpu"], cwd=tmp_path)
    model = AutoModelForCausalLM.from_pretrained(tiny_model).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    samples = read_samples(out, "pdd_wikimia_32")
    assert len(samples) == 2
    for sample in samples:
        text = sample["doc"]["text"]
        requested = list(sample["arguments"].values())[-3:]
        generated = [resp[0] for resp in sample["resps"][-3:]]
        assert [argument["arg_0"] for argument in requested] == [samia_split(text)[0]] * 3
        assert len(set(generated)) == 3
        for argument, continuation in zip(requested, generated, strict=True):
            assert direct_generation(model, tokenizer, argument["arg_0"], argument["arg_1"]) == continuation
        assert sample["samia_auc"][0] == pytest.approx(authors_samia(text, generated, zlib_weighted=False))


def test_hf_samples_seeded_requests_together_and_leaves_the_others_to_the_stock_method(tiny_model, tmp_path):
    """One HFLM.generate_until call (batch size 2) with two texts' seeded requests and a stock greedy
    request between them: each seeded answer is the token-by-token sampler's under its seed, the greedy
    one is the stock method's answer, all in request order. Under lm-eval's --use_cache (which stores no
    sampled request) a second run samples them again, to the same texts."""
    lm = HFLM(pretrained=str(tiny_model), dtype="float32", device="cpu", batch_size=2)
    lm_eval_patches.apply()
    settings = ScoringSettings.from_metadata({"samia": True, "samia_samples": 3, "samia_max_tokens": 5})
    first, second = (generation_requests(text, settings) for text in ("one two three four", "five six seven eight"))
    greedy = ("one two", {"until": ["\n"], "do_sample": False, "max_gen_toks": 4})
    arguments = [(c, k) for _, c, k in first[:2]] + [greedy] + [(c, k) for _, c, k in first[2:] + second]
    requests = [Instance("generate_until", {}, args, i) for i, args in enumerate(arguments)]
    answers = lm.generate_until(requests, disable_tqdm=True)
    seeding = lm_eval_patches.PATCHES["hf-seeded-generation"]
    with seeding.suspended():
        assert answers[2] == lm.generate_until([requests[2]], disable_tqdm=True)[0]
    model, tokenizer = lm.model, lm.tokenizer
    for i in (0, 1, 3, 4, 5, 6):
        assert answers[i] == direct_generation(model, tokenizer, *arguments[i])
    assert len(set(answers[:2] + answers[3:])) == 6
    cache = str(tmp_path / "cache.db")
    assert CachingLM(lm, cache).generate_until(requests) == answers
    assert CachingLM(lm, cache).generate_until(requests) == answers
