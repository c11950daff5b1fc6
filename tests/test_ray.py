"""tfrec_fast.ray on a real local Ray cluster (ray.init(num_cpus=2), 127.0.0.1 only)."""

import importlib.util
import json
import os

import numpy as np
import pytest

import tfrec_fast as tfr
from tfrec_fast.errors import DataLossError

ray = pytest.importorskip("ray", reason="optional peer `ray` not installed (CI's peers step "
                          "runs this)")
pa = pytest.importorskip("pyarrow")
tray = pytest.importorskip("tfrec_fast.ray")

# Ray warns about its own deprecated settings while it sets itself up.
pytestmark = [pytest.mark.ray, pytest.mark.filterwarnings("ignore::DeprecationWarning:ray"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.*")]


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True,
             _node_ip_address="127.0.0.1", log_to_driver=False)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    yield
    ray.shutdown()


def write_files(directory, files=3, per_file=50):
    paths = []
    for f in range(files):
        path = os.path.join(directory, f"part-{f}.tfrecords")
        with tfr.TFRecordWriter(path) as w:
            for i in range(per_file):
                n = f * per_file + i
                w.write_example({"id": [n], "score": [n / 2], "name": [b"r%d" % n],
                                 "pair": [n, -n], "tags": [b"t"] * (n % 3)
                                 if n % 3 else tfr.Bytes([])})
        paths.append(path)
    return paths


def rows_by_id(ds):
    return {row["id"]: row for row in ds.take_all()}


def test_read_gives_rays_values_and_every_record_once(cluster, tmp_path):
    paths = write_files(str(tmp_path))
    ds = tray.read_tfrecords(str(tmp_path))
    rows = rows_by_id(ds)
    assert sorted(rows) == list(range(150))
    row = rows[7]
    assert row["score"] == 3.5 and row["name"] == b"r7"  # single values: scalars, as Ray
    assert list(row["pair"]) == [7, -7]
    assert list(row["tags"]) == [b"t"]
    schema = ds.schema().base_schema
    assert schema.field("id").type == pa.int64()
    assert schema.field("score").type == pa.float32()
    assert schema.field("name").type == pa.binary()
    assert schema.field("pair").type == pa.list_(pa.int64())
    assert ds.count() == 150 and len(paths) == 3


def test_values_equal_parse_examples_with_a_spec(cluster, tmp_path):
    paths = write_files(str(tmp_path), files=2, per_file=40)
    spec = {"id": tfr.FixedLen((), "int64"), "pair": tfr.FixedLen((2,), "int64"),
            "tags": tfr.VarLen("bytes")}
    ds = tray.read_tfrecords(paths, spec)
    got = rows_by_id(ds)
    cols = tfr.parse_examples(list(tfr.read_records(paths)), spec)
    for i, n in enumerate(cols["id"].tolist()):
        assert list(got[n]["pair"]) == cols["pair"][i].tolist()
        assert list(got[n]["tags"]) == cols["tags"][i] or \
            [bytes(v) for v in cols["tags"][i]] == list(got[n]["tags"])


def test_big_files_split_into_record_ranges(cluster, tmp_path, monkeypatch):
    monkeypatch.setattr(tray, "MIN_SPLIT_BYTES", 512)
    paths = write_files(str(tmp_path), files=1, per_file=400)
    source = tray.TFRecordDatasource(paths)
    tasks = source.get_read_tasks(4)
    assert len(tasks) == 4
    assert sum(t.metadata.num_rows for t in tasks) == 400
    ds = tray.read_tfrecords(paths, override_num_blocks=4)
    assert sorted(rows_by_id(ds)) == list(range(400))


def test_include_paths_extensions_and_compression(cluster, tmp_path):
    path = str(tmp_path / "z.tfrecords.gz")
    with tfr.TFRecordWriter(path, "gzip") as w:
        for i in range(10):
            w.write_example({"id": [i]})
    write_files(str(tmp_path), files=1, per_file=5)
    ds = tray.read_tfrecords(path, arrow_open_stream_args={"compression": "gzip"},
                             include_paths=True)
    rows = ds.take_all()
    assert sorted(r["id"] for r in rows) == list(range(10))
    assert all(r["path"].endswith("z.tfrecords.gz") for r in rows)
    only = tray.read_tfrecords(str(tmp_path), file_extensions=["tfrecords"])
    assert only.count() == 5


def test_damaged_file_raises_data_loss_through_ray(cluster, tmp_path):
    paths = write_files(str(tmp_path), files=1, per_file=20)
    with open(paths[0], "rb") as f:
        data = bytearray(f.read())
    data[-2] ^= 0xFF
    with open(paths[0], "wb") as f:
        f.write(bytes(data))
    with pytest.raises(DataLossError) as info:
        tray.read_tfrecords(paths).take_all()
    assert "part-0.tfrecords" in str(info.value)


def test_write_then_read_round_trip(cluster, tmp_path):
    ds = ray.data.from_items([{"id": i, "vec": [float(i), 1.0], "name": f"n{i}".encode()}
                              for i in range(100)]).repartition(3)
    out = str(tmp_path / "out")
    shards = tray.write_tfrecords(ds, out, prefix="train")
    assert [os.path.basename(s) for s in shards] == [
        f"train-{i:05d}-of-00003.tfrecord" for i in range(3)]
    assert not [n for n in os.listdir(out) if ".tmp-" in n]
    manifest = tfr.read_manifest(os.path.join(out, "_train.manifest.json"))
    assert manifest["total_records"] == 100 and manifest["paths"] == shards
    back = rows_by_id(tray.read_tfrecords(out))  # the directory: the manifest is not data
    assert sorted(back) == list(range(100))
    assert list(back[42]["vec"]) == [42.0, 1.0] and back[42]["name"] == b"n42"
    with open(os.path.join(out, "_train.manifest.json")) as f:
        assert json.load(f)["shards"][0]["file"] == "train-00000-of-00003.tfrecord"


def test_write_refuses_an_existing_output(cluster, tmp_path):
    ds = ray.data.from_items([{"id": 1}])
    out = str(tmp_path / "o")
    tray.write_tfrecords(ds, out)
    with pytest.raises(Exception, match="already exists"):
        tray.write_tfrecords(ds, out)


def test_tf_schema_is_refused_clearly(cluster, tmp_path):
    paths = write_files(str(tmp_path), files=1, per_file=2)
    with pytest.raises(TypeError, match="spec="):
        tray.read_tfrecords(paths, tf_schema=object())


def test_no_tensorflow_import(cluster, tmp_path):
    import sys
    paths = write_files(str(tmp_path), files=1, per_file=3)
    tray.read_tfrecords(paths).take_all()
    assert "tensorflow" not in sys.modules
    assert np.asarray([1]).size == 1


def test_mixed_value_counts_across_read_tasks(cluster, tmp_path, monkeypatch):
    """Ray's own reader decides scalar-or-list per record, so its blocks disagree on data like
    VOC boxes (one box here, two there); here one schema serves every read task."""
    monkeypatch.setattr(tray, "MIN_SPLIT_BYTES", 256)
    path = str(tmp_path / "voc.tfrecords")
    with tfr.TFRecordWriter(path) as w:
        for i in range(300):
            w.write_example({"id": [i], "box": [0.5] * (1 + (i >= 150))})
    ds = tray.read_tfrecords(path, override_num_blocks=3)
    rows = rows_by_id(ds)
    assert sorted(rows) == list(range(300))
    assert list(rows[0]["box"]) == [0.5] and list(rows[299]["box"]) == [0.5, 0.5]
    assert ds.schema().base_schema.field("id").type == pa.int64()


# Ray's own expectations for tf.train.Example files read without a schema (the records and rows
# of ray/data/tests/test_tfrecords.py: tf_records_partial / data_partial(False) and the first
# record of tf_records_empty / data_empty(False)), written here without TensorFlow.
def _partial_records():
    return [
        {"int_item": [1], "int_list": [2, 2, 3], "int_partial": tfr.Int64s([]),
         "float_item": [1.0], "float_list": [2.0, 3.0, 4.0], "float_partial": [1.0],
         "bytes_item": [b"abc"], "bytes_list": [b"def", b"1234"], "bytes_partial": tfr.Bytes([]),
         "string_item": [b"uvw"], "string_list": [b"xyz", b"999"],
         "string_partial": tfr.Bytes([])},
        {"int_item": [2], "int_list": [3, 3, 4], "int_partial": [9, 2],
         "float_item": [2.0], "float_list": [5.0, 6.0, 7.0], "float_partial": tfr.Floats([]),
         "bytes_item": [b"ghi"], "bytes_list": [b"jkl", b"5678"], "bytes_partial": [b"hello"],
         "string_item": [b"mno"], "string_list": [b"pqr", b"111"],
         "string_partial": [b"world"]}]


RAY_PARTIAL_ROWS = [
    {"int_item": 1, "int_list": [2, 2, 3], "int_partial": [], "float_item": 1.0,
     "float_list": [2.0, 3.0, 4.0], "float_partial": 1.0, "bytes_item": b"abc",
     "bytes_list": [b"def", b"1234"], "bytes_partial": None, "string_item": b"uvw",
     "string_list": [b"xyz", b"999"], "string_partial": None},
    {"int_item": 2, "int_list": [3, 3, 4], "int_partial": [9, 2], "float_item": 2.0,
     "float_list": [5.0, 6.0, 7.0], "float_partial": None, "bytes_item": b"ghi",
     "bytes_list": [b"jkl", b"5678"], "bytes_partial": b"hello", "string_item": b"mno",
     "string_list": [b"pqr", b"111"], "string_partial": b"world"}]


def _plain(row):
    return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in row.items()}


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_rays_own_expectations_partial(cluster, tmp_path, compression):
    path = str(tmp_path / "data.tfrecords")
    with tfr.TFRecordWriter(path, compression) as w:
        for features in _partial_records():
            w.write_example(features)
    args = {"compression": compression} if compression else None
    ds = tray.read_tfrecords(path, arrow_open_stream_args=args)
    rows = sorted((_plain(r) for r in ds.take_all()), key=lambda r: r["int_item"])
    assert rows == RAY_PARTIAL_ROWS
    schema = ds.schema().base_schema  # the types ray.data.read_tfrecords 2.60 gives here
    assert dict(zip(schema.names, schema.types)) == {
        "int_item": pa.int64(), "int_list": pa.list_(pa.int64()),
        "int_partial": pa.list_(pa.int64()), "float_item": pa.float32(),
        "float_list": pa.list_(pa.float32()), "float_partial": pa.float32(),
        "bytes_item": pa.binary(), "bytes_list": pa.list_(pa.binary()),
        "bytes_partial": pa.binary(), "string_item": pa.binary(),
        "string_list": pa.list_(pa.binary()), "string_partial": pa.binary()}


def test_rays_own_expectations_empty_lists(cluster, tmp_path):
    path = str(tmp_path / "data.tfrecords")
    record = dict(_partial_records()[0], int_empty=tfr.Int64s([]), float_empty=tfr.Floats([]),
                  bytes_empty=tfr.Bytes([]), string_empty=tfr.Bytes([]))
    with tfr.TFRecordWriter(path) as w:
        w.write_example(record)
    (row,) = [_plain(r) for r in tray.read_tfrecords(path).take_all()]
    assert row["int_item"] == 1 and row["float_partial"] == 1.0
    for name in ("int_partial", "int_empty", "float_empty", "bytes_partial", "bytes_empty",
                 "string_partial", "string_empty"):
        assert list(row[name]) == [], name


# The rest of Ray's test_tfrecords.py cases that need no TensorFlow-only feature (tf_schema),
# re-expressed here: Ray's wheels ship no tests and publish no sdist, so its file cannot be run
# unchanged offline as tools/peer_tfrecord_suite.py runs the tfrecord package's.

def _written_partial_rows():
    """What Ray's test writes (its data_partial(False)): strings as str, missing as None."""
    return [{k: (v.decode() if k.startswith("string_") and isinstance(v, bytes) else
                 [x.decode() for x in v] if k.startswith("string_") and isinstance(v, list)
                 else v) for k, v in row.items()} for row in RAY_PARTIAL_ROWS]


def _examples(paths):
    return [tfr.proto.Example.FromString(bytes(r)) for r in tfr.read_records(sorted(paths))]


def test_rays_write_gives_rays_records(cluster, tmp_path):
    """Ray's writer: a null is an empty list of its column's kind, a str UTF-8 bytes."""
    ds = ray.data.from_items(_written_partial_rows(), override_num_blocks=1)
    shards = tray.write_tfrecords(ds, str(tmp_path))
    expected = [tfr.proto.Example.FromString(tfr.encode_example(f)) for f in _partial_records()]
    assert _examples(shards) == expected


def test_rays_readback(cluster, tmp_path):
    ds = ray.data.from_items(_written_partial_rows(), override_num_blocks=1)
    tray.write_tfrecords(ds, str(tmp_path))
    back = tray.read_tfrecords(str(tmp_path), override_num_blocks=1)
    assert [_plain(r) for r in back.take_all()] == RAY_PARTIAL_ROWS  # strings come back bytes


@pytest.mark.parametrize("rows", [[{"item": None}],
                                  [{"item": 1, "empty": []}, {"item": 2, "empty": []}]])
def test_rays_write_refuses_columns_without_a_kind(cluster, tmp_path, rows):
    with pytest.raises(ValueError, match="no Example kind"):
        tray.write_tfrecords(ray.data.from_items(rows), str(tmp_path / "out"))


@pytest.mark.parametrize("rows_per_file", [5, 10, 50])
@pytest.mark.parametrize("argument", ["min_rows_per_file", "num_rows_per_file"])
def test_rays_rows_per_file(cluster, tmp_path, rows_per_file, argument):
    ds = ray.data.range(100, override_num_blocks=20)
    shards = tray.write_tfrecords(ds, str(tmp_path), **{argument: rows_per_file})
    assert [tfr.count_records(s) for s in shards] == [rows_per_file] * (100 // rows_per_file)
    assert sorted(r["id"] for r in tray.read_tfrecords(shards).take_all()) == list(range(100))


@pytest.mark.parametrize("ignore_missing_paths", [True, False])
def test_rays_ignore_missing_paths(cluster, tmp_path, ignore_missing_paths):
    (path,) = write_files(str(tmp_path), files=1, per_file=3)
    paths = [path, str(tmp_path / "missing.tfrecords")]
    if ignore_missing_paths:
        ds = tray.read_tfrecords(paths, ignore_missing_paths=True)
        assert ds.input_files() == [path] and ds.count() == 3
    else:
        with pytest.raises(FileNotFoundError):
            tray.read_tfrecords(paths).materialize()


def test_directories_are_listed_as_ray_lists_them(cluster, tmp_path):
    """Every file below the directory, but not hidden ones or Spark's _SUCCESS markers."""
    (tmp_path / "sub").mkdir()
    write_files(str(tmp_path / "sub"), files=2, per_file=4)
    write_files(str(tmp_path), files=1, per_file=4)
    (tmp_path / "_SUCCESS").write_bytes(b"")
    (tmp_path / ".crc").write_bytes(b"not a TFRecord file")
    (tmp_path / "_logs").mkdir()
    (tmp_path / "_logs" / "log.txt").write_bytes(b"not a TFRecord file")
    ds = tray.read_tfrecords(str(tmp_path))
    assert ds.count() == 12
    assert sorted(os.path.relpath(f, tmp_path) for f in ds.input_files()) == [
        "part-0.tfrecords", os.path.join("sub", "part-0.tfrecords"),
        os.path.join("sub", "part-1.tfrecords")]


def test_partition_filter_and_shuffle(cluster, tmp_path):
    paths = write_files(str(tmp_path), files=3, per_file=5)
    ds = tray.read_tfrecords(str(tmp_path), partition_filter=lambda found: [
        p for p in found if not p.endswith("part-1.tfrecords")])
    assert sorted(r["id"] for r in ds.take_all()) == list(range(5)) + list(range(10, 15))
    seeded = ray.data.FileShuffleConfig(seed=7)
    orders = {tuple(tray.read_tfrecords(paths, shuffle=seeded).input_files()) for _ in range(2)}
    assert len(orders) == 1 and sorted(next(iter(orders))) == paths
    assert tray.read_tfrecords(paths, shuffle="files").count() == 15
    with pytest.raises(ValueError, match="shuffle"):
        tray.read_tfrecords(paths, shuffle="rows")


def test_save_modes(cluster, tmp_path):
    ds = ray.data.from_items([{"id": i} for i in range(6)], override_num_blocks=2)
    out = str(tmp_path / "out")
    first = tray.write_tfrecords(ds, out)  # mode="append", Ray's default
    tray.write_tfrecords(ds, out, prefix="more")  # appends beside it
    with pytest.raises(FileExistsError, match="data-00000-of-00002"):
        tray.write_tfrecords(ds, out)  # the same shard names would mix two outputs
    with pytest.raises(ValueError, match="already exists"):
        tray.write_tfrecords(ds, out, mode="error")
    assert tray.write_tfrecords(ds, out, mode="ignore") == []
    assert sorted(os.listdir(out)) == sorted(
        [os.path.basename(p) for p in first] + ["_data.manifest.json", "_more.manifest.json",
                                                 "more-00000-of-00002.tfrecord",
                                                 "more-00001-of-00002.tfrecord"])
    replaced = tray.write_tfrecords(ds.repartition(3), out, mode="overwrite")
    assert sorted(os.listdir(out)) == sorted(
        [os.path.basename(p) for p in replaced] + ["_data.manifest.json"])
    assert sorted(r["id"] for r in tray.read_tfrecords(out).take_all()) == list(range(6))


def test_compressed_write_and_refused_arguments(cluster, tmp_path):
    ds = ray.data.from_items([{"id": i} for i in range(4)], override_num_blocks=1)
    (shard,) = tray.write_tfrecords(ds, str(tmp_path / "gz"),
                                    arrow_open_stream_args={"compression": "gzip"})
    with open(shard, "rb") as f:
        assert f.read(2) == b"\x1f\x8b"
    assert [r["id"] for r in tray.read_tfrecords(shard, compression="gzip").take_all()] == \
        [0, 1, 2, 3]
    with pytest.raises(TypeError, match="spec="):
        tray.write_tfrecords(ds, str(tmp_path / "x"), tf_schema=object())
    with pytest.raises(TypeError, match="prefix="):
        tray.write_tfrecords(ds, str(tmp_path / "x"), filename_provider=object())


def test_nulls_can_leave_the_feature_out(cluster, tmp_path):
    ds = ray.data.from_items([{"id": 1, "opt": 5}, {"id": 2, "opt": None}],
                             override_num_blocks=1)
    shards = tray.write_tfrecords(ds, str(tmp_path), nulls="omit")
    assert [tfr.parse_example(r) for r in tfr.read_records(shards)] == [
        {"id": [1], "opt": [5]}, {"id": [2]}]


def test_empty_blocks_write_no_shard(cluster, tmp_path):
    empty = pa.table({"id": pa.array([], pa.int64())})
    ds = ray.data.from_arrow([empty, pa.table({"id": [0, 1]}), empty])
    (shard,) = tray.write_tfrecords(ds, str(tmp_path))
    assert os.path.basename(shard) == "data-00000-of-00001.tfrecord"
    assert tfr.count_records(shard) == 2


# Against Ray's own reader and writer, where the environment has what they import (TensorFlow;
# the writer also the `crc32c` package): CI's peers step.
def _has(module):
    return importlib.util.find_spec(module) is not None


@pytest.mark.skipif(not _has("tensorflow"), reason="Ray's own reader needs TensorFlow")
def test_same_rows_and_types_as_rays_own_reader(cluster, tmp_path):
    with tfr.TFRecordWriter(str(tmp_path / "a.tfrecords")) as w:
        for features in _partial_records():
            w.write_example(features)
    (tmp_path / "more").mkdir()
    for f in range(2):  # one value, or two, in every record: what Ray's own reader can read
        with tfr.TFRecordWriter(str(tmp_path / "more" / f"part-{f}.tfrecords")) as w:
            for n in range(f * 5, f * 5 + 5):
                w.write_example({"id": [n], "x": [n / 4], "name": [b"r%d" % n],
                                 "pair": [n, -n]})
    for path in (str(tmp_path / "a.tfrecords"), str(tmp_path / "more")):
        ours = tray.read_tfrecords(path, override_num_blocks=1)
        theirs = ray.data.read_tfrecords(path, override_num_blocks=1)
        key = "int_item" if path.endswith("tfrecords") else "id"
        assert sorted((_plain(r) for r in ours.take_all()), key=lambda r: r[key]) == \
            sorted((_plain(r) for r in theirs.take_all()), key=lambda r: r[key])
        a, b = ours.schema().base_schema, theirs.schema().base_schema
        assert dict(zip(a.names, a.types)) == dict(zip(b.names, b.types))


@pytest.mark.skipif(not (_has("tensorflow") and _has("crc32c")),
                    reason="Ray's own writer needs TensorFlow and crc32c")
def test_same_records_as_rays_own_writer(cluster, tmp_path):
    ds = ray.data.from_items(_written_partial_rows(), override_num_blocks=1)
    ds.write_tfrecords(str(tmp_path / "ray"))
    tray.write_tfrecords(ds, str(tmp_path / "ours"))
    theirs = [os.path.join(tmp_path / "ray", n) for n in os.listdir(tmp_path / "ray")]
    ours = [os.path.join(tmp_path / "ours", n) for n in os.listdir(tmp_path / "ours")
            if not n.startswith("_")]
    assert _examples(ours) == _examples(theirs)


def test_a_feature_the_sample_did_not_show_is_an_error(cluster, tmp_path):
    """Without a spec the schema comes from the first block of each file: a feature first seen
    later would be left out of every row silently; it raises, naming it, file and record."""
    path = str(tmp_path / "late.tfrecords")
    with tfr.TFRecordWriter(path) as w:
        for i in range(10):
            w.write_example({"id": [i], **({"late": [b"x"]} if i == 7 else {})})
    with pytest.raises(tfr.ExampleParseError, match="late") as info:
        tray.read_tfrecords(path, block_size=4).take_all()
    assert "record 7" in str(info.value) and "late.tfrecords" in str(info.value)
    rows = tray.read_tfrecords(path, {"id": tfr.FixedLen((), "int64"),
                                      "late": tfr.VarLen("bytes")}, block_size=4).take_all()
    late = {r["id"]: r["late"] for r in rows}
    assert list(late.pop(7)) == [b"x"] and set(late.values()) == {None}  # missing: null
