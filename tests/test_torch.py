"""tfrec_fast.torch (PyTorch datasets) and tfrec_fast.compat.tfrecord.reader (tfrecord.reader
drop-ins)."""

from __future__ import annotations

import itertools
import types

import numpy as np
import pytest

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch")

import tfrec_fast as tf_
from tfrec_fast import Bytes, FixedLen, Ragged, TFRecordWriter, VarLen
from tfrec_fast.compat.tfrecord import reader as tfr_reader
from tfrec_fast.torch import IndexedTFRecordDataset, MultiTFRecordDataset, TFRecordDataset

SPEC = {
    "id": FixedLen((), "int64"),
    "label": FixedLen((), "int64"),
    "img": FixedLen((2, 3), "uint8"),
    "tokens": VarLen("int64"),
    "name": FixedLen((), "bytes"),
}


def write_file(path, ids, compression=None):
    """Records with a global 'id', a label, a 2x3 uint8 image, ragged tokens and a name."""
    ids = np.asarray(ids, dtype=np.int64)
    n = len(ids)
    lengths = ids % 4
    splits = np.concatenate([[0], np.cumsum(lengths)])
    tokens = np.concatenate([np.arange(k) + i for i, k in zip(ids, lengths)] or [[]]).astype(
        np.int64
    )
    img = (ids[:, None] * 7 + np.arange(6)) % 251
    with TFRecordWriter(str(path), compression) as w:
        if n:
            w.write_examples(
                {
                    "id": ids,
                    "label": ids % 10,
                    "img": Bytes(img.astype(np.uint8).reshape(n, 2, 3)),
                    "tokens": Ragged(tokens, splits),
                    "name": [f"rec{i}".encode() for i in ids],
                }
            )
    return path


def write_files(tmp_path, sizes, compression=None):
    paths, start = [], 0
    for k, n in enumerate(sizes):
        paths.append(
            str(
                write_file(
                    tmp_path / f"part-{k:03d}.tfrecord", range(start, start + n), compression
                )
            )
        )
        start += n
    return paths, start


def expected(i):
    return {
        "id": i,
        "label": i % 10,
        "img": (np.arange(6).reshape(2, 3) + i * 7) % 251,
        "tokens": np.arange(i % 4) + i,
        "name": f"rec{i}".encode(),
    }


def check_record(rec):
    want = expected(int(rec["id"]))
    assert int(rec["label"]) == want["label"]
    assert rec["img"].dtype == torch.uint8 and rec["img"].tolist() == want["img"].tolist()
    assert rec["tokens"].tolist() == want["tokens"].tolist()
    assert rec["name"] == want["name"]


def ids_of(items):
    return [int(r["id"]) for r in items]


def fake_worker(monkeypatch, wid, nworkers, seed=0):
    info = types.SimpleNamespace(id=wid, num_workers=nworkers, seed=seed + wid)
    monkeypatch.setattr(torch.utils.data, "get_worker_info", lambda: info)


def ids_per_slot(monkeypatch, make, world, workers):
    """Iterates each (rank, worker) slot in-process, returning {(rank, worker): ids}."""
    out = {}
    for rank, wid in itertools.product(range(world), range(workers)):
        fake_worker(monkeypatch, wid, workers)
        out[rank, wid] = ids_of(make(rank, world))
    monkeypatch.undo()
    return out


# ---- the work split ------------------------------------------------------------------------


@pytest.mark.parametrize("world,workers", [(1, 1), (2, 3), (3, 2), (4, 4)])
@pytest.mark.parametrize(
    "sizes",
    [[40] * 8, [5, 0, 17, 1, 30, 9, 2, 11, 3, 8, 6, 4, 20, 13, 7, 1], [101], [0, 50], [7, 3]],
)
@pytest.mark.parametrize("shuffle", [0, 16])
@pytest.mark.parametrize("uneven", ["pad", "drop"])
def test_every_record_once_and_ranks_equal(
    tmp_path, monkeypatch, sizes, world, workers, shuffle, uneven
):
    files, total = write_files(tmp_path, sizes)
    per_slot = ids_per_slot(
        monkeypatch,
        lambda r, w: TFRecordDataset(
            files, spec=SPEC, shuffle_buffer=shuffle, rank=r, world_size=w, uneven=uneven
        ),
        world,
        workers,
    )
    everything = sorted(itertools.chain.from_iterable(per_slot.values()))
    per_rank = [sum(len(per_slot[r, w]) for w in range(workers)) for r in range(world)]
    assert len(set(per_rank)) == 1, per_rank  # every rank takes the same number of steps
    if world == 1 or total % world == 0:
        assert everything == list(range(total))
    elif uneven == "drop":  # N mod world records left out, none twice
        assert len(everything) == total - total % world == len(set(everything))
    else:  # padded as DistributedSampler: every record, ceil(N / world) per rank
        assert sorted(set(everything)) == list(range(total))
        assert per_rank[0] == -(-total // world)
    if len(files) < world * workers or world > 1:  # record ranges: slots differ by at most one
        counts = [len(v) for v in per_slot.values()]
        assert max(counts) - min(counts) <= 1


def run_ranks(files, world=2, workers=3, **kw):
    """A real DataLoader per simulated rank; returns the ids each rank saw, in order."""
    seen = []
    for rank in range(world):
        ds = TFRecordDataset(files, spec=SPEC, rank=rank, world_size=world, **kw)
        loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers)
        items = list(loader)
        for rec in items[:5]:
            check_record(rec)
        seen.append(ids_of(items))
    return seen


# CI machines may have fewer CPUs than 3 workers: DataLoader warns then.
few_cpus = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")


@few_cpus
def test_two_ranks_three_workers_shards(tmp_path):
    files, total = write_files(tmp_path, [30, 25, 40, 10, 33, 12, 21, 9])  # 8 files >= 6 slots
    seen = run_ranks(files, shuffle_buffer=8)
    assert total % 2 == 0 and sorted(seen[0] + seen[1]) == list(range(total))
    assert len(seen[0]) == len(seen[1])


@few_cpus
def test_two_ranks_three_workers_single_file(tmp_path):
    files, total = write_files(tmp_path, [1000])  # 1 file < 6 slots: index ranges
    seen = run_ranks(files)
    assert sorted(seen[0] + seen[1]) == list(range(total))
    assert len(seen[0]) == len(seen[1])


def test_single_file_gzip_ranges(tmp_path, monkeypatch):
    files, total = write_files(tmp_path, [97], compression="gzip")  # no index: skip-reading
    per_slot = ids_per_slot(
        monkeypatch,
        lambda r, w: TFRecordDataset(
            files, spec=SPEC, compression="gzip", rank=r, world_size=w, uneven="drop"
        ),
        2,
        3,
    )
    assert sorted(itertools.chain.from_iterable(per_slot.values())) == list(range(total - 1))


def write_index(path, ids_count):
    """The tfrecord package's index format, computed from the records' framed sizes."""
    sizes = [len(r) + 16 for r in tf_.read_records(path, copy=True)]
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)
    with open(path + ".idx", "w") as f:
        f.writelines(f"{o} {s}\n" for o, s in zip(offsets, sizes))
    assert len(sizes) == ids_count


def test_single_file_ranges_with_index_file(tmp_path, monkeypatch):
    files, total = write_files(tmp_path, [300])
    write_index(files[0], total)
    per_slot = ids_per_slot(
        monkeypatch, lambda r, w: TFRecordDataset(files, spec=SPEC, rank=r, world_size=w), 2, 3
    )
    assert sorted(itertools.chain.from_iterable(per_slot.values())) == list(range(total))
    assert per_slot[0, 1] == list(range(50, 100))  # contiguous ranges entered by offset


def test_stale_index_file_is_an_error(tmp_path, monkeypatch):
    files, total = write_files(tmp_path, [30])
    write_index(files[0], total)
    write_file(files[0], range(40))  # the file grew: the index no longer matches
    fake_worker(monkeypatch, 1, 2)
    with pytest.raises(tf_.DataLossError, match="stale"):
        list(TFRecordDataset(files, spec=SPEC))


def test_rank_validation(tmp_path):
    files, _ = write_files(tmp_path, [3])
    with pytest.raises(ValueError):
        TFRecordDataset(files, rank=0)
    with pytest.raises(ValueError):
        TFRecordDataset(files, rank=2, world_size=2)
    with pytest.raises(ValueError):
        TFRecordDataset(files, seed=None, rank=0, world_size=2)


def test_glob_and_missing(tmp_path):
    write_files(tmp_path, [3, 4])
    assert ids_of(TFRecordDataset(str(tmp_path / "part-*.tfrecord"), spec=SPEC)) == list(range(7))
    with pytest.raises(FileNotFoundError):
        TFRecordDataset(str(tmp_path / "nothing-*.tfrecord"))


# ---- shuffling -----------------------------------------------------------------------------


def test_shuffle_is_reproducible_per_seed_and_epoch(tmp_path):
    files, total = write_files(tmp_path, [200, 150, 100])

    def order(seed, epoch):
        ds = TFRecordDataset(files, spec=SPEC, shuffle_buffer=64, seed=seed)
        ds.set_epoch(epoch)
        return ids_of(ds)

    a = order(0, 0)
    assert sorted(a) == list(range(total)) and a != list(range(total))
    assert order(0, 0) == a  # same seed and epoch: same order
    assert order(0, 1) != a  # a new epoch reshuffles
    assert order(1, 0) != a  # so does another seed
    assert sorted(order(0, 1)) == list(range(total))


def test_shuffle_with_workers_is_reproducible(tmp_path):
    files, total = write_files(tmp_path, [100, 100, 100, 100])
    ds = TFRecordDataset(files, spec=SPEC, shuffle_buffer=32, seed=5)

    def run(epoch):
        ds.set_epoch(epoch)
        loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
        return ids_of(loader)

    first = run(3)
    assert sorted(first) == list(range(total))
    assert run(3) == first
    assert run(4) != first


def test_seed_none_reshuffles_every_pass(tmp_path):
    files, total = write_files(tmp_path, [300])
    ds = TFRecordDataset(files, spec=SPEC, shuffle_buffer=100, seed=None)
    a, b = ids_of(ds), ids_of(ds)
    assert sorted(a) == sorted(b) == list(range(total)) and a != b


def test_file_order_is_the_same_on_every_rank(tmp_path, monkeypatch):
    """The file permutation depends on (seed, epoch) only, so shard ownership is consistent."""
    files, total = write_files(tmp_path, [10] * 6)
    for epoch in range(3):
        seen = []
        for rank in range(3):
            ds = TFRecordDataset(files, spec=SPEC, shuffle_buffer=4, rank=rank, world_size=3)
            ds.set_epoch(epoch)
            seen += ids_of(ds)
        assert sorted(seen) == list(range(total))


# ---- output forms --------------------------------------------------------------------------


def test_dataloader_two_workers_collates(tmp_path):
    files, total = write_files(tmp_path, [64, 64, 64])
    ds = TFRecordDataset(files, spec={k: v for k, v in SPEC.items() if k != "tokens"})
    loader = torch.utils.data.DataLoader(ds, batch_size=16, num_workers=2)
    ids = []
    for batch in loader:
        assert batch["img"].shape[1:] == (2, 3) and batch["img"].dtype == torch.uint8
        assert batch["label"].tolist() == (batch["id"] % 10).tolist()
        assert batch["name"] == [f"rec{i}".encode() for i in batch["id"].tolist()]
        ids += batch["id"].tolist()
    assert sorted(ids) == list(range(total))


def test_records_share_memory_with_their_batch(tmp_path):
    files, _ = write_files(tmp_path, [50])
    recs = list(TFRecordDataset(files, spec=SPEC))
    assert (
        recs[0]["img"].untyped_storage().data_ptr() == recs[1]["img"].untyped_storage().data_ptr()
    )
    for rec in recs:
        check_record(rec)


@pytest.mark.parametrize("shuffle", [0, 10])
def test_batch_size(tmp_path, shuffle):
    files, total = write_files(tmp_path, [23, 18])
    ds = TFRecordDataset(files, spec=SPEC, batch_size=8, shuffle_buffer=shuffle)
    batches = list(ds)
    assert [len(b["id"]) for b in batches] == [8] * 5 + [1]
    for b in batches:
        assert b["img"].shape == (len(b["id"]), 2, 3)
        for i, toks in zip(b["id"].tolist(), b["tokens"]):
            assert toks.tolist() == expected(i)["tokens"].tolist()
        assert b["name"] == [f"rec{i}".encode() for i in b["id"].tolist()]
    assert sorted(itertools.chain.from_iterable(b["id"].tolist() for b in batches)) == list(
        range(total)
    )
    dropped = TFRecordDataset(files, spec=SPEC, batch_size=8, drop_last=True)
    assert [len(b["id"]) for b in dropped] == [8] * 5


def test_batch_ragged_splits_and_transform(tmp_path):
    files, _ = write_files(tmp_path, [10])
    ds = TFRecordDataset(
        files,
        spec={"id": FixedLen(), "tokens": VarLen("int64")},
        batch_size=4,
        ragged="splits",
        transform=lambda b: {**b, "n": len(b["id"])},
    )
    for b in ds:
        values, splits = b["tokens"]
        assert splits[0] == 0 and splits[-1] == len(values) and b["n"] == len(b["id"])
        for k, i in enumerate(b["id"].tolist()):
            assert values[splits[k] : splits[k + 1]].tolist() == expected(i)["tokens"].tolist()


def test_raw_records_without_spec(tmp_path):
    files, total = write_files(tmp_path, [12])
    raw = list(TFRecordDataset(files))
    assert raw == list(tf_.read_records(files, copy=True))
    assert all(type(r) is bytes for r in raw)
    batches = list(TFRecordDataset(files, batch_size=5))
    assert list(itertools.chain.from_iterable(batches)) == raw


# ---- drop-in for the tfrecord package --------------------------------------------------------


def test_drop_in_tfrecord_dataset(tmp_path):
    """Code written for tfrecord.torch.dataset.TFRecordDataset, with only the import changed."""
    # was: from tfrecord.torch.dataset import TFRecordDataset
    from tfrec_fast.compat.tfrecord.torch.dataset import TFRecordDataset

    tfrecord_path = write_file(tmp_path / "data.tfrecord", range(100))
    index_path = None
    description = {"img": "byte", "label": "int", "tokens": "int"}

    def decode_image(features):
        features["img"] = np.frombuffer(features["img"], dtype=np.uint8).reshape(2, 3)
        return features

    dataset = TFRecordDataset(
        str(tfrecord_path), index_path, description, shuffle_queue_size=32, transform=decode_image
    )
    rows = list(dataset)
    assert len(rows) == 100
    for row in rows:
        assert isinstance(row["img"], np.ndarray) and row["img"].shape == (2, 3)
        assert row["label"].shape == (1,)
        i = [
            k
            for k in range(100)
            if k % 10 == int(row["label"][0])
            and ((np.arange(6).reshape(2, 3) + k * 7) % 251 == row["img"]).all()
        ]
        assert len(i) == 1
    loader = torch.utils.data.DataLoader(
        TFRecordDataset(str(tfrecord_path), None, {"img": "byte", "label": "int"}), batch_size=32
    )
    data = next(iter(loader))
    assert data["label"].shape == (32, 1) and len(data["img"]) == 32
    # keyword spelling of the tfrecord package
    kw = TFRecordDataset(
        data_path=str(tfrecord_path),
        index_path=None,
        description=["label"],
        shuffle_queue_size=None,
        transform=None,
        compression_type=None,
    )
    assert [int(r["label"][0]) for r in kw] == [i % 10 for i in range(100)]


def test_spec_as_second_positional(tmp_path):
    files, _ = write_files(tmp_path, [5])
    assert ids_of(TFRecordDataset(files, {"id": FixedLen()})) == list(range(5))


def test_multi_dataset_proportions(tmp_path):
    write_file(tmp_path / "big.tfrecord", range(0, 500))
    write_file(tmp_path / "small.tfrecord", range(1000, 1200))
    pattern = str(tmp_path / "{}.tfrecord")
    splits = {"big": 0.8, "small": 0.2}
    ds = MultiTFRecordDataset(pattern, None, splits, {"id": "int"})  # the tfrecord package's order
    it = iter(ds)  # infinite
    ids = [int(next(it)["id"][0]) for _ in range(5000)]
    share = np.mean(np.array(ids) >= 1000)
    assert 0.17 < share < 0.23
    # finite: each record of each split exactly once, the dict form of paths
    finite = MultiTFRecordDataset(
        {"big": str(tmp_path / "big.tfrecord"), "small": str(tmp_path / "small.tfrecord")},
        splits=splits,
        spec=SPEC,
        infinite=False,
    )
    got = ids_of(finite)
    assert sorted(got) == list(range(500)) + list(range(1000, 1200))
    assert ids_of(finite) == got  # reproducible


def test_multi_dataset_workers_split(tmp_path, monkeypatch):
    write_files(tmp_path, [30, 20])
    paths = {"a": str(tmp_path / "part-000.tfrecord"), "b": str(tmp_path / "part-001.tfrecord")}
    per_slot = ids_per_slot(
        monkeypatch,
        lambda r, w: MultiTFRecordDataset(
            paths,
            splits={"a": 1, "b": 3},
            spec=SPEC,
            infinite=False,
            shuffle_buffer=5,
            rank=r,
            world_size=w,
        ),
        2,
        2,
    )
    assert sorted(itertools.chain.from_iterable(per_slot.values())) == list(range(50))


# ---- random access -----------------------------------------------------------------------------


def test_indexed_dataset_equals_sequential(tmp_path):
    files, total = write_files(tmp_path, [40, 0, 25, 35])
    ds = IndexedTFRecordDataset(files, SPEC)
    assert len(ds) == total
    seq = list(TFRecordDataset(files, spec=SPEC))
    rnd = np.random.default_rng(0).permutation(total).tolist() + [0, 0, total - 1, -1]
    got = ds.__getitems__(rnd)
    for i, rec in zip(rnd, got):
        check_record(rec)
        want = seq[i]
        assert int(rec["id"]) == int(want["id"])
        assert torch.equal(rec["img"], want["img"]) and torch.equal(rec["tokens"], want["tokens"])
    assert int(ds[57]["id"]) == 57
    with pytest.raises(IndexError):
        ds[total]
    raw = IndexedTFRecordDataset(files)
    assert raw[3] == list(tf_.read_records(files, copy=True))[3]


def test_indexed_dataset_with_samplers_and_workers(tmp_path):
    files, total = write_files(tmp_path, [60, 40])
    ds = IndexedTFRecordDataset(files, {k: v for k, v in SPEC.items() if k != "tokens"})
    sampler = torch.utils.data.RandomSampler(ds, generator=torch.Generator().manual_seed(0))
    loader = torch.utils.data.DataLoader(ds, batch_size=16, sampler=sampler, num_workers=2)
    ids = torch.cat([b["id"] for b in loader]).tolist()
    assert sorted(ids) == list(range(total)) and ids != list(range(total))
    seen = []
    for rank in range(2):
        ds_sampler = torch.utils.data.DistributedSampler(
            ds, num_replicas=2, rank=rank, shuffle=True, seed=1
        )
        seen += [int(ds[i]["id"]) for i in ds_sampler]
    assert sorted(seen) == list(range(total))


# ---- tfrec_fast.compat.tfrecord.reader -----------------------------------------------------


def test_tfrecord_iterator_records_do_not_alias(tmp_path):
    path = str(write_file(tmp_path / "a.tfrecord", range(50)))
    records = list(tfr_reader.tfrecord_iterator(path))
    assert [bytes(r) for r in records] == list(tf_.read_records(path, copy=True))
    assert len({bytes(r) for r in records}) == 50


@pytest.mark.parametrize("with_index", [False, True])
def test_tfrecord_iterator_shards(tmp_path, with_index):
    path = str(write_file(tmp_path / "a.tfrecord", range(50)))
    index_path = None
    if with_index:
        write_index(path, 50)
        index_path = path + ".idx"
    everything = list(tf_.read_records(path, copy=True))
    parts = [
        [bytes(r) for r in tfr_reader.tfrecord_iterator(path, index_path, (i, 3))] for i in range(3)
    ]
    assert [len(p) for p in parts] == [16, 17, 17]
    assert list(itertools.chain.from_iterable(parts)) == everything


def test_tfrecord_iterator_checks_crcs(tmp_path):
    path = tmp_path / "a.tfrecord"
    write_file(path, range(20))
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40
    path.write_bytes(bytes(data))
    with pytest.raises(tf_.DataLossError):
        list(tfr_reader.tfrecord_iterator(str(path)))
    with pytest.raises(tf_.DataLossError):
        list(TFRecordDataset(str(path), spec=SPEC))


def test_example_loader_values(tmp_path):
    path = str(write_file(tmp_path / "a.tfrecord", range(10)))
    rows = list(
        tfr_reader.tfrecord_loader(path, None, {"label": "int", "name": "byte", "tokens": "int"})
    )
    assert [int(r["label"][0]) for r in rows] == [i % 10 for i in range(10)]
    assert rows[3]["name"] == b"rec3" and rows[3]["tokens"].dtype == np.int64
    assert rows[3]["tokens"].tolist() == [3, 4, 5]
    everything = list(tfr_reader.example_loader(path, None))
    assert set(everything[0]) == {"id", "label", "img", "name", "tokens"}
    assert everything[5]["img"] == bytes(expected(5)["img"].astype(np.uint8).ravel())
    gz = str(write_file(tmp_path / "b.tfrecord.gz", range(10), "gzip"))
    assert [
        int(r["id"][0])
        for r in tfr_reader.tfrecord_loader(gz, None, ["id"], shard=(1, 2), compression_type="gzip")
    ] == [5, 6, 7, 8, 9]


def test_sequence_loader(tmp_path):
    from tfrec_fast.proto import SequenceExample

    seq = SequenceExample()
    seq.context.feature["n"].int64_list.value.append(2)
    fl = seq.feature_lists.feature_list["steps"]
    for v in ([1.0, 2.0], [3.0]):
        fl.feature.add().float_list.value.extend(v)
    path = str(tmp_path / "s.tfrecord")
    with TFRecordWriter(path) as w:
        w.write(seq.SerializeToString())
    ((context, features),) = list(tfr_reader.tfrecord_loader(path, None, ["n"], None, []))
    assert context["n"].tolist() == [2]
    assert [s.tolist() for s in features["steps"]] == [[1.0, 2.0], [3.0]]
