"""Bytes features out of the torch datasets: copies by default, memoryviews of the batch with
copy_bytes=False (collated as bytes are; refused, not hung on, in DataLoader workers)."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch")

from tfrec_fast import FixedLen, TFRecordWriter, VarLen  # noqa: E402
from tfrec_fast.torch import IndexedTFRecordDataset, MultiTFRecordDataset, TFRecordDataset, collate  # noqa: E402

SPEC = {"id": FixedLen((), "int64"), "name": FixedLen((), "bytes"), "tags": VarLen("bytes")}


def name_of(i: int) -> bytes:
    return f"record-{i}".encode() * (1 + i % 3)


def tags_of(i: int) -> list:
    return [f"t{i}-{k}".encode() for k in range(i % 3)]


def write(path, ids):
    with TFRecordWriter(str(path)) as w:
        w.write_examples(
            {
                "id": np.asarray(ids, np.int64),
                "name": [name_of(i) for i in ids],
                "tags": [tags_of(i) for i in ids],
            }
        )
    return str(path)


@pytest.fixture
def files(tmp_path):
    return [
        write(tmp_path / "a.tfrecord", range(0, 23)),
        write(tmp_path / "b.tfrecord", range(23, 40)),
    ]


def check(record, kind):
    i = int(record["id"])
    assert type(record["name"]) is kind and bytes(record["name"]) == name_of(i)
    assert all(type(t) is kind for t in record["tags"])
    assert [bytes(t) for t in record["tags"]] == tags_of(i)


def records_of(batch):
    n = len(batch["id"])
    return [{k: v[j] for k, v in batch.items()} for j in range(n)]


MAKERS = {
    "records": lambda files, **kw: TFRecordDataset(files, spec=SPEC, **kw),
    "batches": lambda files, **kw: TFRecordDataset(files, spec=SPEC, batch_size=7, **kw),
    "shuffled batches": lambda files, **kw: TFRecordDataset(
        files, spec=SPEC, batch_size=7, shuffle_buffer=9, **kw
    ),
    "threads": lambda files, **kw: TFRecordDataset(
        files, spec=SPEC, batch_size=5, num_threads=2, **kw
    ),
    "mixed": lambda files, **kw: MultiTFRecordDataset(
        {"a": files[0], "b": files[1]}, spec=SPEC, infinite=False, **kw
    ),
}


@pytest.mark.parametrize("name", sorted(MAKERS))
@pytest.mark.parametrize("copy_bytes", [None, True, False])
def test_copies_by_default_views_on_request(files, name, copy_bytes):
    kw = {} if copy_bytes is None else {"copy_bytes": copy_bytes}
    ds = MAKERS[name](files, **kw)
    out = list(ds)
    records = [r for item in out for r in (records_of(item) if ds.batch_size else [item])]
    assert sorted(int(r["id"]) for r in records) == list(range(40))
    for r in records:
        check(r, memoryview if copy_bytes is False else bytes)


def test_views_are_of_the_batch_not_copies(files):
    """Views of one batch share its buffer; copies do not; views outlive the dataset."""
    batch = next(iter(TFRecordDataset(files, spec=SPEC, batch_size=8, copy_bytes=False)))
    owners = {id(v.obj) for v in batch["name"]}
    assert len(owners) == 1
    assert all(v.readonly for v in batch["name"])
    del owners
    assert [bytes(v) for v in batch["name"]] == [name_of(i) for i in range(8)]


def test_indexed_dataset_copy_bytes(files):
    views = IndexedTFRecordDataset(files, spec=SPEC, copy_bytes=False)
    copies = IndexedTFRecordDataset(files, spec=SPEC)
    for i in (0, 5, 22, 23, 39):
        check(views[i], memoryview)
        check(copies[i], bytes)
    got = views.__getitems__([3, 30, 4])
    assert [int(r["id"]) for r in got] == [3, 30, 4]
    for r in got:
        check(r, memoryview)


@pytest.mark.parametrize("worker_ring", [True, False])
def test_views_collated_as_bytes_are(files, worker_ring):
    """Records with views through a DataLoader (no workers): a list of views per batch, as
    torch collates bytes, never a tensor of byte values."""
    ds = TFRecordDataset(
        files,
        spec={"id": SPEC["id"], "name": SPEC["name"]},
        copy_bytes=False,
        worker_ring=worker_ring,
    )
    # Records of a worker_ring dataset collate with torch's default; plain dicts need collate.
    loader = torch.utils.data.DataLoader(
        ds, batch_size=6, collate_fn=None if worker_ring else collate
    )
    seen = []
    for batch in loader:
        assert isinstance(batch["name"], list)
        assert all(type(v) is memoryview for v in batch["name"])
        assert [bytes(v) for v in batch["name"]] == [name_of(int(i)) for i in batch["id"]]
        seen += batch["id"].tolist()
    assert seen == list(range(40))


def test_views_in_workers_through_a_transform(files):
    """copy_bytes=False in DataLoader workers: a transform that consumes the views works."""

    def transform(batch):
        batch["name"] = [bytes(v).upper() for v in batch["name"]]
        batch["tags"] = [len(t) for t in batch["tags"]]
        return batch

    ds = TFRecordDataset(files, spec=SPEC, batch_size=5, copy_bytes=False, transform=transform)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
    got = {}
    for batch in loader:
        for i, name, tags in zip(batch["id"].tolist(), batch["name"], batch["tags"]):
            got[i] = (name, tags)
    assert got == {i: (name_of(i).upper(), len(tags_of(i))) for i in range(40)}


@pytest.mark.parametrize("batched", [True, False])
def test_views_left_in_worker_output_are_an_error_not_a_hang(files, batched):
    """Views that would reach the pickler raise a TypeError naming them (a memoryview that
    fails to pickle in a worker's queue is lost, and the DataLoader would wait for ever)."""
    ds = TFRecordDataset(files, spec=SPEC, batch_size=5 if batched else None, copy_bytes=False)
    loader = torch.utils.data.DataLoader(
        ds, batch_size=None if batched else 4, num_workers=1, timeout=120
    )
    named = r"a (batch|record)\['(name|tags)'\].* is a memoryview .*copy_bytes=True"
    with pytest.raises(TypeError, match=named):
        list(loader)


def test_indexed_views_left_in_worker_output_are_an_error(files):
    ds = IndexedTFRecordDataset(files, spec=SPEC, copy_bytes=False)
    loader = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=1, timeout=120)
    with pytest.raises(TypeError, match="memoryview"):
        list(loader)
