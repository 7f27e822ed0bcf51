"""latency_client is what a router installs: it must not pull in the servers or their stack."""

from __future__ import annotations

import json
import subprocess
import sys

FORBIDDEN = (
    "training_server",
    "prediction_server",
    "shared",
    "fastapi",
    "uvicorn",
    "pydantic",
    "numpy",
    "xgboost",
    "lightgbm",
    "sqlalchemy",
)


def test_importing_latency_client_loads_no_server_module() -> None:
    code = (
        "import json, sys, latency_client, latency_client.picker, latency_client.routing; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    loaded = json.loads(
        subprocess.run(
            [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=60
        ).stdout
    )
    assert not set(FORBIDDEN) & set(loaded)
    assert {"httpx", "orjson"} <= set(loaded)
