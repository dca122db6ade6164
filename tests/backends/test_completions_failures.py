"""``--model local-completions`` when the server cannot take the run: a ``max_length`` above the
server's context (refused before scoring where the server reports its context, and the server's own
context-length error translated where it does not), and a server that dies mid-run (the message
names the document and how to resume with ``--use_cache``; the resumed run sends only the rest).

All against real ``pdd_tasks.tools.gguf_server`` processes on the default model's GGUF.
"""

from __future__ import annotations

import psutil
import pytest
from support.bad_input import assert_refused, rows, write_jsonl
from support.completions import completions_model_args, correct_server, default_model, server_stats
from support.harness import harness_args, read_samples, run_lm_eval

import pdd_tasks.backends.completions as completions


SHORT = [
    "The cat sat on the mat and looked at the garden.",
    "A river runs through the old town near the bridge.",
    "Tea was served in the afternoon with small cakes.",
    "The train left the station two minutes late today.",
]


def long_text() -> str:
    """A text of about 1,300 tokens: longer than the servers' 1024-token context."""
    return " ".join(f"Sentence {i} of a long document about rivers, towns and bridges." for i in range(110))


def custom_data(tmp_path, texts) -> str:
    labelled = [(text, i % 2) for i, text in enumerate(texts)]
    return str(write_jsonl(tmp_path / "texts.jsonl", rows(*labelled)))


def completions_run(url, data, out, model_args_extra=None, *, drop_max_length=False, extra=()):
    model_args = completions_model_args(url, default_model(), **(model_args_extra or {}))
    if drop_max_length:  # lm-eval's default max_length (2048)
        model_args = ",".join(part for part in model_args.split(",") if not part.startswith("max_length="))
    args = harness_args(model_args, "pdd_custom", out, model="local-completions", metadata={"data_files": data})
    return run_lm_eval([*extra, *args], cwd=out.parent, check=False)


def test_max_length_above_the_reported_server_context_is_refused_before_scoring(gguf_server_url, tmp_path):
    data = custom_data(tmp_path, [long_text(), *SHORT[:3]])
    before = server_stats(gguf_server_url)
    process = completions_run(gguf_server_url, data, tmp_path / "out", drop_max_length=True)
    assert_refused(process, "ServerContextError", "max_length is 2048", "1024 tokens", "max_length=1024")
    # nothing was sent for scoring (not even the probe)
    assert server_stats(gguf_server_url)["prompts"] == before["prompts"]


def test_the_servers_context_length_error_names_max_length(gguf_server_url, tmp_path, monkeypatch):
    # A server that does not report its context (llama.cpp's llama-server, hosted APIs): the prompt is
    # sent, and the server's HTTP 400 becomes the message, with both numbers and the setting.
    monkeypatch.setattr(completions, "server_context", lambda lm: None, raising=False)
    data = custom_data(tmp_path, [long_text(), *SHORT[:3]])
    process = completions_run(gguf_server_url, data, tmp_path / "out", {"max_length": 2048})
    assert_refused(
        process,
        "ServerContextError",
        "pdd_custom doc 0",
        "context of 1024 tokens",
        "max_length is 2048",
        "max_length=1024",
    )


def stop_server_on_call(pid: int, number: int, monkeypatch) -> None:
    """Stop the server process ``pid`` just before the client's ``number``-th HTTP POST."""
    calls = []
    post = completions._post

    def post_then_stop(lm, payload, retries=True):
        calls.append(1)
        if len(calls) == number:
            server = psutil.Process(pid)
            server.terminate()
            server.wait(30)
        return post(lm, payload, retries)

    monkeypatch.setattr(completions, "_post", post_then_stop)


@pytest.mark.parametrize("cached", [False, True], ids=["no-cache", "use-cache"])
def test_a_server_that_dies_mid_run_names_the_document_and_how_to_resume(tmp_path, monkeypatch, cached):
    data = custom_data(tmp_path, SHORT)
    cache = ["--use_cache", str(tmp_path / "cache" / "run")] if cached else []
    (tmp_path / "cache").mkdir()
    before = {child.pid for child in psutil.Process().children()}
    with correct_server() as url:
        (pid,) = {child.pid for child in psutil.Process().children()} - before
        stop_server_on_call(pid, 4, monkeypatch)  # the probe, two texts answered, then the server is gone
        process = completions_run(url, data, tmp_path / "out", extra=cache)
    monkeypatch.undo()
    assert_refused(process, "ServerFailedError", "failed while scoring pdd_custom doc", "--use_cache")
    if not cached:
        assert "This run had no --use_cache" in process.stderr
        return
    assert "re-run the same command (same --use_cache)" in process.stderr
    assert "run_rank0.db" in process.stderr
    # The resumed run (a new server) is sent only the 8 - 2 prompts not answered, plus its probe.
    with correct_server() as url:
        resumed = completions_run(url, data, tmp_path / "out", extra=cache)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert server_stats(url)["prompts"] == 1 + 2 * len(SHORT) - 2
    assert len(read_samples(tmp_path / "out", "pdd_custom")) == len(SHORT)
