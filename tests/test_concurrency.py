"""Concurrency: many readers at once, readers and writers shared between threads, and readers
that survive fork(). (That the GIL is released is tested in test_gil.py; how reading scales
with threads is measured in bench/, not asserted.)"""

from __future__ import annotations

import io
import os
import pickle
import subprocess
import sys
import threading
from collections import Counter

import pytest

import tfrec_fast

N_THREADS = 8


def numbered_records(n, tag=b"", size=lambda i: 50 + (i * 37) % 3000):
    return [tag + b"%08d:" % i + bytes([i % 251]) * size(i) for i in range(n)]


def write_file(path, records, compression=None):
    with tfrec_fast.TFRecordWriter(path, compression) as w:
        for r in records:
            w.write(r)
    return path


def run_threads(target, n, *args):
    errors = []

    def wrap(k):
        try:
            target(k, *args)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=wrap, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "threads hung"
    assert not errors, errors
    return errors


def run_child(script, *args, timeout=60):
    """Runs `script` in a fresh interpreter; a deadlock shows as a timeout, not a hung session."""
    try:
        proc = subprocess.run(
            [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as e:
        return (
            None,
            (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else e.stdout,
            (e.stderr or b"").decode() if isinstance(e.stderr, bytes) else e.stderr,
        )
    return proc.returncode, proc.stdout, proc.stderr


# ---- independent readers --------------------------------------------------------------------


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_eight_threads_same_file_and_different_files(tmp_path, compression):
    files = []
    for k in range(4):
        recs = numbered_records(1500, tag=b"f%d-" % k)
        files.append((write_file(tmp_path / f"f{k}.tfrecord", recs, compression), recs))
    expected = {str(p): recs for p, recs in files}
    single = {
        str(p): [bytes(r) for r in tfrec_fast.TFRecordReader(p, compression)] for p, _ in files
    }
    assert single == expected
    results = {}

    def work(k):
        # thread k reads file 0 (shared by all) then its own file, alternating APIs
        for path in (files[0][0], files[k % 4][0]):
            with tfrec_fast.TFRecordReader(path, compression) as r:
                if k % 2:
                    got = [bytes(x) for x in r]
                else:
                    got = [bytes(x) for b in r.iter_batches(max_records=97) for x in b]
            results[(k, str(path))] = got

    run_threads(work, N_THREADS)
    for (k, path), got in results.items():
        assert got == single[path], f"thread {k} read {path} differently"
    assert len(results) == N_THREADS * 2 - 2  # threads 0 and 4 read file 0 twice


def test_eight_threads_in_memory_and_indexed(tmp_path):
    recs = numbered_records(3000)
    path = write_file(tmp_path / "m.tfrecord", recs)
    data = path.read_bytes()
    indexed = tfrec_fast.IndexedTFRecordReader(path)
    out = {}

    def work(k):
        out[("mem", k)] = [bytes(x) for x in tfrec_fast.TFRecordReader(data)]
        idx = list(range(k, len(recs), 3))
        out[("idx", k)] = [bytes(x) for x in indexed.get_batch(idx)]
        out[("one", k)] = [bytes(indexed[i]) for i in idx[:200]]

    run_threads(work, N_THREADS)
    for k in range(N_THREADS):
        idx = list(range(k, len(recs), 3))
        assert out[("mem", k)] == recs
        assert out[("idx", k)] == [recs[i] for i in idx]
        assert out[("one", k)] == [recs[i] for i in idx[:200]]


# ---- one reader shared by threads -----------------------------------------------------------


@pytest.mark.parametrize("source_kind", ["path", "bytes", "file_like", "gzip_path"])
def test_shared_reader_delivers_every_record_exactly_once(tmp_path, source_kind):
    recs = numbered_records(20000, size=lambda i: 10 + (i * 13) % 700)
    compression = "gzip" if source_kind == "gzip_path" else None
    path = write_file(tmp_path / "shared.tfrecord", recs, compression)
    source = {
        "path": path,
        "gzip_path": path,
        "bytes": path.read_bytes(),
        "file_like": io.BytesIO(path.read_bytes()),
    }[source_kind]
    reader = tfrec_fast.TFRecordReader(source, compression, buffer_size=8192)
    got = [[] for _ in range(4)]

    def work(k):
        mine = got[k]
        while True:
            if k % 2:
                batch = reader.read_batch(max_records=1 + k * 5)
                if not len(batch):
                    return
                mine.extend(bytes(x) for x in batch)
            else:
                try:
                    mine.append(bytes(next(reader)))
                except StopIteration:
                    return

    run_threads(work, 4)
    everything = [r for part in got for r in part]
    counts = Counter(everything)
    dups = [r[:9] for r, c in counts.items() if c > 1]
    assert not dups, f"records delivered more than once: {dups[:5]}"
    missing = set(recs) - set(counts)
    assert not missing, f"{len(missing)} records never delivered"
    assert len(everything) == len(recs)
    for part in got:  # each thread sees the file in order
        assert part == sorted(part)
    assert reader.records_read == len(recs)


SHARED_READER_TELL = r"""
import faulthandler, io, sys, threading, tfrec_fast
faulthandler.dump_traceback_later(15, exit=True)
buf = io.BytesIO()
with tfrec_fast.TFRecordWriter(buf) as w:
    for i in range(20000):
        w.write(b"%08d" % i + b"x" * 3000)
source = io.BytesIO(buf.getvalue()) if sys.argv[1] == "file_like" else buf.getvalue()
reader = tfrec_fast.TFRecordReader(source, buffer_size=4096)
seen = []
def work():
    while True:
        batch = reader.read_batch(max_records=3)
        if not len(batch):
            return
        seen.extend(bytes(x[:8]) for x in batch)
        reader.tell(); reader.records_read   # progress reporting from the worker threads
threads = [threading.Thread(target=work) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
assert sorted(seen) == [b"%08d" % i for i in range(20000)]
print("ok")
"""


@pytest.mark.parametrize("source_kind", ["bytes", "file_like"])
def test_shared_reader_tell_while_other_threads_read(source_kind):
    """tell()/records_read from one thread while another reads must not deadlock."""
    rc, out, err = run_child(SHARED_READER_TELL, source_kind)
    assert rc == 0 and "ok" in (out or ""), (
        "BUG: deadlock (rc=%s) sharing a TFRecordReader over a %s between threads that call "
        "read_batch() and tell()/records_read. tell() and records_read lock RecordReader::mu_ "
        "while HOLDING the GIL (PyReader::tell -> RecordReader::tell), while the reading thread "
        "holds mu_ (GIL released) and PyFileSource::read waits for the GIL: ABBA deadlock. "
        "Fix: release the GIL before taking mu_ in tell()/records_read (or keep an atomic copy "
        "of the offset/count).\nstderr tail: %s" % (rc, source_kind, (err or "")[-1200:])
    )


# ---- one writer shared by threads -----------------------------------------------------------


def check_shared_writer_output(data, compression, n_threads, per_thread):
    got = [bytes(r) for r in tfrec_fast.TFRecordReader(data, compression)]
    assert len(got) == n_threads * per_thread, (len(got), n_threads * per_thread)
    by_thread = {}
    for r in got:
        t, i, body = r.split(b":", 2)
        assert body == bytes([int(i) % 251]) * (int(i) % 5000), "record corrupted/interleaved"
        by_thread.setdefault(int(t), []).append(int(i))
    for t, seq in by_thread.items():
        assert seq == list(range(per_thread)), f"thread {t}'s records out of order or lost"


WRITER_WORK = r"""
def work(writer, t, per_thread):
    for i in range(per_thread):
        rec = b"%d:%d:" % (t, i) + bytes([i % 251]) * (i % 5000)
        if i % 50 == 49:
            writer.write_batch([rec])
        elif i % 97 == 0:
            writer.write(rec + b"")  # fresh object
        else:
            writer.write(rec)
"""


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_shared_writer_to_path_is_safe(tmp_path, compression):
    """The writer's internal mutex makes concurrent writes safe: every record intact, none
    interleaved, each thread's records in its order, total count right."""
    ns = {}
    exec(WRITER_WORK, ns)
    per_thread = 1500
    path = tmp_path / "shared_writer.tfrecord"
    writer = tfrec_fast.TFRecordWriter(path, compression, buffer_size=64 << 10)
    run_threads(lambda t: ns["work"](writer, t, per_thread), N_THREADS)
    assert writer.records_written == N_THREADS * per_thread
    writer.close()
    check_shared_writer_output(path.read_bytes(), compression, N_THREADS, per_thread)


SHARED_WRITER_FILE_LIKE = (
    WRITER_WORK
    + r"""
import faulthandler, io, sys, threading, tfrec_fast
faulthandler.dump_traceback_later(25, exit=True)
compression = sys.argv[1] or None
for attempt in range(3 if compression else 15):  # the uncompressed race window is narrower
    buf = io.BytesIO()
    writer = tfrec_fast.TFRecordWriter(buf, compression, buffer_size=64 << 10)
    threads = [threading.Thread(target=work, args=(writer, t, 1500)) for t in range(8)]
    for t in threads: t.start()
    for t in threads: t.join()
    writer.close()
    got = list(tfrec_fast.read_records(buf.getvalue(), compression))
    assert len(got) == 8 * 1500, len(got)
print("ok")
"""
)


@pytest.mark.parametrize("compression", ["", "gzip"])
def test_shared_writer_to_file_like_does_not_deadlock(compression):
    rc, out, err = run_child(SHARED_WRITER_FILE_LIKE, compression, timeout=90)
    assert rc == 0 and "ok" in (out or ""), (
        "BUG: deadlock (rc=%s) with one TFRecordWriter on a Python file-like (io.BytesIO, "
        "compression=%r) shared by 8 threads. PyWriter::write (src/cpp/python/py_writer.cc) must never "
        "wait for RecordWriter::mu_ while holding the GIL (RecordWriter::try_write_buffered only "
        "tries the lock): a thread that holds mu_ with the GIL released (a draining write / "
        "write_batch / flush / close) needs the GIL in PySink::write: ABBA deadlock.\n"
        "stderr tail: %s" % (rc, compression, (err or "")[-1500:])
    )


# ---- fork ---------------------------------------------------------------------------------------


def fork_and_run(child_fn):
    """Runs child_fn() in a forked child; returns its pickled result (or raises its error)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.close(r)
            try:
                result = ("ok", child_fn())
            except BaseException as e:  # noqa: BLE001
                result = ("error", repr(e))
            with os.fdopen(w, "wb") as f:
                pickle.dump(result, f)
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    return pickle.loads(data)


def fork_file(tmp_path):
    # ~10 MiB: far more than the reader's 1 MiB buffer, so both sides must read(2) after the fork
    recs = numbered_records(1000, size=lambda i: 10_000)
    return write_file(tmp_path / "fork.tfrecord", recs), recs


# (A caller's own file object is not covered: it shares its offset across fork by nature.)
@pytest.mark.posix
@pytest.mark.parametrize("source", ["path", "gzip_path", "bytes"])
def test_reader_survives_fork_without_sharing_position(tmp_path, source):
    path, recs = fork_file(tmp_path)
    compression = None
    src = {"path": path, "bytes": path.read_bytes()}.get(source)
    if source == "gzip_path":
        compression = "gzip"
        src = write_file(tmp_path / "fork.tfrecord.gz", recs, "gzip")
    try:
        reader = tfrec_fast.TFRecordReader(src, compression, copy=True)
        first = [next(reader) for _ in range(10)]
        assert first == recs[:10]
        child = fork_and_run(lambda: [r[:9] for r in reader])
        assert child[0] == "ok", f"the child could not read its copy of the reader: {child[1]}"
        assert child[1] == [r[:9] for r in recs[10:]], "the child's records differ"
        try:
            parent = list(reader)
        except tfrec_fast.DataLossError as e:
            parent = e
        problem = (
            None
            if parent == recs[10:]
            else (
                parent if isinstance(parent, Exception) else f"{len(parent)} records, wrong content"
            )
        )
        assert problem is None, (
            "BUG: after a forked child read its copy of a TFRecordReader(%s), the parent's own "
            "reads are broken: %r. Parent and child share the file description, so the child's "
            "read(2)s move the parent's file offset (FileSource uses read(2) + a private pos_). "
            "Fix: read with pread(fd, dst, n, pos_) (FileSource already tracks pos_; skip() then "
            "needs no lseek), or reopen the file when getpid() changes, as "
            "IndexedTFRecordReader does." % (source, problem)
        )
    finally:
        pass


@pytest.mark.posix
def test_reader_in_child_after_parent_read_everything_else(tmp_path):
    """The reverse order: the parent reads on while the child is still alive and reading."""
    path, recs = fork_file(tmp_path)
    reader = tfrec_fast.TFRecordReader(path, copy=True)
    assert [next(reader) for _ in range(5)] == recs[:5]
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(w)
            os.read(r, 1)  # wait for the parent to finish
            ok = [x[:9] for x in reader] == [x[:9] for x in recs[5:]]
        except BaseException:  # noqa: BLE001
            ok = False
        os._exit(0 if ok else 3)
    os.close(r)
    try:
        parent = [x[:9] for x in reader]
        parent_ok = parent == [x[:9] for x in recs[5:]]
    finally:
        os.write(w, b"x")
        os.close(w)
        _, status = os.waitpid(pid, 0)
    assert parent_ok
    assert os.WEXITSTATUS(status) == 0, (
        "BUG: the forked child's copy of TFRecordReader(path) could not continue after the "
        "parent read on: they share one file offset (see "
        "test_reader_survives_fork_without_sharing_position)"
    )


@pytest.mark.posix
def test_indexed_reader_survives_fork(tmp_path):
    path, recs = fork_file(tmp_path)
    reader = tfrec_fast.IndexedTFRecordReader(path)
    assert bytes(reader[7]) == recs[7]
    child = fork_and_run(
        lambda: (
            [bytes(reader[i])[:9] for i in range(0, len(recs), 3)]
            + [bytes(x)[:9] for x in reader.get_batch([999, 0, 500])]
        )
    )
    assert child[0] == "ok", child[1]
    assert child[1] == [recs[i][:9] for i in range(0, len(recs), 3)] + [
        recs[i][:9] for i in (999, 0, 500)
    ]
    assert [bytes(reader[i]) for i in range(len(recs))] == recs
    reader.close()
