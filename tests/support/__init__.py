"""What the tests share besides fixtures (those stay in ``tests/conftest.py``): builders, constants and
runners, imported as ``from support.<module> import ...`` (``pythonpath = ["tests"]`` in
``pyproject.toml``).

- :mod:`support.harness`: the repository's paths, WikiMIA rows, and the real ``lm_eval`` and
  ``lm-eval-pdd`` command lines (``run_lm_eval``, ``run_lm_eval_pdd``, ``harness_args``) and their
  output files;
- :mod:`support.in_process`: a command line's entry point run in the test process, read as a process;
- :mod:`support.models`: the tiny fixture models, their training and frequency tables;
- :mod:`support.bad_input`: rows and files of texts, a ``pdd_custom`` run, and ``assert_refused``;
- :mod:`support.results`: a hand-made contamination results JSON and a real ``pdd_wikimia_32`` run;
- :mod:`support.completions`: real completions servers on loopback;
- :mod:`support.vllm`: vLLM's output structures and an engine played by a transformers model;
- :mod:`support.dataset_tests`, :mod:`support.standard_tasks`, :mod:`support.tables`: the dataset-level
  tests' task builder, stock lm-eval tasks offline, and the frequency-table tests' helpers.
"""
