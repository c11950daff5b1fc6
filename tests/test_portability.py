"""What differs between operating systems, checked here on Linux: no fork (Windows), processes
looked at without signals, drive-letter paths, NUL characters in paths, files not inherited."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import _oracle
import pytest

import tfrec_fast
from tfrec_fast import _platform
from tfrec_fast.storage import is_url


def run_python(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_package_imports_and_reads_where_there_is_no_fork(tmp_path):
    """Windows has neither os.fork nor os.register_at_fork: every module must import without
    them (index.py registered its fork handler unconditionally: AttributeError on import)."""
    path = tmp_path / "a.tfrecord"
    path.write_bytes(_oracle.build_file([b"one", b"two", b"three"]))
    result = run_python(
        """
        import importlib, os, pkgutil, sys
        try:  # torch asks sys.platform, not os, whether there is fork: import it as it is
            import torch.utils.data
        except ImportError:
            pass
        del os.fork, os.register_at_fork
        import tfrec_fast
        failed = []
        for info in pkgutil.walk_packages(tfrec_fast.__path__, "tfrec_fast."):
            if info.name.endswith("__main__"):
                continue
            try:
                importlib.import_module(info.name)
            except ImportError:
                pass  # an optional dependency (ray, pyarrow, ...) that is not installed
            except Exception as e:
                failed.append(f"{info.name}: {e!r}")
        assert not failed, failed
        reader = tfrec_fast.IndexedTFRecordReader(sys.argv[1])
        assert [bytes(reader[i]) for i in range(3)] == [b"one", b"two", b"three"]
        print("ok")
    """,
        str(path),
    )
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-3000:]


def test_process_alive_looks_without_harming():
    """os.kill(pid, 0) would terminate the process on Windows; process_alive must only look."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        assert _platform.process_alive(child.pid)
        assert child.poll() is None, "looking at the process ended it"
    finally:
        child.kill()
        child.wait()
    assert not _platform.process_alive(child.pid)
    assert _platform.process_alive(os.getpid())


def test_after_fork_in_child_is_a_no_op_without_fork(monkeypatch):
    calls = []
    monkeypatch.delattr(os, "register_at_fork")
    _platform.after_fork_in_child(lambda: calls.append(1))
    assert calls == []


@pytest.mark.parametrize(
    "path",
    [
        r"C:\data\train.tfrecord",
        "C:/data/train.tfrecord",
        r"d:relative\x.tfrecord",
        r"\\server\share\x.tfrecord",
        r"C:\a::b\x.tfrecord",
    ],
)
def test_windows_paths_are_not_urls(path):
    assert not is_url(path)


def test_a_nul_character_in_a_path_is_a_value_error(tmp_path):
    """The OS would read the path only up to the NUL: another file. Python's open() says
    ValueError; so do the reader, the writer and the index (instead of opening 'a')."""
    real = tmp_path / "a"
    real.write_bytes(_oracle.build_file([b"the wrong file"]))
    bad = str(real) + "\0.tfrecord"
    with pytest.raises(ValueError, match="null"):
        list(tfrec_fast.read_records(bad))
    with pytest.raises(ValueError, match="null"):
        tfrec_fast.TFRecordReader(bad, compression=None)
    with pytest.raises(ValueError, match="null"):
        tfrec_fast.IndexedTFRecordReader(bad, ([0], [len(real.read_bytes())]))
    with pytest.raises(ValueError, match="null"):
        tfrec_fast.TFRecordWriter(bad)
    assert real.read_bytes() == _oracle.build_file([b"the wrong file"])


@pytest.mark.linux
def test_files_are_not_inherited_by_child_processes(tmp_path):
    """Every file a reader, an indexed reader or a writer holds is close-on-exec, so no child
    process inherits it (on Windows: handles created non-inheritable)."""
    import fcntl

    data = tmp_path / "in.tfrecord"
    data.write_bytes(_oracle.build_file([b"x" * 100] * 3))
    reader = tfrec_fast.TFRecordReader(str(data), compression=None)
    next(iter(reader))
    indexed = tfrec_fast.IndexedTFRecordReader(str(data))
    writer = tfrec_fast.TFRecordWriter(str(tmp_path / "out.tfrecord"))
    try:
        ours = {}
        for name in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{name}")
            except OSError:
                continue
            if target.startswith(str(tmp_path)):
                ours[int(name)] = target
        assert sorted(ours.values()) == sorted([str(data)] * 2 + [str(tmp_path / "out.tfrecord")])
        inherited = [
            t for fd, t in ours.items() if not fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
        ]
        assert inherited == []
    finally:
        writer.close()
        indexed.close()
        reader.close()
