"""Fuzzing the tf.train.Example decoder (tfrec_fast.example.parse_examples).

Random bytes, every prefix of valid Examples, and single-byte mutations must never crash the
process: parse_examples either succeeds or raises ExampleParseError.

Two oracles for the values:
* `ref_decode` below: a small pure-Python decoder with protobuf's merge semantics (a singular
  message field seen twice is merged, a oneof set again to another case is replaced, map keys: last
  entry wins, unknown fields skipped) that is as strict as tfrec_fast about the few shapes
  tfrec_fast documents to reject (groups, a list value with a wire type of another type). When it
  accepts a record, tfrec_fast must accept it too and give the same values.
* protobuf itself (tfrec_fast.proto.Example.FromString, upb): tfrec_fast must accept what it
  accepts and give the same values, and reject what it rejects, except for the documented
  differences (groups and list values of another wire type, which tfrec_fast rejects; damage in
  features the spec does not ask for, and field numbers past upb's limit, which tfrec_fast skips;
  a map entry with an unknown field, which upb drops). Each is recognised by what the record holds
  (check() and the why_* functions), never by what tfrec_fast did, and anything else fails.
"""

from __future__ import annotations

import random
import struct

import _corpus
import numpy as np
import pytest

from tfrec_fast import RecordBatch, read_records
from tfrec_fast._core import Kind
from tfrec_fast.errors import ExampleParseError
from tfrec_fast.example import BytesColumn, VarLen, parse_examples

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st

KINDS = {1: "bytes", 2: "float32", 3: "int64"}


# ==== wire encoder (for seeds) ===================================================================


def varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def ld(field, payload):
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def vi(field, v):
    return varint(field << 3) + varint(v)


UNKNOWN = (
    vi(7, 300)
    + varint(9 << 3 | 1)
    + b"\x01" * 8
    + ld(11, b"zz")
    + varint(13 << 3 | 5)
    + b"\x02" * 4
)


def entry(key, feat):
    return ld(1, ld(1, key) + ld(2, feat))


def seed_records():
    recs = []
    # hand-built: packed, unpacked, unknown fields, empty lists, null kind, duplicates
    recs.append(
        ld(
            1,
            entry(b"i", ld(3, ld(1, varint(1) + varint(300) + varint(-2))))
            + entry(b"f", ld(2, ld(1, struct.pack("<3f", 1.5, -0.0, float("nan")))))
            + entry(b"b", ld(1, ld(1, b"hello") + ld(1, b"") + ld(1, b"\x00\xff"))),
        )
    )
    recs.append(
        ld(
            1,
            entry(b"i", ld(3, vi(1, 5) + vi(1, 1 << 40) + vi(1, -7)))
            + entry(b"f", ld(2, varint(1 << 3 | 5) + struct.pack("<f", 2.5)))
            + entry(b"e", b"")
            + entry(b"b", ld(1, b"")),
        )
    )
    recs.append(
        UNKNOWN
        + ld(
            1,
            UNKNOWN
            + entry(b"i", UNKNOWN + ld(3, UNKNOWN + ld(1, varint(9)) + UNKNOWN))
            + entry(b"b", ld(1, ld(1, b"q") + UNKNOWN))
            + UNKNOWN,
        )
        + UNKNOWN
    )
    recs.append(
        ld(1, entry(b"k", ld(3, ld(1, varint(1)))) + entry(b"k", ld(3, ld(1, varint(2)))))
        + ld(1, entry(b"m", ld(2, ld(1, struct.pack("<f", 3.0)))))
    )
    # map entries whose value comes more than once (protobuf merges the Features)
    recs.append(
        ld(
            1,
            ld(1, ld(1, b"i") + ld(2, ld(3, ld(1, varint(1)))) + ld(2, ld(3, vi(1, 2))))
            + ld(
                1,
                ld(2, ld(3, ld(1, varint(5))))
                + ld(1, b"f")
                + ld(2, ld(2, ld(1, struct.pack("<f", 1.5)))),
            )
            + ld(
                1, ld(1, b"b") + ld(2, ld(1, ld(1, b"x"))) + ld(2, b"") + ld(2, ld(1, ld(1, b"y")))
            ),
        )
    )
    recs.append(b"")
    recs.append(b"\x0a\x00")
    # from the corpus (small records)
    d = _corpus.corpus_dir() / "example"
    for name, idx in (
        ("tutorial_1000.tfrecord", [0, 1]),
        ("voc_like.tfrecord", [0, 4]),
        ("packed_lists.tfrecord", [0, 1, 2]),
        ("unpacked_lists_handbuilt.tfrecord", [0, 3]),
        ("edge_values.tfrecord", [0, 1, 2]),
    ):
        rs = list(read_records(str(d / name), copy=True))
        recs.extend(bytes(rs[i]) for i in idx)
    # tfrec_fast.proto messages
    from tfrec_fast.proto import dict_to_example

    recs.append(
        dict_to_example(
            {"a": [1, 2, 3], "s": [b"x", b"yy"], "g": np.array([0.5, 1e30], np.float32)}
        ).SerializeToString()
    )
    return recs


SEEDS = seed_records()


# ==== reference decoder ==========================================================================


class RefError(Exception):
    """The reference rejects a record. ``kind``: "group" (wire types 3/4) and "list_wire_type" (a
    list value of another type's wire type) are shapes protobuf accepts and tfrec_fast, as
    documented, rejects; "malformed" is anything protobuf rejects too."""

    def __init__(self, what, kind="malformed"):
        super().__init__(what)
        self.kind = kind


def _varint(buf, p):
    v = 0
    for shift in range(0, 70, 7):
        if p >= len(buf) or shift >= 70:
            raise RefError("varint")
        b = buf[p]
        p += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            return v & ((1 << 64) - 1), p
        if shift == 63:
            raise RefError("varint too long")
    raise RefError("varint")


def fields(buf):
    """[(field, wire_type, value)]: value int (varint / fixed) or bytes (length-delimited)."""
    out, p, n = [], 0, len(buf)
    while p < n:
        t, p = _varint(buf, p)
        f, wt = t >> 3, t & 7
        if f == 0 or f > 0xFFFFFFFF:
            raise RefError("field 0")
        if wt == 0:
            v, p = _varint(buf, p)
        elif wt == 1:
            if n - p < 8:
                raise RefError("fixed64")
            v, p = buf[p : p + 8], p + 8
        elif wt == 2:
            length, p = _varint(buf, p)
            if length > n - p:
                raise RefError("length")
            v, p = buf[p : p + length], p + length
        elif wt == 5:
            if n - p < 4:
                raise RefError("fixed32")
            v, p = buf[p : p + 4], p + 4
        else:
            raise RefError("group / bad wire type", "group" if wt in (3, 4) else "malformed")
        out.append((f, wt, v))
    return out


def ref_list(kind, buf, strict=True):
    """A list message's values. ``strict`` False: a value of another wire type is an unknown
    field, as protobuf reads it (tfrec_fast does so only in lists that a later kind replaces)."""
    vals = []
    for f, wt, v in fields(buf):
        if f != 1:
            continue
        if kind == 1:
            if wt == 2:
                vals.append(bytes(v))
            elif strict:
                raise RefError("bytes value wire type", "list_wire_type")  # protobuf: unknown field
        elif kind == 2:
            if wt == 5:
                vals.append(struct.unpack("<I", v)[0])
            elif wt == 2:
                if len(v) % 4:
                    raise RefError("packed float length")
                vals.extend(struct.unpack("<%dI" % (len(v) // 4), v))
            elif strict:
                raise RefError("float wire type", "list_wire_type")
        else:
            if wt == 0:
                vals.append(v)
            elif wt == 2:
                p = 0
                while p < len(v):
                    x, p = _varint(v, p)
                    vals.append(x)
            elif strict:
                raise RefError("int64 wire type", "list_wire_type")
    if kind == 3:
        vals = [x - (1 << 64) if x >> 63 else x for x in vals]
    return vals


def ref_feature(buf):
    """(kind or None, values) with oneof semantics: a switch of case replaces, a repeat merges."""
    case, payload = None, b""
    for f, wt, v in fields(buf):
        if wt == 2 and f in (1, 2, 3):
            ref_list(f, v, strict=False)  # each occurrence, even one replaced later, must parse
            if f != case:
                case, payload = f, bytes(v)
            else:
                payload += bytes(v)
    if case is None:
        return None, []
    return case, ref_list(case, payload)


def ref_entries(buf, check_values=True):
    """The Features map's entries in wire order: [(key, Feature bytes, whether the entry holds
    fields besides key and value, how many times it holds the value)]. A key seen again: its last
    entry wins. ``check_values`` False leaves the Feature messages unparsed, as a decoder that
    skips them does."""
    # A singular message field seen several times: each occurrence is parsed on its own (and must
    # be valid), then merged -- for valid messages, the same as parsing the concatenation.
    parts = [bytes(v) for f, wt, v in fields(buf) if f == 1 and wt == 2]
    for part in parts:
        fields(part)
    out = []
    for f, wt, v in fields(b"".join(parts)):
        if f != 1 or wt != 2:
            continue
        key, value, other, values = b"", b"", False, 0
        for ef, ewt, ev in fields(v):
            if ef == 1 and ewt == 2:
                key = bytes(ev)
            elif ef == 2 and ewt == 2:
                if check_values:
                    fields(ev)
                value += bytes(ev)  # a singular message field seen twice merges
                values += 1
            else:
                other = True
        out.append((key, value, other, values))
    return out


def ref_decode(buf):
    """{key: (kind or None, values)} or RefError. Floats as uint32 bit patterns."""
    raw = {key: value for key, value, _, _ in ref_entries(buf)}
    return {k: ref_feature(v) for k, v in raw.items()}


def field_numbers(buf):
    """Every field number of an Example at the levels a parser looks at (Example, Features, map
    entry, Feature, list); RefError when one of them is malformed."""
    numbers = []
    for f, wt, v in fields(buf):
        numbers.append(f)
        if f != 1 or wt != 2:
            continue
        for ff, fwt, fv in fields(v):
            numbers.append(ff)
            if ff != 1 or fwt != 2:
                continue
            for ef, ewt, ev in fields(fv):
                numbers.append(ef)
                if ef == 2 and ewt == 2:
                    for lf, lwt, lv in fields(ev):
                        numbers.append(lf)
                        if lwt == 2 and lf in (1, 2, 3):
                            numbers += [x for x, _, _ in fields(lv)]
    return numbers


# ==== the checks =================================================================================


def spec_for(decoded):
    return {
        k.decode("utf-8", "surrogateescape"): VarLen(KINDS[kind] if kind else "int64")
        for k, (kind, _) in decoded.items()
    }


def ours_values(cols, name, spec):
    col = cols[name]
    if isinstance(col, BytesColumn):
        return col.to_list()[0]
    if spec[name].kind == Kind.FLOAT:
        return col.values.view(np.uint32).tolist()
    return col.values.tolist()


def expected_from_ref(ref, spec):
    """What tfrec_fast must produce for `spec` given the reference decoding: values per key, or
    'error' when a requested key holds a list of another kind."""
    out = {}
    for name, s in spec.items():
        kind, vals = ref.get(name.encode("utf-8", "surrogateescape"), (None, []))
        if kind is not None and Kind(kind) != s.kind:  # the reference's kind: a field number
            return "error"
        out[name] = vals
    return out


def pb_decode(data):
    """protobuf's decoding, as ref_decode gives it, or None when protobuf rejects the record."""
    from tfrec_fast.proto import Example

    try:
        msg = Example.FromString(bytes(data))
    except Exception:  # noqa: BLE001 -- any protobuf DecodeError
        return None
    out = {}
    for k, f in msg.features.feature.items():
        which = f.WhichOneof("kind")
        if which is None:
            out[k.encode("utf-8", "surrogateescape")] = (None, [])
        else:
            vals = list(getattr(f, which).value)
            if which == "float_list":
                vals = np.asarray(vals, np.float32).view(np.uint32).tolist()
            out[k.encode("utf-8", "surrogateescape")] = (
                {"bytes_list": 1, "float_list": 2, "int64_list": 3}[which],
                vals,
            )
    return out


def quiet_nans(bits):
    return [
        b | 0x00400000 if (b & 0x7F800000) == 0x7F800000 and b & 0x007FFFFF else b for b in bits
    ]


def same_as_protobuf(ours, pb_want, spec) -> bool:
    """Whether our result (values or "error") is protobuf's. Its Python API hands out floats as
    doubles, which quiets a signalling NaN: float bits are compared with NaNs quieted."""
    if isinstance(ours, dict) and isinstance(pb_want, dict):
        quiet = {k: quiet_nans if spec[k].kind == Kind.FLOAT else list for k in spec}
        return all(quiet[k](ours[k]) == quiet[k](pb_want[k]) for k in spec)
    return ours == pb_want


# The ways tfrec_fast may differ from protobuf (upb), each documented (example.py, the encoder's
# and the decoder's docs) and each recognised here by what the record holds, never by what
# tfrec_fast did.
GROUP = "protobuf accepts, tfrec_fast rejects: a group (wire type 3/4)"
LIST_WIRE_TYPE = (
    "protobuf accepts, tfrec_fast rejects: a list value of another type's wire type "
    "(protobuf keeps it as an unknown field)"
)
UPB_DROPS_ENTRY = (
    "tfrec_fast keeps a requested map entry that carries an unknown field; upb "
    "drops it, TensorFlow keeps it"
)
UNREQUESTED = (
    "protobuf rejects, tfrec_fast accepts: the damage is in what tfrec_fast skips "
    "without decoding: features the spec does not ask for, and map entries that a "
    "later entry of the same key replaces"
)
BIG_FIELD = (
    "protobuf rejects, tfrec_fast accepts: a field number of 2**29 or more (upb's "
    "limit), which tfrec_fast skips as an unknown field"
)


def requested_only(entries, spec) -> bytes:
    """The Example holding only what a spec asks for: the last entry of each requested key."""
    names = {n.encode("utf-8", "surrogateescape") for n in spec}
    last = {k: v for k, v, _, _ in entries if k in names}
    return ld(1, b"".join(entry(k, v) for k, v in last.items()))


def why_protobuf_rejects(data, spec, ours):
    """The documented reason protobuf rejects a record that tfrec_fast accepted (giving `ours`),
    or None. What tfrec_fast gave must be protobuf's (or the reference's) decoding of the
    requested part."""
    try:
        pruned = requested_only(ref_entries(data, check_values=False), spec)
    except RefError:
        return None  # the map itself is damaged: tfrec_fast must reject that
    pb = pb_decode(pruned)
    if pb is not None:
        return UNREQUESTED if same_as_protobuf(ours, expected_from_ref(pb, spec), spec) else None
    try:
        big = max(field_numbers(pruned), default=0) >= 1 << 29
        want = expected_from_ref(ref_decode(pruned), spec)
    except RefError:
        return None
    return BIG_FIELD if big and ours == want else None


def why_tfrec_fast_rejects(data, spec):
    """The documented reason tfrec_fast rejects a record protobuf accepts, or None: the shape
    must be where tfrec_fast looks (the map's levels, or a requested Feature)."""
    try:
        ref_decode(requested_only(ref_entries(data, check_values=False), spec))
    except RefError as e:
        return {"group": GROUP, "list_wire_type": LIST_WIRE_TYPE}.get(e.kind)
    return None


def why_values_differ(data, spec, ours, want):
    """The documented reason our values differ from protobuf's, or None."""
    if want is None or ours != want:
        return None
    names = {n.encode("utf-8", "surrogateescape") for n in spec}
    if any(other and key in names for key, _, other, _ in ref_entries(data)):
        return UPB_DROPS_ENTRY
    return None


def check(data, spec, failures):
    """Parses one record with tfrec_fast and compares with the reference decoder and with
    protobuf. Returns None when all three agree, else the documented difference from protobuf;
    anything else is appended to `failures`."""
    try:
        cols = parse_examples([data], spec)
        ours = {name: ours_values(cols, name, spec) for name in spec}
    except ExampleParseError as e:
        assert e.record_index == 0 and e.path == "<records>"
        assert e.feature is None or e.feature in spec, e.feature
        ours = "error"
    # anything else propagates: a bug (and a crash kills the run)
    try:
        want = expected_from_ref(ref_decode(data), spec)
    except RefError:
        want = None
    if want is not None and ours != want:
        failures.append(("the protobuf-semantics reference", data, want, ours))
    pb = pb_decode(data)
    if pb is None:
        if ours == "error":
            return None
        why = why_protobuf_rejects(data, spec, ours)
        if why is None:
            failures.append(("protobuf, which rejects the record", data, "error", ours))
        return why
    pb_want = expected_from_ref(pb, spec)
    if same_as_protobuf(ours, pb_want, spec):
        return None
    why = why_tfrec_fast_rejects(data, spec) if ours == "error" else None
    if why is None:  # (an error too: the entry upb drops may be the one of the wrong kind)
        why = why_values_differ(data, spec, ours, want)
    if why is None:
        failures.append(("protobuf", data, pb_want, ours))
    return why


def assert_no_failures(failures, label):
    if failures:
        oracle, data, want, got = failures[0]
        pytest.fail(
            f"{label}: {len(failures)} records where tfrec_fast disagrees with an oracle; "
            f"first: {oracle} on record {data.hex()}: expected {want!r}, got {got!r}"
        )


# ==== tests ======================================================================================


def test_seeds_agree_with_reference_and_protobuf():
    failures = []
    for rec in SEEDS:
        assert pb_decode(rec) is not None
        assert check(rec, spec_for(ref_decode(rec)), failures) is None, rec.hex()
    assert_no_failures(failures, "seeds")


def test_random_bytes_deterministic():
    rnd = random.Random(1)
    failures = []
    spec = {"i": VarLen("int64"), "f": VarLen("float32"), "b": VarLen("bytes"), "": VarLen("int64")}
    for _ in range(3000):
        n = rnd.choice([0, 1, 2, 3, 5, 8, 16, 40, 200])
        data = bytes(rnd.getrandbits(8) for _ in range(n))
        check(data, spec, failures)
    # structured random: random bytes inside a valid frame, so the inner parsers are reached
    for _ in range(3000):
        junk = bytes(rnd.getrandbits(8) for _ in range(rnd.choice([1, 2, 4, 9, 20])))
        key = rnd.choice([b"i", b"f", b"b"])
        kind = rnd.choice([1, 2, 3])
        shape = rnd.randrange(4)
        if shape == 0:
            data = ld(1, entry(key, junk))
        elif shape == 1:
            data = ld(1, entry(key, ld(kind, junk)))
        elif shape == 2:
            data = ld(1, ld(1, junk))
        else:
            data = ld(1, junk)
        check(data, spec, failures)
    assert_no_failures(failures, "random bytes")


def test_every_prefix_of_valid_examples():
    failures = []
    for rec in SEEDS:
        if len(rec) > 3000:
            continue
        spec = spec_for(ref_decode(rec))
        for n in range(len(rec)):
            check(rec[:n], spec, failures)
    assert_no_failures(failures, "prefixes")


def _mutate(rnd, rec):
    b = bytearray(rec)
    op = rnd.randrange(5) if b else 3
    if op == 0:
        b[rnd.randrange(len(b))] = rnd.getrandbits(8)
    elif op == 1:
        i = rnd.randrange(len(b))
        b[i] ^= 1 << rnd.randrange(8)
    elif op == 2:
        del b[rnd.randrange(len(b))]
    elif op == 3:
        b.insert(rnd.randrange(len(b) + 1), rnd.getrandbits(8))
    else:
        i = rnd.randrange(len(b))
        b[i] = rnd.choice([0x00, 0x01, 0x02, 0x05, 0x0A, 0x12, 0x1A, 0x7F, 0x80, 0xFF])
    return bytes(b)


def test_single_byte_mutations_many_seeds():
    failures = []
    small = [r for r in SEEDS if len(r) < 3000]
    specs = [spec_for(ref_decode(r)) for r in small]
    for seed in range(6000):
        rnd = random.Random(seed)
        j = rnd.randrange(len(small))
        data = _mutate(rnd, small[j])
        if seed % 3 == 0:
            data = _mutate(rnd, data)
        check(data, specs[j], failures)
    assert_no_failures(failures, "mutations")


def test_batches_of_mutated_records_fail_at_the_right_index():
    """A batch of mutated records: the error (if any) names the first bad record, and when no
    error is raised every row equals the per-record parse."""
    rnd = random.Random(99)
    base = SEEDS[0]
    spec = spec_for(ref_decode(base))
    for _ in range(300):
        recs = [_mutate(rnd, base) if rnd.random() < 0.3 else base for _ in range(8)]
        first_bad = None
        rows = []
        for i, r in enumerate(recs):
            try:
                c = parse_examples([r], spec)
                rows.append({k: ours_values(c, k, spec) for k in spec})
            except ExampleParseError:
                first_bad = i
                break
        try:
            cols = parse_examples(RecordBatch.from_records(recs), spec, name="b")
        except ExampleParseError as e:
            assert e.record_index == first_bad and e.path == "b"
            continue
        assert first_bad is None
        for k in spec:
            col = cols[k]
            got = (
                col.to_list()
                if isinstance(col, BytesColumn)
                else [
                    col.values[a:b].view(np.uint32).tolist()
                    if spec[k].kind == Kind.FLOAT
                    else col.values[a:b].tolist()
                    for a, b in zip(col.row_splits[:-1], col.row_splits[1:])
                ]
            )
            assert got == [row[k] for row in rows], k


@settings(max_examples=400, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.binary(max_size=300))
def test_hypothesis_random_bytes(data):
    failures = []
    check(data, {"i": VarLen("int64"), "f": VarLen("float32"), "b": VarLen("bytes")}, failures)
    assert_no_failures(failures, "hypothesis random bytes")


@settings(max_examples=600, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_hypothesis_mutations(data):
    j = data.draw(st.integers(0, len(SEEDS) - 1))
    rec = bytearray(SEEDS[j])
    spec = spec_for(ref_decode(bytes(rec)))
    for _ in range(data.draw(st.integers(1, 3))):
        op = data.draw(st.sampled_from(["set", "del", "ins", "cut"]))
        if op == "ins" or not rec:
            rec.insert(data.draw(st.integers(0, len(rec))), data.draw(st.integers(0, 255)))
        elif op == "set":
            rec[data.draw(st.integers(0, len(rec) - 1))] = data.draw(st.integers(0, 255))
        elif op == "del":
            del rec[data.draw(st.integers(0, len(rec) - 1))]
        else:
            del rec[data.draw(st.integers(0, len(rec))) :]
    failures = []
    check(bytes(rec), spec, failures)
    assert_no_failures(failures, "hypothesis mutations")


def test_each_documented_disagreement_with_protobuf_is_recognised():
    """The shapes where tfrec_fast and protobuf (upb) knowingly differ, one record each: every one
    is told apart by what the record holds (the classes check() accepts), and tfrec_fast's result
    is the reference's."""
    e = lambda k, f: ld(1, entry(k, f))  # noqa: E731
    cases = [
        (e(b"i", ld(3, ld(1, b"\x01"))) + b"\x3b\x3c", GROUP),
        (e(b"i", ld(3, ld(1, b"\x01") + b"\x13\x08\x01\x14")), GROUP),
        (e(b"b", ld(1, vi(1, 5))), LIST_WIRE_TYPE),
        (e(b"i", ld(3, b"\x0d\x01\x00\x00\x00")), LIST_WIRE_TYPE),
        (e(b"f", ld(2, vi(1, 3))), LIST_WIRE_TYPE),
        (
            e(b"\xff", ld(3, ld(1, b"\x01"))) + e(b"i", ld(3, ld(1, b"\x02"))),
            UNREQUESTED,
        ),  # not UTF-8
        (e(b"i", ld(3, ld(1, b"\x01"))) + varint((1 << 29) << 3) + b"\x01", UNREQUESTED),
        (e(b"i", ld(3, ld(1, b"\x01")) + varint((1 << 29) << 3) + b"\x01"), BIG_FIELD),
        (e(b"i", ld(3, b"\x0a\x05\x01")) + e(b"i", ld(3, ld(1, b"\x01"))), UNREQUESTED),  # replaced
        (e(b"i", ld(3, ld(1, b"\x01"))) + e(b"junk", ld(2, ld(1, b"\x01"))), UNREQUESTED),  # length
        (ld(1, ld(1, ld(1, b"i") + ld(2, ld(3, ld(1, b"\x01"))) + vi(3, 1))), UPB_DROPS_ENTRY),
        # the entry upb drops holds the wrong kind: tfrec_fast (and the reference) refuse it
        (ld(1, ld(1, ld(1, b"f") + ld(2, ld(3, ld(1, b"\x01"))) + vi(3, 1))), UPB_DROPS_ENTRY),
    ]
    spec = {"i": VarLen("int64"), "b": VarLen("bytes"), "f": VarLen("float32")}
    failures = []
    assert [check(data, spec, failures) for data, _ in cases] == [why for _, why in cases]
    assert_no_failures(failures, "documented disagreements")


def test_a_wrong_value_is_caught():
    """check() fails a decoder that gets a value wrong (here: the reference and protobuf both
    disagree with a tampered result), so agreement above means something."""
    rec = SEEDS[0]
    spec = spec_for(ref_decode(rec))
    real = parse_examples

    def tampered(records, spec_, **kw):
        cols = real(records, spec_, **kw)
        cols["i"].values[0] += 1
        return cols

    failures = []
    globals()["parse_examples"] = tampered
    try:
        check(rec, spec, failures)
    finally:
        globals()["parse_examples"] = real
    assert [f[0] for f in failures] == ["the protobuf-semantics reference", "protobuf"]
