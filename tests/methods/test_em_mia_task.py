"""EM-MIA as a task metric (``em_mia: true``): each text scored after every text of the scored set,
its column of R and initial score in the per-text items, the loop run by the aggregation; checked
against R built by hand from a tiny model's log-likelihoods through a real lm_eval run."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score
from support.harness import cpu_float32, harness_args, read_results, read_samples, run_lm_eval
from transformers import AutoModelForCausalLM, AutoTokenizer

from pdd_metrics import em_mia_scores, tpr_at_fpr
from pdd_metrics.intervals import delong_auc_stderr
from pdd_tasks.registry import DEFAULT_METHODS, ScoringSettings, SettingError
from pdd_tasks.tasks import aggregations
from pdd_tasks.tasks.aggregations import IncompleteEmMiaSet, em_mia_matrix
from pdd_tasks.tasks.base import metric_list, scored_texts


def logprobs_after(model, tokenizer, prefix: str, text: str) -> np.ndarray:
    """log p of ``text``'s own tokens after the start token and ``prefix``'s own tokens (the tiny
    GPT-2 has no BOS: its start token is the end-of-text token), in float64 from float32 logits."""
    context = [tokenizer.eos_token_id] + (tokenizer(prefix, add_special_tokens=False).input_ids if prefix else [])
    ids = tokenizer(text, add_special_tokens=False).input_ids
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([context + ids])).logits[0].double(), dim=-1)
    return logp[torch.arange(len(context) - 1, len(context) + len(ids) - 1), torch.tensor(ids)].numpy()


def run_em_mia(model_dir, table, tmp_path, limit: int, **metadata):
    out = tmp_path / "out"
    metadata = {"freq_table": str(table), "em_mia": True, **metadata}
    args = harness_args(cpu_float32(model_dir), "pdd_wikimia_32", out, batch_size=8, metadata=metadata, limit=limit)
    run_lm_eval(args + ["--device", "cpu"], cwd=tmp_path)
    samples = sorted(read_samples(out, "pdd_wikimia_32"), key=lambda sample: sample["doc_id"])
    return read_results(out)["results"]["pdd_wikimia_32"], samples


def test_lm_eval_run_equals_the_loop_on_r_built_by_hand(tiny_model, tiny_table, tmp_path):
    """8 texts (3 members, 5 non-members): each carries the 8 prefixed requests of the scored set, in
    set order; its column of R equals LL(x_j | x_i) / LL(x_j) from a direct forward pass; the metrics
    equal em_mia_scores on that hand-built R with the run's Min-K%++ scores as f_0 (the default
    initial score), and the interval machinery's values on those scores."""
    results, samples = run_em_mia(tiny_model, tiny_table, tmp_path, limit=8)
    texts = [sample["doc"]["text"] for sample in samples]
    labels = [sample["doc"]["label"] for sample in samples]
    assert len(texts) == 8 and 0 < sum(labels) < 8
    model = AutoModelForCausalLM.from_pretrained(tiny_model).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    plain = [logprobs_after(model, tokenizer, "", text) for text in texts]
    by_hand = np.array(
        [
            [logprobs_after(model, tokenizer, x_i, x_j).mean() / plain[j].mean() for j, x_j in enumerate(texts)]
            for x_i in texts
        ]
    )
    initial = np.array([sample["min_k_pp_auc"][0] for sample in samples])
    for j, sample in enumerate(samples):
        requested = [(a["arg_0"], a["arg_1"]) for a in sample["arguments"].values()]
        assert requested[-8:] == [(x_i, texts[j]) for x_i in texts]  # after the text's own and Lowercase's
        place, column, f0, label = sample["em_mia_auc"]
        assert place == j and f0 == initial[j] and label == labels[j]
        np.testing.assert_allclose(column, by_hand[:, j], rtol=1e-5)
    expected = em_mia_scores(by_hand, initial)
    assert len(set(np.round(expected, 12))) > 1  # the loop separates the texts: the AUC below tests an order
    np.testing.assert_allclose([sample["em_mia_score"] for sample in samples], expected, atol=1e-12)
    assert results["em_mia_auc,none"] == pytest.approx(roc_auc_score(labels, expected), abs=1e-12)
    assert results["em_mia_auc_stderr,none"] == pytest.approx(delong_auc_stderr(expected, labels), abs=1e-12)
    assert results["em_mia_tpr@fpr<5%,none"] == tpr_at_fpr(expected, labels, max_fpr=0.05, rule="strict")
    assert isinstance(results["em_mia_tpr@fpr<5%_stderr,none"], float)


def test_em_mia_init_names_the_initial_method(tiny_model, tiny_table, tmp_path):
    """em_mia_init: "loss": each text's initial score is its Loss score of the same run."""
    _, samples = run_em_mia(tiny_model, tiny_table, tmp_path, limit=4, em_mia_init="loss")
    assert [sample["em_mia_auc"][2] for sample in samples] == [sample["loss_auc"][0] for sample in samples]


def test_a_set_above_the_cap_is_refused_before_scoring(tiny_model, tiny_table, tmp_path):
    out = tmp_path / "out"
    metadata = {"freq_table": str(tiny_table), "em_mia": True, "em_mia_max_texts": 4}
    args = harness_args(cpu_float32(tiny_model), "pdd_wikimia_32", out, metadata=metadata, limit=5)
    finished = run_lm_eval(args + ["--device", "cpu"], cwd=tmp_path, check=False)
    assert finished.returncode != 0
    message = finished.stdout + finished.stderr
    assert "em_mia on 5 texts needs 5 x 5 = 25 prefixed forward passes" in message
    assert "em_mia_max_texts=4 texts (16 passes)" in message and '"em_mia_max_texts": 5' in message
    assert "Running loglikelihood requests" not in message and "Traceback" not in message
    assert not list(out.rglob("results_*.json"))


def test_an_initial_method_that_is_off_is_refused(tiny_model, tiny_table, tmp_path):
    metadata = {"freq_table": str(tiny_table), "em_mia": True, "em_mia_init": "lowercase", "lowercase": False}
    args = harness_args(cpu_float32(tiny_model), "pdd_wikimia_32", tmp_path / "out", metadata=metadata, limit=4)
    finished = run_lm_eval(args + ["--device", "cpu"], cwd=tmp_path, check=False)
    assert finished.returncode != 0
    assert "em_mia_init='lowercase' names a method that is off in this run" in finished.stdout + finished.stderr


def test_off_by_default_and_its_settings_are_checked():
    assert not ScoringSettings().em_mia and ScoringSettings().em_mia_init == "min_k_pp"
    assert not any(entry["metric"].startswith("em_mia") for entry in metric_list(DEFAULT_METHODS))
    names = [entry["metric"] for entry in metric_list(DEFAULT_METHODS, ScoringSettings(em_mia=True))]
    assert names[-8:-4] == ["em_mia_auc", "em_mia_tpr@fpr<5%", "em_mia_tpr@fpr<1%", "em_mia_tpr@fpr<0.1%"]
    with pytest.raises(SettingError, match="em_mia_init='minkpp': expected the name of a method, one of loss"):
        ScoringSettings.from_metadata({"em_mia": True, "em_mia_init": "minkpp"})
    with pytest.raises(SettingError, match="em_mia_max_texts=0: expected a whole number >= 1"):
        ScoringSettings.from_metadata({"em_mia": True, "em_mia_max_texts": 0})


def test_scored_set_is_what_limit_or_samples_select():
    docs = [{"text": f"t{i}"} for i in range(5)]
    assert scored_texts(docs) == ["t0", "t1", "t2", "t3", "t4"]
    assert scored_texts(docs, limit=2) == ["t0", "t1"]
    assert scored_texts(docs, limit=2, samples=[4, 1]) == ["t1", "t4"]  # --samples wins, in doc order


def test_matrix_from_items_in_any_order_with_a_repeated_text():
    """Items arrive in any order (processes); R is over the distinct texts (the prefixes): the two
    copies of a text kept with keep_duplicates share its place, and each gets its text's final score."""
    matrix = np.array([[1.0, 1.2], [0.9, 1.1]])  # place 1's text is scored twice
    items = [
        (1, tuple(matrix[:, 1]), 0.5, 1),
        (0, tuple(matrix[:, 0]), 0.1, 0),
        (1, tuple(matrix[:, 1]), 0.5, 1),
    ]
    built, initial, labels = em_mia_matrix(items)
    np.testing.assert_array_equal(built, matrix)
    assert initial.tolist() == [0.1, 0.5] and labels == [0, 1]
    final = em_mia_scores(matrix, np.array([0.1, 0.5]))
    assert aggregations._em_mia_items(tuple(items)) == ((final[1], 1), (final[0], 0), (final[1], 1))
    assert aggregations.em_mia_final_scores(items) == final.tolist()


@pytest.mark.parametrize(
    "items",
    [
        [(0, (1.0, 1.0), 0.0, 0)],  # a column of 2 in a set of 1
        [(0, (1.0, 1.0), 0.0, 0), (0, (1.0, 1.0), 0.0, 1)],  # place 1 missing
        [(0, (1.0, 1.0, 1.0), 0.0, 0), (2, (1.0, 1.0, 1.0), 0.0, 1)],  # place 1 missing, place 2 given
    ],
)
def test_an_incomplete_set_is_refused(items):
    with pytest.raises(IncompleteEmMiaSet, match="do not each carry a column"):
        em_mia_matrix(items)
