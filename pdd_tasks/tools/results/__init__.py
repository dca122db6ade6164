"""Reading lm_eval output: the runs under a path and their results JSON, every value checked
(``runs``, ``values``), what a ``pdd_contamination`` run holds (``contamination``), and the per-text
decisions of an unlabelled ``pdd_custom`` run from its samples log (``decisions``)."""
