"""tfrec_fast.arrow: RecordBatch.to_arrow, read_table / iter_batches, write_table, and the
Arrow consumers (polars, DuckDB, Hugging Face datasets)."""

import gc
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tfrec_fast as tfr
from tfrec_fast.errors import DataLossError, ExampleParseError

pa = pytest.importorskip("pyarrow")
ta = pytest.importorskip("tfrec_fast.arrow")

pytestmark = pytest.mark.arrow


def write(path, features_list):
    with tfr.TFRecordWriter(str(path)) as w:
        for f in features_list:
            w.write_example(f)
    return str(path)


# ---- raw records ------------------------------------------------------------------------------


def test_to_arrow_shares_the_batch_memory_and_keeps_it_alive():
    batch = tfr.RecordBatch.from_records([b"ab", b"", b"xyz"])
    data_address = batch.data.ctypes.data
    array = batch.to_arrow()
    assert array.type == pa.large_binary()
    assert array.buffers()[2].address == data_address  # payloads not copied
    del batch
    gc.collect()
    assert array.to_pylist() == [b"ab", b"", b"xyz"]


def test_to_arrow_32_bit_offsets():
    array = tfr.RecordBatch.from_records([b"a", b"bc"]).to_arrow(large_types=False)
    assert array.type == pa.binary() and array.to_pylist() == [b"a", b"bc"]


def test_batches_read_from_a_file_to_arrow(tmp_path):
    path = tmp_path / "r.tfrecord"
    with tfr.TFRecordWriter(str(path)) as w:
        w.write_batch([b"r%d" % i for i in range(100)])
    with tfr.TFRecordReader(str(path)) as r:
        arrays = [b.to_arrow() for b in r.iter_batches(max_records=30)]
    assert pa.chunked_array(arrays).to_pylist() == [b"r%d" % i for i in range(100)]


# ---- reading with a spec ------------------------------------------------------------------------

FEATURES = [
    {
        "label": [3],
        "score": [0.5],
        "name": [b"a"],
        "ids": [1, 2, 3],
        "vec": [1.0, 2.0],
        "img": [np.arange(6, dtype=np.uint8).tobytes()],
        "tags": [b"x", b"y"],
    },
    {
        "label": [4],
        "score": [1.5],
        "name": [b"bb"],
        "ids": tfr.Int64s([]),
        "vec": [3.0, 4.0],
        "img": [np.arange(6, 12, dtype=np.uint8).tobytes()],
        "tags": [b"z"],
    },
    {
        "label": [5],
        "score": [2.5],
        "name": [b""],
        "vec": [5.0, 6.0],
        "img": [np.arange(12, 18, dtype=np.uint8).tobytes()],
    },
]
SPEC = {
    "label": tfr.FixedLen((), "int64"),
    "score": tfr.FixedLen((), "float32"),
    "name": tfr.FixedLen((), "bytes"),
    "ids": tfr.VarLen("int64"),
    "vec": tfr.FixedLen((2,), "float32"),
    "img": tfr.FixedLen((2, 3), "uint8"),
    "tags": tfr.VarLen("bytes"),
}


@pytest.fixture
def records(tmp_path):
    return write(tmp_path / "f.tfrecord", FEATURES)


def test_read_table_types(records):
    table = ta.read_table(records, SPEC)
    types = dict(zip(table.schema.names, table.schema.types))
    assert types == {
        "label": pa.int64(),
        "score": pa.float32(),
        "name": pa.large_binary(),
        "ids": pa.large_list(pa.int64()),
        "vec": pa.list_(pa.float32(), 2),
        "img": pa.list_(pa.list_(pa.uint8(), 3), 2),
        "tags": pa.large_list(pa.large_binary()),
    }


def test_read_table_values_equal_parse_examples(records):
    table = ta.read_table(records, SPEC)
    cols = tfr.parse_examples(list(tfr.read_records(records)), SPEC)
    assert table.column("label").to_pylist() == cols["label"].tolist()
    assert table.column("score").to_pylist() == cols["score"].tolist()
    assert table.column("name").to_pylist() == cols["name"].to_list()
    assert table.column("vec").to_pylist() == cols["vec"].tolist()
    assert table.column("img").to_pylist() == cols["img"].tolist()
    # VarLen: a record without the feature is null (the decoder's empty list is [] only where
    # the record holds an empty list)
    assert table.column("tags").to_pylist() == [[b"x", b"y"], [b"z"], None]
    assert table.column("ids").to_pylist() == [[1, 2, 3], [], None]


def test_lists_wrap_the_decoder_arrays_without_copying():
    values = np.arange(5, dtype=np.int64)
    splits = np.array([0, 2, 2, 5], dtype=np.int64)
    flat = ta._primitive(values, pa.int64())
    lists = ta._list(flat, splits, np.array([1, 0, 1], np.uint8))
    assert flat.buffers()[1].address == values.ctypes.data
    assert lists.buffers()[1].address == splits.ctypes.data
    assert lists.to_pylist() == [[0, 1], None, [2, 3, 4]]


def test_columns_select_and_order(records):
    table = ta.read_table(records, SPEC, columns=["tags", "label"])
    assert table.schema.names == ["tags", "label"]
    with pytest.raises(KeyError, match="nope"):
        ta.read_table(records, SPEC, columns=["nope"])


def test_large_types_false(records):
    table = ta.read_table(records, SPEC, large_types=False)
    types = dict(zip(table.schema.names, table.schema.types))
    assert types["ids"] == pa.list_(pa.int64())
    assert types["tags"] == pa.list_(pa.binary())
    assert types["name"] == pa.binary()
    assert table.column("tags").to_pylist() == [[b"x", b"y"], [b"z"], None]


def test_text_columns(records, tmp_path):
    table = ta.read_table(records, SPEC, text=["name", "tags"])
    assert table.schema.field("name").type == pa.large_string()
    assert table.column("name").to_pylist() == ["a", "bb", ""]
    assert table.column("tags").to_pylist() == [["x", "y"], ["z"], None]
    bad = write(
        tmp_path / "bad.tfrecord", [{"name": [b"ok"]}, {"name": [b"ok"]}, {"name": [b"\xff\xfe"]}]
    )
    with pytest.raises(ExampleParseError) as info:
        ta.read_table(bad, {"name": tfr.FixedLen((), "bytes")}, text=["name"])
    assert info.value.record_index == 2 and info.value.feature == "name"
    assert info.value.path.endswith("bad.tfrecord")


def test_fixed_shape_tensor(records):
    table = ta.read_table(records, {"img": SPEC["img"]}, fixed_shape="tensor")
    column = table.column("img").combine_chunks()
    assert isinstance(column.type, pa.FixedShapeTensorType)
    assert column.type.shape == [2, 3]
    assert np.array_equal(column.to_numpy_ndarray(), np.arange(18, dtype=np.uint8).reshape(3, 2, 3))
    with pytest.raises(ValueError, match="fixed_shape"):
        ta.read_table(records, SPEC, fixed_shape="cube")


def test_fixed_bytes_with_shape_and_default(tmp_path):
    path = write(tmp_path / "b.tfrecord", [{"pair": [b"a", b"b"]}, {}])
    spec = {"pair": tfr.FixedLen((2,), "bytes", default=b"-")}
    assert ta.read_table(path, spec).column("pair").to_pylist() == [[b"a", b"b"], [b"-", b"-"]]


# ---- reading without a spec ---------------------------------------------------------------------


def test_inferred_schema_nulls_and_empty_lists(tmp_path):
    path = write(
        tmp_path / "i.tfrecord",
        [{"a": [1, 2], "b": [b"x"]}, {"a": tfr.Int64s([]), "c": [0.5]}, {"b": [b"y"]}],
    )
    table = ta.read_table(path)
    assert table.schema.names == ["a", "b", "c"]
    assert table.column("a").type == pa.large_list(pa.int64())
    assert table.column("c").type == pa.large_list(pa.float32())
    assert table.column("a").to_pylist() == [[1, 2], [], None]
    assert table.column("b").to_pylist() == [[b"x"], None, [b"y"]]
    assert table.column("c").to_pylist() == [None, [0.5], None]


def test_inference_sees_every_batch_in_read_table(tmp_path):
    path = write(tmp_path / "late.tfrecord", [{"a": [1]}] * 5 + [{"late": [b"z"]}])
    table = ta.read_table(path, batch_size=2)
    assert table.column("late").to_pylist() == [None] * 5 + [[b"z"]]
    # iter_batches infers from its first batch: a later feature is an error, not left out
    reader = ta.iter_batches(path, batch_size=2)
    assert reader.schema.names == ["a"]
    assert reader.read_next_batch().num_rows == 2
    with pytest.raises(ExampleParseError, match="first batch") as info:
        reader.read_all()
    assert info.value.feature == "late" and info.value.record_index == 5
    assert info.value.path.endswith("late.tfrecord")
    assert ta.iter_batches(path, ["a"], batch_size=2).read_all().num_rows == 6  # named: fine


def test_scalars_only_when_asked(tmp_path):
    path = write(
        tmp_path / "s.tfrecord",
        [{"one": [1], "two": [1, 2], "opt": [1]}, {"one": [2], "two": [3, 4]}],
    )
    assert ta.read_table(path).column("one").type == pa.large_list(pa.int64())
    table = ta.read_table(path, scalars=True)
    assert table.column("one").type == pa.int64()
    assert table.column("one").to_pylist() == [1, 2]
    assert table.column("two").type == pa.large_list(pa.int64())
    assert table.column("opt").to_pylist() == [1, None]  # at most one value: missing is null


def test_scalars_agree_across_batches(tmp_path):
    path = write(tmp_path / "s.tfrecord", [{"x": [1]}, {"x": [2]}, {"x": [3, 4]}])
    table = ta.read_table(path, scalars=True, batch_size=2)
    assert table.column("x").type == pa.large_list(pa.int64())
    assert table.column("x").to_pylist() == [[1], [2], [3, 4]]


def test_names_only_spec(records):
    table = ta.read_table(records, ["label", "tags"])
    assert table.column("label").to_pylist() == [[3], [4], [5]]


# ---- SequenceExample ----------------------------------------------------------------------------


def test_sequence_examples(tmp_path):
    path = str(tmp_path / "seq.tfrecord")
    with tfr.TFRecordWriter(path) as w:
        w.write(
            tfr.encode_sequence_example({"id": [7]}, {"tok": [[1, 2], [3]], "xy": [[0.0, 1.0]]})
        )
        w.write(tfr.encode_sequence_example({"id": [8]}, {"tok": [], "xy": [[2.0, 3.0]] * 2}))
    table = ta.read_table(
        path,
        {"id": tfr.FixedLen((), "int64")},
        sequence_spec={
            "tok": tfr.VarLenSequence("int64"),
            "xy": tfr.FixedLenSequence((2,), "float32"),
        },
    )
    assert table.schema.field("tok").type == pa.large_list(pa.large_list(pa.int64()))
    assert table.schema.field("xy").type == pa.large_list(pa.list_(pa.float32(), 2))
    assert table.to_pylist() == [
        {"id": 7, "tok": [[1, 2], [3]], "xy": [[0.0, 1.0]]},
        {"id": 8, "tok": [], "xy": [[2.0, 3.0], [2.0, 3.0]]},
    ]


# ---- paths, streaming, errors -------------------------------------------------------------------


def test_globs_lists_and_streaming(tmp_path):
    for i in range(3):
        write(tmp_path / f"part-{i}.tfrecord", [{"v": [i * 10 + j]} for j in range(7)])
    spec = {"v": tfr.FixedLen((), "int64")}
    table = ta.read_table(str(tmp_path / "part-*.tfrecord"), spec)
    assert table.column("v").to_pylist() == [i * 10 + j for i in range(3) for j in range(7)]
    reader = ta.iter_batches(
        [str(tmp_path / "part-2.tfrecord"), str(tmp_path / "part-0.tfrecord")], spec, batch_size=4
    )
    assert isinstance(reader, pa.RecordBatchReader)
    sizes = [b.num_rows for b in reader]
    assert sizes == [4, 4, 4, 2]


def test_empty_input_has_the_spec_schema(tmp_path):
    path = str(tmp_path / "empty.tfrecord")
    tfr.TFRecordWriter(path).close()
    table = ta.read_table(path, SPEC)
    assert table.num_rows == 0
    assert table.schema.field("tags").type == pa.large_list(pa.large_binary())
    assert ta.iter_batches(path, SPEC).read_all().num_rows == 0


def test_damaged_file_names_file_and_record(records, tmp_path):
    with open(records, "rb") as f:
        data = bytearray(f.read())
    data[-3] ^= 0xFF  # the last record's data CRC
    bad = tmp_path / "damaged.tfrecord"
    bad.write_bytes(bytes(data))
    with pytest.raises(DataLossError) as info:
        ta.read_table(str(bad), SPEC)
    assert info.value.path.endswith("damaged.tfrecord") and info.value.record_index == 2


def test_bad_record_names_file_and_record(tmp_path):
    write(tmp_path / "a.tfrecord", [{"x": [1]}] * 3)
    write(tmp_path / "b.tfrecord", [{"x": [1]}, {"x": [0.5]}])
    with pytest.raises(ExampleParseError) as info:
        ta.read_table(str(tmp_path / "*.tfrecord"), {"x": tfr.FixedLen((), "int64")})
    assert info.value.path.endswith("b.tfrecord")
    assert info.value.record_index == 1 and info.value.feature == "x"


# ---- writing ---------------------------------------------------------------------------------


def test_write_table_round_trip(tmp_path):
    table = pa.table(
        {
            "i": pa.array([1, -2, 3], pa.int64()),
            "f": pa.array([0.5, 1.5, 2.5], pa.float32()),
            "s": pa.array(["a", "", "ccc"]),
            "b": pa.array([b"\x00", b"xy", b""], pa.large_binary()),
            "li": pa.array([[1], [], [2, 3]], pa.list_(pa.int64())),
            "lb": pa.array([[b"p"], [b"q", b"r"], []], pa.large_list(pa.binary())),
            "fx": pa.array([[1.0, 2.0]] * 3, pa.list_(pa.float32(), 2)),
        }
    )
    path = str(tmp_path / "w.tfrecord")
    assert ta.write_table(table, path) == 3
    spec = {
        "i": tfr.FixedLen((), "int64"),
        "f": tfr.FixedLen((), "float32"),
        "s": tfr.FixedLen((), "bytes"),
        "b": tfr.FixedLen((), "bytes"),
        "li": tfr.VarLen("int64"),
        "lb": tfr.VarLen("bytes"),
        "fx": tfr.FixedLen((2,), "float32"),
    }
    back = ta.read_table(path, spec, text=["s"])
    expected = table.cast(
        pa.schema(
            [
                ("i", pa.int64()),
                ("f", pa.float32()),
                ("s", pa.large_string()),
                ("b", pa.large_binary()),
                ("li", pa.large_list(pa.int64())),
                ("lb", pa.large_list(pa.large_binary())),
                ("fx", pa.list_(pa.float32(), 2)),
            ]
        )
    )
    assert back.equals(expected)


def test_write_table_to_writers_and_from_a_reader(tmp_path):
    table = pa.table({"x": pa.array(range(10), pa.int64())})
    out = str(tmp_path / "shards")
    with tfr.ShardedWriter(out, "data", num_shards=2) as sw:
        assert ta.write_table(table.to_reader(max_chunksize=3), sw) == 10
    got = ta.read_table(sorted(sw.shards), {"x": tfr.FixedLen((), "int64")})
    assert sorted(got.column("x").to_pylist()) == list(range(10))
    path = str(tmp_path / "plain.tfrecord")
    with tfr.TFRecordWriter(path) as w:
        ta.write_table(table.to_batches()[0], w)
    assert tfr.count_records(path) == 10


def test_write_table_refuses_what_an_example_cannot_hold(tmp_path):
    path = str(tmp_path / "x.tfrecord")
    with pytest.raises(ValueError, match="inside its lists"):
        ta.write_table(pa.table({"x": pa.array([[1, None]])}), path)
    with pytest.raises(ValueError, match="inside its lists"):  # a null inner list
        ta.write_table(
            pa.table({"x": pa.array([[[1, 2], None]], pa.list_(pa.list_(pa.int64(), 2)))}), path
        )
    with pytest.raises(ValueError, match="no Example kind"):
        ta.write_table(pa.table({"x": pa.array([[], None], pa.list_(pa.null()))}), path)
    with pytest.raises(ValueError, match="nulls must be"):
        ta.write_table(pa.table({"x": [1]}), path, nulls="zero")
    with pytest.raises(TypeError, match="lists of lists"):
        ta.write_table(pa.table({"x": pa.array([[[1]]])}), path)
    with pytest.raises(TypeError, match="no Example form"):
        ta.write_table(pa.table({"x": pa.array([{"a": 1}])}), path)
    with pytest.raises(TypeError, match="Table"):
        ta.write_table({"x": [1]}, path)


def test_write_table_float64_never_narrows_silently(tmp_path):
    """TFRecord floats are float32: a float64 value float32 cannot hold exactly is an error
    naming the column, the row and the ways out; values it holds exactly (and NaN, inf) go."""
    path = str(tmp_path / "f.tfrecord")
    exact = pa.table(
        {
            "x": pa.array([1.5, -2.0, float("nan"), float("inf")], pa.float64()),
            "l": pa.array([[0.25], [], [3.0, 4.0], None], pa.list_(pa.float64())),
        }
    )
    assert ta.write_table(exact, path) == 4
    back = ta.read_table(path, {"x": tfr.FixedLen((), "float32"), "l": tfr.VarLen("float32")})
    assert back.column("x").to_pylist()[:2] == [1.5, -2.0]
    assert back.column("l").to_pylist()[2] == [3.0, 4.0]
    with pytest.raises(
        ValueError,
        match=r"column 'x': the float64 value 0\.1 \(row 5\).*"
        r"cast the column to float32.*float64='round'",
    ):
        ta.write_table(pa.table({"x": [1.0] * 5 + [0.1]}), path, batch_size=2)
    with pytest.raises(ValueError, match=r"column 'l'.*1e\+300 \(row 1\)"):  # float32: inf
        ta.write_table(pa.table({"l": pa.array([[1.0], [2.0, 1e300]])}), path)
    with pytest.raises(ValueError, match="float64 must be"):
        ta.write_table(pa.table({"x": [1.0]}), path, float64="truncate")
    # The ways out: an explicit cast, or rounding asked for.
    assert ta.write_table(pa.table({"x": pa.array([0.1]).cast(pa.float32())}), path) == 1
    assert ta.write_table(pa.table({"x": [0.1]}), path, float64="round") == 1
    assert records_of(path) == [{"x": [np.float32(0.1)]}]
    half = pa.table({"h": pa.array(np.array([0.1], np.float16))})  # narrower: exact
    assert ta.write_table(half, path) == 1


def records_of(path):
    return [tfr.parse_example(r) for r in tfr.read_records(path)]


NULLABLE = pa.table(
    {
        "i": pa.array([1, None, 3], pa.int64()),
        "s": pa.array(["a", "b", None]),
        "l": pa.array([[1.5], None, []], pa.list_(pa.float32())),
        "b": pa.array([None, [b"x", b""], [b"y"]], pa.large_list(pa.binary())),
        "fx": pa.array([[1, 2], [3, 4], None], pa.list_(pa.int64(), 2)),
        "none": pa.array([None, None, None], pa.null()),
    }
)


def test_write_table_nulls_leave_the_feature_out(tmp_path):
    path = str(tmp_path / "n.tfrecord")
    assert ta.write_table(NULLABLE, path) == 3
    assert records_of(path) == [
        {"i": [1], "s": [b"a"], "l": [1.5], "fx": [1, 2]},
        {"s": [b"b"], "b": [b"x", b""], "fx": [3, 4]},
        {"i": [3], "l": [], "b": [b"y"]},
    ]
    back = ta.read_table(path)  # null where a record lacks the feature, [] where it is empty
    assert back.column("l").to_pylist() == [[1.5], None, []]
    assert back.column("b").to_pylist() == [None, [b"x", b""], [b"y"]]
    assert back.column("i").to_pylist() == [[1], None, [3]]


def test_write_table_nulls_as_empty_lists_as_ray_writes_them(tmp_path):
    path = str(tmp_path / "e.tfrecord")
    ta.write_table(NULLABLE.drop_columns(["none"]), path, nulls="empty")
    assert records_of(path) == [
        {"i": [1], "s": [b"a"], "l": [1.5], "b": [], "fx": [1, 2]},
        {"i": [], "s": [b"b"], "l": [], "b": [b"x", b""], "fx": [3, 4]},
        {"i": [3], "s": [], "l": [], "b": [b"y"], "fx": []},
    ]
    with pytest.raises(ValueError, match="no Example kind"):
        ta.write_table(NULLABLE.select(["none"]), path, nulls="empty")


def test_read_table_write_table_reproduces_the_records(tmp_path):
    """A spec-free table of a file with missing features and empty lists writes the same
    Examples back."""
    features = [
        {"a": [1, 2], "b": [b"x"]},
        {"a": tfr.Int64s([]), "c": [0.5]},
        {"b": [b"y"], "c": tfr.Floats([])},
        {},
    ]
    path = write(tmp_path / "in.tfrecord", features)
    out = str(tmp_path / "out.tfrecord")
    ta.write_table(ta.read_table(path), out)
    assert records_of(out) == records_of(path)
    assert ta.read_table(out).equals(ta.read_table(path))


def test_write_table_takes_dictionaries_views_and_nested_fixed_lists(tmp_path):
    path = str(tmp_path / "d.tfrecord")
    table = pa.table(
        {
            "cat": pa.array(["u", "v", "u"]).dictionary_encode(),
            "view": pa.array(["p", "qq", ""], pa.string_view()),
            "boxes": pa.array(
                [[[1, 2]], [], [[3, 4], [5, 6]]], pa.large_list(pa.list_(pa.int64(), 2))
            ),
        }
    )
    ta.write_table(table, path)
    assert records_of(path) == [
        {"cat": [b"u"], "view": [b"p"], "boxes": [1, 2]},
        {"cat": [b"v"], "view": [b"qq"], "boxes": []},
        {"cat": [b"u"], "view": [b""], "boxes": [3, 4, 5, 6]},
    ]


def test_sliced_arrow_input(tmp_path):
    table = pa.table(
        {"s": pa.array(["aa", "b", "cc", "d"]), "l": pa.array([[1], [2, 3], [4], []])}
    ).slice(1, 2)
    path = str(tmp_path / "slice.tfrecord")
    ta.write_table(table, path)
    back = ta.read_table(path, {"s": tfr.FixedLen((), "bytes"), "l": tfr.VarLen("int64")})
    assert back.to_pylist() == [{"s": b"b", "l": [2, 3]}, {"s": b"cc", "l": [4]}]


ROWS = st.integers(0, 40)


@st.composite
def tables(draw):
    n = draw(ROWS)
    ints = draw(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=n, max_size=n))
    blobs = draw(st.lists(st.binary(max_size=300), min_size=n, max_size=n))
    lists = draw(
        st.lists(st.lists(st.floats(width=32, allow_nan=False), max_size=5), min_size=n, max_size=n)
    )
    fixed = draw(
        st.lists(st.lists(st.integers(-5, 5), min_size=3, max_size=3), min_size=n, max_size=n)
    )
    return pa.table(
        {
            "i": pa.array(ints, pa.int64()),
            "b": pa.array(blobs, pa.large_binary()),
            "l": pa.array(lists, pa.large_list(pa.float32())),
            "k": pa.array(fixed, pa.list_(pa.int64(), 3)),
        }
    )


@settings(max_examples=40, deadline=None)
@given(table=tables(), batch_size=st.integers(1, 50))
def test_round_trip_property(tmp_path_factory, table, batch_size):
    path = str(tmp_path_factory.mktemp("rt") / "p.tfrecord")
    ta.write_table(table, path, batch_size=batch_size)
    spec = {
        "i": tfr.FixedLen((), "int64"),
        "b": tfr.FixedLen((), "bytes"),
        "l": tfr.VarLen("float32"),
        "k": tfr.FixedLen((3,), "int64"),
    }
    back = ta.read_table(path, spec, batch_size=batch_size)
    assert back.num_rows == table.num_rows
    for name in ("i", "b", "l", "k"):
        assert back.column(name).to_pylist() == table.column(name).to_pylist()


@st.composite
def nullable_tables(draw):
    """Spec-free read_table's own types: large_list of int64 / float32 / large_binary, null
    where a record lacks the feature; each column present in some record."""
    n = draw(st.integers(1, 30))
    kinds = {
        "ints": (st.integers(-(2**63), 2**63 - 1), pa.int64()),
        "floats": (st.floats(width=32, allow_nan=False), pa.float32()),
        "blobs": (st.binary(max_size=50), pa.large_binary()),
    }
    columns = {}
    for name, (values, type_) in kinds.items():
        rows = draw(st.lists(st.none() | st.lists(values, max_size=4), min_size=n, max_size=n))
        if all(r is None for r in rows):
            rows[draw(st.integers(0, n - 1))] = []
        columns[name] = pa.array(rows, pa.large_list(type_))
    return pa.table(columns)


@settings(max_examples=40, deadline=None)
@given(table=nullable_tables(), batch_size=st.integers(1, 40))
def test_round_trip_with_nulls_property(tmp_path_factory, table, batch_size):
    path = str(tmp_path_factory.mktemp("rtn") / "p.tfrecord")
    ta.write_table(table, path, batch_size=batch_size)
    back = ta.read_table(path, batch_size=batch_size)
    assert back.equals(table.select(sorted(table.column_names)))


# ---- consumers -------------------------------------------------------------------------------


def test_polars(records):
    pl = pytest.importorskip("polars")
    frame = pl.from_arrow(ta.read_table(records, SPEC))
    assert frame["label"].to_list() == [3, 4, 5]
    assert frame["tags"].to_list() == [[b"x", b"y"], [b"z"], None]


def test_duckdb(records):
    duckdb = pytest.importorskip("duckdb")
    examples = ta.read_table(records, SPEC)  # noqa: F841 - DuckDB finds it by name
    con = duckdb.connect()
    rows = con.execute(
        "SELECT label, len(ids) AS n FROM examples WHERE score > 1 ORDER BY label"
    ).fetchall()
    assert rows == [(4, 0), (5, None)]


def test_hugging_face_datasets(records):
    datasets = pytest.importorskip(
        "datasets", reason="optional peer `datasets` not installed (CI's peers step runs this)"
    )
    ds = datasets.Dataset(ta.read_table(records, SPEC, text=["name"]))
    assert len(ds) == 3
    assert ds[1]["name"] == "bb" and ds[0]["ids"] == [1, 2, 3]
    assert math.isclose(ds[2]["score"], 2.5)


def test_iter_batches_scalars_hold_for_later_batches(tmp_path):
    path = write(tmp_path / "s.tfrecord", [{"x": [1]}, {"x": [2]}, {}, {"x": [3, 4]}])
    reader = ta.iter_batches(path, scalars=True, batch_size=2)
    assert reader.schema.field("x").type == pa.int64()
    assert reader.read_next_batch().column(0).to_pylist() == [1, 2]
    with pytest.raises(ExampleParseError) as info:
        reader.read_next_batch()
    assert info.value.record_index == 3 and info.value.feature == "x"
    assert info.value.path.endswith("s.tfrecord")


def test_names_only_spec_learns_kinds_from_every_batch(tmp_path):
    path = write(tmp_path / "late.tfrecord", [{"a": [1]}] * 3 + [{"a": [2], "late": [7, 8]}])
    table = ta.read_table(path, ["a", "late"], batch_size=2)
    assert table.schema.field("late").type == pa.large_list(pa.int64())
    assert table.column("late").to_pylist() == [None, None, None, [7, 8]]
