"""``--model local-completions`` against real completions servers on 127.0.0.1.

(a) Through lm-eval-pdd's correct llama.cpp front (``python -m pdd_tasks.tools.gguf_server``) on the
default model's GGUF (Q4_1), per-document scores agree with ``--model hf`` on the same weights
dequantized to float32, within tolerances measured for this pair (see TOLERANCES).
(b) Against llama-cpp-python's stock server, the run stops before scoring with a message naming
its faults (token-id prompts refused; prompt log-probs shifted by one position).
Plus: one prompt per text (batched and concurrent as the stock client sends them), the stock
harness parser agrees with the capture on the same server, and chat-only backends are refused.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from support.completions import N_CTX, TOLERANCES, completions_model_args, default_model, server_stats, stock_server
from support.harness import harness_args, read_results, read_samples, run_lm_eval


LIMIT = 8  # pdd_wikimia_32 docs: 16 texts with their lowercased copies

# Q4_1 weights run by llama.cpp vs the same weights dequantized to float32 in transformers: per-token
# log-probs differ by quantization-level noise. Measured on the first 100 docs of pdd_wikimia_32
# (`lm_eval` with both backends, --limit 100): per-document |difference| mean / max: Loss 0.012 /
# 0.054, Zlib 0.0001 / 0.0004, Min-K% 0.045 / 0.26, DC-PDD 0.00003 / 0.0001, Lowercase 0.005 / 0.014;
# Pearson r over any 8 consecutive docs >= 0.9994, 0.9995, 0.9988, 0.997, 0.995. The bounds below
# are 2-5x those maxima. Min-K%++ is the top-k approximation (k=20, uniform tail) on top of that
# noise: its z-scores come out higher (mean difference +0.77, sd 0.19; max |d| 1.27; r 0.94 over
# 100 docs, >= 0.88 over 8), because the uniform tail puts mu below the true mean.


def per_doc_scores(output_dir, task="pdd_wikimia_32") -> dict[str, dict[int, float]]:
    samples = read_samples(output_dir, task)
    return {method: {s["doc_id"]: s[f"{method}_auc"][0] for s in samples} for method in TOLERANCES}


@pytest.fixture(scope="module")
def model_dir():
    return default_model()


@pytest.fixture(scope="module")
def server(gguf_server_url):
    return gguf_server_url


@pytest.fixture(scope="module")
def hf_scores(model_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("hf")
    run_lm_eval(harness_args(f"pretrained={model_dir}", "pdd_wikimia_32", out, batch_size=8, limit=LIMIT), cwd=out)
    return per_doc_scores(out)


def test_local_completions_scores_agree_with_hf_backend(server, model_dir, hf_scores, tmp_path):
    before = server_stats(server)
    args = harness_args(
        completions_model_args(server, model_dir), "pdd_wikimia_32", tmp_path, model="local-completions", limit=LIMIT
    )
    run_lm_eval(args, cwd=tmp_path)
    after = server_stats(server)
    # One prompt per text (each doc's text and its lowercased copy) plus the one probe request.
    assert after["prompts"] - before["prompts"] == 2 * LIMIT + 1
    assert after["requests"] - before["requests"] == 2 * LIMIT + 1

    api = per_doc_scores(tmp_path)
    report = []
    for method, (max_diff, min_r) in TOLERANCES.items():
        docs = sorted(hf_scores[method])
        assert sorted(api[method]) == docs
        a = np.array([api[method][d] for d in docs])
        h = np.array([hf_scores[method][d] for d in docs])
        assert np.isfinite(a).all()
        diff = float(np.abs(a - h).max())
        r = float(np.corrcoef(a, h)[0, 1])
        report.append(f"{method}: max|diff| {diff:.4f} (<= {max_diff}), r {r:.4f} (>= {min_r})")
        assert diff <= max_diff and r >= min_r, "\n".join(report)
    print("\n" + "\n".join(report))
    offset = np.mean([api["min_k_pp"][d] - hf_scores["min_k_pp"][d] for d in hf_scores["min_k_pp"]])
    assert offset > 0, f"Min-K%++ from top-k should score higher than the exact one (mu underestimated), got {offset}"

    results = read_results(tmp_path)
    recorded = results["configs"]["pdd_wikimia_32"]["metadata"]["token_scores"]
    assert recorded["backend"] == "local-completions"
    assert recorded["mu_sigma"] == "top-k approximation (k=20, uniform tail)"
    for method in TOLERANCES:
        assert 0.0 <= results["results"]["pdd_wikimia_32"][f"{method}_auc,none"] <= 1.0


def test_stock_llama_cpp_server_is_refused_with_its_faults_named(model_dir, tmp_path):
    with stock_server() as url:
        args = harness_args(
            completions_model_args(url, model_dir),
            "pdd_wikimia_32",
            tmp_path,
            model="local-completions",
            limit=4,
            log_samples=False,
        )
        process = run_lm_eval(args, cwd=tmp_path, check=False)
    output = process.stdout + process.stderr
    assert process.returncode != 0
    assert "ServerCheckError" in output
    assert "refuses prompts given as token ids (HTTP 500" in output
    assert "prompt log-probs are shifted by one position" in output
    assert "abetlen/llama-cpp-python#1983" in output
    assert "pdd_tasks.tools.gguf_server" in output  # the fix: a server that works
    assert not list(tmp_path.rglob("results_*.json"))  # no table of chance-level numbers


# -- in-process: the capture against the same real server ------------------------------------------


def make_client(url, model_dir, **kwargs):
    from lm_eval.models.openai_completions import LocalCompletionsAPI

    from pdd_tasks import lm_eval_patches

    lm_eval_patches.apply()
    return LocalCompletionsAPI(
        model="smollm2",
        base_url=url,
        tokenizer=str(model_dir),
        tokenizer_backend="huggingface",
        max_length=N_CTX,  # the server's context (a larger max_length is refused)
        **kwargs,
    )


def texts(n: int) -> list[str]:
    from support.harness import wikimia_rows

    rows = wikimia_rows(32)[:n]
    return [row["input"] for row in rows]


def per_token_requests(items: list[str]):
    from pdd_tasks.backends.base import PerTokenRequest

    return [
        PerTokenRequest(request_type="loglikelihood", doc={}, arguments=("", text), idx=0, metadata=("pdd_test", i, 1))
        for i, text in enumerate(items)
    ]


def test_batching_and_concurrency_keep_one_prompt_per_text_and_the_same_values(server, model_dir):
    items = texts(4)
    one = make_client(server, model_dir)
    before = server_stats(server)
    single = one.loglikelihood(per_token_requests(items))
    middle = server_stats(server)
    batched = make_client(server, model_dir, batch_size=3, num_concurrent=2).loglikelihood(per_token_requests(items))
    after = server_stats(server)
    # each client probes the server once; then one prompt per text, in ceil(4/3) = 2 batched requests
    assert (middle["requests"] - before["requests"], middle["prompts"] - before["prompts"]) == (1 + 4, 1 + 4)
    assert (after["requests"] - middle["requests"], after["prompts"] - middle["prompts"]) == (1 + 2, 1 + 4)
    for a, b, text in zip(single, batched, items, strict=True):
        assert a.token_ids.tolist() == one.tok_encode(text)  # the text's tokens, in order
        assert a.token_ids.tolist() == b.token_ids.tolist()
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-6)
        np.testing.assert_allclose(a.mu, b.mu, atol=1e-5)
        assert (a.sigma > 0).all() and (a.mu < 0).all()
        assert a.model.backend == "local-completions" and a.model.vocab_size == 49152


def test_capture_agrees_with_the_stock_harness_parser(server, model_dir):
    """The stock client (logprobs=1, its own parse) on the same texts gives the same sums: the
    capture reads the same positions (the text tokens, not the start token or the generated one)."""
    from lm_eval.api.instance import Instance

    items = texts(3)
    client = make_client(server, model_dir)
    plain = [Instance(request_type="loglikelihood", doc={}, arguments=("", t), idx=0) for t in items]
    mixed = client.loglikelihood(per_token_requests(items) + plain)
    captured, stock = mixed[:3], mixed[3:]
    for answer, (total, _) in zip(captured, stock, strict=True):
        assert type(answer).__name__ == "TokenScores"
        assert math.isclose(answer[0], total, abs_tol=1e-4)
        assert math.isclose(float(answer.logprobs.sum()), total, abs_tol=1e-4)


def test_chat_completions_backend_is_refused():
    from lm_eval.models.openai_completions import LocalChatCompletion

    from pdd_tasks import lm_eval_patches
    from pdd_tasks.backends.completions import ServerCheckError

    lm_eval_patches.apply()
    chat = LocalChatCompletion(base_url="http://127.0.0.1:9/v1/chat/completions", tokenizer_backend=None)
    with pytest.raises(ServerCheckError, match="chat-only APIs cannot be used"):
        chat.loglikelihood(per_token_requests(["A text."]))


def test_gguf_server_caps_logprobs_and_the_request_body(server):
    # Hostile requests get a 4xx answer naming the cap and how to raise it; the server keeps serving.
    import http.client
    from urllib.parse import urlparse

    import requests

    from pdd_tasks.tools.servers.gguf_server import DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_LOGPROBS

    whole_vocabulary = requests.post(
        server, json={"prompt": "Hello", "max_tokens": 0, "echo": True, "logprobs": 49152}, timeout=60
    )
    assert whole_vocabulary.status_code == 400
    message = whole_vocabulary.json()["error"]["message"]
    assert f"at most {DEFAULT_MAX_LOGPROBS} alternatives per token" in message and "--max-logprobs" in message

    address = urlparse(server)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=60)
    connection.putrequest("POST", address.path)
    connection.putheader("Content-Type", "application/json")
    connection.putheader("Content-Length", str(10**12))  # a terabyte announced, nothing sent
    connection.endheaders()
    answer = connection.getresponse()
    assert answer.status == 413
    assert f"0 to {DEFAULT_MAX_BODY_BYTES} bytes" in json.loads(answer.read())["error"]["message"]
    connection.close()

    fine = requests.post(
        server, json={"prompt": "Hello", "max_tokens": 1, "logprobs": DEFAULT_MAX_LOGPROBS}, timeout=60
    )
    assert fine.status_code == 200 and len(fine.json()["choices"][0]["logprobs"]["top_logprobs"][0]) >= 20
