#!/usr/bin/env python3
"""tfrec_fast.tfds against TensorFlow Datasets: one epoch of a built image dataset, samples/s.

    python bench/bench_tfds.py [--repeats 5] [--datasets bench_mnist,bench_photos] [--markdown FILE]

Needs tensorflow-cpu and tensorflow-datasets next to tfrec_fast (e.g. CI's peers venv, .venv-peers;
bench/data/ is git-ignored). First builds, with TFDS itself, two datasets into
bench/data/tfds/ (seeded, 8 shards each):

- ``bench_mnist``: 60,000 x (28x28x1 PNG, ClassLabel of 10), ~ MNIST;
- ``bench_photos``: 4,000 x (128x128x3 JPEG of smooth noise, ClassLabel of 100).

Cases, with the harness of bench/README.md (each in its own process, TensorFlow never imported
next to tfrec_fast, driven round-robin), the dataset object made before timing, one unmeasured
warm-up epoch then the median of ``--repeats`` samples (a sample averages K epochs of a case
faster than ``--min-time``):

- ``tfds``: ``for ex in tfds.as_numpy(tfds.load(name, split="train", data_dir=...))`` (images
  decoded by TensorFlow); ``tfds_skip``: the same with
  ``decoders={"image": tfds.decode.SkipDecoding()}`` (encoded bytes);
- ``tfrec``: ``for ex in tfrec_fast.tfds.open(path, decode_images=True)["train"]``
  (Pillow, simplejpeg for JPEG when installed); ``tfrec_bytes``: decode_images=False;
- ``tfrec_random``: random access, ``split.get_batch`` of 256 random indices at a time
  over one epoch's worth of examples (indexes made before timing); no TFDS peer (tfds.data_source
  needs ArrayRecord).

Every epoch of every case is checked: the number of examples and the sum of the labels. Prints the
target: tfrec_bytes >= 5x tfds_skip (tfds.as_numpy without decoding).
"""

from __future__ import annotations

import argparse
import itertools
import sys

import _common as C
from _common import harness as H

DATA = C.DATA_DIR / "tfds"
DATASETS = {
    "bench_mnist": dict(n=60_000, shape=(28, 28, 1), fmt="png", classes=10,
                        label="60,000 MNIST-like examples: 28x28x1 PNG + label"),
    "bench_photos": dict(n=4_000, shape=(128, 128, 3), fmt="jpeg", classes=100,
                         label="4,000 photo-like examples: 128x128x3 JPEG + label"),
}
SHARDS = 8
VERSION = "1.0.0"


# ---- data ---------------------------------------------------------------------------------------

def _images(name: str, spec: dict):
    """(encoded image, label) for each example, seeded: smooth noise (so JPEG stays realistic)."""
    import io

    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(len(name))
    h, w, c = spec["shape"]
    for i in range(spec["n"]):
        small = rng.integers(0, 256, (h // 4 + 1, w // 4 + 1, c), dtype=np.uint8)
        pixels = np.repeat(np.repeat(small, 4, axis=0), 4, axis=1)[:h, :w]
        pixels = (pixels.astype(np.int16) + rng.integers(-8, 9, pixels.shape)).clip(0, 255)
        image = Image.fromarray(pixels.astype(np.uint8).squeeze(-1) if c == 1 else
                                pixels.astype(np.uint8))
        out = io.BytesIO()
        image.save(out, format=spec["fmt"].upper(), **({"quality": 90} if c == 3 else {}))
        yield out.getvalue(), i % spec["classes"]


def build(opts) -> str:
    """Builds dataset ``opts.name`` with TFDS (unless built), in a process of its own (H.call):
    its prepared directory."""
    name = opts.name
    path = DATA / name / VERSION
    if (path / "dataset_info.json").exists():
        return str(path)
    tfds = H.need("tensorflow_datasets")
    spec = DATASETS[name]

    def _info(self):
        return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict({
            "image": tfds.features.Image(shape=spec["shape"], encoding_format=spec["fmt"]),
            "label": tfds.features.ClassLabel(num_classes=spec["classes"])}))

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples()}

    def _generate_examples(self):
        for i, (image, label) in enumerate(_images(name, spec)):
            yield i, {"image": image, "label": label}

    # The class name makes the dataset's name (BenchMnist -> bench_mnist).
    camel = "".join(part.title() for part in name.split("_"))
    Builder = type(camel, (tfds.core.GeneratorBasedBuilder,), dict(
        VERSION=tfds.core.Version(VERSION), _info=_info, _split_generators=_split_generators,
        _generate_examples=_generate_examples))
    builder = Builder(data_dir=str(DATA))
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(num_shards=SHARDS))
    return str(path)


def expected(name: str) -> tuple:
    spec = DATASETS[name]
    return spec["n"], sum(i % spec["classes"] for i in range(spec["n"]))


# ---- cases (opts: name, path = the prepared directory, expected = (examples, label sum)) ----------

def _epochs(opts, examples, info: str) -> H.Body:
    """run(): one epoch of ``examples()``, checked: the number of examples and their label sum."""
    want = tuple(opts.expected)

    def run():
        n = labels = 0
        for example in examples():
            n += 1
            labels += int(example["label"])
        if (n, labels) != want:
            raise AssertionError(f"(examples, label sum) {(n, labels)}, expected {want}")
        return n

    return H.Body(run, info=info)


def tfds_load(opts) -> H.Body:
    tf, tfds = H.need("tensorflow"), H.need("tensorflow_datasets")
    tf.config.set_visible_devices([], "GPU")
    decoders = {"image": tfds.decode.SkipDecoding()} if opts.case == "tfds_skip" else None
    ds = tfds.as_numpy(tfds.load(opts.name, split="train", data_dir=str(DATA), decoders=decoders,
                                 download=False))
    return _epochs(opts, lambda: ds, f"tensorflow-datasets {tfds.__version__}, TF {tf.__version__}")


def tfrec_open(opts) -> H.Body:
    tfds = H.need("tfrec_fast.tfds")
    split = tfds.open(opts.path, decode_images=opts.case == "tfrec")["train"]
    return _epochs(opts, lambda: split, "")


def tfrec_get_batch(opts) -> H.Body:
    np, tfds = H.need("numpy"), H.need("tfrec_fast.tfds")
    split = tfds.open(opts.path)["train"]
    split.get_batch(np.arange(len(split)))  # builds (or loads) the shard indexes, untimed
    order = np.random.default_rng(0).permutation(len(split))
    batches = [order[i:i + 256] for i in range(0, len(order), 256)]
    return _epochs(opts, lambda: itertools.chain.from_iterable(map(split.get_batch, batches)),
                   f"{len(batches)} calls, each example once")


CASES = [
    H.Case("tfds", "TFDS `tfds.as_numpy(tfds.load(...))`, images decoded", tfds_load),
    H.Case("tfds_skip", "TFDS, `decoders={'image': SkipDecoding()}` (bytes)", tfds_load),
    H.Case("tfrec", "tfrec_fast.tfds, `decode_images=True`", tfrec_open),
    H.Case("tfrec_bytes", "tfrec_fast.tfds, `decode_images=False` (bytes)", tfrec_open),
    H.Case("tfrec_random", "tfrec_fast.tfds `get_batch` of 256 random indices (bytes)", tfrec_get_batch),
]
TARGET = 5.0  # tfrec_fast.tfds without decoding against tfds.as_numpy without decoding


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    H.add_arguments(ap, repeats=5)
    ap.add_argument("--datasets", default=",".join(DATASETS))
    args = ap.parse_args(argv)
    if args.repeats < 3:
        ap.error("--repeats must be at least 3")
    columns = [H.per_second("samples/s", lambda r: r.records),
               H.Versus("vs TFDS decoded", "tfds"),
               H.Versus("vs TFDS without decoding", "tfds_skip", target=TARGET,
                        mine=lambda r: r.name == "tfrec_bytes"),
               *H.timing(".3f")]
    md = [C.header(args, "The dataset object is made before timing; every epoch is checked (examples, label "
                         "sum). TFDS keeps datasets under 250 MiB in memory after their first epoch "
                         "(ReadConfig.try_autocache, on by default): its timed epochs come from memory, "
                         "tfrec_fast's from the shards.")]
    raw, summary = {}, []
    for name in args.datasets.split(","):
        print(f"== {name}: building with TFDS if needed", file=sys.stderr)
        path = H.call(build, {"name": name}, timeout=args.timeout, log_dir=C.log_dir(f"tfds-{name}"))
        opts = {"name": name, "path": path, "expected": expected(name)}
        res = H.measure(H.select(CASES, args.cases), opts, log_dir=C.log_dir(f"tfds-{name}"),
                        **H.timing_options(args))
        H.expect_records(res, DATASETS[name]["n"])
        md.append(H.section(f"{DATASETS[name]['label']} ({SHARDS} shards)", *H.table(res, columns, first="case")))
        summary += H.targets(res, columns, name)
        raw[name] = H.raw(res)
    return H.emit(md, raw, args.markdown, args.json, summary)


if __name__ == "__main__":
    sys.exit(main())
