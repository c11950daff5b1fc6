"""The C++ core builds with warnings as errors, and its own test programs pass (the CRC32C
backends; the record reader and writer, random access and the Example decoder, each a program
on the small harness of tests/cpp/check.h)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def werror_build(tmp_path_factory):
    cmake = shutil.which("cmake")
    assert cmake, "cmake is a test dependency (pip install '.[test]')"
    pybind11 = pytest.importorskip("pybind11")
    build = tmp_path_factory.mktemp("cpp-werror")
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    subprocess.run([cmake, "-S", str(ROOT), "-B", str(build), *generator,
                    "-DCMAKE_BUILD_TYPE=Release", "-DTFREC_WERROR=ON", "-DTFREC_BUILD_TESTS=ON",
                    f"-DPython_EXECUTABLE={sys.executable}",
                    f"-Dpybind11_DIR={pybind11.get_cmake_dir()}"],
                   check=True, capture_output=True, text=True)
    result = subprocess.run([cmake, "--build", str(build), "-j", str(os.cpu_count() or 2)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return build


def test_everything_builds_with_warnings_as_errors(werror_build):
    """-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Werror on the core and the bindings."""
    assert list(werror_build.glob("_core*.so")), "the extension was not built"


@pytest.mark.parametrize("backend", [None, "portable"])
def test_crc32c_program(werror_build, backend):
    """Every backend the CPU has: RFC 3720 vectors, agreement on all lengths and alignments."""
    env = dict(os.environ)
    if backend:
        env["TFREC_FAST_CRC32C"] = backend
    result = subprocess.run([str(werror_build / "test_crc32c")], env=env,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert " 0 failed" in result.stdout


@pytest.mark.parametrize("program", ["test_records", "test_random_access", "test_example_decoder"])
def test_core_program(werror_build, program):
    """Round trips, damage at each field, truncation at every byte, compressed streams, stale
    indexes, wire-format edge cases: see tests/cpp/<program>.cc."""
    result = subprocess.run([str(werror_build / program)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert " 0 failed" in result.stdout
