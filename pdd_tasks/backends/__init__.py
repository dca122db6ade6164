"""Per-token log-prob capture for each lm-eval backend (hf, vllm, local-completions)."""
