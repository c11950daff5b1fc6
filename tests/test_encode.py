"""tf.train.Example encoding: encode_example / encode_examples against protobuf's parser and
serializer (tfrec_fast.proto; TensorFlow's tf.train.Example too when it is installed)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tfrec_fast
from tfrec_fast import proto
from tfrec_fast.encode import Bytes, Floats, Int64s, Partial, encode_example, encode_examples

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def parse(data) -> dict:
    return proto.example_to_dict(bytes(data))


def f32(x: float) -> float:
    """x rounded to float32 (inf beyond its range), as protobuf stores a float field."""
    with np.errstate(over="ignore"):
        return float(np.float32(x))


def f32_bits(x: float) -> bytes:
    with np.errstate(over="ignore"):
        return np.float32(x).tobytes()


def proto_example(features: dict, cls=proto):
    """The protobuf Example for `features` in our value conventions, built in insertion order."""
    ex = cls.Example()
    ex.features.SetInParent()  # an empty Example still carries its (empty) Features, as TF builds it
    for name, value in features.items():
        feat = ex.features.feature[name]
        kind, values = expected_values(value)
        if kind == "int64":
            feat.int64_list.value.extend(values)
        elif kind == "float":
            feat.float_list.value.extend(values)
        else:
            feat.bytes_list.value.extend(values)
    return ex


def expected_values(value):
    """(kind, python values) that `value` encodes to (the test's own statement of the rules)."""
    if isinstance(value, (Int64s, Floats, Bytes)):
        kind = {Int64s: "int64", Floats: "float", Bytes: "bytes"}[type(value)]
        vals = value.values if isinstance(value.values, (list, tuple)) else [value.values]
        conv = {
            "int64": int,
            "float": float,
            "bytes": lambda v: v.encode() if isinstance(v, str) else bytes(v),
        }
        return kind, [conv[kind](v) for v in vals]
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "biu":
            return "int64", [int(v) for v in value.ravel()]
        if value.dtype.kind == "f":
            with np.errstate(over="ignore"):
                return "float", [float(v) for v in value.astype(np.float32).ravel()]
        return "bytes", [
            v.encode() if isinstance(v, str) else bytes(v) for v in value.ravel().tolist()
        ]
    vals = list(value) if isinstance(value, (list, tuple)) else [value]
    if all(isinstance(v, (bool, int)) for v in vals):
        return "int64", [int(v) for v in vals]
    if all(isinstance(v, (bool, int, float)) for v in vals):
        return "float", [float(v) for v in vals]
    return "bytes", [v.encode() if isinstance(v, str) else bytes(v) for v in vals]


def expected_dict(features: dict) -> dict:
    out = {}
    for name, value in features.items():
        kind, vals = expected_values(value)
        out[name] = [f32(v) for v in vals] if kind == "float" else vals
    return out


def same(a: dict, b: dict) -> bool:
    """Equal with NaN == NaN (float bits compared through float32)."""
    if a.keys() != b.keys():
        return False
    for k in a:
        x, y = a[k], b[k]
        if len(x) != len(y):
            return False
        for u, v in zip(x, y):
            if isinstance(u, float) or isinstance(v, float):
                if f32_bits(u) != f32_bits(v):
                    return False
            elif u != v:
                return False
    return True


# ---- strategies ----------------------------------------------------------------------------

int64s = st.integers(INT64_MIN, INT64_MAX)
floats = st.floats(allow_nan=True, allow_infinity=True, width=64)
byte_strings = st.binary(max_size=40)
texts = st.text(max_size=12)

values = st.one_of(
    int64s,
    st.booleans(),
    floats,
    byte_strings,
    texts,
    st.lists(int64s, min_size=1, max_size=20),
    st.lists(floats, min_size=1, max_size=20),
    st.lists(st.one_of(byte_strings, texts), min_size=1, max_size=8),
    st.lists(int64s, max_size=10).map(Int64s),
    st.lists(floats, max_size=10).map(Floats),
    st.lists(byte_strings, max_size=5).map(Bytes),
    st.lists(int64s, min_size=1, max_size=20).map(lambda v: np.array(v, dtype=np.int64)),
    st.lists(st.floats(width=32), min_size=1, max_size=20).map(
        lambda v: np.array(v, dtype=np.float32)
    ),
)
feature_dicts = st.dictionaries(st.text(max_size=10), values, max_size=8)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(feature_dicts)
def test_round_trip_through_protobuf(features):
    assert same(parse(encode_example(features)), expected_dict(features))


def prefix_free(keys):
    return [k for k in keys if not any(o != k and o.startswith(k) for o in keys)]


@settings(max_examples=300, deadline=None)
@given(feature_dicts)
def test_bytes_identical_to_deterministic_serialization(features):
    # deterministic=True sorts the keys; prefix-free key sets sort the same in every runtime.
    keys = sorted(prefix_free(list(features)))
    ordered = {k: features[k] for k in keys}
    assert encode_example(ordered) == proto_example(ordered).SerializeToString(deterministic=True)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=10), values)
def test_single_feature_bytes_identical(name, value):
    features = {name: value}
    assert encode_example(features) == proto_example(features).SerializeToString()


def test_insertion_order_matches_pure_python_protobuf():
    """The pure-Python runtime writes map entries in insertion order: identical bytes."""
    script = textwrap.dedent("""
        import sys
        from google.protobuf.internal import api_implementation
        assert api_implementation.Type() == "python", api_implementation.Type()
        from tfrec_fast import proto
        from tfrec_fast.encode import encode_example
        feats = {"zeta": 1, "alpha": [1.5, -0.0], "mid": b"x", "a": "h\\u00e9", "ab": [b"", b"q"]}
        ex = proto.Example()
        ex.features.feature["zeta"].int64_list.value.append(1)
        ex.features.feature["alpha"].float_list.value.extend([1.5, -0.0])
        ex.features.feature["mid"].bytes_list.value.append(b"x")
        ex.features.feature["a"].bytes_list.value.append("h\\u00e9".encode())
        ex.features.feature["ab"].bytes_list.value.extend([b"", b"q"])
        assert encode_example(feats) == ex.SerializeToString(), (encode_example(feats), ex.SerializeToString())
        print("ok")
    """)
    env = dict(
        os.environ,
        PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION="python",
        PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
    )
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


# ---- value kinds ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype", ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool"]
)
def test_numpy_integer_dtypes(dtype):
    info = np.iinfo(dtype) if dtype != "bool" else None
    vals = (
        [0, 1] if info is None else [info.min, 0, 1, info.max if dtype != "uint64" else INT64_MAX]
    )
    arr = np.array(vals, dtype=dtype)
    assert parse(encode_example({"x": arr})) == {"x": [int(v) for v in vals]}
    assert parse(encode_example({"x": arr[1]})) == {"x": [int(vals[1])]}  # numpy scalar


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "longdouble"])
def test_numpy_float_dtypes(dtype):
    big = 6e4 if dtype == "float16" else 1e30
    arr = np.array([0.1, -2.5, big, np.inf, -0.0], dtype=dtype)
    got = parse(encode_example({"x": arr}))["x"]
    assert [f32_bits(v) for v in got] == [v.tobytes() for v in arr.astype(np.float32)]
    assert parse(encode_example({"x": arr[0]}))["x"] == [float(np.float32(arr[0]))]


def test_float32_bits_preserved():
    bits = np.array(
        [0x7FC00001, 0xFFA00000, 0x7F800000, 0xFF800000, 0x80000000, 0x00000001], dtype=np.uint32
    )
    arr = bits.view(np.float32)
    data = encode_example({"x": arr})
    assert data.endswith(bits.astype("<u4").tobytes())  # the signaling NaN 0xFFA00000 too
    # protobuf stores Python floats (doubles), which quiets a signaling NaN: compare the rest.
    quiet = np.delete(arr, 1)
    assert encode_example({"x": quiet}) == proto_example({"x": quiet}).SerializeToString()


def test_python_floats_rounded_like_protobuf():
    vals = [0.1, 1e40, -1e40, 3.4028235677973366e38, 1e-46, float("nan"), -0.0, 2.0**-149]
    assert encode_example({"x": vals}) == proto_example({"x": vals}).SerializeToString()
    assert (
        encode_example({"x": Floats([1, 2**60 + 1])})
        == proto_example({"x": Floats([1, 2**60 + 1])}).SerializeToString()
    )


def test_int64_extremes_and_bool():
    vals = [INT64_MIN, -1, 0, 1, 127, 128, 2**31, INT64_MAX]
    data = encode_example({"x": vals, "b": True, "c": [False, True]})
    assert parse(data) == {"x": vals, "b": [1], "c": [0, 1]}
    assert encode_example({"x": vals}) == proto_example({"x": vals}).SerializeToString()


def test_bytes_like_values():
    feats = {
        "b": b"\x00\xff",
        "s": "h\u00e9\U0001f600",
        "ba": bytearray(b"xy"),
        "mv": memoryview(b"abcdef")[1:3],
        "l": ["a", b"b", bytearray(b"c")],
        "S": np.array([b"ab", b"c", b""]),
        "U": np.array([["x", "yz"]]),
        "O": np.array([b"p", "q"], dtype=object),
        "npb": np.bytes_(b"k"),
        "nps": np.str_("m"),
    }
    assert parse(encode_example(feats)) == {
        "b": [b"\x00\xff"],
        "s": ["h\u00e9\U0001f600".encode()],
        "ba": [b"xy"],
        "mv": [b"bc"],
        "l": [b"a", b"b", b"c"],
        "S": [b"ab", b"c", b""],
        "U": [b"x", b"yz"],
        "O": [b"p", b"q"],
        "npb": [b"k"],
        "nps": [b"m"],
    }


def test_arrays_any_shape_and_non_contiguous():
    a = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    f = np.arange(12, dtype=np.float64).reshape(3, 4).T  # Fortran order view
    b = np.arange(10, dtype=">i8")[::3]  # big-endian, strided
    got = parse(encode_example({"a": a, "f": f, "b": b, "z": np.array(5), "e": np.zeros((2, 0))}))
    assert got == {
        "a": list(range(24)),
        "f": [float(v) for v in f.ravel()],
        "b": [0, 3, 6, 9],
        "z": [5],
        "e": [],
    }


def test_empty_typed_lists():
    data = encode_example(
        {
            "i": Int64s([]),
            "f": Floats(),
            "b": Bytes([]),
            "ei": np.array([], dtype=np.int64),
            "ef": np.array([], np.float32),
        }
    )
    ex = proto.Example.FromString(data)
    assert ex.features.feature["i"].WhichOneof("kind") == "int64_list"
    assert ex.features.feature["f"].WhichOneof("kind") == "float_list"
    assert ex.features.feature["b"].WhichOneof("kind") == "bytes_list"
    assert ex.features.feature["ef"].WhichOneof("kind") == "float_list"
    for name in ("i", "f", "b", "ei", "ef"):
        assert parse(data)[name] == []
    assert (
        data == proto_example({"i": Int64s([]), "f": Floats(), "b": Bytes([])}).SerializeToString()
        or len(ex.features.feature) == 5
    )


def test_forced_kinds():
    got = parse(
        encode_example(
            {
                "f": Floats([1, 2]),
                "fa": Floats(np.arange(3)),
                "i": Int64s(np.int8(3)),
                "b": Bytes("x"),
                "raw": Bytes(np.arange(4, dtype=np.uint16)),
            }
        )
    )
    assert got == {
        "f": [1.0, 2.0],
        "fa": [0.0, 1.0, 2.0],
        "i": [3],
        "b": [b"x"],
        "raw": [np.arange(4, dtype=np.uint16).tobytes()],
    }


def test_ints_mixed_with_floats_make_a_float_list():
    assert parse(encode_example({"x": [0, 0.5, True]})) == {"x": [0.0, 0.5, 1.0]}


def test_feature_message_embedded_as_is():
    feat = proto.Feature(float_list=proto.FloatList(value=[1.5, 2.5]))
    empty = proto.Feature()
    data = encode_example({"a": 1, "m": feat, "e": empty})
    ex = proto.Example()
    ex.features.feature["a"].int64_list.value.append(1)
    assert parse(data) == {"a": [1], "m": [1.5, 2.5], "e": []}
    assert proto.Example.FromString(data).features.feature["m"] == feat
    one = encode_example({"m": feat})
    ref = proto.Example()
    ref.features.feature["m"].CopyFrom(feat)
    assert one == ref.SerializeToString()


def test_empty_example_and_names():
    assert encode_example({}) == proto.Example(features=proto.Features()).SerializeToString()
    assert parse(encode_example({"": 1, "\u00e9\x00": 2})) == {"": [1], "\u00e9\x00": [2]}


def test_mapping_types():
    from collections import OrderedDict
    from types import MappingProxyType

    d = OrderedDict([("b", 1), ("a", 2)])
    assert encode_example(d) == encode_example(MappingProxyType(dict(d))) == encode_example(dict(d))


# ---- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, exc, words",
    [
        (None, TypeError, "None"),
        ({"a": 1}, TypeError, "dict"),
        ({1, 2}, TypeError, "set"),
        ([1, b"x"], TypeError, "mixed"),
        ([b"x", 1.5], TypeError, "mixed"),
        ([[1, 2]], TypeError, "nested"),
        ([np.array([1])], TypeError, "nested"),
        ([None], TypeError, "element 0"),
        ([], ValueError, "Int64s"),
        ((), ValueError, "Int64s"),
        (2**63, OverflowError, "int64"),
        (-(2**63) - 1, OverflowError, "int64"),
        ([1, 2**64], OverflowError, "int64"),
        (np.array([2**63], dtype=np.uint64), OverflowError, "int64"),
        (np.uint64(2**64 - 1), OverflowError, "int64"),
        (Int64s([1.5]), TypeError, "int64"),
        (Int64s(np.float32([1.5])), TypeError, "int64"),
        (Floats([b"x"]), TypeError, "float"),
        (Bytes([1]), TypeError, "bytes"),
        (np.array([1 + 2j]), TypeError, "dtype"),
        (np.array(["2020-01-01"], dtype="datetime64[D]"), TypeError, "dtype"),
        (object(), TypeError, "object"),
    ],
)
def test_bad_values_name_the_feature(value, exc, words):
    with pytest.raises(exc) as info:
        encode_example({"ok": 1, "my_feat": value})
    assert "my_feat" in str(info.value) and words in str(info.value)


def test_bad_containers():
    with pytest.raises(TypeError, match="mapping"):
        encode_example([("a", 1)])
    with pytest.raises(TypeError, match="str"):
        encode_example({1: 1})


# ---- columnar ------------------------------------------------------------------------------


class RaggedLike:
    def __init__(self, values, row_splits):
        self.values, self.row_splits = values, np.asarray(row_splits, dtype=np.int64)


class BytesColumnLike:
    def __init__(self, values, starts, ends, row_splits=None):
        self.values, self.starts, self.ends, self.row_splits = values, starts, ends, row_splits


def rows_of(columns, n, empty_kinds=None):
    """Per-row feature dicts that encode_examples(columns) must match, row by row. An empty plain
    row takes its column's kind: empty_kinds[name] (default Int64s)."""
    out = []
    for i in range(n):
        row = {}
        for name, col in columns.items():
            forced = None
            if isinstance(col, (Int64s, Floats, Bytes)):
                forced, col = type(col), col.values
            if isinstance(col, BytesColumnLike):
                data = col.values.tobytes()
                vals = [data[s:e] for s, e in zip(col.starts, col.ends)]
                rs = col.row_splits
                v = vals[rs[i] : rs[i + 1]] if rs is not None else vals[i]
                row[name] = Bytes(v if isinstance(v, list) else [v])
                continue
            if isinstance(col, RaggedLike):
                v = col.values[col.row_splits[i] : col.row_splits[i + 1]]
            else:
                v = col[i]
            if isinstance(v, list) and not v and forced is None:
                v = (empty_kinds or {}).get(name, Int64s)()
            if forced is Bytes and isinstance(v, np.ndarray) and v.dtype.kind in "biuf":
                v = v.tobytes()
            row[name] = forced(v) if forced else v
        out.append(row)
    return out


def check_columnar(columns, n, empty_kinds=None):
    batch = encode_examples(columns, n if not columns else None)
    assert len(batch) == n
    for i, row in enumerate(rows_of(columns, n, empty_kinds)):
        assert bytes(batch[i]) == encode_example(row), i
    offs = np.asarray(batch.offsets)
    assert offs[0] == 0 and offs[-1] == batch.nbytes
    assert list(batch.positions) == [int(o) + 16 * i for i, o in enumerate(offs[:-1])]
    return batch


def test_columnar_matches_per_row():
    rng = np.random.default_rng(0)
    n = 50
    lens = rng.integers(0, 5, n)
    splits = np.concatenate([[0], np.cumsum(lens)])
    blob = rng.integers(0, 256, 300, dtype=np.uint8)
    starts = np.sort(rng.integers(0, 300, n)).astype(np.int64)
    columns = {
        "index": np.arange(n, dtype=np.int64),
        "label": rng.integers(0, 10, n).astype(np.uint8),
        "image": rng.random((n, 4, 3)).astype(np.float32),
        "f64": rng.random((n, 2)),
        "strided": np.arange(3 * n, dtype=np.int64).reshape(n, 3)[:, ::2],
        "raw": [bytes(rng.integers(0, 256, 7, dtype=np.uint8)) for _ in range(n)],
        "multi": [[b"a"] * int(k) for k in lens],
        "mixed_rows": [i if i % 3 else [] for i in range(n)],
        "ragged": RaggedLike(rng.random(int(splits[-1])).astype(np.float32), splits),
        "ragged_i": RaggedLike(np.arange(int(splits[-1]), dtype=np.int16), splits),
        "ragged_b": RaggedLike([b"x%d" % k for k in range(int(splits[-1]))], splits),
        "sarr": np.array([b"s%d" % i for i in range(n)]),
        "uarr": np.array(["\u00e9%d" % i for i in range(n)]),
        "obj": np.array([b"o" * (i % 3) for i in range(n)], dtype=object),
        "bcol": BytesColumnLike(blob, starts, np.minimum(starts + 5, 300)),
        "bcol_r": BytesColumnLike(
            blob,
            np.zeros(int(splits[-1]), np.int64),
            np.arange(int(splits[-1]), dtype=np.int64) % 300,
            splits,
        ),
        "forced_f": Floats(np.arange(n)),
        "forced_raw": Bytes(rng.integers(0, 256, (n, 6), dtype=np.uint8)),
        "empty_i": Int64s([[] for _ in range(n)]),
        "feat": [proto.Feature(int64_list=proto.Int64List(value=[i])) for i in range(n)],
    }
    check_columnar(columns, n, {"multi": Bytes, "ragged_b": Bytes})


def test_columnar_with_decoder_types():
    example = pytest.importorskip("tfrec_fast.example")
    rag = example.Ragged(
        np.array([1, 2, 3], dtype=np.int64), np.array([0, 2, 2, 3], dtype=np.int64)
    )
    batch = encode_examples({"r": rag})
    assert [parse(r) for r in batch] == [{"r": [1, 2]}, {"r": []}, {"r": [3]}]


def test_columnar_edge_cases():
    assert len(encode_examples({}, 3)) == 3
    assert [bytes(r) for r in encode_examples({}, 2)] == [encode_example({})] * 2
    assert len(encode_examples({"x": np.zeros((0, 3))})) == 0
    assert len(encode_examples({"x": []})) == 0
    batch = encode_examples({"x": np.zeros((2, 0), np.int64)})
    assert [parse(r) for r in batch] == [{"x": []}, {"x": []}]


@pytest.mark.parametrize(
    "columns, n, exc, words",
    [
        ({"a": np.zeros(3), "b": [1, 2]}, None, ValueError, "rows"),
        ({"a": np.zeros(3)}, 4, ValueError, "rows"),
        ({}, None, ValueError, "n"),
        ({"a": np.float64(1.0)}, None, TypeError, "column"),
        ({"a": np.array(1.0)}, None, ValueError, "first dimension"),
        ({"a": [[], []]}, None, ValueError, "kind"),
        ({"a": [1, None]}, None, TypeError, "row 1"),
        ({"a": [1, [b"x", 2]]}, None, TypeError, "row 1"),
        ({"a": RaggedLike(np.zeros(2), [0, 3])}, None, ValueError, "a"),
        ({"a": RaggedLike(np.zeros(2), [1, 0])}, None, ValueError, "a"),
        ({"a": {"x": 1}}, None, TypeError, "column"),
        ({"a": 5}, None, TypeError, "column"),
    ],
)
def test_columnar_errors(columns, n, exc, words):
    with pytest.raises(exc, match=words):
        encode_examples(columns, n)


def test_columnar_mixed_row_kinds():
    batch = encode_examples({"x": [1, 2.5, b"z", Int64s()]})
    assert [parse(r) for r in batch] == [{"x": [1]}, {"x": [2.5]}, {"x": [b"z"]}, {"x": []}]


def test_partial_columns_leave_the_feature_out():
    present = np.array([True, False, True, False])
    columns = {
        "n": Partial(np.array([1, 2, 3, 4]), present),
        "f": Partial(Floats([[0.5], [9.0], [], [1.0]]), present),
        "r": Partial(RaggedLike(np.array([7, 8, 9], np.int64), [0, 2, 2, 2, 3]), present),
        "b": Partial(
            BytesColumnLike(
                np.frombuffer(b"abcd", np.uint8), np.array([0, 1, 2, 3]), np.array([1, 2, 3, 4])
            ),
            present,
        ),
        "all": [b"x", b"y", b"z", b"w"],
    }
    got = [bytes(r) for r in encode_examples(columns)]
    expected = [
        encode_example({"n": 1, "f": [0.5], "r": [7, 8], "b": b"a", "all": b"x"}),
        encode_example({"all": b"y"}),
        encode_example({"n": 3, "f": Floats([]), "r": Int64s([]), "b": b"c", "all": b"z"}),
        encode_example({"all": b"w"}),
    ]
    assert got == expected  # an empty list stays an empty list; a missing row is no feature
    assert parse(got[1]) == {"all": [b"y"]}


def test_partial_rows_left_out_are_not_read():
    """The bounds of a row left out may be anything: they are neither checked nor read."""
    bad = RaggedLike(np.array([5], np.int64), [0, 1, 0])  # row 1 would end before it begins
    with pytest.raises(ValueError, match="row 1"):
        encode_examples({"r": bad})
    batch = encode_examples({"r": Partial(bad, [1, 0])})
    assert [parse(r) for r in batch] == [{"r": [5]}, {}]


def test_partial_nests_with_kind_wrappers_and_checks_its_length():
    for column in (
        Int64s(Partial([[], [1]], [True, True])),
        Partial(Int64s([[], [1]]), np.array([1, 1], np.uint8)),
    ):
        assert [parse(r) for r in encode_examples({"x": column})] == [{"x": []}, {"x": [1]}]
    with pytest.raises(ValueError, match="one `present` flag per row"):
        encode_examples({"x": Partial(np.arange(3), [True, False])})


def test_partial_context_of_sequence_examples():
    batch = tfrec_fast.encode_sequence_examples(
        {"id": Partial(np.array([1, 2]), [False, True])}, {"s": [[[1]], []]}
    )
    context, steps = tfrec_fast.parse_sequence_examples(
        batch, ["id"], {"s": tfrec_fast.VarLenSequence("int64")}
    )
    assert context["id"].to_list() == [[], [2]] and steps["s"].row_lengths.tolist() == [1, 0]
    assert proto.SequenceExample.FromString(bytes(batch[0])).context.feature.keys() == set()
    with pytest.raises(ValueError, match="step cannot be left out"):
        tfrec_fast.encode_sequence_examples(
            {},
            {
                "s": Int64s(
                    tfrec_fast.Ragged(Partial(np.array([1, 2]), [True, False]), np.array([0, 2]))
                )
            },
        )


# ---- writer ---------------------------------------------------------------------------------


def test_writer_write_example_round_trip(tmp_path):
    path = str(tmp_path / "ex.tfrecord")
    rows = [
        {
            "index": i,
            "label": i % 10,
            "image_raw": bytes([i % 256]) * 784,
            "bbox": np.float32([0.1 * i, 0.5]),
        }
        for i in range(20)
    ]
    with tfrec_fast.TFRecordWriter(path, compression="gzip") as w:
        for r in rows[:10]:
            w.write_example(r)
        w.write_examples({k: [r[k] for r in rows[10:]] for k in rows[0]})
    got = [parse(r) for r in tfrec_fast.read_records(path, compression="gzip")]
    assert len(got) == 20
    for g, r in zip(got, rows):
        assert g == {
            "index": [r["index"]],
            "label": [r["label"]],
            "image_raw": [r["image_raw"]],
            "bbox": [float(v) for v in r["bbox"]],
        }


# ---- TensorFlow (when installed) ------------------------------------------------------------


def test_tensorflow_parses_and_matches():
    tf = pytest.importorskip("tensorflow")
    feats = {"a": [1, INT64_MIN], "b": np.float32([1.5, np.nan]), "c": [b"x", "y"], "e": Floats()}
    data = encode_example(feats)
    ex = tf.train.Example.FromString(data)
    assert list(ex.features.feature["a"].int64_list.value) == [1, INT64_MIN]
    assert list(ex.features.feature["c"].bytes_list.value) == [b"x", b"y"]
    assert ex.features.feature["e"].WhichOneof("kind") == "float_list"
    ordered = dict(sorted(feats.items()))
    assert encode_example(ordered) == proto_example(ordered, tf.train).SerializeToString(
        deterministic=True
    )
    parsed = tf.io.parse_single_example(
        data, {"a": tf.io.FixedLenFeature([2], tf.int64), "c": tf.io.VarLenFeature(tf.string)}
    )
    assert parsed["a"].numpy().tolist() == [1, INT64_MIN]
