"""tfrec_fast.proto: message classes wire-compatible with tf.train.Example & co, and conversions.

Checked against the conformance corpus (values, bits of every float, byte-exact re-serialization),
and, when installed, against TensorFlow and the `tfrecord` package (same bytes both ways, and
importable in one process with them)."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import math
import os
import pickle
import subprocess
import sys

import _corpus
import numpy as np
import pytest
from google.protobuf import descriptor_pb2

import tfrec_fast
from tfrec_fast import proto
from tfrec_fast.proto import (
    BytesList,
    Example,
    Feature,
    Features,
    FloatList,
    Int64List,
    SequenceExample,
    as_serialized,
    dict_to_example,
    example_to_dict,
    sequence_example_to_dict,
)

PACKED_EXAMPLE_FILES = [
    "edge_values",
    "long_lists",
    "mnist_like",
    "packed_lists",
    "tutorial_1000",
    "voc_like",
]
ALL_EXAMPLE_FILES = PACKED_EXAMPLE_FILES + ["unpacked_lists_handbuilt"]
SEQUENCE_FILE = "sequence/sequence_example_200.tfrecord"

SAMPLE = {
    "label": 3,
    "flag": True,
    "score": 0.1,  # -> float32
    "name": "héllo",  # str -> UTF-8 bytes
    "raw": b"\x00\xff\x80",
    "ids": [-(1 << 63), -1, 0, (1 << 63) - 1],
    "probs": (0.5, -0.0, float("inf")),
    "words": [b"a", "b", bytearray(b"c"), memoryview(b"d")],
    "img": np.arange(6, dtype=np.uint8).reshape(2, 3),  # flattened, int64
    "bbox": np.array([[0.25, 0.5], [1e-3, 2.0]], np.float64),  # -> float32
    "mask": np.array([True, False]),
    "empty_i": np.array([], np.int64),
    "empty_f": np.array([], np.float32),
    "empty_b": np.array([], "S1"),
    "np_scalar": np.int16(-7),
    "np_str": np.array(["x", "yz"]),
    "np_obj": np.array([b"o", "p"], object),
    "typed_empty": Feature(int64_list=Int64List()),
}


def _f32(x):
    return float(np.float32(x))


SAMPLE_DICT = {
    "label": [3],
    "flag": [1],
    "score": [_f32(0.1)],
    "name": ["héllo".encode()],
    "raw": [b"\x00\xff\x80"],
    "ids": [-(1 << 63), -1, 0, (1 << 63) - 1],
    "probs": [0.5, -0.0, math.inf],
    "words": [b"a", b"b", b"c", b"d"],
    "img": [0, 1, 2, 3, 4, 5],
    "bbox": [0.25, 0.5, _f32(1e-3), 2.0],
    "mask": [1, 0],
    "empty_i": [],
    "empty_f": [],
    "empty_b": [],
    "np_scalar": [-7],
    "np_str": [b"x", b"yz"],
    "np_obj": [b"o", b"p"],
    "typed_empty": [],
}
SAMPLE_KINDS = {
    "label": "int64_list",
    "flag": "int64_list",
    "score": "float_list",
    "name": "bytes_list",
    "raw": "bytes_list",
    "ids": "int64_list",
    "probs": "float_list",
    "words": "bytes_list",
    "img": "int64_list",
    "bbox": "float_list",
    "mask": "int64_list",
    "empty_i": "int64_list",
    "empty_f": "float_list",
    "empty_b": "bytes_list",
    "np_scalar": "int64_list",
    "np_str": "bytes_list",
    "np_obj": "bytes_list",
    "typed_empty": "int64_list",
}


# ---- the message classes -------------------------------------------------------------------------


def test_schema_is_tfs_in_our_own_package():
    assert proto.PROTO_PACKAGE == "tfrec_fast.v1"
    assert Example.DESCRIPTOR.full_name == "tfrec_fast.v1.Example"
    with pytest.raises(KeyError):
        proto.DESCRIPTOR_POOL.FindMessageTypeByName("tensorflow.Example")
    fdp = descriptor_pb2.FileDescriptorProto()
    Example.DESCRIPTOR.file.CopyToProto(fdp)
    assert (fdp.package, fdp.syntax) == ("tfrec_fast.v1", "proto3")
    F = descriptor_pb2.FieldDescriptorProto
    rep, opt, msg = F.LABEL_REPEATED, F.LABEL_OPTIONAL, F.TYPE_MESSAGE

    def fields(m):
        return {
            f.name: (
                f.number,
                f.label,
                f.type,
                f.type_name.rsplit(".", 1)[-1],
                f.options.packed,
                f.HasField("oneof_index"),
            )
            for f in m.field
        }

    got = {m.name: fields(m) for m in fdp.message_type}
    got.update(
        {
            m.name + "." + e.name: fields(e)
            for m in fdp.message_type
            for e in m.nested_type
            if e.options.map_entry
        }
    )
    assert got == {
        "BytesList": {"value": (1, rep, F.TYPE_BYTES, "", False, False)},
        "FloatList": {"value": (1, rep, F.TYPE_FLOAT, "", True, False)},
        "Int64List": {"value": (1, rep, F.TYPE_INT64, "", True, False)},
        "Feature": {
            "bytes_list": (1, opt, msg, "BytesList", False, True),
            "float_list": (2, opt, msg, "FloatList", False, True),
            "int64_list": (3, opt, msg, "Int64List", False, True),
        },
        "Features": {"feature": (1, rep, msg, "FeatureEntry", False, False)},
        "Features.FeatureEntry": {
            "key": (1, opt, F.TYPE_STRING, "", False, False),
            "value": (2, opt, msg, "Feature", False, False),
        },
        "FeatureList": {"feature": (1, rep, msg, "Feature", False, False)},
        "FeatureLists": {"feature_list": (1, rep, msg, "FeatureListEntry", False, False)},
        "FeatureLists.FeatureListEntry": {
            "key": (1, opt, F.TYPE_STRING, "", False, False),
            "value": (2, opt, msg, "FeatureList", False, False),
        },
        "Example": {"features": (1, opt, msg, "Features", False, False)},
        "SequenceExample": {
            "context": (1, opt, msg, "Features", False, False),
            "feature_lists": (2, opt, msg, "FeatureLists", False, False),
        },
    }
    assert [o.name for o in fdp.message_type[3].oneof_decl] == ["kind"]


def test_lists_are_packed_on_the_wire():
    assert Int64List(value=[1, 2, 300]).SerializeToString() == b"\x0a\x04\x01\x02\xac\x02"
    assert FloatList(value=[1.0]).SerializeToString() == b"\x0a\x04\x00\x00\x80\x3f"
    # and unpacked input parses the same
    assert list(Int64List.FromString(b"\x08\x01\x08\x02").value) == [1, 2]
    assert list(FloatList.FromString(b"\x0d\x00\x00\x80\x3f").value) == [1.0]


def test_messages_pickle():
    ex = dict_to_example({"a": [1, 2], "b": b"x"})
    assert pickle.loads(pickle.dumps(ex)) == ex
    assert type(ex).__module__ == "tfrec_fast.proto"


# ---- conversions ---------------------------------------------------------------------------------


def test_round_trip_dict_example_bytes_dict():
    ex = dict_to_example(SAMPLE)
    assert isinstance(ex, Example)
    assert {k: f.WhichOneof("kind") for k, f in ex.features.feature.items()} == SAMPLE_KINDS
    data = ex.SerializeToString()
    d = example_to_dict(data)
    assert list(d) == sorted(SAMPLE_DICT)
    assert d == SAMPLE_DICT
    assert math.copysign(1.0, d["probs"][1]) == -1.0
    assert all(type(v) is int for v in d["ids"] + d["label"] + d["mask"])
    assert all(type(v) is float for v in d["bbox"])
    assert all(type(v) is bytes for v in d["words"])
    # the message itself, and other bytes-likes
    assert example_to_dict(ex) == d
    for buf in (
        bytearray(data),
        memoryview(data),
        np.frombuffer(data, np.uint8),
        np.frombuffer(data + b"\0", np.uint8)[:-1],
    ):
        assert example_to_dict(buf) == d


def test_float32_bits_round_trip():
    bits = np.array(
        [0x7FC00001, 0xFFC00000, 0x7FFFFFFF, 0x80000000, 0x00000001, 0x7F7FFFFF], np.uint32
    )
    ex = dict_to_example({"f": bits.view(np.float32)})
    got = np.array(example_to_dict(ex.SerializeToString())["f"], np.float64).astype(np.float32)
    assert got.view(np.uint32).tolist() == bits.tolist()


def test_dict_to_example_feature_values():
    tf_like = Feature(bytes_list=BytesList(value=[b"q"]))
    ex = dict_to_example({"f": tf_like, "g": Feature()})
    assert example_to_dict(ex) == {"f": [b"q"], "g": []}
    assert ex.features.feature["g"].WhichOneof("kind") is None


def test_empty_dict_gives_present_empty_features():
    assert dict_to_example({}).SerializeToString() == b"\x0a\x00"
    assert example_to_dict(b"") == {}
    assert example_to_dict(b"\x0a\x00") == {}


@pytest.mark.parametrize(
    "value, err, words",
    [
        ([], ValueError, "'k'"),
        ((), ValueError, "'k'"),
        ([1, 2.5], ValueError, "mixed"),
        ([b"a", 1], ValueError, "mixed"),
        (None, TypeError, "NoneType"),
        ([object()], TypeError, "object"),
        ({"a": 1}, TypeError, "dict"),
        (1 << 63, ValueError, "'k'"),
        (np.array([1 << 63], np.uint64), ValueError, "int64"),
        (np.array([1 + 2j]), TypeError, "complex"),
        (np.array([1, "a"], object), ValueError, "mixed"),
        (Example(), TypeError, "Feature"),
    ],
)
def test_dict_to_example_errors_name_the_feature(value, err, words):
    with pytest.raises(err) as info:
        dict_to_example({"k": value})
    assert "'k'" in str(info.value) and words in str(info.value)


def test_dict_to_example_rejects_non_str_keys():
    with pytest.raises(TypeError):
        dict_to_example({b"k": 1})


def test_as_serialized():
    data = b"\x0a\x00"
    for obj in (data, bytearray(data), memoryview(data)):
        assert as_serialized(obj) is obj
    arr = np.frombuffer(data, np.uint8)
    assert as_serialized(arr) is arr
    assert as_serialized(Example(features=Features())) == data
    for bad in ("text", 3, None, [1]):
        with pytest.raises(TypeError):
            as_serialized(bad)
    with pytest.raises(TypeError):
        example_to_dict("not bytes")


def test_sequence_example_to_dict():
    seq = SequenceExample()
    seq.context.feature["len"].int64_list.value.append(2)
    toks = seq.feature_lists.feature_list["tokens"].feature
    toks.add().int64_list.value.extend([1, 2])
    toks.add().bytes_list.value.append(b"w")
    seq.feature_lists.feature_list["empty"].SetInParent()
    want = ({"len": [2]}, {"empty": [], "tokens": [[1, 2], [b"w"]]})
    assert sequence_example_to_dict(seq) == want
    assert sequence_example_to_dict(seq.SerializeToString()) == want
    assert sequence_example_to_dict(b"") == ({}, {})
    assert list(sequence_example_to_dict(seq)[1]) == ["empty", "tokens"]


# ---- the conformance corpus ----------------------------------------------------------------------


def _case(corpus_dir, rel):
    path = corpus_dir / rel
    with open(str(path) + _corpus.SUFFIX, encoding="utf-8") as f:
        return path, json.load(f)


def _float_bits(values):
    return np.array(values, np.float64).astype(np.float32).view("<u4")


def _strings(kind, values):
    if kind == "int64_list":
        return [str(v) for v in values]
    if kind == "bytes_list":
        return [base64.b64encode(v).decode("ascii") for v in values]
    return [repr(v) for v in values]


def _sha256_le(kind, values):
    if kind == "int64_list":
        return hashlib.sha256(np.array(values, "<i8").tobytes()).hexdigest()
    if kind == "float_list":
        return hashlib.sha256(_float_bits(values).tobytes()).hexdigest()
    h = hashlib.sha256()
    for v in values:
        h.update(len(v).to_bytes(8, "little") + v)
    return h.hexdigest()


def _describe(kind, values, summarize=False):
    """A feature in the corpus sidecar's JSON form (MANIFEST.md)."""
    values = list(values)
    if kind is None:
        return {"kind": None, "value": []}
    bits = ["%08x" % b for b in _float_bits(values).tolist()] if kind == "float_list" else None
    if summarize:
        out = {
            "kind": kind,
            "summarized": True,
            "count": len(values),
            "head": _strings(kind, values[:8]),
            "tail": _strings(kind, values[-8:]),
            "sha256_le": _sha256_le(kind, values),
        }
        if bits is not None:
            out.update(head_bits=bits[:8], tail_bits=bits[-8:])
        return out
    out = {"kind": kind, "value": _strings(kind, values)}
    if bits is not None:
        out["bits"] = bits
    return out


def _describe_msg(feature, expected):
    kind = feature.WhichOneof("kind")
    values = getattr(feature, kind).value if kind else []
    return _describe(kind, values, expected.get("summarized", False))


def _describe_features(features, expected_features):
    return {
        k: _describe_msg(features.feature[k], expected_features.get(k, {}))
        for k in features.feature
    }


def _records(path):
    return [bytes(r) for r in tfrec_fast.read_records(str(path))]


@pytest.mark.parametrize("name", ALL_EXAMPLE_FILES)
def test_corpus_examples_decode_to_expected(corpus_dir, name):
    path, exp = _case(corpus_dir, "example/%s.tfrecord" % name)
    records = _records(path)
    assert len(records) == exp["record_count"]
    decoded = exp["decoded_first_records"]
    for i, (rec, want) in enumerate(zip(records, decoded)):
        ex = Example.FromString(rec)
        got = {
            "has_features": ex.HasField("features"),
            "features": _describe_features(ex.features, want["features"]),
        }
        assert got == want, "record %d" % i
        # example_to_dict: same values, keys sorted (the kind of an empty list is not kept)
        d = example_to_dict(rec)
        assert list(d) == sorted(want["features"])
        assert {
            k: _describe(
                want["features"][k]["kind"], v, want["features"][k].get("summarized", False)
            )
            for k, v in d.items()
        } == want["features"], "record %d" % i
    for rec in records[len(decoded) :]:  # the rest at least parse
        example_to_dict(rec)


@pytest.mark.parametrize("name", PACKED_EXAMPLE_FILES)
def test_corpus_examples_reserialize_byte_exact(corpus_dir, name):
    path, exp = _case(corpus_dir, "example/%s.tfrecord" % name)
    for i, rec in enumerate(_records(path)):
        ex = Example.FromString(rec)
        assert ex.SerializeToString(deterministic=True) == rec, "record %d" % i
        # and through a plain dict (empty lists typed by the kind they had)
        if not ex.HasField("features"):
            continue
        d = {}
        for k, v in example_to_dict(ex).items():
            kind = ex.features.feature[k].WhichOneof("kind")
            d[k] = v if v else Feature(**{kind: getattr(ex.features.feature[k], kind)})
        assert dict_to_example(d).SerializeToString(deterministic=True) == rec, "record %d" % i


def test_corpus_unpacked_lists_parse_like_their_packed_twin(corpus_dir):
    unpacked = _records(_case(corpus_dir, "example/unpacked_lists_handbuilt.tfrecord")[0])
    packed = _records(_case(corpus_dir, "example/packed_lists.tfrecord")[0])
    assert len(unpacked) == len(packed)
    assert unpacked != packed
    for u, p in zip(unpacked, packed):
        assert Example.FromString(u) == Example.FromString(p)
        assert repr(example_to_dict(u)) == repr(example_to_dict(p))  # NaN != NaN
        assert Example.FromString(u).SerializeToString(deterministic=True) == p


def test_corpus_sequence_examples(corpus_dir):
    path, exp = _case(corpus_dir, SEQUENCE_FILE)
    records = _records(path)
    assert len(records) == exp["record_count"]
    decoded = exp["decoded_first_records"]
    for i, rec in enumerate(records):
        seq = SequenceExample.FromString(rec)
        assert seq.SerializeToString(deterministic=True) == rec, "record %d" % i
        context, lists = sequence_example_to_dict(rec)
        assert list(context) == sorted(context) and list(lists) == sorted(lists)
        if i >= len(decoded):
            continue
        want = decoded[i]
        fl = seq.feature_lists.feature_list
        got = {
            "has_context": seq.HasField("context"),
            "context": _describe_features(seq.context, want["context"]),
            "has_feature_lists": seq.HasField("feature_lists"),
            "feature_lists": {k: [_describe_msg(f, {}) for f in fl[k].feature] for k in fl},
        }
        assert got == want, "record %d" % i
        assert context == {k: [v for v in _values(seq.context.feature[k])] for k in context}
        assert lists == {k: [_values(f) for f in fl[k].feature] for k in fl}


def _values(feature):
    kind = feature.WhichOneof("kind")
    return list(getattr(feature, kind).value) if kind else []


def test_pure_python_protobuf_backend():
    """The schema also builds with protobuf's pure-Python implementation."""
    code = (
        "import json; from tfrec_fast import proto as P; "
        "from google.protobuf.internal import api_implementation as a; "
        "e = P.dict_to_example({'a': [1, 2], 'b': 0.5, 'c': b'x'}); "
        "print(json.dumps([a.Type(), e.SerializeToString(deterministic=True).hex(), "
        "repr(P.example_to_dict(e.SerializeToString()))]))"
    )
    env = dict(os.environ, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION="python")
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr[-3000:]
    impl, hexdata, d = json.loads(out.stdout.strip().splitlines()[-1])
    assert impl == "python"
    ours = dict_to_example({"a": [1, 2], "b": 0.5, "c": b"x"})
    assert bytes.fromhex(hexdata) == ours.SerializeToString(deterministic=True)
    assert d == repr({"a": [1, 2], "b": [0.5], "c": [b"x"]})


# ---- TensorFlow and the tfrecord package ---------------------------------------------------------


@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("tensorflow")


def test_tf_parses_our_bytes(tf):
    ours = dict_to_example(SAMPLE)
    theirs = tf.train.Example.FromString(ours.SerializeToString())
    assert theirs.DESCRIPTOR.full_name == "tensorflow.Example"
    assert example_to_dict(theirs) == SAMPLE_DICT
    for key, kind in SAMPLE_KINDS.items():
        feature = theirs.features.feature[key]
        assert feature.WhichOneof("kind") == kind
        assert list(getattr(feature, kind).value) == SAMPLE_DICT[key]
    assert theirs.SerializeToString(deterministic=True) == ours.SerializeToString(
        deterministic=True
    )
    parsed = tf.io.parse_single_example(
        ours.SerializeToString(),
        {
            "ids": tf.io.VarLenFeature(tf.int64),
            "bbox": tf.io.FixedLenFeature([4], tf.float32),
            "words": tf.io.VarLenFeature(tf.string),
        },
    )
    assert parsed["ids"].values.numpy().tolist() == SAMPLE_DICT["ids"]
    assert parsed["bbox"].numpy().tolist() == SAMPLE_DICT["bbox"]
    assert parsed["words"].values.numpy().tolist() == SAMPLE_DICT["words"]


def test_tf_messages_accepted(tf):
    t = tf.train
    theirs = t.Example(
        features=t.Features(
            feature={
                "i": t.Feature(int64_list=t.Int64List(value=[5, -5])),
                "f": t.Feature(float_list=t.FloatList(value=[0.1])),
                "b": t.Feature(bytes_list=t.BytesList(value=[b"z"])),
                "none": t.Feature(),
            }
        )
    )
    want = {"b": [b"z"], "f": [_f32(0.1)], "i": [5, -5], "none": []}
    assert example_to_dict(theirs) == want
    assert as_serialized(theirs) == theirs.SerializeToString()
    ours = dict_to_example({"tf_feature": theirs.features.feature["i"]})
    assert example_to_dict(ours) == {"tf_feature": [5, -5]}
    seq = t.SequenceExample()
    seq.context.feature["id"].bytes_list.value.append(b"s")
    seq.feature_lists.feature_list["x"].feature.add().float_list.value.extend([1.5, 2.5])
    assert sequence_example_to_dict(seq) == ({"id": [b"s"]}, {"x": [[1.5, 2.5]]})
    assert SequenceExample.FromString(seq.SerializeToString()).SerializeToString(
        deterministic=True
    ) == seq.SerializeToString(deterministic=True)


def _run_py(code):
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


_SAME_PROCESS = """
import json
{first}
{second}
from tfrec_fast import proto as P
theirs = {cls}(features={mod}.Features(feature={{
    "a": {mod}.Feature(int64_list={mod}.Int64List(value=[1, 2]))}}))
ours = P.dict_to_example({{"a": [1, 2]}})
print(json.dumps([P.example_to_dict(theirs) == {{"a": [1, 2]}},
                  {cls}.FromString(ours.SerializeToString()) == theirs,
                  theirs.DESCRIPTOR.full_name, ours.DESCRIPTOR.full_name]))
"""


@pytest.mark.skipif(
    importlib.util.find_spec("tensorflow") is None,
    reason="optional peer tensorflow not installed (CI's peers step runs this)",
)
@pytest.mark.parametrize("order", ["ours_first", "tf_first"])
def test_same_process_as_tensorflow(order):
    imports = ["import tfrec_fast.proto", "import tensorflow as tf"]
    if order == "tf_first":
        imports.reverse()
    code = _SAME_PROCESS.format(
        first=imports[0], second=imports[1], cls="tf.train.Example", mod="tf.train"
    )
    assert _run_py(code) == [True, True, "tensorflow.Example", "tfrec_fast.v1.Example"]


@pytest.mark.skipif(
    importlib.util.find_spec("tfrecord") is None,
    reason="optional peer `tfrecord` not installed (CI's peers step runs this)",
)
@pytest.mark.parametrize("order", ["ours_first", "tfrecord_first"])
def test_same_process_as_tfrecord_package(order):
    """The `tfrecord` package registers tensorflow.* in the default pool (so it cannot share a
    process with TensorFlow itself); ours lives elsewhere and shares one with either."""
    imports = ["import tfrec_fast.proto", "from tfrecord import example_pb2 as pb"]
    if order == "tfrecord_first":
        imports.reverse()
    code = _SAME_PROCESS.format(first=imports[0], second=imports[1], cls="pb.Example", mod="pb")
    assert _run_py(code) == [True, True, "tensorflow.Example", "tfrec_fast.v1.Example"]
