"""The check script's lint and type steps, as tests, so one command runs them all."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail(f"{name} is not installed: pip install -e '.[test]'")
    return found


def test_ruff() -> None:
    done = subprocess.run([_tool("ruff"), "check", "--select", "F,E9,W6,B006,UP", "--target-version", "py311",
                           "--ignore", "UP007,UP045", "mcpwrap", "tests", "bench"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy() -> None:
    done = subprocess.run([_tool("mypy"), "--ignore-missing-imports", "--cache-dir", "/tmp/mcpwrap-mypy-cache", "mcpwrap"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
