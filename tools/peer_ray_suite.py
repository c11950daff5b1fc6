"""Runs Ray Data's own TFRecord test suite against tfrec_fast.ray, or against Ray's own reader and
writer as the baseline.

The suite is Ray's ``python/ray/data/tests/datasource/test_tfrecords.py`` (``python/ray/data/
tests/`` in older Ray). Ray's wheels ship no tests and Ray publishes no sdist, so CI cannot fetch
it: this tool is run by hand, with a copy of that file given as ``--suite FILE`` (kept out of the
project: it is Ray's code). Without ``--suite`` it tries to download the file at the installed
wheel's commit (``ray.__commit__``) from GitHub, and exits 2 (never 0) when it cannot.

The file runs unchanged. A conftest.py written beside it (in a temporary directory):

- with ``--against tfrec_fast`` (the default), makes ``ray.data.read_tfrecords`` and
  ``Dataset.write_tfrecords`` tfrec_fast.ray's; with ``--against ray`` leaves Ray's own, so the
  two runs show which tests Ray itself passes on the installed Ray;
- provides what the suite takes from Ray's test tree, which the wheel lacks
  (``ray.tests.conftest``: ``ray_start_regular_shared`` and ``ray_start_regular_shared_2_cpus``,
  a local Ray per module on 127.0.0.1 with the resources of Ray's own fixtures;
  ``tensor_format_context`` and ``restore_data_context`` of Ray Data's conftest);
- shims what Ray 2.60 removed with its tfx-bsl path, and nothing else: a stand-in
  ``TFXReadOptions`` where ``ray.data._internal.datasource.tfrecords_datasource`` has none (so
  that the import works), and ``tfx_read_options=None``, which the suite passes on every read and
  which means "not the tfx path", is dropped before the call. A ``TFXReadOptions`` object is
  passed on as it is: the reader under test says what it makes of it (Ray 2.60's: TypeError).

Needs TensorFlow, tensorflow-metadata, crc32c, pandas and pytest-mock, as the suite does. The exit
status is pytest's; ``-rA`` (passed on to pytest, as any other argument) lists every test's
outcome.

    python tools/peer_ray_suite.py --suite FILE [--against tfrec_fast|ray] [pytest arguments]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request

LOCATIONS = (
    "python/ray/data/tests/datasource/test_tfrecords.py",
    "python/ray/data/tests/test_tfrecords.py",
)
RAW = "https://raw.githubusercontent.com/ray-project/ray/{commit}/{path}"

# The readers and writers a run can be against: code run in the conftest, before the suite.
AGAINST = {
    "tfrec_fast": """
import tfrec_fast.ray as _ours

_READ = _ours.read_tfrecords


def _write_tfrecords(self, path, **kwargs):
    return _ours.write_tfrecords(self, path, **kwargs)


ray.data.Dataset.write_tfrecords = _write_tfrecords
""",
    "ray": """
_READ = ray.data.read_tfrecords  # Ray's own, and Ray's own Dataset.write_tfrecords
""",
}

CONFTEST = '''"""Ray's TFRecord tests against {against}: the shim for what Ray removed with its
tfx-bsl path, and the fixtures they take from Ray's test tree (not in Ray's wheel)."""
import functools
import sys
import types

import pytest
import ray
import ray.data
import ray.data._internal.datasource.tfrecords_datasource as _ray_tfrecords
{against_code}

class TFXReadOptions:
    """Stand-in for the class Ray removed with its tfx-bsl read path (for the suite's import)."""

    def __init__(self, batch_size=2048, auto_infer_schema=True):
        self.batch_size = batch_size
        self.auto_infer_schema = auto_infer_schema


if not hasattr(_ray_tfrecords, "TFXReadOptions"):
    _ray_tfrecords.TFXReadOptions = TFXReadOptions


@functools.wraps(_READ)
def _read_tfrecords(*args, **kwargs):
    if "tfx_read_options" in kwargs and kwargs["tfx_read_options"] is None:
        del kwargs["tfx_read_options"]  # (None: not the tfx path, the only one Ray has left)
    return _READ(*args, **kwargs)


ray.data.read_tfrecords = _read_tfrecords


def _ray(**kwargs):
    # As ray.tests.conftest's _ray_start (1 CPU and 150 MiB of object store unless told),
    # on the loopback only.
    options = dict(num_cpus=1, object_store_memory=150 << 20,
                   include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    options.update(kwargs)
    ray.init(**options)
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def ray_start_regular_shared(request):
    yield from _ray(**getattr(request, "param", {{}}))


@pytest.fixture(scope="module")
def ray_start_regular_shared_2_cpus(request):
    yield from _ray(**{{"num_cpus": 2, **getattr(request, "param", {{}})}})


@pytest.fixture
def restore_data_context():
    import copy

    saved = copy.deepcopy(ray.data.DataContext.get_current())
    yield
    ray.data.DataContext._set_current(saved)


def _tensor_formats():
    from ray.data._internal.tensor_extensions.arrow import FixedShapeTensorFormat
    return list(FixedShapeTensorFormat)


@pytest.fixture(params=_tensor_formats(), ids=lambda f: getattr(f, "value", str(f)))
def tensor_format_context(request, restore_data_context):
    ray.data.DataContext.get_current().arrow_fixed_shape_tensor_format = request.param
    yield request.param


_shim = types.ModuleType("ray.tests.conftest")
_shim.__all__ = []  # (the fixtures reach the suite from this conftest)
_package = sys.modules.get("ray.tests") or types.ModuleType("ray.tests")
_package.__path__ = getattr(_package, "__path__", [])
_package.conftest = _shim
sys.modules.setdefault("ray.tests", _package)
sys.modules["ray.tests.conftest"] = _shim
'''


def _download(commit: str, target: str) -> None:
    """The suite at ``commit`` into ``target``, from the first place it is found; raises OSError
    if none."""
    errors = []
    for path in LOCATIONS:
        url = RAW.format(commit=commit, path=path)
        try:
            with urllib.request.urlopen(url, timeout=60) as response:
                data = response.read()
        except OSError as error:
            errors.append(f"{url}: {error}")
            continue
        with open(target, "wb") as f:
            f.write(data)
        return
    raise OSError("; ".join(errors))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--suite",
        help="a copy of Ray's test_tfrecords.py (default: downloaded "
        "at ray.__commit__, where GitHub can be reached)",
    )
    parser.add_argument(
        "--against",
        choices=sorted(AGAINST),
        default="tfrec_fast",
        help="whose read_tfrecords / write_tfrecords the suite runs against "
        "(ray: Ray's own, the baseline)",
    )
    args, pytest_args = parser.parse_known_args()
    import ray

    work = tempfile.mkdtemp(prefix="peer-ray-")
    suite = os.path.join(work, "test_tfrecords.py")
    try:
        if args.suite:
            shutil.copyfile(args.suite, suite)
        else:
            try:
                _download(ray.__commit__, suite)
            except OSError as error:
                print(
                    f"Ray {ray.__version__}'s TFRecord suite (commit {ray.__commit__}) could "
                    f"not be downloaded ({error}); pass --suite with a copy of it",
                    file=sys.stderr,
                )
                return 2
        with open(os.path.join(work, "conftest.py"), "w") as f:
            f.write(CONFTEST.format(against=args.against, against_code=AGAINST[args.against]))
        print(
            f"Ray {ray.__version__} ({ray.__commit__}): its test_tfrecords.py against "
            f"{'tfrec_fast.ray' if args.against == 'tfrec_fast' else 'Ray itself'}",
            flush=True,
        )
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-W",
                "ignore::DeprecationWarning",
                "test_tfrecords.py",
                *pytest_args,
            ],
            check=False,
            cwd=work,
        ).returncode
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
