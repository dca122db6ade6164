"""A small OpenAI-compatible ``/v1/completions`` server for a GGUF model, with correct prompt log-probs.

``python -m pdd_tasks.tools.gguf_server --model model.gguf`` serves the model through llama.cpp
(``llama_cpp.Llama(logits_all=True)``) on ``http://127.0.0.1:8000/v1/completions`` in the format
lm-eval's ``--model local-completions`` speaks (prompts as text or token ids, ``echo``,
``logprobs`` = k top alternatives per token, ``max_tokens``, ``stop``). Needs
``pip install llama-cpp-python``.

Why not llama-cpp-python's own server (``python -m llama_cpp.server``, 0.3.x)? It gives each prompt
token the log-prob from the *next* position's distribution (upstream issue
abetlen/llama-cpp-python#1983) and refuses prompts given as token ids (HTTP 500), which is how the
harness sends them. llama.cpp's engine is right; this front reads its logits directly: the log-prob
of prompt token i is ``log_softmax(logits[i - 1])[token_i]`` in float64, and its top-k alternatives
come from the same row.

What it does not do: sampling (generation is greedy whatever ``temperature`` says), streaming,
several choices per prompt (``n``), chat completions. Requests are answered one at a time (one
model, one lock); a request may carry several prompts (a batch), answered in order.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np


DEFAULT_MAX_TOKENS = 16  # OpenAI's default for /v1/completions
#: Most top alternatives per token a request may ask for (``logprobs``); vLLM's default cap is 20,
#: OpenAI's 5. The whole vocabulary per token would be megabytes per prompt.
DEFAULT_MAX_LOGPROBS = 20
#: Largest request body accepted (bytes); a larger Content-Length is answered 413 without reading it.
DEFAULT_MAX_BODY_BYTES = 16 * 2**20


class RequestError(ValueError):
    """A request the server answers with HTTP 400 and this message."""


def _token_key(piece: bytes) -> str:
    """A token's text as OpenAI's API names it: the UTF-8 text, or ``bytes:\\xNN...`` for a partial
    UTF-8 sequence (so that different tokens keep different names in ``top_logprobs``)."""
    try:
        return piece.decode("utf-8")
    except UnicodeDecodeError:
        return "bytes:" + "".join(f"\\x{b:02x}" for b in piece)


def log_softmax_rows(logits: np.ndarray) -> np.ndarray:
    """Row-wise log-softmax in float64 (rows are next-token logits).

    >>> lp = log_softmax_rows(np.array([[0.0, 0.0], [1.0, 1.0 + np.log(3.0)]], dtype=np.float32))
    >>> np.round(np.exp(lp), 4).tolist()
    [[0.5, 0.5], [0.25, 0.75]]
    """
    rows = np.asarray(logits, dtype=np.float64)
    shifted = rows - rows.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


class CompletionEngine:
    """llama.cpp model answering completion requests with exact prompt log-probs."""

    def __init__(
        self,
        model_path: str,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        n_threads_batch: int | None = None,
        name: str | None = None,
        max_logprobs: int = DEFAULT_MAX_LOGPROBS,
    ) -> None:
        self.max_logprobs = max_logprobs
        try:
            from llama_cpp import Llama
        except ImportError as error:  # pragma: no cover - depends on the environment
            raise SystemExit(
                "pdd_tasks.tools.gguf_server needs llama-cpp-python: pip install 'llama-cpp-python==0.3.36' "
                f"(or lm-eval-pdd's test extra). Import failed: {error}"
            ) from error
        if not os.path.isfile(model_path):
            raise SystemExit(f"--model {model_path!r}: no such file; pass the path of a .gguf model file.")
        threads = n_threads or max(1, os.cpu_count() or 1)
        self.llm = Llama(
            model_path=model_path,
            logits_all=True,  # logits at every prompt position, not just the last
            n_ctx=n_ctx,
            n_threads=threads,
            n_threads_batch=n_threads_batch or threads,
            verbose=False,
        )
        self.name = name or os.path.basename(model_path)
        self.n_ctx = self.llm.n_ctx()
        self.n_vocab = self.llm.n_vocab()
        self.eos = self.llm.token_eos()
        self._keys: dict[int, str] = {}
        self.lock = threading.Lock()
        self.requests = 0
        self.prompts = 0

    def key(self, token: int) -> str:
        name = self._keys.get(token)
        if name is None:
            name = self._keys[token] = _token_key(self.llm.detokenize([token], special=True))
        return name

    def encode(self, prompt) -> list[int]:
        if isinstance(prompt, str):
            # Taken literally (no BOS added); special-token text such as <|endoftext|> is parsed.
            return self.llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
        if isinstance(prompt, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            bad = [t for t in prompt if not 0 <= t < self.n_vocab]
            if bad:
                raise RequestError(f"prompt token ids {bad[:5]} are outside the vocabulary [0, {self.n_vocab}).")
            return list(prompt)
        raise RequestError("prompt must be a string, a list of strings, a list of token ids or a list of those lists.")

    @staticmethod
    def split_prompts(prompt) -> list:
        if isinstance(prompt, str):
            return [prompt]
        if isinstance(prompt, list) and prompt:
            if all(isinstance(p, (str, list)) for p in prompt):
                return prompt
            return [prompt]  # one prompt of token ids
        raise RequestError("prompt is missing or empty.")

    def complete(self, body: dict) -> dict:
        prompts = self.split_prompts(body.get("prompt"))
        echo = bool(body.get("echo", False))
        logprobs = body.get("logprobs")
        if logprobs is not None and (isinstance(logprobs, bool) or not isinstance(logprobs, int) or logprobs < 0):
            raise RequestError(f"logprobs must be a whole number >= 0 or null, got {logprobs!r}.")
        if logprobs is not None and logprobs > self.max_logprobs:
            raise RequestError(
                f"logprobs={logprobs}: this server returns at most {self.max_logprobs} alternatives per token "
                f"(start it with a larger --max-logprobs to allow more)."
            )
        max_tokens = body.get("max_tokens", DEFAULT_MAX_TOKENS)
        max_tokens = DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 0:
            raise RequestError(f"max_tokens must be a whole number >= 0, got {max_tokens!r}.")
        stop = body.get("stop") or []
        stop = [stop] if isinstance(stop, str) else list(stop)
        encoded = [self.encode(p) for p in prompts]
        for i, ids in enumerate(encoded):
            if not ids:
                raise RequestError(f"prompt {i} has no tokens.")
            if len(ids) > self.n_ctx:
                raise RequestError(
                    f"This model's maximum context length is {self.n_ctx} tokens; prompt {i} has {len(ids)} "
                    f"tokens. Start the server with a larger --n-ctx or send shorter prompts."
                )
        choices, prompt_tokens, completion_tokens = [], 0, 0
        with self.lock:
            self.requests += 1
            self.prompts += len(encoded)
            for index, ids in enumerate(encoded):
                choice, generated = self._one(ids, echo, logprobs, max_tokens, stop)
                choice["index"] = index
                choices.append(choice)
                prompt_tokens += len(ids)
                completion_tokens += generated
        return {
            "id": f"cmpl-{uuid.uuid4().hex}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": body.get("model") or self.name,
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    def _one(self, ids: list[int], echo: bool, logprobs: int | None, max_tokens: int, stop: list[str]):
        """One choice: the prompt ``ids`` evaluated, greedy generation, and the log-probs asked for."""
        llm = self.llm
        llm.reset()
        llm.eval(ids)
        want_lp = logprobs is not None
        # rows[j] = log p(. | ids[:j+1]): the distribution of token j+1 (prompt) or of the next token.
        rows = log_softmax_rows(llm.scores[: len(ids)]) if (echo and want_lp) else None
        generated, gen_rows, text, finish = self._generate(ids, min(max_tokens, self.n_ctx - len(ids)), stop)
        prompt_text = llm.detokenize(ids, special=True).decode("utf-8", errors="replace")
        choice = {"text": (prompt_text + text) if echo else text, "logprobs": None, "finish_reason": finish}
        if want_lp:
            scored = []
            if echo:
                scored += [(ids[0], None)] + [(ids[j], rows[j - 1]) for j in range(1, len(ids))]
            scored += list(zip(generated, gen_rows, strict=False))
            choice["logprobs"] = self._logprobs(scored, logprobs, 0 if echo else len(prompt_text))
        return choice, len(generated)

    def _generate(self, ids: list[int], max_tokens: int, stop: list[str]):
        """Greedy generation after the evaluated prompt: ``(tokens, their distributions, text,
        finish reason)``; stops at EOS, at a ``stop`` string (cut from the text) or at ``max_tokens``."""
        llm = self.llm
        last = log_softmax_rows(llm.scores[len(ids) - 1 : len(ids)])[0]
        generated: list[int] = []
        gen_rows: list[np.ndarray] = []
        text = ""
        while len(generated) < max_tokens:
            token = int(np.argmax(last))
            if token == self.eos:
                return generated, gen_rows, text, "stop"
            generated.append(token)
            gen_rows.append(last)
            text = llm.detokenize(generated).decode("utf-8", errors="replace")
            hit = [text.find(s) for s in stop if s and s in text]
            if hit:
                return generated, gen_rows, text[: min(hit)], "stop"
            if len(generated) < max_tokens:
                llm.eval([token])
                last = log_softmax_rows(llm.scores[len(ids) + len(generated) - 1 : len(ids) + len(generated)])[0]
        return generated, gen_rows, text, "length"

    def _logprobs(self, scored: list[tuple[int, np.ndarray | None]], k: int, offset: int) -> dict:
        """OpenAI's ``logprobs`` object for ``(token, its distribution)`` pairs: each token's log-prob
        and its ``k`` top alternatives (plus the token itself); a token without a distribution (the
        first prompt token) gets null."""
        tokens, token_logprobs, top_logprobs, offsets = [], [], [], []
        for token, row in scored:
            key = self.key(token)
            tokens.append(key)
            offsets.append(offset)
            offset += len(key)
            if row is None:  # the first prompt token has no distribution (OpenAI gives null)
                token_logprobs.append(None)
                top_logprobs.append(None)
                continue
            token_logprobs.append(float(row[token]))
            top = {}
            if k > 0:
                best = np.argpartition(-row, k - 1)[:k] if k < row.size else np.arange(row.size)
                for alt in best[np.argsort(-row[best], kind="stable")]:
                    top.setdefault(self.key(int(alt)), float(row[alt]))
            top.setdefault(key, float(row[token]))  # the actual token too, as OpenAI does
            top_logprobs.append(top)
        return {
            "tokens": tokens,
            "token_logprobs": token_logprobs,
            "top_logprobs": top_logprobs,
            "text_offset": offsets,
        }


def make_handler(engine: CompletionEngine, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the harness' clients expect

        def log_message(self, format, *args):  # quiet: one line per request is too much for a test log
            pass

        def _send(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
            self._send(status, {"error": {"message": message, "type": kind, "param": None, "code": None}})

        def do_GET(self):
            path = self.path.rstrip("/")
            if path in ("/v1/models", "/models"):
                self._send(
                    200,
                    {
                        "object": "list",
                        # max_model_len: the context in tokens, as vLLM reports it (read by the client check)
                        "data": [
                            {"id": engine.name, "object": "model", "owned_by": "local", "max_model_len": engine.n_ctx}
                        ],
                    },
                )
            elif path == "/health":
                self._send(200, {"status": "ok"})
            elif path == "/stats":  # how many requests and prompts were answered (benchmarks, tests)
                self._send(200, {"requests": engine.requests, "prompts": engine.prompts})
            else:
                self._error(404, f"no route GET {self.path}", "not_found")

        def do_POST(self):
            path = self.path.rstrip("/")
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if not 0 <= length <= max_body_bytes:
                self.close_connection = True  # the body is not read: the connection cannot be reused
                self._error(
                    HTTPStatus.REQUEST_ENTITY_TOO_LARGE if length > 0 else HTTPStatus.BAD_REQUEST,
                    f"request body of {self.headers.get('Content-Length')!r} bytes: this server accepts bodies of "
                    f"0 to {max_body_bytes} bytes (start it with a larger --max-body-bytes, or send fewer prompts "
                    f"per request).",
                )
                return
            raw = self.rfile.read(length)
            if path not in ("/v1/completions", "/completions"):
                self._error(404, f"no route POST {self.path}; this server answers /v1/completions only", "not_found")
                return
            try:
                body = json.loads(raw or b"{}")
                if not isinstance(body, dict):
                    raise RequestError("the request body must be a JSON object.")
                if body.get("stream"):
                    raise RequestError("stream=true is not supported.")
                if body.get("n", 1) not in (1, None):
                    raise RequestError("n > 1 is not supported.")
                self._send(200, engine.complete(body))
            except (json.JSONDecodeError, RequestError) as error:
                self._error(HTTPStatus.BAD_REQUEST, str(error))
            except Exception as error:  # noqa: BLE001 - report, keep serving
                self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(error).__name__}: {error}", "server_error")

    return Handler


def serve(
    engine: CompletionEngine, host: str = "127.0.0.1", port: int = 8000, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
) -> ThreadingHTTPServer:
    """An HTTP server for ``engine`` bound to ``host:port`` (port 0: a free port); call
    ``serve_forever()`` on it."""
    server = ThreadingHTTPServer((host, port), make_handler(engine, max_body_bytes))
    server.daemon_threads = True
    return server


@contextlib.contextmanager
def running_server(
    model_path: str | os.PathLike,
    *,
    n_ctx: int = 2048,
    n_threads: int | None = None,
    n_threads_batch: int | None = None,
    host: str = "127.0.0.1",
    startup_timeout: float = 180.0,
) -> Iterator[str]:
    """Run ``python -m pdd_tasks.tools.gguf_server`` in a child process on a free port; yields its
    ``http://host:port/v1/completions`` URL and stops the process on exit (tests, benchmarks)."""
    command = [
        sys.executable,
        "-m",
        "pdd_tasks.tools.gguf_server",
        "--model",
        str(model_path),
        "--host",
        host,
        "--port",
        "0",
        "--n-ctx",
        str(n_ctx),
    ]
    if n_threads:
        command += ["--n-threads", str(n_threads)]
    if n_threads_batch:
        command += ["--n-threads-batch", str(n_threads_batch)]
    with tempfile.TemporaryFile(mode="w+") as errors:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True)
        try:
            lines: queue.Queue = queue.Queue()
            threading.Thread(target=lambda: lines.put(process.stdout.readline()), daemon=True).start()
            try:
                line = lines.get(timeout=startup_timeout)
            except queue.Empty:
                line = ""
            match = re.search(r"(http://\S+/v1/completions)", line)
            if not match:
                errors.seek(0)
                raise RuntimeError(
                    f"gguf_server did not start within {startup_timeout:.0f} s (exit code {process.poll()}): "
                    f"{line.strip()} {errors.read()[-2000:]}"
                )
            yield match.group(1)
        finally:
            stop_server(process, timeout=30)


def stop_server(process: subprocess.Popen, timeout: float) -> None:
    """Terminate a server process started by a test or benchmark; kill it if it has not ended in ``timeout`` s."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:  # pragma: no cover
        process.kill()
        process.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m pdd_tasks.tools.gguf_server",
        description="OpenAI-compatible /v1/completions server for a GGUF model with correct prompt log-probs "
        "(for lm_eval --model local-completions).",
    )
    parser.add_argument("--model", required=True, help="path of the .gguf file")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port (printed on start)")
    parser.add_argument("--n-ctx", type=int, default=2048, help="context window in tokens (default 2048)")
    parser.add_argument("--n-threads", type=int, default=None, help="CPU threads (default: all cores)")
    parser.add_argument(
        "--n-threads-batch", type=int, default=None, help="threads for prompt processing (default: --n-threads)"
    )
    parser.add_argument("--model-name", default=None, help="name reported in responses (default: the file name)")
    parser.add_argument(
        "--max-logprobs",
        type=int,
        default=DEFAULT_MAX_LOGPROBS,
        help=f"most top alternatives per token a request may ask for (default {DEFAULT_MAX_LOGPROBS})",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=DEFAULT_MAX_BODY_BYTES,
        help=f"largest request body accepted, in bytes (default {DEFAULT_MAX_BODY_BYTES})",
    )
    args = parser.parse_args(argv)
    engine = CompletionEngine(
        args.model, args.n_ctx, args.n_threads, args.n_threads_batch, args.model_name, args.max_logprobs
    )
    server = serve(engine, args.host, args.port, args.max_body_bytes)
    host, port = server.server_address[:2]
    print(
        f"gguf_server: serving {engine.name} (n_ctx {engine.n_ctx}) on http://{host}:{port}/v1/completions", flush=True
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:  # pragma: no cover
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    sys.exit(main())
