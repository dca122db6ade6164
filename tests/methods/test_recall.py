"""ReCaLL and Con-ReCall: the scores against hand values and a direct transformers computation, the
prefixes (pool file or held-out documents), and the rule that a prefix text is never scored, end to
end through the real ``lm_eval`` command line with a tiny GPT-2."""

from __future__ import annotations

import doctest
import json

import numpy as np
import pytest
import torch
from support.harness import cpu_float32, harness_args, read_results, read_samples, run_lm_eval, wikimia_rows
from transformers import AutoModelForCausalLM, AutoTokenizer

import pdd_metrics.recall
import pdd_tasks.prepare.recall_prefixes
from pdd_metrics import con_recall_score, recall_score
from pdd_tasks.prepare.recall_prefixes import PrefixError, draw_documents, prefixes_for, text_hash
from pdd_tasks.registry import DEFAULT_METHODS, METHODS, ScoringSettings, SettingError, label


# -- the pure functions ---------------------------------------------------------------------------


def test_doctests():
    for module in (pdd_metrics.recall, pdd_tasks.prepare.recall_prefixes):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__  # examples dropped fail too


def test_recall_is_the_ratio_of_mean_log_likelihoods():
    # LL(x|P) = mean(-2, -4) = -3; LL(x) = mean(-1, -2) = -1.5; ratio 2
    assert recall_score(np.array([-2.0, -4.0]), np.array([-1.0, -2.0])) == pytest.approx(2.0)
    # a prefix that does not change the text's log-probs gives exactly 1
    logp = np.array([-0.3, -2.2, -1.7])
    assert recall_score(logp, logp) == 1.0
    # the prefix that lowers the likelihood more gives the higher score (higher = member)
    assert recall_score(logp - 1.0, logp) > recall_score(logp - 0.5, logp)


def test_con_recall_by_hand_and_its_gamma_zero_is_recall():
    nonmember, member, plain = np.array([-2.0, -4.0]), np.array([-1.0, -1.0]), np.array([-1.0, -2.0])
    # (-3 - 0.5 * -1) / -1.5 = -2.5 / -1.5
    assert con_recall_score(nonmember, member, plain, gamma=0.5) == pytest.approx(5 / 3)
    # (-3 - 1.0 * -1) / -1.5 = 4/3
    assert con_recall_score(nonmember, member, plain, gamma=1.0) == pytest.approx(4 / 3)
    assert con_recall_score(nonmember, member, plain, gamma=0) == recall_score(nonmember, plain)


def test_the_scripts_extra_first_token_after_a_prefix_enters_the_mean():
    """Under convention reference-code the prefixed request also scores the text's first id (n + 1
    values), as the authors' scripts; each LL is the mean of what its request scored."""
    assert recall_score(np.array([-3.0, -1.0, -2.0]), np.array([-1.0, -1.0])) == pytest.approx(2.0)  # -2 / -1
    nonmember, member = np.array([-3.0, -1.0, -2.0]), np.array([-1.0, -1.0, -1.0])
    assert con_recall_score(nonmember, member, np.array([-1.0, -1.0]), gamma=1.0) == pytest.approx(1.0)  # (-2+1)/-1


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: recall_score(np.array([-1.0]), np.array([-1.0, -2.0])), "1 values but token_logprobs has 2"),
        (lambda: recall_score(np.array([-1.0, -1.0, -1.0]), np.array([-1.0])), "3 values but token_logprobs has 1"),
        (lambda: recall_score(np.array([-1.0]), np.array([0.0])), "exactly 0"),
        (lambda: recall_score(np.array([]), np.array([])), "0 tokens"),
        (lambda: con_recall_score(np.array([-1.0]), np.array([-1.0]), np.array([-1.0]), gamma=-1), "gamma"),
        (
            lambda: con_recall_score(np.array([-1.0]), np.array([-1.0, -1.0, -1.0]), np.array([-1.0]), gamma=0.5),
            "3 values",
        ),
    ],
)
def test_bad_inputs_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# -- settings and prefixes ------------------------------------------------------------------------


def test_off_by_default_and_labels():
    assert "recall" not in DEFAULT_METHODS and "con_recall" not in DEFAULT_METHODS
    settings = ScoringSettings.from_metadata({"recall_shots": 7, "con_recall": True, "con_recall_gamma": 0.3})
    assert settings.methods[-2:] == ("recall", "con_recall")
    assert label("recall", settings) == "ReCaLL (7 shots)"
    assert label("con_recall", settings) == "Con-ReCall (gamma=0.3, 7 shots)"
    assert METHODS["recall"].prepare is METHODS["con_recall"].prepare  # one draw for both


def test_a_prefixed_request_cut_shorter_compares_the_same_first_tokens():
    """With ``truncate: true`` a prefixed request may keep fewer tokens than the text alone; both
    scores then use the tokens every request scored."""
    from pdd_tasks.registry import TextInputs, score_text

    plain = np.array([-1.0, -2.0, -3.0])
    inputs = TextInputs(
        text="x",
        logprobs=plain,
        token_ids=np.arange(3),
        mu=plain,
        sigma=np.ones(3),
        top1=np.zeros(3),
        log_reference_freq=np.full(3, -5.0),
        extra_logprobs={"recall": [np.array([-2.0, -4.0])], "con_recall": [np.array([-1.0])]},
    )
    settings = ScoringSettings.from_metadata({"recall_shots": 1, "con_recall": True, "lowercase": False})
    scores = score_text(inputs, settings)
    assert scores["recall"] == pytest.approx(-3.0 / -1.5)
    assert scores["con_recall"] == pytest.approx((-2.0 - 0.5 * -1.0) / -1.0)


@pytest.mark.parametrize(
    "metadata, message",
    [
        ({"recall_shots": -1}, "recall_shots=-1: expected a whole number >= 0"),
        ({"recall_shots": 2.5}, "recall_shots=2.5"),
        ({"con_recall": "yes"}, "con_recall='yes': expected true or false"),
        ({"con_recall_gamma": 0}, "con_recall_gamma=0: expected a positive number"),
        ({"recall_seed": -3}, "recall_seed=-3"),
    ],
)
def test_bad_settings_name_the_key(metadata, message):
    with pytest.raises(SettingError, match=message):
        ScoringSettings.from_metadata(metadata)


def split_of(texts, labels=None):
    import datasets

    return datasets.Dataset.from_dict({"text": texts, **({"label": labels} if labels is not None else {})})


def test_held_out_documents_are_drawn_by_seed_and_listed():
    texts = [f"text {i}" for i in range(20)]
    labels = [i % 2 for i in range(20)]
    settings = ScoringSettings.from_metadata({"recall_shots": 3, "con_recall": True, "recall_seed": 5})
    prefixes = prefixes_for(split_of(texts, labels), settings, "t")
    nonmember = [entry["index"] for entry in prefixes.record["nonmember_prefix"]]
    member = [entry["index"] for entry in prefixes.record["member_prefix"]]
    assert all(labels[i] == 0 for i in nonmember) and all(labels[i] == 1 for i in member)
    assert prefixes.nonmember == "".join(texts[i] for i in nonmember)  # joined as the authors join them
    assert prefixes.member == "".join(texts[i] for i in member)
    assert sorted(prefixes.held_out) == sorted(nonmember + member)
    documents = prefixes.record["held_out"]["documents"]
    assert prefixes.record["held_out"]["count"] == 6
    assert {(d["index"], d["label"], d["sha256"]) for d in documents} == {
        (i, labels[i], text_hash(texts[i])) for i in nonmember + member
    }
    # deterministic; another seed draws other documents; Con-ReCall does not change the non-member draw
    assert prefixes_for(split_of(texts, labels), settings, "t") == prefixes
    other = prefixes_for(split_of(texts, labels), ScoringSettings.from_metadata({"recall_shots": 3}), "t")
    assert other.nonmember != prefixes.nonmember
    recall_only = ScoringSettings.from_metadata({"recall_shots": 3, "recall_seed": 5})
    assert prefixes_for(split_of(texts, labels), recall_only, "t").nonmember == prefixes.nonmember


def test_a_scored_document_with_a_prefix_text_is_held_out_too():
    texts = ["a.", "b.", "c.", "a.", "d.", "e."]
    labels = [0, 0, 0, 0, 1, 1]
    seed = next(s for s in range(100) if 0 in draw_documents(labels, 0, 1, s))  # draws "a." (index 0)
    prefixes = prefixes_for(
        split_of(texts, labels), ScoringSettings.from_metadata({"recall_shots": 1, "recall_seed": seed}), "t"
    )
    assert prefixes.held_out == (0, 3)


def test_too_few_documents_or_no_labels_are_clear_errors(tmp_path):
    texts, labels = ["a", "b", "c", "d"], [0, 0, 1, 1]
    with pytest.raises(PrefixError, match="recall_shots=2 would hold out 2 of the 2 documents with label 0"):
        prefixes_for(split_of(texts, labels), ScoringSettings.from_metadata({"recall_shots": 2}), "t")
    with pytest.raises(PrefixError, match="no labels.*recall_prefix_file"):
        prefixes_for(split_of(texts), ScoringSettings.from_metadata({"recall_shots": 1}), "t")
    with pytest.raises(PrefixError, match="con_recall is on but recall_shots is 0"):
        prefixes_for(split_of(texts, labels), ScoringSettings.from_metadata({"con_recall": True}), "t")


def test_pool_file_first_texts_of_each_kind(tmp_path):
    pool = tmp_path / "pool.jsonl"
    rows = [
        {"text": "n1 ", "label": 0},
        {"text": "m1 ", "label": 1},
        {"text": "n2 ", "label": 0},
        {"text": "n3 ", "label": 0},
    ]
    pool.write_text("".join(json.dumps(row) + "\n" for row in rows))
    settings = ScoringSettings.from_metadata({"recall_shots": 2, "con_recall": True, "recall_prefix_file": str(pool)})
    with pytest.raises(Exception, match="has 1 member text"):
        prefixes_for(split_of(["x", "y"], [0, 1]), settings, "t")
    settings = ScoringSettings.from_metadata({"recall_shots": 1, "con_recall": True, "recall_prefix_file": str(pool)})
    prefixes = prefixes_for(split_of(["x", "n1 ", "y"], [0, 0, 1]), settings, "t")
    assert (prefixes.nonmember, prefixes.member) == ("n1 ", "m1 ")
    assert prefixes.held_out == (1,)  # the scored copy of a pool text is held out
    assert prefixes.record["nonmember_prefix"] == [{"row": 0, "sha256": text_hash("n1 ")}]
    missing = ScoringSettings.from_metadata({"recall_shots": 1, "recall_prefix_file": str(tmp_path / "no.jsonl")})
    with pytest.raises(Exception, match="Data file not found"):
        prefixes_for(split_of(["x", "y"], [0, 1]), missing, "t")
    unlabelled = tmp_path / "known.jsonl"
    unlabelled.write_text('{"text": "k1 "}\n{"text": "k2 "}\n')
    settings = ScoringSettings.from_metadata({"recall_shots": 2, "recall_prefix_file": str(unlabelled)})
    assert prefixes_for(split_of(["x", "y"]), settings, "t").nonmember == "k1 k2 "  # unlabelled texts too


# -- end to end -----------------------------------------------------------------------------------

SHOTS = 2


def run(model_dir, out, task, metadata, limit=None, check=True):
    out.parent.mkdir(parents=True, exist_ok=True)
    args = harness_args(cpu_float32(model_dir), task, out, device="cpu", batch_size=8, metadata=metadata, limit=limit)
    return run_lm_eval(args, cwd=out.parent, check=check)


def mean_ll(model, ids: list[int], scored_from: int) -> float:
    """LL as the authors' code takes it: ``-loss`` of a forward pass whose labels mask the first
    ``scored_from`` positions (their ``get_conditional_ll`` masks the prefix with -100)."""
    inputs = torch.tensor([ids])
    labels = inputs.clone()
    labels[:, :scored_from] = -100
    with torch.no_grad():
        return -model(inputs, labels=labels).loss.item()


@pytest.fixture(scope="module")
def custom_run(tiny_model, tiny_table, tmp_path_factory):
    """pdd_custom, labelled: 24 WikiMIA texts, ReCaLL and Con-ReCall with prefixes held out of them."""
    tmp = tmp_path_factory.mktemp("recall")
    rows = [{"text": row["input"], "label": row["label"]} for row in wikimia_rows(32)[:12] + wikimia_rows(32)[-12:]]
    data = tmp / "texts.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp / "out"
    metadata = {"data_files": str(data), "freq_table": str(tiny_table), "recall_shots": SHOTS, "con_recall": True}
    run(tiny_model, out, "pdd_custom", metadata)
    return {"rows": rows, "out": out, "tmp": tmp}


def test_held_out_documents_are_not_scored_and_are_listed(custom_run):
    rows = custom_run["rows"]
    record = read_results(custom_run["out"])["configs"]["pdd_custom"]["metadata"]["recall_prefixes"]
    held = {entry["index"] for entry in record["held_out"]["documents"]}
    assert record["held_out"]["count"] == len(held) == 2 * SHOTS
    assert {entry["index"] for entry in record["nonmember_prefix"] + record["member_prefix"]} == held
    for entry in record["held_out"]["documents"]:
        assert entry["sha256"] == text_hash(rows[entry["index"]]["text"])
        assert entry["label"] == rows[entry["index"]]["label"]
    samples = read_samples(custom_run["out"], "pdd_custom")
    scored = [sample["doc"]["text"] for sample in samples]
    assert len(scored) == len(rows) - 2 * SHOTS
    assert sorted(scored) == sorted(row["text"] for i, row in enumerate(rows) if i not in held)


def test_the_table_shows_the_methods_and_the_held_out_count(custom_run):
    from pdd_tasks.tools.report.tables import method_table

    table = method_table(read_results(custom_run["out"]))
    assert f"| ReCaLL ({SHOTS} shots) |" in table and f"| Con-ReCall (gamma=0.5, {SHOTS} shots) |" in table
    scored = len(custom_run["rows"]) - 2 * SHOTS
    assert f"pdd_custom: {scored} texts ({2 * SHOTS} more held out as ReCaLL prefix texts)" in table


def test_scores_equal_a_direct_transformers_computation(custom_run, tiny_model):
    """Each score from the log-likelihoods as the authors' code computes them (``-loss`` of a forward
    pass; the prefix, ``"".join`` of its texts, masked with -100 as in their ``get_conditional_ll``;
    the ratio ranked as is), on this project's tokens: the text after <|endoftext|>, alone and after
    <|endoftext|> + the prefix (docs/methods.md says how the authors' token choice differs)."""
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    rows = custom_run["rows"]
    record = read_results(custom_run["out"])["configs"]["pdd_custom"]["metadata"]["recall_prefixes"]
    prefix = {
        kind: "".join(rows[e["index"]]["text"] for e in record[f"{kind}_prefix"]) for kind in ("nonmember", "member")
    }
    start = [tokenizer.eos_token_id]
    encode = lambda text: tokenizer(text, add_special_tokens=False).input_ids  # noqa: E731
    samples = read_samples(custom_run["out"], "pdd_custom")
    assert len(samples) == len(rows) - 2 * SHOTS  # every scored text is checked, none vacuously
    for sample in samples:
        text = encode(sample["doc"]["text"])
        plain = mean_ll(model, start + text, 1)
        conditional = {kind: mean_ll(model, start + encode(p) + text, 1 + len(encode(p))) for kind, p in prefix.items()}
        assert sample["loss_auc"][0] == pytest.approx(plain, abs=1e-5)
        assert sample["recall_auc"][0] == pytest.approx(conditional["nonmember"] / plain, rel=1e-5)
        expected = (conditional["nonmember"] - 0.5 * conditional["member"]) / plain
        assert sample["con_recall_auc"][0] == pytest.approx(expected, rel=1e-5)
        assert sample["recall_auc"][1] == sample["doc"]["label"]


def test_held_out_before_limit_on_a_benchmark(tiny_model, tiny_table, tmp_path):
    """On pdd_wikimia_32 with --limit: a drawn document among the first ones is gone, the next takes its place."""
    limit = 6
    labels = [row["label"] for row in wikimia_rows(32)]
    seed = next(s for s in range(1000) if min(draw_documents(labels, 0, SHOTS, s)) < limit)
    metadata = {"freq_table": str(tiny_table), "recall_shots": SHOTS, "recall_seed": seed}
    run(tiny_model, tmp_path / "out", "pdd_wikimia_32", metadata, limit=limit)
    record = read_results(tmp_path / "out")["configs"]["pdd_wikimia_32"]["metadata"]["recall_prefixes"]
    held = sorted(entry["index"] for entry in record["held_out"]["documents"])
    assert held == sorted(draw_documents(labels, 0, SHOTS, seed)) and record["seed"] == seed
    texts = [row["input"] for row in wikimia_rows(32)]
    expected = [text for i, text in enumerate(texts) if i not in held][:limit]
    assert [
        s["doc"]["text"] for s in sorted(read_samples(tmp_path / "out", "pdd_wikimia_32"), key=lambda s: s["doc_id"])
    ] == expected
    assert set(expected).isdisjoint(texts[i] for i in held)


def test_pool_file_run_holds_out_a_scored_copy(tiny_model, tiny_table, tmp_path):
    rows = [{"text": row["input"], "label": row["label"]} for row in wikimia_rows(32)[:8] + wikimia_rows(32)[-8:]]
    data = tmp_path / "texts.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    nonmember = next(row["text"] for row in rows if row["label"] == 0)
    pool = tmp_path / "known.jsonl"
    pool.write_text(json.dumps({"text": nonmember}) + "\n" + json.dumps({"text": "An unrelated known text. "}) + "\n")
    metadata = {
        "data_files": str(data),
        "freq_table": str(tiny_table),
        "recall_shots": SHOTS,
        "recall_prefix_file": str(pool),
    }
    run(tiny_model, tmp_path / "out", "pdd_custom", metadata)
    record = read_results(tmp_path / "out")["configs"]["pdd_custom"]["metadata"]["recall_prefixes"]
    assert record["source"] == "recall_prefix_file" and record["path"] == str(pool)
    assert [d["sha256"] for d in record["held_out"]["documents"]] == [text_hash(nonmember)]
    scored = [s["doc"]["text"] for s in read_samples(tmp_path / "out", "pdd_custom")]
    assert nonmember not in scored and len(scored) == len(rows) - 1
    assert all(np.isfinite(s["recall_auc"][0]) for s in read_samples(tmp_path / "out", "pdd_custom"))


@pytest.mark.parametrize(
    "metadata, message",
    [
        ({"con_recall": True}, "con_recall is on but recall_shots is 0"),
        ({"recall_shots": 12}, "leaves no room for the text"),
    ],
)
def test_bad_settings_stop_the_run_with_a_message(tiny_model, tiny_table, tmp_path, metadata, message):
    process = run(
        tiny_model,
        tmp_path / "out",
        "pdd_wikimia_32",
        {"freq_table": str(tiny_table), **metadata},
        limit=4,
        check=False,
    )
    assert process.returncode != 0
    assert message in process.stderr
    assert "Traceback" not in process.stderr[-3000:]
