"""What ``lm-eval-pdd table`` and ``lm-eval-pdd report`` show of the runs read by
:mod:`pdd_tasks.tools.results`: the per-method and contamination tables (``tables``), and the report in
stages, its data flowing one way: ``read`` (the runs), ``model`` (what the report shows, as data, with the
contamination leaderboard of ``contamination_board``), ``plots`` and ``render`` (the PNGs and the documents,
the board drawn by ``board_view``), ``write`` (the files in ``--out``)."""
