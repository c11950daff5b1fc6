"""Batches handed from DataLoader workers through the shared-memory ring (tfrec_fast._worker_ring).

The ring may only reuse a slot once every tensor of the batch in it is gone: these tests keep
batches alive, change them, and compare everything with what the plain path gives.
"""

from __future__ import annotations

import copy
import gc
import pickle

import numpy as np
import pytest

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch")

from multiprocessing.reduction import ForkingPickler  # noqa: E402

from test_torch import SPEC, write_file  # noqa: E402

from tfrec_fast.torch import IndexedTFRecordDataset, TFRecordDataset, collate  # noqa: E402
from tfrec_fast.torch import _worker_ring as ring  # noqa: E402

DENSE = {k: SPEC[k] for k in ("id", "label", "img")}


def batch_of(i, n=4):
    return {
        "x": torch.arange(n, dtype=torch.int64) + 100 * i,
        "img": torch.full((n, 3, 5), i % 256, dtype=torch.uint8),
        "f": torch.linspace(0, 1, n * 2).reshape(n, 2) + i,
    }


def send(obj):
    """What a DataLoader does with a worker's batch: ForkingPickler out, pickle in."""
    return pickle.loads(ForkingPickler.dumps(obj))


def same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape
        assert torch.equal(a[k], b[k]), k


def test_a_batch_round_trips_and_frees_its_slot():
    writer = ring.RingWriter(slot_bytes=4096, slots=3)
    sent = writer.put(batch_of(1))
    assert isinstance(sent, ring._RingBatch)
    got = send(sent)
    same(got, batch_of(1))
    assert type(got) is dict
    busy = [int(b) for b in writer._header[:3]]
    assert busy.count(1) == 1
    view = got["img"][1:]  # a view keeps the slot as much as the batch does
    del got, sent
    gc.collect()
    assert [int(b) for b in writer._header[:3]] == busy
    assert int(view.sum()) == 1 * view.numel()
    del view
    gc.collect()
    assert [int(b) for b in writer._header[:3]] == [0, 0, 0]


def test_no_slot_is_reused_while_its_tensors_live():
    writer = ring.RingWriter(slot_bytes=4096, slots=3)
    kept = [send(writer.put(batch_of(i))) for i in range(3)]
    overflow = writer.put(batch_of(3))  # every slot taken: torch's way, the batch itself
    assert not isinstance(overflow, ring._RingBatch)
    kept.append(send(overflow))
    for i, b in enumerate(kept):
        same(b, batch_of(i))
    del kept[1]
    gc.collect()
    again = send(writer.put(batch_of(7)))  # the freed slot, and only it
    same(again, batch_of(7))
    for i, b in zip((0, 2, 3), kept):
        same(b, batch_of(i))


def test_a_changed_batch_goes_the_plain_way_and_keeps_its_slot():
    writer = ring.RingWriter(slot_bytes=4096, slots=3)
    sent = writer.put(batch_of(2))
    sent["x"] = sent["x"] * 2  # a collate_fn or wrapper changed it
    got = send(sent)
    assert torch.equal(got["x"], batch_of(2)["x"] * 2)
    same({k: got[k] for k in ("img", "f")}, {k: batch_of(2)[k] for k in ("img", "f")})
    del got, sent
    gc.collect()
    assert sorted(int(b) for b in writer._header[:3]) == [0, 0, 1]  # never reused


def test_copy_keeps_the_ring_hand_over():
    writer = ring.RingWriter(slot_bytes=4096, slots=3)
    sent = writer.put(batch_of(5))
    clone = copy.copy(sent)  # what torch's default_convert does to a mutable mapping
    clone.update({k: v for k, v in sent.items()})
    assert isinstance(clone, ring._RingBatch)
    same(send(clone), batch_of(5))


@pytest.mark.parametrize(
    "batch",
    [
        {"x": [1, 2]},  # not tensors
        {"x": torch.zeros(3, requires_grad=True)},  # would lose its autograd history
        {},  # nothing to send
    ],
)
def test_batches_the_ring_does_not_take(batch):
    writer = ring.RingWriter(slot_bytes=4096, slots=3)
    assert writer.put(batch) is batch


def test_a_batch_bigger_than_a_slot_is_not_taken():
    writer = ring.RingWriter(slot_bytes=256, slots=3)
    big = batch_of(1, n=64)
    assert writer.put(big) is big


def test_the_ring_grows_for_a_bigger_batch(monkeypatch):
    monkeypatch.setattr(ring, "_writer_pid", 0)
    small, big = batch_of(1, n=2), batch_of(2, n=100)
    w1 = ring.ring_writer(small)
    assert ring.ring_writer(small) is w1
    w2 = ring.ring_writer(big)
    assert w2 is not w1 and w2.slot_bytes >= 2 * w1.slot_bytes
    same(send(w2.put(big)), big)
    monkeypatch.setattr(ring, "MAX_RING_BYTES", 1024)
    assert ring.ring_writer(batch_of(3, n=1000)) is None


def names_of(i, n=4):
    return [f"r{i}-{j}".encode() * (j % 3) for j in range(n)]  # b"" included


def test_lists_of_bytes_go_through_the_slot_as_bytes():
    writer = ring.RingWriter(slot_bytes=4096, slots=3)
    batch = {**batch_of(1), "name": names_of(1), "empty": [], "other": [1, 2]}
    sent = writer.put(batch)
    assert isinstance(sent, ring._RingBatch)
    assert [name for name, _, _ in sent._lists] == ["name", "empty"]
    pickled = ForkingPickler.dumps(sent)
    assert b"r1-1" not in bytes(pickled)  # the names travelled in the slot
    got = pickle.loads(pickled)
    assert list(got) == list(batch)  # the batch's key order
    same({k: got[k] for k in ("x", "img", "f")}, batch_of(1))
    assert got["name"] == names_of(1) and all(type(v) is bytes for v in got["name"])
    assert got["empty"] == [] and got["other"] == [1, 2]


def test_a_batch_of_bytes_lists_alone_frees_its_slot_once_rebuilt():
    writer = ring.RingWriter(slot_bytes=4096, slots=3)
    got = send(writer.put({"name": names_of(2)}))
    assert got == {"name": names_of(2)}
    gc.collect()
    assert [int(b) for b in writer._header[:3]] == [0, 0, 0]  # nothing views the slot


def test_a_list_changed_before_pickling_is_sent_as_it_is_then():
    writer = ring.RingWriter(slot_bytes=4096, slots=3)
    names = names_of(3)
    sent = writer.put({**batch_of(3), "name": names})
    names[0] = b"changed"  # the same list object, other contents
    assert send(sent)["name"] == [b"changed"] + names_of(3)[1:]
    names.append(b"z" * 3000)  # no longer fits the room kept for it
    got = send(sent)
    assert got["name"] == names and got["name"] is not names
    names.append("not bytes")
    assert send(sent)["name"] == names


def test_lists_too_big_for_the_slot_are_pickled_beside_it():
    writer = ring.RingWriter(slot_bytes=512, slots=3)
    big = {**batch_of(1, n=2), "name": [b"y" * 1000]}
    sent = writer.put(big)
    assert isinstance(sent, ring._RingBatch) and not sent._lists
    got = send(sent)
    same({k: got[k] for k in ("x", "img", "f")}, batch_of(1, n=2))
    assert got["name"] == [b"y" * 1000]


def test_the_ring_for_lists_too_big_is_made_for_the_tensors(monkeypatch):
    monkeypatch.setattr(ring, "_writer_pid", 0)
    monkeypatch.setattr(ring, "MAX_RING_BYTES", 64 << 10)
    batch = {**batch_of(1), "name": [b"q" * (30 << 10)]}
    writer = ring.ring_writer(batch)
    assert writer is not None and writer.slot_bytes < (30 << 10)
    got = send(writer.put(batch))
    assert got["name"] == batch["name"]
    assert ring.ring_writer({"name": [b"q" * (30 << 10)]}) is None  # nothing it can take


@pytest.mark.parametrize(
    "keys", [("name", "x", "tag"), ("x", "name", "tag"), ("tag", "other", "x")]
)
def test_the_batch_keeps_its_key_order(keys):
    values = {"name": [b"a", b"bc"], "x": torch.arange(3), "tag": [b"t"] * 3, "other": {"k": 1}}
    batch = {k: values[k] for k in keys}
    got = send(ring.RingWriter(slot_bytes=4096, slots=3).put(batch))
    assert list(got) == list(keys)


def test_a_batch_pickled_again_never_writes_into_a_reused_slot():
    writer = ring.RingWriter(slot_bytes=4096, slots=1)
    a = writer.put({"x": torch.arange(8), "name": [b"\xff" * 512]})
    twin = copy.copy(a)
    got_a = send(a)
    again = send(twin)  # the slot still holds a: a private copy of it
    assert torch.equal(again["x"], torch.arange(8)) and again["name"] == [b"\xff" * 512]
    del got_a
    gc.collect()  # the slot is free, then b's
    got_b = send(writer.put({"x": torch.zeros(512, dtype=torch.int64)}))
    with pytest.raises(RuntimeError, match="pickled again"):
        send(twin)
    assert int(got_b["x"].abs().sum()) == 0


def test_default_convert_keeps_the_ring_hand_over():
    """DataLoader(batch_size=None) passes each batch through default_convert, which rebuilds
    the dict and its lists: the batch still goes through the slot, and the slot comes back."""
    from torch.utils.data._utils.collate import default_convert

    writer = ring.RingWriter(slot_bytes=4096, slots=3)
    converted = default_convert(writer.put({**batch_of(4), "name": names_of(4)}))
    assert isinstance(converted, ring._RingBatch)
    pickled = ForkingPickler.dumps(converted)
    assert b"r4-1" not in bytes(pickled)
    got = pickle.loads(pickled)
    assert got["name"] == names_of(4)
    same({k: got[k] for k in ("x", "img", "f")}, batch_of(4))
    del got, converted
    gc.collect()
    assert [int(b) for b in writer._header[:3]] == [0, 0, 0]


@pytest.mark.parametrize("sizes", [[0], [1], [63, 64, 65], [4000], [0, 0, 5], list(range(40))])
def test_bytes_lists_of_any_sizes_round_trip(sizes):
    writer = ring.RingWriter(slot_bytes=8192, slots=3)
    names = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    got = send(writer.put({"i": torch.arange(len(sizes)), "name": names}))
    assert got["name"] == names


# ---- through real DataLoader workers ---------------------------------------------------------


def loader(ds, **kw):
    return torch.utils.data.DataLoader(ds, num_workers=2, **kw)


def plain(batches):
    return [{k: v.clone() for k, v in b.items()} for b in batches]


@pytest.mark.parametrize("persistent", [False, True])
def test_dataloader_batches_equal_the_plain_path(tmp_path, persistent):
    path = str(write_file(tmp_path / "a.tfrecord", range(3000)))
    want = plain(
        loader(TFRecordDataset(path, spec=DENSE, batch_size=64, worker_ring=False), batch_size=None)
    )
    ds = TFRecordDataset(path, spec=DENSE, batch_size=64)
    dl = loader(ds, batch_size=None, persistent_workers=persistent)
    for _epoch in range(3):
        got = [b for b in dl]  # every batch kept: the ring runs full, then overflows
        assert len(got) == len(want)
        for g, w in zip(got, want):
            same(g, w)
        del got
        for g, w in zip(dl, want):  # batches dropped as we go: slots reused
            same(g, w)
    assert ring._rings, "the batches never came through the ring"


def test_dataloader_with_a_transform(tmp_path):
    path = str(write_file(tmp_path / "a.tfrecord", range(500)))

    def scale(batch):
        return {"id": batch["id"] * 3, "img": batch["img"].float() / 2}

    ds = TFRecordDataset(path, spec=DENSE, batch_size=50, transform=scale)
    ids = torch.cat([b["id"] for b in loader(ds, batch_size=None)])
    assert sorted(ids.tolist()) == [3 * i for i in range(500)]


def test_collate_with_indexed_dataset_and_workers(tmp_path):
    path = str(write_file(tmp_path / "a.tfrecord", range(700)))
    ds = IndexedTFRecordDataset(path, DENSE)
    sampler = list(np.random.default_rng(0).permutation(700))
    want = plain(loader(ds, batch_size=32, sampler=sampler))
    got = list(loader(ds, batch_size=32, sampler=sampler, collate_fn=collate))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        same(g, w)


def test_collate_in_process_is_default_collate(tmp_path):
    samples = [{"a": torch.tensor(i), "b": torch.ones(2) * i} for i in range(5)]
    same(collate(samples), torch.utils.data.default_collate(samples))
    assert collate([1, 2]).tolist() == [1, 2]
    mixed = [{"a": torch.tensor(1), "s": b"x"}]
    assert collate(mixed)["s"] == [b"x"]


def test_dataset_values_are_right_through_the_ring(tmp_path, monkeypatch):
    monkeypatch.setattr(ring, "_rings", {})
    path = str(write_file(tmp_path / "a.tfrecord", range(1000)))
    spec = {"name": SPEC["name"], **DENSE}
    ds = TFRecordDataset(path, spec=spec, batch_size=100)
    seen = []
    for b in loader(ds, batch_size=None):
        assert list(b) == list(spec)
        ids = b["id"]
        assert b["name"] == [f"rec{i}".encode() for i in ids.tolist()]
        assert b["label"].tolist() == (ids % 10).tolist()
        img = (ids[:, None] * 7 + torch.arange(6)) % 251
        assert b["img"].reshape(-1, 6).to(torch.int64).tolist() == img.tolist()
        seen += ids.tolist()
    assert sorted(seen) == list(range(1000))
    assert ring._rings, "the batches (bytes lists and all) never came through the ring"


def test_collate_takes_an_indexed_batch_as_parsed(tmp_path):
    paths = [
        str(write_file(tmp_path / f"{k}.tfrecord", range(100 * k, 100 * k + 100))) for k in range(2)
    ]
    ds = IndexedTFRecordDataset(paths, DENSE)
    for indices in ([5, 3, 3, 99, 0], [150, 120], [1, 150, 2], [7]):  # one file, or two
        rows = ds.__getitems__(indices)
        same(collate(rows), torch.utils.data.default_collate(list(rows)))
        assert collate(rows)["id"].tolist() == [int(i) for i in indices]


def test_rings_of_dead_workers_are_forgotten_and_live_ones_left_alone(monkeypatch):
    """The training process drops the rings of workers that are gone, and only looks at the
    live ones: on Windows os.kill(pid, 0), what this used, terminates the process."""
    import subprocess
    import sys

    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        monkeypatch.setattr(
            ring, "_rings", {(live.pid, 1): "live ring", (dead.pid, 2): "dead ring"}
        )
        ring._forget_dead_rings()
        assert ring._rings == {(live.pid, 1): "live ring"}
        assert live.poll() is None, "looking at the worker ended it"
    finally:
        live.kill()
        live.wait()
