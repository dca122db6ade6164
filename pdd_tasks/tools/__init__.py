"""The lm-eval-pdd commands, the GGUF completions server, the controlled benchmark builder."""
