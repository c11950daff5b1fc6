"""Fuzzing the tf.train.Example decoder (tfrec_fast.example.parse_examples).

Random bytes, every prefix of valid Examples, and single-byte mutations must never crash the
process: parse_examples either succeeds or raises ExampleParseError.

Two oracles for the values:
* `ref_decode` below: a small pure-Python decoder with protobuf's merge semantics (a singular
  message field seen twice is merged, a oneof set again to another case is replaced, map keys: last
  entry wins, unknown fields skipped) that is as strict as tfrec_fast about the few shapes
  tfrec_fast documents to reject (groups, a list value with a wire type of another type). When it
  accepts a record, tfrec_fast must accept it too and give the same values.
* protobuf itself (tfrec_fast.proto.Example.FromString, upb): when it accepts a mutated record and
  we accept it too, the columns must agree -- except where protobuf and the reference disagree
  (upb quirks, e.g. it drops a map entry carrying an unknown field); those cases, and records that
  protobuf accepts but we reject, are collected and printed (pytest -s), not asserted.
"""
from __future__ import annotations

import random
import struct
from collections import Counter

import numpy as np
import pytest

import _corpus
from tfrec_fast import RecordBatch, read_records
from tfrec_fast._core import Kind
from tfrec_fast.errors import ExampleParseError
from tfrec_fast.example import BytesColumn, VarLen, parse_examples

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

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


UNKNOWN = vi(7, 300) + varint(9 << 3 | 1) + b"\x01" * 8 + ld(11, b"zz") + varint(13 << 3 | 5) + b"\x02" * 4


def entry(key, feat):
    return ld(1, ld(1, key) + ld(2, feat))


def seed_records():
    recs = []
    # hand-built: packed, unpacked, unknown fields, empty lists, null kind, duplicates
    recs.append(ld(1, entry(b"i", ld(3, ld(1, varint(1) + varint(300) + varint(-2)))) +
                   entry(b"f", ld(2, ld(1, struct.pack("<3f", 1.5, -0.0, float("nan"))))) +
                   entry(b"b", ld(1, ld(1, b"hello") + ld(1, b"") + ld(1, b"\x00\xff")))))
    recs.append(ld(1, entry(b"i", ld(3, vi(1, 5) + vi(1, 1 << 40) + vi(1, -7))) +
                   entry(b"f", ld(2, varint(1 << 3 | 5) + struct.pack("<f", 2.5))) +
                   entry(b"e", b"") + entry(b"b", ld(1, b""))))
    recs.append(UNKNOWN + ld(1, UNKNOWN + entry(b"i", UNKNOWN + ld(3, UNKNOWN + ld(1, varint(9)) + UNKNOWN)) +
                             entry(b"b", ld(1, ld(1, b"q") + UNKNOWN)) + UNKNOWN) + UNKNOWN)
    recs.append(ld(1, entry(b"k", ld(3, ld(1, varint(1)))) + entry(b"k", ld(3, ld(1, varint(2))))) +
                ld(1, entry(b"m", ld(2, ld(1, struct.pack("<f", 3.0))))))
    recs.append(b"")
    recs.append(b"\x0a\x00")
    # from the corpus (small records)
    d = _corpus.corpus_dir() / "example"
    for name, idx in (("tutorial_1000.tfrecord", [0, 1]), ("voc_like.tfrecord", [0, 4]),
                      ("packed_lists.tfrecord", [0, 1, 2]),
                      ("unpacked_lists_handbuilt.tfrecord", [0, 3]), ("edge_values.tfrecord", [0, 1, 2])):
        rs = list(read_records(str(d / name), copy=True))
        recs.extend(bytes(rs[i]) for i in idx)
    # tfrec_fast.proto messages
    from tfrec_fast.proto import dict_to_example
    recs.append(dict_to_example({"a": [1, 2, 3], "s": [b"x", b"yy"], "g": np.array([0.5, 1e30], np.float32)})
                .SerializeToString())
    return recs


SEEDS = seed_records()


# ==== reference decoder ==========================================================================

class RefError(Exception):
    pass


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
            v, p = buf[p:p + 8], p + 8
        elif wt == 2:
            length, p = _varint(buf, p)
            if length > n - p:
                raise RefError("length")
            v, p = buf[p:p + length], p + length
        elif wt == 5:
            if n - p < 4:
                raise RefError("fixed32")
            v, p = buf[p:p + 4], p + 4
        else:
            raise RefError("group / bad wire type")  # tfrec_fast rejects groups
        out.append((f, wt, v))
    return out


def ref_list(kind, buf):
    vals = []
    for f, wt, v in fields(buf):
        if f != 1:
            continue
        if kind == 1:
            if wt != 2:
                raise RefError("bytes value wire type")  # protobuf: unknown field; tfrec_fast: error
            vals.append(bytes(v))
        elif kind == 2:
            if wt == 5:
                vals.append(struct.unpack("<I", v)[0])
            elif wt == 2:
                if len(v) % 4:
                    raise RefError("packed float length")
                vals.extend(struct.unpack("<%dI" % (len(v) // 4), v))
            else:
                raise RefError("float wire type")
        else:
            if wt == 0:
                vals.append(v)
            elif wt == 2:
                p = 0
                while p < len(v):
                    x, p = _varint(v, p)
                    vals.append(x)
            else:
                raise RefError("int64 wire type")
    if kind == 3:
        vals = [x - (1 << 64) if x >> 63 else x for x in vals]
    return vals


def ref_feature(buf):
    """(kind or None, values) with oneof semantics: a switch of case replaces, a repeat merges."""
    case, payload = None, b""
    for f, wt, v in fields(buf):
        if wt == 2 and f in (1, 2, 3):
            fields(v)  # each occurrence must be a valid message on its own
            if f != case:
                case, payload = f, bytes(v)
            else:
                payload += bytes(v)
    if case is None:
        return None, []
    return case, ref_list(case, payload)


def ref_decode(buf):
    """{key: (kind or None, values)} or RefError. Floats as uint32 bit patterns."""
    # A singular message field seen several times: each occurrence is parsed on its own (and must
    # be valid), then merged -- for valid messages, the same as parsing the concatenation.
    parts = [bytes(v) for f, wt, v in fields(buf) if f == 1 and wt == 2]
    for part in parts:
        fields(part)
    feats = b"".join(parts)
    raw = {}
    for f, wt, v in fields(feats):
        if f != 1 or wt != 2:
            continue
        key, value = b"", b""
        for ef, ewt, ev in fields(v):
            if ef == 1 and ewt == 2:
                key = bytes(ev)
            elif ef == 2 and ewt == 2:
                fields(ev)
                value += bytes(ev)  # a singular message field seen twice merges
        raw[key] = value
    return {k: ref_feature(v) for k, v in raw.items()}


# ==== the checks =================================================================================

def spec_for(decoded):
    return {k.decode("utf-8", "surrogateescape"): VarLen(KINDS[kind] if kind else "int64")
            for k, (kind, _) in decoded.items()}


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


class Stats:
    def __init__(self):
        self.counts = Counter()
        self.samples = {}

    def note(self, what, data):
        self.counts[what] += 1
        self.samples.setdefault(what, bytes(data))

    def report(self, title):
        if self.counts:
            print(f"\n[{title}] " + ", ".join(f"{k}: {v}" for k, v in sorted(self.counts.items())))
            for k, v in self.samples.items():
                print(f"   e.g. {k}: {v[:80].hex()}{'...' if len(v) > 80 else ''}")


def pb_decode(data):
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
            out[k.encode("utf-8", "surrogateescape")] = ({"bytes_list": 1, "float_list": 2,
                                                          "int64_list": 3}[which], vals)
    return out


def quiet_nans(bits):
    return [b | 0x00400000 if (b & 0x7F800000) == 0x7F800000 and b & 0x007FFFFF else b for b in bits]


def check(data, spec, stats, failures):
    """Parses one record with tfrec_fast; compares with the reference and with protobuf."""
    try:
        cols = parse_examples([data], spec)
        ours = {name: ours_values(cols, name, spec) for name in spec}
    except ExampleParseError as e:
        assert e.record_index == 0
        ours = "error"
    # anything else propagates: a bug (and a crash kills the run)
    try:
        ref = ref_decode(data)
        want = expected_from_ref(ref, spec)
    except RefError:
        ref = want = None
    if want is not None and ours != want:
        failures.append((bytes(data), want, ours))
    pb = pb_decode(data)
    if pb is None:
        if ours != "error":
            stats.note("protobuf rejects, tfrec_fast accepts (lenient: unrequested parts, utf-8...)", data)
        return
    pb_want = expected_from_ref(pb, spec)
    if isinstance(ours, dict) and isinstance(pb_want, dict):
        # protobuf's Python API hands out floats as doubles: a signalling NaN comes back quieted
        ours = {k: quiet_nans(v) if spec[k].kind == Kind.FLOAT else v for k, v in ours.items()}
        pb_want = {k: quiet_nans(v) if spec[k].kind == Kind.FLOAT else v for k, v in pb_want.items()}
    if ours == "error" and pb_want != "error":
        stats.note("protobuf accepts, tfrec_fast rejects" +
                   (" (reference rejects too)" if want is None else ""), data)
    elif ours != pb_want:
        if want is not None and ours == want:
            stats.note("tfrec_fast == reference != protobuf (upb quirk)", data)
        else:
            stats.note("tfrec_fast != protobuf", data)


def assert_no_failures(failures, label):
    if failures:
        data, want, got = failures[0]
        pytest.fail(f"BUG ({label}): {len(failures)} records where tfrec_fast disagrees with the "
                    f"protobuf-semantics reference decoder; first: record {data.hex()} "
                    f"expected {want!r} got {got!r}")


# ==== tests ======================================================================================

def test_seeds_agree_with_reference_and_protobuf():
    stats, failures = Stats(), []
    for rec in SEEDS:
        ref = ref_decode(rec)
        spec = spec_for(ref)
        check(rec, spec, stats, failures)
        pb = pb_decode(rec)
        assert pb is not None
    stats.report("seeds")
    assert_no_failures(failures, "seeds")


def test_random_bytes_deterministic():
    rnd = random.Random(1)
    stats, failures = Stats(), []
    spec = {"i": VarLen("int64"), "f": VarLen("float32"), "b": VarLen("bytes"), "": VarLen("int64")}
    for _ in range(3000):
        n = rnd.choice([0, 1, 2, 3, 5, 8, 16, 40, 200])
        data = bytes(rnd.getrandbits(8) for _ in range(n))
        check(data, spec, stats, failures)
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
        check(data, spec, stats, failures)
    stats.report("random bytes")
    assert_no_failures(failures, "random bytes")


def test_every_prefix_of_valid_examples():
    stats, failures = Stats(), []
    for rec in SEEDS:
        if len(rec) > 3000:
            continue
        spec = spec_for(ref_decode(rec))
        for n in range(len(rec)):
            check(rec[:n], spec, stats, failures)
    stats.report("prefixes")
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
    stats, failures = Stats(), []
    small = [r for r in SEEDS if len(r) < 3000]
    specs = [spec_for(ref_decode(r)) for r in small]
    for seed in range(6000):
        rnd = random.Random(seed)
        j = rnd.randrange(len(small))
        data = _mutate(rnd, small[j])
        if seed % 3 == 0:
            data = _mutate(rnd, data)
        check(data, specs[j], stats, failures)
    stats.report("mutations")
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
            got = col.to_list() if isinstance(col, BytesColumn) else [
                col.values[a:b].view(np.uint32).tolist() if spec[k].kind == Kind.FLOAT else col.values[a:b].tolist()
                for a, b in zip(col.row_splits[:-1], col.row_splits[1:])]
            assert got == [row[k] for row in rows], k


@settings(max_examples=400, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.binary(max_size=300))
def test_hypothesis_random_bytes(data):
    failures = []
    check(data, {"i": VarLen("int64"), "f": VarLen("float32"), "b": VarLen("bytes")}, Stats(), failures)
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
            del rec[data.draw(st.integers(0, len(rec))):]
    failures = []
    check(bytes(rec), spec, Stats(), failures)
    assert_no_failures(failures, "hypothesis mutations")


def test_known_protobuf_disagreements_do_not_crash():
    """Shapes where tfrec_fast and protobuf (upb) knowingly differ. Not asserted either way beyond
    'no crash, ExampleParseError or a result': they are listed in the test report.
    protobuf accepts, tfrec_fast rejects: groups (wire types 3/4); a list value whose wire type is
    not its type's (protobuf keeps it as an unknown field). protobuf rejects, tfrec_fast accepts:
    invalid UTF-8 keys, field numbers >= 2**29. upb drops a map entry that carries an unknown
    field (TensorFlow keeps it, as tfrec_fast does)."""
    e = lambda k, f: ld(1, entry(k, f))  # noqa: E731
    cases = [e(b"i", ld(3, ld(1, b"\x01"))) + b"\x3b\x3c",
             e(b"i", ld(3, ld(1, b"\x01") + b"\x13\x08\x01\x14")),
             e(b"b", ld(1, vi(1, 5))), e(b"i", ld(3, b"\x0d\x01\x00\x00\x00")), e(b"f", ld(2, vi(1, 3))),
             e(b"\xff", ld(3, ld(1, b"\x01"))) + e(b"i", ld(3, ld(1, b"\x02"))),
             e(b"i", ld(3, ld(1, b"\x01"))) + varint((1 << 29) << 3) + b"\x01",
             ld(1, ld(1, ld(1, b"i") + ld(2, ld(3, ld(1, b"\x01"))) + vi(3, 1)))]
    spec = {"i": VarLen("int64"), "b": VarLen("bytes"), "f": VarLen("float32")}
    stats, failures = Stats(), []
    for data in cases:
        check(data, spec, stats, failures)
    stats.report("known disagreements")
    assert not failures
