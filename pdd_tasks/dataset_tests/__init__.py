"""Dataset-level tests (was a benchmark, as a whole, in the training data?), one registry entry each.

:mod:`.core` holds the registry (:class:`~.core.DatasetTest`, :data:`~.core.DATASET_TESTS`) and what
every test shares (settings, cost check, repeats, the model's context window); each other module is one
test's entry, registered on import here, in table order.
"""

from pdd_tasks.dataset_tests import codec, exchangeability
from pdd_tasks.dataset_tests.core import DATASET_TESTS, DatasetTest, NotApplicable, TooCostly


__all__ = ["DATASET_TESTS", "DatasetTest", "NotApplicable", "TooCostly", "codec", "exchangeability"]
