"""Seed 001: a shuffle buffer smaller than a sorted file is biased; shuffling an index is not.

The tutorial this reproduces wrote 70,000 MNIST images sorted by label (7,000 per label) to one
TFRecord file and read them through tf.train.shuffle_batch with min_after_dequeue=10,000: in
the first 50,000 draws only 0s and 1s come out at first, and 9s never do (the first 9 is record
63,000, which enters the buffer only at draw 53,001). Its fix was to shuffle something small
(paths) with a buffer as large as the data. With an index the fix is direct: pick records in a
uniformly random order (IndexedTFRecordDataset + RandomSampler, or any permutation).

    python examples/seed001_shuffle.py [--out seed001_shuffle.png] [--dir DIR]

Writes the file (synthetic 28x28 images standing in for MNIST, so nothing is downloaded), draws
50,000 records both ways, and plots record index and label against draw order into a PNG
(needs matplotlib; without it, prints a text histogram of the labels).
"""

from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np
import torch

import tfrec_fast
from tfrec_fast import Bytes, FixedLen
from tfrec_fast.torch import IndexedTFRecordDataset, TFRecordDataset

N_PER_LABEL, BUFFER, DRAWS, BATCH = 7_000, 10_000, 50_000, 20
SPEC = {"index": FixedLen((), "int64"), "label": FixedLen((), "int64")}


def write_sorted_mnist_like(path: str) -> None:
    """70,000 records sorted by label: index, label and a 28x28 uint8 image."""
    labels = np.repeat(np.arange(10), N_PER_LABEL)
    rng = np.random.default_rng(0)
    with tfrec_fast.TFRecordWriter(path) as writer:
        for start in range(0, len(labels), 10_000):
            lab = labels[start : start + 10_000]
            images = rng.integers(0, 64, (len(lab), 28, 28), dtype=np.uint8)
            rows = np.arange(len(lab))[:, None]
            images[rows, np.arange(4, 24), (10 + lab % 8)[:, None]] = 255  # label-placed stroke
            writer.write_examples(
                {
                    "index": np.arange(start, start + len(lab)),
                    "label": lab,
                    "image_string": Bytes(images),
                }
            )


def buffer_shuffle(path: str, draws: int = DRAWS, buffer: int = BUFFER, seed: int = 0):
    """The first ``draws`` (index, label) pairs through a ``buffer``-record shuffle buffer."""
    dataset = TFRecordDataset(path, spec=SPEC, shuffle_buffer=buffer, batch_size=BATCH, seed=seed)
    return _first(dataset, draws)


def index_shuffle(path: str, draws: int = DRAWS, seed: int = 0):
    """The first ``draws`` pairs of an exact shuffle: random access through the file's index."""
    dataset = IndexedTFRecordDataset(path, SPEC)
    sampler = torch.utils.data.RandomSampler(dataset, generator=torch.Generator().manual_seed(seed))
    loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, sampler=sampler)
    return _first(loader, draws)


def _first(batches, draws: int):
    """(index, label) arrays of the first ``draws`` records of an iterable of batch dicts."""
    index, label, n = [], [], 0
    for batch in batches:
        index.append(batch["index"])
        label.append(batch["label"])
        n += len(batch["index"])
        if n >= draws:
            break
    return torch.cat(index)[:draws].numpy(), torch.cat(label)[:draws].numpy()


def text_histogram(name: str, labels: np.ndarray) -> None:
    counts = np.bincount(labels, minlength=10)
    print(f"{name}: labels of the first {len(labels):,} draws")
    for digit, count in enumerate(counts):
        print(f"  {digit} {count:6d} {'#' * int(round(60 * count / max(counts.max(), 1)))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="seed001_shuffle.png")
    parser.add_argument("--dir", default=None, help="where to write the TFRecord file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(args.dir or tmp, "mnist_sorted.tfrecord")
        write_sorted_mnist_like(path)
        results = {
            f"shuffle buffer of {BUFFER:,}": buffer_shuffle(path),
            "index shuffle (RandomSampler)": index_shuffle(path),
        }
    for name, (_, labels) in results.items():
        missing = sorted(set(range(10)) - set(labels.tolist()))
        print(f"{name}: labels never drawn in {DRAWS:,} draws: {missing or 'none'}")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        for name, (_, labels) in results.items():
            text_histogram(name, labels[:10_000])
        print("(matplotlib is not installed: no PNG written)")
        return
    fig, axes = plt.subplots(2, 2, figsize=(12, 8), sharex=True)
    for row, (name, (index, labels)) in enumerate(results.items()):
        x = np.arange(len(index))
        axes[row, 0].plot(x, index, ".", markersize=1)
        axes[row, 0].set_ylabel("record index")
        axes[row, 1].plot(x, labels, ".", markersize=1)
        axes[row, 1].set_ylabel("label")
        axes[row, 0].set_title(name)
        axes[row, 1].set_title(name)
    for ax in axes[1]:
        ax.set_xlabel("draw")
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
