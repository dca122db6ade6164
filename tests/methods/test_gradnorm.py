"""GradNorm (MIMIR's gradient-norm attack): the score; the HF backend's gradient norms against a
backward pass written as mimir's attack takes it; a real lm_eval run; and the refusals (a backend
without weights, a cache written without gradients)."""

from __future__ import annotations

import doctest
import socket

import numpy as np
import pytest
from support.bad_input import assert_refused
from support.harness import cpu_float32, harness_args, read_results, read_samples, run_lm_eval, tasks_path

import pdd_metrics.gradnorm
from pdd_metrics import GRADIENT_NORM_ORDERS, gradnorm_score


def test_doctests_and_hand_values():
    result = doctest.testmod(pdd_metrics.gradnorm)
    assert result.attempted > 0 and result.failed == 0  # examples dropped fail too
    assert gradnorm_score(np.array([-0.5]), np.array([2.0])) == -2.0
    assert gradnorm_score(np.array([-0.5, -3.0]), np.array([0.0, 0.0, 3.0])) == -1.0  # a tensor with gradient 0 counts


@pytest.mark.parametrize(
    ("norms", "message"),
    [
        (np.array([]), "got no parameter tensor"),
        (np.array([1.0, np.inf]), "1 non-finite norm.*score the model in float32"),
        (np.array([1.0, -0.5]), r"must be norms \(>= 0\)"),
        (np.ones((3, 2)), "one norm per parameter tensor"),
    ],
)
def test_bad_norms_are_named(norms, message):
    with pytest.raises(ValueError, match=message):
        gradnorm_score(np.array([-1.0]), norms)


@pytest.mark.parametrize("value", [3, 0, True, "two"])
def test_a_bad_gradnorm_p_names_the_key_and_the_values(value):
    from pdd_tasks.registry import ScoringSettings, SettingError

    with pytest.raises(SettingError, match=rf'gradnorm_p={value!r}: expected 1, 2 or "inf"'):
        ScoringSettings.from_metadata({"gradnorm": True, "gradnorm_p": value})


def mimir_gradnorm(model, ids: list[int], p: float) -> float:
    """``GradNormAttack._attack`` of mimir (``mimir/attacks/gradnorm.py``) on the token ids ``ids``
    (start token first): zero_grad, the mean loss of ids[1:], backward, ``param.grad.norm(p)`` of
    every parameter with a gradient, their mean, negated."""
    import torch

    model.zero_grad()
    inputs = torch.tensor([ids])
    all_prob = torch.log_softmax(model(inputs).logits[0, :-1].float(), -1).gather(-1, inputs[0, 1:, None])
    loss = -torch.mean(all_prob)
    loss.backward()
    grad_norms = [param.grad.detach().norm(p) for param in model.parameters() if param.grad is not None]
    grad_norm = torch.stack(grad_norms).mean()
    model.zero_grad()
    return -float(grad_norm)


TEXTS = ["A short text to score.", "Another, somewhat longer, text to score after the start token, with a comma."]


def test_the_gradient_norms_are_mimirs_and_leave_the_model_as_it_was(tiny_model):
    """For p = 1, 2, inf the score of the HF backend's norms (:func:`gradient_norms`, what the capture
    attaches to a request with ``gradients``) equals mimir's attack on the same tokens; no ``.grad``
    is left on the model. The capture itself is checked through lm_eval below."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pdd_tasks.backends.base import EncodedText
    from pdd_tasks.backends.gradients import gradient_norms

    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype="float32").eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    tensors = len(list(model.parameters()))  # GPT-2's tied input and output embeddings count once
    found = []
    for text in TEXTS:
        ids = [tokenizer.eos_token_id, *tokenizer(text, add_special_tokens=False).input_ids]
        norms = gradient_norms(model, EncodedText(0, ids[:1], ids[1:]), "cpu")
        assert norms.shape == (3, tensors) and all(weight.grad is None for weight in model.parameters())
        for row, p in enumerate(GRADIENT_NORM_ORDERS):
            assert gradnorm_score(np.array([-1.0]), norms[row]) == pytest.approx(
                mimir_gradnorm(model, ids, p), rel=1e-5
            )
        found.append(norms)
    assert not np.allclose(found[0], found[1])  # one gradient per text


@pytest.fixture(scope="module")
def gradnorm_run(tiny_model, tiny_table, tmp_path_factory):
    out = tmp_path_factory.mktemp("gradnorm-run") / "out"
    metadata = {"freq_table": str(tiny_table), "gradnorm": True, "gradnorm_p": 2}
    run_lm_eval(harness_args(cpu_float32(tiny_model), "pdd_wikimia_32", out, metadata=metadata, limit=6), out.parent)
    return out


def test_an_lm_eval_run_scores_gradnorm_as_mimir_does(gradnorm_run, tiny_model):
    """``--metadata '{"gradnorm": true, "gradnorm_p": 2}'``: each text's logged score is mimir's
    attack (p = 2) on the tokens the run scored; the AUC and TPRs are reported with the label in effect."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pdd_tasks.tools.report.tables import method_table

    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype="float32").eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    samples = read_samples(gradnorm_run, "pdd_wikimia_32")
    assert len(samples) == 6
    for sample in samples:
        ids = [tokenizer.eos_token_id, *tokenizer(sample["doc"]["text"], add_special_tokens=False).input_ids]
        score, label = sample["gradnorm_auc"]
        assert score == pytest.approx(mimir_gradnorm(model, ids, 2.0), rel=1e-5)
        assert label == sample["doc"]["label"]
    results = read_results(gradnorm_run)
    assert 0.0 <= results["results"]["pdd_wikimia_32"]["gradnorm_auc,none"] <= 1.0
    assert "| GradNorm (p=2) |" in method_table(results)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again when the test sends: nothing may be sent


def test_a_completions_backend_refuses_gradnorm_before_sending_anything(tiny_model, tiny_table, tmp_path):
    """A backend without the weights names itself and the HF backend as the fix (no server: the
    refusal comes before the capture's first request, which would fail to connect)."""
    url = f"http://127.0.0.1:{closed_port()}/v1/completions"
    model_args = f"model=m,base_url={url},tokenizer={tiny_model},tokenizer_backend=huggingface,max_length=256"
    metadata = {"freq_table": str(tiny_table), "gradnorm": True}
    args = harness_args(model_args, "pdd_wikimia_32", tmp_path / "out", model="local-completions", metadata=metadata)
    process = run_lm_eval([*args, "--limit", "2"], tmp_path, check=False)
    assert_refused(
        process, "GradientsUnavailableError", "--model local-completions: GradNorm", "--model hf", "drop gradnorm"
    )


def test_a_cached_answer_without_gradients_is_refused():
    """An answer cached by a run without GradNorm (same request, so the same cache key) is named as
    the cause, not scored as a missing array."""
    from lm_eval.tasks import TaskManager

    from pdd_tasks.backends.base import ModelInfo, TokenScores
    from pdd_tasks.tasks.base import AnswersWithoutGradients

    info = ModelInfo(name="m", backend="hf", vocab_size=10, tokenizer_fingerprint="f", distribution_stats="exact")
    cached = TokenScores(-3.5, False, [1, 2, 3], [-1.0, -2.0, -0.5], [-1.2] * 3, [0.5] * 3, info, top1=[-0.5] * 3)
    manager = TaskManager(include_path=tasks_path(), metadata={"gradnorm": True, "lowercase": False})
    task = manager.load("pdd_wikimia_32")["tasks"]["pdd_wikimia_32"]
    assert "gradnorm" in task.settings.methods
    with pytest.raises(AnswersWithoutGradients, match="--use_cache file written by a run without it"):
        task.process_results({"text": "a b c", "label": 1}, [cached])


def test_vllm_refuses_gradnorm_before_touching_the_engine():
    """The vLLM capture refuses first (no engine is needed to say so: ``lm`` is never read)."""
    from pdd_tasks.backends.base import GradientsUnavailableError, PerTokenRequest
    from pdd_tasks.backends.vllm import score_per_token_vllm

    request = PerTokenRequest("loglikelihood", {}, ("", "A text."), 0, ("t", 0, 1), gradients=True)
    with pytest.raises(GradientsUnavailableError, match=r"--model vllm: GradNorm .*\(--model hf"):
        score_per_token_vllm(None, [request])


def test_a_model_without_trainable_weights_is_named(tiny_model):
    from transformers import AutoModelForCausalLM

    from pdd_tasks.backends.base import EncodedText
    from pdd_tasks.backends.gradients import NoGradientError, gradient_norms

    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype="float32").eval().requires_grad_(False)
    with pytest.raises(NoGradientError, match="no weight of the model requires a gradient.*dtype=float32"):
        gradient_norms(model, EncodedText(0, [0], [5, 6, 7]), "cpu")
