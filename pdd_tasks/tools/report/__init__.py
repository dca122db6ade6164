"""What ``lm-eval-pdd table`` and ``lm-eval-pdd report`` show of the runs read by
:mod:`pdd_tasks.tools.results`: the per-method and contamination tables (``tables``), the report's
files, HTML, Markdown, plots and leaderboards (``files``), and its contamination leaderboard
(``contamination_board``)."""
