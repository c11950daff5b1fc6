"""An index written before its file changed is refused when opened, so len() never reports the
old count (issue #10, finding F)."""

from __future__ import annotations

import pickle

import _oracle
import pytest

from tfrec_fast import DataLossError, IndexedTFRecordReader, create_index

OLD = [bytes([i]) * (10 + i) for i in range(20)]


@pytest.fixture
def indexed(tmp_path):
    path = tmp_path / "data.tfrecord"
    path.write_bytes(_oracle.build_file(OLD))
    index = tmp_path / "data.tfrecord.idx"
    create_index(path, index)
    return path, index


def check(error, path, index, record, offset, sizes):
    assert isinstance(error, DataLossError) and error.reason == "index_mismatch"
    assert (error.path, error.record_index, error.offset) == (str(path), record, offset)
    message = str(error)
    assert "None" not in message
    assert str(path) in message and str(index) in message
    assert all(str(n) in message for n in sizes)


def test_records_appended(indexed):
    path, index = indexed
    path.write_bytes(_oracle.build_file(OLD + [b"new"]))
    old_size = len(_oracle.build_file(OLD))
    with pytest.raises(DataLossError) as info:
        IndexedTFRecordReader(path, index)
    check(info.value, path, index, 20, old_size, [old_size, old_size + 16 + 3])


def test_records_removed(indexed):
    path, index = indexed
    path.write_bytes(_oracle.build_file(OLD[:15]))
    offsets = _oracle.record_offsets(OLD)
    with pytest.raises(DataLossError) as info:
        len(IndexedTFRecordReader(path, str(index)))
    check(info.value, path, index, 15, offsets[15], [offsets[15]])


def test_offsets_and_sizes_given(indexed):
    path, _ = indexed
    offsets, sizes = create_index(path)
    path.write_bytes(_oracle.build_file(OLD[:-1]))
    with pytest.raises(DataLossError) as info:
        IndexedTFRecordReader(path, (offsets, sizes))
    assert info.value.record_index == 19 and "None" not in str(info.value)


def test_unpickled_reader_checks_again(indexed):
    path, index = indexed
    reader = IndexedTFRecordReader(path, index)
    data = pickle.dumps(reader)
    path.write_bytes(_oracle.build_file(OLD + [b"new"]))
    clone = pickle.loads(data)
    with pytest.raises(DataLossError) as info:
        clone[0]
    assert info.value.reason == "index_mismatch" and "None" not in str(info.value)


def test_an_index_that_fits_still_opens(indexed):
    path, index = indexed
    with IndexedTFRecordReader(path, index) as reader:
        assert len(reader) == 20 and bytes(reader[19]) == OLD[19]
