"""mypy finds no error in the package, with the project's [tool.mypy] settings."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

pytestmark = [
    pytest.mark.typing,
    pytest.mark.skipif(
        importlib.util.find_spec("mypy") is None, reason="needs mypy (pip install '.[test]')"
    ),
]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_mypy_finds_no_errors(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            os.path.join(ROOT, "pyproject.toml"),
            "--cache-dir",
            str(tmp_path / "mypy_cache"),
            os.path.join("src", "tfrec_fast"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
