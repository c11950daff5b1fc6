"""Large fixed-size columns take their memory from a BufferPool and give it back when their
arrays die, so a loop over batches of large records does not fault in fresh pages for every
batch (#12). A reused buffer's old bytes must never show: every record's slot is written, with
its value or its default, whatever the buffer held."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import tfrec_fast as tfr
from tfrec_fast import _buffers, _core
from tfrec_fast.example import _plan, normalize_spec

WIDTH = 1024  # floats a record: 4 KiB, so 512 records make a 2 MiB column (pooled from 1 MiB)
RAW = 4096  # raw bytes a record: another 2 MiB column
N = 512


def _records(seed: int, missing=()):
    """N records: "x" of WIDTH floats (absent from the records in `missing`), "raw" of RAW
    bytes, "label" an int; and the columns expected with x's default of -1.0."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, WIDTH)).astype(np.float32)
    raw = rng.integers(0, 256, (N, RAW), dtype=np.uint8)
    label = np.arange(N, dtype=np.int64) + seed
    rows = []
    for i in range(N):
        row = {"raw": raw[i].tobytes(), "label": int(label[i])}
        if i not in missing:
            row["x"] = x[i]
        rows.append(tfr.encode_example(row))
    x[list(missing)] = -1.0
    return tfr.RecordBatch.from_records(rows), {"x": x, "raw": raw, "label": label}


SPEC = {
    "x": tfr.FixedLen((WIDTH,), "float32", default=[-1.0] * WIDTH),
    "raw": tfr.FixedLen((RAW,), "uint8"),
    "label": tfr.FixedLen((), "int64"),
}


def _decode(batch, pool, threads=1):
    spec = normalize_spec(SPEC)
    raw = _core.decode_examples(batch, _plan(spec).fields, "<records>", False, threads, False, pool)
    return {"x": raw[0][0], "raw": raw[1][0], "label": raw[2][0]}


def _expect(got, want):
    assert np.array_equal(got["x"], want["x"].reshape(-1))
    assert np.array_equal(got["raw"], want["raw"].reshape(-1))
    assert np.array_equal(got["label"], want["label"])


@pytest.mark.parametrize("threads", [1, 2])
def test_a_large_column_goes_back_to_its_pool_and_its_old_bytes_never_show(threads):
    pool = _core.BufferPool(8)
    first, want_first = _records(1)
    got = _decode(first, pool, threads)
    _expect(got, want_first)
    assert pool.kept_bytes == 0
    got["x"][:] = np.nan  # the arrays are the caller's, writable: garbage for the next batch
    got["raw"][:] = 0xAB
    del got
    gc.collect()
    # x and raw (2 MiB each) are kept; label (4 KiB) had its own memory
    assert pool.kept_bytes == N * WIDTH * 4 + N * RAW
    second, want_second = _records(2, missing={0, 7, N - 1})
    again = _decode(second, pool, threads)
    assert pool.kept_bytes == 0  # the kept buffers hold the next batch's columns...
    _expect(again, want_second)  # ...every slot written: values and defaults, no NaN left


def test_small_columns_and_no_pool_keep_their_own_memory():
    pool = _core.BufferPool(8)
    batch, want = _records(3)
    small = {"label": tfr.FixedLen((), "int64")}
    raw = _core.decode_examples(
        batch, _plan(normalize_spec(small)).fields, "<records>", False, 1, False, pool
    )
    assert np.array_equal(raw[0][0], want["label"])
    del raw
    assert pool.kept_bytes == 0
    got = _decode(batch, None)
    _expect(got, want)


def test_a_pooled_column_outlives_its_batch_and_the_pool():
    pool = _core.BufferPool(8)
    batch, want = _records(4)
    got = _decode(batch, pool)
    del batch, pool  # the arrays keep their memory (and the pool) alive
    gc.collect()
    _expect(got, want)


def test_parse_examples_reuses_the_shared_pool_batch_after_batch(monkeypatch):
    monkeypatch.setattr(_buffers, "_POOL", None)  # a new shared pool: none of other tests' buffers
    pool = _buffers.shared_pool()
    batches = [_records(seed, missing={seed}) for seed in range(3)]
    kept = None
    for batch, want in batches:
        got = tfr.parse_examples(batch, SPEC, num_threads=1)
        assert np.array_equal(got["x"], want["x"]) and got["x"].shape == (N, WIDTH)
        assert np.array_equal(got["raw"], want["raw"])
        assert np.array_equal(got["label"], want["label"])
        if kept is not None:
            assert pool.kept_bytes <= kept - N * (WIDTH * 4 + RAW)  # took the last batch's
        del got
        kept = pool.kept_bytes


def test_specs_say_from_how_many_records_a_column_is_pooled():
    def records_for_pool(spec):
        return _plan(normalize_spec(spec)).fields.records_for_pool

    never = 2**64 - 1
    assert records_for_pool(SPEC) == (1 << 20) // (WIDTH * 4)  # x and raw: 4 KiB a record
    assert records_for_pool({"label": tfr.FixedLen((), "int64")}) == (1 << 20) // 8
    assert records_for_pool({"f": tfr.FixedLen((3,), "float32")}) == -(-(1 << 20) // 12)
    assert records_for_pool({"s": tfr.FixedLen((), "bytes"), "v": tfr.VarLen("int64")}) == never


def test_var_len_columns_keep_their_own_memory():
    pool = _core.BufferPool(8)
    batch, want = _records(5)
    spec = {"x": tfr.VarLen("float32")}  # 2 MiB of values, grown as decoded: never pooled
    raw = _core.decode_examples(
        batch, _plan(normalize_spec(spec)).fields, "<records>", False, 1, False, pool
    )
    assert np.array_equal(raw[0][0], want["x"].reshape(-1))
    del raw
    gc.collect()
    assert pool.kept_bytes == 0
