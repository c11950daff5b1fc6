"""Remote data through real servers on 127.0.0.1: an S3 server (moto) read with s3fs, and an HTTP
server with Range support. The conformance corpus gives the same records and the same errors as
local files; globs, indexes and random access, writing, the CLI, faults and credentials."""

from __future__ import annotations

import gc
import hashlib
import importlib
import importlib.util
import multiprocessing
import os
import threading
import time
import uuid

import _corpus
import numpy as np
import pytest
from _servers import RangeHTTPServer
from _util import check_error, read_all


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
from tfrec_fast import index as index_module  # noqa: E402
from tfrec_fast.cli import main  # noqa: E402
from tfrec_fast.records import expand_pattern  # noqa: E402
from tfrec_fast.storage import remote as storage_remote  # noqa: E402
from tfrec_fast.storage import settings as storage_settings  # noqa: E402

RETRIES = storage_settings.DEFAULTS.retries

CASES = _corpus.case_params(pytest)
HAVE_TORCH = importlib.util.find_spec("torch") is not None
HAVE_PYARROW = importlib.util.find_spec("pyarrow") is not None


# ---- servers -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def s3fs_(s3_options):
    import s3fs

    return s3fs.S3FileSystem(**s3_options)


@pytest.fixture(scope="module")
def http():
    server = RangeHTTPServer().start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch, request, tmp_path):
    """Retries without the production back-off, an index cache of the test's own, and no fault
    left over from another test."""
    monkeypatch.setattr(storage_settings, "DEFAULTS", storage_settings.Settings(retry_delay=0.01))
    monkeypatch.setenv("TFREC_FAST_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("s3", "http"):
        if name in request.fixturenames:
            request.getfixturevalue(name).clear()


@pytest.fixture
def bucket(s3fs_):
    name = f"t-{uuid.uuid4().hex[:16]}"
    s3fs_.mkdir(name)
    return name


def frame_file(records) -> bytes:
    import io

    out = io.BytesIO()
    with tfr.TFRecordWriter(out) as writer:
        writer.write_batch(records)
    return out.getvalue()


def sized_records(n, seed=0, low=500, high=3000):
    rng = np.random.default_rng(seed)
    return [rng.bytes(int(k)) for k in rng.integers(low, high, n)]


# ---- the conformance corpus through each server ------------------------------------------------


@pytest.fixture(scope="module")
def corpus_urls(s3fs_, s3_options, http):
    """{"s3" | "http": (url of a corpus file, storage_options)}: every corpus file uploaded."""
    s3fs_.mkdir("corpus")
    root = _corpus.corpus_dir()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel, data = path.relative_to(root).as_posix(), path.read_bytes()
        s3fs_.pipe_file(f"corpus/{rel}", data)
        http.files[f"/corpus/{rel}"] = data
    return {
        "s3": (lambda rel: f"s3://corpus/{rel}", s3_options),
        "http": (lambda rel: http.url(f"/corpus/{rel}"), None),
    }


def _summary(result):
    records, error = result
    return (
        [hashlib.sha256(r).hexdigest() for r in records],
        None if error is None else (error.reason, error.record_index, error.offset),
    )


@pytest.mark.parametrize("server", ["s3", "http"])
@pytest.mark.parametrize("case", CASES)
def test_corpus_reads_the_same_through_the_server(corpus_urls, server, case):
    """Same records, same error (reason, record, offset) as the local file; the error names the
    URL. compression="auto" too."""
    case = _corpus.require_case(pytest, case)
    url_of, options = corpus_urls[server]
    url = url_of(case.rel)
    local = read_all(str(case.path), compression=case.compression)
    got = read_all(url, compression=case.compression, storage_options=options)
    assert _summary(got) == _summary(local)
    if got[1] is not None:
        check_error(got[1])
        assert got[1].path == url and url in str(got[1])
    auto = read_all(url, compression="auto", storage_options=options)
    assert _summary(auto) == _summary(read_all(str(case.path), compression="auto"))
    if case.well_formed:
        assert (
            tfr.count_records(url, case.compression, storage_options=options)
            == case.expected["record_count"]
        )


@pytest.mark.parametrize("server", ["s3", "http"])
def test_uncompressed_read_of_gzip_file_gets_the_hint(corpus_urls, server):
    url_of, options = corpus_urls[server]
    with pytest.raises(tfr.DataLossError, match="pass compression='gzip' or 'auto'"):
        tfr.count_records(url_of("compressed/gzip_default.tfrecord"), storage_options=options)


def test_read_examples_over_s3(corpus_urls, corpus_file):
    url_of, options = corpus_urls["s3"]
    rel = "example/mnist_like.tfrecord"
    spec = {"label": tfr.FixedLen((), "int64")}
    local = list(tfr.read_examples(str(corpus_file(rel)), spec, batch_size=7))
    got = list(tfr.read_examples(url_of(rel), spec, batch_size=7, storage_options=options))
    assert [b["label"].tolist() for b in got] == [b["label"].tolist() for b in local]


# ---- globs and missing files -------------------------------------------------------------------


def test_s3_globs_sorted_hidden_left_out(s3fs_, s3_options, bucket):
    for name in (
        "train-00001-of-00002.tfrecord",
        "train-00000-of-00002.tfrecord",
        ".train-00002.tfrecord.tmp-x",
        "sub/train-00000-of-00001.tfrecord",
        "eval.txt",
    ):
        s3fs_.pipe_file(f"{bucket}/{name}", frame_file([name.encode()]))
    urls = expand_pattern(f"s3://{bucket}/train-*.tfrecord", storage_options=s3_options)
    assert urls == [
        f"s3://{bucket}/train-00000-of-00002.tfrecord",
        f"s3://{bucket}/train-00001-of-00002.tfrecord",
    ]
    assert expand_pattern(
        f"s3://{bucket}/**/train-*-of-00001.tfrecord", storage_options=s3_options
    ) == [f"s3://{bucket}/sub/train-00000-of-00001.tfrecord"]
    records = tfr.read_records(
        f"s3://{bucket}/train-*-of-00002.tfrecord", copy=True, storage_options=s3_options
    )
    assert list(records) == [b"train-00000-of-00002.tfrecord", b"train-00001-of-00002.tfrecord"]
    with pytest.raises(FileNotFoundError, match="no file matches") as error:
        tfr.count_records(f"s3://{bucket}/test-*.tfrecord", storage_options=s3_options)
    assert error.value.filename == f"s3://{bucket}/test-*.tfrecord"
    with pytest.raises(FileNotFoundError) as error:
        tfr.count_records(f"s3://{bucket}/missing.tfrecord", storage_options=s3_options)
    assert error.value.filename == f"s3://{bucket}/missing.tfrecord"
    with pytest.raises(IsADirectoryError):
        tfr.count_records(f"s3://{bucket}/sub", storage_options=s3_options)


def test_http_glob_and_missing(http):
    for name in ("b.tfrecord", "a.tfrecord", "notes.txt"):
        http.files[f"/glob/{name}"] = frame_file([name.encode()])
    assert expand_pattern(http.url("/glob/*.tfrecord")) == [
        http.url("/glob/a.tfrecord"),
        http.url("/glob/b.tfrecord"),
    ]
    with pytest.raises(FileNotFoundError) as error:
        tfr.count_records(http.url("/glob/missing.tfrecord"))
    assert error.value.filename == http.url("/glob/missing.tfrecord")


# ---- indexes and random access -----------------------------------------------------------------


def test_index_of_remote_file_matches_local(corpus_urls, corpus_file, tmp_path):
    rel = "index/tiny_100k.tfrecord"
    url_of, options = corpus_urls["s3"]
    local = tfr.create_index(str(corpus_file(rel)))
    remote_index_url = url_of(rel) + ".made.idx"
    got = tfr.create_index(url_of(rel), remote_index_url, storage_options=options)
    assert all(np.array_equal(a, b) for a, b in zip(got, local))
    assert all(
        np.array_equal(a, b)
        for a, b in zip(tfr.load_index(remote_index_url, storage_options=options), local)
    )
    # the corpus's own index file, read remotely, against the remote data
    with (
        tfr.IndexedTFRecordReader(
            url_of(rel), url_of("index/tiny_100k.idx"), storage_options=options
        ) as reader,
        tfr.IndexedTFRecordReader(str(corpus_file(rel))) as local_reader,
    ):
        assert len(reader) == len(local_reader)
        indices = [len(reader) - 1, 0, 3, 3, 1]
        got, want = reader.get_batch(indices), local_reader.get_batch(indices)
        assert got.to_list() == want.to_list()
        assert got.positions.tolist() == want.positions.tolist()
        assert bytes(reader[-1]) == bytes(local_reader[-1])
    with pytest.raises(ValueError, match="compressed"):
        tfr.create_index(url_of("compressed/gzip_default.tfrecord"), storage_options=options)


@pytest.mark.parametrize("server", ["s3", "http"])
def test_get_batch_is_few_concurrent_range_requests(
    server, s3, s3fs_, s3_options, http, bucket, monkeypatch
):
    records = sized_records(3000, seed=1)
    data = frame_file(records)
    if server == "s3":
        s3fs_.pipe_file(f"{bucket}/r.tfrecord", data)
        url, options, log = f"s3://{bucket}/r.tfrecord", s3_options, s3
    else:
        http.files["/ra/r.tfrecord"] = data
        url, options, log = http.url("/ra/r.tfrecord"), None, http
    reader = tfr.IndexedTFRecordReader(url, storage_options=options)
    offsets, sizes = reader.offsets, reader.sizes
    rng = np.random.default_rng(7)

    # 256 random records: one range request per run of nearby records, never one per record
    indices = rng.integers(0, len(records), 256)
    log.clear()
    batch = reader.get_batch(indices)
    assert batch.to_list() == [records[i] for i in indices]
    assert batch.positions.tolist() == offsets[indices].tolist()
    wanted = np.unique(indices)
    runs = len(index_module.coalesce(offsets[wanted], offsets[wanted] + sizes[wanted])[0])
    assert len(log.range_reads()) == runs <= len(wanted)
    assert len(log.requests) == runs  # no metadata request: the size was taken at open

    # far-apart records: one request each, all in flight at once (the gate waits for 8)
    monkeypatch.setattr(index_module, "RANGE_MAX_GAP", 0)
    spread = np.arange(8) * (len(records) // 8)
    log.clear()
    log.gate(8)
    try:
        assert reader.get_batch(spread[::-1]).to_list() == [records[i] for i in spread[::-1]]
    finally:
        log.gate(0)
    assert not log.gate_broken
    assert len(log.range_reads()) == 8


def test_random_access_errors_name_the_url(s3fs_, s3_options, bucket):
    records = sized_records(50, seed=2)
    data = bytearray(frame_file(records))
    url = f"s3://{bucket}/bad.tfrecord"
    s3fs_.pipe_file(url, bytes(data))
    offsets, sizes = tfr.create_index(url, storage_options=s3_options)
    data[int(offsets[10]) + 20] ^= 1  # record 10's payload
    s3fs_.pipe_file(url, bytes(data))
    with tfr.IndexedTFRecordReader(url, (offsets, sizes), storage_options=s3_options) as reader:
        with pytest.raises(tfr.DataLossError) as error:
            reader.get_batch([3, 10, 4])
        check_error(error.value, reason="data_checksum", record_index=10, offset=int(offsets[10]))
        assert error.value.path == url
        batch = reader.get_batch([3, 10, 4], skip_corrupt=True)
        assert batch.to_list() == [records[3], records[4]]
        with pytest.raises(IndexError):
            reader.get_batch([50])
    shifted = (offsets + 1, sizes)  # an index of another file
    with pytest.raises(tfr.DataLossError) as error:
        tfr.IndexedTFRecordReader(url, shifted, storage_options=s3_options)[5]
    assert error.value.reason == "index_mismatch" and error.value.path == url
    stale = (offsets[:-1], sizes[:-1])  # complete but shorter than the file: refused at open
    with pytest.raises(tfr.DataLossError, match="records appended"):
        tfr.IndexedTFRecordReader(url, stale, storage_options=s3_options)


def test_reader_made_before_fork_reads_in_the_child(s3fs_, s3_options, bucket):
    """s3fs holds an event loop and connections that a forked child must not use: the child
    makes its own filesystem."""
    records = sized_records(40, seed=3)
    url = f"s3://{bucket}/fork.tfrecord"
    s3fs_.pipe_file(url, frame_file(records))
    reader = tfr.IndexedTFRecordReader(url, storage_options=s3_options)
    assert reader.get_batch([1, 2]).to_list() == records[1:3]  # the parent's loop is running
    context = multiprocessing.get_context("fork")
    queue = context.SimpleQueue()
    child = context.Process(target=_read_in_child, args=(reader, url, s3_options, queue))
    child.start()
    result = queue.get()  # before join: the child blocks until its result leaves the pipe
    child.join()
    assert child.exitcode == 0
    assert result == (records[5], records[7], records)


def _read_in_child(reader, url, options, queue):
    try:
        batch = reader.get_batch([5, 7]).to_list()
        queue.put(
            (batch[0], batch[1], list(tfr.read_records(url, copy=True, storage_options=options)))
        )
    except BaseException as error:
        queue.put(repr(error))


def _epoll_targets(epfd: int) -> set:
    """The file descriptors an epoll instance of this process watches (Linux /proc)."""
    with open(f"/proc/self/fdinfo/{epfd}") as f:
        return {int(line.split()[1]) for line in f if line.startswith("tfd:")}


@pytest.mark.skipif(not os.path.exists("/proc/self/fdinfo"), reason="reads /proc/self/fdinfo")
def test_forked_child_leaves_the_parents_connections_alone(http):
    """A forked child shares the epoll instance behind the parent's event loop. fsspec drops its
    instance cache in the child; if the child then finalised the parent's filesystem (closing
    its pooled connections) or loop, they would be unregistered from that shared epoll and the
    parent's next request on them would hang. The child keeps them instead."""
    import fsspec.asyn

    records = sized_records(20, seed=10)
    http.files["/fork/a.tfrecord"] = frame_file(records)
    url = http.url("/fork/a.tfrecord")
    reader = tfr.IndexedTFRecordReader(url)
    assert bytes(reader[0]) == records[0]  # a keep-alive connection now waits in the pool
    selector = fsspec.asyn.get_loop()._selector
    watched = set(selector.get_map())
    assert watched <= _epoll_targets(selector.fileno())
    context = multiprocessing.get_context("fork")
    queue = context.SimpleQueue()
    child = context.Process(target=_read_and_collect, args=(reader, url, queue))
    child.start()
    result = queue.get()
    child.join()
    assert result == (records[1], records)
    still = watched & set(selector.get_map())
    assert still and still <= _epoll_targets(selector.fileno())
    assert bytes(reader[2]) == records[2]


def _read_and_collect(reader, url, queue):
    try:
        one = bytes(reader[1])
        queue.put((one, list(tfr.read_records(url, copy=True))))
        gc.collect()
    except BaseException as error:
        queue.put(repr(error))


# ---- writing -----------------------------------------------------------------------------------


def test_writer_uploads_while_writing_and_publishes_on_close(
    s3, s3fs_, s3_options, bucket, monkeypatch
):
    monkeypatch.setattr(storage_remote, "WRITE_BLOCK_SIZE", 5 << 20)  # S3's smallest part
    records = sized_records(130, seed=4, low=90_000, high=110_000)  # ~13 MB: 2 parts + the rest
    url = f"s3://{bucket}/w.tfrecord"
    s3.clear()
    with tfr.TFRecordWriter(url, storage_options=s3_options) as writer:
        writer.write_batch(records)
        writer.flush()
        parts = [r for r in s3.requests if r[0] == "PUT" and "/w.tfrecord" in r[1]]
        assert len(parts) >= 2  # uploaded as they filled: streaming, not buffered whole
        s3fs_.invalidate_cache()
        assert not s3fs_.exists(url)  # nothing under the name before close
    assert list(tfr.read_records(url, copy=True, storage_options=s3_options)) == records
    gz = f"s3://{bucket}/w.tfrecord.gz"
    with tfr.TFRecordWriter(gz, "gzip", storage_options=s3_options) as writer:
        writer.write_batch(records[:10])
    assert list(tfr.read_records(gz, "auto", copy=True, storage_options=s3_options)) == records[:10]


def test_sharded_writer_to_s3(s3fs_, s3_options, bucket):
    spec = {"id": tfr.FixedLen((), "int64")}
    out = f"s3://{bucket}/out"
    with tfr.ShardedWriter(
        out, "train", num_shards=3, index=True, spec=spec, storage_options=s3_options
    ) as writer:
        writer.write_examples({"id": np.arange(100)})
        s3fs_.invalidate_cache()
        names = [os.path.basename(p) for p in s3fs_.find(f"{bucket}/out")]
        assert all(n.startswith(".") for n in names)  # nothing under a final name yet
    s3fs_.invalidate_cache()
    assert sorted(os.path.basename(p) for p in s3fs_.find(f"{bucket}/out")) == [
        f"train-0000{i}-of-00003.tfrecord{x}" for i in range(3) for x in ("", ".idx")
    ] + ["train.manifest.json"]
    assert writer.shards == [f"{out}/train-0000{i}-of-00003.tfrecord" for i in range(3)]
    manifest = tfr.read_manifest(writer.manifest_path, storage_options=s3_options)
    assert manifest["paths"] == writer.shards and manifest["total_records"] == 100
    ids = np.concatenate(
        [
            b["id"]
            for b in tfr.read_examples(
                manifest["paths"], manifest["spec"], batch_size=64, storage_options=s3_options
            )
        ]
    )
    assert sorted(ids.tolist()) == list(range(100))
    shard = manifest["paths"][1]
    with tfr.IndexedTFRecordReader(shard, shard + ".idx", storage_options=s3_options) as reader:
        assert len(reader) == 33
        assert tfr.parse_example(reader[2], spec)["id"] == 7
    with pytest.raises(FileExistsError, match=f"{out}/train"):
        tfr.ShardedWriter(out, "train", num_shards=3, storage_options=s3_options)


def test_sharded_writer_failure_leaves_no_final_name(s3fs_, s3_options, bucket):
    out = f"s3://{bucket}/failed"
    with pytest.raises(RuntimeError, match="stop"):
        with tfr.ShardedWriter(
            out, "train", records_per_shard=10, storage_options=s3_options
        ) as writer:
            writer.write_batch([b"%d" % i for i in range(25)])
            raise RuntimeError("stop")
    s3fs_.invalidate_cache()
    names = [os.path.basename(p) for p in s3fs_.find(f"{bucket}/failed")]
    assert len(names) == 3 and all(n.startswith(".train-") for n in names)
    partial = list(tfr.read_records(writer.partial_paths, copy=True, storage_options=s3_options))
    assert partial == [b"%d" % i for i in range(25)]
    writer.remove_partial()
    s3fs_.invalidate_cache()
    assert s3fs_.find(f"{bucket}/failed") == []


def test_convert_numpy_to_s3(s3fs_, s3_options, bucket):
    from tfrec_fast.convert import convert_numpy

    summary = convert_numpy(
        {"x": np.arange(30)}, f"s3://{bucket}/np", records_per_shard=16, storage_options=s3_options
    )
    assert summary.records == 30 and len(summary.shards) == 2
    assert summary.bytes == sum(s3fs_.size(p) for p in summary.shards)
    assert tfr.count_records(summary.shards, storage_options=s3_options) == 30


# ---- the command line --------------------------------------------------------------------------


def test_cli_over_s3(s3, s3fs_, bucket, capsys, tmp_path):
    options = [
        "--storage-option",
        f"endpoint_url={s3.endpoint}",
        "--storage-option",
        "key=testing",
        "--storage-option",
        "secret=testing",
    ]
    records = sized_records(20, seed=5)
    for i in range(2):
        s3fs_.pipe_file(f"{bucket}/c-{i}.tfrecord", frame_file(records))
    pattern = f"s3://{bucket}/c-*.tfrecord"
    assert main(["count", *options, pattern]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "40\ttotal"
    assert main(["verify", *options, pattern]) == 0
    assert main(["index", *options, pattern]) == 0
    assert s3fs_.cat_file(f"{bucket}/c-0.tfrecord.idx").count(b"\n") == 20
    out = f"s3://{bucket}/repaired.tfrecord"
    assert main(["verify", *options, f"s3://{bucket}/c-0.tfrecord", "--repair", out]) == 0
    assert s3fs_.cat_file(out[5:]) == frame_file(records)
    examples = f"s3://{bucket}/examples.tfrecord"
    with tfr.TFRecordWriter(
        examples, storage_options=dict(endpoint_url=s3.endpoint, key="testing", secret="testing")
    ) as writer:
        writer.write_example({"label": 7})
    capsys.readouterr()
    assert main(["cat", *options, examples]) == 0
    assert capsys.readouterr().out == '{"label": [7]}\n'
    assert main(["schema", *options, examples]) == 0
    assert 'FixedLen((), "int64")' in capsys.readouterr().out
    np.savez(tmp_path / "arrays.npz", x=np.arange(12))
    assert (
        main(
            [
                "convert",
                "numpy",
                str(tmp_path / "arrays.npz"),
                f"s3://{bucket}/converted",
                "--num-shards",
                "2",
                *options,
            ]
        )
        == 0
    )
    assert (
        tfr.count_records(
            f"s3://{bucket}/converted/arrays-*-of-00002.tfrecord",
            storage_options=dict(endpoint_url=s3.endpoint, key="testing", secret="testing"),
        )
        == 12
    )
    capsys.readouterr()
    assert (
        main(
            [
                "count",
                *options[:4],
                "--storage-option",
                "secret=s3cr3t-value",
                f"s3://{bucket}/missing.tfrecord",
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert err == f"ERROR s3://{bucket}/missing.tfrecord: No such file or directory\n"


# ---- faults ------------------------------------------------------------------------------------


@pytest.mark.parametrize("fault", ["503", "drop", "short"])
@pytest.mark.parametrize("server", ["s3", "http"])
def test_faults_are_retried(server, fault, s3, s3fs_, s3_options, http, bucket):
    records = sized_records(300, seed=6)
    data = frame_file(records)
    small = {"range_size": 64 << 10, "retry_delay": 0.01}  # several ranges
    if server == "s3":
        s3fs_.pipe_file(f"{bucket}/f.tfrecord", data)
        url, options, log = f"s3://{bucket}/f.tfrecord", dict(s3_options, **small), s3
    else:
        http.files["/faults/f.tfrecord"] = data
        url, options, log = http.url("/faults/f.tfrecord"), small, http
    log.clear()
    log.inject(fault, 2)
    assert list(tfr.read_records(url, copy=True, storage_options=options)) == records
    assert log.pending() == 0
    blocks = -(-len(data) // (64 << 10))
    assert len(log.range_reads()) == blocks + 2  # each fault cost one more request
    log.clear()
    log.inject(fault, 2)
    reader = tfr.IndexedTFRecordReader(url, storage_options=options)
    assert reader.get_batch([3, 200, 7]).to_list() == [records[3], records[200], records[7]]
    assert log.pending() == 0


@pytest.mark.parametrize("fault", ["503", "drop", "short"])
def test_persistent_fault_is_an_oserror_naming_url_and_offset(fault, http):
    records = sized_records(300, seed=6)
    http.files["/faults/p.tfrecord"] = frame_file(records)
    url = http.url("/faults/p.tfrecord")
    http.inject(fault, 1 + RETRIES, from_offset=64 << 10)  # block 0 arrives, not 1
    # one range of 64 KiB at a time: requests in file order
    reader = tfr.TFRecordReader(
        url, storage_options={"range_size": 64 << 10, "read_ahead": 64 << 10, "retry_delay": 0.01}
    )
    with pytest.raises(OSError) as error:
        for _ in reader:
            pass
    assert reader.records_read > 0  # the records of block 0 came out first
    assert not isinstance(error.value, tfr.DataLossError)  # the data is not damaged
    assert error.value.filename == url
    assert f"at byte offset {64 << 10} after {1 + RETRIES} attempts" in str(error.value)
    assert error.value.__cause__ is not None  # what the server said, kept
    assert http.pending() == 0
    reader.close()


@pytest.mark.parametrize("access", ["sequential", "random"])
def test_network_waits_release_the_gil(http, access):
    """While a read waits for the server, other Python threads run: the server holds the
    request until this thread, running Python, releases it."""
    records = sized_records(50, seed=11)
    http.files["/gil/a.tfrecord"] = frame_file(records)
    url = http.url("/gil/a.tfrecord")
    reader = tfr.IndexedTFRecordReader(url) if access == "random" else None
    http.held = 0
    http.hold()
    result = []

    def read():
        try:
            if reader is not None:
                result.append(reader.get_batch([40, 2]).to_list())
            else:
                result.append(list(tfr.read_records(url, copy=True)))
        except BaseException as error:
            result.append(error)

    thread = threading.Thread(target=read)
    thread.start()
    while http.held == 0 and thread.is_alive():  # Python runs here while the read waits
        time.sleep(0.005)
    http.release()
    thread.join()
    assert not http.hold_timed_out
    assert result == [[records[40], records[2]] if reader is not None else records]


def test_credentials_never_in_messages(http, monkeypatch):
    data = bytearray(frame_file(sized_records(100, seed=8)))
    data[100] ^= 1
    http.files["/sec/bad.tfrecord"] = bytes(data)
    http.files["/sec/good.tfrecord"] = frame_file(sized_records(300, seed=8))
    host = http.base.split("//", 1)[1]
    secret_url = f"http://alice:hunter2@{host}/sec/%s?X-Amz-Signature=topsecret"
    shown = f"http://***@{host}/sec/%s?***"
    seen = []
    with pytest.raises(tfr.DataLossError) as error:
        list(tfr.read_records(secret_url % "bad.tfrecord"))
    seen.append(str(error.value))
    assert error.value.path == shown % "bad.tfrecord"
    with pytest.warns(RuntimeWarning) as warned:
        list(tfr.read_records(secret_url % "bad.tfrecord", skip_corrupt=True))
    seen += [str(w.message) for w in warned]
    http.inject("503", 1 + RETRIES)  # every fault hits range 0
    with pytest.raises(OSError) as error:
        tfr.count_records(
            secret_url % "good.tfrecord",
            storage_options={"range_size": 64 << 10, "read_ahead": 64 << 10, "retry_delay": 0.01},
        )
    seen.append(str(error.value))
    assert shown % "good.tfrecord" in str(error.value)
    with pytest.raises(FileNotFoundError) as error:
        tfr.count_records(secret_url % "none.tfrecord")
    seen.append(str(error.value))
    reader = tfr.IndexedTFRecordReader(secret_url % "good.tfrecord")
    seen.append(repr(reader))
    assert reader.path == secret_url % "good.tfrecord"  # what the caller gave, for reopening
    for text in seen:
        assert "hunter2" not in text and "topsecret" not in text, text


# ---- filesystems given as objects ----------------------------------------------------------------


def test_fsspec_filesystem_object(s3fs_, bucket):
    records = sized_records(30, seed=9)
    s3fs_.pipe_file(f"{bucket}/o.tfrecord", frame_file(records))
    assert list(tfr.read_records(f"{bucket}/o.tfrecord", copy=True, filesystem=s3fs_)) == records
    assert (
        list(tfr.read_records(f"s3://{bucket}/o.tfrecord", copy=True, filesystem=s3fs_)) == records
    )
    with pytest.raises(ValueError, match="not both"):
        tfr.count_records(f"{bucket}/o.tfrecord", filesystem=s3fs_, storage_options={"a": 1})


@pytest.mark.skipif(not HAVE_PYARROW, reason="needs pyarrow")
def test_pyarrow_filesystem(tmp_path, corpus_file):
    import pyarrow.fs

    path = str(corpus_file("index/tiny_100k.tfrecord"))
    fs = pyarrow.fs.LocalFileSystem()
    assert list(tfr.read_records(path, copy=True, filesystem=fs)) == list(
        tfr.read_records(path, copy=True)
    )
    with tfr.IndexedTFRecordReader(path, filesystem=fs) as reader:
        assert bytes(reader[3]) == bytes(tfr.IndexedTFRecordReader(path)[3])
    out = str(tmp_path / "w.tfrecord")
    with tfr.TFRecordWriter(out, filesystem=fs) as writer:
        writer.write(b"via pyarrow")
    assert list(tfr.read_records(out, copy=True)) == [b"via pyarrow"]


# ---- PyTorch DataLoader workers over s3:// shards ------------------------------------------------


@pytest.mark.torch
@pytest.mark.skipif(not HAVE_TORCH, reason="needs torch")
@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_dataloader_workers_over_s3(start, s3, s3fs_, bucket, monkeypatch):
    """Each worker process makes its own filesystem (fork: not the parent's; spawn: from the
    environment, which is how endpoint and keys reach it)."""
    import s3fs
    import torch

    from tfrec_fast.torch import IndexedTFRecordDataset, TFRecordDataset

    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    s3fs.S3FileSystem.clear_instance_cache()
    total = 0
    for k, n in enumerate([30, 50, 20]):
        with tfr.TFRecordWriter(f"s3://{bucket}/part-{k}.tfrecord") as writer:
            writer.write_examples({"id": np.arange(total, total + n)})
        total += n
    spec = {"id": tfr.FixedLen((), "int64")}
    pattern = f"s3://{bucket}/part-*.tfrecord"
    loader = torch.utils.data.DataLoader(
        TFRecordDataset(pattern, spec=spec),
        batch_size=8,
        num_workers=2,
        multiprocessing_context=start,
    )
    ids = torch.cat([b["id"] for b in loader]).tolist()
    assert sorted(ids) == list(range(total))
    indexed = IndexedTFRecordDataset(pattern, spec)
    sampler = torch.utils.data.RandomSampler(indexed, generator=torch.Generator().manual_seed(0))
    loader = torch.utils.data.DataLoader(
        indexed, batch_size=16, sampler=sampler, num_workers=2, multiprocessing_context=start
    )
    ids = torch.cat([b["id"] for b in loader]).tolist()
    assert sorted(ids) == list(range(total))
