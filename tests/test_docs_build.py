"""The docs site builds with ``mkdocs build --strict`` (mkdocs.yml at the root): every page in
the nav exists, every link and anchor between pages resolves, and mkdocstrings renders the API
reference from the package's numpydoc docstrings without a warning. Needs the ``docs`` extra;
skipped (marker ``docs``) where mkdocs, mkdocs-material or mkdocstrings-python is missing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.docs, pytest.mark.slow]
for _module in ("mkdocs", "material", "mkdocstrings_handlers.python"):
    pytest.importorskip(_module, reason="needs the docs extra (pip install '.[docs]')")

ROOT = Path(__file__).resolve().parents[1]


def test_mkdocs_build_strict(tmp_path):
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(tmp_path / "site"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr[-5000:]
    site = tmp_path / "site"
    assert (site / "index.html").is_file()
    # the API reference was rendered from the docstrings, not left as ":::" directives
    records = (site / "api" / "records" / "index.html").read_text(encoding="utf-8")
    assert "read_records" in records and ":::" not in records
    assert "Parameters" in records
