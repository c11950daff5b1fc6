"""skip_corrupt=True: damaged records are skipped, counted and reported; reading goes on where it
safely can; `tfrec-fast verify --repair OUT` keeps every intact record."""

import gzip
import subprocess
import sys

import _oracle
import pytest

import tfrec_fast

PAYLOADS = [bytes([i]) * (10 + 7 * i) for i in range(8)]
OFFSETS = _oracle.record_offsets(PAYLOADS)
DATA = _oracle.build_file(PAYLOADS)


def read_skipping(data, compression=None):
    with tfrec_fast.TFRecordReader(data, compression, skip_corrupt=True) as reader:
        records = [bytes(r) for r in reader]
    return records, reader.skipped


@pytest.mark.parametrize("victim", range(len(PAYLOADS)))
@pytest.mark.parametrize("where", ["length", "length_crc", "payload", "data_crc"])
def test_one_damaged_record_is_skipped_and_reported(victim, where):
    start = OFFSETS[victim]
    spot = {
        "length": start,
        "length_crc": start + 9,
        "payload": start + 12,
        "data_crc": start + 12 + len(PAYLOADS[victim]),
    }[where]
    records, skipped = read_skipping(_oracle.flip_bit(DATA, spot, 3))
    assert records == PAYLOADS[:victim] + PAYLOADS[victim + 1 :]
    assert len(skipped) == 1
    error = skipped[0]
    assert isinstance(error, tfrec_fast.DataLossError)
    assert (error.record_index, error.offset) == (victim, start)
    assert error.reason == (
        "data_checksum" if where in ("payload", "data_crc") else "length_checksum"
    )


def test_garbage_between_records_is_skipped_by_searching_for_a_header():
    junk = b"\xde\xad\xbe\xef" * 50
    data = DATA[: OFFSETS[3]] + junk + DATA[OFFSETS[3] :]
    records, skipped = read_skipping(data)
    assert records == PAYLOADS
    assert [(e.record_index, e.offset, e.reason) for e in skipped] == [
        (3, OFFSETS[3], "length_checksum")
    ]
    assert f"offset {OFFSETS[3] + len(junk)}" in skipped[0].detail


def test_truncated_tail_ends_the_stream_with_a_report():
    records, skipped = read_skipping(DATA[:-5])
    assert records == PAYLOADS[:-1]
    assert [(e.record_index, e.reason) for e in skipped] == [(7, "truncated")]


def test_damaged_gzip_stream_keeps_what_inflates():
    packed = gzip.compress(DATA)
    records, skipped = read_skipping(packed[: len(packed) - 12], "gzip")
    assert records == PAYLOADS[: len(records)] and len(records) < len(PAYLOADS)
    assert len(skipped) == 1 and skipped[0].reason in ("truncated", "compressed_stream")


def test_intact_file_reports_nothing():
    assert read_skipping(DATA) == (PAYLOADS, [])


def test_read_records_calls_on_skip():
    seen = []
    damaged = _oracle.flip_bit(DATA, OFFSETS[2] + 14, 0)
    got = [
        bytes(r)
        for r in tfrec_fast.read_records([damaged, DATA], skip_corrupt=True, on_skip=seen.append)
    ]
    assert got == PAYLOADS[:2] + PAYLOADS[3:] + PAYLOADS
    assert [(e.record_index, e.reason) for e in seen] == [(2, "data_checksum")]


def test_read_records_warns_by_default():
    damaged = _oracle.flip_bit(DATA, OFFSETS[2] + 14, 0)
    with pytest.warns(RuntimeWarning, match="skipped damaged data"):
        assert len(list(tfrec_fast.read_records(damaged, skip_corrupt=True))) == 7


def test_verify_repair_writes_every_intact_record(tmp_path):
    source = tmp_path / "damaged.tfrecord"
    source.write_bytes(_oracle.flip_bit(DATA, OFFSETS[5] + 2, 1))
    out = tmp_path / "repaired.tfrecord"
    proc = subprocess.run(
        [sys.executable, "-m", "tfrec_fast", "verify", str(source), "--repair", str(out)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert "SKIPPED" in proc.stderr and "offset " + str(OFFSETS[5]) in proc.stderr
    assert [bytes(r) for r in tfrec_fast.read_records(out)] == PAYLOADS[:5] + PAYLOADS[6:]
    clean = subprocess.run(
        [sys.executable, "-m", "tfrec_fast", "verify", str(out)], capture_output=True, text=True
    )
    assert clean.returncode == 0


def test_indexed_reader_skips_a_damaged_record_at_the_next_indexed_one(tmp_path):
    path = tmp_path / "damaged.tfrecord"
    path.write_bytes(_oracle.flip_bit(DATA, OFFSETS[4] + 13, 2))
    offsets, sizes = tfrec_fast.create_index(_write(tmp_path / "clean.tfrecord", DATA))
    with tfrec_fast.IndexedTFRecordReader(path, (offsets, sizes)) as reader:
        with pytest.raises(tfrec_fast.DataLossError):
            reader.get_batch(range(8))
        batch = reader.get_batch([7, 4, 0, 5], skip_corrupt=True)
        assert batch.to_list() == [PAYLOADS[7], PAYLOADS[0], PAYLOADS[5]]
        assert [(e.offset, e.reason) for e in reader.skipped] == [(OFFSETS[4], "data_checksum")]


def _write(path, data):
    path.write_bytes(data)
    return path
