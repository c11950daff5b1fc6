"""torch's default collate over tfrec_fast's per-record datasets: the records are dicts of a type
registered in default_collate_fn_map (tfrec_fast.torch._tensors.Record), so a batch of them is collated
in one numpy call per feature and, in a DataLoader worker, handed over through the worker's
shared-memory ring. Everything here is compared with what torch's own default_collate makes of
the same records as plain dicts: the same values, dtypes, shapes, types and errors."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch")

from test_torch import write_file  # noqa: E402
from torch.utils.data import DataLoader, default_collate  # noqa: E402

from tfrec_fast import FixedLen, VarLen  # noqa: E402
from tfrec_fast._loader import read_range  # noqa: E402
from tfrec_fast.compat.tfrecord.torch import TFRecordDataset as PackageDataset  # noqa: E402
from tfrec_fast.records import ITER_BATCH_BYTES  # noqa: E402
from tfrec_fast.torch import IndexedTFRecordDataset, TFRecordDataset  # noqa: E402
from tfrec_fast.torch._tensors import Record  # noqa: E402

DESCRIPTION = {"img": "byte", "label": "int", "name": "byte"}  # the tfrecord package's way


def plain(records):
    """The records as the plain dicts (of plain numpy arrays) the tfrecord package gives."""
    return [
        {k: (np.array(v) if isinstance(v, np.ndarray) else v) for k, v in r.items()}
        for r in records
    ]


def same_batch(got, want):
    assert type(got) is dict and list(got) == list(want)
    for k in want:
        if isinstance(want[k], torch.Tensor):
            assert type(got[k]) is torch.Tensor
            assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape
            assert torch.equal(got[k], want[k]), k
        else:
            assert got[k] == want[k], k


def test_records_collate_as_plain_dicts(tmp_path):
    path = str(write_file(tmp_path / "a.tfrecord", range(40)))
    records = list(PackageDataset(path, None, DESCRIPTION))
    assert all(isinstance(r, dict) for r in records)
    assert all(type(r["label"]) is np.ndarray and r["label"].shape == (1,) for r in records)
    for size in (1, 7, 40):
        same_batch(default_collate(records[:size]), default_collate(plain(records[:size])))


def test_spec_records_collate_as_plain_dicts(tmp_path):
    path = str(write_file(tmp_path / "a.tfrecord", range(30)))
    spec = {
        "id": FixedLen((), "int64"),
        "img": FixedLen((2, 3), "uint8"),
        "name": FixedLen((), "bytes"),
    }
    records = list(TFRecordDataset(path, spec=spec))
    want = default_collate([dict(r) for r in records])
    same_batch(default_collate(records), want)


def test_uneven_and_string_values_keep_torchs_errors(tmp_path):
    path = str(write_file(tmp_path / "a.tfrecord", range(12)))
    records = list(PackageDataset(path, None, {"tokens": "int"}))  # 0..3 tokens a record
    with pytest.raises(RuntimeError) as ours:
        default_collate(records[:4])
    with pytest.raises(RuntimeError) as theirs:
        default_collate(plain(records[:4]))
    assert str(ours.value) == str(theirs.value)
    strings = [Record(x=np.array([b"a", b"b"])) for _ in range(3)]
    with pytest.raises(TypeError):
        default_collate(strings)


@pytest.mark.parametrize(
    "values",
    [
        [np.arange(3, dtype=np.int64), np.arange(3, dtype=np.int32)],  # dtypes differ
        [np.arange(3, dtype=np.int64), np.arange(4, dtype=np.int64)],  # shapes differ
        [np.zeros((2, 2), np.float32), np.zeros(4, np.float32)],
        [np.arange(3), [0, 1, 2]],  # not all arrays
        [np.arange(3), np.arange(3).view(np.ndarray)[None][0]],  # same: stacked
    ],
)
def test_records_of_mixed_arrays_collate_as_torch_does(values):
    records = [Record(x=v) for v in values]
    try:
        want = default_collate([{"x": v} for v in values])
    except Exception as theirs:
        with pytest.raises(type(theirs)):
            default_collate(records)
    else:
        same_batch(default_collate(records), want)


def test_changed_records_collate_as_they_are(tmp_path):
    """A transform (or anyone) may change a record: its new values are collated."""
    path = str(write_file(tmp_path / "a.tfrecord", range(10)))

    def change(record):
        record["label"] = record["label"].astype(np.float32) * 2
        record["extra"] = len(record["img"])
        return record

    records = list(PackageDataset(path, None, DESCRIPTION, transform=change))
    batch = default_collate(records)
    assert batch["label"].dtype == torch.float32
    assert batch["label"].flatten().tolist() == [2.0 * (i % 10) for i in range(10)]
    assert batch["extra"].tolist() == [6] * 10


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("ring", [True, False])
def test_dataloader_batches_equal_torchs_own(tmp_path, workers, ring):
    path = str(write_file(tmp_path / "a.tfrecord", range(300)))
    want = [
        default_collate(plain(list(PackageDataset(path, None, DESCRIPTION))[i : i + 32]))
        for i in range(0, 300, 32)
    ]
    ds = PackageDataset(path, None, DESCRIPTION)
    ds.worker_ring = ring
    got = list(DataLoader(ds, batch_size=32, num_workers=workers))
    if workers:  # the workers' shares interleave: compare record by record
        key = [int(lab) for b in got for lab in b["label"].flatten().tolist()]
        assert sorted(key) == sorted(int(lab) for b in want for lab in b["label"].flatten())
        names = sorted(n for b in got for n in b["name"])
        assert names == sorted(n for b in want for n in b["name"])
        assert all(b["img"] and isinstance(b["img"][0], bytes) for b in got)
    else:
        assert len(got) == len(want)
        for g, w in zip(got, want):
            same_batch(g, w)


def test_indexed_dataset_with_default_collate_and_workers(tmp_path):
    path = str(write_file(tmp_path / "a.tfrecord", range(100)))
    ds = IndexedTFRecordDataset(path, spec={"id": FixedLen((), "int64"), "name": VarLen("bytes")})
    got = list(DataLoader(ds, batch_size=10, num_workers=2))
    records = [dict(ds[i]) for i in range(100)]
    want = [default_collate(records[i : i + 10]) for i in range(0, 100, 10)]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        same_batch(g, w)


def test_ring_carries_other_values_beside_tensors():
    import pickle
    from multiprocessing.reduction import ForkingPickler

    from tfrec_fast.torch import _worker_ring as ring

    writer = ring.RingWriter(slot_bytes=4096, slots=3)
    batch = {"img": [b"a" * 5, b"bc"], "label": torch.arange(2), "meta": {"k": 1}}
    sent = writer.put(batch)
    assert isinstance(sent, ring._RingBatch)
    got = pickle.loads(ForkingPickler.dumps(sent))
    assert list(got) == ["img", "label", "meta"]
    assert got["img"] == [b"aaaaa", b"bc"] and got["meta"] == {"k": 1}
    assert torch.equal(got["label"], torch.arange(2))


def test_range_reads_come_in_cache_sized_batches(tmp_path):
    """With an index a range's end is known; it is still read a bounded batch at a time (a
    DataLoader worker's share of a large file once came as one batch)."""
    path = str(write_file(tmp_path / "a.tfrecord", range(20000)))
    batches = list(read_range(path, 0, 20000))
    assert sum(len(b) for b in batches) == 20000
    assert len(batches) > 1 and max(b.nbytes for b in batches) <= ITER_BATCH_BYTES
    assert [len(b) for b in read_range(path, 5, 40, max_records=16)] == [16, 16, 3]
