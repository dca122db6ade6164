"""The ``lm-eval-pdd`` command line (``cli``, one module per command in ``commands``) and what the
commands use: reading runs (``results``), the tables and report (``report``), the completions servers
(``servers``), the controls' builders (``builders``), the default model (``default_model``,
``cpu_dtype``), argument types (``arg_types``) and where a command writes (``outputs``)."""
