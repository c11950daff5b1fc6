"""Tests of the tf.train.Example decoder: tfrec_fast.example (parse_examples, parse_example,
read_examples, FixedLen / VarLen / Ragged / BytesColumn) over src/cpp/core/example_decoder.cc.

Oracles: the conformance corpus' .expected.json sidecars (written by TensorFlow + protobuf), a tiny
hand-written protobuf wire encoder (below) for the malformed / unusual wire shapes, and protobuf
itself (tfrec_fast.proto) for whole-file comparisons.
"""

from __future__ import annotations

import base64
import gc
import hashlib
import json
import math
import struct

import _corpus
import numpy as np
import pytest

import tfrec_fast
from tfrec_fast import RecordBatch, TFRecordWriter, read_records
from tfrec_fast._core import Kind
from tfrec_fast.errors import ExampleParseError
from tfrec_fast.example import (
    BytesColumn,
    FixedLen,
    Ragged,
    VarLen,
    normalize_spec,
    parse_example,
    parse_examples,
    read_examples,
)

EXAMPLE_DIR = _corpus.corpus_dir() / "example"
EXAMPLE_FILES = (
    sorted(p.name for p in EXAMPLE_DIR.glob("*.tfrecord")) if EXAMPLE_DIR.is_dir() else []
)
KIND_TO_DTYPE = {"int64_list": "int64", "float_list": "float32", "bytes_list": "bytes"}


# ==== a tiny protobuf wire encoder ===============================================================


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative int64 -> two's complement, 10 bytes
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def tag(field: int, wire_type: int) -> bytes:
    return varint((field << 3) | wire_type)


def ld(field: int, payload: bytes) -> bytes:
    return tag(field, 2) + varint(len(payload)) + payload


def vi(field: int, value: int) -> bytes:
    return tag(field, 0) + varint(value)


def f32(field: int, bits: int) -> bytes:
    return tag(field, 5) + struct.pack("<I", bits)


def f64(field: int, bits: int) -> bytes:
    return tag(field, 1) + struct.pack("<Q", bits)


# Unknown fields of every wire type (7 varint, 9 fixed64, 11 length-delimited, 13 fixed32).
UNKNOWN = (
    vi(7, 300) + f64(9, 0x0123456789ABCDEF) + ld(11, b"\x08\x01junk\xff") + f32(13, 0xDEADBEEF)
)


def int64_list(values, packed=True, extra=b"") -> bytes:
    if packed:
        return ld(1, b"".join(varint(v) for v in values)) + extra if values else extra
    return b"".join(vi(1, v) for v in values) + extra


def float_list(values, packed=True, extra=b"") -> bytes:
    raw = [struct.pack("<f", v) for v in values]
    if packed:
        return ld(1, b"".join(raw)) + extra if values else extra
    return b"".join(tag(1, 5) + r for r in raw) + extra


def bytes_list(values, extra=b"") -> bytes:
    return b"".join(ld(1, v) for v in values) + extra


def feature(kind: str, values, packed=True, extra=b"", list_extra=b"") -> bytes:
    if kind == "int64":
        return ld(3, int64_list(values, packed, list_extra)) + extra
    if kind == "float32":
        return ld(2, float_list(values, packed, list_extra)) + extra
    if kind == "bytes":
        return ld(1, bytes_list(values, list_extra)) + extra
    raise ValueError(kind)


def entry(key, feature_bytes: bytes, extra=b"") -> bytes:
    key = key.encode() if isinstance(key, str) else key
    return ld(1, ld(1, key) + ld(2, feature_bytes) + extra)


def features_msg(*entries, extra=b"") -> bytes:
    return b"".join(entries) + extra


def example(*entries, extra=b"") -> bytes:
    return ld(1, features_msg(*entries)) + extra


def ex(**feats) -> bytes:
    """example(name=(kind, values), ...)"""
    return example(*(entry(k, feature(kind, v)) for k, (kind, v) in feats.items()))


# ==== corpus helpers =============================================================================


def load_expected(name):
    with open(EXAMPLE_DIR / (name + ".expected.json"), encoding="utf-8") as f:
        return json.load(f)


def file_records(name):
    return list(read_records(str(EXAMPLE_DIR / name), copy=True))


def sha256_le(kind, values) -> str:
    h = hashlib.sha256()
    if kind == "int64_list":
        h.update(np.asarray(values, "<i8").tobytes())
    elif kind == "float_list":
        h.update(np.asarray(values, np.float32).view("<u4").tobytes())
    else:
        for v in values:
            h.update(struct.pack("<Q", len(v)) + bytes(v))
    return h.hexdigest()


def check_values(kind, got, exp, where):
    """got: numpy array (int64/float32) or list of bytes; exp: the sidecar's feature dict."""
    if exp.get("summarized"):
        assert len(got) == exp["count"], where
        if kind == "float_list":
            bits = np.asarray(got, np.float32).view(np.uint32)
            assert [f"{b:08x}" for b in bits[:8].tolist()] == exp["head_bits"], where
            assert [f"{b:08x}" for b in bits[-8:].tolist()] == exp["tail_bits"], where
        elif kind == "int64_list":
            assert [str(v) for v in got[:8].tolist()] == exp["head"], where
            assert [str(v) for v in got[-8:].tolist()] == exp["tail"], where
        else:
            assert [base64.b64encode(bytes(v)).decode() for v in got[:8]] == exp["head"], where
        assert sha256_le(kind, got) == exp["sha256_le"], where
        return
    if kind == "int64_list":
        assert np.asarray(got).dtype == np.int64, where
        assert [str(v) for v in np.asarray(got).tolist()] == exp["value"], where
    elif kind == "float_list":
        got = np.asarray(got)
        assert got.dtype == np.float32, where
        assert [f"{b:08x}" for b in got.view(np.uint32).tolist()] == exp["bits"], where
    elif kind == "bytes_list":
        assert [bytes(v) for v in got] == [base64.b64decode(v) for v in exp["value"]], where
    else:  # kind null: Feature with no list
        assert len(got) == 0, where


def varlen_spec_from_expected(exp):
    kinds = {}
    for rec in exp["decoded_first_records"]:
        for k, v in rec.get("features", {}).items():
            if v["kind"] is not None:
                kinds.setdefault(k, set()).add(v["kind"])
            else:
                kinds.setdefault(k, set())
    spec = {}
    for k, ks in kinds.items():
        assert len(ks) <= 1, f"feature {k!r} has several kinds in the corpus: {ks}"
        spec[k] = VarLen(KIND_TO_DTYPE[next(iter(ks))] if ks else "int64")
    return spec


def column_row(col, i):
    """Row i of a VarLen column as a numpy array or a list of bytes."""
    if isinstance(col, BytesColumn):
        return [bytes(v) for v in col[i]]
    assert isinstance(col, Ragged)
    return col[i]


# ==== 1. conformance =============================================================================


def test_corpus_has_example_files(corpus_dir):
    assert len(EXAMPLE_FILES) >= 7, EXAMPLE_FILES


@pytest.mark.parametrize("name", EXAMPLE_FILES)
def test_conformance_varlen_first_records(name):
    exp = load_expected(name)
    records = file_records(name)
    assert len(records) == exp["record_count"]
    first = exp["decoded_first_records"]
    batch = RecordBatch.from_records(records[: len(first)])
    spec = varlen_spec_from_expected(exp)
    cols = parse_examples(batch, spec)
    assert list(cols) == list(spec)
    for k, s in spec.items():
        col = cols[k]
        assert len(col) == len(first), k
        if s.kind == Kind.BYTES:
            assert isinstance(col, BytesColumn) and col.row_splits is not None
        else:
            assert isinstance(col, Ragged)
            assert col.row_splits.dtype == np.int64 and col.row_splits[0] == 0
            assert col.row_splits[-1] == len(col.values)
            assert col.values.dtype == (np.int64 if s.kind == Kind.INT64 else np.float32)
    for i, rec in enumerate(first):
        feats = rec.get("features", {})
        if not rec["has_features"]:
            assert not feats
        for k in spec:
            got = column_row(cols[k], i)
            if k in feats:
                check_values(
                    feats[k]["kind"], got, feats[k], f"{name} record {i} feature {k[:40]!r}"
                )
            else:
                assert len(got) == 0, (
                    f"{name} record {i}: missing feature {k[:40]!r} must be an empty row"
                )


@pytest.mark.parametrize("name", EXAMPLE_FILES)
def test_conformance_whole_file_vs_protobuf(name):
    """Every record (not only the first 20) against protobuf's decoding."""
    from tfrec_fast.proto import example_to_dict

    exp = load_expected(name)
    spec = varlen_spec_from_expected(exp)
    records = file_records(name)
    cols = parse_examples(records, spec)
    for i, r in enumerate(records):
        d = example_to_dict(r)
        for k, s in spec.items():
            got = column_row(cols[k], i)
            want = d.get(k, [])
            if s.kind == Kind.FLOAT:
                assert np.array_equal(
                    np.asarray(got).view(np.uint32), np.asarray(want, np.float32).view(np.uint32)
                ), (name, i, k)
            elif s.kind == Kind.INT64:
                assert np.asarray(got).tolist() == list(want), (name, i, k)
            else:
                assert got == list(want), (name, i, k)


def test_conformance_mnist_fixedlen():
    name = "mnist_like.tfrecord"
    exp = load_expected(name)
    records = file_records(name)
    cols = parse_examples(
        records,
        {
            "index": FixedLen((), "int64"),
            "label": FixedLen((), "int64"),
            "image_raw": FixedLen((28, 28), "uint8"),
        },
    )
    assert cols["index"].shape == (50,) and cols["index"].dtype == np.int64
    assert cols["label"].shape == (50,)
    img = cols["image_raw"]
    assert img.shape == (50, 28, 28) and img.dtype == np.uint8
    raw = parse_examples(records, {"image_raw": FixedLen((), "bytes")})["image_raw"].to_list()
    for i in range(50):
        assert np.array_equal(img[i], np.frombuffer(raw[i], np.uint8).reshape(28, 28))
    for i, rec in enumerate(exp["decoded_first_records"]):
        f = rec["features"]
        assert str(cols["index"][i]) == f["index"]["value"][0]
        assert str(cols["label"][i]) == f["label"]["value"][0]
        assert img[i].tobytes() == base64.b64decode(f["image_raw"]["value"][0])
    assert set(cols["label"].tolist()) <= set(range(10))
    # the same image as a flat (784,) and as uint8 (784,) bytes reinterpretations
    flat = parse_examples(records, {"image_raw": FixedLen(784, np.uint8)})["image_raw"]
    assert np.array_equal(flat.reshape(50, 28, 28), img)


def test_conformance_tutorial_fixedlen():
    from tfrec_fast.proto import example_to_dict

    name = "tutorial_1000.tfrecord"
    exp = load_expected(name)
    records = file_records(name)
    spec = {
        "feature0": FixedLen((), "int64"),
        "feature1": FixedLen([], "int64"),
        "feature2": FixedLen((), "bytes"),
        "feature3": FixedLen((), "float32"),
    }
    cols = parse_examples(records, spec)
    assert cols["feature0"].shape == (1000,) and cols["feature3"].dtype == np.float32
    f2 = cols["feature2"]
    assert isinstance(f2, BytesColumn) and len(f2) == 1000 and f2.row_splits is None
    assert isinstance(f2[0], memoryview)
    f2_list = f2.to_list()
    for i, rec in enumerate(exp["decoded_first_records"]):
        f = rec["features"]
        assert str(cols["feature0"][i]) == f["feature0"]["value"][0]
        assert str(cols["feature1"][i]) == f["feature1"]["value"][0]
        assert f2_list[i] == base64.b64decode(f["feature2"]["value"][0])
        assert f"{cols['feature3'][i : i + 1].view(np.uint32)[0]:08x}" == f["feature3"]["bits"][0]
    for i, r in enumerate(records):
        d = example_to_dict(r)
        assert cols["feature0"][i] == d["feature0"][0]
        assert cols["feature1"][i] == d["feature1"][0]
        assert f2_list[i] == d["feature2"][0]
        assert bytes(f2[i]) == d["feature2"][0]
        assert cols["feature3"][i] == np.float32(d["feature3"][0])


def test_conformance_edge_values_fixedlen():
    name = "edge_values.tfrecord"
    exp = load_expected(name)
    records = file_records(name)
    f0 = exp["decoded_first_records"][0]["features"]
    f1 = exp["decoded_first_records"][1]["features"]
    # record 0: int64 extremes as FixedLen of their exact length
    spec = {k: FixedLen((len(v["value"]),), "int64") for k, v in f0.items()}
    cols = parse_examples(records[:1], spec)
    for k, v in f0.items():
        assert cols[k].shape == (1, len(v["value"]))
        assert [str(x) for x in cols[k][0].tolist()] == v["value"], k
    allv = np.concatenate([cols[k][0] for k in cols])
    assert np.iinfo(np.int64).min in allv and np.iinfo(np.int64).max in allv
    # record 1: NaN payloads, inf, -0.0, denormals -- bit exact
    spec = {k: FixedLen(len(v["value"]), "float32") for k, v in f1.items()}
    cols = parse_examples(records[1:2], spec)
    for k, v in f1.items():
        assert [f"{b:08x}" for b in cols[k][0].view(np.uint32).tolist()] == v["bits"], k
    bits = np.concatenate([cols[k][0].view(np.uint32) for k in cols]).tolist()
    for pattern in (0x7FC00001, 0xFFC00000, 0x80000000, 0x7F800000, 0xFF800000, 0x00000001):
        assert pattern in bits
    # record 5 (empty payload) and 6 (0a 00): everything missing -> defaults
    cols = parse_examples(
        records[5:7],
        {
            "x": FixedLen((2,), "float32", default=-0.0),
            "y": FixedLen((), "int64", default=-(1 << 63)),
        },
    )
    assert cols["x"].view(np.uint32).tolist() == [[0x80000000] * 2] * 2
    assert cols["y"].tolist() == [-(1 << 63)] * 2
    assert len(records[5]) == 0 and bytes(records[6]) == b"\x0a\x00"


def test_conformance_long_lists():
    name = "long_lists.tfrecord"
    exp = load_expected(name)
    records = file_records(name)
    ef = exp["decoded_first_records"][0]["features"]["floats_100k"]
    ei = exp["decoded_first_records"][1]["features"]["ints_100k"]
    cols = parse_examples(records[:1], {"floats_100k": FixedLen((100000,), "float32")})
    check_values("float_list", cols["floats_100k"][0], ef, "floats fixed")
    cols = parse_examples(records[1:], {"ints_100k": FixedLen((100, 1000), "int64")})
    assert cols["ints_100k"].shape == (1, 100, 1000)
    check_values("int64_list", cols["ints_100k"][0].ravel(), ei, "ints fixed")
    cols = parse_examples(records, {"floats_100k": "float", "ints_100k": "int"})
    assert cols["floats_100k"].row_splits.tolist() == [0, 100000, 100000]
    assert cols["ints_100k"].row_splits.tolist() == [0, 0, 100000]
    check_values("float_list", cols["floats_100k"][0], ef, "floats var")
    check_values("int64_list", cols["ints_100k"][1], ei, "ints var")


def _assert_same_columns(a, b):
    assert list(a) == list(b)
    for k in a:
        x, y = a[k], b[k]
        assert type(x) is type(y), k
        if isinstance(x, BytesColumn):
            assert x.to_list() == y.to_list(), k
            assert np.array_equal(x.row_splits, y.row_splits), k
        elif isinstance(x, Ragged):
            assert x.values.dtype == y.values.dtype, k
            assert x.values.tobytes() == y.values.tobytes(), k
            assert np.array_equal(x.row_splits, y.row_splits), k
        else:
            assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), k


def test_conformance_packed_equals_unpacked():
    exp = load_expected("packed_lists.tfrecord")
    spec = varlen_spec_from_expected(exp)
    packed = parse_examples(file_records("packed_lists.tfrecord"), spec)
    unpacked = parse_examples(file_records("unpacked_lists_handbuilt.tfrecord"), spec)
    assert sum(len(c.values) for c in packed.values() if isinstance(c, Ragged)) > 0
    _assert_same_columns(packed, unpacked)


def test_conformance_voc_like():
    from tfrec_fast.proto import example_to_dict

    records = file_records("voc_like.tfrecord")
    spec = {
        "image/object/bbox/xmin": VarLen("float32"),
        "image/object/bbox/ymin": VarLen("float32"),
        "image/object/bbox/xmax": VarLen("float32"),
        "image/object/bbox/ymax": VarLen("float32"),
        "image/object/class/label": VarLen("int64"),
        "image/object/class/text": VarLen("bytes"),
        "image/object/difficult": VarLen("int64"),
        "image/height": FixedLen((), "int64"),
        "image/width": FixedLen((), "int64"),
        "image/encoded": FixedLen((), "bytes"),
        "image/format": FixedLen((1,), "bytes"),
    }
    cols = parse_examples(records, spec)
    zero_objects = lacking_some = lacking_all = 0
    for i, r in enumerate(records):
        d = example_to_dict(r)
        for k in ("image/object/bbox/xmin", "image/object/bbox/ymax"):
            assert np.array_equal(cols[k][i], np.asarray(d.get(k, []), np.float32)), (i, k)
        assert cols["image/object/class/label"][i].tolist() == d.get("image/object/class/label", [])
        assert [bytes(v) for v in cols["image/object/class/text"][i]] == d.get(
            "image/object/class/text", []
        )
        assert cols["image/object/class/text"].to_list()[i] == d.get("image/object/class/text", [])
        assert cols["image/object/difficult"][i].tolist() == d.get("image/object/difficult", [])
        assert cols["image/height"][i] == d["image/height"][0]
        assert cols["image/encoded"].to_list()[i] == d["image/encoded"][0]
        assert [bytes(v) for v in cols["image/format"][i]] == d["image/format"]
        obj = [k for k in d if "object" in k]
        if "image/object/class/label" in d and not d["image/object/class/label"]:
            zero_objects += 1
        if 0 < len(obj) < 9:
            lacking_some += 1
        if not obj:
            lacking_all += 1
    assert zero_objects and lacking_some and lacking_all, (zero_objects, lacking_some, lacking_all)
    lens = np.diff(cols["image/object/bbox/xmin"].row_splits)
    assert np.array_equal(lens, np.diff(cols["image/object/class/text"].row_splits))
    assert np.array_equal(lens, cols["image/object/bbox/xmin"].row_lengths)
    assert (lens == 0).any()


# ==== 2. semantics ===============================================================================


def test_missing_fixedlen_default_broadcast():
    recs = [ex(a=("int64", [1, 2, 3, 4, 5, 6])), ex(b=("int64", [9]))]
    cols = parse_examples(
        recs,
        {
            "a": FixedLen((2, 3), "int64", default=7),
            "f": FixedLen((2,), "float32", default=[1.5, -2.0]),
            "r": FixedLen((3,), np.int16, default=-1),
            "s": FixedLen((), "bytes", default=b""),
        },
    )
    assert cols["a"].tolist() == [[[1, 2, 3], [4, 5, 6]], [[7, 7, 7], [7, 7, 7]]]
    assert cols["f"].tolist() == [[1.5, -2.0]] * 2
    assert cols["r"].dtype == np.int16 and cols["r"].tolist() == [[-1, -1, -1]] * 2
    assert cols["s"].to_list() == [b"", b""]


def test_missing_fixedlen_without_default_raises():
    recs = [ex(a=("int64", [1])), ex(a=("int64", [2])), ex(b=("int64", [3]))]
    with pytest.raises(ExampleParseError) as ei:
        parse_examples(recs, {"a": FixedLen((), "int64")}, name="mydata")
    e = ei.value
    assert isinstance(e, ValueError)
    assert e.feature == "a" and e.record_index == 2 and e.path == "mydata"
    assert "mydata" in str(e) and "'a'" in str(e) and "record 2" in str(e)
    assert "missing" in str(e)
    # raw-bytes layout too
    with pytest.raises(ExampleParseError) as ei:
        parse_examples(recs, {"a": FixedLen((), "int64"), "img": FixedLen((2,), "uint8")})
    assert ei.value.feature == "img" and ei.value.record_index == 0


def test_parse_error_attributes_and_pickle():
    import pickle

    with pytest.raises(ExampleParseError) as ei:
        parse_examples([ex(a=("bytes", [b"x"]))], {"a": VarLen("int64")})
    e2 = pickle.loads(pickle.dumps(ei.value))
    assert type(e2) is ExampleParseError and str(e2) == str(ei.value)
    assert (e2.feature, e2.record_index, e2.path) == ("a", 0, "<records>")
    # The API spec (api_spec_example.md) lists attributes path, record_index, feature, message.
    assert getattr(ei.value, "message", None) == ei.value.detail, (
        "BUG: ExampleParseError has no .message attribute (the API spec lists path, "
        "record_index, feature, message); the implementation only has .detail"
    )


@pytest.mark.parametrize(
    "spec_kind,data_kind,values",
    [
        ("int64", "float32", [1.0]),
        ("int64", "bytes", [b"x"]),
        ("float32", "int64", [1]),
        ("float32", "bytes", [b"x"]),
        ("bytes", "int64", [1]),
        ("bytes", "float32", [1.0]),
    ],
)
@pytest.mark.parametrize("layout", ["var", "fixed"])
def test_wrong_kind_names_both(spec_kind, data_kind, values, layout):
    s = VarLen(spec_kind) if layout == "var" else FixedLen((), spec_kind)
    recs = [ex(k=(spec_kind, [b"ok"] if spec_kind == "bytes" else [1])), ex(k=(data_kind, values))]
    with pytest.raises(ExampleParseError) as ei:
        parse_examples(recs, {"k": s})
    names = {"int64": "int64", "float32": "float", "bytes": "bytes"}
    msg = str(ei.value)
    assert names[spec_kind] in msg and names[data_kind] in msg, msg
    assert ei.value.feature == "k" and ei.value.record_index == 1


def test_wrong_count():
    for n in (0, 2, 4):
        with pytest.raises(ExampleParseError) as ei:
            parse_examples([ex(k=("float32", [1.0] * n))], {"k": FixedLen((3,), "float32")})
        assert ei.value.feature == "k" and str(n) in str(ei.value) and "3" in str(ei.value)
    with pytest.raises(ExampleParseError):
        parse_examples([ex(k=("bytes", [b"a", b"b"]))], {"k": FixedLen((), "bytes")})
    with pytest.raises(ExampleParseError):
        parse_examples([ex(k=("bytes", [b"a"]))], {"k": FixedLen((2,), "bytes")})
    # a feature with no list set counts as 0 values for a FixedLen
    with pytest.raises(ExampleParseError):
        parse_examples([example(entry("k", b""))], {"k": FixedLen((), "int64")})
    assert parse_examples([example(entry("k", b""))], {"k": FixedLen((0,), "int64")})[
        "k"
    ].shape == (1, 0)


def test_fixedlen_bytes_shapes():
    recs = [
        ex(s=("bytes", [b"one"]), t=("bytes", [b"a", b"", b"\x00c"])),
        ex(s=("bytes", [b""]), t=("bytes", [b"x", b"y", b"z"])),
    ]
    cols = parse_examples(recs, {"s": FixedLen((), "bytes"), "t": FixedLen((3,), "bytes")})
    s, t = cols["s"], cols["t"]
    assert len(s) == 2 and s.to_list() == [b"one", b""]
    assert isinstance(s[0], memoryview) and bytes(s[-1]) == b""
    assert len(t) == 2 and t.to_list() == [[b"a", b"", b"\x00c"], [b"x", b"y", b"z"]]
    assert [bytes(v) for v in t[1]] == [b"x", b"y", b"z"]
    assert t.lengths.tolist() == [1, 0, 2, 1, 1, 1]
    with pytest.raises(IndexError):
        s[2]
    assert bytes(s[-2]) == b"one"


def test_fixedlen_bytes_shape_zero():
    """FixedLen((0,), 'bytes') over N records must give N (empty) rows."""
    recs = [ex(t=("bytes", [])), ex(t=("bytes", [])), ex(u=("int64", [1]))]
    col = parse_examples(recs, {"t": FixedLen((0,), "bytes", default=b"")})["t"]
    assert len(col) == 3 and col.to_list() == [[], [], []], (
        f"BUG: FixedLen((0,), 'bytes') over 3 records gives {len(col)} rows ({col.to_list()!r})"
    )


def test_raw_bytes_decoding():
    a = np.arange(12, dtype=np.float16).reshape(3, 4)
    b = -np.arange(12, dtype=np.float16).reshape(3, 4)
    recs = [ex(x=("bytes", [a.tobytes()])), ex(x=("bytes", [b.tobytes()]))]
    col = parse_examples(recs, {"x": FixedLen((3, 4), "float16")})["x"]
    assert col.dtype == np.float16 and col.shape == (2, 3, 4)
    assert np.array_equal(col[0], a) and np.array_equal(col[1], b)
    d = np.array([1.5, -2.25], np.float64)
    col = parse_examples([ex(x=("bytes", [d.tobytes()]))], {"x": FixedLen(2, np.float64)})["x"]
    assert col.tolist() == [[1.5, -2.25]]
    # from_bytes=True forces raw decoding for int64 / float32
    i = np.array([1, -2, 1 << 40], np.int64)
    col = parse_examples(
        [ex(x=("bytes", [i.tobytes()]))], {"x": FixedLen(3, "int64", from_bytes=True)}
    )["x"]
    assert col.tolist() == [i.tolist()]
    for bad in (a.tobytes()[:-1], a.tobytes() + b"\x00", b""):
        with pytest.raises(ExampleParseError) as ei:
            parse_examples([ex(x=("bytes", [bad]))], {"x": FixedLen((3, 4), "float16")})
        assert ei.value.feature == "x" and str(len(bad)) in str(ei.value) and "24" in str(ei.value)
    with pytest.raises(ExampleParseError):  # two values
        parse_examples(
            [ex(x=("bytes", [a.tobytes(), a.tobytes()]))], {"x": FixedLen((3, 4), "float16")}
        )
    with pytest.raises(ExampleParseError):  # not a bytes list
        parse_examples([ex(x=("int64", [1]))], {"x": FixedLen((), "uint8")})
    with pytest.raises(ValueError):
        FixedLen((), "bytes", from_bytes=True)


def test_duplicate_map_keys_last_wins():
    rec = example(
        entry("k", feature("int64", [1, 2])),
        entry("o", feature("int64", [5])),
        entry("k", feature("int64", [3])),
    )
    from tfrec_fast.proto import example_to_dict

    assert example_to_dict(rec)["k"] == [3]  # the protobuf oracle
    cols = parse_examples([rec, rec], {"k": VarLen("int64"), "o": FixedLen((), "int64")})
    assert cols["k"].to_list() == [[3], [3]]
    assert cols["o"].tolist() == [5, 5]
    # the duplicate may even change the kind: the last value wins as a whole
    rec2 = example(entry("k", feature("bytes", [b"x"])), entry("k", feature("float32", [2.5])))
    assert parse_examples([rec2], {"k": VarLen("float32")})["k"].to_list() == [[2.5]]


def test_two_features_fields_merge():
    rec = ld(1, entry("a", feature("int64", [1])) + entry("b", feature("int64", [2]))) + ld(
        1, entry("b", feature("int64", [20])) + entry("c", feature("bytes", [b"c"]))
    )
    from tfrec_fast.proto import example_to_dict

    assert example_to_dict(rec) == {"a": [1], "b": [20], "c": [b"c"]}
    cols = parse_examples([rec], {"a": VarLen(), "b": VarLen(), "c": VarLen("bytes")})
    assert cols["a"].to_list() == [[1]] and cols["b"].to_list() == [[20]]
    assert cols["c"].to_list() == [[b"c"]]


def test_map_entry_value_given_twice_merges_as_protobuf_does():
    """A map entry whose `value` (a singular message field) occurs twice: protobuf merges the two
    Feature messages (the same list kind appends, another kind replaces, a part without a list
    changes nothing), with a spec, without one and by names only."""
    from tfrec_fast.proto import example_to_dict

    def twice(*values):
        return ld(1, ld(1, ld(1, b"k") + b"".join(ld(2, v) for v in values)))

    rec = twice(feature("int64", [1]), feature("int64", [2]))
    assert example_to_dict(rec)["k"] == [1, 2]
    assert parse_examples([rec], {"k": VarLen()})["k"].to_list() == [[1, 2]]
    assert parse_examples([rec], {"k": FixedLen(2)})["k"].tolist() == [[1, 2]]
    assert parse_examples([rec], ["k"])["k"].to_list() == [[1, 2]]
    assert parse_example(rec) == {"k": [1, 2]}
    assert parse_examples([rec], {"other": VarLen()})["other"].to_list() == [[]]
    switched = twice(feature("float32", [1.5]), feature("int64", [7]))
    assert example_to_dict(switched)["k"] == [7] and parse_example(switched) == {"k": [7]}
    with pytest.raises(ExampleParseError, match="holds an int64_list"):
        parse_examples([switched], {"k": VarLen("float32")})
    kept = twice(feature("bytes", [b"a"]), b"")
    assert example_to_dict(kept)["k"] == [b"a"] and parse_example(kept) == {"k": [b"a"]}
    assert parse_examples([kept], {"k": FixedLen((), "bytes")})["k"].to_list() == [b"a"]
    # the reviewer's record: an empty Feature twice (no list: an empty row, present)
    scores = bytes.fromhex("0a0e0a0c0a0673636f72657312001200")
    assert parse_examples([scores], {"scores": VarLen("float32")})["scores"].to_list() == [[]]


def test_feature_list_given_twice_merges():
    f = ld(3, int64_list([1, 2])) + ld(3, int64_list([3], packed=False)) + ld(3, int64_list([4]))
    rec = example(entry("k", f))
    from tfrec_fast.proto import example_to_dict

    assert example_to_dict(rec)["k"] == [1, 2, 3, 4]
    assert parse_examples([rec], {"k": VarLen()})["k"].to_list() == [[1, 2, 3, 4]]
    assert parse_examples([rec], {"k": FixedLen(4)})["k"].tolist() == [[1, 2, 3, 4]]
    fb = ld(1, bytes_list([b"a"])) + ld(1, bytes_list([b"b", b"c"]))
    assert parse_examples([example(entry("k", fb))], {"k": VarLen("bytes")})["k"].to_list() == [
        [b"a", b"b", b"c"]
    ]
    ff = ld(2, float_list([1.0])) + ld(2, float_list([2.0], packed=False))
    assert parse_examples([example(entry("k", ff))], {"k": VarLen("float32")})["k"].to_list() == [
        [1.0, 2.0]
    ]
    # packed chunks repeated inside one list message also merge
    lst = ld(1, varint(1)) + vi(1, 2) + ld(1, varint(3) + varint(4))
    assert parse_examples([example(entry("k", ld(3, lst)))], {"k": VarLen()})["k"].to_list() == [
        [1, 2, 3, 4]
    ]


def test_oneof_last_kind_wins():
    """Feature.kind is a oneof: a later list of another kind replaces the earlier one."""
    from tfrec_fast.proto import example_to_dict

    f = ld(1, bytes_list([b"x"])) + ld(3, int64_list([7]))
    rec = example(entry("k", f))
    assert example_to_dict(rec)["k"] == [7]
    assert parse_examples([rec], {"k": VarLen("int64")})["k"].to_list() == [[7]]
    with pytest.raises(ExampleParseError):
        parse_examples([rec], {"k": VarLen("bytes")})


def test_a_replaced_list_must_still_parse():
    """A list that a later kind replaces is dropped, but protobuf parses it first: damage there
    (a packed float list of 5 bytes, a truncated packed varint) fails the record as it fails
    protobuf, also when the two lists come in two parts of the map entry's value; a value of
    another wire type there is an unknown field to protobuf, and is accepted."""
    from google.protobuf.message import DecodeError

    from tfrec_fast.proto import Example

    ints, floats = ld(3, int64_list([7])), ld(2, float_list([7.0]))
    cases = [
        (ld(2, ld(1, b"\0" * 5)), ints, "int64"),
        (ld(3, ld(1, b"\x80")), floats, "float32"),
        (ld(1, b"\x0a\x05"), ints, "int64"),
    ]
    for bad, kept, dtype in cases:
        for rec in (
            example(entry("k", bad + kept)),
            ld(1, ld(1, ld(1, b"k") + ld(2, bad) + ld(2, kept))),
        ):
            with pytest.raises(DecodeError):
                Example.FromString(rec)
            with pytest.raises(ExampleParseError) as info:
                parse_examples([rec], {"k": VarLen(dtype)})
            assert info.value.feature == "k"
    odd = ld(2, vi(1, 3)) + ld(3, int64_list([7]))  # a float sent as a varint: unknown, replaced
    assert Example.FromString(example(entry("k", odd))).features.feature["k"].int64_list.value == [
        7
    ]
    assert parse_examples([example(entry("k", odd))], {"k": VarLen()})["k"].to_list() == [[7]]


def test_oneof_switch_back_discards_earlier_list():
    """bytes_list{a}, int64_list{1}, bytes_list{b}: protobuf keeps only [b] (switching the oneof to
    int64_list cleared the first bytes_list)."""
    from tfrec_fast.proto import example_to_dict

    f = ld(1, bytes_list([b"a"])) + ld(3, int64_list([1])) + ld(1, bytes_list([b"b"]))
    rec = example(entry("k", f))
    want = example_to_dict(rec)["k"]
    got = parse_examples([rec], {"k": VarLen("bytes")})["k"].to_list()[0]
    assert got == want, f"BUG: oneof re-set: protobuf gives {want!r}, tfrec_fast gives {got!r}"


def test_unknown_fields_skipped_at_every_level():
    lst_i = int64_list([1, -5, 1 << 62], extra=UNKNOWN)
    lst_i_unpacked = UNKNOWN + int64_list([8, 9], packed=False) + UNKNOWN
    lst_f = UNKNOWN + float_list([1.5, -0.0]) + UNKNOWN
    lst_b = UNKNOWN + bytes_list([b"p", b""]) + UNKNOWN
    feat = lambda field, lst: UNKNOWN + ld(field, lst) + UNKNOWN  # noqa: E731
    map_entry = lambda key, f: ld(1, UNKNOWN + ld(1, key.encode()) + UNKNOWN + ld(2, f) + UNKNOWN)  # noqa
    fm = (
        UNKNOWN
        + map_entry("i", feat(3, lst_i))
        + UNKNOWN
        + map_entry("u", feat(3, lst_i_unpacked))
        + map_entry("f", feat(2, lst_f))
        + UNKNOWN
        + map_entry("b", feat(1, lst_b))
        + map_entry("other", feat(1, lst_b))
        + UNKNOWN
    )
    rec = UNKNOWN + ld(1, fm) + UNKNOWN
    # protobuf as an oracle for the Example / Features / Feature / list levels. (Not for unknown
    # fields inside a map entry: upb then drops the whole entry into the parent's unknown fields,
    # a upb quirk; TensorFlow's parsers keep the entry, as tfrec_fast does.)
    from tfrec_fast.proto import example_to_dict

    plain_entry = lambda key, f: ld(1, ld(1, key.encode()) + ld(2, f))  # noqa: E731
    rec_pb = (
        UNKNOWN
        + ld(
            1,
            UNKNOWN
            + plain_entry("i", feat(3, lst_i))
            + UNKNOWN
            + plain_entry("u", feat(3, lst_i_unpacked))
            + plain_entry("b", feat(1, lst_b)),
        )
        + UNKNOWN
    )
    d = example_to_dict(rec_pb)
    assert d["i"] == [1, -5, 1 << 62] and d["u"] == [8, 9] and d["b"] == [b"p", b""]
    cols = parse_examples([rec_pb], {"i": VarLen(), "u": VarLen(), "b": VarLen("bytes")})
    assert cols["i"].to_list() == [d["i"]] and cols["u"].to_list() == [d["u"]]
    assert cols["b"].to_list() == [d["b"]]
    cols = parse_examples(
        [rec, rec], {"i": VarLen(), "u": FixedLen(2), "f": VarLen("float32"), "b": VarLen("bytes")}
    )
    assert cols["i"].to_list() == [[1, -5, 1 << 62]] * 2
    assert cols["u"].tolist() == [[8, 9]] * 2
    assert cols["f"].values.view(np.uint32).tolist() == [0x3FC00000, 0x80000000] * 2
    assert cols["b"].to_list() == [[b"p", b""]] * 2


def test_only_requested_keys_materialised():
    # "junk"'s Feature is not even a valid message: it is never decoded when not requested
    bad = b"\xff\xff\xff"
    rec = example(entry("a", feature("int64", [1])), entry("junk", bad))
    cols = parse_examples([rec], {"a": VarLen()})
    assert list(cols) == ["a"] and cols["a"].to_list() == [[1]]
    with pytest.raises(ExampleParseError) as ei:
        parse_examples([rec], {"junk": VarLen()})
    assert ei.value.feature == "junk"
    # the spec's order is the output's order, whatever the record's order
    rec = ex(z=("int64", [1]), a=("int64", [2]), m=("int64", [3]))
    assert list(parse_examples([rec], {"m": VarLen(), "z": VarLen()})) == ["m", "z"]


def test_empty_and_no_features():
    recs = [b"", b"\x0a\x00", ex(a=("int64", [1]))]
    cols = parse_examples(
        recs, {"a": VarLen(), "b": VarLen("bytes"), "c": FixedLen((), "float32", 0.5)}
    )
    assert cols["a"].to_list() == [[], [], [1]]
    assert cols["b"].to_list() == [[], [], []]
    assert cols["c"].tolist() == [0.5] * 3
    # zero records
    cols = parse_examples(
        [],
        {
            "a": VarLen(),
            "b": VarLen("bytes"),
            "c": FixedLen((2,), "float32"),
            "d": FixedLen((), "bytes"),
            "e": FixedLen((3,), "uint8"),
        },
    )
    assert len(cols["a"]) == 0 and cols["a"].row_splits.tolist() == [0]
    assert len(cols["b"]) == 0 and cols["c"].shape == (0, 2) and len(cols["d"]) == 0
    assert cols["e"].shape == (0, 3)
    assert parse_examples(recs, {}) == {}


def test_kind_null_feature_is_empty_row():
    rec = example(entry("k", b""), entry("m", UNKNOWN))  # Features with no list set
    from tfrec_fast.proto import example_to_dict

    assert example_to_dict(rec) == {"k": [], "m": []}
    for dtype in ("int64", "float32", "bytes"):
        col = parse_examples([rec, ex(k=(dtype, []))], {"k": VarLen(dtype), "m": VarLen(dtype)})
        assert col["k"].to_list() == [[], []] and col["m"].to_list() == [[], []]
    # a map entry without a value (a default Feature) is present with no list
    rec = ld(1, ld(1, ld(1, b"k")))
    assert example_to_dict(rec) == {"k": []}
    assert parse_examples([rec], {"k": VarLen()})["k"].to_list() == [[]]


def test_empty_key():
    rec = example(entry("", feature("int64", [4])), entry("x", feature("int64", [5])))
    assert parse_examples([rec], {"": VarLen(), "x": VarLen()})[""].to_list() == [[4]]
    # map entry with no key field = key ""
    rec2 = ld(1, ld(1, ld(2, feature("int64", [6]))))
    assert parse_examples([rec2], {"": FixedLen()})[""].tolist() == [6]


def test_error_for_feature_named_empty_string_names_it():
    with pytest.raises(ExampleParseError) as ei:
        parse_examples([ex(x=("int64", [1]))], {"": FixedLen()})
    assert ei.value.feature == "", (
        f"BUG: an error about the feature named '' reports feature={ei.value.feature!r}"
    )


def test_malformed_records_raise():
    good = ex(a=("int64", [1]))
    bad_records = [
        b"\x0a",  # truncated length
        b"\x0a\x05\x0a\x03",  # length beyond the record
        b"\x00",  # field number 0
        b"\x0b\x0c",  # group (wire types 3/4) in Example
        b"\x0f",  # wire type 7
        good[:-1],  # truncated
        b"\x0a\x02\x0a\x05",  # entry length beyond Features
        b"\x08" + b"\xff" * 10 + b"\x01",  # over-long varint
    ]
    for rec in bad_records:
        with pytest.raises(ExampleParseError) as ei:
            parse_examples([good, rec], {"a": VarLen()}, name="n")
        assert ei.value.record_index == 1 and ei.value.path == "n", rec
        assert ei.value.feature is None, rec
    # malformed list of a requested feature: the error names the feature
    for f in (
        ld(3, b"\x0a\x01"),
        ld(2, ld(1, b"\x00\x00\x00")),
        ld(1, vi(1, 5)),
        ld(3, f32(1, 0)),
        ld(2, vi(1, 1)),
        ld(3, ld(1, b"\xff")),
        b"\xff",
    ):
        with pytest.raises(ExampleParseError) as ei:
            parse_examples(
                [example(entry("a", f))],
                {"a": VarLen(["bytes", "float32", "int64"][{1: 0, 2: 1, 3: 2}.get(f[0] >> 3, 2)])},
            )
        assert ei.value.feature == "a", f


def test_int64_varint_forms():
    vals = [0, 1, -1, 127, 128, (1 << 63) - 1, -(1 << 63), 300, -300]
    recs = [example(entry("k", feature("int64", vals, packed=p))) for p in (True, False)]
    cols = parse_examples(recs, {"k": VarLen()})
    assert cols["k"].to_list() == [vals, vals]
    # negative int32-style sign extension and a non-canonical (padded) varint
    lst = ld(1, b"\x81\x80\x80\x00")  # 1 with redundant continuation bytes
    assert parse_examples([example(entry("k", ld(3, lst)))], {"k": VarLen()})["k"].to_list() == [
        [1]
    ]


# ---- entry sizes around the decoder's one-byte-length shortcut ---------------------------------
# Map entries and Features under 128 bytes are read by comparing their bytes (every length one
# byte); longer ones, and any other encoding of the same message, take the cursor path. Both must
# give protobuf's values.


def _sized_record(key_size: int, value_size: int) -> bytes:
    return ex(
        **{
            "k" * key_size: ("bytes", [bytes(i % 251 for i in range(value_size))]),
            "n": ("int64", [value_size, -value_size]),
            "f": ("float32", [0.5]),
        }
    )


@pytest.mark.parametrize("key_size", [1, 8, 100, 127, 128])
def test_entry_sizes_around_one_byte_lengths(key_size):
    from tfrec_fast.proto import example_to_dict

    recs = [_sized_record(key_size, size) for size in range(100, 140)]
    name = "k" * key_size
    cols = parse_examples(
        recs, {name: VarLen("bytes"), "n": FixedLen((2,), "int64"), "f": FixedLen((), "float32")}
    )
    for i, rec in enumerate(recs):
        want = example_to_dict(rec)
        assert cols[name].to_list()[i] == want[name], (key_size, i)
        assert cols["n"][i].tolist() == want["n"]
        assert cols["f"][i] == want["f"][0]
    size = len(example_to_dict(recs[20])[name][0])  # 120 bytes: a Feature under 128, its entry not
    fixed = parse_examples(recs[20:21], {name: FixedLen((size,), "uint8")})[name]
    assert fixed[0].tobytes() == example_to_dict(recs[20])[name][0]


def _padded_length(payload: bytes) -> bytes:
    """A length-delimited payload whose length is a two-byte (non-canonical) varint."""
    assert len(payload) < 128
    return bytes([0x80 | len(payload), 0x00]) + payload


@pytest.mark.parametrize("padded", ["entry", "key", "value", "list", "payload"])
def test_padded_lengths_read_like_protobuf(padded):
    """The same short entry with one of its lengths written in two bytes: protobuf accepts it, and
    so must the decoder (through the cursor path), with the same values."""
    from tfrec_fast.proto import example_to_dict

    def part(which, payload):
        return _padded_length(payload) if which == padded else varint(len(payload)) + payload

    payload = part("payload", b"\x07\x96\x01")  # packed int64s 7, 150
    lst = tag(1, 2) + payload
    feat = tag(3, 2) + part("list", lst)
    body = tag(1, 2) + part("key", b"n") + tag(2, 2) + part("value", feat)
    rec = ld(1, tag(1, 2) + part("entry", body))  # Example.features holding the one entry
    assert example_to_dict(rec) == {"n": [7, 150]}
    assert parse_examples([rec], {"n": FixedLen((2,), "int64")})["n"].tolist() == [[7, 150]]
    assert parse_examples([rec], {"n": VarLen("int64")})["n"].to_list() == [[7, 150]]


@pytest.mark.parametrize("delta", [-1, 1])
def test_short_entry_with_a_wrong_value_length_is_refused(delta):
    """A one-byte value length that does not end at the entry's end: not the usual entry, and
    the cursor path reports it (as protobuf refuses it)."""
    from google.protobuf.message import DecodeError

    from tfrec_fast.proto import example_to_dict

    feat = feature("int64", [5])
    body = tag(1, 2) + varint(1) + b"n" + tag(2, 2) + varint(len(feat) + delta) + feat
    rec = ld(1, ld(1, body))
    with pytest.raises(DecodeError):
        example_to_dict(rec)
    with pytest.raises(ExampleParseError) as info:
        parse_examples([rec], {"n": FixedLen((), "int64")})
    assert info.value.record_index == 0


@pytest.mark.parametrize("delta", [-1, 1])
@pytest.mark.parametrize("length", ["value", "list", "payload"])
@pytest.mark.parametrize("kind", ["int64", "bytes"])
def test_wrong_length_after_a_good_record_is_refused(kind, length, delta):
    """A record laid out as the one before it, but with one of its Feature's lengths off by one:
    refused at that record, as protobuf refuses it (the check against the previous record's
    layout must not take it). int64: every length one byte; bytes: a 200-byte value, every
    length two bytes."""
    from google.protobuf.message import DecodeError

    from tfrec_fast.proto import example_to_dict

    payload = b"\x07\x96\x01" if kind == "int64" else bytes(range(200))  # int64s 7, 150

    def record(wrong):
        def framed(part, which):  # part after its length, off by delta in the wrong one
            return varint(len(part) + delta * (wrong == which)) + part

        lst = tag(1, 2) + framed(payload, "payload")
        feat = tag(3 if kind == "int64" else 1, 2) + framed(lst, "list")
        return ld(1, ld(1, tag(1, 2) + varint(1) + b"n" + tag(2, 2) + framed(feat, "value")))

    good, bad = record(None), record(length)
    with pytest.raises(DecodeError):
        example_to_dict(bad)
    fixed = FixedLen((2,), "int64") if kind == "int64" else FixedLen((), "bytes")
    got = parse_examples([good, good], {"n": fixed})["n"]
    want = [[7, 150]] * 2 if kind == "int64" else [payload] * 2
    assert (got.tolist() if kind == "int64" else got.to_list()) == want
    for spec in ({"n": fixed}, {"n": VarLen(kind)}):
        with pytest.raises(ExampleParseError) as info:
            parse_examples([good, good, bad, good], spec)
        assert info.value.record_index == 2


@pytest.mark.parametrize("size", [3, 200])
def test_feature_with_more_after_its_list_after_a_good_record(size):
    """A record laid out as the one before it, except that its Feature holds a second list of
    the same kind after the first (protobuf merges them): both lists' values, not the first's
    payload stretched to the Feature's end."""
    from tfrec_fast.proto import example_to_dict

    first, second = bytes(range(size)), b"tail"

    def record(feat):
        return ld(1, ld(1, ld(1, b"n") + ld(2, feat)))

    good = record(ld(1, ld(1, first)))
    merged = record(ld(1, ld(1, first)) + ld(1, ld(1, second)))
    assert example_to_dict(merged) == {"n": [first, second]}
    got = parse_examples([good, good, merged, good], {"n": VarLen("bytes")})["n"].to_list()
    assert got == [[first], [first], [first, second], [first]]


@pytest.mark.parametrize("kind", ["int64", "bytes", "float32"])
def test_same_key_in_changing_forms_read_like_protobuf(kind):
    """One key whose entry keeps changing form (empty list, one short value, a payload of 128
    bytes or more, the key twice), far more often than the decoder learns a position's form
    again: every record as protobuf reads it."""
    from tfrec_fast.proto import example_to_dict

    sizes = {"int64": [0, 1, 3, 40], "bytes": [0, 1, 5, 200], "float32": [0, 1, 2, 70]}[kind]

    def values(size):
        if kind == "bytes":
            return [bytes(range(size))]
        return [float(i) + 0.5 for i in range(size)] if kind == "float32" else list(range(size))

    records = []
    for i in range(60):
        size = sizes[(i * 7 // 3) % 4]
        feat = feature(kind, values(size))
        body = entry("n", feat)
        if i % 11 == 5:  # the key twice: the last entry counts
            body = entry("n", feature(kind, values(sizes[3]))) + body
        records.append(example(entry("id", feature("int64", [i])), body))
    want = [example_to_dict(r) for r in records]
    for first in (0, 1, 30):
        for threads in (1, 2):
            got = parse_examples(
                records[first:], {"n": VarLen(kind), "id": VarLen("int64")}, num_threads=threads
            )
            assert got["id"].to_list() == [w["id"] for w in want[first:]]
            assert got["n"].to_list() == [w.get("n", []) for w in want[first:]], (first, threads)


@pytest.mark.parametrize("leading", [1, 6, 60])
@pytest.mark.parametrize("kind", ["int64", "bytes", "float32"])
def test_leading_empty_features_read_like_protobuf(kind, leading):
    """A feature empty in the first records (more of them than the decoder relearns a form, or
    in every record), then holding values, with an empty one now and then."""
    from tfrec_fast.proto import example_to_dict

    full = {"int64": [5, 1 << 40], "bytes": [b"ab", bytes(200)], "float32": [0.5, 2.0]}[kind]
    records = []
    for i in range(60):
        values = [] if i < leading or i % 9 == 4 else full
        lst = b"" if i % 13 == 7 else None  # sometimes a Feature without any list
        feat = lst if lst is not None and not values else feature(kind, values)
        records.append(example(entry("id", feature("int64", [i])), entry("n", feat)))
    want = [example_to_dict(r) for r in records]
    for threads in (1, 2):
        got = parse_examples(
            records, {"n": VarLen(kind), "id": VarLen("int64")}, num_threads=threads
        )
        assert got["id"].to_list() == [w["id"] for w in want]
        assert got["n"].to_list() == [w.get("n", []) for w in want], threads


def _known_entry_records(seed: int, one_value: bool = False) -> list:
    """Records that mostly repeat the previous record's layout (the decoder then checks each map
    entry against the key its position held before), with the near misses mixed in: another key
    of the same or another size, keys of 13 and 14 bytes, entries of 128 bytes or more, a padded
    length, a key twice, a feature not asked for, and records that end near the batch's end.
    `one_value`: every feature holds one value."""
    import random

    rng = random.Random(seed)
    kinds = {
        "k": "int64",
        "kk": "bytes",
        "ka": "float32",
        "kb": "int64",
        "a" * 13: "bytes",
        "a" * 14: "int64",
        "feature0": "float32",
        "x": "int64",
    }

    def one(key):
        kind = kinds[key]
        if kind == "bytes":
            return entry(
                key,
                feature(
                    kind,
                    [
                        bytes(
                            rng.randrange(256) for _ in range(rng.choice([0, 1, 5, 100, 110, 130]))
                        )
                    ],
                ),
            )
        if kind == "float32":
            return entry(
                key,
                feature(
                    kind, [rng.random() for _ in range(1 if one_value else rng.choice([0, 1, 2]))]
                ),
            )
        return entry(
            key,
            feature(
                kind,
                [
                    rng.randrange(-1 << 40, 1 << 40)
                    for _ in range(1 if one_value else rng.choice([0, 1, 3]))
                ],
            ),
        )

    layout = ["k", "kk", "ka"]
    records = []
    for _ in range(300):
        if rng.random() < 0.15:
            layout = rng.sample(sorted(kinds), rng.randrange(1, 6))
        entries = [one(key) for key in layout]
        twist = rng.random()
        if twist < 0.05:
            entries.append(one(layout[0]))  # a key twice: the last one counts
        elif twist < 0.1:
            body = ld(1, b"k") + ld(2, feature("int64", [7]))
            entries.insert(0, tag(1, 2) + _padded_length(body))
        records.append(example(*entries))
    return records


@pytest.mark.parametrize("seed", range(4))
def test_entries_checked_against_the_previous_record_read_like_protobuf(seed):
    from tfrec_fast.proto import example_to_dict

    recs = _known_entry_records(seed)
    spec = {
        "k": VarLen("int64"),
        "kk": VarLen("bytes"),
        "ka": VarLen("float32"),
        "kb": VarLen("int64"),
        "a" * 13: VarLen("bytes"),
        "a" * 14: VarLen("int64"),
        "feature0": VarLen("float32"),
    }
    want = [example_to_dict(r) for r in recs]
    for first in (0, 1, 150, 297, 299):  # a batch ending at every kind of record
        for threads in (1, 2):
            cols = parse_examples(recs[first:], spec, num_threads=threads)
            for name, column in cols.items():
                got = column.to_list()
                for i, record in enumerate(want[first:]):
                    assert got[i] == record.get(name, []), (seed, first, threads, name, i)


@pytest.mark.parametrize("seed", range(4))
def test_fixed_entries_checked_against_the_previous_record_read_like_protobuf(seed):
    from tfrec_fast.proto import example_to_dict

    recs = _known_entry_records(seed, one_value=True)
    defaults = {
        "k": -1,
        "kk": b"?",
        "ka": -1.0,
        "kb": -1,
        "a" * 13: b"?",
        "a" * 14: -1,
        "feature0": -1.0,
    }
    kinds = {
        "k": "int64",
        "kk": "bytes",
        "ka": "float32",
        "kb": "int64",
        "a" * 13: "bytes",
        "a" * 14: "int64",
        "feature0": "float32",
    }
    spec = {name: FixedLen((), kinds[name], default=d) for name, d in defaults.items()}
    want = [example_to_dict(r) for r in recs]
    for first in (0, 1, 297, 299):
        for threads in (1, 2):
            cols = parse_examples(recs[first:], spec, num_threads=threads)
            for name, column in cols.items():
                got = column.to_list() if isinstance(column, BytesColumn) else column.tolist()
                for i, record in enumerate(want[first:]):
                    value = record.get(name, [defaults[name]])[0]
                    if kinds[name] == "float32":
                        value = float(np.float32(value))
                    assert got[i] == value, (seed, first, threads, name, i)


# ---- spec formats --------------------------------------------------------------------------------


def test_spec_tfrecord_description():
    rec = ex(i=("int64", [1, 2]), f=("float32", [0.5]), b=("bytes", [b"z"]))
    cols = parse_examples([rec], {"i": "int", "f": "float", "b": "byte"})
    assert isinstance(cols["i"], Ragged) and cols["i"].to_list() == [[1, 2]]
    assert isinstance(cols["f"], Ragged) and cols["f"].values.dtype == np.float32
    assert isinstance(cols["b"], BytesColumn) and cols["b"].to_list() == [[b"z"]]
    n = normalize_spec({"i": "int", "f": "float", "b": "byte"})
    assert all(isinstance(s, VarLen) for s in n.values())
    assert [s.kind for s in n.values()] == [Kind.INT64, Kind.FLOAT, Kind.BYTES]


def test_spec_list_of_names_infers_kinds():
    recs = [
        ex(i=("int64", [1])),
        ex(i=("int64", [2, 3]), f=("float32", [0.5]), b=("bytes", [b"q"])),
    ]
    cols = parse_examples(recs, ["i", "f", "b"])
    assert cols["i"].to_list() == [[1], [2, 3]]
    assert cols["f"].values.dtype == np.float32 and cols["f"].to_list() == [[], [0.5]]
    assert cols["b"].to_list() == [[], [b"q"]]
    cols = parse_examples(recs, ("i",))
    assert cols["i"].to_list() == [[1], [2, 3]]
    # a name found nowhere: an all-empty column
    cols = parse_examples(recs, ["nope"])
    assert len(cols["nope"]) == 2 and len(cols["nope"].values) == 0


def test_spec_list_of_names_malformed_record_raises_parse_error():
    """Kind inference must not leak protobuf's DecodeError: a malformed record is an
    ExampleParseError whatever the spec format."""
    recs = [ex(i=("int64", [1])), b"\x0a\x05\x0a"]
    try:
        parse_examples(recs, ["j"])
    except ExampleParseError as e:
        assert e.record_index == 1
    except Exception as e:  # noqa: BLE001
        pytest.fail(
            f"BUG: parse_examples(records, ['j']) on a malformed record raised "
            f"{type(e).__module__}.{type(e).__name__}: {e} instead of ExampleParseError"
        )
    else:
        pytest.fail("malformed record accepted")


class FixedLenFeature:
    def __init__(self, shape, dtype, default_value=None):
        self.shape, self.dtype, self.default_value = shape, dtype, default_value


class VarLenFeature:
    def __init__(self, dtype):
        self.dtype = dtype


class FakeDType:
    def __init__(self, name):
        self.name = name


def test_spec_duck_typed_varlen_and_string_dtypes():
    recs = [ex(i=("int64", [1, 2]), s=("bytes", [b"a", b"b"])), ex(f=("float32", [1.5]))]
    spec = {
        "i": VarLenFeature(FakeDType("int64")),
        "s": VarLenFeature(FakeDType("string")),
        "f": VarLenFeature(FakeDType("float32")),
        "b": FixedLenFeature((), FakeDType("string"), b""),
        "j": FixedLenFeature([2], "int64", default_value=[-1, -2]),
        "g": FixedLenFeature((), np.float32, default_value=0.25),
    }
    cols = parse_examples(recs, spec)
    assert cols["i"].to_list() == [[1, 2], []] and cols["s"].to_list() == [[b"a", b"b"], []]
    assert cols["f"].to_list() == [[], [1.5]] and cols["b"].to_list() == [b"", b""]
    assert cols["j"].tolist() == [[-1, -2], [-1, -2]] and cols["g"].tolist() == [0.25, 0.25]


def test_spec_duck_typed_fixedlen_numeric_dtype_object():
    """FixedLenFeature whose dtype is a TF-DType-like object (only .name) for a numeric kind."""
    for name, kind in (("int64", Kind.INT64), ("float32", Kind.FLOAT)):
        try:
            s = normalize_spec({"x": FixedLenFeature([], FakeDType(name))})["x"]
        except Exception as e:  # noqa: BLE001
            pytest.fail(
                f"BUG: FixedLenFeature([], <dtype with .name={name!r}>) is rejected: "
                f"{type(e).__name__}: {e} (VarLenFeature with the same dtype works)"
            )
        assert isinstance(s, FixedLen) and s.kind == kind and not s.from_bytes


def test_spec_duck_typed_tensorflow_features():
    recs = [
        ex(
            i=("int64", [1, 2]),
            f=("float32", [0.5]),
            b=("bytes", [b"z"]),
            s=("bytes", [b"a", b"b"]),
        ),
        ex(f=("float32", [1.5]), b=("bytes", [b"y"])),
    ]
    # (numeric FixedLenFeature with a DType-like object: see
    # test_spec_duck_typed_fixedlen_numeric_dtype_object)
    spec = {
        "i": FixedLenFeature([2], np.int64, default_value=[0, 0]),
        "f": FixedLenFeature([], np.float32),
        "b": FixedLenFeature((), FakeDType("string")),
        "s": VarLenFeature(FakeDType("string")),
        "v": VarLenFeature(FakeDType("int64")),
        "w": VarLenFeature("float32"),
    }
    cols = parse_examples(recs, spec)
    assert cols["i"].tolist() == [[1, 2], [0, 0]]
    assert cols["f"].tolist() == [0.5, 1.5]
    assert cols["b"].to_list() == [b"z", b"y"]
    assert cols["s"].to_list() == [[b"a", b"b"], []]
    assert cols["v"].to_list() == [[], []] and cols["w"].values.dtype == np.float32
    n = normalize_spec(spec)
    assert isinstance(n["i"], FixedLen) and n["i"].shape == (2,) and isinstance(n["s"], VarLen)
    with pytest.raises(TypeError):
        normalize_spec({"x": 3})


def test_spec_objects_repr_and_validation():
    assert "FixedLen" in repr(FixedLen((2,), "float32", 0.0))
    assert "VarLen" in repr(VarLen("bytes"))
    with pytest.raises(ValueError):
        VarLen("uint8")
    assert FixedLen((), "bytes", default="x").default == b"x"
    with pytest.raises(ValueError):
        FixedLen((), "bytes", from_bytes=True)
    assert FixedLen(3).shape == (3,) and FixedLen(np.int64(3)).shape == (3,)
    for dt in (np.int64, "int64", "int", np.dtype("int64")):
        assert VarLen(dt).kind == Kind.INT64
    for dt in (np.float32, "float32", "float"):
        assert VarLen(dt).kind == Kind.FLOAT
    for dt in (bytes, str, object, "bytes", "string", "str", "byte"):
        assert VarLen(dt).kind == Kind.BYTES


@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("tensorflow")


def test_real_tensorflow_specs(tf):
    recs = [
        ex(i=("int64", [1, 2]), f=("float32", [0.5]), s=("bytes", [b"a"])),
        ex(f=("float32", [2.0])),
    ]
    spec = {
        "i": tf.io.FixedLenFeature([2], tf.int64, default_value=[9, 9]),
        "f": tf.io.FixedLenFeature([], tf.float32),
        "s": tf.io.VarLenFeature(tf.string),
    }
    cols = parse_examples(recs, spec)
    assert cols["i"].tolist() == [[1, 2], [9, 9]]
    assert cols["f"].tolist() == [0.5, 2.0] and cols["s"].to_list() == [[b"a"], []]


@pytest.mark.parametrize("name", EXAMPLE_FILES)
def test_tensorflow_parse_example_agrees(tf, name):
    exp = load_expected(name)
    spec = varlen_spec_from_expected(exp)
    records = file_records(name)
    tf_spec = {
        k: tf.io.VarLenFeature(
            {Kind.INT64: tf.int64, Kind.FLOAT: tf.float32, Kind.BYTES: tf.string}[s.kind]
        )
        for k, s in spec.items()
    }
    ours = parse_examples(records, tf_spec)
    theirs = tf.io.parse_example(tf.constant([bytes(r) for r in records]), tf_spec)
    for k, s in spec.items():
        sp = theirs[k]
        rows = sp.indices.numpy()[:, 0]
        splits = np.searchsorted(rows, np.arange(len(records) + 1))
        assert np.array_equal(splits, ours[k].row_splits), k
        if s.kind == Kind.BYTES:
            assert [v for r in ours[k].to_list() for v in r] == list(sp.values.numpy()), k
        else:
            assert ours[k].values.tobytes() == sp.values.numpy().tobytes(), k


# ==== 3. zero copy ===============================================================================


def test_bytes_column_zero_copy_and_read_only():
    recs = [ex(s=("bytes", [b"hello" * 10]), v=("bytes", [b"a", b"bc"])) for _ in range(3)]
    batch = RecordBatch.from_records(recs)
    cols = parse_examples(batch, {"s": FixedLen((), "bytes"), "v": VarLen("bytes")})
    for c in cols.values():
        assert np.shares_memory(c.values, batch.data)
        assert not c.values.flags.writeable
        with pytest.raises((ValueError, TypeError)):
            c.values[0] = 1
        assert c.starts.dtype == np.int64 and c.ends.dtype == np.int64
    mv = cols["s"][0]
    assert mv.readonly and bytes(mv) == b"hello" * 10
    # the views point at the value inside the record bytes
    d = batch.data.tobytes()
    for s, e in zip(cols["v"].starts.tolist(), cols["v"].ends.tolist()):
        assert d[s:e] in (b"a", b"bc")


def test_values_outlive_batch_and_reader(tmp_path):
    p = tmp_path / "z.tfrecord"
    with TFRecordWriter(str(p)) as w:
        for i in range(5):
            w.write(ex(s=("bytes", [b"v%d" % i * 100]), n=("int64", [i])))
    reader = tfrec_fast.TFRecordReader(str(p))
    batch = reader.read_batch()
    cols = parse_examples(batch, {"s": VarLen("bytes"), "n": VarLen()})
    s, n = cols["s"], cols["n"]
    view = s[3][0]
    reader.close()
    del reader, batch, cols
    gc.collect()
    junk = [bytearray(b"\xee" * 4096) for _ in range(200)]  # reuse freed memory if any
    assert s.to_list() == [[b"v%d" % i * 100] for i in range(5)]
    assert bytes(view) == b"v3" * 100
    assert n.to_list() == [[i] for i in range(5)]
    del junk


def test_numeric_columns_own_their_memory():
    recs = [ex(k=("int64", [1, 2])), ex(k=("int64", [3]))]
    batch = RecordBatch.from_records(recs)
    cols = parse_examples(batch, {"k": VarLen(), "r": FixedLen((2,), "uint8", default=[1, 2])})
    assert not np.shares_memory(cols["k"].values, batch.data)
    del batch
    gc.collect()
    assert cols["k"].to_list() == [[1, 2], [3]]
    assert cols["r"].tolist() == [[1, 2], [1, 2]]


# ==== 4. parse_example ===========================================================================


@pytest.mark.parametrize("name", EXAMPLE_FILES)
def test_parse_example_without_spec_equals_proto(name):
    from tfrec_fast.proto import Example, example_to_dict

    for r in file_records(name)[:10]:
        want = canonical(example_to_dict(r))
        assert canonical(parse_example(r)) == want
        assert canonical(parse_example(bytes(r))) == want
        msg = Example.FromString(bytes(r))
        assert canonical(parse_example(msg)) == want


def canonical(d):
    """{name: list} with floats replaced by their float32 bit patterns (NaN-safe equality)."""
    out = {}
    for k, vals in d.items():
        out[k] = [
            ("f", int(np.float32(v).view(np.uint32))) if isinstance(v, float) else v for v in vals
        ]
    return out


def test_parse_example_with_spec():
    rec = ex(
        i=("int64", [1, 2]), f=("float32", [0.5]), b=("bytes", [b"z"]), m=("bytes", [b"p", b"q"])
    )
    row = parse_example(
        rec,
        {
            "i": FixedLen((2,), "int64"),
            "f": FixedLen((), "float32"),
            "b": FixedLen((), "bytes"),
            "m": VarLen("bytes"),
            "v": VarLen("int64"),
            "x": FixedLen((1,), "float32", default=3.0),
        },
    )
    assert row["i"].tolist() == [1, 2] and row["i"].shape == (2,)
    assert row["f"] == np.float32(0.5) and np.shape(row["f"]) == ()
    assert bytes(row["b"]) == b"z"
    assert row["m"] == [b"p", b"q"]
    assert np.asarray(row["v"]).tolist() == []
    assert row["x"].tolist() == [3.0]
    row = parse_example(bytearray(rec), {"i": "int"})
    assert row["i"].tolist() == [1, 2]
    row = parse_example(memoryview(rec), ["b"])
    assert row["b"] == [b"z"]


def test_parse_example_message_objects():
    from tfrec_fast.proto import dict_to_example

    class Wrapper:
        def __init__(self, data):
            self.data = data

        def SerializeToString(self):
            return self.data

    rec = ex(a=("int64", [5]), s=("bytes", [b"t"]))
    assert parse_example(Wrapper(rec)) == {"a": [5], "s": [b"t"]}
    assert parse_example(Wrapper(rec), {"a": FixedLen()})["a"] == 5
    msg = dict_to_example({"a": [1, 2], "s": [b"x"]})
    assert parse_example(msg, {"a": VarLen(), "s": VarLen("bytes")})["s"] == [b"x"]
    assert parse_example(msg) == {"a": [1, 2], "s": [b"x"]}
    with pytest.raises(ExampleParseError):
        parse_example(b"\x0a\x05", {"a": VarLen()})


# ==== 5. read_examples ===========================================================================


@pytest.fixture(scope="module")
def multi_files(tmp_path_factory):
    """Four files from tutorial_1000's records: 0, 137, 1, 400 records... and the rest."""
    records = file_records("tutorial_1000.tfrecord")
    d = tmp_path_factory.mktemp("multi")
    sizes = [137, 0, 1, 400, 462]
    paths, start = [], 0
    for j, n in enumerate(sizes):
        p = d / f"part{j}.tfrecord"
        with TFRecordWriter(str(p)) as w:
            for r in records[start : start + n]:
                w.write(r)
        paths.append(str(p))
        start += n
    assert start == 1000
    return paths, records


TUT_SPEC = {
    "feature0": FixedLen((), "int64"),
    "feature1": VarLen("int64"),
    "feature2": VarLen("bytes"),
    "feature3": FixedLen((), "float32"),
}


@pytest.mark.parametrize("batch_size", [1, 7, 1000, 4096])
def test_read_examples_batches_cross_files(multi_files, batch_size):
    paths, records = multi_files
    whole = parse_examples(records, TUT_SPEC)
    batches = list(read_examples(paths, TUT_SPEC, batch_size=batch_size))
    sizes = [len(b["feature0"]) for b in batches]
    assert sum(sizes) == 1000
    assert all(s == batch_size for s in sizes[:-1]) and 0 < sizes[-1] <= batch_size
    assert len(batches) == math.ceil(1000 / batch_size)
    f0 = np.concatenate([b["feature0"] for b in batches])
    assert np.array_equal(f0, whole["feature0"])
    f3 = np.concatenate([b["feature3"] for b in batches])
    assert f3.tobytes() == whole["feature3"].tobytes()
    assert [r for b in batches for r in b["feature1"].to_list()] == whole["feature1"].to_list()
    assert [r for b in batches for r in b["feature2"].to_list()] == whole["feature2"].to_list()
    # per-file parsing gives the same rows
    per_file = []
    for p in paths:
        recs = list(read_records(p, copy=True))
        if recs:
            per_file.extend(parse_examples(recs, TUT_SPEC)["feature2"].to_list())
    assert per_file == whole["feature2"].to_list()


def test_read_examples_single_path_and_names(multi_files):
    paths, records = multi_files
    got = list(read_examples(paths[0], ["feature0", "feature2"], batch_size=50))
    assert [len(b["feature0"]) for b in got] == [50, 50, 37]
    assert got[0]["feature2"].to_list()[0] == parse_example(records[0])["feature2"]
    with pytest.raises(ValueError):
        list(read_examples(paths, TUT_SPEC, batch_size=0))


def test_read_examples_error_names_file_and_index(tmp_path):
    good = [ex(a=("int64", [i])) for i in range(5)]
    p1, p2 = tmp_path / "one.tfrecord", tmp_path / "two.tfrecord"
    with TFRecordWriter(str(p1)) as w:
        for r in good:
            w.write(r)
    with TFRecordWriter(str(p2)) as w:
        for r in good[:3] + [ex(b=("int64", [1]))] + good:
            w.write(r)
    for bs in (1, 4, 7, 100):
        with pytest.raises(ExampleParseError) as ei:
            list(read_examples([str(p1), str(p2)], {"a": FixedLen((), "int64")}, batch_size=bs))
        e = ei.value
        assert e.path == str(p2), (bs, e.path)
        assert e.record_index == 3, (bs, e.record_index)
        assert e.feature == "a"
        assert str(p2) in str(e)
    # malformed (not an Example) record in the second file
    with TFRecordWriter(str(p2)) as w:
        for r in good[:2] + [b"\x0a\x09"]:
            w.write(r)
    with pytest.raises(ExampleParseError) as ei:
        list(read_examples([str(p1), str(p2)], {"a": VarLen()}, batch_size=6))
    assert (ei.value.path, ei.value.record_index, ei.value.feature) == (str(p2), 2, None)


def test_read_examples_list_spec_malformed_second_file(tmp_path):
    """With a list-of-names spec, an undecodable record must still be an ExampleParseError that
    names its file and index."""
    good = [ex(a=("int64", [i])) for i in range(3)]
    p1, p2 = tmp_path / "one.tfrecord", tmp_path / "two.tfrecord"
    with TFRecordWriter(str(p1)) as w:
        for r in good:
            w.write(r)
    with TFRecordWriter(str(p2)) as w:
        for r in good[:1] + [b"\x0a\x09"]:
            w.write(r)
    try:
        list(read_examples([str(p1), str(p2)], ["zz"], batch_size=10))
    except ExampleParseError as e:
        assert (e.path, e.record_index) == (str(p2), 1)
    except Exception as e:  # noqa: BLE001
        pytest.fail(
            f"BUG: read_examples(files, ['zz']) raised {type(e).__module__}."
            f"{type(e).__name__}: {e} instead of ExampleParseError naming {p2} record 1"
        )
    else:
        pytest.fail("malformed record accepted")


def test_read_examples_list_spec_kind_inferred_consistently(tmp_path):
    """A name-only spec must not depend on batch_size: 'x' is absent from the first batch and an
    int64 feature later; parse_examples over all records infers int64."""
    recs = [ex(a=("int64", [i])) for i in range(4)] + [ex(x=("int64", [7]))]
    p = tmp_path / "late.tfrecord"
    with TFRecordWriter(str(p)) as w:
        for r in recs:
            w.write(r)
    whole = parse_examples(recs, ["x"])["x"]
    assert whole.values.dtype == np.int64 and whole.to_list() == [[], [], [], [], [7]]
    try:
        rows = [r for b in read_examples([str(p)], ["x"], batch_size=2) for r in b["x"].to_list()]
    except ExampleParseError as e:
        pytest.fail(
            f"BUG: read_examples(path, ['x'], batch_size=2) fails ({e}) where "
            f"parse_examples(all records, ['x']) gives int64 rows: the kind is inferred "
            f"from the first batch only (float32 when absent) and then fixed"
        )
    assert rows == [[], [], [], [], [7]]


def test_large_bytes_values_to_list():
    big = [bytes([i]) * 70000 for i in range(3)]
    recs = [ex(b=("bytes", [v, b"s"])) for v in big]
    col = parse_examples(recs, {"b": VarLen("bytes")})["b"]
    assert col.to_list() == [[v, b"s"] for v in big]
    assert bytes(col[2][0]) == big[2]
    fixed = parse_examples(recs, {"b": FixedLen(2, "bytes")})["b"]
    assert fixed.to_list() == [[v, b"s"] for v in big]


def test_bytes_default_fills_missing_records():
    """A missing bytes FixedLen takes its default (TensorFlow's default_value='jpeg' idiom), while
    present values still view the batch."""
    from tfrec_fast import encode_example

    recs = [encode_example({"format": b"png"}), encode_example({"other": 1})]
    col = parse_examples(recs, {"format": FixedLen((), "bytes", default="jpeg")})["format"]
    assert col.to_list() == [b"png", b"jpeg"]
    assert bytes(col[1]) == b"jpeg" and col.lengths.tolist() == [3, 4]
    assert parse_example(recs[1], {"format": FixedLen((), "bytes", default=b"jpeg")}) == {
        "format": b"jpeg"
    }
