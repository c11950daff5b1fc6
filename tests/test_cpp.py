"""The C++ core builds with warnings as errors, and its own test programs pass."""

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
    subprocess.run(
        [
            cmake,
            "-S",
            str(ROOT),
            "-B",
            str(build),
            *generator,
            "-DCMAKE_BUILD_TYPE=Release",
            "-DTFREC_WERROR=ON",
            "-DTFREC_BUILD_TESTS=ON",
            f"-DPython_EXECUTABLE={sys.executable}",
            f"-Dpybind11_DIR={pybind11.get_cmake_dir()}",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    result = subprocess.run(
        [cmake, "--build", str(build), "-j", str(os.cpu_count() or 2)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return build


def test_everything_builds_with_warnings_as_errors(werror_build):
    """-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Werror on the core and the bindings."""
    assert list(werror_build.glob("_core*.so")), "the extension was not built"


def run_program(path, env=None, cwd=None):
    """Runs a C++ test program; on failure the assertion shows its failed checks."""
    result = subprocess.run([str(path)], env=env, cwd=cwd, capture_output=True, text=True)
    failures = "\n".join(line for line in result.stdout.splitlines() if "FAILED" in line)
    assert result.returncode == 0, (failures or result.stdout[-4000:]) + result.stderr[-4000:]
    assert " 0 failed" in result.stdout
    return result


@pytest.mark.parametrize("backend", [None, "portable"])
def test_crc32c_program(werror_build, backend):
    """Every backend the CPU has: RFC 3720 vectors, agreement on all lengths and alignments."""
    env = dict(os.environ)
    if backend:
        env["TFREC_FAST_CRC32C"] = backend
    run_program(werror_build / "test_crc32c", env=env)


@pytest.mark.parametrize(
    "program",
    [
        "test_varint",
        "test_record_reader",
        "test_record_writer",
        "test_random_access",
        "test_example_decoder",
        "test_platform",
        "test_reader_alloc",
    ],
)
def test_core_program(werror_build, program, tmp_path):
    """tests/cpp/<program>.cc: in-memory sources and sinks, damage at each field, every boundary
    (random access writes its files under TMPDIR)."""
    run_program(werror_build / program, env={**os.environ, "TMPDIR": str(tmp_path)}, cwd=tmp_path)
