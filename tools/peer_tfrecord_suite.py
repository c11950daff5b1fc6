"""Runs the `tfrecord` package's own test suite against tfrec_fast.compat.tfrecord.

The peer's sdist (PyPI, which ships its tests) is downloaded with pip, its tests/ copied to a
temporary directory, and a `tfrecord` module placed first on the path that makes the import
change for them: `tfrecord` and each submodule are tfrec_fast.compat.tfrecord's. The tests run
unchanged; the exit status is pytest's. Used by .ci/run's peers step.

    python tools/peer_tfrecord_suite.py [--version 1.14.6]
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

SHIM = '''"""`import tfrecord` -> tfrec_fast.compat.tfrecord (the import change, made for the peer's tests)."""
import importlib
import sys

_compat = importlib.import_module("tfrec_fast.compat.tfrecord")
for _name in ("example_pb2", "iterator_utils", "reader", "writer", "tools", "tools.tfrecord2idx",
              "torch", "torch.dataset"):
    sys.modules["tfrecord." + _name] = importlib.import_module("tfrec_fast.compat.tfrecord." + _name)
sys.modules["tfrecord"] = _compat
'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="1.14.6")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="peer-tfrecord-")
    try:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--no-binary",
                ":all:",
                "-d",
                work,
                f"tfrecord=={args.version}",
            ],
            check=True,
        )
        (sdist,) = glob.glob(os.path.join(work, "tfrecord-*.tar.gz"))
        with tarfile.open(sdist) as tar:
            tar.extractall(work, filter="data")
        (root,) = glob.glob(os.path.join(work, "tfrecord-*/"))
        run = os.path.join(work, "run")
        shutil.copytree(os.path.join(root, "tests"), os.path.join(run, "tests"))
        with open(os.path.join(run, "tfrecord.py"), "w") as f:
            f.write(SHIM)
        env = dict(
            os.environ,
            PYTHONPATH=os.pathsep.join(
                [run] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
            ),
        )
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
            cwd=run,
            env=env,
        ).returncode
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
