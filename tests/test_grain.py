"""tfrec_fast.grain.TFRecordDataSource: a random-access source for Grain (JAX).

Records are built with protobuf (the oracle) and framed by the independent pure-Python framer of
_oracle. Grain's own pipelines (MapDataset with shuffle, slicing into shards, repeat, batch and
multiprocessing workers; DataLoader with IndexSampler, ShardOptions and workers) are stopped at
several points, checkpointed, restored in new iterators and in new processes, and compared
record for record with an uninterrupted run.

Run as a script (``python test_grain.py JSON``) this module is the child process of the
restore-in-a-new-process tests.
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
import json
import os
import pickle
import random
import subprocess
import sys
import uuid

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.grain
grain = pytest.importorskip("grain")

import _oracle

from tfrec_fast import (
    DataLossError,
    ExampleParseError,
    FixedLen,
    ObjectChangedError,
    TFRecordWriter,
    VarLen,
    create_index,
    proto,
)
from tfrec_fast.grain import TFRecordDataSource

SPEC = {
    "id": FixedLen((), "int64"),
    "img": FixedLen((2, 3), "uint8"),
    "score": FixedLen((), "float32"),
    "tokens": VarLen("int64"),
    "name": FixedLen((), "bytes"),
    "tags": VarLen("bytes"),
    "pair": FixedLen((2,), "bytes"),
}
SIZES = (37, 0, 50, 13)  # uneven files, one of them empty
N = sum(SIZES)
SEED = 11


# ---- data ----------------------------------------------------------------------------------------


def expected(i: int) -> dict:
    return {
        "id": i,
        "img": ((np.arange(6) + i * 7) % 256).astype(np.uint8).reshape(2, 3),
        "score": np.float32(i) / 4,
        "tokens": np.arange(i % 4, dtype=np.int64) * i,
        "name": f"rec{i}".encode(),
        "tags": [b"t%d" % j for j in range(i % 3)],
        "pair": [b"a%d" % i, b"b"],
    }


def payload(i: int) -> bytes:
    e = expected(i)
    ex = proto.Example()
    f = ex.features.feature
    f["id"].int64_list.value.append(i)
    f["img"].bytes_list.value.append(e["img"].tobytes())
    f["score"].float_list.value.append(float(e["score"]))
    f["tokens"].int64_list.value.extend(e["tokens"].tolist())
    f["name"].bytes_list.value.append(e["name"])
    f["tags"].bytes_list.value.extend(e["tags"])
    f["pair"].bytes_list.value.extend(e["pair"])
    return ex.SerializeToString()


def write_files(directory, sizes=SIZES):
    """part-KKK.tfrecord files holding records 0..sum(sizes)-1 in order; -> (paths, payloads)."""
    paths, payloads, start = [], [], 0
    for k, n in enumerate(sizes):
        records = [payload(i) for i in range(start, start + n)]
        path = os.path.join(str(directory), f"part-{k:03d}.tfrecord")
        with open(path, "wb") as f:
            f.write(_oracle.build_file(records))
        paths.append(path)
        payloads.extend(records)
        start += n
    return paths, payloads


def check_row(row: dict) -> None:
    """A parsed record holds exactly the values it was written with, as numpy values."""
    want = expected(int(row["id"]))
    assert set(row) == set(SPEC)
    assert isinstance(row["id"], np.int64)
    assert row["img"].dtype == np.uint8 and row["img"].shape == (2, 3)
    np.testing.assert_array_equal(row["img"], want["img"])
    assert row["score"].dtype == np.float32 and row["score"] == want["score"]
    assert row["tokens"].dtype == np.int64 and row["tokens"].tolist() == want["tokens"].tolist()
    assert type(row["name"]) is bytes and row["name"] == want["name"]
    assert row["tags"].dtype == object and row["tags"].tolist() == want["tags"]
    assert row["pair"].dtype == object and row["pair"].shape == (2,)
    assert row["pair"].tolist() == want["pair"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return write_files(tmp_path_factory.mktemp("grain"))


@pytest.fixture(scope="module")
def source(files):
    return TFRecordDataSource(files[0], SPEC)


# ---- the source ----------------------------------------------------------------------------------


def test_follows_grains_source_protocols(source):
    from grain._src.python.dataset import base

    assert isinstance(source, grain.sources.RandomAccessDataSource)
    assert isinstance(source, base.SupportsBatchedReadRandomAccessDataSource)
    assert source.paths == sorted(source.paths) and len(source.paths) == len(SIZES)
    assert source.record_counts() == list(SIZES)


def test_raw_records_are_the_payloads(files):
    paths, payloads = files
    src = TFRecordDataSource(paths)
    assert len(src) == len(payloads)
    got = [src[i] for i in range(len(src))]
    assert all(type(r) is bytes for r in got)
    assert got == payloads
    assert src[-1] == payloads[-1] and src[np.int64(5)] == payloads[5]
    assert src._getitems(list(range(len(src)))) == payloads


def test_parsed_records_hold_what_was_written(source):
    for i in range(len(source)):
        row = source[i]
        assert int(row["id"]) == i
        check_row(row)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-100, 99), max_size=60), st.booleans())
def test_batched_reads_equal_single_reads(source, indices, raw):
    """_getitems / __getitems__: any order, duplicates and negative indices, across files."""
    src = source if not raw else TFRecordDataSource(source.paths)
    rows = src._getitems(indices)
    assert len(rows) == len(indices)
    if raw:
        assert rows == [src[i] for i in indices] == src.__getitems__(indices)
        return
    assert [int(r["id"]) for r in rows] == [i % 100 for i in indices]
    for row in rows:
        check_row(row)
    assert [int(r["id"]) for r in src.__getitems__(np.array(indices, np.int64))] == [
        i % 100 for i in indices
    ]


def test_grain_batched_read_reaches_the_source(files):
    src = TFRecordDataSource(files[0], SPEC)
    calls = []
    read = src._getitems

    def spy(indices):
        calls.append(list(indices))
        return read(indices)

    src._getitems = spy
    rows = grain.MapDataset.source(src)._getitems([3, 90, 3, 40])
    assert calls == [[3, 90, 3, 40]]
    assert [int(r["id"]) for r in rows] == [3, 90, 3, 40]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-100, 99), max_size=60))
def test_read_batch_stacks_what_single_reads_give(source, indices):
    batch = source.read_batch(indices)
    rows = [source[i] for i in indices]
    assert set(batch) == set(SPEC)
    for name, s in SPEC.items():
        got = batch[name]
        if isinstance(s, FixedLen):
            assert isinstance(got, np.ndarray) and got.shape == (len(indices),) + s.shape
            assert got.dtype == s.dtype
            want = np.array([r[name] for r in rows], dtype=got.dtype).reshape(got.shape)
            np.testing.assert_array_equal(got, want)
        else:
            assert isinstance(got, list) and len(got) == len(indices)
            assert [g.tolist() for g in got] == [r[name].tolist() for r in rows]
    raw = TFRecordDataSource(source.paths)
    assert raw.read_batch(indices) == [raw[i] for i in indices]


def test_read_batch_of_nothing_has_typed_columns(source):
    batch = source.read_batch([])
    assert batch["id"].shape == (0,) and batch["id"].dtype == np.int64
    assert batch["img"].shape == (0, 2, 3) and batch["img"].dtype == np.uint8
    assert batch["tokens"] == [] and batch["pair"].shape == (0, 2)


def test_bad_indices(source):
    n = len(source)
    for i in (n, -n - 1, 10**20):
        with pytest.raises(IndexError, match="out of range"):
            source[i]
    for i in (True, 1.0, "1", None):
        with pytest.raises(TypeError):
            source[i]
    with pytest.raises(IndexError, match=f"record index {n} out of range"):
        source._getitems([0, n])
    with pytest.raises(TypeError):
        source._getitems([0.5])
    assert source._getitems([]) == []


def test_paths_patterns_and_refusals(files, tmp_path):
    paths, payloads = files
    directory = os.path.dirname(paths[0])
    by_glob = TFRecordDataSource(os.path.join(directory, "part-*.tfrecord"))
    assert by_glob.paths == paths
    two = TFRecordDataSource([paths[2], paths[0]])  # the order given
    assert two[0] == payloads[37] and two[50] == payloads[0]
    with pytest.raises(FileNotFoundError):
        TFRecordDataSource(str(tmp_path / "none-*.tfrecord"))
    with pytest.raises(FileNotFoundError):
        TFRecordDataSource(str(tmp_path / "missing.tfrecord"))
    with pytest.raises(TypeError):
        TFRecordDataSource(None)
    with pytest.raises(ValueError, match="no TFRecord files"):
        TFRecordDataSource([])
    with pytest.raises(ValueError, match="max_open_files"):
        TFRecordDataSource(paths, max_open_files=0)
    gz = tmp_path / "c.tfrecord.gz"
    with TFRecordWriter(str(gz), "gzip") as w:
        w.write(b"x")
    with pytest.raises(ValueError, match="c.tfrecord.gz.*compressed"):
        TFRecordDataSource(str(gz))


# ---- indexes -----------------------------------------------------------------------------------


@pytest.fixture
def fresh(tmp_path):
    return write_files(tmp_path, (20, 15, 5))


def test_missing_indexes_are_built_in_memory(fresh, monkeypatch):
    paths, payloads = fresh
    src = TFRecordDataSource(paths)
    assert not any(os.path.exists(p + ".idx") for p in paths)  # nothing written
    assert src._getitems(range(40)) == payloads
    # pickled with the arrays: a worker has no index file to load
    copy = pickle.loads(pickle.dumps(src))
    assert [copy[i] for i in range(40)] == payloads


def test_write_index_writes_file_idx_and_next_runs_use_it(fresh, monkeypatch):
    paths, payloads = fresh
    TFRecordDataSource(paths, write_index=True)
    for p in paths:
        assert load_text(p + ".idx") == load_text_of(create_index(p))

    def no_scan(*args, **kwargs):
        raise AssertionError("scanned a file that has an index")

    monkeypatch.setattr("tfrec_fast.index.index_of", no_scan)
    src = TFRecordDataSource(paths)  # "auto": FILE.idx
    assert [ix.url for ix in src._index_paths] == [p + ".idx" for p in paths]
    assert src._getitems(range(40)) == payloads


def load_text(path):
    with open(path, "rb") as f:
        return f.read()


def load_text_of(index):
    offsets, sizes = index
    return "".join(f"{o} {s}\n" for o, s in zip(offsets.tolist(), sizes.tolist())).encode()


def test_index_given_as_list_dict_or_path(fresh, tmp_path):
    paths, payloads = fresh
    elsewhere = []
    for k, p in enumerate(paths):
        ix = str(tmp_path / f"other-{k}.index")
        create_index(p, ix)
        elsewhere.append(ix)
    assert TFRecordDataSource(paths, index=elsewhere)._getitems(range(40)) == payloads
    partial = {paths[1]: elsewhere[1]}  # the others: auto (built)
    src = TFRecordDataSource(paths, index=partial)
    assert [ix and ix.url for ix in src._index_paths] == [None, elsewhere[1], None]
    assert src._getitems(range(40)) == payloads
    assert TFRecordDataSource(paths[1], index=elsewhere[1])[0] == payloads[20]
    with pytest.raises(ValueError, match="2 index paths for 3 files"):
        TFRecordDataSource(paths, index=elsewhere[:2])
    with pytest.raises(ValueError, match="one index path given for 3 files"):
        TFRecordDataSource(paths, index=elsewhere[0])
    with pytest.raises(FileNotFoundError):
        TFRecordDataSource(paths, index=[None, str(tmp_path / "nope.idx"), None])


def test_pickle_leaves_out_indexes_that_have_files(fresh):
    paths, _ = fresh
    for p in paths:
        create_index(p, p + ".idx")
    src = TFRecordDataSource(paths, SPEC)
    state = pickle.loads(pickle.dumps(src)).__dict__
    assert state["_indexes"] == [None, None, None]
    copy = pickle.loads(pickle.dumps(src))
    assert [int(r["id"]) for r in copy._getitems(range(40))] == list(range(40))


def test_stale_index_refused_when_made(fresh, monkeypatch):
    paths, _ = fresh
    create_index(paths[1], paths[1] + ".idx")
    with open(paths[1], "ab") as f:  # records appended after the index was written
        f.write(_oracle.frame(b"late"))

    def no_scan(*args, **kwargs):
        raise AssertionError("scanned the other files before checking the index given")

    monkeypatch.setattr("tfrec_fast.index.index_of", no_scan)
    with pytest.raises(DataLossError) as raised:
        TFRecordDataSource(paths)
    assert raised.value.reason == "index_mismatch"
    assert raised.value.path == paths[1] and raised.value.record_index == 15


def test_index_rewritten_after_pickling_is_refused(fresh):
    paths, payloads = fresh
    for p in paths:
        create_index(p, p + ".idx")
    blob = pickle.dumps(TFRecordDataSource(paths))
    with open(paths[2], "ab") as f:
        f.write(_oracle.frame(b"late"))
    create_index(paths[2], paths[2] + ".idx")  # now 6 records
    worker = pickle.loads(blob)
    assert worker._getitems(range(35)) == payloads[:35]  # the other files are as they were
    with pytest.raises(DataLossError) as raised:
        worker[35]
    assert raised.value.reason == "index_mismatch" and raised.value.path == paths[2]
    assert "now lists 6 records" in str(raised.value)


def test_damaged_record_names_file_record_and_offset(tmp_path):
    paths, payloads = write_files(tmp_path, (10, 10))
    data = bytearray(load_text(paths[1]))
    offsets = _oracle.record_offsets(payloads[10:])
    data[offsets[4] + 14] ^= 0xFF  # a payload byte of record 4 of the second file
    with open(paths[1], "wb") as f:
        f.write(bytes(data))
    src = TFRecordDataSource(paths, SPEC)
    assert int(src[13]["id"]) == 13
    for read in (lambda: src[14], lambda: src._getitems([2, 14, 15])):
        with pytest.raises(DataLossError) as raised:
            read()
        e = raised.value
        assert (e.path, e.record_index, e.offset, e.reason) == (
            paths[1],
            4,
            offsets[4],
            "data_checksum",
        )
    assert TFRecordDataSource(paths, verify=False)[13] == payloads[13]


def test_parse_error_names_record_in_its_file(tmp_path):
    paths, _ = write_files(tmp_path, (10,))
    bad = proto.Example()
    bad.features.feature["id"].int64_list.value.append(99)  # nothing else
    with open(paths[0], "ab") as f:
        f.write(_oracle.frame(bad.SerializeToString()))
    src = TFRecordDataSource(paths, SPEC)
    for read in (lambda: src[10], lambda: src._getitems([3, 10, 4])):
        with pytest.raises(ExampleParseError) as raised:
            read()
        e = raised.value
        assert e.path == paths[0] and e.record_index == 10 and e.feature is not None


# ---- files, threads, processes -------------------------------------------------------------------


def test_at_most_max_open_files_stay_open(tmp_path):
    paths, payloads = write_files(tmp_path, (7, 9, 3, 11, 5, 6))
    src = TFRecordDataSource(paths, max_open_files=2)
    order = list(range(len(payloads))) * 3
    random.Random(4).shuffle(order)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda i: src[i], order))
        chunks = [order[k : k + 5] for k in range(0, len(order), 5)]
        batches = list(pool.map(src._getitems, chunks))
    assert got == [payloads[i] for i in order]
    assert [r for b in batches for r in b] == [payloads[i] for i in order]
    assert len(src._open) <= 2
    if os.path.isdir("/proc/self/fd"):
        assert len(open_data_files(paths)) <= 2
    src.close()
    assert len(src._open) == 0
    if os.path.isdir("/proc/self/fd"):
        assert open_data_files(paths) == []
    assert src[0] == payloads[0]  # opened again


def open_data_files(paths):
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target in paths:
            found.append(target)
    return found


def test_repr_is_the_same_in_another_process(files, tmp_path):
    paths, _ = files
    src = TFRecordDataSource(paths, SPEC)
    code = (
        "import sys; from test_grain import *; print(repr(TFRecordDataSource(sys.argv[1:], SPEC)))"
    )
    out = child(["-c", code] + paths)
    assert out.strip() == repr(src)
    assert repr(TFRecordDataSource(paths)) != repr(src)  # another spec
    assert repr(TFRecordDataSource(paths[:2], SPEC)) != repr(src)  # other files
    assert "4 files, 100 records" in repr(src)


def child(args, timeout=300) -> str:
    env = dict(os.environ)
    here = os.path.dirname(os.path.abspath(__file__))
    env["PYTHONPATH"] = os.pathsep.join([here] + sys.path)
    done = subprocess.run(
        [sys.executable] + args,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=here,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


# ---- Grain pipelines and their checkpoints -------------------------------------------------------


class Check(grain.transforms.Map):
    """Checks a record against what was written; keeps its id and the file it came from."""

    def map(self, row):
        check_row(row)
        return {"id": np.int64(row["id"]), "name": row["name"]}


class CheckBatch(grain.transforms.Map):
    """Check for a batch of source.read_batch: each record's values against what was written."""

    def map(self, batch):
        for j in range(len(batch["id"])):
            check_row({name: values[j] for name, values in batch.items()})
        return {"id": batch["id"], "name": batch["name"]}


def pipeline(src, config):
    """A Grain iterable over ``src`` as ``config`` says: the Dataset API over the source
    ("dataset") or over record indices batched by ``source.read_batch`` ("indices"), or the
    DataLoader ("loader"); with or without shuffle, shards, worker processes."""
    shard, shards = config.get("shard", (0, 1))
    batch = config.get("batch", 4)
    if config["api"] == "loader":
        sampler = grain.samplers.IndexSampler(
            len(src),
            shard_options=grain.sharding.ShardOptions(shard, shards, drop_remainder=False),
            shuffle=config.get("shuffle", False),
            num_epochs=config.get("epochs", 1),
            seed=SEED,
        )
        return grain.DataLoader(
            data_source=src,
            sampler=sampler,
            operations=[Check(), grain.transforms.Batch(batch)],
            worker_count=config.get("workers", 0),
        )
    by_index = config["api"] == "indices"  # batches of indices, read by source.read_batch
    ds = grain.MapDataset.range(len(src)) if by_index else grain.MapDataset.source(src)
    if shards > 1:
        ds = ds[shard::shards]
    if config.get("shuffle"):
        ds = ds.shuffle(seed=SEED)
    ds = ds.repeat(config.get("epochs", 1))
    if by_index:
        ds = ds.batch(batch, batch_fn=src.read_batch).map(CheckBatch()).to_iter_dataset()
    else:
        ds = ds.map(Check()).to_iter_dataset().batch(batch)
    if config.get("workers"):
        ds = ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=config["workers"]))
    return ds


def plain(batch) -> list:
    """A batch as [(id, name), ...] (shared-memory arrays of workers copied out)."""
    return list(
        zip(
            np.asarray(batch["id"]).tolist(), [bytes(x) for x in np.asarray(batch["name"]).tolist()]
        )
    )


def run(it, steps=None) -> list:
    out = []
    for batch in it:
        out.append(plain(batch))
        if steps is not None and len(out) == steps:
            break
    return out


def close(it):
    if hasattr(it, "close"):
        it.close()


def states_and_run(src, config, stops):
    """(the whole run's batches, {step: state after `step` batches}) of one iterator."""
    it = iter(pipeline(src, config))
    states, batches = {}, []
    try:
        while True:
            if len(batches) in stops:
                states[len(batches)] = it.get_state()
            try:
                batches.append(plain(next(it)))
            except StopIteration:
                break
    finally:
        close(it)
    return batches, states


def restored(src, config, state) -> list:
    it = iter(pipeline(src, config))
    try:
        it.set_state(state)
        return run(it)
    finally:
        close(it)


def stop_points(n_batches: int) -> set:
    """Before the first batch, after it, at the first file's end (37 records in batches of 4:
    the tenth batch holds records 36 to 39), the middle, before the last batch, the end."""
    return {0, 1, 9, 10, n_batches // 2, n_batches - 1, n_batches}


def check_ids(batches, config, n=N):
    """Every record of the shard once per epoch (the run is what it claims to be). Slicing a
    MapDataset takes every shards-th record; the DataLoader's ShardOptions a contiguous range
    (the first n % shards shards one record more)."""
    shard, shards = config.get("shard", (0, 1))
    ids = sorted(i for b in batches for i, _ in b)
    if config["api"] == "loader":
        per, extra = divmod(n, shards)
        start = shard * per + min(shard, extra)
        mine = range(start, start + per + (shard < extra))
    else:
        mine = range(shard, n, shards)
    want = sorted(list(mine) * config.get("epochs", 1))
    assert ids == want
    assert all(name == f"rec{i}".encode() for b in batches for i, name in b)


IN_PROCESS = [
    {"api": "dataset"},
    {"api": "dataset", "shuffle": True, "epochs": 2},
    {"api": "dataset", "shuffle": True, "shard": (1, 3)},
    {"api": "indices", "shuffle": True, "epochs": 2},
    {"api": "indices", "shard": (1, 3), "batch": 5},
    {"api": "loader"},
    {"api": "loader", "shuffle": True, "epochs": 2},
    {"api": "loader", "shuffle": True, "shard": (2, 3), "batch": 3},
]


@pytest.mark.parametrize("config", IN_PROCESS, ids=json.dumps)
def test_checkpoint_restores_exactly_at_every_step(source, config):
    whole, _ = states_and_run(source, config, ())
    check_ids(whole, config)
    every = set(range(len(whole) + 1))
    again, states = states_and_run(source, config, every)
    assert again == whole  # deterministic
    if config.get("shuffle"):
        assert [i for b in whole for i, _ in b] != sorted(i for b in whole for i, _ in b)
    for step in sorted(states):
        assert restored(source, config, states[step]) == whole[step:], step


WORKERS = [
    {"api": "dataset", "shuffle": True, "workers": 2, "epochs": 2},
    {"api": "indices", "shuffle": True, "workers": 2, "shard": (1, 2)},
    {"api": "loader", "shuffle": True, "workers": 2, "shard": (0, 2)},
]


@pytest.mark.slow
@pytest.mark.parametrize("config", WORKERS, ids=json.dumps)
def test_checkpoint_with_worker_processes(source, config):
    """Worker processes read and batch their own slices: the order is the workers' (not that
    of a run without them), and a restore must give that order back."""
    batches, states = states_and_run(source, config, range(1 << 20))
    check_ids(batches, config)
    n = len(batches)
    for step in sorted({1, 10, n - 1}):  # (each restore starts the workers again)
        assert restored(source, config, states[step]) == batches[step:], step


NEW_PROCESS = [
    {"api": "dataset", "shuffle": True, "shard": (0, 2), "epochs": 2},
    {"api": "dataset", "shuffle": True, "workers": 2},
    {"api": "indices", "shuffle": True, "epochs": 2},
    {"api": "loader", "shuffle": True, "epochs": 2},
    {"api": "loader", "shuffle": True, "workers": 2, "shard": (1, 2)},
]
SAVE_AT = 7  # batches taken before the checkpoint (every run above has more)


@pytest.mark.slow
@pytest.mark.parametrize("config", NEW_PROCESS, ids=json.dumps)
def test_checkpoint_restored_in_a_new_process(files, source, config, tmp_path):
    """Saved with Grain's CheckpointHandler (what Orbax calls) mid-run, restored by another
    process that builds its own source and pipeline."""
    from etils import epath

    directory = tmp_path / "ckpt"
    directory.mkdir()
    it = iter(pipeline(source, config))
    whole = []
    try:
        for batch in it:
            whole.append(plain(batch))
            if len(whole) == SAVE_AT:
                grain.checkpoint.CheckpointHandler().save(epath.Path(directory), item=it)
    finally:
        close(it)
    check_ids(whole, config)
    assert len(whole) > SAVE_AT
    job = {"paths": files[0], "config": config, "checkpoint": str(directory)}
    out = child([os.path.abspath(__file__), json.dumps(job)])
    after = [[(i, name.encode()) for i, name in b] for b in json.loads(out.splitlines()[-1])]
    assert after == whole[SAVE_AT:]


def _restore_main(job: dict) -> None:
    """The child of test_checkpoint_restored_in_a_new_process: prints the batches after the
    checkpoint as JSON."""
    from etils import epath

    src = TFRecordDataSource(job["paths"], SPEC)
    config = job["config"]
    if "shard" in config:
        config["shard"] = tuple(config["shard"])
    it = iter(pipeline(src, config))
    try:
        grain.checkpoint.CheckpointHandler().restore(epath.Path(job["checkpoint"]), item=it)
        batches = run(it)
    finally:
        close(it)
    print(json.dumps([[(i, name.decode()) for i, name in b] for b in batches]))


def test_loader_refuses_a_checkpoint_of_another_source(files, source, tmp_path):
    """The DataLoader compares repr(source): other files with as many records are refused."""
    config = {"api": "loader", "shuffle": True}
    it = iter(pipeline(source, config))
    next(it)
    state = it.get_state()
    copies, _ = write_files(tmp_path)
    same = TFRecordDataSource(files[0], SPEC)
    iter(pipeline(same, config)).set_state(state)
    for other in (TFRecordDataSource(copies, SPEC), TFRecordDataSource(files[0])):
        with pytest.raises(ValueError, match="DataSource in checkpoint does not match"):
            iter(pipeline(other, config)).set_state(state)


# ---- docs/grain.md -------------------------------------------------------------------------------

DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "docs", "grain.md")


def doc_examples():
    """[(first line number, code)] of the ```python blocks of docs/grain.md."""
    found, block, first = [], None, 0
    with open(DOC, encoding="utf-8") as f:
        for number, line in enumerate(f.read().splitlines(), 1):
            if block is None and line.strip() == "```python":
                block, first = [], number + 1
            elif block is not None and line.strip() == "```":
                found.append((first, "\n".join(block) + "\n"))
                block = None
            elif block is not None:
                block.append(line)
    return found


@pytest.mark.parametrize(
    "first, code", doc_examples(), ids=[f"line{first}" for first, _ in doc_examples()]
)
def test_doc_example(first, code, tmp_path, monkeypatch):
    """Each example runs as written, in a fresh directory (tracebacks name docs/grain.md lines)."""
    monkeypatch.chdir(tmp_path)
    exec(compile("\n" * (first - 1) + code, DOC, "exec"), {"__name__": "__doc_example__"})


# ---- remote files ----------------------------------------------------------------------------

# Looked up, not imported: the worker processes Grain spawns import this module.
REMOTE_MISSING = [
    m for m in ("fsspec", "s3fs", "moto", "aiohttp") if importlib.util.find_spec(m) is None
]


def s3_bucket(s3, paths):
    """A new bucket holding the files (by their base names); -> (s3fs filesystem, bucket,
    storage options)."""
    import s3fs

    options = {"endpoint_url": s3.endpoint, "key": "testing", "secret": "testing"}
    fs = s3fs.S3FileSystem(**options)
    bucket = f"g-{uuid.uuid4().hex[:12]}"
    fs.mkdir(bucket)
    for p in paths:
        fs.put_file(p, f"{bucket}/{os.path.basename(p)}")
    return fs, bucket, options


needs_remote = pytest.mark.skipif(bool(REMOTE_MISSING), reason=f"needs {', '.join(REMOTE_MISSING)}")


@pytest.mark.remote
@needs_remote
def test_s3_files_with_and_without_indexes(s3, files, tmp_path):
    paths, payloads = files
    fs, bucket, options = s3_bucket(s3, paths)
    options["index_cache"] = str(tmp_path / "cache")
    offsets, sizes = create_index(paths[2])
    fs.pipe_file(f"{bucket}/part-002.tfrecord.idx", load_text_of((offsets, sizes)))

    src = TFRecordDataSource(
        f"s3://{bucket}/part-*.tfrecord", SPEC, storage_options=options, write_index=True
    )
    assert src.paths == [f"s3://{bucket}/{os.path.basename(p)}" for p in paths]
    assert [ix.url for ix in src._index_paths] == [p + ".idx" for p in src.paths]
    for k in (0, 1, 3):  # built by streaming the file once, then written next to it
        assert fs.cat_file(f"{bucket}/part-{k:03d}.tfrecord.idx") == load_text_of(
            create_index(paths[k])
        )
    order = list(range(100))
    random.Random(2).shuffle(order)
    assert [int(r["id"]) for r in src._getitems(order)] == order
    assert int(src[63]["id"]) == 63
    raw = TFRecordDataSource(f"s3://{bucket}/part-*.tfrecord", storage_options=options)
    assert raw._getitems(order) == [payloads[i] for i in order]

    worker = pickle.loads(pickle.dumps(src))  # its filesystem made again
    assert worker.__dict__["_indexes"] == [None] * 4
    config = {"api": "dataset", "shuffle": True, "epochs": 1}
    whole, states = states_and_run(worker, config, {5})
    check_ids(whole, config)
    assert restored(src, config, states[5]) == whole[5:]
    src.close()


@pytest.mark.remote
@needs_remote
def test_s3_index_built_once_per_machine(s3, files, tmp_path):
    """Objects without an index are streamed once per version per machine (the index cache):
    a source made again in another process (another rank, a restore) reads none of their
    bytes, and names them by the same digest."""
    paths, _ = files
    _, bucket, options = s3_bucket(s3, paths)
    options["index_cache"] = str(tmp_path / "cache")
    url = f"s3://{bucket}/part-*.tfrecord"
    src = TFRecordDataSource(url, SPEC, storage_options=options)
    assert src.record_counts() == list(SIZES)
    assert src._index_paths == [None] * 4
    s3.clear()
    code = (
        "import json, sys; from test_grain import *; "
        "src = TFRecordDataSource(sys.argv[1], SPEC, storage_options=json.loads(sys.argv[2]));"
        " print(repr(src))"
    )
    out = child(["-c", code, url, json.dumps(options)])
    assert s3.bytes_for(f"/{bucket}/part-") == 0
    assert out.strip() == repr(src)
    worker = pickle.loads(pickle.dumps(src))  # the built indexes travel with it
    assert [int(r["id"]) for r in worker._getitems([99, 0, 50])] == [99, 0, 50]


@pytest.mark.remote
@needs_remote
def test_s3_through_filesystem_and_stale_remote_index(s3, files, tmp_path):
    """filesystem=, an index given by URL, an object rewritten after the source was made, and
    a FILE.idx that does not fit its object."""
    paths, payloads = files
    fs, bucket, options = s3_bucket(s3, paths)
    settings = {"index_cache": str(tmp_path / "cache")}
    names = [f"{bucket}/{os.path.basename(p)}" for p in paths]
    src = TFRecordDataSource(f"{bucket}/part-*.tfrecord", filesystem=fs, storage_options=settings)
    assert src.paths == names
    assert src._getitems([0, 99, 40]) == [payloads[0], payloads[99], payloads[40]]
    assert pickle.loads(pickle.dumps(src))[77] == payloads[77]
    # an index given by URL, in a dict keyed by the file's URL
    fs.pipe_file(f"{bucket}/elsewhere.idx", load_text_of(create_index(paths[2])))
    urls = [f"s3://{n}" for n in names]
    given = TFRecordDataSource(
        urls,
        storage_options={**options, **settings},
        index={urls[2]: f"s3://{bucket}/elsewhere.idx"},
    )
    assert given._index_paths[2].url == f"s3://{bucket}/elsewhere.idx"
    assert given[37] == payloads[37]
    # an object rewritten after the source was made: refused in the worker, not mixed in
    worker = pickle.loads(pickle.dumps(given))
    fs.pipe_file(names[0], _oracle.build_file(payloads[:37][::-1]))
    with pytest.raises(ObjectChangedError) as changed:
        worker._getitems([1, 2])
    assert changed.value.path == urls[0]
    # FILE.idx of another file (37 records where the object holds 50): refused, naming the URL
    fs.pipe_file(f"{bucket}/part-002.tfrecord.idx", load_text_of(create_index(paths[0])))
    with pytest.raises(DataLossError) as raised:
        TFRecordDataSource(urls, storage_options={**options, **settings})
    assert raised.value.reason == "index_mismatch"
    assert (raised.value.path, raised.value.record_index) == (urls[2], 37)


# ---- the child process ---------------------------------------------------------------------------

if __name__ == "__main__":
    _restore_main(json.loads(sys.argv[1]))
