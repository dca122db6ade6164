"""Models and files built for the controls: fine-tuning (``fine_tuning``), the controlled benchmark of
``pdd_controlled`` (``controlled``, ``lm-eval-pdd make-controlled``) and the positive controls of the
contamination tests (``ordered``, ``lm-eval-pdd make-ordered``)."""
