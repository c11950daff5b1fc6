"""The `tfrecord`-package datasets of tfrec_fast.compat under torchdata's StatefulDataLoader:
Examples and SequenceExamples, single and mixed, resumed exactly by a new dataset and a new
DataLoader, with and without workers and shuffling."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

pytestmark = [
    pytest.mark.torch,
    pytest.mark.filterwarnings("ignore:'set_vital' is deprecated:UserWarning"),
    pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning"),
]
torch = pytest.importorskip("torch")
pytest.importorskip("torchdata")

import tfrec_fast.compat.tfrecord as tfrecord  # noqa: E402
from tfrec_fast.compat.tfrecord.torch.dataset import MultiTFRecordDataset, TFRecordDataset  # noqa: E402


def write(path, ids, sequences: bool):
    writer = tfrecord.TFRecordWriter(str(path))
    for i in ids:
        if sequences:
            writer.write({"id": (i, "int")}, {"steps": ([i, i + 1, i + 2][: 1 + i % 3], "int")})
        else:
            writer.write({"id": (i, "int"), "name": (f"r{i}".encode(), "byte")})
    writer.close()
    return str(path)


def ids_of(batch, sequences: bool) -> list:
    return (batch[0] if sequences else batch)["id"].reshape(-1).tolist()


def noisy(item):
    """A transform that draws from numpy's global generator (as augmentations do)."""
    np.random.rand()
    return item


def make(tmp_path, kind: str, sequences: bool):
    seq = {"sequence_description": {"steps": "int"}} if sequences else {}
    description = {"id": "int"} if sequences else {"id": "int", "name": "byte"}
    if kind == "single":
        path = tmp_path / "one.tfrecord"
        if not path.exists():
            write(path, range(90), sequences)
        return TFRecordDataset(
            str(path), None, description, shuffle_queue_size=16, transform=noisy, **seq
        )
    for k, split in enumerate(["a", "b"]):
        path = tmp_path / f"mix-{split}.tfrecord"
        if not path.exists():
            write(path, range(100 * k, 100 * k + 40 + 20 * k), sequences)
    return MultiTFRecordDataset(
        str(tmp_path / "mix-{}.tfrecord"),
        None,
        {"a": 1, "b": 2},
        description,
        shuffle_queue_size=8,
        infinite=False,
        transform=noisy,
        **seq,
    )


def collate(batch):
    """Sequences have steps of different lengths: the contexts collated, the steps listed."""
    if isinstance(batch[0], tuple):
        return torch.utils.data.default_collate([c for c, _ in batch]), [f for _, f in batch]
    return torch.utils.data.default_collate(batch)


@pytest.mark.parametrize("kind", ["single", "mixed"])
@pytest.mark.parametrize("sequences", [False, True], ids=["examples", "sequences"])
@pytest.mark.parametrize("workers", [0, 2])
def test_compat_datasets_resume_exactly(tmp_path, kind, sequences, workers):
    from torchdata.stateful_dataloader import StatefulDataLoader

    def loader():
        # (workers' seeds come from the DataLoader's generator, the same in every run)
        return StatefulDataLoader(
            make(tmp_path, kind, sequences),
            batch_size=4,
            num_workers=workers,
            collate_fn=collate,
            generator=torch.Generator().manual_seed(3),
        )

    np.random.seed(11)
    dl = loader()
    whole = [ids_of(b, sequences) for b in dl]
    total = sum(len(b) for b in whole)
    assert sorted(i for b in whole for i in b) == sorted(set(i for b in whole for i in b))
    assert total == (90 if kind == "single" else 100)
    for stop in (1, 5, len(whole) - 1):
        np.random.seed(11)
        dl = loader()
        it = iter(dl)
        first = [ids_of(next(it), sequences) for _ in range(stop)]
        state = pickle.loads(pickle.dumps(dl.state_dict()))
        del it, dl
        np.random.seed(99)  # the global generator elsewhere: the resume does not depend on it
        resumed = loader()
        resumed.load_state_dict(state)
        rest = [ids_of(b, sequences) for b in resumed]
        assert first + rest == whole, stop


def test_sequence_state_of_another_layout_is_refused(tmp_path):
    from torchdata.stateful_dataloader import StatefulDataLoader

    dl = StatefulDataLoader(
        make(tmp_path, "single", True), batch_size=4, num_workers=0, collate_fn=collate
    )
    it = iter(dl)
    next(it)
    state = dl.state_dict()
    ds = make(tmp_path, "single", True)
    with pytest.raises(ValueError, match="SequenceExamples resume in the layout"):
        ds.load_state_dict(state)  # a whole DataLoader's state, as for an elastic resume
    ds.load_state_dict(state["dataset_state"])
    other = StatefulDataLoader(ds, batch_size=4, num_workers=2, collate_fn=collate)
    with pytest.raises(ValueError, match="cannot resume worker"):
        list(other)
