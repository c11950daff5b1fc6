"""Resuming tfrec_fast.torch's datasets under torchdata's StatefulDataLoader.

Exact resumption: a DataLoader stopped after k batches, its state saved, and a new process
with a new dataset and DataLoader given that state give the batches an uninterrupted run gives
after batch k, record for record (stops: the first batch, mid-file, at a file boundary, before
and after the last batch). Elastic resumption: a job of W ranks x K workers stopped after k
batches on every rank, its state given to a job of W' x K', which yields every record the old
job had not handed out, once, and none it had. Epochs: persistent workers follow set_epoch, and
seed=None draws a new order each epoch.
"""

from __future__ import annotations

import itertools
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

# torchdata 0.11 calls torch.set_vital, which torch 2.13 deprecates
pytestmark = [
    pytest.mark.torch,
    pytest.mark.filterwarnings("ignore:'set_vital' is deprecated:UserWarning"),
]
torch = pytest.importorskip("torch")
pytest.importorskip("torchdata")

import _resume  # noqa: E402
from test_torch import write_file, write_files  # noqa: E402

from tfrec_fast import _loader  # noqa: E402
from tfrec_fast.torch import TFRecordDataset  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = [24, 24, 24, 24, 17]  # batches of 8 end at file boundaries after 3 and 6 batches
few_cpus = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")


def resume_in_new_process(tmp_path, jobs):
    """[(case, state, limit)] -> the batches each gives, resumed in one new Python process."""
    jobs_path, out_path = tmp_path / "jobs.pickle", tmp_path / "out.pickle"
    with open(jobs_path, "wb") as f:
        pickle.dump(jobs, f)
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(
            [HERE] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        ),
    )
    done = subprocess.run(
        [sys.executable, os.path.join(HERE, "_resume.py"), str(jobs_path), str(out_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    with open(out_path, "rb") as f:
        out = pickle.load(f)
    assert out["pid"] != os.getpid()
    return out["results"]


def check_exact(tmp_path, cases, stops=(1, 4, 6, -1, 0), limit=None):
    """Every case stopped at every stop (-1: before the last batch, 0: after it) and resumed in
    a new process equals its uninterrupted run."""
    jobs, expected = [], []
    for case in cases:
        full = _resume.batches(case, limit)
        assert (
            full
            and sorted(itertools.chain(*full)) == sorted(set(itertools.chain(*full)))
            or limit is not None
        )
        seeded = case.get("kw", {}).get("seed", 0) is not None
        for k in stops:
            if k > len(full) or not seeded and (k <= 0 or k >= len(full)):
                continue  # (another run may have another number of batches)
            after = k if k > 0 else len(full) + k
            got, state, rest = _resume.stop(case, after, limit)
            if seeded:  # the run is a function of the seed: any run gives the same batches
                assert got + rest == full
            jobs.append((case, state, None if limit is None else limit - after))
            expected.append((case, after, got + rest))
    for (case, after, full), rest in zip(expected, resume_in_new_process(tmp_path, jobs)):
        assert full[:after] + rest == full, (case, after)


def stream_cases(paths, workers, **extra):
    kinds = [
        {},
        {"shuffle_buffer": 16, "seed": 7},
        {"batch_size": 8},
        {"batch_size": 8, "shuffle_buffer": 20, "seed": 3},
        {"shuffle_buffer": 16, "seed": None},
    ]
    return [dict(kind="stream", paths=paths, workers=workers, kw=kw, **extra) for kw in kinds]


@few_cpus
@pytest.mark.parametrize("workers", [0, 1, 2])
def test_exact_resume_in_a_new_process(tmp_path, workers):
    files, total = write_files(tmp_path, SIZES)
    one_file = [str(write_file(tmp_path / "one.tfrecord", range(1000, 1045)))]
    cases = stream_cases(files, workers)
    # one file for several workers: record ranges through the index
    cases += [
        dict(kind="stream", paths=one_file, workers=workers, kw=kw)
        for kw in ({}, {"shuffle_buffer": 9, "seed": 1})
    ]
    check_exact(tmp_path, cases)


@few_cpus
def test_exact_resume_of_another_rank(tmp_path):
    """Every rank takes as many batches: rank 1's state resumes rank 0 where rank 0 stopped."""
    files, _ = write_files(tmp_path, [37, 0, 50, 23, 41, 5])
    for kw in ({}, {"shuffle_buffer": 16}, {"batch_size": 8}):
        case = dict(kind="stream", paths=files, workers=2, kw=dict(kw, rank=0, world_size=2))
        other = dict(case, kw=dict(kw, rank=1, world_size=2))
        full = _resume.batches(case)
        for after in (1, 5):
            _, state, _ = _resume.stop(other, after)
            assert full[:after] + _resume.resume(case, state) == full


@few_cpus
def test_exact_resume_of_mixed_and_indexed_datasets(tmp_path):
    write_file(tmp_path / "a.tfrecord", range(0, 300))
    write_file(tmp_path / "b.tfrecord", range(1000, 1060))
    write_file(tmp_path / "c.tfrecord", range(2000, 2010))
    splits = {"a": 0.5, "b": 0.3, "c": 0.2}
    pattern = str(tmp_path / "{}.tfrecord")
    finite = [
        dict(kind="multi", paths=pattern, splits=splits, workers=w, kw=kw)
        for w in (0, 2)
        for kw in ({"infinite": False}, {"infinite": False, "shuffle_buffer": 30})
    ]
    check_exact(tmp_path, finite, stops=(1, 9, -1))
    endless = [
        dict(kind="multi", paths=pattern, splits=splits, workers=w, kw=kw)
        for w in (0, 2)
        for kw in ({}, {"shuffle_buffer": 30, "batch_size": 8})
    ]
    check_exact(tmp_path, endless, stops=(1, 30), limit=60)  # splits b and c run out and restart
    indexed = [dict(kind="indexed", paths=str(tmp_path / "*.tfrecord"), workers=w) for w in (0, 2)]
    check_exact(tmp_path, indexed, stops=(1, 20, -1))


def test_resume_reads_only_what_is_left(tmp_path, monkeypatch):
    """Stopped late in an epoch, a resume reads the records still to come (from the saved byte
    offset: no index is read or built) and nothing before them."""
    files, total = write_files(tmp_path, [200, 200])
    case = dict(kind="stream", paths=files, workers=0, batch=10)
    full = _resume.batches(case)
    _, state, _ = _resume.stop(case, 36)
    read = []
    original = _loader.read_range

    def read_range(*args, **kwargs):
        for batch in original(*args, **kwargs):
            read.append(len(batch))
            yield batch

    def no_index(*args, **kwargs):
        raise AssertionError("the resume asked for an index")

    monkeypatch.setattr(_loader, "read_range", read_range)
    monkeypatch.setattr(_loader, "record_index", no_index)
    assert full[:36] + _resume.resume(case, state) == full
    assert sum(read) == total - 360


def test_shuffled_resume_reads_the_buffer_and_the_rest(tmp_path, monkeypatch):
    """With a shuffle buffer, the resume fetches the buffered records by index and reads on
    from where the buffer's reading stopped."""
    files, total = write_files(tmp_path, [300, 300])
    case = dict(kind="stream", paths=files, workers=0, batch=10, kw={"shuffle_buffer": 50})
    full = _resume.batches(case)
    _, state, _ = _resume.stop(case, 50)
    read = []
    original = _loader.read_range

    def read_range(*args, **kwargs):
        for batch in original(*args, **kwargs):
            read.append(len(batch))
            yield batch

    monkeypatch.setattr(_loader, "read_range", read_range)
    assert full[:50] + _resume.resume(case, state) == full
    assert sum(read) == total - 500 - 50  # 50 buffered records were fetched by random access


@pytest.mark.parametrize("saved", ["dataset", "loader"])
def test_a_state_names_what_it_cannot_resume(tmp_path, saved):
    files, _ = write_files(tmp_path, [30, 30])
    case = dict(kind="stream", paths=files, workers=0, kw={"shuffle_buffer": 8, "seed": 1})
    _, state, _ = _resume.stop(case, 2)
    if saved == "dataset":
        state = state["dataset_state"]
    with pytest.raises(ValueError, match="seed=1"):
        TFRecordDataset(files, spec=_resume.SPEC, shuffle_buffer=8, seed=2).load_state_dict(state)
    with pytest.raises(ValueError, match="files"):
        TFRecordDataset(files[:1], spec=_resume.SPEC, seed=1).load_state_dict(state)
    with pytest.raises(ValueError, match="not a state"):
        TFRecordDataset(files, spec=_resume.SPEC).load_state_dict({"epoch": 3})
    other = TFRecordDataset(files, spec=_resume.SPEC, shuffle_buffer=9, seed=1)
    other.load_state_dict(state)
    if saved == "dataset":  # the same slot, another buffer: an exact resume is impossible
        with pytest.raises(ValueError, match="shuffle_buffer=8"):
            iter(other)


# ---- elastic ----------------------------------------------------------------------------------


def run_job(files, world, workers, kw, stop=None, saved=None, batch=4, epoch=0):
    """A job of ``world`` ranks (simulated one after the other), each a StatefulDataLoader with
    ``workers`` workers: (the ids each rank took, each rank's DataLoader state)."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    seen, states = [], []
    for rank in range(world):
        ds = TFRecordDataset(files, spec=_resume.SPEC, rank=rank, world_size=world, **kw)
        ds.set_epoch(epoch)
        if saved is not None:
            ds.load_state_dict(saved)
        dl = StatefulDataLoader(
            ds, batch_size=None if kw.get("batch_size") else batch, num_workers=workers
        )
        it = iter(dl)
        mine = list(
            itertools.chain.from_iterable(
                _resume.ids(b) for b in (itertools.islice(it, stop) if stop else it)
            )
        )
        states.append(pickle.loads(pickle.dumps(dl.state_dict())))
        seen.append(mine)
        del it
    return seen, states


def check_elastic(old, new, total, world):
    consumed = set(itertools.chain(*old))
    rest = list(itertools.chain(*new))
    assert not consumed & set(rest)
    assert set(rest) == set(range(total)) - consumed  # every record not yet consumed
    assert len({len(r) for r in new}) == 1  # ranks stay equal...
    assert len(rest) - len(set(rest)) < world  # ...by padding, fewer than one record a rank


@few_cpus
@pytest.mark.parametrize("layout", [(2, 2, 3, 1), (1, 2, 2, 2), (1, 0, 3, 2), (3, 1, 1, 0)])
@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"shuffle_buffer": 16, "seed": 4},
        {"batch_size": 4},
        {"shuffle_files": True, "seed": 2, "epoch": 3},
    ],
)
def test_elastic_resume(tmp_path, layout, kw):
    world, workers, world2, workers2 = layout
    files, total = write_files(tmp_path, [37, 0, 50, 23, 41, 5])  # uneven shards
    kw = dict(kw)
    epoch = kw.pop("epoch", 0)
    for stop in (1, 5):
        old, states = run_job(files, world, workers, kw, stop, epoch=epoch)
        assert len({len(r) for r in old}) == 1
        for saved in states:  # any rank's state (the new job's epoch comes from it)
            new, _ = run_job(files, world2, workers2, kw, saved=saved)
            check_elastic(old, new, total, world2)


@few_cpus
def test_elastic_then_exact_then_elastic_again(tmp_path):
    """A resumed job's state resumes again: exactly in its own layout, elastically in another."""
    files, total = write_files(tmp_path, [37, 0, 50, 23, 41, 5])
    kw = {"shuffle_buffer": 12, "seed": 9}
    first, states = run_job(files, 2, 2, kw, stop=3)
    second, states2 = run_job(files, 3, 1, kw, stop=4, saved=states[0])
    # exactly: rank 1 of the second job goes on as it would have
    from torchdata.stateful_dataloader import StatefulDataLoader

    whole = run_job(files, 3, 1, kw, saved=states[0])[0]
    ds = TFRecordDataset(files, spec=_resume.SPEC, rank=1, world_size=3, **kw)
    ds.load_state_dict(states[0])
    dl = StatefulDataLoader(ds, batch_size=4, num_workers=1)
    dl.load_state_dict(states2[1])
    assert second[1] + list(itertools.chain.from_iterable(_resume.ids(b) for b in dl)) == whole[1]
    # elastically: a third layout takes what both jobs left
    third, _ = run_job(files, 1, 0, kw, saved=states2[2])
    check_elastic(first + second, third, total, 1)


@few_cpus
def test_elastic_resume_in_a_new_process(tmp_path):
    files, total = write_files(tmp_path, [37, 0, 50, 23, 41, 5])
    old, states = run_job(files, 2, 2, {"shuffle_buffer": 16}, stop=2)
    script = (
        "import itertools, pickle, sys\n"
        f"sys.path.insert(0, {HERE!r})\n"
        "from test_torch_resume import run_job\n"
        f"saved = pickle.loads({pickle.dumps(states[1])!r})\n"
        f"new, _ = run_job({files!r}, 3, 1, {{'shuffle_buffer': 16}}, saved=saved)\n"
        "print(repr(new))\n"
    )
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(
            [HERE] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        ),
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-4000:]
    check_elastic(old, eval(done.stdout.strip().splitlines()[-1]), total, 3)


# ---- epochs -------------------------------------------------------------------------------------


def epoch_orders(ds, epochs, **options):
    loader = torch.utils.data.DataLoader(ds, batch_size=None, **options)
    out = []
    for epoch in epochs:
        if epoch is not None:
            ds.set_epoch(epoch)
        out.append([int(r["id"]) for r in loader])
    return out


@few_cpus
def test_persistent_workers_follow_set_epoch(tmp_path):
    files, total = write_files(tmp_path, [40, 40, 40, 40])
    make = lambda: TFRecordDataset(files, spec=_resume.SPEC, shuffle_buffer=16, seed=11)  # noqa: E731
    persistent = epoch_orders(make(), [0, 1, 2], num_workers=2, persistent_workers=True)
    fresh = [epoch_orders(make(), [e], num_workers=2)[0] for e in range(3)]
    assert persistent == fresh
    assert all(sorted(o) == list(range(total)) for o in persistent)
    assert len({tuple(o) for o in persistent}) == 3


@few_cpus
@pytest.mark.parametrize(
    "options",
    [dict(num_workers=0), dict(num_workers=2), dict(num_workers=2, persistent_workers=True)],
)
def test_seed_none_draws_a_new_order_each_epoch(tmp_path, options):
    files, total = write_files(tmp_path, [60, 60])
    ds = TFRecordDataset(files, spec=_resume.SPEC, shuffle_buffer=16, seed=None)
    orders = epoch_orders(ds, [None] * 3, **options)
    assert all(sorted(o) == list(range(total)) for o in orders)
    assert len({tuple(o) for o in orders}) == 3


@few_cpus
@pytest.mark.parametrize("workers", [0, 2])
def test_compat_dataset_draws_a_new_order_each_epoch(tmp_path, workers):
    from tfrec_fast.compat.tfrecord.torch.dataset import TFRecordDataset as PackageDataset

    path = str(write_file(tmp_path / "a.tfrecord", range(200)))
    ds = PackageDataset(path, None, ["id"], shuffle_queue_size=32)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers)

    def order():
        return [int(r["id"][0]) for r in loader]

    np.random.seed(5)
    orders = [order() for _ in range(3)]
    assert all(sorted(o) == list(range(200)) for o in orders)
    assert len({tuple(o) for o in orders}) == 3
    if workers == 0:  # as the package: numpy's global generator makes it reproducible
        np.random.seed(5)
        assert order() == orders[0]


@few_cpus
def test_persistent_workers_resume_and_go_on(tmp_path):
    """A resumed epoch, then the next epochs, with persistent workers, equal the
    uninterrupted run's."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    files, _ = write_files(tmp_path, SIZES)

    def make():
        return TFRecordDataset(files, spec=_resume.SPEC, shuffle_buffer=10, seed=2)

    def run(ds, dl, epochs, first=None):
        out = []
        for epoch in epochs:
            ds.set_epoch(epoch)
            out.append([_resume.ids(b) for b in (first if first is not None else dl)])
            first = None
        return out

    ds = make()
    dl = StatefulDataLoader(ds, batch_size=8, num_workers=2, persistent_workers=True)
    full = run(ds, dl, [0, 1, 2])
    ds = make()
    dl = StatefulDataLoader(ds, batch_size=8, num_workers=2, persistent_workers=True)
    ds.set_epoch(1)
    it = iter(dl)
    head = [_resume.ids(next(it)) for _ in range(5)]
    state = dl.state_dict()
    del it, dl
    ds = make()
    dl = StatefulDataLoader(ds, batch_size=8, num_workers=2, persistent_workers=True)
    ds.set_epoch(1)
    dl.load_state_dict(state)
    rest = [_resume.ids(b) for b in dl]
    assert head + rest == full[1]
    assert run(ds, dl, [2]) == full[2:]


# ---- over URLs ----------------------------------------------------------------------------------


def _missing(*modules):
    import importlib

    out = []
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            out.append(module)
    return out


REMOTE_MISSING = _missing("fsspec", "s3fs", "moto.server", "aiohttp")
needs_remote = pytest.mark.skipif(
    bool(REMOTE_MISSING), reason=f"needs {', '.join(REMOTE_MISSING)} (pip install '.[test]')"
)


def _framed(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


@pytest.fixture
def remote_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TFREC_FAST_CACHE_DIR", str(tmp_path / "cache"))  # (the children too)


@pytest.mark.remote
@needs_remote
@few_cpus
@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.usefixtures("remote_cache")
def test_exact_resume_over_http(tmp_path, workers):
    from _servers import RangeHTTPServer

    files, _ = write_files(tmp_path, SIZES)
    server = RangeHTTPServer().start()
    try:
        urls = []
        for k, path in enumerate(files):
            server.files[f"/data/part-{k}.tfrecord"] = _framed(path)
            urls.append(server.url(f"/data/part-{k}.tfrecord"))
        cases = stream_cases(urls, workers)[:4]
        cases.append(
            dict(
                kind="stream",
                paths=urls[:1],
                workers=workers,  # ranges of one file
                kw={"shuffle_buffer": 8, "seed": 2},
            )
        )
        check_exact(tmp_path, cases, stops=(1, 6, -1))
        # the resume fetched what was left, not the epoch again
        case = dict(kind="stream", paths=urls, workers=0, batch=8)
        full = _resume.batches(case)
        _, state, _ = _resume.stop(case, len(full) - 2)
        server.clear()
        assert full[-2:] == resume_in_new_process(tmp_path, [(case, state, None)])[0]
        assert server.bytes_sent < sum(map(len, server.files.values())) / 4
    finally:
        server.stop()


@pytest.mark.remote
@needs_remote
@few_cpus
@pytest.mark.usefixtures("remote_cache")
def test_exact_and_elastic_resume_over_s3(tmp_path, monkeypatch):
    import uuid

    import s3fs
    from _servers import S3Server

    import tfrec_fast as tfr

    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # never ask a metadata service
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    server = S3Server().start()
    try:
        options = {"endpoint_url": server.endpoint, "key": "testing", "secret": "testing"}
        bucket = f"t-{uuid.uuid4().hex[:16]}"
        s3fs.S3FileSystem(**options).mkdir(bucket)
        files, total = write_files(tmp_path, [37, 0, 50, 23])
        urls = []
        for k, path in enumerate(files):
            url = f"s3://{bucket}/part-{k}.tfrecord"
            with tfr.TFRecordWriter(url, storage_options=options) as writer:
                writer.write_batch(list(tfr.read_records(path)))
            urls.append(url)
        cases = [
            dict(kind="stream", paths=urls, workers=2, storage_options=options, kw=kw)
            for kw in ({}, {"batch_size": 8, "shuffle_buffer": 16, "seed": 1})
        ]
        check_exact(tmp_path, cases, stops=(1, 4, -1))
        from torchdata.stateful_dataloader import StatefulDataLoader

        from tfrec_fast.torch import TFRecordDataset as Dataset

        old, new = [], []
        saved = None
        for rank in range(2):
            ds = Dataset(
                urls,
                spec=_resume.SPEC,
                rank=rank,
                world_size=2,
                shuffle_buffer=8,
                storage_options=options,
            )
            dl = StatefulDataLoader(ds, batch_size=4, num_workers=1)
            old.append([i for b in itertools.islice(dl, 3) for i in _resume.ids(b)])
            saved = dl.state_dict()
        for rank in range(3):
            ds = Dataset(
                urls,
                spec=_resume.SPEC,
                rank=rank,
                world_size=3,
                shuffle_buffer=8,
                storage_options=options,
            )
            ds.load_state_dict(saved)
            new.append(
                [
                    i
                    for b in StatefulDataLoader(ds, batch_size=4, num_workers=2)
                    for i in _resume.ids(b)
                ]
            )
        check_elastic(old, new, total, 3)
    finally:
        server.stop()
