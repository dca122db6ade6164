"""PAC (Ye et al., ACL 2024): the score against hand values and the authors' formula, the word-swap
augmentation against the authors' ``eda``, and an ``lm_eval`` run against a direct transformers
computation with a tiny GPT-2."""

from __future__ import annotations

import doctest
import random

import numpy as np
import pytest
import torch
from support.harness import cpu_float32, harness_args, read_samples, run_lm_eval
from transformers import AutoModelForCausalLM, AutoTokenizer

import pdd_metrics.pac
from pdd_metrics import pac_score, polarized_distance, swap_augmentations
from pdd_tasks.registry import DEFAULT_METHODS, ScoringSettings, SettingError, extra_requests, label


# -- the authors' code (yyy01/PAC attack.py, src/eda.py), written out ---------------------------------


def authors_polarized_distance(prob_list, ratio_local=0.3, ratio_far=0.05):
    local_region_length = max(int(len(prob_list) * ratio_local), 1)
    far_region_length = max(int(len(prob_list) * ratio_far), 1)
    local_region = np.sort(prob_list)[:local_region_length]
    far_region = np.sort(prob_list)[::-1][:far_region_length]
    return np.mean(far_region) - np.mean(local_region)


def authors_eda(rng: random.Random, sentence: str, alpha: float, num_aug: int) -> list[str]:
    """``eda`` with random swap only, drawing from ``rng`` where the authors use the global ``random``
    (their final shuffle left out: it reorders the copies, which PAC averages)."""

    def swap_word(new_words):
        random_idx_1 = rng.randint(0, len(new_words) - 1)
        random_idx_2 = random_idx_1
        counter = 0
        while random_idx_2 == random_idx_1:
            random_idx_2 = rng.randint(0, len(new_words) - 1)
            counter += 1
            if counter > 3:
                return new_words
        new_words[random_idx_1], new_words[random_idx_2] = new_words[random_idx_2], new_words[random_idx_1]
        return new_words

    words = sentence.split(" ")
    n_rs = max(1, int(alpha * len(words)))
    copies = []
    for _ in range(num_aug):
        a_words = words.copy()
        for _ in range(n_rs):
            a_words = swap_word(a_words)
        copies.append(" ".join(a_words))
    return copies


# -- the pure functions ---------------------------------------------------------------------------


def test_doctests():
    result = doctest.testmod(pdd_metrics.pac)
    assert result.attempted > 0 and result.failed == 0  # examples dropped fail too


def test_polarized_distance_by_hand():
    lp = np.array([-0.2, -1.0, -3.0, -0.5, -6.0, -2.0, -0.1, -4.0, -1.5, -0.3])
    # 10 tokens: far = max(1, floor(0.5)) = 1 highest (-0.1); local = floor(3) = 3 lowest (-6, -4, -3)
    assert polarized_distance(lp) == pytest.approx(-0.1 + 13 / 3)
    assert polarized_distance(np.array([-1.0])) == 0.0  # one token is both regions


def test_pac_is_the_copies_mean_distance_minus_the_texts():
    text = np.array([-0.1, -5.0, -0.2, -4.0])  # PD = -0.1 - (-5) = 4.9
    copies = [np.array([-1.0, -2.0]), np.array([-0.5, -3.0, -2.5])]  # PD 1.0 and 2.5
    assert pac_score(text, copies) == pytest.approx((1.0 + 2.5) / 2 - 4.9)


@pytest.mark.parametrize("seed", range(5))
def test_pac_equals_the_authors_formula_negated(seed):
    """attack.py: PAC = PD(x) - mean(PD(x~)), ranked as -PAC (roc_auc_score(labels, -PAC))."""
    rng = np.random.default_rng(seed)
    text = -rng.exponential(2.0, int(rng.integers(1, 80)))
    copies = [-rng.exponential(2.0, int(rng.integers(1, 80))) for _ in range(5)]
    authors = authors_polarized_distance(text) - np.mean([authors_polarized_distance(c) for c in copies])
    assert pac_score(text, copies) == pytest.approx(-authors, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize(
    ("copies", "message"),
    [
        ([], "augmented_token_logprobs is empty"),
        (np.array([-1.0, -2.0]), "one 1-D array"),
        ([np.array([-1.0, np.nan])], r"augmented_token_logprobs\[0\] has 1 non-finite"),
        ([np.array([])], r"augmented_token_logprobs\[0\]: got 0 tokens"),
    ],
)
def test_pac_refuses_what_it_cannot_score(copies, message):
    with pytest.raises(ValueError, match=message):
        pac_score(np.array([-1.0, -2.0]), copies)


TEXTS = [
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "Two  spaces and\ta tab stay inside words.",
    "one",
    "a b",
]


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("alpha", [0.1, 0.3, 1.0])
def test_swaps_are_the_authors_eda_from_the_same_generator(text, alpha):
    """Same draws, same copies: the authors' random swap (its 4-draw give-up included) fed from a
    generator seeded as swap_augmentations seeds its own."""
    import hashlib

    digest = hashlib.sha256(f"7\n{text}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    assert swap_augmentations(text, count=5, alpha=alpha, seed=7) == authors_eda(rng, text, alpha, 5)


def test_swaps_keep_the_words_and_depend_only_on_text_and_seed():
    text = TEXTS[0]
    copies = swap_augmentations(text, count=5, alpha=0.3, seed=0)
    assert len(copies) == 5 and all(sorted(c.split(" ")) == sorted(text.split(" ")) for c in copies)
    assert any(c != text for c in copies)
    assert swap_augmentations(text, 5, 0.3, 0) == copies  # no global state
    assert swap_augmentations(text, 5, 0.3, 1) != copies
    assert swap_augmentations("one", 3) == ["one"] * 3  # nothing to swap


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("", 5, 0.3), "text must be a non-empty str"),
        (("a b", 0, 0.3), "count must be a whole number >= 1"),
        (("a b", 5, 0.0), r"alpha must be a fraction in \(0, 1\]"),
    ],
)
def test_swaps_refuse_bad_arguments(arguments, message):
    with pytest.raises(ValueError, match=message):
        swap_augmentations(*arguments)


# -- settings -------------------------------------------------------------------------------------


def test_off_by_default_and_its_requests_and_label():
    assert "pac" not in DEFAULT_METHODS
    settings = ScoringSettings.from_metadata({"pac": True, "pac_augmentations": 3, "pac_seed": 2})
    assert "pac" in settings.methods
    requested = [(c, t) for method, c, t in extra_requests(TEXTS[0], settings) if method == "pac"]
    assert requested == [("", copy) for copy in swap_augmentations(TEXTS[0], 3, 0.3, 2)]
    assert label("pac", settings) == "PAC (N=3, alpha=0.3)"


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ({"pac": 1}, "pac=1: expected true or false"),
        ({"pac": True, "pac_augmentations": 0}, r"pac_augmentations=0: expected a whole number >= 1\. \(e\.g\. 5\)"),
        ({"pac": True, "pac_alpha": 2}, r"pac_alpha=2: expected a fraction in \(0, 1\]"),
    ],
)
def test_bad_settings_name_the_key(metadata, message):
    with pytest.raises(SettingError, match=message):
        ScoringSettings.from_metadata(metadata)


# -- through lm_eval ------------------------------------------------------------------------------


def token_logprobs(model, tokenizer, text: str) -> np.ndarray:
    ids = tokenizer(text, add_special_tokens=False).input_ids
    inputs = torch.tensor([[tokenizer.eos_token_id] + ids])
    with torch.no_grad():
        logp = torch.log_softmax(model(inputs).logits[0, :-1].double(), dim=-1)
    return logp[torch.arange(len(ids)), torch.tensor(ids)].numpy()


def test_lm_eval_run_scores_pac_from_the_swapped_copies(tiny_model, tiny_table, tmp_path):
    metadata = {"freq_table": str(tiny_table), "pac": True, "pac_augmentations": 3, "pac_seed": 1}
    out = tmp_path / "out"
    args = harness_args(
        cpu_float32(tiny_model), "pdd_wikimia_32", out, batch_size=4, metadata=metadata, limit=6, device="cpu"
    )
    run_lm_eval(args, cwd=tmp_path)
    samples = read_samples(out, "pdd_wikimia_32")
    assert len(samples) == 6
    model = AutoModelForCausalLM.from_pretrained(tiny_model).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    for sample in samples:
        text = sample["doc"]["text"]
        copies = swap_augmentations(text, 3, 0.3, 1)
        requested = [argument["arg_1"] for argument in sample["arguments"].values()]
        assert requested[-3:] == copies  # the run's extra requests are these copies
        expected = np.mean([authors_polarized_distance(token_logprobs(model, tokenizer, c)) for c in copies])
        expected -= authors_polarized_distance(token_logprobs(model, tokenizer, text))
        assert sample["pac_auc"][0] == pytest.approx(expected, abs=1e-5)
