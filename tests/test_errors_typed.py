"""Errors that are typed and truthful (issue #10, section 3): the spec-free parser, errors
crossing processes (pickle, PyTorch's worker re-raise), misspelled features, bad specs and
dtypes, and the CRC backend variable."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
from _oracle import build_file
from hypothesis import given, settings
from hypothesis import strategies as st

import tfrec_fast as tfr
from tfrec_fast.errors import DataLossError, ExampleParseError
from tfrec_fast.proto import example_to_dict

HAVE_TORCH = True
try:
    import torch  # noqa: F401
except ImportError:
    HAVE_TORCH = False
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="PyTorch not installed")


# ---- the spec-free parser is the C++ decoder -------------------------------------------------


@pytest.mark.parametrize("record", [b"\x0a\x05garbage", b"\x0a", b"\xff\xff", b"\x0a\x03\x0a\x01"])
def test_parse_example_without_spec_raises_example_parse_error(record):
    with pytest.raises(ExampleParseError) as info:
        tfr.parse_example(record)
    assert info.value.record_index == 0


values = st.one_of(
    st.lists(st.integers(-(1 << 63), (1 << 63) - 1), max_size=5),
    st.lists(st.floats(width=32, allow_nan=False), max_size=5),
    st.lists(st.binary(max_size=8), max_size=5),
)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(max_size=6), values, max_size=5))
def test_parse_example_without_spec_equals_protobuf(features):
    record = tfr.encode_example(
        {
            k: (
                tfr.Int64s(v)
                if v and isinstance(v[0], int)
                else tfr.Floats(v)
                if v and isinstance(v[0], float)
                else tfr.Bytes(v)
                if v
                else tfr.Floats([])
            )
            for k, v in features.items()
        }
    )
    assert tfr.parse_example(record) == example_to_dict(record)


def test_parse_example_without_spec_on_the_corpus(corpus_file):
    for rel in (
        "example/edge_values.tfrecord",
        "example/voc_like.tfrecord",
        "example/unpacked_lists_handbuilt.tfrecord",
    ):
        for record in tfr.read_records(corpus_file(rel)):
            got, want = tfr.parse_example(record), example_to_dict(record)
            assert got.keys() == want.keys()
            for key in want:  # NaN != NaN: compare floats as float32 bits
                g, w = got[key], want[key]
                if w and isinstance(w[0], float):
                    g, w = np.float32(g).view(np.uint32), np.float32(w).view(np.uint32)
                assert np.array_equal(g, w), (rel, key)


# ---- errors across processes -----------------------------------------------------------------

ERRORS = [
    DataLossError(
        "truncated record at 46: the stream ends (x)",
        path="dir: a/b.tfrecord",
        record_index=3,
        offset=46,
        reason="truncated",
    ),
    DataLossError("bad header", path="f", record_index=0, offset=0, reason="length_checksum"),
    ExampleParseError(
        "is missing and has no default", path="f.tfrecord", record_index=7, feature="it's"
    ),
    ExampleParseError("not a valid tf.train.Example", path="f.tfrecord", record_index=2),
]
FIELDS = ("detail", "path", "record_index", "offset", "reason", "feature")


def fields(e):
    return [getattr(e, k, None) for k in FIELDS]


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_errors_pickle(error):
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error) and fields(again) == fields(error)
    assert str(again) == str(error)


@needs_torch
@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_errors_survive_torch_reraise(error):
    from torch._utils import ExceptionWrapper

    try:
        raise error
    except type(error):
        wrapper = ExceptionWrapper(sys.exc_info(), where="in DataLoader worker process 0")
    with pytest.raises(type(error)) as info:
        wrapper.reraise()
    assert fields(info.value) == fields(error)
    assert "None" not in str(info.value).splitlines()[-1]
    assert "DataLoader worker process 0" in str(info.value)  # torch's context is kept


def test_message_without_location_has_no_none_placeholders():
    assert str(DataLossError("just text")) == "just text"
    assert "None" not in str(DataLossError("x", path="f", reason="index_mismatch"))
    assert str(ExampleParseError("bad", feature="f")) == "feature 'f': bad"


@needs_torch
def test_dataloader_worker_errors_keep_their_attributes(tmp_path):
    from torch.utils.data import DataLoader

    from tfrec_fast.torch import TFRecordDataset

    good = [tfr.encode_example({"x": i}) for i in range(10)]
    data = bytearray(build_file(good))
    data[-1] ^= 0xFF  # the last record's data checksum
    path = tmp_path / "damaged.tfrecord"
    path.write_bytes(bytes(data))
    loader = DataLoader(
        TFRecordDataset(str(path), spec={"x": tfr.FixedLen((), "int64")}),
        batch_size=4,
        num_workers=1,
    )
    with pytest.raises(DataLossError) as info:
        list(loader)
    e = info.value
    assert (e.path, e.record_index, e.reason) == (str(path), 9, "data_checksum")
    assert e.offset == len(build_file(good[:9]))


# ---- misspelled features -----------------------------------------------------------------------


def test_described_feature_absent_from_every_record_raises(tmp_path):
    path = tmp_path / "f.tfrecord"
    with tfr.TFRecordWriter(path) as w:
        for i in range(5):
            w.write_example({"label": i})
    with pytest.raises(ExampleParseError) as info:
        list(tfr.read_examples(str(path), {"nope": "int"}))
    assert (info.value.feature, info.value.path, info.value.record_index) == ("nope", str(path), 0)
    assert "label" in str(info.value)
    # Present in some record of the batch: the others read as empty, no error.
    assert tfr.parse_examples(
        [tfr.encode_example({"label": 1}), tfr.encode_example({"x": 2})], {"x": "int"}
    )["x"].to_list() == [[], [2]]
    # A VarLen spec keeps TensorFlow's meaning (absent: no values); default=None requires it in
    # every record.
    (cols,) = tfr.read_examples(str(path), {"nope": tfr.VarLen("int64")})
    assert cols["nope"].to_list() == [[]] * 5
    with pytest.raises(ExampleParseError, match="nope.*missing"):
        tfr.parse_examples(
            [tfr.encode_example({"nope": 1}), tfr.encode_example({"x": 2})],
            {"nope": tfr.VarLen("int64", default=None)},
        )


# ---- untyped errors made typed -----------------------------------------------------------------


def test_a_set_as_spec():
    with pytest.raises(TypeError, match="dict .* or a list of feature names, not set"):
        tfr.parse_examples([tfr.encode_example({"a": 1})], {"a"})


@pytest.mark.parametrize(
    "make",
    [
        lambda: tfr.FixedLen((), "int33"),
        lambda: tfr.VarLen("foo"),
        lambda: tfr.parse_examples([b""], {"a": "inty"}),
    ],
)
def test_unknown_dtype_names_list_the_valid_ones(make):
    with pytest.raises(TypeError) as info:
        make()
    for name in ("int64", "float32", "bytes", "uint8"):
        assert name in str(info.value)


def test_a_raw_bytes_dtype_on_an_int64_feature_says_what_it_means():
    record = tfr.encode_example({"a": np.array([1, 2], np.int64)})
    with pytest.raises(ExampleParseError) as info:
        tfr.parse_examples([record], {"a": tfr.FixedLen((2,), "int32")})
    assert info.value.feature == "a"
    assert "raw array" in str(info.value) and "'int64'" in str(info.value)


@pytest.mark.parametrize(
    "value, warns", [("bogus", "is not a CRC32C backend"), ("portable", None), ("auto", None)]
)
def test_crc_backend_variable_is_checked(value, warns):
    out = subprocess.run(
        [sys.executable, "-W", "always", "-c", "import tfrec_fast as t; print(t.crc32c_backend())"],
        env=dict(os.environ, TFREC_FAST_CRC32C=value),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    if warns:
        assert warns in out.stderr and "portable" in out.stderr and "avx512" in out.stderr
    else:
        assert "TFREC_FAST_CRC32C" not in out.stderr
    if value == "auto":
        assert out.stdout.strip() in ("avx512", "sse42", "arm64", "portable")


def test_cat_decodes_with_the_c_decoder_and_names_the_record():
    from tfrec_fast.describe import record_to_json

    record = tfr.encode_example({"b": b"hi", "i": [1, 2], "f": 0.5})
    assert record_to_json(record) == '{"b": ["hi"], "f": [0.5], "i": [1, 2]}'
    with pytest.raises(ExampleParseError) as info:
        record_to_json(b"\x0a\x05garbage", 3, "f.tfrecord")
    assert (info.value.path, info.value.record_index) == ("f.tfrecord", 3)
