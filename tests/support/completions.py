"""Real completions servers on 127.0.0.1 for the local-completions tests and benchmark.

``correct_server``: lm-eval-pdd's own front on ``llama_cpp.Llama(logits_all=True)``
(``python -m pdd_tasks.tools.gguf_server``), serving the default model's GGUF with correct prompt log-probs.
``stock_server``: llama-cpp-python's own ``python -m llama_cpp.server`` on the same file, which
shifts prompt log-probs by one position and refuses token-id prompts (the faults the server check
must name).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from pdd_tasks.tools.servers.gguf_server import running_server


# One thread each: llama.cpp's threads spin at barriers, which on 2 shared cores slows a run down
# several times; one thread is steady.
THREADS = 1
N_CTX = 1024  # WikiMIA-32 texts are ~50 tokens; the probe ~60


def default_gguf() -> Path:
    from pdd_tasks.tools.default_model import DefaultModelError, default_gguf_path

    try:
        return default_gguf_path()
    except DefaultModelError as error:
        pytest.skip(str(error))


def default_model() -> Path:
    """The default model converted for ``--model hf`` (same weights as the GGUF, dequantized)."""
    from pdd_tasks.tools.default_model import DefaultModelError, ensure_default_model

    try:
        return ensure_default_model()
    except DefaultModelError as error:
        pytest.skip(str(error))


def need_llama_cpp() -> None:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python (test extra) is not installed")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def correct_server(n_ctx: int = N_CTX, threads: int = THREADS) -> Iterator[str]:
    need_llama_cpp()
    with running_server(default_gguf(), n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads) as url:
        yield url


@contextlib.contextmanager
def stock_server(n_ctx: int = N_CTX, threads: int = THREADS, startup_timeout: float = 180.0) -> Iterator[str]:
    """``python -m llama_cpp.server`` on a free port; yields its /v1/completions URL."""
    need_llama_cpp()
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(default_gguf()),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        "--n_threads",
        str(threads),
        "--n_threads_batch",
        str(threads),
        "--logits_all",
        "true",
        "--verbose",
        "false",
    ]
    with tempfile.TemporaryFile(mode="w+") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + startup_timeout
            while True:
                if process.poll() is not None:
                    log.seek(0)
                    raise RuntimeError(f"llama_cpp.server exited ({process.returncode}): {log.read()[-2000:]}")
                try:
                    if requests.get(f"{base}/v1/models", timeout=2).ok:
                        break
                except requests.RequestException:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"llama_cpp.server did not answer within {startup_timeout:.0f} s")
                time.sleep(0.5)
            yield f"{base}/v1/completions"
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def server_stats(url: str) -> dict:
    """Requests and prompts answered so far by a ``pdd_tasks.tools.gguf_server``."""
    return requests.get(url.replace("/v1/completions", "/stats"), timeout=10).json()


def completions_model_args(url: str, tokenizer: Path, **extra) -> str:
    args = {
        "model": "smollm2-135m-q4_1",
        "base_url": url,
        "tokenizer": str(tokenizer),
        "tokenizer_backend": "huggingface",
        "max_length": N_CTX,
        **extra,
    }
    return ",".join(f"{key}={value}" for key, value in args.items())


TOLERANCES = {  # method: (max |local-completions - hf| per document, min Pearson r over the docs)
    "loss": (0.15, 0.995),
    "zlib": (0.0015, 0.995),
    "min_k": (0.5, 0.99),
    "dcpdd": (0.0005, 0.98),
    "lowercase": (0.05, 0.98),
    "min_k_pp": (2.0, 0.8),
}
