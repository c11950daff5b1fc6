"""mypy finds no error in the modules listed here, with the project's [tool.mypy] settings."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.typing,
              pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                                 reason="needs mypy (pip install '.[test]')")]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Checked modules, relative to src/tfrec_fast (to become the whole package). Next: cli.py,
# index.py and sharded.py, clean but for records.Source (it lacks RemotePath and BinaryIO) and
# example.FixedLen.kind (Optional); then records, example, encode, torch, _loader, bench.
CHECKED = [
    "__init__.py", "__main__.py", "_progress.py", "_worker_ring.py", "crc.py", "describe.py",
    "errors.py", "proto.py", "reader.py", "remote.py",
    "compat/__init__.py", "compat/tfrecord/__init__.py", "compat/tfrecord/example_pb2.py",
    "compat/tfrecord/iterator_utils.py", "compat/tfrecord/reader.py",
    "compat/tfrecord/writer.py", "compat/tfrecord/tools/__init__.py",
    "compat/tfrecord/tools/tfrecord2idx.py", "compat/tfrecord/torch/__init__.py",
    "compat/tfrecord/torch/dataset.py",
    "convert/__init__.py", "convert/_common.py", "convert/_images.py", "convert/_pipeline.py",
    "convert/arrays.py", "convert/cli.py", "convert/imagefolder.py", "convert/voc.py",
]


def test_mypy_finds_no_errors(tmp_path):
    files = [os.path.join("src", "tfrec_fast", *name.split("/")) for name in CHECKED]
    # follow-imports=silent: the types of the modules imported are used, their own errors are
    # not reported here (only the listed modules are held to this).
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", os.path.join(ROOT, "pyproject.toml"),
         "--follow-imports=silent", "--cache-dir", str(tmp_path / "mypy_cache"), *files],
        cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
