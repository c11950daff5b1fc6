"""Resuming tfrec_fast.tfds.torch's datasets under torchdata's StatefulDataLoader: SplitDataset
(map-style: the sampler's state says where an epoch stands, the dataset checks it is the same
split) and StepsDataset (steps of RLDS episodes, whole or in windows, with or without a shuffle
buffer), stopped and resumed in a new process, give what the uninterrupted run gives."""

from __future__ import annotations

import os
import shutil

import pytest

pytestmark = [
    pytest.mark.torch,
    pytest.mark.filterwarnings("ignore:'set_vital' is deprecated:UserWarning"),
]
torch = pytest.importorskip("torch")
pytest.importorskip("torchdata")

from test_torch_resume import check_exact, few_cpus  # noqa: E402

import tfrec_fast.tfds as tfds  # noqa: E402

RLDS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "tfds", "rlds_fixture")


@pytest.fixture(scope="module")
def rlds(tmp_path_factory):
    """A copy of the RLDS fixture (random access writes indexes beside the shards)."""
    target = tmp_path_factory.mktemp("rlds") / "rlds_fixture"
    shutil.copytree(RLDS, target)
    return str(target / "1.0.0")


@few_cpus
@pytest.mark.parametrize("workers", [0, 2])
def test_split_dataset_resumes_with_its_sampler(rlds, tmp_path, workers):
    cases = [
        dict(kind="split", paths=rlds, split="train", workers=workers, batch=3, sampler_seed=seed)
        for seed in (0, 1)
    ]
    check_exact(tmp_path, cases, stops=(1, 2, -1, 0))


@few_cpus
@pytest.mark.parametrize("workers", [0, 2])
def test_steps_dataset_resumes_exactly(rlds, tmp_path, workers):
    kinds = [
        {},
        {"shuffle_buffer": 8, "seed": 3},
        {"window": 2},
        {"window": 2, "stride": 2, "seed": 5, "shuffle_buffer": 5},
        {"shuffle_episodes": True, "seed": 1, "read_episodes": 3},
        {"shuffle_buffer": 6, "seed": None},
    ]
    cases = [
        dict(kind="steps", paths=rlds, split="train", workers=workers, batch=4, kw=kw)
        for kw in kinds
    ]
    check_exact(tmp_path, cases, stops=(1, 3, -1, 0))


def test_steps_dataset_resumes_across_repeated_epochs(rlds, tmp_path):
    case = dict(
        kind="steps",
        paths=rlds,
        split="train",
        workers=0,
        batch=4,
        kw={"repeat": True, "shuffle_buffer": 7, "shuffle_episodes": True, "seed": 2},
    )
    check_exact(tmp_path, [case], stops=(2, 13, 25), limit=40)  # 46 steps an epoch


def test_states_are_checked(rlds):
    from tfrec_fast.tfds.torch import SplitDataset, StepsDataset

    split = tfds.open(rlds)["train"]
    with pytest.raises(ValueError, match="not saved over this split"):
        SplitDataset(tfds.open(rlds)["val"]).load_state_dict(SplitDataset(split).state_dict())
    ds = StepsDataset(split, shuffle_buffer=4, seed=1)
    it = iter(ds)
    next(it)
    state = ds.state_dict()
    with pytest.raises(ValueError, match="shuffle_buffer=4"):
        StepsDataset(split, shuffle_buffer=5, seed=1).load_state_dict(state)
    with pytest.raises(ValueError, match="seed=1"):
        StepsDataset(split, shuffle_buffer=4, seed=2).load_state_dict(state)
    other = StepsDataset(split, shuffle_buffer=4, seed=1, rank=1, world_size=2)
    other.load_state_dict(state)
    with pytest.raises(ValueError, match="resumes only in the slot"):  # not the same steps
        iter(other)


def test_episodes_tells_the_order_of_the_pass(rlds):
    """seed=None: episodes() before a pass, and during it, name the episodes it reads."""
    from tfrec_fast.tfds.torch import StepsDataset

    ds = StepsDataset(tfds.open(rlds)["train"], shuffle_episodes=True, seed=None)
    orders = []
    for _ in range(2):
        before = ds.episodes().tolist()
        it = iter(ds)
        first = next(it)
        assert ds.episodes().tolist() == before
        order = [int(first["episode_index"])] + [int(i["episode_index"]) for i in it]
        assert list(dict.fromkeys(order)) == before
        orders.append(before)
    assert orders[0] != orders[1]  # each pass its own order (equal with probability 1 / 10!)


@few_cpus
def test_persistent_workers_follow_set_epoch(rlds):
    from tfrec_fast.tfds.torch import StepsDataset, collate

    split = tfds.open(rlds)["train"]

    def orders(ds, **options):
        loader = torch.utils.data.DataLoader(
            ds, batch_size=4, num_workers=2, collate_fn=collate, **options
        )
        out = []
        for epoch in range(3):
            ds.set_epoch(epoch)
            out.append(
                [
                    (int(e), int(t))
                    for b in loader
                    for e, t in zip(b["episode_index"], b["step_index"])
                ]
            )
        return out

    make = lambda: StepsDataset(split, shuffle_buffer=6, seed=4)  # noqa: E731
    persistent = orders(make(), persistent_workers=True)
    assert persistent == orders(make())
    assert len({tuple(o) for o in persistent}) == 3
