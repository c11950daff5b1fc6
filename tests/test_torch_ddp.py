"""Distributed data parallel: every rank reads the same number of records per epoch.

A rank that runs out of data first leaves the others waiting in a collective: on gloo the run
dies ("Connection closed by peer"), on NCCL it hangs. Checked on the split function for many
shapes, and with a real two-process gloo job over uneven shards.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch")

import tfrec_fast as tfr  # noqa: E402
from tfrec_fast import _loader  # noqa: E402


@settings(max_examples=300, deadline=None)
@given(
    counts=st.lists(st.integers(0, 40), min_size=1, max_size=7),
    world=st.integers(1, 5),
    workers=st.integers(1, 4),
    uneven=st.sampled_from(["pad", "drop"]),
    data=st.data(),
)
def test_plan_ranks_equal_per_rank(counts, world, workers, uneven, data):
    order = data.draw(st.permutations(range(len(counts))))
    total = sum(counts)
    per_rank, seen = [], []
    for rank in range(world):
        n = 0
        for worker in range(workers):
            for i, a, b in _loader.plan_ranks(
                order, counts.__getitem__, rank, world, worker, workers, uneven
            ):
                assert 0 <= a < b <= counts[i]
                seen += [(i, k) for k in range(a, b)]
                n += b - a
        per_rank.append(n)
    assert len(set(per_rank)) == 1
    every = {(i, k) for i, n in enumerate(counts) for k in range(n)}
    if uneven == "drop":
        assert len(seen) == len(set(seen)) == total - total % world
    else:
        assert set(seen) == every and per_rank[0] == -(-total // world)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


RANK_SCRIPT = textwrap.dedent("""
    import json, os, sys
    import torch, torch.distributed as dist
    import tfrec_fast as tfr
    from tfrec_fast.torch import TFRecordDataset

    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + os.environ["PORT"],
                            rank=int(os.environ["RANK"]), world_size=2,
                            timeout=__import__("datetime").timedelta(seconds=60))
    files = json.loads(os.environ["FILES"])
    ds = TFRecordDataset(files, spec={"id": tfr.FixedLen((), "int64")}, batch_size=16,
                         shuffle_buffer=64, seed=7)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
    ids, steps = [], 0
    for epoch in range(2):
        ds.set_epoch(epoch)
        for batch in loader:
            ids += batch["id"].tolist() if epoch == 0 else []
            total = torch.tensor([len(batch["id"])])
            dist.all_reduce(total)  # a rank with fewer batches would leave the other waiting
            steps += 1
    print(json.dumps({"steps": steps, "ids": ids}))
    dist.destroy_process_group()
""")


def test_two_rank_gloo_job_over_uneven_shards(tmp_path):
    sizes = [700, 300, 450, 1000, 55]  # 5 shards, 2505 records: divides neither by 2 nor evenly
    files, first = [], 0
    for k, n in enumerate(sizes):
        path = tmp_path / f"train-{k:05d}-of-00005.tfrecord"
        with tfr.TFRecordWriter(path) as w:
            w.write_batch(tfr.encode_examples({"id": list(range(first, first + n))}))
        files.append(str(path))
        first += n
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    env = dict(os.environ, PORT=str(free_port()), FILES=json.dumps(files))
    procs = [
        subprocess.Popen(
            [sys.executable, str(script)],
            env=dict(env, RANK=str(r)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in range(2)
    ]
    results = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("the 2-rank job hung (a rank waited in all_reduce for the other)")
        assert p.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert results[0]["steps"] == results[1]["steps"]
    ids = results[0]["ids"] + results[1]["ids"]
    assert len(results[0]["ids"]) == len(results[1]["ids"]) == 1253  # ceil(2505 / 2)
    assert set(ids) == set(range(sum(sizes)))  # every record; one repeated as padding


def test_streaming_parse_errors_name_the_file(tmp_path):
    from tfrec_fast.torch import TFRecordDataset

    files = []
    for k in range(2):
        path = tmp_path / f"s{k}.tfrecord"
        with tfr.TFRecordWriter(path) as w:
            for i in range(10):
                w.write_example({"x": i} if (k, i) != (1, 6) else {"y": 1})
        files.append(str(path))
    spec = {"x": tfr.FixedLen((), "int64")}
    with pytest.raises(tfr.ExampleParseError) as info:
        list(TFRecordDataset(files, spec=spec))
    assert (info.value.path, info.value.record_index, info.value.feature) == (files[1], 6, "x")
    for kw in ({"batch_size": 4}, {"batch_size": 4, "shuffle_buffer": 8}):
        with pytest.raises(tfr.ExampleParseError) as info:
            list(TFRecordDataset(files, spec=spec, **kw))
        assert files[1] in info.value.path and "<records>" not in str(info.value)
