"""Completions servers for the ``--model local-completions`` path: lm-eval-pdd's llama.cpp front for a
GGUF model (``gguf_server``, ``python -m pdd_tasks.tools.gguf_server``) and a vLLM server in a
child process (``vllm_server``, for the tests and benchmarks)."""
