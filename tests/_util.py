"""Small helpers shared by the test modules (no fixtures here)."""

from __future__ import annotations

import hashlib
import struct

import tfrec_fast

VALID_REASONS = {
    "truncated",
    "length_checksum",
    "data_checksum",
    "length_too_large",
    "compressed_stream",
    "index_mismatch",
}


def read_all(source, compression=None, **kw):
    """Read every record as bytes; returns (records, DataLossError or None)."""
    out = []
    try:
        for r in tfrec_fast.read_records(source, compression=compression, **kw):
            out.append(bytes(r))
    except tfrec_fast.DataLossError as e:
        return out, e
    return out, None


def summarize(records):
    """The digests the corpus sidecars carry, computed from a list of payloads."""
    sha = [hashlib.sha256(r).hexdigest() for r in records]
    lengths = [len(r) for r in records]
    allh = hashlib.sha256()
    for r in records:
        allh.update(r)
    return {
        "record_count": len(records),
        "record_sha256": sha,
        "record_lengths": lengths,
        "all_payloads_sha256": allh.hexdigest(),
        "total_payload_bytes": sum(lengths),
        "record_lengths_sha256": hashlib.sha256(
            b"".join(struct.pack("<Q", n) for n in lengths)
        ).hexdigest(),
    }


# Ways a message may name each reason: the code itself, spaced words, or TF's / plain phrases.
REASON_PHRASES = {
    "truncated": ("truncated",),
    "length_checksum": ("length checksum", "length crc", "length field does not match"),
    "data_checksum": ("data checksum", "data crc", "data does not match"),
    "length_too_large": ("length too large", "too large", "length field larger", "larger than"),
    "compressed_stream": ("compressed stream", "inflate", "compressed", "gzip", "zlib"),
}


def reason_words(reason):
    return {reason, reason.replace("_", " ")} | set(REASON_PHRASES.get(reason, ()))


def check_error(e, *, reason=None, record_index=None, offset=None):
    """Common DataLossError contract: type, attributes, message content."""
    assert isinstance(e, tfrec_fast.DataLossError)
    assert isinstance(e, OSError)
    assert e.reason in VALID_REASONS, e.reason
    if reason is not None:
        if isinstance(reason, (set, frozenset, tuple, list)):
            assert e.reason in reason, (e.reason, reason, str(e))
        else:
            assert e.reason == reason, (e.reason, str(e))
    if record_index is not None:
        assert e.record_index == record_index, (e.record_index, str(e))
    if offset is not None:
        assert e.offset == offset, (e.offset, str(e))
    assert isinstance(e.record_index, int) and e.record_index >= 0
    assert isinstance(e.offset, int) and e.offset >= 0
    msg = str(e)
    assert str(e.offset) in msg, msg
    assert str(e.record_index) in msg, msg
    low = msg.lower()
    assert any(w in low for w in reason_words(e.reason)), msg
    if e.reason == "truncated":
        assert "truncated record at %d" % e.offset in msg, msg
    if e.reason in ("length_checksum",):
        assert "corrupted record at %d" % e.offset in msg, msg
    if e.reason == "data_checksum":
        assert "corrupted record at" in msg, msg
    if e.offset == 0 and e.reason != "compressed_stream":
        assert "Is this even a TFRecord file?" in msg, msg
    return e
