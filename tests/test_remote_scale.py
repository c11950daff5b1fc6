"""The storage layer at the scale where TFRecord data lives, through real servers on 127.0.0.1
(an HTTP server with Range, ETag and If-Match; moto's S3 server read with s3fs), every cost
counted by the servers: streaming many shards and one large object with ranges in flight
across objects and a bounded window, DDP planning without downloads (bytes per job with and
without indexes, fork and spawn workers), objects replaced while they are read, credentials,
retries, and storage_options / filesystem on every entry point."""

from __future__ import annotations

import importlib
import inspect
import io
import json
import multiprocessing
import os
import random
import subprocess
import sys
import textwrap
import uuid

import numpy as np
import pytest
from _servers import RangeHTTPServer


def _missing(*modules):
    missing = []
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    return missing


MISSING = _missing("fsspec", "s3fs", "moto.server", "aiohttp")
pytestmark = [
    pytest.mark.remote,
    pytest.mark.skipif(bool(MISSING), reason=f"needs {', '.join(MISSING)} (pip install '.[test]')"),
]

import tfrec_fast as tfr  # noqa: E402
from tfrec_fast import storage  # noqa: E402
from tfrec_fast.storage import settings as storage_settings  # noqa: E402

HAVE_TORCH = importlib.util.find_spec("torch") is not None
torch_job = pytest.mark.skipif(not HAVE_TORCH, reason="needs torch")
SPEC = {"id": tfr.FixedLen((), "int64")}


# ---- servers and data -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def http():
    server = RangeHTTPServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def s3fs_(s3_options):
    import s3fs

    return s3fs.S3FileSystem(**s3_options)


@pytest.fixture
def bucket(s3fs_):
    name = f"t-{uuid.uuid4().hex[:16]}"
    s3fs_.mkdir(name)
    return name


@pytest.fixture(autouse=True)
def isolated(monkeypatch, request, tmp_path):
    """Quick retries, an index cache of the test's own, no fault or count left over."""
    monkeypatch.setattr(storage_settings, "DEFAULTS", storage_settings.Settings(retry_delay=0.01))
    monkeypatch.setenv("TFREC_FAST_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("s3", "http"):
        if name in request.fixturenames:
            server = request.getfixturevalue(name)
            server.clear()
            server.gate(0)


def frame(records) -> bytes:
    out = io.BytesIO()
    with tfr.TFRecordWriter(out) as writer:
        writer.write_batch(records)
    return out.getvalue()


def sized_records(n, seed=0, low=500, high=3000):
    rng = np.random.default_rng(seed)
    return [rng.bytes(int(k)) for k in rng.integers(low, high, n)]


def examples(first: int, n: int, seed: int = 0) -> bytes:
    """n Examples with ids first.. and a payload of 500-1500 bytes."""
    rng = np.random.default_rng(seed)
    payload = [b"p" * int(k) for k in rng.integers(500, 1500, n)]
    return frame(tfr.encode_examples({"id": np.arange(first, first + n), "payload": payload}))


def index_text(data: bytes) -> bytes:
    """The index file of ``data`` (the text format of the tfrecord package and DALI)."""
    from tfrec_fast import _core

    return _core.format_index(*_index(data))


def _index(data: bytes):
    offsets, sizes = [], []
    for batch in tfr.TFRecordReader(data).iter_batches(max_bytes=1 << 20):
        offsets.append(np.array(batch.positions))
        sizes.append(np.diff(batch.offsets) + 16)
    return np.concatenate(offsets), np.concatenate(sizes)


# ---- streaming at link speed ------------------------------------------------------------------


def test_many_shards_stream_with_requests_in_flight_across_objects(http):
    """Eight shards of one range each, four ranges in flight: the server's gate passes only
    when four range reads wait at once, which happens only if the read-ahead reaches into the
    next objects while the first is being read. Every byte is sent once."""
    shards = [sized_records(20, seed=k, low=1000, high=2000) for k in range(8)]
    for k, records in enumerate(shards):
        http.files[f"/many/part-{k}.tfrecord"] = frame(records)
    total = sum(len(http.files[f"/many/part-{k}.tfrecord"]) for k in range(8))
    options = {"range_size": 64 << 10, "read_ahead": 4 * (64 << 10), "concurrency": 4}
    http.gate(4)
    got = list(
        tfr.read_records(
            http.url("/many/part-*.tfrecord"), copy=True, num_threads=1, storage_options=options
        )
    )
    http.gate(0)
    assert not http.gate_broken
    assert got == [r for records in shards for r in records]
    assert len(http.range_reads()) == 8  # one range per shard, none twice
    assert http.bytes_for("/many/part-") == total
    assert http.max_in_flight <= 4


def test_one_large_object_is_read_by_concurrent_ranges(http):
    records = sized_records(600, seed=2)
    data = frame(records)
    http.files["/large/a.tfrecord"] = data
    size = -(-len(data) // 16)  # 16 ranges, 8 in flight: the gate passes twice
    options = {"range_size": size, "read_ahead": 8 * size, "concurrency": 8}
    http.gate(8)
    with tfr.TFRecordReader(http.url("/large/a.tfrecord"), storage_options=options) as reader:
        got = [bytes(r) for r in reader]
    http.gate(0)
    assert not http.gate_broken
    assert got == records
    assert len(http.range_reads()) == 16
    assert http.bytes_for("/large/") == len(data)


@pytest.mark.parametrize("threads", [1, 3])
def test_read_ahead_holds_at_most_its_bound(http, threads):
    """With a window of three ranges, the server never sees more than three range reads at once
    (plus one per reader reading a file the window has not reached)."""
    shards = [sized_records(150, seed=10 + k) for k in range(4)]
    for k, records in enumerate(shards):
        http.files[f"/bound/p-{k}.tfrecord"] = frame(records)
    options = {"range_size": 32 << 10, "read_ahead": 3 * (32 << 10), "concurrency": 16}
    got = list(
        tfr.read_records(
            http.url("/bound/p-*.tfrecord"), copy=True, num_threads=threads, storage_options=options
        )
    )
    assert got == [r for records in shards for r in records]
    assert http.max_in_flight <= 3 + (threads if threads > 1 else 0)
    assert http.bytes_for("/bound/") == sum(
        len(http.files[f"/bound/p-{k}.tfrecord"]) for k in range(4)
    )


def test_files_of_a_read_ahead_may_be_read_in_any_order(http):
    """A reader never waits for another: the file the window has not reached fetches its own
    ranges; a file read again gets a stream of its own."""
    for k in range(3):
        http.files[f"/order/p-{k}.tfrecord"] = frame(sized_records(80, seed=20 + k))
    locations = storage.expand(
        http.url("/order/p-*.tfrecord"), {"range_size": 32 << 10, "read_ahead": 2 * (32 << 10)}
    )
    ahead = storage.ReadAhead(locations)
    got = {}
    for k in (2, 0, 1, 2):
        with ahead.open(k) as f:
            got[k] = f.read()
    ahead.close()
    assert all(got[k] == http.files[f"/order/p-{k}.tfrecord"] for k in range(3))
    with pytest.raises(ValueError, match="closed"):
        ahead.open(1)


def test_a_planned_range_fetches_its_bytes_and_no_more(http):
    from tfrec_fast import _loader

    records = sized_records(400, seed=3)
    data = frame(records)
    http.files["/plan/r.tfrecord"] = data
    offsets, _ = _index(data)
    url = http.url("/plan/r.tfrecord")
    got = [bytes(r) for batch in _loader.read_range(url, 100, 250, offsets=offsets) for r in batch]
    assert got == records[100:250]
    assert http.bytes_for("/plan/") == int(offsets[250] - offsets[100])


# ---- planning without downloads ---------------------------------------------------------------


def _rank_job(url, world: int, options_of_rank, start="fork", epochs=1):
    """Every rank of a DDP job in turn, each with two DataLoader workers: their ids."""
    import torch

    from tfrec_fast.torch import TFRecordDataset

    ids = []
    for rank in range(world):
        ds = TFRecordDataset(
            url,
            spec=SPEC,
            batch_size=64,
            rank=rank,
            world_size=world,
            storage_options=options_of_rank(rank),
        )
        loader = torch.utils.data.DataLoader(
            ds, batch_size=None, num_workers=2, multiprocessing_context=start
        )
        for epoch in range(epochs):
            ds.set_epoch(epoch)
            ids += [i for batch in loader for i in batch["id"].tolist()]
    return ids


@pytest.mark.torch
@torch_job
def test_ddp_job_with_indexes_fetches_the_data_once(http):
    data = examples(0, 3000)
    http.files["/ddp1/a.tfrecord"] = data
    http.files["/ddp1/a.tfrecord.idx"] = index_text(data)
    ids = _rank_job(http.url("/ddp1/a.tfrecord"), 2, lambda rank: None)
    assert sorted(ids) == list(range(3000))
    assert http.bytes_sent <= 1.10 * len(data)
    assert http.bytes_for("/ddp1/a.tfrecord") - http.bytes_for(".idx") == len(data)


@pytest.mark.torch
@torch_job
def test_ddp_job_without_indexes_counts_once_per_rank(http, tmp_path):
    """Each rank on its own machine (its own index cache): one scan per rank, then every
    record once: (ranks + 1) x the data; the next epoch reads the data only."""
    data = examples(0, 3000, seed=1)
    http.files["/ddp2/a.tfrecord"] = data
    ids = _rank_job(
        http.url("/ddp2/a.tfrecord"),
        2,
        lambda rank: {"index_cache": str(tmp_path / f"machine-{rank}")},
    )
    assert sorted(ids) == list(range(3000))
    assert http.bytes_sent <= (2 + 1) * len(data)
    http.clear()
    ids = _rank_job(
        http.url("/ddp2/a.tfrecord"),
        2,
        lambda rank: {"index_cache": str(tmp_path / f"machine-{rank}")},
    )
    assert sorted(ids) == list(range(3000))
    assert http.bytes_sent == len(data)  # counted already: the data, once


@pytest.mark.torch
@torch_job
def test_ddp_job_without_indexes_counts_once_per_machine(http):
    data = examples(0, 2000, seed=2)
    http.files["/ddp3/a.tfrecord"] = data
    ids = _rank_job(http.url("/ddp3/a.tfrecord"), 2, lambda rank: None)
    assert sorted(ids) == list(range(2000))
    assert http.bytes_sent <= 2 * len(data)


@pytest.mark.torch
@torch_job
def test_ddp_job_over_many_shards_with_indexes(http):
    sizes = [700, 300, 450, 1000, 55]
    first, total = 0, 0
    for k, n in enumerate(sizes):
        data = examples(first, n, seed=k)
        http.files[f"/ddp4/part-{k}.tfrecord"] = data
        http.files[f"/ddp4/part-{k}.tfrecord.idx"] = index_text(data)
        first += n
        total += len(data)
    ids = _rank_job(http.url("/ddp4/part-*.tfrecord"), 2, lambda rank: None)
    assert set(ids) == set(range(first)) and len(ids) == 2 * -(-first // 2)
    assert http.bytes_sent <= 1.10 * total


SPAWN_SCRIPT = textwrap.dedent("""
    import json, os, sys
    import torch
    import tfrec_fast as tfr
    from tfrec_fast.torch import IndexedTFRecordDataset, TFRecordDataset

    def main():
        url, options = sys.argv[1], json.loads(sys.argv[2])
        spec = {"id": tfr.FixedLen((), "int64")}
        ids = []
        for rank in range(2):
            ds = TFRecordDataset(url, spec=spec, batch_size=64, rank=rank, world_size=2,
                                 storage_options=options)
            loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2,
                                                 multiprocessing_context="spawn")
            ids += [i for b in loader for i in b["id"].tolist()]
        indexed = IndexedTFRecordDataset(url, spec, storage_options=options)
        loader = torch.utils.data.DataLoader(indexed, batch_size=100, num_workers=2,
                                             multiprocessing_context="spawn")
        indexed_ids = [i for b in loader for i in b["id"].tolist()]
        print(json.dumps({"ids": ids, "indexed": indexed_ids, "len": len(indexed)}))

    if __name__ == "__main__":
        main()
""")


@pytest.mark.torch
@torch_job
@pytest.mark.parametrize("indexed", [True, False], ids=["with-idx", "without-idx"])
def test_spawned_workers_plan_without_downloads(http, tmp_path, indexed):
    """spawn (macOS, Windows): the datasets pickle with their storage_options, and the workers
    take counts and indexes from the index files or the machine's index cache."""
    data = examples(0, 2000, seed=4)
    http.files["/spawn/a.tfrecord"] = data
    if indexed:
        http.files["/spawn/a.tfrecord.idx"] = index_text(data)
    else:
        http.files.pop("/spawn/a.tfrecord.idx", None)
    script = tmp_path / "spawn_job.py"
    script.write_text(SPAWN_SCRIPT)
    options = {"index_cache": str(tmp_path / "cache"), "retry_delay": 0.01}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run(
        [sys.executable, str(script), http.url("/spawn/a.tfrecord"), json.dumps(options)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert sorted(result["ids"]) == list(range(2000))
    assert sorted(result["indexed"]) == list(range(2000)) and result["len"] == 2000
    # streaming: the data once, plus one scan without an index (then in the index cache for
    # the indexed dataset too); the indexed dataset: its records, read in order, and the first
    # 12 bytes once (the compression check of its readers, then in the index cache)
    assert http.bytes_sent <= (2.10 if indexed else 3.0) * len(data) + 12


@pytest.mark.torch
@torch_job
def test_indexed_dataset_counts_once_in_the_process_that_makes_it(http):
    import torch

    from tfrec_fast.torch import IndexedTFRecordDataset

    data = examples(0, 1500, seed=5)
    http.files["/idxds/a.tfrecord"] = data
    url = http.url("/idxds/a.tfrecord")
    dataset = IndexedTFRecordDataset(url, SPEC)
    assert len(dataset) == 1500
    assert http.bytes_sent == len(data)  # one scan
    again = IndexedTFRecordDataset(url, SPEC)  # the same version: from the index cache
    assert len(again) == 1500 and http.bytes_sent == len(data)
    http.clear()
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=100, num_workers=2, multiprocessing_context="fork"
    )
    assert sorted(i for b in loader for i in b["id"].tolist()) == list(range(1500))
    assert http.bytes_sent == len(data)  # the records, nothing counted again


def test_describe_gives_sizes_versions_and_indexes_without_reading_data(
    http, s3fs_, s3_options, s3, bucket
):
    datas = [examples(100 * k, 100, seed=k) for k in range(3)]
    for k, data in enumerate(datas):
        http.files[f"/desc/p-{k}.tfrecord"] = data
        s3fs_.pipe_file(f"{bucket}/desc/p-{k}.tfrecord", data)
    http.files["/desc/p-1.tfrecord.idx"] = index_text(datas[1])
    s3fs_.pipe_file(f"{bucket}/desc/p-1.tfrecord.idx", index_text(datas[1]))
    http.clear()
    s3.clear()
    for pattern, options, server in (
        (http.url("/desc/p-*.tfrecord"), None, http),
        (f"s3://{bucket}/desc/p-*.tfrecord", s3_options, s3),
    ):
        infos = storage.describe(pattern, storage_options=options)
        assert [info.size for info in infos] == [len(d) for d in datas]
        assert all(info.version for info in infos)
        assert [info.index_location is not None for info in infos] == [False, True, False]
        offsets, sizes = infos[1].index
        assert np.array_equal(offsets, _index(datas[1])[0])
        assert server.bytes_for(".tfrecord") - server.bytes_for(".idx") == 0  # no data read
        assert pickle_round_trip(infos[0].location).stat() == infos[0].stat


def pickle_round_trip(obj):
    import pickle

    return pickle.loads(pickle.dumps(obj))


# ---- versions ---------------------------------------------------------------------------------

SMALL = {"range_size": 64 << 10, "read_ahead": 128 << 10}


def _read_until_changed(url, replace, options):
    """Reads some records, calls replace(), reads on: (records read, the error)."""
    reader = tfr.TFRecordReader(url, storage_options=options)
    it = iter(reader)
    got = [bytes(next(it)) for _ in range(5)]
    replace()
    with pytest.raises(OSError) as error:
        for record in it:
            got.append(bytes(record))
    reader.close()
    return got, error.value


@pytest.mark.parametrize("server", ["http", "s3"])
def test_object_replaced_mid_read_is_object_changed_error(server, http, s3fs_, s3_options, bucket):
    old, new = sized_records(1500, seed=6), sized_records(1500, seed=7)
    if server == "http":
        http.files["/chg/a.tfrecord"] = frame(old)
        url, options = http.url("/chg/a.tfrecord"), SMALL

        def replace():
            http.files["/chg/a.tfrecord"] = frame(new)
    else:
        url, options = f"s3://{bucket}/a.tfrecord", dict(s3_options, **SMALL)
        s3fs_.pipe_file(url, frame(old))

        def replace():
            s3fs_.pipe_file(url, frame(new))

    got, error = _read_until_changed(url, replace, options)
    assert isinstance(error, tfr.ObjectChangedError) and error.pinned
    assert not isinstance(error, tfr.DataLossError)
    assert error.path == url and url in str(error) and "changed" in str(error)
    assert error.__cause__ is not None
    assert got == old[: len(got)] and len(got) < len(old)  # the old version only


def test_object_replaced_without_etag_is_found_when_a_block_looks_wrong():
    server = RangeHTTPServer(etag=False).start()  # Last-Modified and size only
    try:
        old, new = sized_records(1500, seed=6), sized_records(1600, seed=7)
        server.files["/a.tfrecord"] = frame(old)

        def replace():
            server.files["/a.tfrecord"] = frame(new)

        got, error = _read_until_changed(server.url("/a.tfrecord"), replace, SMALL)
    finally:
        server.stop()
    assert isinstance(error, tfr.ObjectChangedError) and not error.pinned
    assert isinstance(error.__cause__, tfr.DataLossError)


def test_versioned_bucket_reads_the_version_it_started_with(s3fs_, s3_options, bucket):
    s3fs_.call_s3(
        "put_bucket_versioning", Bucket=bucket, VersioningConfiguration={"Status": "Enabled"}
    )
    old, new = sized_records(1500, seed=8), sized_records(1500, seed=9)
    url = f"s3://{bucket}/v.tfrecord"
    s3fs_.pipe_file(url, frame(old))
    reader = tfr.TFRecordReader(url, storage_options=dict(s3_options, **SMALL))
    it = iter(reader)
    got = [bytes(next(it)) for _ in range(5)]
    s3fs_.pipe_file(url, frame(new))
    got += [bytes(r) for r in it]
    assert got == old  # by VersionId: the whole old version, nothing of the new


@pytest.mark.parametrize("server", ["http", "s3"])
def test_random_access_after_replacement_is_object_changed_error(
    server, http, s3fs_, s3_options, bucket
):
    old = sized_records(200, seed=11)
    if server == "http":
        http.files["/chg/r.tfrecord"] = frame(old)
        url, options = http.url("/chg/r.tfrecord"), None

        def replace():
            http.files["/chg/r.tfrecord"] = frame(old[::-1])
    else:
        url, options = f"s3://{bucket}/r.tfrecord", s3_options
        s3fs_.pipe_file(url, frame(old))

        def replace():
            s3fs_.pipe_file(url, frame(old[::-1]))

    with tfr.IndexedTFRecordReader(url, storage_options=options) as reader:
        assert reader.get_batch([3, 150]).to_list() == [old[3], old[150]]
        replace()
        with pytest.raises(tfr.ObjectChangedError) as error:
            reader.get_batch([4, 5])
    assert error.value.path == url


# ---- credentials and retries ------------------------------------------------------------------


@pytest.fixture
def no_aws_credentials(monkeypatch, tmp_path):
    for key in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_ENDPOINT_URL_S3",
        "AWS_ENDPOINT_URL",
    ):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture
def sleeps(monkeypatch):
    """Every back-off wait the storage layer chose, recorded; no wait is slept."""
    import asyncio

    chosen = []
    real_delays, real_async_sleep = storage.remote.delays, asyncio.sleep

    def delays(settings):
        for wait in real_delays(settings):
            chosen.append(wait)
            yield wait

    async def no_sleep(seconds, *args, **kwargs):
        await real_async_sleep(0)

    monkeypatch.setattr(storage.remote, "delays", delays)
    monkeypatch.setattr(storage.remote.time, "sleep", lambda seconds: None)
    monkeypatch.setattr(asyncio, "sleep", no_sleep)
    return chosen


def test_missing_credentials_fail_at_once(s3, no_aws_credentials, sleeps, bucket):
    url = f"s3://{bucket}/x.tfrecord"
    s3.clear()
    with pytest.raises(PermissionError, match="credentials missing or refused") as error:
        tfr.count_records(url, storage_options={"endpoint_url": s3.endpoint})
    assert error.value.filename == url
    assert type(error.value.__cause__).__name__ == "NoCredentialsError"
    assert sleeps == [] and s3.requests == []  # no retry, nothing sent


def test_refused_credentials_fail_at_once(s3, s3fs_, s3_options, bucket, sleeps):
    url = f"s3://{bucket}/y.tfrecord"
    s3fs_.pipe_file(url, frame([b"a"]))
    s3.clear()
    refused = dict(s3_options, key="refused")
    for call in (
        lambda: tfr.count_records(url, storage_options=refused),
        lambda: tfr.IndexedTFRecordReader(url, storage_options=refused),
        lambda: list(tfr.read_records(f"s3://{bucket}/*.tfrecord", storage_options=refused)),
    ):
        with pytest.raises(PermissionError, match="credentials missing or refused") as error:
            call()
        assert "InvalidAccessKeyId" in str(error.value) or "(403)" in str(error.value)
    assert sleeps == [] and len(s3.requests) == 3  # one request each, none retried


def test_http_credentials_missing_or_refused(sleeps):
    server = RangeHTTPServer(auth=("alice", "hunter2")).start()
    try:
        server.files["/a.tfrecord"] = frame([b"x", b"y"])
        host = server.base.split("//", 1)[1]
        for url in (server.url("/a.tfrecord"), f"http://alice:wrong@{host}/a.tfrecord"):
            with pytest.raises(PermissionError, match="credentials") as error:
                tfr.count_records(url)
            assert "wrong" not in str(error.value) and error.value.__cause__ is not None
        # fsspec's info() asks HEAD, then GET when HEAD fails: two requests a call, no retry
        assert [m for m, _, _ in server.requests] == ["HEAD", "GET"] * 2 and sleeps == []
        assert tfr.count_records(f"http://alice:hunter2@{host}/a.tfrecord") == 2
    finally:
        server.stop()


@pytest.mark.parametrize("retries", [0, 2])
@pytest.mark.parametrize("server", ["http", "s3"])
def test_retries_are_per_call_and_not_multiplied(
    server, retries, http, s3, s3fs_, s3_options, bucket, sleeps
):
    """A server that keeps failing gets exactly 1 + retries requests for the range: s3fs and
    botocore do not retry underneath (the filesystem is made so), and the waits grow."""
    data = frame(sized_records(50, seed=12))
    if server == "s3":
        url, options, log = f"s3://{bucket}/f.tfrecord", dict(s3_options), s3
        s3fs_.pipe_file(url, data)
    else:
        http.files["/retry/f.tfrecord"] = data
        url, options, log = http.url("/retry/f.tfrecord"), {}, http
    options.update(retries=retries, retry_delay=1.0)
    log.clear()
    log.inject("503", 10)
    with pytest.raises(OSError) as error:
        tfr.count_records(url, storage_options=options)
    attempts = len(log.range_reads())
    log.clear()  # (the faults left)
    assert attempts == 1 + retries
    assert not isinstance(error.value, tfr.DataLossError)
    assert f"after {1 + retries} attempts" in str(error.value) or retries == 0
    assert error.value.__cause__ is not None and error.value.filename == url
    assert len(sleeps) == retries
    assert all(2**k / 2 <= wait <= 2**k for k, wait in enumerate(sleeps))


def test_backoff_is_jittered_and_exponential():
    random.seed(1)
    settings = storage.Settings(retries=6, retry_delay=0.5)
    runs = [list(storage.retry.delays(settings)) for _ in range(50)]
    for run in runs:
        assert len(run) == 6
        assert all(0.5 * 2**k / 2 <= d <= 0.5 * 2**k for k, d in enumerate(run))
    assert len({run[0] for run in runs}) > 40  # jittered: clients that failed together spread


def test_a_filesystem_that_retries_by_itself_is_not_retried_on_top(s3fs_, http):
    url_store = storage.resolve("s3://b/k", {"endpoint_url": "http://127.0.0.1:1"}).store
    given = storage.resolve("b/k", filesystem=s3fs_).store
    assert not url_store.backend_retries and url_store.fs.retries == 1
    assert given.backend_retries and s3fs_.retries != 1  # the caller's filesystem untouched
    assert not storage.resolve(http.url("/x")).store.backend_retries
    assert storage.retry.retryable(storage.retry.ShortRead("short"), True)
    assert not storage.retry.retryable(OSError("reset"), True)


# ---- every entry point takes storage_options and filesystem ----------------------------------

ENTRY_POINTS = [
    "tfrec_fast:read_records",
    "tfrec_fast:read_batches",
    "tfrec_fast:count_records",
    "tfrec_fast:read_examples",
    "tfrec_fast:TFRecordReader",
    "tfrec_fast:TFRecordWriter",
    "tfrec_fast:IndexedTFRecordReader",
    "tfrec_fast:create_index",
    "tfrec_fast:load_index",
    "tfrec_fast.index:write_index",
    "tfrec_fast:ShardedWriter",
    "tfrec_fast:read_manifest",
    "tfrec_fast.records:detect_compression",
    "tfrec_fast.records:expand_pattern",
    "tfrec_fast.storage:describe",
    "tfrec_fast.convert:convert_numpy",
    "tfrec_fast.convert:convert_imagefolder",
    "tfrec_fast.convert:convert_voc",
    "tfrec_fast.torch:TFRecordDataset",
    "tfrec_fast.torch:MultiTFRecordDataset",
    "tfrec_fast.torch:IndexedTFRecordDataset",
]


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(
            name,
            marks=pytest.mark.skipif(
                name.startswith("tfrec_fast.torch:") and not HAVE_TORCH, reason="needs torch"
            ),
        )
        for name in ENTRY_POINTS
    ],
)
def test_entry_point_takes_storage_options_and_filesystem(name):
    module, attr = name.split(":")
    parameters = inspect.signature(getattr(importlib.import_module(module), attr)).parameters
    assert "storage_options" in parameters and "filesystem" in parameters


@pytest.mark.torch
@torch_job
@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_torch_datasets_take_a_filesystem_and_options_into_workers(
    start, s3fs_, s3_options, bucket
):
    import torch

    from tfrec_fast.torch import IndexedTFRecordDataset, MultiTFRecordDataset, TFRecordDataset

    for k in range(3):
        s3fs_.pipe_file(f"{bucket}/w/part-{k}.tfrecord", examples(100 * k, 100, seed=k))
    pattern = f"s3://{bucket}/w/part-*.tfrecord"
    for make in (
        lambda: TFRecordDataset(pattern, spec=SPEC, storage_options=s3_options),
        lambda: TFRecordDataset(f"{bucket}/w/part-*.tfrecord", spec=SPEC, filesystem=s3fs_),
        lambda: IndexedTFRecordDataset(pattern, SPEC, storage_options=s3_options),
    ):
        loader = torch.utils.data.DataLoader(
            make(), batch_size=32, num_workers=2, multiprocessing_context=start
        )
        assert sorted(i for b in loader for i in b["id"].tolist()) == list(range(300))
    mixed = MultiTFRecordDataset(
        {"a": pattern}, splits={"a": 1.0}, spec=SPEC, infinite=False, storage_options=s3_options
    )
    assert sorted(int(r["id"]) for r in mixed) == list(range(300))


def test_storage_options_reach_a_forked_child(http):
    """A Location pickles with its settings and remembered version."""
    http.files["/fork/a.tfrecord"] = frame([b"x"] * 10)
    location = storage.resolve(http.url("/fork/a.tfrecord"), {"retries": 7})
    location.stat()
    context = multiprocessing.get_context("fork")
    queue = context.SimpleQueue()
    child = context.Process(target=_child_reads, args=(location, queue))
    child.start()
    result = queue.get()
    child.join()
    assert result == (7, 10)


def _child_reads(location, queue):
    try:
        queue.put((location.store.settings.retries, tfr.count_records(location)))
    except BaseException as error:
        queue.put(repr(error))


def test_gcs_reads_ask_for_the_generation_planned():
    """gcsfs is not served here: a filesystem of its class name records what a read asks for.
    Every range names the generation the plan saw; a generation that is gone (the object was
    rewritten) is ObjectChangedError."""
    from fsspec.asyn import AsyncFileSystem

    class GCSFileSystem(AsyncFileSystem):
        protocol = "gs"
        data = frame([b"record %d" % i + bytes(20_000) for i in range(150)])  # 3 MB
        generation = "7"
        asked: list = []

        async def _info(self, path, **kwargs):
            return {
                "name": path,
                "size": len(self.data),
                "type": "file",
                "generation": self.generation,
                "etag": "CAc=",
            }

        async def _cat_file(self, path, start=None, end=None, **kwargs):
            self.asked.append(kwargs.get("generation"))
            if kwargs.get("generation") != self.generation:
                raise FileNotFoundError(path)  # what GCS answers for a generation gone
            return self.data[start:end]

    fs = GCSFileSystem(skip_instance_cache=True)
    url = "gs://bucket/a.tfrecord"
    options = {"range_size": 64 << 10, "read_ahead": 64 << 10}
    assert tfr.count_records(url, filesystem=fs, storage_options=options) == 150
    assert set(GCSFileSystem.asked) == {"7"} and len(GCSFileSystem.asked) > 1
    reader = tfr.TFRecordReader(url, filesystem=fs, storage_options=options)
    it = iter(reader)
    assert bytes(next(it)).startswith(b"record 0")
    GCSFileSystem.generation = "8"
    with pytest.raises(tfr.ObjectChangedError) as error:
        list(it)
    assert error.value.path == url and error.value.pinned
