"""Keep scikit-learn out of a server process that does not use it.

XGBoost and LightGBM import scikit-learn, for their scikit-learn wrappers, as soon as they
are imported whenever it is installed: about 60 MB more per process, and joblib's
semaphores in /dev/shm. Only a trainer writing llm-d's legacy files
(LATENCY_LEGACY_ARTIFACTS=joblib) uses those wrappers, but one image serves both roles and
the `legacy` extra installs scikit-learn. With the module marked absent before either
library loads, both take their path for an environment without it (`sys.modules[name] =
None` makes an import raise ImportError). Called by the servers' entry points only: a
process that imports our modules as a library (the tests) is left alone.
"""

from __future__ import annotations

import sys


def keep_scikit_learn_out() -> None:
    """Call before anything imports xgboost or lightgbm; a no-op if sklearn is loaded."""
    sys.modules.setdefault("sklearn", None)  # type: ignore[arg-type]
