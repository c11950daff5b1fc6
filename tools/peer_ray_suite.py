"""Runs Ray Data's own TFRecord test suite against tfrec_fast.ray.

Ray's wheels ship no tests and Ray publishes no sdist, so the suite is taken from Ray's
repository at the commit of the installed wheel (``ray.__commit__``):
``python/ray/data/tests/datasource/test_tfrecords.py`` (``python/ray/data/tests/`` before
Ray moved it), downloaded into a temporary directory, or given with ``--suite`` (a copy of that
file, e.g. where the repository cannot be reached). It runs unchanged; a conftest.py placed
beside it makes the import change for it (``ray.data.read_tfrecords`` and
``Dataset.write_tfrecords`` become tfrec_fast.ray's) and provides the fixtures the suite takes
from Ray's own test tree, which the wheel lacks (``ray.tests.conftest``: a local cluster per
module, on 127.0.0.1; Ray Data's ``tensor_format_context``). The exit status is pytest's; a
suite that cannot be had exits 2, never 0. Needs TensorFlow, tensorflow-metadata, crc32c and
pytest-mock, as the suite does. Used by .ci/run's peers step.

    python tools/peer_ray_suite.py [--suite FILE] [pytest arguments]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request

LOCATIONS = ("python/ray/data/tests/datasource/test_tfrecords.py",
             "python/ray/data/tests/test_tfrecords.py")
RAW = "https://raw.githubusercontent.com/ray-project/ray/{commit}/{path}"

CONFTEST = '''"""The import change for Ray's own TFRecord tests, and the fixtures they take from Ray's test
tree (not in Ray's wheel)."""
import sys
import types

import pytest
import ray
import ray.data

import tfrec_fast.ray as _ours

ray.data.read_tfrecords = _ours.read_tfrecords


def _write_tfrecords(self, path, **kwargs):
    return _ours.write_tfrecords(self, path, **kwargs)


ray.data.Dataset.write_tfrecords = _write_tfrecords


def _cluster(num_cpus):
    ray.init(num_cpus=num_cpus, include_dashboard=False, _node_ip_address="127.0.0.1",
             log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def ray_start_regular_shared():
    yield from _cluster(2)


@pytest.fixture(scope="module")
def ray_start_regular_shared_2_cpus():
    yield from _cluster(2)


def _tensor_formats():
    from ray.data._internal.tensor_extensions.arrow import FixedShapeTensorFormat
    return list(FixedShapeTensorFormat)


@pytest.fixture(params=_tensor_formats(), ids=lambda f: getattr(f, "name", str(f)))
def tensor_format_context(request):
    ctx = ray.data.DataContext.get_current()
    saved = ctx.arrow_fixed_shape_tensor_format
    ctx.arrow_fixed_shape_tensor_format = request.param
    try:
        yield request.param
    finally:
        ctx.arrow_fixed_shape_tensor_format = saved


_shim = types.ModuleType("ray.tests.conftest")
for _name in ("ray_start_regular_shared", "ray_start_regular_shared_2_cpus",
              "tensor_format_context"):
    setattr(_shim, _name, globals()[_name])
_shim.__all__ = []  # (the fixtures reach the suite from this conftest)
_package = sys.modules.get("ray.tests") or types.ModuleType("ray.tests")
_package.__path__ = getattr(_package, "__path__", [])
_package.conftest = _shim
sys.modules.setdefault("ray.tests", _package)
sys.modules["ray.tests.conftest"] = _shim
'''


def _download(commit: str, directory: str) -> str:
    """The suite at ``commit``, from the first place it is found; raises OSError if none."""
    errors = []
    for path in LOCATIONS:
        url = RAW.format(commit=commit, path=path)
        try:
            with urllib.request.urlopen(url, timeout=60) as response:
                data = response.read()
        except OSError as error:
            errors.append(f"{url}: {error}")
            continue
        target = os.path.join(directory, "test_tfrecords.py")
        with open(target, "wb") as f:
            f.write(data)
        return target
    raise OSError("; ".join(errors))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", help="a copy of Ray's test_tfrecords.py for the installed Ray "
                                        "(default: downloaded at ray.__commit__)")
    args, pytest_args = parser.parse_known_args()
    import ray

    work = tempfile.mkdtemp(prefix="peer-ray-")
    try:
        if args.suite:
            shutil.copyfile(args.suite, os.path.join(work, "test_tfrecords.py"))
        else:
            try:
                _download(ray.__commit__, work)
            except OSError as error:
                print(f"Ray {ray.__version__}'s TFRecord suite (commit {ray.__commit__}) could "
                      f"not be downloaded ({error}); pass --suite with a copy of it",
                      file=sys.stderr)
                return 2
        with open(os.path.join(work, "conftest.py"), "w") as f:
            f.write(CONFTEST)
        print(f"Ray {ray.__version__} ({ray.__commit__}): its test_tfrecords.py against "
              "tfrec_fast.ray", flush=True)
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "-W", "ignore::DeprecationWarning", "test_tfrecords.py",
                               *pytest_args], cwd=work).returncode
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
