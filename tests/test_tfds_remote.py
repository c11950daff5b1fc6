"""tfrec_fast.tfds reading TFDS and RLDS datasets from object stores, through real servers on
127.0.0.1: moto's S3 server read with s3fs, and a fake of GCS's JSON API (tests/_servers.py)
read with gcsfs. The committed fixtures (tests/data/tfds) are uploaded as a data dir, and every
example read from the store is compared with the tfds.as_numpy dumps; the servers count the
bytes of each object they send, so entering a shard through its index is seen to fetch only
the records it reads. try_gcs reads TFDS's bucket layout (gs://tfds-data/datasets) from the
fake GCS server.
"""

from __future__ import annotations

import importlib
import io
import multiprocessing
import os
import pickle
import shutil
import sys
import uuid

import _tfds_dump
import numpy as np
import pytest
from _servers import GCSServer, RangeHTTPServer
from _tfds_fixtures import CATALOG, DATA, FIXTURE, JPEG_TOLERANCE, ORDERED, RLDS, load_dumps


def _missing(*modules):
    missing = []
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    return missing


MISSING = _missing("fsspec", "aiohttp")
pytestmark = [
    pytest.mark.remote,
    pytest.mark.skipif(bool(MISSING), reason=f"needs {', '.join(MISSING)} (pip install '.[test]')"),
]

import tfrec_fast  # noqa: E402
import tfrec_fast.tfds as tfds  # noqa: E402
from tfrec_fast.storage import settings as storage_settings  # noqa: E402

DATASETS = (RLDS, CATALOG, FIXTURE, ORDERED)
PREFIX = "tensorflow_datasets"


# ---- servers -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gcs():
    pytest.importorskip("gcsfs")
    import gcsfs.core

    with pytest.MonkeyPatch.context() as env:
        # gcsfs's default class (ExtendedGcsFileSystem) asks GCS's gRPC control API for each
        # bucket's layout on every read, which against this server waits out a 60 s timeout
        # each time: the core class reads through the JSON API alone.
        registry = sys.modules["fsspec.registry"]._registry
        for protocol in ("gs", "gcs"):
            env.setitem(registry, protocol, gcsfs.core.GCSFileSystem)
        server = GCSServer().start()
        yield server
        server.stop()


class Store:
    """A data dir in a bucket of one of the servers: URLs, options, uploads, byte counts."""

    def __init__(self, kind: str, server, options: dict, bucket: str, upload, remove):
        self.kind, self.server, self.options, self.bucket = kind, server, options, bucket
        self._upload, self._remove = upload, remove
        self.prefix = f"{PREFIX}-{uuid.uuid4().hex[:8]}"

    def url(self, *parts: str) -> str:
        scheme = "s3" if self.kind == "s3" else "gs"
        return "/".join([f"{scheme}://{self.bucket}", self.prefix, *parts])

    def key(self, *parts: str) -> str:
        return "/".join([self.prefix, *parts])

    def put(self, rel: str, data: bytes) -> None:
        self._upload(self.key(rel), data)

    def delete(self, rel: str) -> None:
        self._remove(self.key(rel))

    def sent(self, *parts: str) -> int:
        """Bytes of this object (not of ``<it>.idx``) the server sent since the counts were
        cleared."""
        path = f"/{self.bucket}/{self.key(*parts)}"
        return self.server.bytes_for(path) - self.server.bytes_for(path + ".")

    def upload_fixtures(self, with_indexes: bool = False) -> "Store":
        """Every committed dataset under the data dir (``<shard>.idx`` beside each shard when
        asked for: as tfrec_fast's tools and the tfrecord package write them)."""
        for dirpath, _, names in os.walk(DATA):
            for name in names:
                if name.endswith((".gz", ".idx")):
                    continue
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, DATA).replace(os.sep, "/")
                with open(full, "rb") as f:
                    self.put(rel, f.read())
                if with_indexes and ".tfrecord-" in name:
                    offsets, sizes = tfrec_fast.create_index(full)
                    text = "".join(f"{o} {s}\n" for o, s in zip(offsets, sizes))
                    self.put(rel + ".idx", text.encode())
        return self


def _s3_store(s3) -> Store:
    import s3fs

    options = {"endpoint_url": s3.endpoint, "key": "testing", "secret": "testing"}
    fs = s3fs.S3FileSystem(**options, skip_instance_cache=True)
    if not fs.exists("tfds-s3"):
        fs.mkdir("tfds-s3")
    return Store(
        "s3",
        s3,
        options,
        "tfds-s3",
        lambda key, data: fs.pipe_file(f"tfds-s3/{key}", data),
        lambda key: fs.rm_file(f"tfds-s3/{key}"),
    )


def _gcs_store(gcs) -> Store:
    options = {"endpoint_url": gcs.endpoint, "token": "anon"}
    return Store(
        "gcs",
        gcs,
        options,
        "tfds-gcs",
        lambda key, data: gcs.put("tfds-gcs", key, data),
        lambda key: gcs.delete("tfds-gcs", key),
    )


@pytest.fixture(params=["s3", "gcs"])
def store(request) -> Store:
    """An empty data dir in a bucket of the S3 or the GCS server."""
    server = request.getfixturevalue(request.param)
    made = _s3_store(server) if request.param == "s3" else _gcs_store(server)
    server.clear()
    return made


@pytest.fixture
def uploaded(store) -> Store:
    """The fixtures, uploaded (no indexes)."""
    store.upload_fixtures()
    store.server.clear()
    return store


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    """Quick retries, and an index cache of the test's own."""
    monkeypatch.setattr(storage_settings, "DEFAULTS", storage_settings.Settings(retry_delay=0.01))
    monkeypatch.setenv("TFREC_FAST_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def dumps():
    return load_dumps(*DATASETS)


def assert_same(ours, ref):
    problems = _tfds_dump.differences(ours, ref, tolerance=JPEG_TOLERANCE)
    assert not problems, problems[:10]


def _equal(a, b) -> bool:
    """Two values read by tfrec_fast are the same (dicts, Ragged, arrays, scalars, bytes)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, tfrec_fast.Ragged):
        return (
            isinstance(b, tfrec_fast.Ragged)
            and _equal(a.values, b.values)
            and np.array_equal(a.row_splits, b.row_splits)
        )
    if isinstance(a, np.ndarray):
        return (
            isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and (a.tolist() == b.tolist() if a.dtype == object else np.array_equal(a, b))
        )
    return type(a) is type(b) and a == b


def _ids(examples, key=("episode_metadata", "episode_id")):
    out = []
    for example in examples:
        for part in key:
            example = example[part]
        out.append(int(example))
    return out


# ---- every example, from the store -------------------------------------------------------------


@pytest.mark.parametrize("name", DATASETS)
def test_every_example_read_from_the_store_is_what_tfds_gave(uploaded, dumps, name):
    for decoded in (True, False):
        ds = tfds.open(uploaded.url(name), decode_images=decoded, storage_options=uploaded.options)
        assert ds.data_dir == uploaded.url(name)
        for split in ds.info.splits:
            ref = dumps[name][_tfds_dump.key(split, decoded)]
            ours = list(ds[split])
            assert len(ours) == len(ref)
            for a, b in zip(ours, ref):
                assert_same(a, b)


def test_metadata_and_finding_the_dataset(uploaded):
    local = tfds.open(os.path.join(DATA, RLDS)).info
    so = uploaded.options
    for ds in (
        tfds.open(uploaded.url("rlds_fixture"), storage_options=so),  # newest version
        tfds.open(uploaded.url(), name="rlds_fixture:1.0.0", storage_options=so),
        tfds.open("rlds_fixture", data_dir=uploaded.url(), storage_options=so),
        tfds.builder("rlds_fixture", data_dir=uploaded.url(), storage_options=so),
        tfds.builder_from_directory(uploaded.url(RLDS), storage_options=so),
    ):
        info = ds.info
        assert info.data_dir == uploaded.url(RLDS)
        assert (info.name, info.version, info.description) == (
            local.name,
            local.version,
            local.description,
        )
        assert info.features["steps"]["skill"].names == ["reach", "grasp", "place"]
        assert (
            info.features["episode_metadata"]["result"].names
            == local.features["episode_metadata"]["result"].names
        )
        assert {k: v.shard_lengths for k, v in info.splits.items()} == {
            k: v.shard_lengths for k, v in local.splits.items()
        }
        assert info.splits["train"].filenames[0] == uploaded.url(
            RLDS, "rlds_fixture-train.tfrecord-00000-of-00003"
        )
    # opening a dataset and its splits: metadata and one listing, no request per shard
    uploaded.server.clear()
    ds = tfds.open(uploaded.url(RLDS), storage_options=so)
    assert len(ds["train"]) + len(ds["val[1:]"]) == 14
    requested = [path for _, path, _ in uploaded.server.requests]
    assert requested and not [p for p in requested if ".tfrecord-" in p], requested
    with pytest.raises(FileNotFoundError, match="no prepared TFDS dataset here") as error:
        tfds.open(uploaded.url(), name="rlds_fixture:9.9.9", storage_options=so)
    assert error.value.filename == uploaded.url("rlds_fixture", "9.9.9")
    with pytest.raises(FileNotFoundError, match="tfds build nothing_here"):
        tfds.load("nothing_here", split="train", data_dir=uploaded.url(), storage_options=so)


def test_load_and_random_access(uploaded, dumps):
    so = uploaded.options
    ref = dumps[FIXTURE]["test/decoded"]
    split = tfds.load("tfrec_fixture", split="test", data_dir=uploaded.url(), storage_options=so)
    for ours, want in zip(split, ref):
        assert_same(ours, want)
    episodes = tfds.open(uploaded.url(RLDS), decode_images=True, storage_options=so)["train"]
    want = dumps[RLDS]["train/decoded"]
    order = [7, 0, 9, 3, 7, -1]
    for got, i in zip(episodes.get_batch(order), order):
        assert_same(got, want[i])
    assert_same(episodes[4], want[4])
    clone = pickle.loads(pickle.dumps(episodes))  # as DataLoader workers get it
    assert_same(clone[5], want[5])
    columns = tfds.open(
        uploaded.url(RLDS), decode_images=True, nested="columns", storage_options=so
    )["val"]
    local = tfds.open(os.path.join(DATA, RLDS), decode_images=True, nested="columns")["val"]
    for ours, theirs in zip(columns, local):
        assert _equal(ours, theirs)


def test_storage_settings_and_a_filesystem(uploaded, dumps, tmp_path):
    ref = dumps[ORDERED]["train/encoded"]
    options = dict(
        uploaded.options, retries=1, read_ahead=1 << 20, range_size=1 << 20, concurrency=2
    )
    split = tfds.open(uploaded.url(ORDERED), storage_options=options)["train"]
    assert [int(e["index"]) for e in split] == [int(e["index"]) for e in ref]
    import fsspec

    fs = fsspec.filesystem(
        "s3" if uploaded.kind == "s3" else "gs", skip_instance_cache=True, **uploaded.options
    )
    path = f"{uploaded.bucket}/{uploaded.key(ORDERED)}"
    ds = tfds.open(path, filesystem=fs, index_dir=tmp_path / "indexes")
    assert ds.data_dir == path
    assert int(ds["train"][17]["index"]) == 17
    # a store's shard indexes go to index_dir (the storage layer's index cache), not the store
    assert os.listdir(tmp_path / "indexes" / "indexes")
    assert not [f for f in fs.ls(path) if f.endswith(".idx")]
    with pytest.raises(ValueError, match="storage_options are for URLs"):
        tfds.open(os.path.join(DATA, ORDERED), storage_options={"anon": True})


def test_a_dataset_on_a_plain_http_server(dumps):
    """https:// as any fsspec URL: the directory pages of this server list the files (sizes
    come from HEAD requests), and version directories are named, as it lists none."""
    server = RangeHTTPServer().start()
    try:
        for dirpath, _, names in os.walk(os.path.join(DATA, "rlds_fixture")):
            for name in names:
                full = os.path.join(dirpath, name)
                with open(full, "rb") as f:
                    server.files["/tfds/" + os.path.relpath(full, DATA)] = f.read()
        ds = tfds.open(server.url("/tfds/" + RLDS), decode_images=True)
        for ours, want in zip(ds["val"], dumps[RLDS]["val/decoded"]):
            assert_same(ours, want)
        assert _ids(ds["train"].get_batch([6, 2])) == _ids(
            [dumps[RLDS]["train/encoded"][i] for i in (6, 2)]
        )
        named = tfds.open("rlds_fixture:1.0.0", data_dir=server.url("/tfds"))
        assert named.info.features["steps"]["skill"].names == ["reach", "grasp", "place"]
        with pytest.raises(FileNotFoundError, match="name the version"):
            tfds.open("rlds_fixture", data_dir=server.url("/tfds"))
    finally:
        server.stop()


# ---- indexes and entering a shard in the middle ------------------------------------------------


def _shard(split_name: str, k: int, n: int = 3) -> str:
    return f"rlds_fixture-{split_name}.tfrecord-{k:05d}-of-{n:05d}"


def test_entering_a_shard_through_an_index_beside_it_fetches_only_its_records(store, dumps):
    store.upload_fixtures(with_indexes=True)
    so = store.options
    shard = _shard("train", 0)
    offsets, sizes = tfrec_fast.create_index(os.path.join(DATA, RLDS, shard))
    size = int(offsets[-1] + sizes[-1])
    store.server.clear()
    split = tfds.open(store.url(RLDS), storage_options=so)["train[2:]"]
    entered = [i for i in split._instructions if i.skip]
    assert [(i.shard_index, i.skip) for i in entered] == [(0, 2)]
    ours = list(split)
    assert _ids(ours) == _ids(dumps[RLDS]["train/encoded"][2:])
    needed = size - int(offsets[2])
    # its records from the third on, and the 12 bytes of a record header read to see that
    # the shard is not compressed: nothing before them
    assert needed <= store.sent(RLDS, shard) <= needed + 12
    assert store.sent(RLDS, shard + ".idx") > 0
    # one episode at random: that record's bytes
    store.server.clear()
    assert _ids([tfds.open(store.url(RLDS), storage_options=so)["train"][1]]) == _ids(
        dumps[RLDS]["train/encoded"][1:2]
    )
    assert int(sizes[1]) <= store.sent(RLDS, shard) <= int(sizes[1]) + 12


def test_an_index_made_once_is_kept_by_object_version(uploaded, dumps):
    so = uploaded.options
    shard = _shard("train", 0)
    offsets, sizes = tfrec_fast.create_index(os.path.join(DATA, RLDS, shard))
    size = int(offsets[-1] + sizes[-1])
    # without an index, entering the shard in the middle reads it from the start (as TFDS)
    list(tfds.open(uploaded.url(RLDS), storage_options=so)["train[2:]"])
    assert uploaded.sent(RLDS, shard) == size
    uploaded.server.clear()
    # random access indexes it: one pass over the shard, kept in the index cache
    tfds.open(uploaded.url(RLDS), storage_options=so)["train"].get_batch([0, 1])
    assert size <= uploaded.sent(RLDS, shard) <= 2 * size
    uploaded.server.clear()
    ours = list(tfds.open(uploaded.url(RLDS), storage_options=so)["train[2:]"])
    assert _ids(ours) == _ids(dumps[RLDS]["train/encoded"][2:])
    assert uploaded.sent(RLDS, shard) == size - int(offsets[2])  # through the kept index
    uploaded.server.clear()
    tfds.open(uploaded.url(RLDS), storage_options=so)["train"][0]
    assert uploaded.sent(RLDS, shard) == int(sizes[0])  # no second scan


def test_a_shard_rewritten_since_the_listing_is_an_object_changed_error(uploaded):
    so = uploaded.options
    split = tfds.open(uploaded.url(ORDERED), storage_options=so)["train"]
    shard = "tfrec_ordered-train.tfrecord-00001-of-00003"
    records = list(tfrec_fast.read_records(os.path.join(DATA, ORDERED, shard), copy=True))
    rewritten = io.BytesIO()
    with tfrec_fast.TFRecordWriter(rewritten) as w:
        w.write_batch(records[::-1])  # the same size, another version
    uploaded.put(f"{ORDERED}/{shard}", rewritten.getvalue())
    with pytest.raises(tfrec_fast.ObjectChangedError) as error:
        list(split)
    assert shard in str(error.value)
    reopened = tfds.open(uploaded.url(ORDERED), storage_options=so)["train"]
    assert sorted(int(e["index"]) for e in reopened) == list(range(40))


def test_a_missing_shard_is_named(uploaded):
    so = uploaded.options
    shard = "tfrec_fixture-train.tfrecord-00001-of-00003"
    uploaded.delete(f"{FIXTURE}/{shard}")
    ds = tfds.open(uploaded.url(FIXTURE), storage_options=so)
    assert len(list(ds["test"])) == 20
    with pytest.raises(FileNotFoundError, match="shard 1 of the 3 of split 'train'") as error:
        ds["train"]
    assert error.value.filename == uploaded.url(FIXTURE, shard)
    assert len(ds["train[:23]"]) == 23


# ---- try_gcs -----------------------------------------------------------------------------------


@pytest.fixture
def public_bucket(gcs, monkeypatch):
    """TFDS's public bucket layout, gs://tfds-data/datasets/<name>/<version>, on the fake GCS
    server, which gcsfs reaches through STORAGE_EMULATOR_HOST."""
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs.endpoint)
    bucket = Store(
        "gcs",
        gcs,
        {},
        "tfds-data",
        lambda key, data: gcs.put("tfds-data", key, data),
        lambda key: gcs.delete("tfds-data", key),
    )
    bucket.prefix = "datasets"
    for name in (RLDS, ORDERED):
        for file in os.listdir(os.path.join(DATA, name)):
            with open(os.path.join(DATA, name, file), "rb") as f:
                bucket.put(f"{name}/{file}", f.read())
    gcs.clear()
    yield bucket
    for name in (RLDS, ORDERED):
        for file in os.listdir(os.path.join(DATA, name)):
            gcs.delete("tfds-data", f"datasets/{name}/{file}")


def test_try_gcs_reads_tfds_public_bucket(public_bucket, dumps, tmp_path, monkeypatch):
    assert tfds.gcs_data_dir() == tfds.GCS_DATA_DIR == "gs://tfds-data/datasets"
    split = tfds.load("rlds_fixture", split="val", try_gcs=True)
    ref = dumps[RLDS]["val/decoded"]
    for ours, want in zip(split, ref):
        assert_same(ours, want)
    assert len(split) == len(ref)
    assert (
        tfds.builder("rlds_fixture", try_gcs=True).data_dir
        == "gs://tfds-data/datasets/rlds_fixture/1.0.0"
    )
    assert tfds.builder("tfrec_ordered:0.1.0", try_gcs=True).info.version == "0.1.0"
    assert (
        public_bucket.server.bytes_for(
            "/tfds-data/datasets/rlds_fixture/1.0.0/rlds_fixture-val.tfrecord-"
        )
        > 0
    )
    with pytest.raises(ValueError, match="Cannot have both `try_gcs=True` and `data_dir="):
        tfds.load("rlds_fixture", split="val", try_gcs=True, data_dir=tmp_path)
    # a dataset the bucket does not hold: the data dir, as TFDS
    local = tmp_path / "data"
    shutil.copytree(os.path.join(DATA, FIXTURE), local / FIXTURE)
    assert len(tfds.load("tfrec_fixture", split="test", try_gcs=True, data_dir=local)) == 20
    # a mirror of the bucket, named by the environment
    public_bucket.server.put("mirror", "tfds/tfrec_ordered/0.1.0/dataset_info.json", b"{not json")
    monkeypatch.setenv("TFREC_FAST_TFDS_GCS_DATA_DIR", "gs://mirror/tfds")
    with pytest.raises(tfds.DatasetInfoError, match="gs://mirror/tfds/tfrec_ordered/0.1.0/"):
        tfds.load("tfrec_ordered", split="train", try_gcs=True)


# ---- torch ---------------------------------------------------------------------------------


def _steps_of(item):  # module level: picklable into worker processes
    return int(item["episode_index"]), int(item["step_index"])


@pytest.mark.torch
@pytest.mark.parametrize(
    "start",
    [
        pytest.param(
            start,
            marks=pytest.mark.skipif(
                start not in multiprocessing.get_all_start_methods(), reason=f"no {start} here"
            ),
        )
        for start in ("fork", "spawn")
    ],
)
def test_steps_from_the_store_in_dataloader_workers(uploaded, dumps, start):
    torch = pytest.importorskip("torch")
    from tfrec_fast.tfds.torch import StepsDataset

    split = tfds.open(uploaded.url(RLDS), storage_options=uploaded.options)["train"]
    loader = torch.utils.data.DataLoader(
        StepsDataset(split, transform=_steps_of),
        batch_size=None,
        num_workers=2,
        multiprocessing_context=start,
    )
    seen = sorted(tuple(int(x) for x in item) for item in loader)
    ref = dumps[RLDS]["train/encoded"]
    assert seen == [(e, t) for e, episode in enumerate(ref) for t in range(len(episode["steps"]))]
