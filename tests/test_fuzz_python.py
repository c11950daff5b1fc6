"""Python-level fuzzing (hypothesis) of the reader and of Example parsing with random specs.

The C++ core is fuzzed with libFuzzer (tools/fuzz.sh); these properties go through the bindings
and every kind of source, which libFuzzer does not reach:

* TFRecordReader over random bytes and over mutated / cut valid files, from a path, bytes,
  io.BytesIO and file-likes that return short reads (readinto() and read()), uncompressed, gzip
  and zlib: it yields records or raises DataLossError, nothing else. With checksums on, what it
  yields is the valid prefix the pure-Python oracle (tests/_oracle.py) finds, never more, and it
  raises exactly when the oracle finds damage.
* parse_examples / parse_sequence_examples with random specs (FixedLen / VarLen, int64 / float32 /
  bytes / raw numpy dtypes, random defaults) over random and mutated records: a result or
  ExampleParseError, nothing else.
"""

from __future__ import annotations

import gzip
import io
import math
import struct
import zlib

import _oracle
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tfrec_fast import (
    Bytes,
    DataLossError,
    ExampleParseError,
    FixedLen,
    FixedLenSequence,
    Floats,
    Int64s,
    TFRecordReader,
    VarLen,
    VarLenSequence,
    encode_example,
    parse_examples,
    parse_sequence_examples,
    proto,
)
from tfrec_fast._core import Kind
from tfrec_fast.example import BytesColumn, Ragged

FUZZ = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# ==== sources ====================================================================================


class ShortReadinto:
    """An unseekable file-like whose readinto() fills at most `step` bytes a call."""

    def __init__(self, data: bytes, step: int):
        self._data, self._pos, self._step = data, 0, step

    def readinto(self, buffer) -> int:
        n = min(len(buffer), self._step, len(self._data) - self._pos)
        buffer[:n] = self._data[self._pos : self._pos + n]
        self._pos += n
        return n


class ShortRead:
    """An unseekable file-like with only read(), returning at most `step` bytes a call."""

    def __init__(self, data: bytes, step: int):
        self._data, self._pos, self._step = data, 0, step

    def read(self, n: int = -1) -> bytes:
        n = min(n if n >= 0 else len(self._data), self._step)
        chunk = self._data[self._pos : self._pos + n]
        self._pos += len(chunk)
        return chunk


SOURCE_KINDS = ["path", "bytes", "bytesio", "readinto", "read"]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz") / "input.tfrecord"


def make_source(kind: str, data: bytes, step: int, scratch):
    if kind == "path":
        scratch.write_bytes(data)
        return scratch
    if kind == "bytes":
        return data
    if kind == "bytesio":
        return io.BytesIO(data)
    return (ShortReadinto if kind == "readinto" else ShortRead)(data, step)


def read_all(source, compression, verify, buffer_size, batch_limits):
    """(payloads, DataLossError or None); any other exception escapes and fails the test."""
    got = []
    try:
        with TFRecordReader(
            source, compression, verify=verify, copy=True, buffer_size=buffer_size
        ) as reader:
            if batch_limits is None:
                got.extend(bytes(r) for r in reader)
            else:
                for batch in reader.iter_batches(*batch_limits):
                    got.extend(bytes(r) for r in batch)
    except DataLossError as e:
        return got, e
    return got, None


def count(source, compression, verify):
    try:
        with TFRecordReader(source, compression, verify=verify) as reader:
            return reader.count()
    except DataLossError as e:
        return e


# ==== oracle =====================================================================================


def valid_prefix(data: bytes):
    """The payloads before the first damage, by _oracle.parse's rules, and whether there is none."""
    pos, out = 0, []
    while pos < len(data):
        if len(data) - pos < _oracle.HEADER:
            return out, False
        (n,) = struct.unpack_from("<Q", data, pos)
        end = pos + _oracle.HEADER + n + _oracle.FOOTER
        if end > len(data):
            return out, False
        try:
            (payload,) = _oracle.parse(data[pos:end])
        except ValueError:
            return out, False
        out.append(payload)
        pos = end
    return out, True


def inflate_prefix(data: bytes, compression):
    """What zlib inflates of `data` before any error (members one after another, as gzip -d
    reads them), and whether it inflated without an error. A stream that just stops (no end
    marker, as a writer that flushed and is still open leaves it) is not an error: its data ends
    there, as in TensorFlow, and the framing of what it inflated decides."""
    if not compression:
        return data, True
    wbits = 16 + zlib.MAX_WBITS if compression == "gzip" else zlib.MAX_WBITS
    out, rest = [], data
    while rest:
        d = zlib.decompressobj(wbits)
        for i in range(len(rest)):  # byte by byte: keeps every byte inflated before an error
            try:
                out.append(d.decompress(rest[i : i + 1]))
            except zlib.error:
                return b"".join(out), False
            if d.eof:
                break
        if not d.eof:
            return b"".join(out), True
        rest = d.unused_data
    return b"".join(out), True


def expected(data: bytes, compression):
    inflated, complete = inflate_prefix(data, compression)
    payloads, clean = valid_prefix(inflated)
    return payloads, clean and complete


# ==== inputs =====================================================================================

payloads_st = st.lists(st.binary(max_size=80), max_size=6)


@st.composite
def mutated(draw, data: bytes) -> bytes:
    """`data` after a few random byte edits, cuts, insertions and deletions."""
    b = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["flip", "set", "cut", "insert", "delete", "length"]))
        if not b and op != "insert":
            continue
        at = draw(st.integers(0, max(len(b) - 1, 0)))
        if op == "flip":
            b[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            b[at] = draw(st.integers(0, 255))
        elif op == "cut":
            del b[at:]
        elif op == "insert":
            b[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete":
            del b[at : at + draw(st.integers(1, 16))]
        elif len(b) >= at + _oracle.HEADER:  # a new length with a valid length CRC
            length = draw(st.sampled_from([0, 1, 1 << 20, 1 << 32, 1 << 48, (1 << 64) - 1]))
            b[:] = _oracle.set_length(bytes(b), at, length)
    return bytes(b)


def compress(data: bytes, compression) -> bytes:
    if compression == "gzip":
        return gzip.compress(data)
    if compression == "zlib":
        return zlib.compress(data)
    return data


@st.composite
def reader_input(draw):
    """(bytes as stored, compression): random bytes, or a valid file damaged before or after
    compression."""
    compression = draw(st.sampled_from([None, "gzip", "zlib"]))
    how = draw(st.sampled_from(["random", "valid", "mutated", "mutated_compressed"]))
    if how == "random":
        return draw(st.binary(max_size=400)), compression
    framed = _oracle.build_file(draw(payloads_st))
    if how == "valid":
        return compress(framed, compression), compression
    if how == "mutated":
        return compress(draw(mutated(framed)), compression), compression
    return draw(mutated(compress(framed, compression))), compression


# ==== the reader =================================================================================


@FUZZ
@given(
    reader_input(),
    st.sampled_from(SOURCE_KINDS),
    st.integers(1, 40),
    st.sampled_from([1, 4096, 5000, 1 << 20]),
    st.one_of(st.none(), st.tuples(st.sampled_from([None, 1, 3]), st.sampled_from([None, 1, 50]))),
)
def test_reader_yields_the_valid_prefix_or_data_loss(
    scratch, case, kind, step, buffer_size, batch_limits
):
    data, compression = case
    want, clean = expected(data, compression)
    got, error = read_all(
        make_source(kind, data, step, scratch), compression, True, buffer_size, batch_limits
    )
    assert got == want[: len(got)], "yielded records that are not the file's valid prefix"
    if clean:
        assert error is None and got == want
    else:
        assert error is not None
        assert got == want, "stopped before the damage"


@FUZZ
@given(reader_input(), st.sampled_from(SOURCE_KINDS), st.integers(1, 40))
def test_reader_without_checksums_and_count(scratch, case, kind, step):
    data, compression = case
    want, clean = expected(data, compression)
    # verify=False may yield damaged payloads, but only DataLossError may escape.
    read_all(make_source(kind, data, step, scratch), compression, False, 1 << 20, None)
    n = count(make_source(kind, data, step, scratch), compression, True)
    if clean:
        assert n == len(want)
    else:
        assert isinstance(n, (int, DataLossError))


def test_small_buffer_with_a_record_larger_than_it():
    # Found by fuzz_record_reader: with buffer_size < 32 KiB, a payload larger than the buffer but
    # below the direct-read size was staged in the buffer and overflowed it (heap overflow).
    payloads = [b"x" * 20000, b"y" * 5000, b""]
    data = _oracle.build_file(payloads)
    for buffer_size in (4096, 5000, 30000):
        assert read_all(data, None, True, buffer_size, None) == (payloads, None)


def test_records_inflated_before_bad_deflate_data_come_first():
    # Found by this file: one empty record inflates, then the stream is damaged ("invalid stored
    # block lengths") in the same inflate() call; the record was dropped with the error.
    data = bytes.fromhex("789c626080004de619ec375e352d02000ce403b2")
    got, error = read_all(data, "zlib", True, 1 << 20, None)
    assert got == [b""] and isinstance(error, DataLossError)


# ==== Example parsing ============================================================================

NAMES = ["a", "label", "feature0", "image/object/bbox/xmin"]
RAW_DTYPES = ["uint8", "int16", "float16", "int32", "float64"]


@st.composite
def fixed_len(draw):
    shape = draw(st.sampled_from([(), (1,), (2,), (3,), (2, 2), (0,)]))
    dtype = draw(st.sampled_from(["int64", "float32", "bytes"] + RAW_DTYPES))
    default = None
    if draw(st.booleans()):
        if dtype == "bytes":
            default = draw(st.binary(max_size=8))
        elif dtype in ("float32", "float16", "float64"):
            default = draw(st.floats(-100, 100, width=16))
        else:
            default = draw(st.integers(0, 100))
    return FixedLen(shape, dtype, default)


spec_st = st.dictionaries(
    st.sampled_from(NAMES),
    st.one_of(st.none(), st.sampled_from(["int64", "float32", "bytes"]).map(VarLen), fixed_len()),
    max_size=4,
)
sequence_spec_st = st.dictionaries(
    st.sampled_from(NAMES),
    st.one_of(
        st.sampled_from(["int64", "float32", "bytes"]).map(VarLenSequence),
        st.sampled_from([(), (1,), (2,)]).flatmap(
            lambda shape: st.sampled_from(["int64", "float32"]).map(
                lambda dtype: FixedLenSequence(shape, dtype)
            )
        ),
        st.just(FixedLenSequence((), "bytes")),
    ),
    max_size=3,
)

value_st = st.one_of(
    st.lists(st.integers(-(1 << 63), (1 << 63) - 1), min_size=1, max_size=4),
    st.lists(st.floats(width=32), min_size=1, max_size=4),
    st.lists(st.binary(max_size=8), min_size=1, max_size=3),
    st.sampled_from([Int64s([]), Floats([]), Bytes([])]),
    st.sampled_from(RAW_DTYPES).map(lambda d: Bytes(np.arange(4, dtype=d))),
)
features_st = st.dictionaries(st.sampled_from(NAMES), value_st, max_size=4)


@st.composite
def example_records(draw):
    """A few serialized Examples: random bytes, valid ones, or valid ones damaged. (record, valid)
    pairs: only a record generated valid and left so is known to be one."""
    records = []
    for _ in range(draw(st.integers(1, 4))):
        how = draw(st.sampled_from(["random", "valid", "mutated"]))
        if how == "random":
            records.append((draw(st.binary(max_size=60)), False))
        else:
            record = encode_example(draw(features_st))
            records.append((record, True) if how == "valid" else (draw(mutated(record)), False))
    return records


def sequence_example(context: dict, lists: dict) -> bytes:
    seq = proto.SequenceExample()
    seq.context.ParseFromString(
        proto.Example.FromString(encode_example(context)).features.SerializeToString()
    )
    for name, steps in lists.items():
        feature_list = seq.feature_lists.feature_list[name]
        for step in steps:
            one = proto.Example.FromString(encode_example({name: step})).features.feature[name]
            feature_list.feature.add().CopyFrom(one)
    return seq.SerializeToString()


@st.composite
def sequence_records(draw):
    records = []
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["random", "valid", "mutated"]))
        if how == "random":
            records.append((draw(st.binary(max_size=60)), False))
            continue
        lists = draw(
            st.dictionaries(st.sampled_from(NAMES), st.lists(value_st, max_size=3), max_size=3)
        )
        record = sequence_example(draw(features_st), lists)
        records.append((record, True) if how == "valid" else (draw(mutated(record)), False))
    return records


# ---- the oracle: what a valid record must give, from protobuf's decoding and the spec's rules
# (example.py: FixedLen, VarLen, FixedLenSequence, VarLenSequence) --------------------------------

BAD = "does not fit the spec"  # a row the spec's rules refuse: ExampleParseError naming it
KIND_NAMES = {"int64_list": "int64", "float_list": "float32", "bytes_list": "bytes"}
SPEC_KINDS = {Kind.INT64: "int64", Kind.FLOAT: "float32", Kind.BYTES: "bytes"}


def decoded_feature(feature):
    """(kind, values) of a protobuf Feature; kind None when it holds no list."""
    which = feature.WhichOneof("kind")
    return (None, []) if which is None else (KIND_NAMES[which], list(getattr(feature, which).value))


def decoded_example(record):
    return {
        name: decoded_feature(f)
        for name, f in proto.Example.FromString(record).features.feature.items()
    }


def decoded_sequence(record):
    seq = proto.SequenceExample.FromString(record)
    context = {name: decoded_feature(f) for name, f in seq.context.feature.items()}
    lists = {
        name: [decoded_feature(f) for f in fl.feature]
        for name, fl in seq.feature_lists.feature_list.items()
    }
    return context, lists


def fixed_row(s: FixedLen, feature):
    """The flat values FixedLen `s` gives for a record's feature (None: missing), or BAD."""
    count = math.prod(s.shape)
    if feature is None:
        if s.default is None:
            return BAD
        if s.kind == Kind.BYTES and not s.from_bytes:
            return [bytes(s.default)] * count
        dtype = s.dtype if s.from_bytes else {Kind.INT64: np.int64, Kind.FLOAT: np.float32}[s.kind]
        return np.broadcast_to(np.asarray(s.default, dtype), s.shape).ravel().tolist()
    kind, values = feature
    if s.from_bytes:  # exactly one bytes value holding the raw array
        if kind != "bytes" or len(values) != 1 or len(values[0]) != count * s.dtype.itemsize:
            return BAD
        return np.frombuffer(values[0], s.dtype).tolist()
    return values if kind == SPEC_KINDS[s.kind] and len(values) == count else BAD


def var_row(s: VarLen, feature):
    if feature is None:
        return BAD if s.default is None else []
    kind, values = feature
    return values if kind in (None, SPEC_KINDS[s.kind]) else BAD


def step_rows(s, steps):
    """A feature list's steps under FixedLenSequence / VarLenSequence `s` (a missing list: no
    steps), or BAD."""
    rows = []
    for kind, values in steps or []:
        if kind not in (None, SPEC_KINDS[s.kind]):
            return BAD
        if isinstance(s, FixedLenSequence) and (kind is None or len(values) != math.prod(s.shape)):
            return BAD
        rows.append(values)
    return rows


def typed(spec, decoded):
    """The spec with by-name entries (None) typed as parse_examples types them: VarLen of the
    kind of the first record holding the feature, float32 when none does. `decoded`: every
    record's features (all valid), else None: the by-name entries are left out (unknown)."""
    out = {}
    for name, s in spec.items():
        if s is not None:
            out[name] = s
        elif decoded is not None:
            kinds = [d[name][0] for d in decoded if name in d]
            out[name] = VarLen(kinds[0] if kinds and kinds[0] else "float32")
    return out


def expected_example(features, spec):
    """{name: flat values or BAD} for one valid record."""
    return {
        name: (fixed_row if isinstance(s, FixedLen) else var_row)(s, features.get(name))
        for name, s in spec.items()
    }


def flat(x):
    """A column's row (numpy arrays, memoryviews, lists of them, Ragged/BytesColumn views) as
    a flat list of Python values."""
    if isinstance(x, (Ragged, BytesColumn, list, tuple)):
        return [v for item in x for v in flat(item)]
    if isinstance(x, memoryview):
        return [bytes(x)]
    if isinstance(x, np.ndarray):
        return x.ravel().tolist()
    return [x.item() if isinstance(x, np.generic) else x]


def same(got, want) -> bool:
    """Equal values, NaN equal to NaN (protobuf's float is read back through a double)."""
    return len(got) == len(want) and all(
        g == w
        or (isinstance(g, float) and isinstance(w, float) and math.isnan(g) and math.isnan(w))
        for g, w in zip(got, want)
    )


def name_of(key):
    """A feature's name from an expected-row key: the name, or (namespace, name)."""
    return key[1] if isinstance(key, tuple) else key


def check_outcome(run, records, expected, names):
    """Runs `run()` (a parse of `records`, [(bytes, valid)]) and holds it to `expected`: per
    record, {name: rows or BAD} for a valid record, None for the others. `names` are every name
    the parse may report. A valid record must parse unless the spec refuses it; an error names
    the first record that fails, and a feature of it that fails (or is unknown to the oracle,
    or none when the record as a whole is malformed); an invalid record may fail or not. Returns
    the parse's result, or None when it raised. Keys of `expected` are names, or (namespace,
    name) where a name may be in two (a SequenceExample's context and feature lists)."""
    try:
        out = run()
    except ExampleParseError as e:
        assert e.path == "<records>" and 0 <= e.record_index < len(records), (
            e.path,
            e.record_index,
        )
        assert e.feature is None or e.feature in names, e.feature
        for want in expected[: e.record_index]:
            assert want is None or BAD not in want.values(), (
                f"record {e.record_index} reported, but an earlier valid record fails: {want}"
            )
        want = expected[e.record_index]
        if want is not None:  # a valid record: only what the spec refuses fails
            refused = {name_of(key) for key, row in want.items() if row is BAD}
            unknown = set(names) - {name_of(key) for key in want}
            assert e.feature in refused | unknown, (str(e), want)
        if all(w is not None for w in expected):  # all valid: the first refusal is the one
            first = next(i for i, w in enumerate(expected) if BAD in w.values())
            assert e.record_index == first, (str(e), first)
        return None
    for i, want in enumerate(expected):
        if want is not None:
            assert BAD not in want.values(), f"record {i} parsed, but the spec refuses it: {want}"
    return out


def check_examples(records, spec):
    decoded = [decoded_example(r) if valid else None for r, valid in records]
    known = typed(spec, decoded if all(d is not None for d in decoded) else None)
    expected = [None if d is None else expected_example(d, known) for d in decoded]
    out = check_outcome(
        lambda: parse_examples([r for r, _ in records], spec), records, expected, spec
    )
    if out is None:
        return None
    assert set(out) == set(spec)
    for name, column in out.items():
        assert len(column) == len(records)
        for i, want in enumerate(expected):
            if want is not None and name in want:
                assert same(flat(column[i]), want[name]), (name, i, flat(column[i]), want[name])
    return out


@FUZZ
@given(example_records(), spec_st)
def test_parse_examples_with_random_specs(records, spec):
    check_examples(records, spec)


@st.composite
def fitting_examples(draw):
    """Valid records and a spec they all fit: a kind per name, each record holding a list of that
    kind (or not the feature); a spec entry per name that takes what every record holds."""
    kinds = draw(
        st.dictionaries(
            st.sampled_from(NAMES),
            st.sampled_from(["int64", "float32", "bytes"]),
            min_size=1,
            max_size=4,
        )
    )
    lists = {
        "int64": st.lists(st.integers(-(1 << 63), (1 << 63) - 1), max_size=4),
        "float32": st.lists(st.floats(width=32), max_size=4),
        "bytes": st.lists(st.binary(max_size=8), max_size=3),
    }
    wrap = {"int64": Int64s, "float32": Floats, "bytes": Bytes}
    rows = [
        {name: draw(st.none() | lists[kind]) for name, kind in kinds.items()}
        for _ in range(draw(st.integers(1, 5)))
    ]
    spec = {}
    for name, kind in kinds.items():
        present = [row[name] for row in rows if row[name] is not None]
        counts = {len(values) for values in present}
        choices = [VarLen(kind)] + ([None] if present and present[0] else [])
        if len(counts) <= 1:
            count = counts.pop() if counts else draw(st.integers(0, 3))
            default = {"int64": 7, "float32": 0.5, "bytes": b"d"}[kind]
            shape = draw(st.sampled_from([(count,), (1, count)]))
            if len(present) == len(rows):
                choices.append(FixedLen(shape, kind))
            choices.append(FixedLen(shape, kind, default))
        spec[name] = draw(st.sampled_from(choices))
    records = [
        (encode_example({k: wrap[kinds[k]](v) for k, v in row.items() if v is not None}), True)
        for row in rows
    ]
    return records, spec


@FUZZ
@given(fitting_examples())
def test_valid_records_parse_with_a_spec_they_fit(case):
    records, spec = case
    assert check_examples(records, spec) is not None


def test_the_oracle_fails_a_wrong_value_and_a_refused_valid_record(monkeypatch):
    """check_examples fails a parse that gives another value or refuses a record that fits."""
    records = [(encode_example({"a": [1, 2]}), True)]
    spec = {"a": VarLen("int64")}
    assert check_examples(records, spec)["a"][0].tolist() == [1, 2]
    real = parse_examples

    def wrong_value(records_, spec_):
        out = real(records_, spec_)
        out["a"].values[1] = 3
        return out

    def refused(records_, spec_):
        raise ExampleParseError("refused", path="<records>", record_index=0, feature="a")

    for fake in (wrong_value, refused):
        monkeypatch.setitem(globals(), "parse_examples", fake)
        with pytest.raises(AssertionError):
            check_examples(records, spec)


# By-name context specs (None) are not supported by parse_sequence_examples (AttributeError).
context_spec_st = st.dictionaries(
    st.sampled_from(NAMES),
    st.one_of(st.sampled_from(["int64", "float32", "bytes"]).map(VarLen), fixed_len()),
    max_size=3,
)


@FUZZ
@given(sequence_records(), context_spec_st, sequence_spec_st)
def test_parse_sequence_examples_with_random_specs(records, context_spec, sequence_spec):
    decoded = [decoded_sequence(r) if valid else None for r, valid in records]
    expected = []
    for d in decoded:
        if d is None:
            expected.append(None)
            continue
        context, lists = d
        want = {("context", k): v for k, v in expected_example(context, context_spec).items()}
        for name, s in sequence_spec.items():
            want[("lists", name)] = step_rows(s, lists.get(name))
        expected.append(want)
    names = set(context_spec) | set(sequence_spec)
    out = check_outcome(
        lambda: parse_sequence_examples([r for r, _ in records], context_spec, sequence_spec),
        records,
        expected,
        names,
    )
    if out is None:
        return
    context, sequences = out
    assert set(context) == set(context_spec) and set(sequences) == set(sequence_spec)
    for column in [*context.values(), *sequences.values()]:
        assert len(column) == len(records)
    for i, want in enumerate(expected):
        if want is None:
            continue
        for name in context_spec:
            assert same(flat(context[name][i]), want[("context", name)]), (name, i)
        for name in sequence_spec:
            got, steps = [flat(step) for step in sequences[name][i]], want[("lists", name)]
            assert len(got) == len(steps) and all(map(same, got, steps)), (name, i, got, steps)
