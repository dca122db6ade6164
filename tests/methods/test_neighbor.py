"""The Neighbor attack (Mattern et al. 2023): neighbours from masked LMs built in fixtures (a
WordPiece BERT and a byte-level BPE RoBERTa), the score, the settings, and a run through ``lm_eval``."""

from __future__ import annotations

import doctest
import re

import numpy as np
import pytest
import torch
from support.harness import cpu_float32, harness_args, read_samples, run_lm_eval, wikimia_rows
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
)

import pdd_metrics.neighbor
import pdd_tasks.prepare.neighbors
from pdd_metrics import loss_score, neighbor_score
from pdd_tasks import registry
from pdd_tasks.prepare.neighbors import MaskedLMError, NeighborGenerator
from pdd_tasks.registry import ScoringSettings, SettingError


TEXTS = [row["input"] for row in wikimia_rows(32)]


@pytest.fixture(params=["bert", "roberta"])
def mlm(request, bert_mlm, roberta_mlm):
    return bert_mlm if request.param == "bert" else roberta_mlm


def words_and_gaps(text):
    return re.findall(r"\w+", text), re.split(r"\w+", text)


# -- the score -----------------------------------------------------------------------------------


def test_score_is_mean_logprob_minus_the_neighbours_mean():
    # text: mean(-1, -3) = -2; neighbours: mean(-2, -3) = -2.5 and mean(-4, -3, -3.5) = -3.5, mean -3.
    assert neighbor_score(np.array([-1.0, -3.0]), [np.array([-2.0, -3.0]), np.array([-4.0, -3.0, -3.5])]) == 1.0
    assert neighbor_score(np.array([-2.0]), [np.array([-2.0])]) == 0.0
    for module in (pdd_metrics.neighbor, pdd_tasks.prepare.neighbors):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__  # examples dropped fail too


@pytest.mark.parametrize(
    "neighbours, message",
    [
        ([], "at least one neighbour"),
        (np.array([-1.0, -2.0]), "one array per neighbour"),
        ([np.array([-1.0, np.nan])], r"neighbor_token_logprobs\[0\] has 1 non-finite"),
        ([np.array([-1.0]), np.array([])], r"neighbor_token_logprobs\[1\]: got 0 tokens"),
    ],
)
def test_score_refuses_what_it_cannot_score(neighbours, message):
    with pytest.raises(ValueError, match=message):
        neighbor_score(np.array([-1.0]), neighbours)


# -- the neighbours ------------------------------------------------------------------------------


def test_neighbours_are_deterministic_whatever_the_order_of_the_texts(mlm):
    texts = TEXTS[:6]
    forward = NeighborGenerator(str(mlm), count=6, seed=3)
    first = [forward.neighbors(t) for t in texts]
    backward = NeighborGenerator(str(mlm), count=6, seed=3)
    second = [backward.neighbors(t) for t in reversed(texts)][::-1]
    assert first == second
    other_seed = NeighborGenerator(str(mlm), count=6, seed=4)
    assert [other_seed.neighbors(t) for t in texts] != first  # the dropout masks differ


@pytest.mark.parametrize("words", [1, 2, 3])
def test_each_neighbour_differs_in_the_requested_number_of_words(mlm, words):
    generator = NeighborGenerator(str(mlm), count=8, words=words)
    for text in TEXTS[:5]:
        neighbours = generator.neighbors(text)
        assert len(neighbours) == 8 and len(set(neighbours)) == 8 and text not in neighbours
        original_words, original_gaps = words_and_gaps(text)
        for neighbour in neighbours:
            new_words, new_gaps = words_and_gaps(neighbour)
            assert new_gaps == original_gaps  # punctuation and whitespace are the text's own
            assert sum(a != b for a, b in zip(original_words, new_words, strict=True)) == words


def test_a_short_text_has_as_many_neighbours_as_it_has_candidates(bert_mlm):
    generator = NeighborGenerator(str(bert_mlm), count=25)
    neighbours = generator.neighbors("Music.")  # one word, 5 candidates
    assert 1 <= len(neighbours) <= pdd_tasks.prepare.neighbors.CANDIDATES_PER_POSITION
    with pytest.raises(MaskedLMError, match="found no word of this text to replace"):
        generator.neighbors("!!! ...")


def test_candidates_are_scored_as_the_paper_normalises(bert_mlm):
    """Rank by p(candidate) / (1 - p(original)) under dropout on the replaced word's embedding,
    recomputed here for one position with the same dropout mask."""
    generator = NeighborGenerator(str(bert_mlm), count=25, seed=0)
    text = "The music was held in Seoul."
    candidates = generator.candidates(text)
    ids, targets = generator._targets(text)
    g = torch.Generator().manual_seed(pdd_tasks.prepare.neighbors._text_seed(0, text))
    model = generator.model
    keep = torch.rand(len(targets), model.config.hidden_size, generator=g) >= 0.7
    position = targets[2][0]
    with torch.no_grad():
        embeds = model.get_input_embeddings()(torch.tensor([ids]))
        embeds[0, position] = embeds[0, position] * keep[2].float() / 0.3
        probs = torch.softmax(model(inputs_embeds=embeds).logits[0, position], dim=-1)
    at_position = [c for c in candidates if c.position == position]
    assert len(at_position) == 5
    for candidate in at_position:
        expected = probs[candidate.token_id].item() / (1 - probs[ids[position]].item())
        assert candidate.score == pytest.approx(expected, rel=1e-4)


def test_a_masked_lm_that_cannot_be_loaded_is_a_clear_error(tmp_path, tiny_model):
    with pytest.raises(MaskedLMError, match=r"neighbor_model=.*no local directory.*local directory"):
        NeighborGenerator(str(tmp_path / "missing"), count=3)
    with pytest.raises(MaskedLMError, match=r"exists but holds no masked LM"):
        NeighborGenerator(str(tiny_model), count=3)  # a causal LM


# -- settings ------------------------------------------------------------------------------------


def test_neighbor_is_off_until_a_masked_lm_is_named():
    assert "neighbor" not in ScoringSettings().methods
    settings = ScoringSettings.from_metadata({"neighbor_model": "some/roberta", "neighbor_count": 10})
    assert settings.methods[-1] == "neighbor"
    assert registry.label("neighbor", settings) == "Neighbor (n=10, roberta)"
    two = ScoringSettings.from_metadata({"neighbor_model": "m", "neighbor_words": 2})
    assert registry.label("neighbor", two) == "Neighbor (n=25, 2 words, m)"


@pytest.mark.parametrize(
    "metadata, message",
    [
        ({"neighbor_model": 3}, r"neighbor_model=3: expected a masked LM's hub id or local directory"),
        ({"neighbor_count": 0}, r"neighbor_count=0: expected a whole number >= 1"),
        ({"neighbor_words": 4}, r"neighbor_words=4: expected a whole number from 1 to 3"),
        ({"neighbor_seed": -1}, r"neighbor_seed=-1: expected a whole number >= 0"),
    ],
)
def test_bad_settings_name_the_key(metadata, message):
    with pytest.raises(SettingError, match=message):
        ScoringSettings.from_metadata(metadata)


# -- through lm_eval -----------------------------------------------------------------------------


def mean_logprob(model, tokenizer, text):
    """mean log p(x_i | x_<i) after <|endoftext|>, from a plain transformers forward pass."""
    ids = tokenizer(text, add_special_tokens=False).input_ids
    inputs = torch.tensor([[tokenizer.eos_token_id] + ids])
    with torch.no_grad():
        logp = torch.log_softmax(model(inputs).logits[0, :-1].double(), dim=-1)
    return loss_score(logp[torch.arange(len(ids)), torch.tensor(ids)].numpy())


def test_lm_eval_run_scores_loss_minus_the_neighbours_mean(tiny_model, tiny_table, bert_mlm, tmp_path):
    metadata = {"freq_table": str(tiny_table), "neighbor_model": str(bert_mlm), "neighbor_count": 4, "neighbor_seed": 1}
    out = tmp_path / "out"
    args = harness_args(
        cpu_float32(tiny_model), "pdd_wikimia_32", out, batch_size=4, metadata=metadata, limit=6, device="cpu"
    )
    run_lm_eval(args, cwd=tmp_path)
    samples = read_samples(out, "pdd_wikimia_32")
    assert len(samples) == 6
    model = AutoModelForCausalLM.from_pretrained(tiny_model).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    generator = NeighborGenerator(str(bert_mlm), count=4, seed=1)
    for sample in samples:
        text = sample["doc"]["text"]
        neighbours = generator.neighbors(text)
        assert len(neighbours) == 4
        requested = [argument["arg_1"] for argument in sample["arguments"].values()]
        assert requested[-4:] == list(neighbours)  # the run's extra requests are these neighbours
        expected = mean_logprob(model, tokenizer, text) - np.mean(
            [mean_logprob(model, tokenizer, n) for n in neighbours]
        )
        assert sample["neighbor_auc"][0] == pytest.approx(expected, abs=1e-5)


def test_lm_eval_run_with_a_masked_lm_that_is_not_there_stops_with_the_fix(tiny_model, tiny_table, tmp_path):
    metadata = {"freq_table": str(tiny_table), "neighbor_model": str(tmp_path / "no-such-mlm")}
    args = harness_args(cpu_float32(tiny_model), "pdd_wikimia_32", tmp_path / "out", metadata=metadata, limit=2)
    process = run_lm_eval(args, cwd=tmp_path, check=False)
    assert process.returncode != 0
    assert "MaskedLMError: metadata neighbor_model=" in process.stderr and "local directory" in process.stderr
    assert "Traceback" not in process.stderr, process.stderr[-3000:]
