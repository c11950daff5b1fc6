"""_core.pyi describes the extension as built: mypy's stubtest finds nothing missing, extra
or of another kind (pybind11's own differences are in tools/stubtest_allowlist.txt)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy", reason="mypy not installed (the test extra installs it)")

ROOT = Path(__file__).resolve().parents[1]


def test_stub_matches_the_extension():
    import tfrec_fast

    package_root = str(Path(tfrec_fast.__file__).resolve().parents[1])
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(
            [package_root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        ),
    )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy.stubtest",
            "tfrec_fast._core",
            "--allowlist",
            str(ROOT / "tools" / "stubtest_allowlist.txt"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(ROOT),
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]
