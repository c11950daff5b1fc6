"""num_threads in the torch datasets: the same records in the same order as one thread, parse
errors naming the file and record, threads started only where the iteration runs and gone when
it stops."""

from __future__ import annotations

import gc

import pytest
from test_threads import SPEC, _files, _ours, no_threads_left  # noqa: F401 (fixture)

import tfrec_fast as tfr

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch")
from tfrec_fast.torch import MultiTFRecordDataset, TFRecordDataset  # noqa: E402

SPEC_T = {"i": tfr.FixedLen((), "int64")}


@pytest.mark.parametrize("num_threads", [1, 2, 4])
@pytest.mark.parametrize("batch_size", [None, 7])
@pytest.mark.parametrize("shuffle_buffer", [0, 50])
def test_dataset_same_as_one_thread(tmp_path, num_threads, batch_size, shuffle_buffer):
    paths, _ = _files(tmp_path, [300, 0, 101], 200)

    def ids(n):
        ds = TFRecordDataset(
            paths, spec=SPEC_T, batch_size=batch_size, shuffle_buffer=shuffle_buffer, num_threads=n
        )
        out = []
        for item in ds:
            out.extend(item["i"].reshape(-1).tolist())
        return out

    got = ids(num_threads)
    assert sorted(got) == list(range(401))
    assert got == ids(1)


@pytest.mark.parametrize("num_threads", [2, 4])
def test_dataset_raw_records_and_multi(tmp_path, num_threads):
    paths, records = _files(tmp_path, [100, 50], 30)
    ds = TFRecordDataset(paths, batch_size=16, num_threads=num_threads)
    assert [r for batch in ds for r in batch] == records
    multi = MultiTFRecordDataset(
        {"a": paths[0], "b": paths[1]},
        splits={"a": 1, "b": 1},
        spec=SPEC_T,
        infinite=False,
        batch_size=10,
        num_threads=num_threads,
    )
    assert sorted(int(i) for b in multi for i in b["i"]) == list(range(150))


@pytest.mark.parametrize("num_threads", [1, 3])
def test_dataset_parse_error_names_file_and_record(tmp_path, num_threads):
    paths, _ = _files(tmp_path, [40], 10)
    with tfr.TFRecordWriter(str(tmp_path / "bad.tfrecord")) as w:
        for i in range(30):
            w.write(tfr.encode_example({"pad": b"x"} if i == 23 else {"i": i, "pad": b"y"}))
    paths.append(str(tmp_path / "bad.tfrecord"))
    ds = TFRecordDataset(paths, spec=SPEC_T, batch_size=8, num_threads=num_threads)
    seen = []
    with pytest.raises(tfr.ExampleParseError) as info:
        for b in ds:
            seen.extend(b["i"].tolist())
    assert (info.value.path, info.value.record_index) == (paths[1], 23)
    assert seen == list(range(40)) + list(range(16))


def test_dataloader_workers_with_threads(tmp_path):
    paths, _ = _files(tmp_path, [200, 200, 200, 200], 50)
    ds = TFRecordDataset(paths, spec=SPEC_T, batch_size=32, num_threads=2)
    loader = torch.utils.data.DataLoader(
        ds, batch_size=None, num_workers=2, multiprocessing_context="fork"
    )
    got = sorted(int(i) for b in loader for i in b["i"])
    assert got == list(range(800))
    assert not _ours()  # the threads ran in the workers only


def test_default_threads_in_workers():
    ds = TFRecordDataset(__file__, spec=SPEC_T)
    assert ds.num_threads is None and ds._threads() >= 1
    with pytest.raises(ValueError):
        TFRecordDataset(__file__, spec=SPEC_T, num_threads=0)


def test_dataset_early_stop_leaves_no_thread(tmp_path):
    paths, _ = _files(tmp_path, [3000], 500)
    it = iter(TFRecordDataset(paths, spec=SPEC_T, batch_size=8, num_threads=3))
    next(it)
    assert _ours()
    del it
    gc.collect()
    assert not _ours()
