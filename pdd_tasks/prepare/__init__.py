"""What a method prepares once per run (``Method.prepare`` in :mod:`pdd_tasks.registry`), beyond the
target model's forward passes: Neighbor's neighbour texts from a masked LM (:mod:`.neighbors`),
ReCaLL's and Con-ReCall's prefixes and held-out documents (:mod:`.recall_prefixes`), and Small-Ref's
reference-model scores with their cache (:mod:`.small_ref`)."""
