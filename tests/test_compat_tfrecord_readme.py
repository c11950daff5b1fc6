"""The `tfrecord` package's README examples, run against tfrec_fast.compat.tfrecord with the
import changed (`import tfrecord` -> `import tfrec_fast.compat.tfrecord as tfrecord`) and their
input files written first, in a temporary directory instead of /tmp. Two edits beyond the
import: OpenCV's imdecode becomes numpy (the point is what `transform` receives: bytes), and the
README's `"int "` typo (which the package itself rejects with KeyError) is `"int"`.
The package's own test suite runs against the compat module in CI (tools/peer_tfrecord_suite.py).
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch")

import tfrec_fast.compat.tfrecord as tfrecord  # noqa: E402
from tfrec_fast.compat.tfrecord.torch.dataset import MultiTFRecordDataset, TFRecordDataset  # noqa: E402

IMAGE = bytes(range(16))


def write_examples(path, n=40, label_kind="float"):
    writer = tfrecord.TFRecordWriter(str(path))  # README: writing (block 4)
    for index in range(n):
        writer.write(
            {"image": (IMAGE, "byte"), "label": (index % 10, label_kind), "index": (index, "int")}
        )
    writer.close()


def write_sequences(path):
    writer = tfrecord.TFRecordWriter(str(path))  # README: SequenceExamples (block 6)
    writer.write(
        {"length": (3, "int"), "label": (1, "int")},
        {"tokens": ([[0, 0, 1], [0, 1, 0], [1, 0, 0]], "int"), "seq_labels": ([0, 1, 1], "int")},
    )
    writer.write(
        {"length": (3, "int"), "label": (1, "int")},
        {"tokens": ([[0, 0, 1], [1, 0, 0]], "int"), "seq_labels": ([0, 1], "int")},
    )
    writer.close()


def test_dataset_and_dataloader(tmp_path):  # block 1
    tfrecord_path = str(tmp_path / "data.tfrecord")
    write_examples(tfrecord_path)
    index_path = None
    description = {"image": "byte", "label": "float"}
    dataset = TFRecordDataset(tfrecord_path, index_path, description)
    loader = torch.utils.data.DataLoader(dataset, batch_size=32)
    data = next(iter(loader))
    assert data["label"].shape == (32, 1) and data["label"].dtype == torch.float32
    assert data["image"] == [IMAGE] * 32  # default_collate keeps bytes as a list


def test_multi_dataset_with_indexes(tmp_path):  # block 2
    for name in ("dataset1", "dataset2"):
        write_examples(tmp_path / f"{name}.tfrecord", label_kind="int")
        tfrecord.tools.tfrecord2idx.create_index(
            str(tmp_path / f"{name}.tfrecord"), str(tmp_path / f"{name}.index")
        )
    tfrecord_pattern = str(tmp_path / "{}.tfrecord")
    index_pattern = str(tmp_path / "{}.index")
    splits = {"dataset1": 0.8, "dataset2": 0.2}
    description = {"image": "byte", "label": "int"}
    dataset = MultiTFRecordDataset(tfrecord_pattern, index_pattern, splits, description)
    loader = torch.utils.data.DataLoader(dataset, batch_size=32)
    data = next(iter(loader))
    assert data["label"].shape == (32, 1) and data["label"].dtype == torch.int64


def test_transform_receives_the_package_values(tmp_path):  # block 3
    write_examples(tmp_path / "data.tfrecord")
    seen = {}

    def decode_image(features):
        seen.update({k: type(v) for k, v in features.items()})
        features["image"] = np.frombuffer(features["image"], np.uint8)  # cv2.imdecode there
        return features

    description = {"image": "byte", "label": "float", "index": "int"}
    dataset = tfrecord.torch.TFRecordDataset(
        str(tmp_path / "data.tfrecord"),
        index_path=None,
        description=description,
        transform=decode_image,
    )
    data = next(iter(dataset))
    assert seen == {"image": bytes, "label": np.ndarray, "index": np.ndarray}
    assert data["image"].tolist() == list(IMAGE) and data["label"].dtype == np.float32


def test_loader(tmp_path):  # block 5
    write_examples(tmp_path / "data.tfrecord", n=3)
    loader = tfrecord.tfrecord_loader(
        str(tmp_path / "data.tfrecord"), None, {"image": "byte", "label": "float", "index": "int"}
    )
    labels = [record["label"] for record in loader]
    assert [label.tolist() for label in labels] == [[0.0], [1.0], [2.0]]
    assert all(label.dtype == np.float32 for label in labels)


def test_sequence_loader(tmp_path):  # blocks 6 and 7
    write_sequences(tmp_path / "data.tfrecord")
    context_description = {"length": "int", "label": "int"}
    sequence_description = {"tokens": "int", "seq_labels": "int"}
    loader = tfrecord.tfrecord_loader(
        str(tmp_path / "data.tfrecord"),
        None,
        context_description,
        sequence_description=sequence_description,
    )
    got = [
        (context["label"].tolist(), [s.tolist() for s in feats["seq_labels"]])
        for context, feats in loader
    ]
    assert got == [([1], [[0], [1], [1]]), ([1], [[0], [1]])]


PAD_WIDTH = 5


def pad_sequence_feats(data):  # block 8
    context, features = data
    for k, v in features.items():
        features[k] = np.pad(v, ((0, PAD_WIDTH - len(v)), (0, 0)), "constant")
    return (context, features)


def test_sequence_dataset_with_padding(tmp_path):  # block 8
    write_sequences(tmp_path / "data.tfrecord")
    context_description = {"length": "int", "label": "int"}
    sequence_description = {"tokens": "int", "seq_labels": "int"}
    dataset = TFRecordDataset(
        str(tmp_path / "data.tfrecord"),
        index_path=None,
        description=context_description,
        transform=pad_sequence_feats,
        sequence_description=sequence_description,
    )
    loader = torch.utils.data.DataLoader(dataset, batch_size=32)
    context, feats = next(iter(loader))
    assert context["label"].tolist() == [[1], [1]]
    assert feats["tokens"].shape == (2, PAD_WIDTH, 3)
    assert feats["seq_labels"].shape == (2, PAD_WIDTH, 1)


def test_sequence_dataset_with_collate_fn(tmp_path):  # block 9
    write_sequences(tmp_path / "data.tfrecord")

    def collate_fn(batch):
        from torch.nn.utils import rnn
        from torch.utils.data._utils import collate

        context, feats = zip(*batch)
        feats_ = {k: [torch.Tensor(d[k]) for d in feats] for k in feats[0]}
        return (
            collate.default_collate(context),
            {k: rnn.pad_sequence(f, True) for (k, f) in feats_.items()},
        )

    context_description = {"length": "int", "label": "int"}
    sequence_description = {"tokens": "int", "seq_labels": "int"}
    dataset = TFRecordDataset(
        str(tmp_path / "data.tfrecord"),
        index_path=None,
        description=context_description,
        transform=pad_sequence_feats,
        sequence_description=sequence_description,
    )
    loader = torch.utils.data.DataLoader(dataset, batch_size=32, collate_fn=collate_fn)
    context, feats = next(iter(loader))
    assert feats["tokens"].shape == (2, PAD_WIDTH, 3)
