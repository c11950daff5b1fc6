"""num_threads / deterministic on the readers (tfrec_fast._pipeline): every record exactly once and
in file order, errors in order with their file, record index and offset, bounded work in
flight, no thread left behind by a consumer that stops early, none inherited by a fork, and
the recycled batch buffers (BufferPool) never overwriting memory that is still viewed."""

from __future__ import annotations

import gc
import multiprocessing
import os
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tfrec_fast as tfr
from tfrec_fast import _core, _pipeline

SIZES = {"small": 16, "medium": 5000, "large": 150_000}
SPEC = {"i": tfr.FixedLen((), "int64"), "pad": tfr.FixedLen((), "bytes")}


def _pad(i: int, size: int) -> bytes:
    return bytes([i % 251]) * size


def _write(path, first: int, n: int, size: int, compression=None, examples=True) -> list:
    """n records numbered first.. (Examples {i, pad} or raw payloads); returns the payloads."""
    records = []
    with tfr.TFRecordWriter(str(path), compression) as w:
        for i in range(first, first + n):
            rec = (
                tfr.encode_example({"i": i, "pad": _pad(i, size)})
                if examples
                else i.to_bytes(8, "little") + _pad(i, size)
            )
            w.write(rec)
            records.append(rec)
    return records


def _files(tmp_path, counts, size, compression=None, examples=True):
    paths, records, first = [], [], 0
    for k, n in enumerate(counts):
        p = tmp_path / f"part-{k}.tfrecord"
        records += _write(p, first, n, size, compression, examples)
        paths.append(str(p))
        first += n
    return paths, records


def _ours() -> list:
    # (not tfrec_fast.tfds's image-decoding pool, which lives as long as the process)
    return [
        t
        for t in threading.enumerate()
        if t.name.startswith("tfrec_fast") and not t.name.startswith("tfrec_fast.tfds")
    ]


@pytest.fixture(autouse=True)
def no_threads_left():
    """Every test ends with none of the readers' threads alive."""
    yield
    gc.collect()
    deadline = time.monotonic() + 10
    while _ours() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _ours(), f"threads left behind: {_ours()}"


# ---- every record once, in file order ------------------------------------------------------


@pytest.mark.parametrize("num_threads", [1, 2, 4])
@pytest.mark.parametrize("compression", [None, "gzip"])
@pytest.mark.parametrize("size", sorted(SIZES))
def test_read_records_in_file_order(tmp_path, num_threads, compression, size):
    paths, records = _files(tmp_path, [300, 0, 57, 211], SIZES[size], compression, False)
    got = [bytes(r) for r in tfr.read_records(paths, compression, num_threads=num_threads)]
    assert got == records


@pytest.mark.parametrize("num_threads", [1, 2, 4])
@pytest.mark.parametrize("compression", [None, "zlib"])
@pytest.mark.parametrize("size", sorted(SIZES))
def test_read_examples_in_file_order(tmp_path, num_threads, compression, size):
    counts = [300, 0, 57, 211]
    paths, _ = _files(tmp_path, counts, SIZES[size], compression)
    batches = list(
        tfr.read_examples(
            paths, SPEC, batch_size=100, compression=compression, num_threads=num_threads
        )
    )
    assert [len(b["i"]) for b in batches] == [100] * 5 + [68]
    ids = np.concatenate([b["i"] for b in batches])
    assert ids.tolist() == list(range(sum(counts)))
    for b in batches:  # the bytes column views the right records' bytes
        assert b["pad"].to_list() == [_pad(i, SIZES[size]) for i in b["i"].tolist()]


@pytest.mark.parametrize("num_threads", [1, 2, 4])
def test_read_batches_and_iter_batches_in_order(tmp_path, num_threads):
    paths, records = _files(tmp_path, [500, 3, 200], 100, examples=False)
    batches = list(tfr.read_batches(paths, max_records=64, num_threads=num_threads))
    assert all(0 < len(b) <= 64 for b in batches)
    assert [bytes(r) for b in batches for r in b] == records
    with tfr.TFRecordReader(paths[0]) as reader:
        got = [
            bytes(r) for b in reader.iter_batches(max_records=7, num_threads=num_threads) for r in b
        ]
    assert got == records[:500]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    counts=st.lists(st.integers(0, 120), min_size=1, max_size=4),
    batch_size=st.integers(1, 150),
    num_threads=st.integers(1, 5),
    deterministic=st.booleans(),
)
def test_read_examples_any_batching(
    tmp_path_factory, counts, batch_size, num_threads, deterministic
):
    paths, _ = _files(tmp_path_factory.mktemp("h"), counts, 30)
    batches = list(
        tfr.read_examples(
            paths, SPEC, batch_size=batch_size, num_threads=num_threads, deterministic=deterministic
        )
    )
    ids = [b["i"].tolist() for b in batches]
    flat = sorted(i for part in ids for i in part)
    assert flat == list(range(sum(counts)))  # every record exactly once
    assert all(len(part) == batch_size for part in ids[:-1])
    if deterministic:
        assert [i for part in ids for i in part] == list(range(sum(counts)))
    else:  # each batch is still a run of consecutive records
        assert all(part == list(range(part[0], part[0] + len(part))) for part in ids)


def test_not_deterministic_yields_every_batch(tmp_path):
    paths, _ = _files(tmp_path, [2000], 200)
    batches = list(
        tfr.read_examples(paths, SPEC, batch_size=50, num_threads=3, deterministic=False)
    )
    assert sorted(np.concatenate([b["i"] for b in batches]).tolist()) == list(range(2000))


# ---- errors, in order ------------------------------------------------------------------------


def _damage(path, record: int):
    """Flips a payload byte of record `record` (a data checksum error); returns its offset."""
    offsets, _ = tfr.create_index(str(path))
    with open(path, "rb") as f:
        data = bytearray(f.read())
    data[int(offsets[record]) + 12 + 3] ^= 0xFF
    with open(path, "wb") as f:
        f.write(bytes(data))
    return int(offsets[record])


@pytest.mark.parametrize("num_threads", [1, 2, 4])
def test_read_records_damage_after_the_records_before_it(tmp_path, num_threads):
    paths, records = _files(tmp_path, [100, 100, 100], 2000, examples=False)
    offset = _damage(paths[1], 37)
    got = []
    with pytest.raises(tfr.DataLossError) as info:
        for r in tfr.read_records(paths, num_threads=num_threads):
            got.append(bytes(r))
    assert got == records[:137]
    e = info.value
    assert (e.path, e.record_index, e.offset, e.reason) == (paths[1], 37, offset, "data_checksum")


@pytest.mark.parametrize("num_threads", [1, 2, 4])
@pytest.mark.parametrize("deterministic", [True, False])
def test_read_examples_damage_after_the_records_before_it(tmp_path, num_threads, deterministic):
    paths, _ = _files(tmp_path, [100, 100], 500)
    offset = _damage(paths[1], 40)
    got = []
    with pytest.raises(tfr.DataLossError) as info:
        for b in tfr.read_examples(
            paths, SPEC, batch_size=32, num_threads=num_threads, deterministic=deterministic
        ):
            got.extend(b["i"].tolist())
    assert sorted(got) == list(range(140))  # the short batch before the damage too
    e = info.value
    assert (e.path, e.record_index, e.offset) == (paths[1], 40, offset)


@pytest.mark.parametrize("num_threads", [1, 2, 4])
@pytest.mark.parametrize("deterministic", [True, False])
def test_read_examples_parse_error_in_order(tmp_path, num_threads, deterministic):
    paths, _ = _files(tmp_path, [100], 100)
    with tfr.TFRecordWriter(str(tmp_path / "bad.tfrecord")) as w:  # record 5 lacks "i"
        for i in range(100, 110):
            w.write(
                tfr.encode_example({"pad": b"x"} if i == 105 else {"i": i, "pad": _pad(i, 100)})
            )
    paths.append(str(tmp_path / "bad.tfrecord"))
    got = []
    with pytest.raises(tfr.ExampleParseError) as info:
        for b in tfr.read_examples(
            paths, SPEC, batch_size=10, num_threads=num_threads, deterministic=deterministic
        ):
            got.extend(b["i"].tolist())
    assert sorted(got) == list(range(100))
    assert (info.value.path, info.value.record_index, info.value.feature) == (paths[1], 5, "i")


def test_error_of_a_later_file_waits_for_the_earlier_files(tmp_path):
    paths, records = _files(tmp_path, [50, 50, 50, 50], 100, examples=False)
    _damage(paths[3], 0)
    got = []
    with pytest.raises(tfr.DataLossError) as info:
        for r in tfr.read_records(paths, num_threads=4):
            got.append(bytes(r))
    assert got == records[:150] and info.value.path == paths[3]


def test_work_error_of_a_later_item_waits_for_the_earlier_ones():
    def work(i):
        if i == 7:
            raise KeyError("seven")
        time.sleep(0.02 if i < 7 else 0)  # the later items finish first
        return i

    for deterministic in (True, False):
        for size_of in (_pipeline._alone, lambda i: 1 << 20):  # alone, or in bundles of 4
            got = []
            with pytest.raises(KeyError):
                for x in _pipeline.ordered(
                    work, range(20), 4, deterministic=deterministic, size_of=size_of
                ):
                    got.append(x)
            assert sorted(got) == list(range(7))


# ---- bounded, and no thread left behind ----------------------------------------------------


def test_at_most_num_threads_plus_one_in_flight():
    lock = threading.Lock()
    state = {"read": 0, "consumed": 0, "most": 0}

    def items():
        for i in range(200):
            with lock:
                state["read"] += 1
                state["most"] = max(state["most"], state["read"] - state["consumed"])
            yield i

    for _ in _pipeline.ordered(lambda i: i, items(), 3):
        time.sleep(0.001)
        with lock:
            state["consumed"] += 1
    assert state["most"] <= 3 + 1 + 1  # in flight, plus the one the consumer holds


@pytest.mark.parametrize("how", ["close", "drop", "raise", "break"])
def test_early_stop_leaves_no_thread(tmp_path, how):
    paths, _ = _files(tmp_path, [3000, 3000], 1000)
    it = tfr.read_examples(paths, SPEC, batch_size=16, num_threads=3)
    next(it)
    assert _ours()
    if how == "close":
        it.close()
    elif how == "drop":
        del it
    elif how == "raise":
        with pytest.raises(ZeroDivisionError):
            for _ in it:
                raise ZeroDivisionError
        it.close()
    else:
        for _ in it:
            break
        del it
    gc.collect()
    assert not _ours()


@pytest.mark.parametrize("fn", ["read_records", "read_batches"])
def test_early_stop_of_several_files_leaves_no_thread(tmp_path, fn):
    paths, _ = _files(tmp_path, [14000] * 3, 1000, examples=False)  # > 3 bundles a file
    it = iter(getattr(tfr, fn)(paths, num_threads=4))
    next(it)
    assert len(_ours()) == 3  # a thread per file, each waiting for room
    del it
    gc.collect()
    assert not _ours()


def test_no_thread_before_the_first_next(tmp_path):
    paths, _ = _files(tmp_path, [10], 10)
    it = tfr.read_examples(paths, SPEC, num_threads=4)
    assert not _ours()
    assert len(list(it)) == 1


def _child_iterates(it, queue):
    try:
        next(it)
        queue.put("no error")
    except RuntimeError as e:
        queue.put(str(e))


def _child_reads(paths, queue):
    n = sum(len(b["i"]) for b in tfr.read_examples(paths, SPEC, batch_size=10, num_threads=2))
    queue.put(n)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_fork_safe(tmp_path):
    paths, _ = _files(tmp_path, [500], 100)
    it = tfr.read_examples(paths, SPEC, batch_size=10, num_threads=2)
    next(it)
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    for target, args in ((_child_iterates, (it, queue)), (_child_reads, (paths, queue))):
        child = ctx.Process(target=target, args=args)
        child.start()
        child.join(60)
        assert child.exitcode == 0
    assert "another process" in queue.get(timeout=5)
    assert queue.get(timeout=5) == 500
    assert sum(len(b["i"]) for b in it) == 490  # the parent goes on


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_num_threads_checked(bad):
    with pytest.raises(ValueError):
        tfr.read_examples(b"", SPEC, num_threads=bad)
    with pytest.raises(ValueError):
        tfr.read_records(b"", num_threads=bad)


def test_default_threads(monkeypatch):
    assert 1 <= _pipeline.default_threads() <= 4
    for cores, want in [(1, 1), (2, 1), (3, 1), (4, 2), (8, 4), (64, 4)]:
        monkeypatch.setattr(
            _pipeline.os, "sched_getaffinity", lambda pid, n=cores: set(range(n)), raising=False
        )
        assert _pipeline.default_threads() == want


# ---- recycled buffers ---------------------------------------------------------------------


@pytest.mark.parametrize("num_threads", [1, 3])
def test_recycled_buffers_never_overwrite_what_is_viewed(tmp_path, num_threads):
    paths, _ = _files(tmp_path, [400], 60_000)
    kept = []
    for k, b in enumerate(tfr.read_examples(paths, SPEC, batch_size=8, num_threads=num_threads)):
        if k % 3 == 0:  # keep some batches' views alive, let the others go back to the pool
            kept.append((b["i"].copy(), b["pad"][0], np.asarray(b["pad"].values)))
    for ids, first, values in kept:
        assert bytes(first) == _pad(int(ids[0]), 60_000)
        assert values[:10].tolist() == list(values[:10])  # still readable


def test_later_calls_reuse_buffers_and_never_overwrite_an_earlier_calls_batches(tmp_path):
    from tfrec_fast import _buffers

    paths, _ = _files(tmp_path, [64], 60_000)
    held = next(iter(tfr.read_examples(paths, SPEC, batch_size=16)))  # a batch of call 1, kept
    want = [bytes(held["pad"][i]) for i in range(16)]
    for _ in range(3):  # later calls, their batches let go: their buffers are kept for the next
        assert sum(len(b["i"]) for b in tfr.read_examples(paths, SPEC, batch_size=16)) == 64
    pool = _buffers.shared_pool()
    assert 0 < pool.kept_bytes <= pool.max_bytes == _buffers.SHARED_BUFFER_BYTES
    assert [bytes(held["pad"][i]) for i in range(16)] == want
    assert held["i"].tolist() == list(range(16))


def test_buffer_pool_keeps_at_most_its_bytes(tmp_path):
    paths, records = _files(tmp_path, [200], 50_000, examples=False)
    pool = _core.BufferPool(100, max_bytes=3 << 20)
    with tfr.TFRecordReader(paths[0]) as reader:
        reader.set_buffer_pool(pool)
        batches = [reader.read_batch(max_records=20) for _ in range(10)]  # ~1 MB each
    assert [bytes(r) for b in batches for r in b] == records
    del batches
    assert 0 < pool.kept_bytes <= 3 << 20 and pool.max_bytes == 3 << 20


@pytest.mark.linux
def test_buffer_pool_keeps_buffers_past_its_hot_bytes_lazily_and_reuses_them_intact(tmp_path):
    paths, records = _files(tmp_path, [200], 50_000, examples=False)
    pool = _core.BufferPool(100, max_bytes=16 << 20, hot_bytes=1 << 20)
    assert (pool.max_bytes, pool.hot_bytes) == (16 << 20, 1 << 20)
    for _ in range(3):  # the second and third pass write into buffers the OS may have taken back
        with tfr.TFRecordReader(paths[0]) as reader:
            reader.set_buffer_pool(pool)
            batches = [reader.read_batch(max_records=20) for _ in range(10)]  # ~1 MB each
        assert [bytes(r) for b in batches for r in b] == records
        del batches
        assert 1 << 20 < pool.kept_bytes <= 16 << 20  # kept past the hot bytes (MADV_FREE)


def test_buffer_pool_never_gives_a_small_batch_a_far_larger_buffer(tmp_path):
    paths, records = _files(tmp_path, [40], 100_000, examples=False)
    pool = _core.BufferPool(8)
    with tfr.TFRecordReader(paths[0]) as reader:
        reader.set_buffer_pool(pool)
        reader.read_batch(max_records=40)  # ~4 MB, dropped: back to the pool
    big = pool.kept_bytes
    assert big >= 4_000_000
    small = tfr.RecordBatch.from_records([b"x" * 100] * 10)
    joined_small = tfr.RecordBatch.concat([small, small], pool)  # 2 KB: a buffer of its own
    assert pool.kept_bytes == big
    assert [bytes(r) for r in joined_small] == [b"x" * 100] * 20
    joined = tfr.RecordBatch.concat([tfr.RecordBatch.from_records(records[:30])], pool)
    assert pool.kept_bytes == 0  # ~3 MB: the kept ~4 MB buffer fits it
    assert [bytes(r) for r in joined] == records[:30]


def test_indexed_reader_batches_reuse_the_shared_buffers(tmp_path, monkeypatch):
    from tfrec_fast import _buffers

    monkeypatch.setattr(_buffers, "_POOL", None)  # a new shared pool: none of other tests' buffers
    paths, records = _files(tmp_path, [20], 200_000, examples=False)
    pool = _buffers.shared_pool()
    reader = tfr.IndexedTFRecordReader(paths[0])
    first = reader.get_batch(range(20))
    kept = pool.kept_bytes
    del first  # its ~4 MB buffer goes back to the process's pool...
    assert pool.kept_bytes >= kept + 4_000_000
    again = reader.get_batch(list(range(19, -1, -1)))  # ...and holds the next batch
    assert pool.kept_bytes == kept
    assert [bytes(r) for r in again] == records[::-1]


def test_a_full_buffer_pool_lets_go_of_its_oldest_buffers_for_a_new_one():
    pool = _core.BufferPool(100, max_bytes=3 << 20)
    mib = 1 << 20

    def batch_of(n):  # a batch whose buffer (of n bytes, if new) comes from the pool
        return tfr.RecordBatch.concat([tfr.RecordBatch.from_records([b"x" * n])], pool)

    first = [batch_of(mib) for _ in range(3)]
    del first
    assert pool.kept_bytes == 3 * mib  # full
    larger = batch_of(3 * mib // 2)  # none of the kept ones holds it: a new buffer
    assert pool.kept_bytes == 3 * mib
    del larger  # kept, in place of the two oldest
    assert pool.kept_bytes == 3 * mib - 2 * mib + 3 * mib // 2
    again = [batch_of(mib), batch_of(mib)]  # the 1 MiB one kept, then the newer 1.5 MiB one
    assert pool.kept_bytes == 0
    assert [bytes(r) for b in again for r in b] == [b"x" * mib] * 2
    assert batch_of(4 * mib) is not None and pool.kept_bytes == 0  # over max_bytes: never kept


def test_a_pool_full_by_count_lets_go_of_one_buffer_for_a_new_one():
    pool = _core.BufferPool(4)
    mib = 1 << 20

    def batch_of(n):
        return tfr.RecordBatch.concat([tfr.RecordBatch.from_records([b"x" * n])], pool)

    first = [batch_of(4 * mib) for _ in range(4)]
    del first
    assert pool.kept_bytes == 16 * mib  # full: 4 buffers
    smaller = batch_of(mib)  # far smaller than the kept ones: a new buffer
    assert pool.kept_bytes == 16 * mib
    del smaller
    assert pool.kept_bytes == 12 * mib + mib  # the oldest let go of, the other three kept


def test_buffer_pool_hot_bytes_never_exceed_max_bytes():
    assert _core.BufferPool(4, max_bytes=1 << 20).hot_bytes == 1 << 20
    assert _core.BufferPool(4, max_bytes=1 << 20, hot_bytes=8 << 20).hot_bytes == 1 << 20


def test_buffer_pool_keeps_at_most_its_size(tmp_path):
    paths, records = _files(tmp_path, [300], 50_000, examples=False)
    pool = _core.BufferPool(2)
    with tfr.TFRecordReader(paths[0]) as reader:
        reader.set_buffer_pool(pool)
        batches = [reader.read_batch(max_records=10) for _ in range(30)]
    assert [bytes(r) for b in batches for r in b] == records
    assert pool.max_buffers == 2
    addresses = set()
    with tfr.TFRecordReader(paths[0]) as reader:  # dropped at once: two buffers take turns
        reader.set_buffer_pool(pool)
        for _ in range(10):
            addresses.add(reader.read_batch(max_records=10).data.ctypes.data)
    assert len(addresses) <= 2


# ---- small records: checksums of a group of records at once -------------------------------


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(0, 300), min_size=1, max_size=40), data=st.data())
def test_grouped_checksums_find_each_damaged_byte(sizes, data):
    """Records are checked eight at a time (headers, then payloads, as interleaved streams): a
    flipped byte anywhere in any record is reported at that record, after all before it."""
    import io

    buf = io.BytesIO()
    with tfr.TFRecordWriter(buf) as w:
        records = [bytes([k % 256]) * n for k, n in enumerate(sizes)]
        for r in records:
            w.write(r)
    raw = bytearray(buf.getvalue())
    starts = np.cumsum([0] + [16 + n for n in sizes])
    victim = data.draw(st.integers(0, len(sizes) - 1))
    at = data.draw(st.integers(int(starts[victim]), int(starts[victim + 1]) - 1))
    raw[at] ^= 1 << data.draw(st.integers(0, 7))
    got = []
    with pytest.raises(tfr.DataLossError) as info:
        for r in tfr.read_records(bytes(raw), num_threads=1):
            got.append(bytes(r))
    assert got == records[:victim]
    assert (info.value.record_index, info.value.offset) == (victim, int(starts[victim]))


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 30), max_size=8), size=st.integers(1, 25), drop_last=st.booleans()
)
def test_rebatch_keeps_order_and_copies_no_lone_short_batch(sizes, size, drop_last):
    from tfrec_fast import _loader

    batches, k = [], 0
    for n in sizes:
        batches.append(tfr.RecordBatch.from_records([b"%d" % i for i in range(k, k + n)]))
        k += n
    out = list(_loader.rebatch(iter(batches), size, drop_last))
    flat = [bytes(r) for b in out for r in b]
    want = [b"%d" % i for i in range(k)]
    assert flat == (want[: k - k % size] if drop_last else want)
    assert all(len(b) == size for b in out[:-1]) and all(len(b) for b in out)
    nonempty = [b for b in batches if len(b)]
    if len(nonempty) == 1 and 0 < len(nonempty[0]) <= size and not drop_last:
        assert out[0] is nonempty[0]  # a lone short batch (a small file's tail) goes out whole


def test_concat_keeps_records_and_positions(tmp_path):
    paths, records = _files(tmp_path, [7, 0, 5], 3000, examples=False)
    parts = [b for p in paths for b in tfr.read_batches(p, max_records=3, num_threads=1)]
    pool = _core.BufferPool(2)
    joined = tfr.RecordBatch.concat(parts, pool)
    assert [bytes(r) for r in joined] == records
    assert joined.positions.tolist() == [x for b in parts for x in b.positions.tolist()]
    assert len(tfr.RecordBatch.concat([])) == 0
    del joined  # its buffer goes back to the pool, and serves a batch of the same size again
    again = tfr.RecordBatch.concat(parts, pool)
    assert [bytes(r) for r in again] == records


# ---- main's threads tests (its _parallel.read_ahead/parallel_map became _pipeline's) -----------

SPEC3 = {"id": tfr.FixedLen((), "int64"), "tags": tfr.VarLen("bytes"), "vec": tfr.VarLen("float32")}


def write_files(tmp_path, files=3, per_file=37, compression=None):
    paths = []
    for f in range(files):
        path = str(tmp_path / f"part-{f}.tfrecord")
        with tfr.TFRecordWriter(path, compression) as w:
            for i in range(per_file):
                n = f * per_file + i
                w.write_example(
                    {
                        "id": [n],
                        "tags": tfr.Bytes([b"t%d" % n] * (n % 3)),
                        "vec": tfr.Floats([n / 2] * (n % 4)),
                    }
                )
        paths.append(path)
    return paths


def flatten(batches):
    ids, tags, vecs = [], [], []
    for cols in batches:
        ids += cols["id"].tolist()
        tags += cols["tags"].to_list()
        vecs += cols["vec"].to_list()
    return ids, tags, vecs


def tfrec_threads():
    # (not tfrec_fast.tfds's image-decoding pool, which lives as long as the process)
    return [
        t
        for t in threading.enumerate()
        if t.name.startswith("tfrec_fast") and not t.name.startswith("tfrec_fast.tfds")
    ]


@pytest.mark.parametrize("compression", [None, "gzip"])
@pytest.mark.parametrize("threads", [2, 4])
def test_read_examples_same_as_one_thread(tmp_path, compression, threads):
    paths = write_files(tmp_path, compression=compression)
    one = flatten(
        tfr.read_examples(paths, SPEC3, batch_size=10, num_threads=1, compression=compression)
    )
    many = flatten(
        tfr.read_examples(paths, SPEC3, batch_size=10, num_threads=threads, compression=compression)
    )
    assert many == one
    assert one[0] == list(range(111))


def test_not_deterministic_gives_every_batch_once(tmp_path):
    paths = write_files(tmp_path, files=4)
    ids = flatten(
        tfr.read_examples(paths, SPEC3, batch_size=7, num_threads=4, deterministic=False)
    )[0]
    assert sorted(ids) == list(range(148))


def test_names_only_spec_with_threads(tmp_path):
    paths = write_files(tmp_path)
    got = [c["id"].to_list() for c in tfr.read_examples(paths, ["id"], batch_size=5, num_threads=3)]
    assert [v for row in got for (v,) in row] == list(range(111))


def test_damage_comes_after_the_batches_before_it(tmp_path):
    paths = write_files(tmp_path)
    with open(paths[1], "r+b") as f:  # the data CRC of part-1's last record
        f.seek(-2, 2)
        byte = f.read(1)
        f.seek(-2, 2)
        f.write(bytes([byte[0] ^ 1]))
    seen = []
    with pytest.raises(tfr.DataLossError) as info:
        for cols in tfr.read_examples(paths, SPEC3, batch_size=10, num_threads=4):
            seen += cols["id"].tolist()
    assert info.value.path.endswith("part-1.tfrecord") and info.value.record_index == 36
    assert seen == list(range(len(seen))) and len(seen) >= 60


def test_bad_record_names_file_and_index_with_threads(tmp_path):
    write_files(tmp_path, files=2)
    with tfr.TFRecordWriter(str(tmp_path / "part-2.tfrecord")) as w:
        w.write_example({"id": [1]})
        w.write_example({"id": [0.5]})
    with pytest.raises(tfr.ExampleParseError) as info:
        list(
            tfr.read_examples(str(tmp_path / "part-*.tfrecord"), SPEC3, batch_size=4, num_threads=4)
        )
    assert info.value.path.endswith("part-2.tfrecord") and info.value.record_index == 1


def test_stopping_early_leaves_no_thread(tmp_path):
    paths = write_files(tmp_path, files=3, per_file=200)
    it = tfr.read_examples(paths, SPEC3, batch_size=5, num_threads=4)
    next(it)
    assert tfrec_threads()
    it.close()
    assert not tfrec_threads()
    records = tfr.read_records(paths, num_threads=2)
    next(records)
    del records
    gc.collect()
    for t in tfrec_threads():
        t.join(timeout=10)
    assert not tfrec_threads()


@pytest.mark.parametrize("copy", [False, True])
def test_read_records_read_ahead(tmp_path, copy):
    paths = write_files(tmp_path, compression="zlib")
    one = [bytes(r) for r in tfr.read_records(paths, "zlib", num_threads=1)]
    many = list(tfr.read_records(paths, "zlib", num_threads=2, copy=copy))
    assert all(isinstance(r, bytes if copy else memoryview) for r in many)
    assert [bytes(r) for r in many] == one and len(one) == 111


def test_read_records_error_order(tmp_path):
    paths = write_files(tmp_path, files=2)
    with open(paths[0], "ab") as f:
        f.write(b"\x01\x02\x03")  # a cut header after part-0's records
    got = []
    with pytest.raises(tfr.DataLossError) as info:
        for r in tfr.read_records(paths, num_threads=2):
            got.append(bytes(r))
    assert len(got) == 37 and info.value.path.endswith("part-0.tfrecord")


def test_num_threads_is_checked():
    assert _pipeline.check_threads(None) >= 1 and _pipeline.check_threads(3) == 3
    with pytest.raises(ValueError, match="num_threads"):
        _pipeline.check_threads(0)


@settings(max_examples=30, deadline=None)
@given(
    items=st.lists(st.integers(), max_size=60),
    threads=st.integers(1, 6),
    fail_at=st.one_of(st.none(), st.integers(0, 59)),
)
def test_parallel_map_order_and_errors(items, threads, fail_at):
    def fn(x):
        if fail_at is not None and x is items[fail_at % max(len(items), 1)] and items:
            raise KeyError(x)
        return x * 2

    out = []
    try:
        for y in _pipeline.ordered(fn, _pipeline.read_ahead(iter(items)), threads):
            out.append(y)
    except KeyError:
        first_bad = fail_at % len(items)
        assert out == [x * 2 for x in items[:first_bad]] or out == [
            x * 2 for x in items[: items.index(items[first_bad])]
        ]
    else:
        assert out == [x * 2 for x in items]
    assert not tfrec_threads()


def test_threads_read_large_records(tmp_path):
    path = str(tmp_path / "big.tfrecord")
    blobs = [np.random.default_rng(i).bytes(100_000) for i in range(30)]
    with tfr.TFRecordWriter(path) as w:
        for b in blobs:
            w.write_example({"image": [b], "id": [0]})
    spec = {"image": tfr.FixedLen((), "bytes")}
    got = [
        v
        for cols in tfr.read_examples(path, spec, batch_size=4, num_threads=3)
        for v in cols["image"].to_list()
    ]
    assert got == blobs
