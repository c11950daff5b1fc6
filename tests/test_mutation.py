"""Inputs changed by another thread during a call that releases the GIL.

Rule of the extension: before the GIL is released, every input is owned by C++ (copied) or an
immutable object held by reference, and nothing is read twice from caller memory. Each test
flips a caller-owned buffer between two valid states from a second thread while the main thread
calls into C++ repeatedly; every result must be exactly one of the two states (never a mix, never
a checksum error, never a crash). Bounded by iteration counts, not by time.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from _oracle import build_file, frame

import tfrec_fast as tfr

ROUNDS = 60


class Flipper:
    """Rewrites `target` (bytearray or numpy array) between `states` until stopped.

    Through a memoryview, whose slice assignment is one memcpy with the GIL held (numpy's own
    assignment may release the GIL, and then no reader could take a consistent snapshot)."""

    def __init__(self, target, states):
        self.target = memoryview(target).cast("B")
        self.states = [memoryview(s).cast("B") for s in states]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        k = 0
        while not self.stop.is_set():
            self.target[:] = self.states[k % len(self.states)]
            k += 1

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def two_files(n_records=64, size=4096):
    """Two valid files of equal length whose records differ."""
    a = [bytes([65 + i % 26]) * size for i in range(n_records)]
    b = [bytes([97 + i % 26]) * size for i in range(n_records)]
    return build_file(a), build_file(b), a, b


@pytest.mark.parametrize("kind", ["bytearray", "numpy"])
def test_reader_over_a_changing_buffer(kind):
    file_a, file_b, recs_a, recs_b = two_files()
    buf = bytearray(file_a) if kind == "bytearray" else np.frombuffer(file_a, np.uint8).copy()
    with Flipper(buf, [file_a, file_b]):
        for _ in range(ROUNDS):
            got = [bytes(r) for r in tfr.read_records(buf)]
            assert got in (recs_a, recs_b)


def test_get_batch_with_indices_changed_meanwhile(tmp_path):
    # Records of very different sizes: reading indices twice would size the batch for one set
    # and fill it from the other (a heap overflow before the fix).
    records = [bytes([i]) * (10 if i % 2 else 4000) for i in range(16)]
    path = tmp_path / "mixed.tfrecord"
    path.write_bytes(build_file(records))
    small = np.array([1, 3, 5, 7] * 1024, dtype=np.int64)
    large = np.array([0, 2, 4, 6] * 1024, dtype=np.int64)
    indices = small.copy()
    with tfr.IndexedTFRecordReader(path) as reader, Flipper(indices, [small, large]):
        for _ in range(ROUNDS):
            got = [bytes(r) for r in reader.get_batch(indices)]
            assert got in ([records[i] for i in small], [records[i] for i in large])


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_write_of_a_changing_bytearray(tmp_path, compression):
    size = 3 << 20  # larger than the writer's buffer: the path that released the GIL
    states = [b"a" * size, b"b" * size]
    record = bytearray(states[0])
    path = tmp_path / "out.tfrecord"
    with Flipper(record, states), tfr.TFRecordWriter(path, compression) as w:
        for _ in range(8):
            w.write(record)
    for got in tfr.read_records(path, compression):  # both CRCs are checked
        assert bytes(got) in states


def test_write_batch_of_changing_bytearrays(tmp_path):
    states = [b"x" * 300_000, b"y" * 300_000]
    records = [bytearray(states[0]) for _ in range(4)]
    path = tmp_path / "batch.tfrecord"
    flippers = [Flipper(r, states) for r in records]
    for f in flippers:
        f.__enter__()
    try:
        with tfr.TFRecordWriter(path, buffer_size=64 << 10) as w:
            for _ in range(8):
                w.write_batch(records)
    finally:
        for f in flippers:
            f.__exit__()
    got = [bytes(r) for r in tfr.read_records(path)]
    assert len(got) == 32 and all(r in states for r in got)


def test_parse_examples_of_changing_records():
    a = tfr.encode_example({"x": np.arange(1000, 2000, dtype=np.int64)})
    b = tfr.encode_example({"x": np.arange(2000, 3000, dtype=np.int64)})
    assert len(a) == len(b)
    record = bytearray(a)
    spec = {"x": tfr.FixedLen((1000,), "int64")}
    with Flipper(record, [a, b]):
        for _ in range(ROUNDS):
            x = tfr.parse_examples([record] * 8, spec)["x"]
            for row in x:
                assert row[0] in (1000, 2000) and np.array_equal(
                    row, np.arange(row[0], row[0] + 1000)
                )


def test_crc_of_a_changing_numpy_array():
    states = [np.zeros(1 << 20, np.uint8), np.full(1 << 20, 7, np.uint8)]
    expected = {tfr.crc32c(s.tobytes()) for s in states}
    data = states[0].copy()
    with Flipper(data, states):
        for _ in range(ROUNDS):
            assert tfr.crc32c(data) in expected


def test_immutable_inputs_are_not_copied():
    """bytes and read-only views of bytes stay zero-copy (the rule copies only what can change)."""
    file_a, _, recs_a, _ = two_files(4, 16)
    view = np.frombuffer(file_a, np.uint8)
    assert not view.flags.writeable
    for source in (file_a, memoryview(file_a), view):
        assert [bytes(r) for r in tfr.read_records(source)] == recs_a
    assert frame(b"") == build_file([b""])


def test_encode_examples_while_the_input_list_is_cleared():
    """Bytes values were borrowed without a reference: clearing the list freed them while the
    encoder read them (wrong output, or a crash)."""
    expected = [b"v%d-" % i * 5000 for i in range(64)]
    want = tfr.encode_examples({"b": list(expected)}).to_list()
    stop = threading.Event()
    holder = {"rows": [bytes(v) for v in expected]}

    def churn():
        while not stop.is_set():
            rows = holder["rows"]
            holder["rows"] = [bytes(v) for v in expected]
            rows.clear()

    t = threading.Thread(target=churn, daemon=True)
    t.start()
    try:
        for _ in range(ROUNDS):
            try:
                got = tfr.encode_examples({"b": holder["rows"]}).to_list()
            except ValueError:  # emptied before it was read: no kind (a clean error)
                continue
            assert got == want[: len(got)]  # whole records of the values, never freed memory
    finally:
        stop.set()
        t.join()


def test_encode_example_of_lists_another_thread_changes():
    """encode_example reads plain lists of ints, floats or bytes itself: each is copied before it
    is read, so another thread refilling them gives one of the lists' whole states or a clean
    error, never freed memory or a mix of kinds."""
    states = {
        "i": ([7] * 300, [2**40] * 150),
        "f": ([0.5] * 300, [1e30] * 150),
        "b": ([b"x" * 300] * 200, [b"yz"] * 100),
    }
    wants = {k: [tfr.encode_example({k: list(v)}) for v in vs] for k, vs in states.items()}
    lists = {k: list(vs[0]) for k, vs in states.items()}
    stop = threading.Event()

    def churn():
        flip = 0
        while not stop.is_set():
            flip ^= 1
            for k, vs in states.items():
                lists[k][:] = vs[flip]  # in place: the encoder's list itself changes
                if flip:
                    lists[k][0:1] = [b"z"] if k != "b" else [1]  # a moment of mixed kinds

    t = threading.Thread(target=churn, daemon=True)
    t.start()
    try:
        for _ in range(ROUNDS):
            for k in states:
                try:
                    got = tfr.encode_example({k: lists[k]})
                except (TypeError, ValueError):  # caught mixed: a clean error naming it
                    continue
                assert got in wants[k]
    finally:
        stop.set()
        t.join()


def test_encode_examples_of_a_changing_numeric_array():
    """Values are read twice (sizes, then bytes): an array changed in between overflowed."""
    small = np.zeros((64, 512), np.int64)  # 1-byte varints
    large = np.full((64, 512), (1 << 62) + 7, np.int64)  # 9-byte varints
    column = small.copy()
    wants = [tfr.encode_examples({"x": s}).to_list() for s in (small, large)]
    with Flipper(column, [small, large]):
        for _ in range(ROUNDS):
            got = tfr.encode_examples({"x": column}).to_list()
            for i, record in enumerate(got):
                assert record in (wants[0][i], wants[1][i])


@pytest.mark.parametrize("kind", ["row_splits", "offsets"])
def test_encode_columns_whose_bounds_change_meanwhile(kind):
    """The encoder reads row_splits and offsets twice (sizes, then bytes): changed in between, a
    record would outgrow the room sized for it. They are copied before the GIL is released."""
    from tfrec_fast._core import Kind, encode_examples

    n = 256
    narrow = np.arange(n + 1, dtype=np.int64)  # one value per row
    wide = np.arange(n + 1, dtype=np.int64) * 64  # 64 values per row
    bounds = narrow.copy()
    if kind == "row_splits":
        values = np.arange(n * 64, dtype=np.int64) << 40  # 6-byte varints

        def encode(b):
            return encode_examples({"x": (Kind.INT64, values, None, b)}, n).to_list()
    else:
        text = np.frombuffer(bytes(range(256)) * 64, np.uint8)

        def encode(b):
            return encode_examples({"x": (Kind.BYTES, text, b, None)}, n).to_list()

    wants = [encode(b) for b in (narrow, wide)]
    with Flipper(bounds, [narrow, wide]):
        for _ in range(ROUNDS):
            for i, record in enumerate(encode(bounds)):
                assert record in (wants[0][i], wants[1][i])
