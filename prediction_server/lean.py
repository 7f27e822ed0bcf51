"""Keep scikit-learn out of a prediction server's processes.

XGBoost and LightGBM import scikit-learn, for their scikit-learn wrappers, as soon as they
are imported whenever it is installed: about 60 MB more per worker. A prediction server
never uses those wrappers, but one image serves both roles and the trainer's `legacy` extra
(LATENCY_LEGACY_ARTIFACTS=joblib) installs scikit-learn. With the module marked absent
before either library loads, both take their path for an environment without it
(`sys.modules[name] = None` makes an import raise ImportError).
"""

from __future__ import annotations

import sys


def keep_scikit_learn_out() -> None:
    """Call before anything imports xgboost or lightgbm; a no-op if sklearn is loaded."""
    sys.modules.setdefault("sklearn", None)  # type: ignore[arg-type]
