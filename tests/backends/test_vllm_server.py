"""``--model local-completions`` against vLLM's own OpenAI-compatible server (``vllm serve``), the
server most users point the completions path at, on 127.0.0.1.

The server runs from ``.venv-vllm`` (``.ci/install-vllm``; without it this module is skipped) on the
tiny random GPT-2 of ``tiny_model`` in float32; the client is this environment's ``lm_eval``, in this
process. Per text, every default method but Min-K%++ equals ``--model hf`` on the same weights
(1e-4; measured about 1e-7): ``token_logprobs`` are the exact log-probs; Min-K%++ (and Gap-K%'s
sigma) come from the top 20 alternatives (the server's ``max_logprobs``), an estimate recorded as such. The server's context
(``max_model_len`` in ``/v1/models``) is read: a client ``max_length`` above it is refused before
any text is sent.
"""

from __future__ import annotations

import pytest
from support.harness import cpu_float32, harness_args, read_results, read_samples, run_lm_eval, vllm_venv_or_skip

from pdd_tasks.registry import DEFAULT_METHODS
from pdd_tasks.tools.servers.vllm_server import running_vllm_server


pytestmark = pytest.mark.vllm_engine

VENV = vllm_venv_or_skip("vllm")

TASK = "pdd_wikimia_32"
LIMIT = 16
TOPK = 20
CONTEXT = 256  # max_model_len: the tiny GPT-2's n_positions


@pytest.fixture(scope="module")
def vllm_server(tiny_model):
    """``vllm serve`` on the tiny GPT-2 (float32, eager, top-20 log-probs), its URL; stopped after the module."""
    with running_vllm_server(VENV, tiny_model, served_name="tiny", max_logprobs=TOPK) as (url, models):
        assert models["data"][0]["max_model_len"] == CONTEXT
        yield url


def model_args(url: str, tokenizer, max_length: int = CONTEXT) -> str:
    return f"model=tiny,base_url={url},tokenizer={tokenizer},tokenizer_backend=huggingface,max_length={max_length}"


def scores_by_doc(output_dir) -> dict[int, dict[str, float]]:
    return {s["doc_id"]: {m: s[f"{m}_auc"][0] for m in DEFAULT_METHODS} for s in read_samples(output_dir, TASK)}


def test_vllm_serve_scores_equal_hf_per_text_but_min_k_pp_and_gap_k(vllm_server, tiny_model, tiny_table, tmp_path):
    metadata = {"freq_table": str(tiny_table), "topk_logprobs": TOPK}
    api_out, hf_out = tmp_path / "api", tmp_path / "hf"
    api_args = harness_args(
        model_args(vllm_server, tiny_model), TASK, api_out, model="local-completions", metadata=metadata, limit=LIMIT
    )
    run_lm_eval(api_args, cwd=tmp_path)
    hf_args = harness_args(cpu_float32(tiny_model), TASK, hf_out, batch_size=8, metadata=metadata, limit=LIMIT)
    run_lm_eval(hf_args, cwd=tmp_path)

    api, hf = scores_by_doc(api_out), scores_by_doc(hf_out)
    assert len(api) == LIMIT and api.keys() == hf.keys()
    for doc_id, expected in hf.items():
        for method in DEFAULT_METHODS:
            if method not in ("min_k_pp", "gap_k"):
                assert api[doc_id][method] == pytest.approx(expected[method], abs=1e-4), (method, doc_id)
    # Min-K%++ is the top-20 estimate: on this random-weight model the top 20 of 1,024 hold little of
    # the mass, so it differs (measured: up to 2.2 on 8 texts); checked: it is the estimate, and finite.
    differences = [abs(api[d]["min_k_pp"] - hf[d]["min_k_pp"]) for d in hf]
    assert all(d < 10 for d in differences) and max(differences) > 1e-3
    recorded = read_results(api_out)["configs"][TASK]["metadata"]["token_scores"]
    assert recorded["backend"] == "local-completions"
    assert recorded["mu_sigma"] == f"top-k approximation (k={TOPK}, uniform tail)"


def test_a_max_length_above_the_servers_context_is_refused(vllm_server, tiny_model, tiny_table, tmp_path):
    args = harness_args(
        model_args(vllm_server, tiny_model, max_length=2 * CONTEXT),
        TASK,
        tmp_path / "out",
        model="local-completions",
        metadata={"freq_table": str(tiny_table)},
        limit=2,
    )
    finished = run_lm_eval(args, cwd=tmp_path, check=False)
    assert finished.returncode == 1
    assert f"max_length is {2 * CONTEXT} tokens" in finished.stderr
    assert f"serves a context of {CONTEXT} tokens" in finished.stderr
    assert "Traceback" not in finished.stderr
