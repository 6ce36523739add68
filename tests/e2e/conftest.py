"""Shared fixtures for the end-to-end tests: the real `pagoda` binary and the real default model."""
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="session")
def pagoda_bin() -> Path:
    path = Path(os.environ.get("PAGODA_BIN", ROOT / "build" / "pagoda"))
    if not path.exists():
        pytest.fail(f"{path} does not exist: build first (scripts/build.sh) or set PAGODA_BIN")
    return path


@pytest.fixture(scope="session")
def default_model() -> Path:
    if not DEFAULT_MODEL.exists():
        pytest.fail(f"{DEFAULT_MODEL} is missing: run scripts/setup.sh")
    return DEFAULT_MODEL


@pytest.fixture(scope="session")
def run_pagoda(pagoda_bin):
    """Runs `pagoda ARGS...` and returns the CompletedProcess (text mode, never raises on rc)."""
    def run(*args, timeout=60):
        return subprocess.run([str(pagoda_bin), *map(str, args)], capture_output=True, text=True,
                              timeout=timeout)
    return run


@pytest.fixture(scope="session")
def run_pagoda_json(run_pagoda):
    """Runs pagoda, asserts success and parses stdout as JSON."""
    def run(*args):
        proc = run_pagoda(*args)
        assert proc.returncode == 0, f"pagoda {' '.join(map(str, args))} failed:\n{proc.stderr}"
        return json.loads(proc.stdout)
    return run
