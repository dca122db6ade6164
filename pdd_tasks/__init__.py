"""lm-eval-pdd: pretraining-data detection as lm-evaluation-harness tasks.

registry: the methods; tasks/: task classes; backends/: per-token capture per backend; loading/: data
readers; freq/: DC-PDD reference frequency tables; tools/: the lm-eval-pdd commands and servers;
lm_eval_patches/: every change to lm-eval's behaviour (applied when a pdd task is built, or first by
``python -m pdd_tasks.lm_eval_patches``, lm-eval's command line with them).
See docs/architecture.md.
"""
