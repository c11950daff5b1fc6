"""tfrec_fast.compat.tfrecord: the `tfrecord` package's values and errors (its README and its
own test suite run in test_compat_tfrecord_readme.py and CI's peers step)."""

from __future__ import annotations

import numpy as np
import pytest

import tfrec_fast.compat.tfrecord as tfrecord
from tfrec_fast.proto import sequence_example_to_dict


@pytest.fixture
def path(tmp_path):
    p = str(tmp_path / "a.tfrecord")
    writer = tfrecord.TFRecordWriter(p)
    for i in range(5):
        datum = {"label": (i, "int"), "tags": ([b"a", b"b"], "byte"), "x": ([0.5], "float")}
        if i == 3:
            del datum["tags"]
        writer.write(datum)
    writer.close()
    return p


def test_values_are_the_packages(path):
    first = next(
        tfrecord.example_loader(path, None, {"label": "int", "tags": "byte", "x": "float"})
    )
    assert first["label"].dtype == np.int64 and first["label"].tolist() == [0]
    assert first["x"].dtype == np.float32
    assert first["tags"].dtype == np.dtype("S1") and first["tags"].tolist() == [b"a", b"b"]
    rows = list(tfrecord.example_loader(path, None))  # no description: each record's own keys
    assert "tags" not in rows[3] and "tags" in rows[4]


def test_missing_key_after_the_records_before_it(path):
    got = []
    with pytest.raises(KeyError, match="Key tags doesn't exist"):
        for row in tfrecord.example_loader(path, None, {"tags": "byte"}):
            got.append(row)
    assert len(got) == 3


def test_wrong_type_is_type_error(path):
    with pytest.raises(TypeError, match="Incompatible type 'float' for `label` .should be 'int'"):
        list(tfrecord.example_loader(path, None, {"label": "float"}))


def test_sequence_datum(tmp_path):
    p = str(tmp_path / "s.tfrecord")
    with tfrecord.TFRecordWriter(p) as writer:
        writer.write(
            {"length": (2, "int")}, {"tok": ([[1, 2], [3]], "int"), "w": ([b"x", b"yz"], "byte")}
        )
    (record,) = tfrecord.tfrecord_iterator(p)
    assert sequence_example_to_dict(record) == (
        {"length": [2]},
        {"tok": [[1, 2], [3]], "w": [[b"x"], [b"yz"]]},
    )


def test_iterator_utils_and_multi_loader(path, tmp_path):
    np.random.seed(0)
    assert sorted(tfrecord.shuffle_iterator(iter(range(10)), 4)) == list(range(10))
    mixed = list(
        tfrecord.sample_iterators([lambda: iter("ab"), lambda: iter("xyz")], [1, 1], infinite=False)
    )
    assert sorted(mixed) == list("abxyz")
    it = tfrecord.multi_tfrecord_loader(
        path.replace("a.tfrecord", "{}.tfrecord"),
        None,
        {"a": 1.0},
        {"label": "int"},
        infinite=False,
    )
    assert [r["label"].item() for r in it] == [0, 1, 2, 3, 4]
