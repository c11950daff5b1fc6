"""Index files (the tfrecord package / DALI text format) and random access by index."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import os
import pickle
import random
import subprocess
import sys
import threading
import warnings
import zlib

import _oracle
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tfrec_fast
from tfrec_fast import DataLossError, IndexedTFRecordReader, create_index, load_index


def payloads_for(n, seed=7, max_len=300):
    rnd = random.Random(seed)
    return [rnd.randbytes(rnd.choice((0, 1, 8, rnd.randrange(max_len)))) for _ in range(n)]


@pytest.fixture
def data_file(tmp_path):
    """(path, payloads): 500 records of mixed sizes, a few of them over 64 KiB."""
    payloads = payloads_for(500)
    rnd = random.Random(3)
    for i in (10, 11, 250, 499):
        payloads[i] = rnd.randbytes(70_000 + i)
    p = tmp_path / "data.tfrecord"
    p.write_bytes(_oracle.build_file(payloads))
    return p, payloads


def expected_index(payloads):
    offsets = _oracle.record_offsets(payloads)
    return offsets[: len(payloads)], [len(x) + 16 for x in payloads]


# ---- create_index / load_index -----------------------------------------------------------------


def test_corpus_index_reproduced_byte_for_byte(corpus_file, tmp_path):
    data = corpus_file("index/tiny_100k.tfrecord")
    ref = corpus_file("index/tiny_100k.idx")
    meta = json.loads(corpus_file("index/tiny_100k.tfrecord.expected.json").read_text())
    out = tmp_path / "tiny.idx"
    offsets, sizes = create_index(data, out)
    assert out.read_bytes() == ref.read_bytes()
    assert hashlib.sha256(out.read_bytes()).hexdigest() == meta["index_sha256"]
    assert offsets.dtype == np.int64 and sizes.dtype == np.int64
    assert len(offsets) == meta["record_count"]
    lo, ls = load_index(ref)
    assert isinstance(lo, np.ndarray) and lo.dtype == np.int64 and ls.dtype == np.int64
    np.testing.assert_array_equal(lo, offsets)
    np.testing.assert_array_equal(ls, sizes)
    assert (ls == 24).all() and (lo == np.arange(len(lo)) * 24).all()


def test_corpus_random_access(corpus_file):
    data = corpus_file("index/tiny_100k.tfrecord")
    with IndexedTFRecordReader(data, corpus_file("index/tiny_100k.idx")) as r:
        assert len(r) == 100_000
        idx = np.random.default_rng(0).integers(0, len(r), 10_000)
        got = r.get_batch(idx)
        rule = 0xC213BCDCE1CDC5E6
        assert got.to_list() == [(int(i) ^ rule).to_bytes(8, "little") for i in idx]
        assert bytes(r[99_999]) == (99_999 ^ rule).to_bytes(8, "little")


def test_create_index_matches_framing(data_file, tmp_path):
    path, payloads = data_file
    offsets, sizes = create_index(path)
    eo, es = expected_index(payloads)
    assert offsets.tolist() == eo and sizes.tolist() == es
    assert not list(tmp_path.glob("*.idx"))  # no index_path: nothing written
    text = "".join(f"{o} {s}\n" for o, s in zip(eo, es))
    create_index(path, tmp_path / "x.idx")
    assert (tmp_path / "x.idx").read_text() == text


def test_empty_file(tmp_path):
    p = tmp_path / "empty.tfrecord"
    p.write_bytes(b"")
    offsets, sizes = create_index(p, tmp_path / "e.idx")
    assert len(offsets) == 0 and len(sizes) == 0 and offsets.dtype == np.int64
    assert (tmp_path / "e.idx").read_bytes() == b""
    assert len(load_index(tmp_path / "e.idx")[0]) == 0
    r = IndexedTFRecordReader(p)
    assert len(r) == 0 and len(r.get_batch([])) == 0
    with pytest.raises(IndexError):
        r[0]


def test_load_index_lenient_whitespace(tmp_path):
    p = tmp_path / "w.idx"
    p.write_bytes(b"0 24\r\n24\t30\n\n  54  16 \n70 20")  # CRLF, tab, blank line, no final LF
    offsets, sizes = load_index(p)
    assert offsets.tolist() == [0, 24, 54, 70] and sizes.tolist() == [24, 30, 16, 20]


@pytest.mark.parametrize(
    "text",
    [
        b"0 24\n24\n",
        b"0 24\n24 x\n",
        b"0 -24\n",
        b"0 24 5\n",
        b"hello world\n",
        b"0 99999999999999999999999\n",
    ],
)
def test_load_index_rejects_garbage(tmp_path, text):
    p = tmp_path / "bad.idx"
    p.write_bytes(text)
    with pytest.raises(ValueError, match="bad.idx"):
        load_index(p)


@pytest.mark.parametrize("kind", ["gzip", "zlib"])
def test_compressed_cannot_be_indexed(tmp_path, kind, payloads):
    raw = _oracle.build_file(payloads)
    p = tmp_path / f"c.tfrecord.{kind}"
    p.write_bytes(gzip.compress(raw) if kind == "gzip" else zlib.compress(raw))
    with pytest.raises(ValueError, match="cannot be indexed: compressed"):
        create_index(p)
    with pytest.raises(ValueError, match="compressed"):
        IndexedTFRecordReader(p)
    with pytest.raises(ValueError, match="compressed"):
        IndexedTFRecordReader(p, ([0], [16]))
    plain = tmp_path / "plain.tfrecord"
    plain.write_bytes(raw)
    with pytest.raises(ValueError, match="compressed"):
        create_index(plain, compression="gzip")


def test_create_index_damaged_file(tmp_path, payloads):
    raw = _oracle.build_file(payloads)
    offs = _oracle.record_offsets(payloads)
    p = tmp_path / "cut.tfrecord"
    p.write_bytes(raw[: offs[4] + 20])
    with pytest.raises(DataLossError) as ei:
        create_index(p)
    assert ei.value.reason == "truncated" and ei.value.record_index == 4
    p.write_bytes(_oracle.flip_bit(raw, offs[3] + 2))  # length field
    with pytest.raises(DataLossError) as ei:
        create_index(p)
    assert ei.value.reason == "length_checksum" and ei.value.offset == offs[3]


# ---- random access -------------------------------------------------------------------------------


@given(st.lists(st.integers(0, 499), max_size=300))
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_random_access_equals_sequential(data_file, indices):
    path, payloads = data_file
    with IndexedTFRecordReader(path) as r:
        batch = r.get_batch(indices)
        assert batch.to_list() == [payloads[i] for i in indices]
        offsets = r.offsets
        assert batch.positions.tolist() == [int(offsets[i]) for i in indices]
        assert np.diff(batch.offsets).tolist() == [len(payloads[i]) for i in indices]


def test_duplicates_reverse_and_scalar(data_file):
    path, payloads = data_file
    r = IndexedTFRecordReader(path)
    assert len(r) == len(payloads)
    rev = list(range(len(payloads)))[::-1]
    assert r.get_batch(rev).to_list() == payloads[::-1]
    dup = [7, 7, 11, 7, 11, 0, 0]
    assert r.get_batch(dup).to_list() == [payloads[i] for i in dup]
    assert r.get_batch(np.array(dup, dtype=np.uint32)).to_list() == [payloads[i] for i in dup]
    for i in (0, 10, 499, np.int64(250)):
        rec = r[i]
        assert isinstance(rec, memoryview) and rec.readonly and bytes(rec) == payloads[i]
    assert isinstance(r.get_batch([1, 2]), tfrec_fast.RecordBatch)
    assert [bytes(x) for x in r.get_batch(range(5))] == payloads[:5]


@pytest.mark.parametrize("n", [1, 2, 10, 255, 256, 1000, 10_000])
def test_get_batch_sizes(tmp_path, n):
    payloads = payloads_for(3000, seed=n, max_len=100)
    p = tmp_path / "many.tfrecord"
    p.write_bytes(_oracle.build_file(payloads))
    r = IndexedTFRecordReader(p)
    idx = np.random.default_rng(n).integers(0, len(payloads), n)
    assert r.get_batch(idx).to_list() == [payloads[i] for i in idx]
    sequential = np.arange(min(n, len(payloads)))
    assert r.get_batch(sequential).to_list() == payloads[: len(sequential)]


def test_out_of_range_and_negative(data_file):
    path, payloads = data_file
    r = IndexedTFRecordReader(path)
    assert bytes(r[-1]) == payloads[-1] and bytes(r[-len(payloads)]) == payloads[0]
    for bad in (len(payloads), -len(payloads) - 1, 10**30):
        with pytest.raises(IndexError):
            r[bad]
    for bad in ([0, len(payloads)], [-1], [3, -2]):
        with pytest.raises(IndexError):
            r.get_batch(bad)
    with pytest.raises(IndexError):
        r.get_batch(np.array([2**63 + 5], dtype=np.uint64))
    with pytest.raises(TypeError):
        r.get_batch([1.5])
    with pytest.raises(TypeError):
        r["1"]


def test_index_sources_agree(data_file, tmp_path):
    path, payloads = data_file
    idx_path = tmp_path / "d.idx"
    offsets, sizes = create_index(path, idx_path)
    readers = [
        IndexedTFRecordReader(path),
        IndexedTFRecordReader(path, idx_path),
        IndexedTFRecordReader(path, str(idx_path)),
        IndexedTFRecordReader(path, (offsets.tolist(), sizes.tolist())),
    ]
    for r in readers:
        assert r.get_batch([499, 0, 250]).to_list() == [payloads[499], payloads[0], payloads[250]]


def test_partial_index_of_some_records(data_file):
    """An (offsets, sizes) pair may list any records, in any order."""
    path, payloads = data_file
    offsets, sizes = create_index(path)
    pick = [400, 3, 250, 3]
    r = IndexedTFRecordReader(path, (offsets[pick], sizes[pick]))
    assert len(r) == 4
    assert r.get_batch([0, 1, 2, 3]).to_list() == [payloads[i] for i in pick]


def test_impossible_index_rejected(data_file):
    path, _ = data_file
    with pytest.raises(ValueError, match="at least 16"):
        IndexedTFRecordReader(path, ([0], [15]))
    with pytest.raises(ValueError):
        IndexedTFRecordReader(path, ([-1], [24]))
    with pytest.raises(ValueError):
        IndexedTFRecordReader(path, ([0, 1], [24]))
    with pytest.raises(TypeError):
        IndexedTFRecordReader(path, 5)
    with pytest.raises(FileNotFoundError):
        IndexedTFRecordReader(str(path) + ".missing", ([0], [24]))


# ---- stale or wrong indexes ----------------------------------------------------------------------


def check_mismatch(err, path, record_index=None, offset=None):
    assert isinstance(err, DataLossError)
    assert err.path == str(path)
    assert err.reason == "index_mismatch"
    if record_index is not None:
        assert err.record_index == record_index
    if offset is not None:
        assert err.offset == offset
    msg = str(err)
    assert str(path) in msg and f"record {err.record_index}" in msg
    assert f"offset {err.offset}" in msg and "index" in msg


def test_stale_after_rewrite_with_other_records(tmp_path):
    old = payloads_for(200, seed=1)
    p = tmp_path / "f.tfrecord"
    p.write_bytes(_oracle.build_file(old))
    idx = tmp_path / "f.idx"
    create_index(p, idx)
    new = list(old)
    new[50] = old[50] + b"longer"  # every record after 50 moves
    p.write_bytes(_oracle.build_file(new))
    offs = _oracle.record_offsets(old)
    # The whole file is longer than the index says: refused at once, so nothing is read wrong.
    with pytest.raises(DataLossError) as ei:
        IndexedTFRecordReader(p, idx)
    check_mismatch(ei.value, p)
    # Same total size, records of other sizes: the record read is named.
    new2 = list(old)
    new2[50], new2[51] = old[50] + b"x" * 5, old[51] + b""
    new2[52] = old[52][5:] if len(old[52]) >= 5 else old[52]
    assert len(old[52]) >= 5
    p.write_bytes(_oracle.build_file(new2))
    r = IndexedTFRecordReader(p, idx)
    assert r.get_batch(list(range(50))).to_list() == old[:50]
    for i in (50, 51, 52):
        with pytest.raises(DataLossError) as ei:
            r.get_batch([3, i, 7])
        check_mismatch(ei.value, p, record_index=i, offset=offs[i])
    assert bytes(r[53]) == old[53]


def test_stale_after_records_appended_or_removed(tmp_path):
    old = payloads_for(100, seed=2)
    p = tmp_path / "f.tfrecord"
    p.write_bytes(_oracle.build_file(old))
    idx = tmp_path / "f.idx"
    create_index(p, idx)
    offs = _oracle.record_offsets(old)
    p.write_bytes(_oracle.build_file(old + [b"appended"]))
    with pytest.raises(DataLossError) as ei:
        IndexedTFRecordReader(p, idx)[0]
    check_mismatch(ei.value, p, record_index=100, offset=offs[100])
    assert "appended" in str(ei.value)
    p.write_bytes(_oracle.build_file(old[:-1]))
    with pytest.raises(DataLossError) as ei:
        IndexedTFRecordReader(p, idx).get_batch([0, 1])
    check_mismatch(ei.value, p, record_index=99, offset=offs[99])
    p.write_bytes(_oracle.build_file(old[1:]))  # the first removed: every offset moves
    with pytest.raises(DataLossError) as ei:
        IndexedTFRecordReader(p, idx)[5]
    check_mismatch(ei.value, p)


def test_truncated_file_with_partial_index(tmp_path):
    """Not a complete index, so only reads of the cut records fail."""
    payloads = payloads_for(50, seed=4)
    p = tmp_path / "f.tfrecord"
    raw = _oracle.build_file(payloads)
    p.write_bytes(raw)
    offsets, sizes = create_index(p)
    r = IndexedTFRecordReader(p, (offsets[1:], sizes[1:]))  # a subset: no whole-file check
    p.write_bytes(raw[: offsets[40] + 30])
    assert r.get_batch([0, 5]).to_list() == [payloads[1], payloads[6]]
    with pytest.raises(DataLossError) as ei:
        r.get_batch([2, 39, 45])
    check_mismatch(ei.value, p, record_index=39, offset=int(offsets[40]))
    assert "file ends" in str(ei.value)


def test_index_from_another_file(tmp_path):
    a = payloads_for(100, seed=5)
    b = payloads_for(100, seed=6)
    pa, pb = tmp_path / "a.tfrecord", tmp_path / "b.tfrecord"
    pa.write_bytes(_oracle.build_file(a))
    pb.write_bytes(_oracle.build_file(b))
    oa, sa = create_index(pa)
    # Give b the same length as a's index covers so only per-record checks can catch it.
    b_raw = _oracle.build_file(b)
    total = int(oa[-1] + sa[-1])
    b_raw = (b_raw + _oracle.build_file([b"\0" * 4000]))[:total]
    pb.write_bytes(b_raw)
    r = IndexedTFRecordReader(pb, (oa, sa))
    failures = 0
    for i in range(100):
        try:
            got = bytes(r[i])
        except DataLossError as e:
            check_mismatch(e, pb, record_index=i, offset=int(oa[i]))
            failures += 1
        else:  # whatever it returns must be b's record at that very place
            assert oa[i] in _oracle.record_offsets(b) and got in b
    assert failures > 90


def test_corrupted_payload_is_data_checksum(data_file, tmp_path):
    path, payloads = data_file
    offs = _oracle.record_offsets(payloads)
    idx = tmp_path / "d.idx"
    create_index(path, idx)
    raw = path.read_bytes()
    path.write_bytes(_oracle.flip_bit(raw, offs[250] + 12 + 1000, 3))
    r = IndexedTFRecordReader(path, idx)
    with pytest.raises(DataLossError) as ei:
        r.get_batch([1, 250, 2])
    e = ei.value
    assert e.reason == "data_checksum" and e.record_index == 250 and e.offset == offs[250]
    assert e.path == str(path)
    assert r.get_batch([249, 251]).to_list() == [payloads[249], payloads[251]]
    # verify=False skips the CRCs (the length field is still checked).
    loose = IndexedTFRecordReader(path, idx, verify=False)
    assert len(bytes(loose[250])) == len(payloads[250])
    path.write_bytes(_oracle.flip_bit(raw, offs[250] + 2))
    with pytest.raises(DataLossError) as ei:
        r[250]
    check_mismatch(ei.value, path, record_index=250, offset=offs[250])


# ---- lifetime, pickling, threads, processes --------------------------------------------------------


def test_records_outlive_reader(data_file):
    path, payloads = data_file
    r = IndexedTFRecordReader(path)
    batch = r.get_batch([10, 3])
    rec = r[11]
    r.close()
    assert r.closed
    r.close()
    assert bytes(rec) == payloads[11] and batch.to_list() == [payloads[10], payloads[3]]
    with pytest.raises(ValueError, match="closed"):
        r[0]
    assert len(r) == len(payloads)


def test_pickle_and_fork(data_file):
    path, payloads = data_file
    r = IndexedTFRecordReader(path)
    r2 = pickle.loads(pickle.dumps(r))
    assert len(r2) == len(r) and bytes(r2[250]) == payloads[250]
    if not hasattr(os, "fork"):
        return
    read_fd, write_fd = os.pipe()
    with warnings.catch_warnings():  # Python 3.12+ warns when other threads are alive
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    parent_reader = r._reader
    if pid == 0:  # child: reopens (its own file descriptor), reads, reports
        try:
            ok = r.get_batch([499, 1]).to_list() == [payloads[499], payloads[1]]
            os.write(write_fd, b"1" if ok and r._reader is not parent_reader else b"0")
        finally:
            os._exit(0)
    os.close(write_fd)
    os.waitpid(pid, 0)
    assert os.read(read_fd, 1) == b"1"
    os.close(read_fd)
    assert bytes(r[0]) == payloads[0]


def test_threads_share_a_reader(data_file):
    path, payloads = data_file
    r = IndexedTFRecordReader(path)
    errors = []

    def work(seed):
        rnd = random.Random(seed)
        try:
            for _ in range(50):
                idx = [rnd.randrange(len(payloads)) for _ in range(64)]
                assert r.get_batch(idx).to_list() == [payloads[i] for i in idx]
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


# ---- CLI and interoperability ----------------------------------------------------------------------


def run_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "tfrec_fast", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_index(tmp_path, data_file, payloads):
    path, _ = data_file
    other = tmp_path / "other.tfrecord"
    other.write_bytes(_oracle.build_file(payloads))
    res = run_cli("index", path, other)
    assert res.returncode == 0, res.stderr
    for p in (path, other):
        idx = tmp_path / (p.name + ".idx")
        offsets, sizes = create_index(p, tmp_path / "ref.idx")
        assert idx.read_bytes() == (tmp_path / "ref.idx").read_bytes()
        assert f"{len(offsets)}\t{idx}" in res.stdout
    res = run_cli("index", "--suffix", ".tfindex", other)
    assert res.returncode == 0 and (tmp_path / "other.tfrecord.tfindex").is_file()


def test_cli_index_errors(tmp_path, payloads):
    gz = tmp_path / "c.tfrecord.gz"
    gz.write_bytes(gzip.compress(_oracle.build_file(payloads)))
    good = tmp_path / "g.tfrecord"
    good.write_bytes(_oracle.build_file(payloads))
    res = run_cli("index", gz, good, tmp_path / "missing.tfrecord")
    assert res.returncode == 1
    assert "compressed" in res.stderr and "missing.tfrecord" in res.stderr
    assert not (tmp_path / "c.tfrecord.gz.idx").exists()
    assert (tmp_path / "g.tfrecord.idx").is_file()


@pytest.mark.skipif(
    importlib.util.find_spec("tfrecord") is None,
    reason="optional peer `tfrecord` not installed (CI's peers step runs this)",
)
def test_interop_with_tfrecord_package(tmp_path, data_file):
    path, payloads = data_file
    theirs = tmp_path / "theirs.idx"
    ours = tmp_path / "ours.idx"
    code = (
        "import sys; from tfrecord.tools.tfrecord2idx import create_index; "
        "create_index(sys.argv[1], sys.argv[2])"
    )
    subprocess.run([sys.executable, "-c", code, str(path), str(theirs)], check=True, timeout=120)
    offsets, sizes = create_index(path, ours)
    assert theirs.read_bytes() == ours.read_bytes()
    to, ts = load_index(theirs)
    np.testing.assert_array_equal(to, offsets)
    np.testing.assert_array_equal(ts, sizes)
    r = IndexedTFRecordReader(path, theirs)
    assert r.get_batch([499, 0]).to_list() == [payloads[499], payloads[0]]
    # Ours there: the tfrecord package reads records through our index.
    code = (
        "import sys, hashlib; from tfrecord.reader import tfrecord_iterator; "
        "h = hashlib.sha256(); n = 0\n"
        "for rec in tfrecord_iterator(sys.argv[1], sys.argv[2], shard=(1, 2)):\n"
        "    h.update(len(rec).to_bytes(8, 'little') + bytes(rec)); n += 1\n"
        "print(n, h.hexdigest())"
    )
    res = subprocess.run(
        [sys.executable, "-c", code, str(path), str(ours)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    h = hashlib.sha256()
    for rec in payloads[250:]:
        h.update(len(rec).to_bytes(8, "little") + rec)
    assert res.stdout.split() == [str(len(payloads) - 250), h.hexdigest()]
