"""Iterating a prepared TFDS image split: tfrec_fast.tfds against
tfds.as_numpy(tfds.load(..., shuffle_files=False)), samples/s, with and without image decoding.

    python bench/bench_tfds.py [--records 5000] [--size 32] [--repeats 3]

Needs tensorflow-datasets (and TensorFlow) to build the data set and for its own row, so it runs
in the peers' venv. The data set: `--records` PNG images of size x size x 3 with an int label,
built with tfds into a temporary directory. TFDS without decoding reads with
`decoders={"image": tfds.decode.SkipDecoding()}`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time

import numpy as np


def build(data_dir: str, n: int, size: int):
    import tensorflow_datasets as tfds

    class BenchImages(tfds.core.GeneratorBasedBuilder):
        VERSION = tfds.core.Version("1.0.0")

        def _info(self):
            return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict({
                "image": tfds.features.Image(shape=(size, size, 3)),
                "label": tfds.features.ClassLabel(num_classes=10)}))

        def _split_generators(self, dl_manager):
            return {"train": self._generate_examples()}

        def _generate_examples(self):
            rng = np.random.default_rng(0)
            for i in range(n):
                yield i, {"image": rng.integers(0, 255, (size, size, 3), dtype=np.uint8),
                          "label": i % 10}

    builder = BenchImages(data_dir=data_dir)
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(num_shards=4))
    return builder


def samples_per_second(make_iter, n: int, repeats: int) -> float:
    sum(1 for _ in make_iter())  # warm: page cache, imports, graph tracing
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        count = sum(1 for _ in make_iter())
        times.append(time.perf_counter() - start)
        assert count == n, (count, n)
    return n / statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=5000)
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    import tensorflow_datasets as tfds

    import tfrec_fast.tfds as tfds_fast

    with tempfile.TemporaryDirectory() as tmp:
        builder = build(tmp, args.records, args.size)
        directory = builder.data_dir
        rows = []
        for decode in (False, True):
            decoders = None if decode else {"image": tfds.decode.SkipDecoding()}
            ours = samples_per_second(
                lambda: iter(tfds_fast.open(directory, decode_images=decode)["train"]),
                args.records, args.repeats)
            theirs = samples_per_second(
                lambda: tfds.as_numpy(builder.as_dataset(split="train", shuffle_files=False,
                                                         decoders=decoders)),
                args.records, args.repeats)
            rows.append((decode, ours, theirs))
    print(f"tensorflow-datasets {tfds.__version__}, {args.records} PNG images "
          f"{args.size}x{args.size}x3, median of {args.repeats}\n")
    print("| images | tfrec_fast.tfds samples/s | tfds.as_numpy samples/s | ratio |")
    print("|---|---|---|---|")
    for decode, ours, theirs in rows:
        label = "decoded (Pillow / tf.image)" if decode else "encoded bytes"
        print(f"| {label} | {ours:,.0f} | {theirs:,.0f} | {ours / theirs:.1f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
