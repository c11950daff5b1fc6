"""tfrec_fast.ray on a Ray cluster of two nodes (one CPU each, on this machine), reading a
directory tree from a local S3 server (moto on 127.0.0.1) through s3fs or pyarrow's S3: every
record exactly once, blocks made on both nodes, TensorFlow absent from every process that reads
(checked inside the tasks), sizes from the listing (no request per file to plan), and a big file
split by its index without downloading it whole. Nothing here runs Ray's own reader, which would
load TensorFlow into the workers this module checks."""

import collections
import importlib
import io

import pytest

import tfrec_fast as tfr

ray = pytest.importorskip(
    "ray", reason="optional peer `ray` not installed (CI's peers step runs this)"
)
pa = pytest.importorskip("pyarrow")
tray = pytest.importorskip("tfrec_fast.ray")


def _missing(*modules):
    missing = []
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    return missing


MISSING = _missing("fsspec", "s3fs", "moto.server")
pytestmark = [
    pytest.mark.ray,
    pytest.mark.remote,
    pytest.mark.skipif(bool(MISSING), reason=f"needs {', '.join(MISSING)}"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning:ray"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.*"),
]

from _ray_cluster import WORKER_RESOURCE, probe, two_node_cluster  # noqa: E402

FILES, PER_FILE = 6, 400
BUCKET = "tree"


@pytest.fixture(scope="module")
def s3fs_(s3):
    import s3fs

    return s3fs.S3FileSystem(endpoint_url=s3.endpoint, key="testing", secret="testing")


@pytest.fixture(scope="module")
def arrow_s3(s3):
    from pyarrow.fs import S3FileSystem

    return S3FileSystem(
        access_key="testing",
        secret_key="testing",
        region="us-east-1",
        endpoint_override=s3.endpoint.split("://")[1],
        scheme="http",
    )


def _file(start, n, big_payload=0):
    records = [
        tfr.encode_example({"id": [i], "label": [i % 10], "pixels": [bytes(big_payload or 64)]})
        for i in range(start, start + n)
    ]
    out = io.BytesIO()
    with tfr.TFRecordWriter(out) as w:
        for record in records:
            w.write(record)
    return out.getvalue()


def _index_of(data: bytes):
    """(offsets, framed sizes) of the records of an uncompressed TFRecord file's bytes."""
    offsets, sizes, at = [], [], 0
    while at < len(data):
        length = int.from_bytes(data[at : at + 8], "little")
        offsets.append(at)
        sizes.append(length + 16)
        at += length + 16
    return offsets, sizes


@pytest.fixture(scope="module")
def tree(s3fs_):
    """s3://tree/data/split={train,test}/part-K.tfrecords (ids 0 .. FILES*PER_FILE-1 once each),
    with Spark's _SUCCESS and a hidden file at the top (which Ray's listing leaves out), and
    s3://tree/big/ one file with its index."""
    s3fs_.mkdir(BUCKET)
    for k in range(FILES):
        split = "train" if k < 4 else "test"
        s3fs_.pipe_file(
            f"{BUCKET}/data/split={split}/part-{k}.tfrecords", _file(k * PER_FILE, PER_FILE)
        )
    s3fs_.pipe_file(f"{BUCKET}/data/_SUCCESS", b"")
    s3fs_.pipe_file(f"{BUCKET}/data/.part-0.crc", b"not TFRecords")
    big = _file(0, 2000, big_payload=1000)
    s3fs_.pipe_file(f"{BUCKET}/big/all.tfrecords", big)
    offsets, sizes = _index_of(big)
    s3fs_.pipe_file(
        f"{BUCKET}/big/all.tfrecords.idx",
        "".join(f"{o} {s}\n" for o, s in zip(offsets, sizes)).encode(),
    )
    return f"{BUCKET}/data"


@pytest.fixture(scope="module")
def cluster(tree):
    with two_node_cluster() as nodes:
        yield nodes


def _probed(ds, **remote_args):
    """The rows, probed in the read tasks (map_batches fuses into them where its remote
    arguments are the read's)."""
    return ds.map_batches(probe, batch_format="pyarrow", batch_size=None, **remote_args).take_all()


def _check_tasks(rows, nodes):
    """Blocks from both nodes, made in processes that hold tfrec_fast's core (the probe ran in
    the reading task) and not TensorFlow."""
    _, head, worker = nodes
    assert {r["_node"] for r in rows} == {head, worker}
    assert all(r["_tfrec_core"] for r in rows)
    assert not any(r["_tensorflow"] for r in rows), {
        (r["_node"], r["_pid"]) for r in rows if r["_tensorflow"]
    }


def test_directory_tree_from_s3_on_two_nodes(cluster, s3, s3fs_, tree):
    s3.clear()
    ds = tray.read_tfrecords(f"s3://{tree}", filesystem=s3fs_, override_num_blocks=FILES)
    rows = _probed(ds)
    ids = collections.Counter(r["id"] for r in rows)
    assert sorted(ids) == list(range(FILES * PER_FILE)) and set(ids.values()) == {1}
    assert rows[0]["pixels"] == bytes(64)
    _check_tasks(rows, cluster)
    # Sizes came from the listing: no request to any object's metadata, ever; every data
    # object read by range requests.
    heads = [p for m, p, _ in s3.requests if m == "HEAD" and p.endswith(".tfrecords")]
    assert heads == []
    reads = {p for m, p, r in s3.range_reads()}
    assert len([p for p in reads if p.endswith(".tfrecords")]) == FILES


def test_remote_glob_and_storage_options(cluster, s3, tree):
    """A glob over the bucket, and an s3:// URL with fsspec storage_options (no filesystem)."""
    options = {"endpoint_url": s3.endpoint, "key": "testing", "secret": "testing"}
    ds = tray.read_tfrecords(f"s3://{tree}/split=t*/part-[01].tfrecords", storage_options=options)
    assert sorted(r["id"] for r in ds.take_all()) == list(range(2 * PER_FILE))
    assert sorted(ds.input_files()) == [f"{tree}/split=train/part-{k}.tfrecords" for k in range(2)]
    with pytest.raises(FileNotFoundError, match="no file matches"):
        tray.read_tfrecords(f"s3://{tree}/*/nothing-*.tfrecords", storage_options=options)


def test_pyarrow_s3_hive_partitions_and_filter(cluster, arrow_s3, tree):
    from ray.data.datasource import Partitioning, PathPartitionFilter

    hive = Partitioning("hive", base_dir=tree)
    train = PathPartitionFilter.of(lambda d: d["split"] == "train", style="hive", base_dir=tree)
    ds = tray.read_tfrecords(
        tree,
        filesystem=arrow_s3,
        partitioning=hive,
        partition_filter=train,
        include_paths=True,
        override_num_blocks=4,
    )
    rows = _probed(ds)
    assert sorted(r["id"] for r in rows) == list(range(4 * PER_FILE))
    assert {r["split"] for r in rows} == {"train"}
    assert {r["path"] for r in rows} == {f"{tree}/split=train/part-{k}.tfrecords" for k in range(4)}
    _check_tasks(rows, cluster)


def test_big_remote_file_split_by_its_index(cluster, s3, s3fs_, tree, monkeypatch):
    """One file, four tasks: each reads its quarter of the records by range requests; no
    request fetches the object whole, and the index is not read as data."""
    monkeypatch.setattr(tray._datasource, "MIN_SPLIT_BYTES", 64 << 10)
    size = s3fs_.size(f"{BUCKET}/big/all.tfrecords")
    s3.clear()
    ds = tray.read_tfrecords(f"s3://{BUCKET}/big/", filesystem=s3fs_, override_num_blocks=4)
    rows = _probed(ds)
    assert sorted(r["id"] for r in rows) == list(range(2000))
    _check_tasks(rows, cluster)
    spans = []
    for _, path, ranged in s3.range_reads("all.tfrecords"):
        if path.endswith(".idx"):
            continue
        start, _, end = ranged[len("bytes=") :].partition("-")
        spans.append(int(end or size - 1) - int(start) + 1)
    assert spans and max(spans) < size / 2, (spans, size)


def test_pyarrow_s3_reads_a_file_in_few_requests(cluster, s3, arrow_s3, tree):
    """Through pyarrow's S3 (read by the storage layer) the 2 MB file is read by range requests
    of the storage's range size (one here), not one per MiB; its sample (the first MiB) fetches
    little more than that MiB, in quarters."""
    from tfrec_fast.storage import DEFAULTS

    s3.clear()
    ds = tray.read_tfrecords(
        f"{BUCKET}/big/all.tfrecords", filesystem=arrow_s3, override_num_blocks=1
    )
    assert sorted(r["id"] for r in ds.take_all()) == list(range(2000))
    size = arrow_s3.get_file_info(f"{BUCKET}/big/all.tfrecords").size
    assert 2 << 20 < size <= DEFAULTS.range_size
    spans = []
    for _, _, ranged in s3.range_reads("all.tfrecords"):
        start, _, end = ranged[len("bytes=") :].partition("-")
        spans.append((int(start), int(end) + 1))
    whole = [s for s in spans if s == (0, size)]
    sample = [s for s in spans if s != (0, size)]
    quarter = tray._datasource.SAMPLE_BYTES // 4
    assert len(whole) == 1, spans
    assert sample and all(b - a <= quarter for a, b in sample), spans
    assert sum(b - a for a, b in sample) <= tray._datasource.SAMPLE_BYTES + 2 * quarter, spans


@pytest.mark.filterwarnings("ignore:`ray_remote_args` is deprecated")
def test_ray_remote_args_place_every_task(cluster, s3fs_, tree):
    """ray_remote_args={"resources": ...} that only the second node has: every block (and the
    schema sample) made there."""
    _, _, worker = cluster
    ds = tray.read_tfrecords(
        f"s3://{tree}",
        filesystem=s3fs_,
        ray_remote_args={"resources": {WORKER_RESOURCE: 0.01}},
        concurrency=2,
        override_num_blocks=3,
    )
    rows = _probed(ds, resources={WORKER_RESOURCE: 0.01})
    assert {r["_node"] for r in rows} == {worker} and all(r["_tfrec_core"] for r in rows)
    assert len(rows) == FILES * PER_FILE


def test_planning_reads_no_data_on_the_driver(cluster, s3fs_, tree, monkeypatch):
    """The schema is sampled in Ray tasks: the driver's own reader is never opened."""

    def refuse(*args, **kwargs):
        raise AssertionError("the driver opened a file")

    monkeypatch.setattr(tray._files, "open_records", refuse)
    ds = tray.read_tfrecords(f"s3://{tree}", filesystem=s3fs_)
    assert ds.schema().base_schema.field("label").type == pa.int64()
    assert ds.count() == FILES * PER_FILE


def test_write_to_s3_and_read_back(cluster, s3fs_, tree):
    """Writes from both nodes into the bucket (Ray's names, the index and manifest asked for),
    read back through the index files."""
    ds = tray.read_tfrecords(f"s3://{tree}", filesystem=s3fs_).repartition(3)
    out = f"{BUCKET}/written"
    tray.write_tfrecords(ds, f"s3://{out}", filesystem=s3fs_, index=True, manifest=True)
    names = sorted(n.rsplit("/", 1)[1] for n in s3fs_.ls(out, refresh=True))
    data = [n for n in names if n.endswith(".tar")]
    assert len(data) == 3 and sorted(n for n in names if n.endswith(".idx")) == [
        n + ".idx" for n in data
    ]
    assert [n for n in names if n not in data and not n.endswith(".idx")][0].endswith(
        ".manifest.json"
    )
    back = tray.read_tfrecords(f"s3://{out}", filesystem=s3fs_, override_num_blocks=3)
    assert sorted(r["id"] for r in back.take_all()) == list(range(FILES * PER_FILE))
