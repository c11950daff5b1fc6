"""The Example decoder's fast path (each record checked against the byte layout learned from the
records before it, src/cpp/core/record_layout.h) against protobuf, the oracle (tfrec_fast.proto;
and TensorFlow's parse_example where it is installed).

Batches of records laid out by one writer, with what leaves that layout mixed in: a key given
twice (the last entry wins, whatever its kind), fields out of order (entries reordered, a map
entry's value before its key, the map split in two Features fields), unknown fields (in the
Example, its map, Features and lists), unpacked lists, empty lists and Features without one, a map
entry's value given several times (protobuf merges the Features), missing features, values of other
widths, lengths written in more bytes than needed. Each batch is decoded whole (most records by
the layout) and record by record (a one-record batch never uses a layout); both must give what
protobuf reads, or fail at the same record, on the same feature, with the same message.
"""

from __future__ import annotations

import importlib.util
import struct
from functools import partial
from typing import Dict, List, Optional, Tuple

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tfrec_fast import RecordBatch
from tfrec_fast.errors import ExampleParseError
from tfrec_fast.example import BytesColumn, FixedLen, Ragged, VarLen, parse_example, parse_examples
from tfrec_fast.proto import Example, example_to_dict

# ---- the wire format, written by hand (to choose every encoding protobuf accepts) --------------


def varint(n: int, extra: int = 0) -> bytes:
    """n as a varint; `extra` continuation bytes more than needed (protobuf reads them alike)."""
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        if not n:
            out.append(byte | (0x80 if extra else 0))
            break
        out.append(byte | 0x80)
    for i in range(extra):
        out.append(0x80 if i + 1 < extra else 0)
    return bytes(out)


def tag(field: int, wire_type: int) -> bytes:
    return varint(field << 3 | wire_type)


def ld(field: int, payload: bytes, extra: int = 0) -> bytes:
    return tag(field, 2) + varint(len(payload), extra) + payload


UNKNOWN = [
    tag(7, 0) + varint(300),
    tag(9, 1) + b"\x01" * 8,
    ld(11, b"junk"),
    tag(13, 5) + b"\x02" * 4,
]
KINDS = ("int64", "float", "bytes")
LIST_FIELD = {"bytes": 1, "float": 2, "int64": 3}


def list_body(kind: str, values: list, packed: bool) -> bytes:
    if kind == "bytes":
        return b"".join(ld(1, v) for v in values)
    if kind == "float":
        raw = [struct.pack("<f", v) for v in values]
        return (
            (ld(1, b"".join(raw)) if values else b"")
            if packed
            else b"".join(tag(1, 5) + r for r in raw)
        )
    return (
        (ld(1, b"".join(varint(v) for v in values)) if values else b"")
        if packed
        else b"".join(tag(1, 0) + varint(v) for v in values)
    )


# ---- records: one writer's layout, and what leaves it ------------------------------------------

NAMES = [
    "label",
    "image/encoded",
    "f",
    "",
    "image/object/bbox/xmin_with_a_long_name_past_48_bytes",
    "ids",
    "score",
]


def ints(draw) -> int:
    return draw(
        st.one_of(st.integers(0, 127), st.integers(0, 300), st.integers(-(1 << 63), (1 << 63) - 1))
    )


@st.composite
def values_of(draw, kind: str, count: Optional[int]):
    n = count if count is not None else draw(st.integers(0, 5))
    if kind == "int64":
        return [ints(draw) for _ in range(n)]
    if kind == "float":
        return [draw(st.floats(width=32, allow_nan=False)) for _ in range(n)]
    return [
        draw(st.one_of(st.binary(max_size=6), st.binary(min_size=120, max_size=300)))
        for _ in range(n)
    ]


@st.composite
def batches(draw):
    """(features [(name, kind, count or None for any)], records)."""
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=5, unique=True))
    features = [
        (n, draw(st.sampled_from(KINDS)), draw(st.one_of(st.none(), st.integers(0, 3))))
        for n in names
    ]
    records = []
    for _ in range(draw(st.integers(1, 25))):
        odd = draw(st.integers(0, 4)) == 0  # one record in five leaves the layout
        entries = []
        for name, kind, count in features:
            values = draw(values_of(kind, None if odd and draw(st.booleans()) else count))
            entries.append([name, kind, values, True, False])
        unknown_at = set()
        if odd:
            for change in draw(st.lists(st.integers(0, 10), min_size=1, max_size=2)):
                pick = draw(st.integers(0, len(entries) - 1)) if entries else 0
                if change == 0 and entries:
                    entries.pop(pick)  # missing
                elif change == 1:
                    entries = draw(st.permutations(entries))  # another order
                elif change == 2 and entries:  # the key again, maybe of another kind: the last wins
                    kind = draw(st.sampled_from(KINDS))
                    entries.append(
                        [entries[pick][0], kind, draw(values_of(kind, None)), True, False]
                    )
                elif change == 3 and entries:
                    entries[pick][3] = False  # unpacked
                elif change == 4 and entries:
                    entries[pick][2] = None  # a Feature with no list
                elif change == 10 and entries:
                    entries[pick][4] = True  # the entry's value in parts (protobuf merges them)
                else:
                    unknown_at.add(change)
        records.append(encode(draw, entries, unknown_at))
    return features, records


def encode(draw, entries, unknown_at: set) -> bytes:
    """An Example of the entries: [name, kind, values (None: a Feature with no list), packed,
    in parts (the map entry's value given several times: the values cut in two Features, maybe
    after a Feature with a list of another kind or none)]. unknown_at: 5 unknown fields in the
    Example and its map, 6 in Features and lists, 7 a value before its key, 8 the map in two
    Features fields, 9 lengths in more bytes."""

    def unknown(where: int) -> bytes:
        return (
            draw(st.sampled_from(UNKNOWN)) if where in unknown_at and draw(st.booleans()) else b""
        )

    extra = 1 if 9 in unknown_at else 0

    def feature_of(kind, values, packed):
        if values is None:
            return unknown(6)
        return unknown(6) + ld(
            LIST_FIELD[kind],
            list_body(kind, values, packed) + unknown(6),
            extra if draw(st.booleans()) else 0,
        )

    out_entries = []
    for name, kind, values, packed, in_parts in entries:
        if not in_parts:
            features = [feature_of(kind, values, packed)]
        else:
            cut = draw(st.integers(0, len(values or [])))
            features = [
                feature_of(kind, values and values[:cut], packed),
                feature_of(kind, values and values[cut:], packed),
            ]
            first = draw(st.sampled_from(("", "none") + KINDS))
            if first == "none":
                features.insert(0, b"")
            elif first:
                features.insert(0, feature_of(first, draw(values_of(first, None)), packed))
        key = ld(1, name.encode())
        value = b"".join(ld(2, f, extra if draw(st.booleans()) else 0) for f in features)
        # (no unknown field inside a map entry: upb then keeps the whole entry as an unknown field
        # of the map, where TensorFlow's parsers and tfrec_fast read its key and value; the C++
        # tests and the fuzz target hold the fast path to the general one there)
        body = (value + key) if 7 in unknown_at and draw(st.booleans()) else (key + value)
        out_entries.append(unknown(5) + ld(1, body, extra if draw(st.booleans()) else 0))
    if 8 in unknown_at and len(out_entries) > 1:
        cut = draw(st.integers(1, len(out_entries) - 1))
        return ld(1, b"".join(out_entries[:cut])) + unknown(5) + ld(1, b"".join(out_entries[cut:]))
    return ld(1, b"".join(out_entries), extra) + unknown(5)


# ---- what protobuf reads, and what the spec makes of it ----------------------------------------


def read_by_protobuf(record: bytes) -> Dict[str, Tuple[Optional[str], list]]:
    """{name: (kind or None for a Feature with no list, values)} as protobuf parses the record."""
    out = {}
    for name, feature in Example.FromString(record).features.feature.items():
        which = feature.WhichOneof("kind")
        kind = {"int64_list": "int64", "float_list": "float", "bytes_list": "bytes", None: None}[
            which
        ]
        out[name] = (kind, list(getattr(feature, which).value) if which else [])
    return out


@st.composite
def specs_for(draw, features):
    """A spec for the features: VarLen where any count goes, FixedLen (maybe with a default)
    where the writer's layout has one."""
    spec = {}
    for name, kind, count in features:
        if count is None:
            spec[name] = VarLen({"float": "float32"}.get(kind, kind))
            continue
        dtype = {"float": "float32"}.get(kind, kind)
        shape = () if count == 1 and draw(st.booleans()) else (count,)
        default = None
        if draw(st.booleans()) and not (kind == "bytes" and shape != ()):
            default = {"int64": -7, "float": 2.5, "bytes": b"dflt"}[kind]
        spec[name] = FixedLen(shape, dtype, default)
    return spec


def expected_row(spec_item, got) -> Tuple[Optional[str], object]:
    """(None, values) for what one record holds for one spec, or (reason, None) for an error."""
    if got is None:  # missing
        if isinstance(spec_item, VarLen):
            return None, []
        if spec_item.default is None:
            return "missing", None
        count = int(np.prod(spec_item.shape))
        return None, [spec_item.default] * count
    kind, values = got
    want = {"INT64": "int64", "FLOAT": "float", "BYTES": "bytes"}[spec_item.kind.name]
    if kind is not None and kind != want:
        return "kind", None
    if isinstance(spec_item, FixedLen) and len(values) != int(np.prod(spec_item.shape)):
        return "count", None
    return None, values


def row_of(column, i: int) -> list:
    """Record i's values of a parsed column, as a flat list (floats as float32 bits)."""
    if isinstance(column, BytesColumn):
        row = column.to_list()[i]
        return row if isinstance(row, list) else [row]
    if isinstance(column, Ragged):
        return as_plain(column[i])
    return as_plain(column[i])


def as_plain(values) -> list:
    values = np.asarray(values).reshape(-1)
    if values.dtype == np.float32:
        return values.view(np.uint32).tolist()
    return values.tolist()


def plain_expected(values: list, kind) -> list:
    if kind.name == "FLOAT":
        return np.asarray(values, np.float32).view(np.uint32).tolist()
    if kind.name == "INT64":
        return [int(v) for v in values]
    return [bytes(v) for v in values]


def check_batch(records: List[bytes], spec: dict) -> None:
    """parse_examples of the whole batch and of each record alone, against protobuf."""
    rows = [read_by_protobuf(r) for r in records]
    first_error = None
    for i, row in enumerate(rows):
        for name, item in spec.items():  # the decoder reports the first error in spec order
            reason, _ = expected_row(item, row.get(name))
            if reason is not None:
                first_error = (i, name, reason)
                break
        if first_error:
            break
    alone_errors = []
    for i, record in enumerate(records):
        try:
            cols = parse_examples([record], spec)
        except ExampleParseError as error:
            alone_errors.append((i, error))
            continue
        for name, item in spec.items():
            reason, values = expected_row(item, rows[i].get(name))
            assert reason is None, (i, name, reason)
            assert row_of(cols[name], 0) == plain_expected(values, item.kind), (i, name)
    batch = RecordBatch.from_records(records)
    if first_error is None:
        assert not alone_errors, alone_errors[0][1]
        cols = parse_examples(batch, spec)
        for i, row in enumerate(rows):
            for name, item in spec.items():
                _, values = expected_row(item, row.get(name))
                assert row_of(cols[name], i) == plain_expected(values, item.kind), (i, name)
        return
    index, name, _ = first_error
    assert alone_errors and alone_errors[0][0] == index
    with pytest.raises(ExampleParseError) as caught:
        parse_examples(batch, spec)
    assert caught.value.record_index == index and caught.value.feature == name
    assert caught.value.feature == alone_errors[0][1].feature
    assert caught.value.detail == alone_errors[0][1].detail


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_batches_decode_as_protobuf_reads_them(data):
    features, records = data.draw(batches())
    check_batch(records, data.draw(specs_for(features)))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches())
def test_spec_free_parsing_reads_what_protobuf_reads(batch):
    """Without a spec (every feature, kinds from the data) and by names only (kinds from the
    batch: the first record that shows one, its last entry for the key counting)."""
    _, records = batch
    for record in records:
        want = example_to_dict(record)
        got = parse_example(record)
        assert sorted(got) == sorted(want)
        for name, values in want.items():
            if values and isinstance(values[0], float):
                assert np.array_equal(
                    np.asarray(got[name], np.float32).view(np.uint32),
                    np.asarray(values, np.float32).view(np.uint32),
                ), name
            else:
                assert list(got[name]) == values, name
    rows = [read_by_protobuf(r) for r in records]
    names = sorted({name for row in rows for name in row})
    kinds = {}
    for row in rows:
        for name, (kind, _) in row.items():
            if kind is not None:
                kinds.setdefault(name, kind)
    spec = {
        name: VarLen({"float": "float32"}.get(kinds.get(name, "float"), kinds.get(name, "float")))
        for name in names
    }
    check_batch(records, spec)
    try:
        by_name = parse_examples(RecordBatch.from_records(records), names)
    except ExampleParseError:
        with pytest.raises(ExampleParseError):
            parse_examples(RecordBatch.from_records(records), spec)
        return
    want = parse_examples(RecordBatch.from_records(records), spec)
    for name in names:
        for i in range(len(records)):
            assert row_of(by_name[name], i) == row_of(want[name], i), (name, i)


def test_a_key_twice_counts_by_its_last_entry_with_or_without_a_spec():
    """The regression behind the spec-free kind scan: the first entry of a key a float_list, the
    last an int64_list. protobuf keeps the last; so do parse_example (no spec), a names-only spec
    and a typed one, on the fast path (a batch whose layout repeats) and alone."""
    first = ld(1, ld(1, b"k") + ld(2, ld(2, ld(1, struct.pack("<f", 1.5)))))
    last = ld(1, ld(1, b"k") + ld(2, ld(3, ld(1, varint(7)))))
    record = ld(1, first + ld(1, ld(1, b"o") + ld(2, ld(3, ld(1, varint(1))))) + last)
    assert example_to_dict(record) == {"k": [7], "o": [1]}
    assert parse_example(record) == {"k": [7], "o": [1]}
    records = [record] * 20
    for spec in (
        ["k", "o"],
        {"k": VarLen("int64"), "o": FixedLen((), "int64")},
        {"k": FixedLen((), "int64"), "o": VarLen()},
    ):
        cols = parse_examples(records, spec)
        assert [row_of(cols["k"], i) for i in range(20)] == [[7]] * 20
        assert [row_of(cols["o"], i) for i in range(20)] == [[1]] * 20
    with pytest.raises(ExampleParseError) as caught:
        parse_examples(records, {"k": VarLen("float32")})
    assert caught.value.record_index == 0 and caught.value.feature == "k"


# ---- TensorFlow, where installed ----------------------------------------------------------------


def _tensorflow_takes(tf, record: bytes, tf_spec: dict) -> bool:
    try:
        tf.io.parse_example(tf.constant([record]), tf_spec)
        return True
    except (tf.errors.InvalidArgumentError, UnicodeDecodeError):  # (its message, of bad bytes)
        return False


needs_tensorflow = pytest.mark.skipif(
    importlib.util.find_spec("tensorflow") is None,
    reason="optional peer TensorFlow not installed (CI's peers step runs this)",
)


@needs_tensorflow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_batches_decode_as_tensorflow_parses_them(data):
    """tf.io.parse_example on the same batches (those it takes: every record fits the spec)."""
    import tensorflow as tf

    features, records = data.draw(batches())
    spec = data.draw(specs_for(features))
    rows = [read_by_protobuf(r) for r in records]
    # Records that fit the spec (TensorFlow's errors say other words; the protobuf test covers
    # them) and that TensorFlow takes (its fast parser refuses some encodings protobuf reads).
    fits = [
        not any(expected_row(item, row.get(name))[0] for name, item in spec.items()) for row in rows
    ]
    dtypes = {"INT64": tf.int64, "FLOAT": tf.float32, "BYTES": tf.string}
    tf_spec = {}
    for name, item in spec.items():
        dtype = dtypes[item.kind.name]
        if isinstance(item, VarLen):
            tf_spec[name] = tf.io.VarLenFeature(dtype)
        else:
            default = item.default
            if default is not None and item.shape != ():
                default = [default] * int(np.prod(item.shape))
            tf_spec[name] = tf.io.FixedLenFeature(item.shape, dtype, default_value=default)
    records = [r for r, ok in zip(records, fits) if ok and _tensorflow_takes(tf, r, tf_spec)]
    assume(records)
    want = tf.io.parse_example(tf.constant(records), tf_spec)
    got = parse_examples(records, spec)
    for name, item in spec.items():
        if isinstance(item, VarLen):
            sparse = want[name]
            rows_of = [[] for _ in records]
            for (i, _), value in zip(
                sparse.indices.numpy().tolist(), sparse.values.numpy().tolist()
            ):
                rows_of[i].append(value)
        else:
            # (object: numpy's fixed-width bytes would drop a value's trailing NUL bytes)
            as_array = (
                np.asarray if item.kind.name != "BYTES" else partial(np.asarray, dtype=object)
            )
            rows_of = [list(as_array(r).reshape(-1)) for r in want[name].numpy()]
        for i in range(len(records)):
            assert row_of(got[name], i) == plain_expected(rows_of[i], item.kind), (name, i)
