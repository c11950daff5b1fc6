"""tfrec_fast.ray on a real Ray cluster of two nodes on this machine (127.0.0.1 only): Ray's
arguments and values, local files. The remote (S3) and per-node checks are test_ray_cluster.py."""

import importlib.util
import os
import pickle
import re

import numpy as np
import pytest

import tfrec_fast as tfr

ray = pytest.importorskip(
    "ray", reason="optional peer `ray` not installed (CI's peers step runs this)"
)
pa = pytest.importorskip("pyarrow")
tray = pytest.importorskip("tfrec_fast.ray")

from _ray_cluster import two_node_cluster  # noqa: E402

# Ray warns about its own deprecated settings while it sets itself up.
pytestmark = [
    pytest.mark.ray,
    pytest.mark.filterwarnings("ignore::DeprecationWarning:ray"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.*"),
]

# Ray's writer's default file names: {dataset uuid}_{write uuid}_{task index:06}.tar
RAY_NAME = re.compile(r"[0-9A-Za-z]+_[0-9a-f]{32}_\d{6}\.tar$")


@pytest.fixture(scope="module")
def cluster():
    with two_node_cluster() as nodes:
        yield nodes


def write_files(directory, files=3, per_file=50):
    os.makedirs(directory, exist_ok=True)
    paths = []
    for f in range(files):
        path = os.path.join(directory, f"part-{f}.tfrecords")
        with tfr.TFRecordWriter(path) as w:
            for i in range(per_file):
                n = f * per_file + i
                w.write_example(
                    {
                        "id": [n],
                        "score": [n / 2],
                        "name": [b"r%d" % n],
                        "pair": [n, -n],
                        "tags": [b"t"] * (n % 3) if n % 3 else tfr.Bytes([]),
                    }
                )
        paths.append(path)
    return paths


def rows_by_id(ds):
    return {row["id"]: row for row in ds.take_all()}


def written(directory):
    return sorted(os.path.join(directory, n) for n in os.listdir(directory))


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
    spec = {
        "id": tfr.FixedLen((), "int64"),
        "pair": tfr.FixedLen((2,), "int64"),
        "tags": tfr.VarLen("bytes"),
    }
    got = rows_by_id(tray.read_tfrecords(paths, spec))
    cols = tfr.parse_examples(list(tfr.read_records(paths)), spec)
    for i, n in enumerate(cols["id"].tolist()):
        assert list(got[n]["pair"]) == cols["pair"][i].tolist()
        assert [bytes(v) for v in cols["tags"][i]] == list(got[n]["tags"])


def test_read_tasks_carry_schema_and_stop_at_their_row_limit(cluster, tmp_path):
    paths = write_files(str(tmp_path), files=2, per_file=40)
    source = tray.TFRecordDatasource(paths, block_size=4)
    tasks = source.get_read_tasks(2, per_task_row_limit=6)
    assert len(tasks) == 2
    assert [t.schema.field("id").type for t in tasks] == [pa.int64()] * 2
    assert all(t.per_task_row_limit == 6 for t in tasks)
    # The task's own reading stops after the block that reaches the limit (8 rows, not 40);
    # Ray's ReadTask then cuts it to 6.
    assert sum(len(b) for b in tasks[0].read_fn()) == 8
    assert sum(len(b) for b in tasks[0]()) == 6
    assert tray.read_tfrecords(paths).limit(7).count() == 7


def test_read_tasks_do_not_carry_the_file_list(cluster, tmp_path):
    """Each task pickles its own pieces only: 10 or 200 files, the same size per task."""
    import ray.cloudpickle as cloudpickle

    few = write_files(str(tmp_path / "few"), files=10, per_file=1)
    many = write_files(str(tmp_path / "many"), files=200, per_file=1)
    sizes = [
        len(cloudpickle.dumps(tray.TFRecordDatasource(p).get_read_tasks(len(p))[0]))
        for p in (few, many)
    ]
    assert sizes[1] < sizes[0] * 1.2, sizes


def test_default_blocks_follow_rays_rule_with_bigger_minimum(cluster, tmp_path, monkeypatch):
    """Without override_num_blocks: Ray's rule (twice the CPUs, here 2) with blocks of at least
    MIN_BLOCK_BYTES, so that small files are not cut into 1 MiB blocks; a DataContext with its
    own minimum keeps Ray's rule as it is; override_num_blocks is honoured."""
    paths = write_files(str(tmp_path), files=6, per_file=30)
    assert tray.TFRecordDatasource(paths).default_num_blocks() == 4
    assert tray.read_tfrecords(paths).materialize().num_blocks() == 4
    total = sum(os.path.getsize(p) for p in paths)
    monkeypatch.setattr(tray._datasource, "MIN_BLOCK_BYTES", total // 9)
    assert tray.TFRecordDatasource(paths).default_num_blocks() == 9
    assert tray.read_tfrecords(paths, override_num_blocks=2).materialize().num_blocks() == 2
    ctx = ray.data.DataContext.get_current()
    monkeypatch.setattr(ctx, "read_op_min_num_blocks", 12)
    monkeypatch.setattr(ctx, "target_min_block_size", 1000)
    assert tray.TFRecordDatasource(paths).default_num_blocks() is None
    ds = tray.read_tfrecords(paths).materialize()
    assert ds.num_blocks() == 12 and ds.count() == 180  # Ray's split of the 6 files' blocks


def test_big_files_split_only_by_their_index(cluster, tmp_path, monkeypatch):
    """More tasks than files: a big file with FILE.idx beside it is split into record ranges
    (the index is its index, not data); without one it is read whole by one task."""
    monkeypatch.setattr(tray._datasource, "MIN_SPLIT_BYTES", 512)
    (indexed,) = write_files(str(tmp_path / "a"), files=1, per_file=400)
    tfr.create_index(indexed, indexed + ".idx")
    (plain,) = write_files(str(tmp_path / "b"), files=1, per_file=400)
    tasks = tray.TFRecordDatasource(str(tmp_path / "a")).get_read_tasks(4)
    assert [list(t.metadata.input_files) for t in tasks] == [[indexed]] * 4
    assert len(tray.TFRecordDatasource(plain).get_read_tasks(4)) == 1
    ds = tray.read_tfrecords(str(tmp_path / "a"), override_num_blocks=4)
    assert sorted(rows_by_id(ds)) == list(range(400))


def test_include_paths_extensions_and_compression(cluster, tmp_path):
    path = str(tmp_path / "z.tfrecords.gz")
    with tfr.TFRecordWriter(path, "gzip") as w:
        for i in range(10):
            w.write_example({"id": [i]})
    write_files(str(tmp_path), files=1, per_file=5)
    for args in ({"arrow_open_stream_args": {"compression": "gzip"}}, {}):  # {}: by the name
        rows = tray.read_tfrecords(path, include_paths=True, **args).take_all()
        assert sorted(r["id"] for r in rows) == list(range(10))
        assert {r["path"] for r in rows} == {path}
    only = tray.read_tfrecords(str(tmp_path), file_extensions=["tfrecords"])
    assert only.count() == 5


def test_partitioning_and_partition_filter(cluster, tmp_path):
    from ray.data.datasource import Partitioning, PathPartitionFilter

    for split in ("train", "test"):
        write_files(str(tmp_path / f"split={split}"), files=2, per_file=3)
    hive = Partitioning("hive", base_dir=str(tmp_path))
    ds = tray.read_tfrecords(str(tmp_path), partitioning=hive)
    assert sorted((r["split"], r["id"]) for r in ds.take_all()) == sorted(
        (s, i) for s in ("train", "test") for i in range(6)
    )
    assert ds.schema().base_schema.field("split").type == pa.string()
    only_train = PathPartitionFilter.of(
        lambda d: d["split"] == "train", style="hive", base_dir=str(tmp_path)
    )
    ds = tray.read_tfrecords(str(tmp_path), partition_filter=only_train, partitioning=hive)
    assert {r["split"] for r in ds.take_all()} == {"train"} and ds.count() == 6


def test_globs(cluster, tmp_path):
    write_files(str(tmp_path / "x"), files=2, per_file=2)
    write_files(str(tmp_path / "y"), files=1, per_file=2)
    assert tray.read_tfrecords(str(tmp_path / "*" / "part-0.tfrecords")).count() == 4
    assert tray.read_tfrecords(str(tmp_path / "**" / "*.tfrecords")).count() == 6
    with pytest.raises(FileNotFoundError, match="no file matches"):
        tray.read_tfrecords(str(tmp_path / "*.nothing"))


def test_damaged_file_is_rays_runtime_error_with_our_detail(cluster, tmp_path):
    paths = write_files(str(tmp_path), files=1, per_file=20)
    with open(paths[0], "rb") as f:
        data = bytearray(f.read())
    data[-2] ^= 0xFF
    with open(paths[0], "wb") as f:
        f.write(bytes(data))
    with pytest.raises(RuntimeError, match="Failed to read TFRecord file") as info:
        tray.read_tfrecords(paths).take_all()
    assert isinstance(info.value, tfr.DataLossError)
    assert "part-0.tfrecords" in str(info.value) and "record 19 at offset" in str(info.value)


def test_not_a_tfrecord_file(cluster, tmp_path):
    path = tmp_path / "file.json"
    path.write_text('{"number": 0, "string": "foo"}')
    with pytest.raises(RuntimeError, match="Failed to read TFRecord file"):
        tray.read_tfrecords(str(path)).schema()


def test_local_files_are_sampled_on_the_driver(cluster, tmp_path, monkeypatch):
    """A few small local reads: no Ray task for the schema (a damaged file is the driver's own
    TFRecordReadError, naming it)."""

    def refuse():
        raise AssertionError("a Ray task sampled local files")

    monkeypatch.setattr(tray._datasource, "_remote_sample_files", refuse)
    paths = write_files(str(tmp_path), files=2, per_file=10)
    assert tray.read_tfrecords(paths).count() == 20
    with open(paths[1], "r+b") as f:
        f.write(b"\xff" * 12)
    with pytest.raises(tray.TFRecordReadError, match="part-1.tfrecords"):
        tray.read_tfrecords(paths)


def test_read_ahead_keeps_order_errors_and_stops():
    """The next item is made on a thread: items in order, an error where its item would have
    come (after the earlier ones), and the source closed when the reader stops early."""
    import threading

    read_ahead = tray._datasource._read_ahead
    assert list(read_ahead(iter(range(50)))) == list(range(50))

    def failing():
        yield 1
        yield 2
        raise tfr.DataLossError("bad", path="f", record_index=2, offset=9)

    got = []
    with pytest.raises(tfr.DataLossError, match="bad"):
        for item in read_ahead(failing()):
            got.append(item)
    assert got == [1, 2]

    closed = threading.Event()

    def endless():
        try:
            n = 0
            while True:
                yield n
                n += 1
        finally:
            closed.set()

    items = read_ahead(endless())
    assert [next(items) for _ in range(3)] == [0, 1, 2]
    items.close()
    assert closed.is_set()


def test_a_later_record_with_more_values_follows_rays_rule(cluster, tmp_path, monkeypatch):
    """The sample (the first records) shows one box per record; later records hold two. Nothing
    fails: the column follows Ray's per-record rule (a value, or an array), and Ray combines
    the blocks."""
    monkeypatch.setattr(tray._datasource, "SAMPLE_RECORDS", 100)
    path = str(tmp_path / "voc.tfrecords")
    with tfr.TFRecordWriter(path) as w:
        for i in range(300):
            w.write_example(
                {
                    "id": [i],
                    "box": [i / 4] * (1 + (i >= 250)),
                    **({"late": [b"x"]} if i == 280 else {}),
                }
            )
    ds = tray.read_tfrecords(path, block_size=50)
    rows = rows_by_id(ds)
    assert sorted(rows) == list(range(300))
    assert rows[0]["box"] == 0.0 and rows[249]["box"] == 62.25
    assert list(rows[299]["box"]) == [74.75, 74.75]
    assert rows[280]["late"] == b"x" and rows[281]["late"] is None  # a feature not sampled
    batches = list(ds.iter_batches(batch_size=100, batch_format="pyarrow"))
    assert sum(len(b) for b in batches) == 300
    # With a spec the column is a list throughout.
    spec = {"id": tfr.FixedLen((), "int64"), "box": tfr.VarLen("float32")}
    assert list(rows_by_id(tray.read_tfrecords(path, spec))[0]["box"]) == [0.0]


def test_write_then_read_round_trip_with_rays_names(cluster, tmp_path):
    ds = ray.data.from_items(
        [{"id": i, "vec": [float(i), 1.0], "name": f"n{i}".encode()} for i in range(100)]
    ).repartition(3)
    out = str(tmp_path / "out")
    assert tray.write_tfrecords(ds, out) is None  # as Ray's
    files = written(out)
    assert len(files) == 3 and all(RAY_NAME.search(f) for f in files), files
    assert sum(tfr.count_records(f) for f in files) == 100  # every file is TFRecords
    back = rows_by_id(tray.read_tfrecords(out))
    assert sorted(back) == list(range(100))
    assert list(back[42]["vec"]) == [42.0, 1.0] and back[42]["name"] == b"n42"


def test_index_and_manifest_are_opt_in(cluster, tmp_path):
    ds = ray.data.from_items([{"id": i} for i in range(20)], override_num_blocks=2)
    out = str(tmp_path / "out")
    tray.write_tfrecords(ds, out, index=True, manifest=True)
    names = os.listdir(out)
    data = sorted(os.path.join(out, n) for n in names if n.endswith(".tar"))
    assert sorted(names) == sorted(
        [os.path.basename(d) for d in data]
        + [os.path.basename(d) + ".idx" for d in data]
        + [n for n in names if n.endswith(".manifest.json")]
    )
    manifest = tfr.read_manifest(
        os.path.join(out, next(n for n in names if n.endswith(".manifest.json")))
    )
    assert manifest["paths"] == data and manifest["total_records"] == 20
    for d in data:
        written_index, scanned = tfr.load_index(d + ".idx"), tfr.create_index(d)
        assert all(np.array_equal(a, b) for a, b in zip(written_index, scanned))
    # Reading the directory: the index files are indexes, the manifest is hidden ("_").
    assert sorted(r["id"] for r in tray.read_tfrecords(out).take_all()) == list(range(20))


def test_save_modes_as_in_ray(cluster, tmp_path):
    from ray.data import SaveMode

    ds = ray.data.from_items([{"id": i} for i in range(6)], override_num_blocks=2)
    out = str(tmp_path / "out")
    tray.write_tfrecords(ds, out)  # mode=APPEND, Ray's default
    first = written(out)
    tray.write_tfrecords(ds, out)  # appends beside it: new names
    assert len(written(out)) == 4 and set(first) < set(written(out))
    for mode in ("error", SaveMode.CREATE):
        with pytest.raises(ValueError, match="already exists"):
            tray.write_tfrecords(ds, out, mode=mode)
    tray.write_tfrecords(ds, out, mode="ignore")
    assert len(written(out)) == 4
    tray.write_tfrecords(ds.repartition(3), out, mode=SaveMode.OVERWRITE)
    assert len(written(out)) == 3 and not set(first) & set(written(out))
    assert sorted(r["id"] for r in tray.read_tfrecords(out).take_all()) == list(range(6))
    tray.write_tfrecords(ds, str(tmp_path / "new"), mode="create")
    assert len(written(str(tmp_path / "new"))) == 2


def test_compressed_write(cluster, tmp_path):
    ds = ray.data.from_items([{"id": i} for i in range(4)], override_num_blocks=1)
    tray.write_tfrecords(ds, str(tmp_path / "gz"), arrow_open_stream_args={"compression": "gzip"})
    (shard,) = written(str(tmp_path / "gz"))
    with open(shard, "rb") as f:
        assert f.read(2) == b"\x1f\x8b"
    assert [r["id"] for r in tray.read_tfrecords(shard, compression="gzip").take_all()] == [
        0,
        1,
        2,
        3,
    ]


def test_float64_that_float32_cannot_hold_is_an_error(cluster, tmp_path):
    exact = ray.data.from_items([{"x": 1.5}, {"x": 2.0}], override_num_blocks=1)
    tray.write_tfrecords(exact, str(tmp_path / "a"))  # float64 values float32 holds exactly
    assert [r["x"] for r in tray.read_tfrecords(str(tmp_path / "a")).take_all()] == [1.5, 2.0]
    inexact = ray.data.from_items([{"x": 1.5}, {"x": 0.1}], override_num_blocks=1)
    with pytest.raises(ValueError, match=r"column 'x'.*0\.1.*row 1.*float32.*float64='round'"):
        tray.write_tfrecords(inexact, str(tmp_path / "b"))
    tray.write_tfrecords(inexact, str(tmp_path / "c"), float64="round")
    (row,) = [r for r in tray.read_tfrecords(str(tmp_path / "c")).take_all() if r["x"] != 1.5]
    assert row["x"] == np.float32(0.1)


def test_tensors_are_serialized_tensor_protos(cluster, tmp_path):
    """Ray's writer stores a tensor column as tf.io.serialize_tensor's bytes: TensorProto with
    dtype 9 (int64), shape [2, 2], content the little-endian values."""
    tray.write_tfrecords(ray.data.range_tensor(3, shape=(2, 2)), str(tmp_path))
    values = sorted(
        tfr.parse_example(r)["data"][0] for f in written(str(tmp_path)) for r in tfr.read_records(f)
    )
    for i, value in enumerate(values):
        content = np.full((2, 2), i, np.int64).tobytes()
        shape = b"\x12\x02\x08\x02" * 2
        assert (
            value
            == b"\x08\x09\x12"
            + bytes([len(shape)])
            + shape
            + b"\x22"
            + bytes([len(content)])
            + content
        )


def test_nulls_can_leave_the_feature_out(cluster, tmp_path):
    ds = ray.data.from_items([{"id": 1, "opt": 5}, {"id": 2, "opt": None}], override_num_blocks=1)
    tray.write_tfrecords(ds, str(tmp_path), nulls="omit")
    assert [tfr.parse_example(r) for f in written(str(tmp_path)) for r in tfr.read_records(f)] == [
        {"id": [1], "opt": [5]},
        {"id": [2]},
    ]


def test_empty_blocks_write_no_file(cluster, tmp_path):
    empty = pa.table({"id": pa.array([], pa.int64())})
    ds = ray.data.from_arrow([empty, pa.table({"id": [0, 1]}), empty])
    tray.write_tfrecords(ds, str(tmp_path / "o"))
    (shard,) = written(str(tmp_path / "o"))
    assert tfr.count_records(shard) == 2


def test_shuffle_files_reseeded_per_execution(cluster, tmp_path):
    from ray.data import FileShuffleConfig

    paths = write_files(str(tmp_path), files=8, per_file=1)
    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True
    try:

        def orders(shuffle):
            ds = tray.read_tfrecords(paths, shuffle=shuffle, override_num_blocks=8)
            return [tuple(r["id"] for r in ds.take_all()) for _ in range(3)]

        fixed = orders(FileShuffleConfig(seed=7, reseed_after_execution=False))
        assert len(set(fixed)) == 1 and sorted(fixed[0]) == list(range(8))
        reseeded = orders(FileShuffleConfig(seed=7))
        assert len(set(reseeded)) == 3
        assert tray.read_tfrecords(paths, shuffle="files").count() == 8
        with pytest.raises(ValueError, match="shuffle"):
            tray.read_tfrecords(paths, shuffle="rows")
    finally:
        ctx.execution_options.preserve_order = False


def test_ignore_missing_paths(cluster, tmp_path):
    (path,) = write_files(str(tmp_path), files=1, per_file=3)
    paths = [path, str(tmp_path / "missing.tfrecords")]
    ds = tray.read_tfrecords(paths, ignore_missing_paths=True)
    assert ds.input_files() == [path] and ds.count() == 3
    with pytest.raises(FileNotFoundError):
        tray.read_tfrecords(paths).materialize()


def test_directories_are_listed_as_ray_lists_them(cluster, tmp_path):
    """Every file below the directory, but not hidden ones or Spark's _SUCCESS markers."""
    write_files(str(tmp_path / "sub"), files=2, per_file=4)
    write_files(str(tmp_path), files=1, per_file=4)
    (tmp_path / "_SUCCESS").write_bytes(b"")
    (tmp_path / ".crc").write_bytes(b"not a TFRecord file")
    (tmp_path / "_logs").mkdir()
    (tmp_path / "_logs" / "log.txt").write_bytes(b"not a TFRecord file")
    ds = tray.read_tfrecords(str(tmp_path))
    assert ds.count() == 12
    assert sorted(os.path.relpath(f, tmp_path) for f in ds.input_files()) == [
        "part-0.tfrecords",
        os.path.join("sub", "part-0.tfrecords"),
        os.path.join("sub", "part-1.tfrecords"),
    ]


def test_unknown_arguments_are_refused(cluster, tmp_path):
    paths = write_files(str(tmp_path), files=1, per_file=2)
    with pytest.raises(TypeError, match="tfx_read_options"):
        tray.read_tfrecords(paths, tfx_read_options=object())
    with pytest.raises(ValueError, match="compression"):
        tray.read_tfrecords(
            paths, compression="gzip", arrow_open_stream_args={"compression": "gzip"}
        )


# ---- Ray's tf_schema, read without TensorFlow ---------------------------------------------------


class _Feature:
    def __init__(self, name, type_):
        self.name, self.type = name, type_


class _Schema:
    """What a tensorflow_metadata Schema shows the reader: features with a name and a type
    (BYTES 1, INT 2, FLOAT 3)."""

    def __init__(self, **types):
        self.feature = [_Feature(name, t) for name, t in types.items()]

    def __str__(self):
        return "".join(f'feature {{ name: "{f.name}" type: {f.type} }}' for f in self.feature)


def test_tf_schema_reads_lists_of_its_types(cluster, tmp_path):
    paths = write_files(str(tmp_path), files=1, per_file=3)
    schema = _Schema(id=2, score=3, name=1, pair=2, tags=1)
    ds = tray.read_tfrecords(paths, tf_schema=schema)
    rows = rows_by_id_list(ds)
    assert list(rows[1]["score"]) == [0.5] and list(rows[1]["name"]) == [b"r1"]
    assert ds.schema().base_schema.field("id").type == pa.list_(pa.int64())
    with pytest.raises(ValueError, match="Found extra unexpected feature"):
        tray.read_tfrecords(paths, tf_schema=_Schema(id=2)).materialize()
    with pytest.raises(ValueError) as info:
        tray.read_tfrecords(
            paths, tf_schema=_Schema(id=2, score=3, name=2, pair=2, tags=1)
        ).materialize()
    assert str(info.value.args[0]).startswith(  # (Ray adds its retry hint below)
        "Schema field type mismatch during read: specified type is int, but underlying type is "
        "bytes"
    )


def rows_by_id_list(ds):
    return {row["id"][0]: row for row in ds.take_all()}


def test_tf_schema_on_write(cluster, tmp_path):
    ds = ray.data.from_items([{"a": 1, "b": None}, {"a": 2, "b": None}], override_num_blocks=1)
    tray.write_tfrecords(ds, str(tmp_path / "ok"), tf_schema=_Schema(a=2, b=1))
    assert [
        tfr.parse_example(r) for f in written(str(tmp_path / "ok")) for r in tfr.read_records(f)
    ] == [{"a": [1], "b": []}, {"a": [2], "b": []}]
    with pytest.raises(ValueError, match="Found extra unexpected feature b"):
        tray.write_tfrecords(ds, str(tmp_path / "x"), tf_schema=_Schema(a=2))
    with pytest.raises(ValueError) as info:
        tray.write_tfrecords(ds, str(tmp_path / "y"), tf_schema=_Schema(a=1, b=1))
    assert "specified type is bytes, but underlying type is int" in str(info.value)


# ---- Ray's own expectations (ray/data/tests/test_tfrecords.py's records and rows) ------------


def _partial_records():
    return [
        {
            "int_item": [1],
            "int_list": [2, 2, 3],
            "int_partial": tfr.Int64s([]),
            "float_item": [1.0],
            "float_list": [2.0, 3.0, 4.0],
            "float_partial": [1.0],
            "bytes_item": [b"abc"],
            "bytes_list": [b"def", b"1234"],
            "bytes_partial": tfr.Bytes([]),
            "string_item": [b"uvw"],
            "string_list": [b"xyz", b"999"],
            "string_partial": tfr.Bytes([]),
        },
        {
            "int_item": [2],
            "int_list": [3, 3, 4],
            "int_partial": [9, 2],
            "float_item": [2.0],
            "float_list": [5.0, 6.0, 7.0],
            "float_partial": tfr.Floats([]),
            "bytes_item": [b"ghi"],
            "bytes_list": [b"jkl", b"5678"],
            "bytes_partial": [b"hello"],
            "string_item": [b"mno"],
            "string_list": [b"pqr", b"111"],
            "string_partial": [b"world"],
        },
    ]


RAY_PARTIAL_ROWS = [
    {
        "int_item": 1,
        "int_list": [2, 2, 3],
        "int_partial": [],
        "float_item": 1.0,
        "float_list": [2.0, 3.0, 4.0],
        "float_partial": 1.0,
        "bytes_item": b"abc",
        "bytes_list": [b"def", b"1234"],
        "bytes_partial": None,
        "string_item": b"uvw",
        "string_list": [b"xyz", b"999"],
        "string_partial": None,
    },
    {
        "int_item": 2,
        "int_list": [3, 3, 4],
        "int_partial": [9, 2],
        "float_item": 2.0,
        "float_list": [5.0, 6.0, 7.0],
        "float_partial": None,
        "bytes_item": b"ghi",
        "bytes_list": [b"jkl", b"5678"],
        "bytes_partial": b"hello",
        "string_item": b"mno",
        "string_list": [b"pqr", b"111"],
        "string_partial": b"world",
    },
]


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
        "int_item": pa.int64(),
        "int_list": pa.list_(pa.int64()),
        "int_partial": pa.list_(pa.int64()),
        "float_item": pa.float32(),
        "float_list": pa.list_(pa.float32()),
        "float_partial": pa.float32(),
        "bytes_item": pa.binary(),
        "bytes_list": pa.list_(pa.binary()),
        "bytes_partial": pa.binary(),
        "string_item": pa.binary(),
        "string_list": pa.list_(pa.binary()),
        "string_partial": pa.binary(),
    }


def _written_partial_rows():
    """What Ray's test writes (its data_partial(False)): strings as str, missing as None."""
    return [
        {
            k: (
                v.decode()
                if k.startswith("string_") and isinstance(v, bytes)
                else [x.decode() for x in v]
                if k.startswith("string_") and isinstance(v, list)
                else v
            )
            for k, v in row.items()
        }
        for row in RAY_PARTIAL_ROWS
    ]


def _examples(paths):
    return [tfr.proto.Example.FromString(bytes(r)) for r in tfr.read_records(sorted(paths))]


def test_rays_write_gives_rays_records(cluster, tmp_path):
    """Ray's writer: a null is an empty list of its column's kind, a str UTF-8 bytes."""
    ds = ray.data.from_items(_written_partial_rows(), override_num_blocks=1)
    tray.write_tfrecords(ds, str(tmp_path))
    expected = [tfr.proto.Example.FromString(tfr.encode_example(f)) for f in _partial_records()]
    assert _examples(written(str(tmp_path))) == expected


def test_rays_readback(cluster, tmp_path):
    ds = ray.data.from_items(_written_partial_rows(), override_num_blocks=1)
    tray.write_tfrecords(ds, str(tmp_path))
    back = tray.read_tfrecords(str(tmp_path), override_num_blocks=1)
    assert [_plain(r) for r in back.take_all()] == RAY_PARTIAL_ROWS  # strings come back bytes


@pytest.mark.parametrize(
    "rows", [[{"item": None}], [{"item": 1, "empty": []}, {"item": 2, "empty": []}]]
)
def test_rays_write_refuses_columns_without_a_kind(cluster, tmp_path, rows):
    with pytest.raises(ValueError, match="no Example kind"):
        tray.write_tfrecords(ray.data.from_items(rows), str(tmp_path / "out"))


@pytest.mark.parametrize("rows_per_file", [5, 10, 50])
def test_rays_rows_per_file(cluster, tmp_path, rows_per_file):
    ds = ray.data.range(100, override_num_blocks=20)
    tray.write_tfrecords(ds, str(tmp_path), min_rows_per_file=rows_per_file)
    assert [tfr.count_records(s) for s in written(str(tmp_path))] == [rows_per_file] * (
        100 // rows_per_file
    )
    assert sorted(r["id"] for r in tray.read_tfrecords(str(tmp_path)).take_all()) == list(
        range(100)
    )


# ---- against Ray's own reader and writer, where what they import is here (the peers step) ---


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
                w.write_example({"id": [n], "x": [n / 4], "name": [b"r%d" % n], "pair": [n, -n]})
    for path in (str(tmp_path / "a.tfrecords"), str(tmp_path / "more")):
        ours = tray.read_tfrecords(path, override_num_blocks=1)
        theirs = ray.data.read_tfrecords(path, override_num_blocks=1)
        key = "int_item" if path.endswith("tfrecords") else "id"
        assert sorted((_plain(r) for r in ours.take_all()), key=lambda r: r[key]) == sorted(
            (_plain(r) for r in theirs.take_all()), key=lambda r: r[key]
        )
        a, b = ours.schema().base_schema, theirs.schema().base_schema
        assert dict(zip(a.names, a.types)) == dict(zip(b.names, b.types))


@pytest.mark.skipif(
    not (_has("tensorflow") and _has("crc32c")),
    reason="Ray's own writer needs TensorFlow and crc32c",
)
def test_same_records_as_rays_own_writer(cluster, tmp_path):
    ds = ray.data.from_items(_written_partial_rows(), override_num_blocks=1)
    ds.write_tfrecords(str(tmp_path / "ray"))
    tray.write_tfrecords(ds, str(tmp_path / "ours"))
    assert _examples(written(str(tmp_path / "ours"))) == _examples(written(str(tmp_path / "ray")))
    assert [RAY_NAME.search(f) is not None for f in written(str(tmp_path / "ray"))] == [True]


@pytest.mark.skipif(not _has("tensorflow"), reason="parses the tensors with TensorFlow")
def test_tensors_parse_in_tensorflow(cluster, tmp_path):
    import tensorflow as tf

    tray.write_tfrecords(ray.data.range_tensor(3, shape=(2, 2)), str(tmp_path))
    got = sorted(
        (
            tf.io.parse_tensor(tfr.parse_example(r)["data"][0], tf.int64).numpy()
            for f in written(str(tmp_path))
            for r in tfr.read_records(f)
        ),
        key=lambda t: t[0, 0],
    )
    assert [t.tolist() for t in got] == [np.full((2, 2), i).tolist() for i in range(3)]


def test_pickled_read_error_keeps_rays_class(tmp_path):
    error = tray.TFRecordReadError(
        "bad", path="p", record_index=3, offset=40, reason="data_checksum"
    )
    again = pickle.loads(pickle.dumps(error))
    assert isinstance(again, RuntimeError) and isinstance(again, tfr.DataLossError)
    assert str(again).startswith("Failed to read TFRecord file p.") and again.offset == 40
