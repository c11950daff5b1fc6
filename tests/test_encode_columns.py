"""The typed boundary of the Example codec: the columnar encoder entry point of `_core`
(columns in the decoder's shapes, as an Arrow caller builds them), Kind/Layout enums and
FieldSpec objects instead of bare ints and tuples, and the value rules now kept in Python."""

from __future__ import annotations

from array import array

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tfrec_fast as tfr
from tfrec_fast import _core, proto
from tfrec_fast._core import Kind, Layout
from tfrec_fast.encode import encode_example, encode_examples

INT64, FLOAT, BYTES, FEATURE = Kind.INT64, Kind.FLOAT, Kind.BYTES, Kind.FEATURE


def parse(record) -> dict:
    return proto.example_to_dict(bytes(record))


def records(batch) -> list:
    return [bytes(r) for r in batch]


# ---- _core.encode_examples: columns as an Arrow caller has them --------------------------------


def test_columns_in_arrow_layout_match_the_value_rules():
    ids = np.arange(4, dtype=np.int64)
    scores = np.array([0.5, 1.5, -2.0, 8.0], np.float32)
    tokens = np.array([1, 2, 3, 4, 5], np.int64)
    token_splits = np.array([0, 2, 2, 5, 5], np.int64)
    text = np.frombuffer(b"abcdefg", np.uint8)  # an Arrow binary column: one buffer + offsets
    text_offsets = np.array([0, 1, 3, 3, 7], np.int64)
    got = _core.encode_examples(
        {
            "id": (INT64, ids, None, None),
            "score": (FLOAT, scores, None, None),
            "tokens": (INT64, tokens, None, token_splits),
            "text": (BYTES, text, text_offsets, None),
        },
        4,
    )
    want = encode_examples(
        {
            "id": ids,
            "score": scores,
            "tokens": tfr.Int64s([[1, 2], [], [3, 4, 5], []]),
            "text": [b"a", b"bc", b"", b"defg"],
        }
    )
    assert records(got) == records(want)


def test_bytes_values_in_each_layout_give_the_same_records():
    buffer = np.frombuffer(b"xxhelloyy world", np.uint8)
    starts, ends = np.array([2, 10], np.int64), np.array([7, 15], np.int64)
    forms = [
        (BYTES, [b"hello", b"world"], None, None),  # bytes objects, read in place
        (BYTES, buffer, (starts, ends), None),  # a BytesColumn's starts/ends
        (BYTES, b"helloworld", np.array([0, 5, 10], np.int64), None),  # Arrow's offsets
    ]
    outputs = [records(_core.encode_examples({"w": form}, 2)) for form in forms]
    assert outputs[0] == outputs[1] == outputs[2]
    assert [parse(r) for r in outputs[0]] == [{"w": [b"hello"]}, {"w": [b"world"]}]


def test_present_flags_leave_rows_out():
    batch = _core.encode_examples(
        {"x": (INT64, np.array([1, 2, 3], np.int64), None, None, np.array([True, False, True]))}, 3
    )
    assert [parse(r) for r in batch] == [{"x": [1]}, {}, {"x": [3]}]


def test_feature_column_embeds_serialized_features():
    features = [
        proto.Feature(float_list=proto.FloatList(value=[0.5])).SerializeToString(),
        proto.Feature(bytes_list=proto.BytesList(value=[b"q"])).SerializeToString(),
    ]
    batch = _core.encode_examples({"f": (FEATURE, features, None, None)}, 2)
    assert [parse(r) for r in batch] == [{"f": [0.5]}, {"f": [b"q"]}]


def test_encode_features_writes_one_feature_per_row():
    batch = _core.encode_features(
        "x", (INT64, np.array([1, 2, 3], np.int64), None, np.array([0, 2, 3], np.int64))
    )
    assert [proto.Feature.FromString(bytes(r)).int64_list.value[:] for r in batch] == [[1, 2], [3]]


def test_encode_example_takes_single_python_scalars():
    got = _core.encode_example(
        {
            "i": (INT64, 7, None),
            "f": (FLOAT, 0.25, None),
            "b": (BYTES, b"v", None),
            "l": (INT64, array("q", [1, 2]), None),
        }
    )
    assert got == encode_example({"i": 7, "f": 0.25, "b": b"v", "l": [1, 2]})


# Around float32's largest value and the first double that rounds to infinity (0x1.ffffffp+127),
# the smallest subnormals, signed zeros, NaN and infinities.
_EDGES = [
    3.4028234663852886e38,
    float.fromhex("0x1.fffffefffffffp+127"),
    float.fromhex("0x1.ffffffp+127"),
    float.fromhex("0x1.ffffff0000001p+127"),
    1e39,
    1e308,
    1e-45,
    7e-46,
    1e-46,
    0.0,
    -0.0,
    float("inf"),
    float("nan"),
    1 / 3,
    16777217.0,
]


@given(st.lists(st.floats(width=64) | st.sampled_from(_EDGES + [-x for x in _EDGES]), max_size=40))
@settings(max_examples=300, deadline=None)
def test_float64_values_round_to_float32_as_numpy_and_protobuf(values):
    """FLOAT columns may be float64: the encoder rounds each value to float32 as numpy's cast
    (and protobuf's float_list) does, +-inf beyond float32's range."""
    with np.errstate(over="ignore"):
        want = np.array(values, np.float64).astype(np.float32)
    got = _core.encode_examples(
        {"f": (FLOAT, np.array(values, np.float64), None, np.array([0, len(values)], np.int64))}, 1
    )
    decoded = proto.Example.FromString(bytes(got[0])).features.feature["f"].float_list.value
    assert np.array_equal(
        np.array(decoded, np.float32).view(np.uint32) if values else [],
        want.view(np.uint32) if values else [],
    )
    message = proto.Example()
    message.features.feature["f"].float_list.value.extend(values)
    assert bytes(got[0]) == message.SerializeToString()


@pytest.mark.parametrize("value", _EDGES + [-x for x in _EDGES])
def test_single_floats_round_as_protobuf(value):
    """A Python float alone, in a list and in a float64 array: the same bytes as protobuf."""
    message = proto.Example()
    message.features.feature["f"].float_list.value.append(value)
    want = message.SerializeToString()
    assert encode_example({"f": value}) == want
    assert encode_example({"f": [value]}) == want
    assert encode_example({"f": np.array([value])}) == want


@pytest.mark.parametrize(
    "column, exc, words",
    [
        ((INT64, np.array([1.5]), None, None), TypeError, "int64"),
        ((FLOAT, np.array([1.5], np.float16), None, None), TypeError, "float32 or float64"),
        ((INT64, np.array([1], ">i8"), None, None), TypeError, "native byte order"),
        ((INT64, np.array([1], np.int64), np.array([0, 1], np.int64), None), TypeError, "offsets"),
        ((3, np.array([1], np.int64), None, None), TypeError, "Kind"),
        ([INT64, np.array([1], np.int64), None, None], TypeError, "tuple"),
        ((INT64, np.array([1], np.int64), None), TypeError, "tuple"),
        ((BYTES, b"abc", np.array([0, 4], np.int64), None), ValueError, "outside its buffer"),
        ((BYTES, b"abc", np.array([2, 1], np.int64), None), ValueError, "outside its buffer"),
        (
            (BYTES, b"abc", (np.array([0], np.int32), np.array([1], np.int64)), None),
            TypeError,
            "int64",
        ),
        ((BYTES, b"abc", (np.array([0, 1]), np.array([1], np.int64)), None), ValueError, "differ"),
        ((BYTES, [b"a", "b"], None, None), TypeError, "element 1"),
        ((BYTES, b"abc", np.zeros(0, np.int64), None), ValueError, r"M \+ 1"),
        ((INT64, np.arange(3), None, np.array([0, 2, 1], np.int64)), ValueError, "row 1"),
        ((INT64, np.arange(3), None, np.array([0, 2, 4], np.int64)), ValueError, "row 1: row ends"),
        ((INT64, np.arange(3), None, np.array([0, 3], np.int64)), ValueError, "1 rows, not 2"),
        ((INT64, np.arange(3), None, None), ValueError, "3 rows, not 2"),
        ((INT64, np.arange(2), None, None, np.array([1, 1, 1], np.uint8)), ValueError, "present"),
        ((INT64, np.arange(2), None, None, np.array([1.0, 1.0])), TypeError, "present"),
        ((FEATURE, [b"", b""], None, np.array([0, 2, 2], np.int64)), ValueError, "holds 1 value"),
    ],
)
def test_bad_columns_raise_naming_the_feature(column, exc, words):
    with pytest.raises(exc, match=words) as info:
        _core.encode_examples({"my_col": column}, 2)
    assert "my_col" in str(info.value)


def test_feature_list_steps_cannot_be_left_out():
    steps = (INT64, np.arange(2, dtype=np.int64), None, None, np.array([1, 0], np.uint8))
    with pytest.raises(ValueError, match="step cannot be left out"):
        _core.encode_sequence_examples({}, {"s": (steps, np.array([0, 2], np.int64))}, 1)


def test_columns_are_not_changed_by_encoding():
    values = np.arange(6, dtype=np.int64)
    splits = np.array([0, 3, 6], np.int64)
    before = values.copy(), splits.copy()
    _core.encode_examples({"x": (INT64, values, None, splits)}, 2)
    assert np.array_equal(values, before[0]) and np.array_equal(splits, before[1])


# ---- kinds, layouts and specs are typed -------------------------------------------------------


def test_kinds_are_the_feature_field_numbers():
    assert [int(k) for k in (BYTES, FLOAT, INT64)] == [1, 2, 3]
    assert tfr.VarLen("int64").kind is INT64 and tfr.FixedLen((), "bytes").kind is BYTES
    assert tfr.example.feature_kinds(RecordBatch_of({"a": 1, "b": [0.5], "c": b"x"})) == {
        "a": INT64,
        "b": FLOAT,
        "c": BYTES,
    }


def RecordBatch_of(features: dict):
    return _core.RecordBatch.from_records([encode_example(features)])


def test_field_specs_are_objects_not_tuples():
    batch = RecordBatch_of({"x": [1, 2]})
    spec = _core.FieldSpec("x", INT64, Layout.FIXED, count=2)
    assert (spec.name, spec.kind, spec.layout, spec.count) == ("x", INT64, Layout.FIXED, 2)
    values = _core.decode_examples(batch, [spec], "<records>")[0][0]
    assert values.view(np.int64).tolist() == [1, 2]
    with pytest.raises(TypeError):
        _core.decode_examples(batch, [("x", 0, 0, 2, None, False, False)], "<records>")


def test_field_specs_compiled_once_decode_as_the_list_does():
    batch = _core.RecordBatch.from_records(
        [encode_example({"x": [1, 2], "w": b"ab"}), encode_example({"x": [3, 4]})]
    )
    listed = [
        _core.FieldSpec("x", INT64, Layout.FIXED, count=2),
        _core.FieldSpec("w", BYTES, Layout.FIXED, count=1, default=b""),
    ]
    compiled = _core.FieldSpecs(listed)
    listed.append(_core.FieldSpec("y", INT64, Layout.VAR))  # a copy: later edits are not seen
    assert len(compiled) == 2 and compiled[-1].name == "w" and compiled[0].count == 2
    with pytest.raises(IndexError):
        compiled[2]
    for a, b in zip(
        _core.decode_examples(batch, compiled, "<records>"),
        _core.decode_examples(batch, listed[:2], "<records>"),
    ):
        assert [None if x is None else x.tolist() for x in a] == [
            None if x is None else x.tolist() for x in b
        ]
    with pytest.raises(TypeError, match="FieldSpec objects, not tuple"):
        _core.FieldSpecs([("x", 0, 0, 2, None, False, False)])
    with pytest.raises(TypeError):
        _core.decode_examples(batch, 3, "<records>")


@pytest.mark.parametrize("count", [2**58, 2**57 + 1, 2**61])
def test_fixed_bytes_columns_too_large_for_memory_are_a_memory_error(count):
    """Not the length_error of a std::vector (a ValueError), nor an overflowed size."""
    batch = _core.RecordBatch.from_records([encode_example({"x": b"a"})] * 4)
    with pytest.raises(MemoryError):
        _core.decode_examples(batch, [_core.FieldSpec("x", BYTES, Layout.FIXED, count=count)], "r")


@pytest.mark.parametrize(
    "spec, words",
    [
        (dict(kind=FEATURE, layout=Layout.VAR), "no list"),
        (dict(kind=INT64, layout=Layout.FIXED, count=2, default=b"\0" * 8), "16 needed"),
        (dict(kind=INT64, layout=Layout.RAW_BYTES, count=2), "raw bytes"),
        (dict(kind=INT64, layout=Layout.VAR, default=b""), "default"),
    ],
)
def test_field_specs_no_record_could_satisfy_are_refused(spec, words):
    kind, layout = spec.pop("kind"), spec.pop("layout")
    with pytest.raises(ValueError, match=words):
        _core.decode_examples(
            RecordBatch_of({"x": 1}), [_core.FieldSpec("x", kind, layout, **spec)], "<records>"
        )


# ---- value rules, now in Python ----------------------------------------------------------------


def test_a_float_first_then_ints_is_a_float_list():
    """[1, 0.5] made a float_list but [0.5, 1] raised "mixed kinds": ints mix with floats in
    either order, as numpy's promotion does."""
    assert parse(encode_example({"x": [0.5, 1, True]})) == {"x": [0.5, 1.0, 1.0]}
    assert parse(encode_example({"x": np.array([0.5, 1], dtype=object)})) == {"x": [0.5, 1.0]}


def test_decoded_bytes_with_defaults_encode_back():
    """A FixedLen bytes column with a default (start -1 marks the default) failed with "value
    out of bounds": it now writes the default, as the column reads."""
    batch = tfr.RecordBatch.from_records([encode_example({"b": b"here"}), encode_example({})])
    column = tfr.parse_examples(batch, {"b": tfr.FixedLen((), "bytes", default=b"dflt")})["b"]
    assert column.to_list() == [b"here", b"dflt"]
    assert [parse(r) for r in encode_examples({"b": column})] == [
        {"b": [b"here"]},
        {"b": [b"dflt"]},
    ]


def test_non_contiguous_memoryview_values():
    """A strided memoryview raised BufferError; its bytes are its elements, as bytes() gives."""
    view = memoryview(b"abcdef")[::2]
    assert parse(encode_example({"m": view, "l": [view]})) == {"m": [b"ace"], "l": [b"ace"]}


def test_steps_of_different_kinds():
    """Steps of one feature list with different kinds: each step is its own Feature."""
    batch = tfr.encode_sequence_examples({}, {"s": [[[1], [2.5], [b"x"], []], [[3]]]})
    lists = [proto.sequence_example_to_dict(bytes(r))[1]["s"] for r in batch]
    assert lists == [[[1], [2.5], [b"x"], []], [[3]]]


def test_str_array_columns_are_utf8():
    batch = encode_examples({"u": np.array([["a", "bc"], ["\u00e9", ""]])})
    assert [parse(r) for r in batch] == [{"u": [b"a", b"bc"]}, {"u": ["\u00e9".encode(), b""]}]
    with pytest.raises(ValueError, match="UTF-8"):
        encode_examples({"u": np.array(["\ud800"])})


def test_int_overflow_names_row_and_feature():
    with pytest.raises(OverflowError, match=r"feature 'x', row 2: int 9223372036854775808"):
        encode_examples({"x": [[1], [2], [2**63]]})
    with pytest.raises(OverflowError, match=r"feature 'x', row 1: int -9223372036854775809"):
        encode_examples({"x": [0, -(2**63) - 1]})
