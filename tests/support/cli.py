"""The terminal as a user runs it: ``python -m webui …`` in a subprocess against a given data dir."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_anycode(home: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``python -m webui ARGS`` with ``ANYCODE_HOME=home`` in ``cwd`` (the repo by default); text
    output captured, 60 s at most."""
    env = dict(os.environ, ANYCODE_HOME=str(home), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "webui", *args], cwd=cwd or ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
