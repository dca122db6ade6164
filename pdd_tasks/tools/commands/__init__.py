"""The ``lm-eval-pdd`` commands, one module per command (as lm-eval's ``lm_eval/_cli/``): the module of
command ``make-controlled`` is ``make_controlled``, with ``add_arguments(parser)`` (its arguments)
and ``run(args) -> int`` (its handler, returning the exit status). The dispatcher,
:mod:`pdd_tasks.tools.cli`, imports a command's module when it builds the parser, so a module
imports what its arguments need and leaves the rest (models, datasets, the report) to ``run``.

A module whose name starts with ``_`` is no command: what several commands share (``_tables``: the
frequency-table commands; ``_tuning``: the fine-tuning commands).
"""
