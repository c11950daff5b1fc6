"""Every file of the shared conformance corpus, read by tfrec_fast, against its sidecar."""

from __future__ import annotations

import hashlib
import os

import _corpus
import _oracle
import pytest
from _util import check_error, read_all, summarize

import tfrec_fast

ALL = _corpus.case_params(pytest)
WELL_FORMED = _corpus.case_params(pytest, lambda c: c.well_formed)
CORRUPT = _corpus.case_params(pytest, lambda c: not c.well_formed)
COMPRESSED_OK = _corpus.case_params(pytest, lambda c: c.well_formed and c.compression)

# What tfrec_fast must report on the known damaged files (where TensorFlow is wrong,
# we must be right): records before the error, reason, record_index, header offset.
KNOWN_DAMAGE = {
    "corrupt/data_crc_bitflip.tfrecord": (2, "data_checksum", 2, 150),
    "corrupt/payload_bitflip.tfrecord": (2, "data_checksum", 2, 150),
    "corrupt/length_bitflip.tfrecord": (2, "length_checksum", 2, 150),
    "corrupt/length_2pow60.tfrecord": (2, "length_too_large", 2, 150),
    "corrupt/truncated_mid_header.tfrecord": (3, "truncated", 3, 601),
    "corrupt/truncated_mid_payload.tfrecord": (3, "truncated", 3, 601),
    "corrupt/truncated_in_final_crc.tfrecord": (5, "truncated", 5, 3092),
    "corrupt/trailing_garbage_5.tfrecord": (6, "truncated", 6, 3209),
    "corrupt/gzip_truncated_mid_stream.tfrecord": (
        25,
        {"truncated", "compressed_stream"},
        25,
        210177,
    ),
}


def sources(case):
    """(kind, opener) pairs: each opener returns (source, closer)."""

    def path_str():
        return str(case.path), None

    def path_obj():
        return case.path, None

    def memory():
        return case.read_bytes(), None

    def fileobj():
        f = open(case.path, "rb")
        return f, f.close

    return [("str", path_str), ("pathlike", path_obj), ("bytes", memory), ("file", fileobj)]


def read_kind(case, opener, compression=None, **kw):
    src, closer = opener()
    try:
        return read_all(
            src, compression=case.compression if compression is None else compression, **kw
        )
    finally:
        if closer:
            closer()


def assert_matches_sidecar(records, exp):
    got = summarize(records)
    assert got["record_count"] == exp["record_count"]
    want_sha = exp["record_sha256"]
    if exp.get("record_sha256_is_prefix"):
        assert got["record_sha256"][: len(want_sha)] == want_sha
    else:
        assert got["record_sha256"] == want_sha
    if "record_lengths" in exp:
        assert got["record_lengths"] == exp["record_lengths"]
    for key in ("all_payloads_sha256", "total_payload_bytes", "record_lengths_sha256"):
        assert got[key] == exp[key], key


def test_corpus_present(corpus_dir, corpus_cases):
    """The corpus must be there (fail, not skip) and cover every category."""
    cats = {c.rel.split("/")[0] for c in corpus_cases}
    assert {"raw", "compressed", "example", "sequence", "index", "corrupt"} <= cats, cats
    for c in corpus_cases:
        assert c.path.stat().st_size == c.expected["file_size"], c.rel


def test_known_damage_table_covers_corpus(corpus_cases):
    """Every corrupt/ file in the corpus has an explicit expectation in this module."""
    corrupt = {c.rel for c in corpus_cases if not c.well_formed}
    assert corrupt == set(KNOWN_DAMAGE), corrupt ^ set(KNOWN_DAMAGE)


@pytest.mark.parametrize("case", WELL_FORMED)
def test_well_formed_file_matches_sidecar(case):
    """Well-formed files: count, per-record sha256, lengths and aggregate digests match."""
    case = _corpus.require_case(pytest, case)
    records, err = read_kind(case, sources(case)[0][1])
    assert err is None, str(err)
    assert_matches_sidecar(records, case.expected)


@pytest.mark.parametrize("case", ALL)
def test_all_source_kinds_identical(case):
    """str path, PathLike, in-memory bytes and an open binary file give identical results."""
    case = _corpus.require_case(pytest, case)
    results = {}
    for kind, opener in sources(case):
        records, err = read_kind(case, opener)
        results[kind] = (
            [hashlib.sha256(r).digest() for r in records],
            None if err is None else (err.reason, err.record_index, err.offset),
        )
    first = results["str"]
    for kind, res in results.items():
        assert res == first, (kind, res[1], first[1], len(res[0]), len(first[0]))
    if case.well_formed:
        assert first[1] is None


@pytest.mark.parametrize("case", CORRUPT)
def test_corrupt_file_error(case):
    """Damaged files: the intact records come out, then DataLossError with reason/index/offset."""
    case = _corpus.require_case(pytest, case)
    exp = case.expected
    n_before, reason, index, offset = KNOWN_DAMAGE[case.rel]
    for kind, opener in sources(case):
        records, err = read_kind(case, opener)
        assert len(records) == n_before == exp["records_before_error"], kind
        assert [hashlib.sha256(r).hexdigest() for r in records] == exp["intact_record_sha256"][
            :n_before
        ]
        assert err is not None, "%s via %s: no DataLossError (silent end)" % (case.rel, kind)
        check_error(err, reason=reason, record_index=index, offset=offset)
        if kind in ("str", "pathlike"):
            assert err.path is not None and os.path.samefile(err.path, case.path)
            assert str(case.path) in str(err) or case.path.name in str(err)
        elif kind == "file":
            # an open file may be described by its name (better) or a placeholder
            assert (
                err.path is None
                or err.path.startswith("<")
                or os.path.samefile(err.path, case.path)
            ), err.path
        else:
            assert err.path is None or (isinstance(err.path, str) and err.path.startswith("<")), (
                err.path
            )


def test_length_2pow60_no_crash_in_subprocess(corpus_file):
    """length_2pow60 kills TensorFlow (SIGSEGV); tfrec_fast must raise, in a fresh process too."""
    import subprocess
    import sys

    p = corpus_file("corrupt/length_2pow60.tfrecord")
    code = (
        "import sys, tfrec_fast\n"
        "n = 0\n"
        "try:\n"
        "    for r in tfrec_fast.read_records(sys.argv[1]): n += 1\n"
        "except tfrec_fast.DataLossError as e:\n"
        "    print(n, e.reason, e.record_index, e.offset)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(p)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, (out.returncode, out.stderr)
    assert out.stdout.split() == ["2", "length_too_large", "2", "150"]


def test_data_checksum_message_names_record(corpus_file):
    """Data CRC failure: offset attribute is the header start (150), message names record 2."""
    p = corpus_file("corrupt/payload_bitflip.tfrecord")
    records, err = read_all(str(p))
    assert len(records) == 2
    check_error(err, reason="data_checksum", record_index=2, offset=150)
    assert "corrupted record at" in str(err)
    assert "2" in str(err)


@pytest.mark.parametrize("case", WELL_FORMED)
def test_count_records_matches(case):
    """count_records equals record_count on every well-formed file."""
    case = _corpus.require_case(pytest, case)
    assert (
        tfrec_fast.count_records(str(case.path), compression=case.compression)
        == case.expected["record_count"]
    )
    assert (
        tfrec_fast.count_records(case.path, compression=case.compression or None, verify=False)
        == case.expected["record_count"]
    )


@pytest.mark.parametrize(
    "rel,reason",
    [
        ("corrupt/length_bitflip.tfrecord", "length_checksum"),
        ("corrupt/length_2pow60.tfrecord", "length_too_large"),
        ("corrupt/truncated_mid_payload.tfrecord", "truncated"),
        ("corrupt/truncated_mid_header.tfrecord", "truncated"),
        ("corrupt/trailing_garbage_5.tfrecord", "truncated"),
    ],
)
def test_count_records_detects_header_damage(corpus_file, rel, reason):
    """count_records never returns a count for a file whose framing is broken."""
    with pytest.raises(tfrec_fast.DataLossError) as ei:
        tfrec_fast.count_records(str(corpus_file(rel)))
    assert ei.value.reason == reason


@pytest.mark.parametrize("case", WELL_FORMED)
def test_verify_false_same_records(case):
    """verify=False yields exactly the same records on well-formed files."""
    case = _corpus.require_case(pytest, case)
    records, err = read_kind(case, sources(case)[0][1], verify=False)
    assert err is None
    assert_matches_sidecar(records, case.expected)


def test_verify_false_yields_damaged_payload(corpus_file):
    """verify=False on payload_bitflip yields all 6 records, record 2 with the flipped bit."""
    orig, err = read_all(str(corpus_file("example/packed_lists.tfrecord")))
    assert err is None and len(orig) == 6
    records, err = read_all(str(corpus_file("corrupt/payload_bitflip.tfrecord")), verify=False)
    assert err is None
    assert len(records) == 6
    assert records[:2] == orig[:2] and records[3:] == orig[3:]
    # payload byte 217 of record 2 (file offset 379 = 150 + 12 + 217), bit 3 flipped
    assert records[2] == _oracle.flip_bit(orig[2], 217, 3)


def test_verify_false_ignores_data_crc(corpus_file):
    """verify=False on data_crc_bitflip yields all 6 original payloads."""
    orig, _ = read_all(str(corpus_file("example/packed_lists.tfrecord")))
    records, err = read_all(str(corpus_file("corrupt/data_crc_bitflip.tfrecord")), verify=False)
    assert err is None
    assert records == orig


@pytest.mark.parametrize("case", COMPRESSED_OK)
@pytest.mark.parametrize("as_", ["none", "other"])
def test_wrong_compression_is_data_loss(case, as_):
    """A compressed file read with the other codec or none raises DataLossError (TF's behaviour)."""
    case = _corpus.require_case(pytest, case)
    actual = case.compression.lower()
    if as_ == "other":
        wrong = "zlib" if actual == "gzip" else "gzip"
    else:
        wrong = None
    for kind, opener in sources(case):
        src, closer = opener()
        try:
            records, err = read_all(src, compression=wrong)
        finally:
            if closer:
                closer()
        assert err is not None, (kind, wrong)
        assert records == [], (kind, wrong)
        if wrong is None:
            check_error(err, record_index=0, offset=0)
            assert "Is this even a TFRecord file?" in str(err)
        else:
            check_error(err, reason="compressed_stream", record_index=0)


@pytest.mark.parametrize("case", COMPRESSED_OK)
def test_compression_name_spellings(case):
    """Compression names are case-insensitive: 'GZIP', 'gzip', 'Gzip' all work."""
    case = _corpus.require_case(pytest, case)
    want = case.expected["record_count"]
    for name in (case.compression, case.compression.lower(), case.compression.capitalize()):
        assert sum(1 for _ in tfrec_fast.read_records(str(case.path), compression=name)) == want


@pytest.mark.parametrize("case", COMPRESSED_OK)
def test_compressed_positions_are_decompressed_offsets(case):
    """batch.positions of a compressed file are header offsets in the inflated stream."""
    case = _corpus.require_case(pytest, case)
    with tfrec_fast.TFRecordReader(str(case.path), compression=case.compression) as r:
        pos = []
        for b in r.iter_batches():
            pos.extend(int(x) for x in b.positions)
        end = r.tell()
    want = _oracle.record_offsets([b"\0" * n for n in case.expected["record_lengths"]])
    assert pos == want[:-1]
    assert end == case.expected["decompressed_size"] == want[-1]
