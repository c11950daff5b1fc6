"""Builds the small TFDS dataset of tests/data/tfds with tensorflow-datasets itself, and dumps
what ``tfds.as_numpy`` gives for every split (tests/data/tfds/expected.json), so the TF-free
suite can compare tfrec_fast.tfds with TFDS value for value.

    python tools/make_tfds_fixture.py [--out tests/data/tfds]     # needs tensorflow-datasets

The builder covers images of two sizes (and a fixed-shape grayscale one), ClassLabel, Tensors
of several dtypes and shapes (float64/int8/uint16/bool cast into Example lists, and float16 /
int32 Tensors stored as raw bytes and as zlib-compressed bytes), a Video, Text, a Sequence of a dict, a Sequence of a Tensor, BBoxFeature
and a nested FeaturesDict; two splits of several shards each. Everything is seeded.
"""

from __future__ import annotations

import argparse
import base64
import json
import shutil
import sys
from pathlib import Path

import numpy as np

NAME = "tfrec_fast_fixture"
VERSION = "1.0.0"


def make_builder(data_dir: str):
    import tensorflow_datasets as tfds

    class TfrecFastFixture(tfds.core.GeneratorBasedBuilder):
        VERSION = tfds.core.Version(VERSION)

        def _info(self):
            f = tfds.features
            return tfds.core.DatasetInfo(
                builder=self,
                description="A small dataset exercising TFDS feature types.",
                citation="@misc{tfrec_fast_fixture}",
                features=f.FeaturesDict({
                    "image": f.Image(shape=(None, None, 3)),
                    "mask": f.Image(shape=(4, 5, 1)),
                    "label": f.ClassLabel(names=["cat", "dog", "bird"]),
                    "matrix": f.Tensor(shape=(2, 3), dtype=np.float32),
                    "big": f.Tensor(shape=(2,), dtype=np.float64),
                    "small": f.Tensor(shape=(), dtype=np.int8),
                    "wide": f.Tensor(shape=(3,), dtype=np.uint16),
                    "flag": f.Tensor(shape=(), dtype=np.bool_),
                    "ragged": f.Tensor(shape=(None,), dtype=np.int64),
                    "packed": f.Tensor(shape=(2, 2), dtype=np.float16,
                                       encoding=f.Encoding.BYTES),
                    "zipped": f.Tensor(shape=(3,), dtype=np.int32, encoding=f.Encoding.ZLIB),
                    "clip": f.Video(shape=(None, 4, 6, 3)),
                    "caption": f.Text(),
                    "objects": f.Sequence({
                        "bbox": f.BBoxFeature(),
                        "kind": f.ClassLabel(names=["small", "large"]),
                        "score": np.float32,
                    }),
                    "steps": f.Sequence(f.Tensor(shape=(2,), dtype=np.int32)),
                    "meta": {
                        "id": np.int64,
                        "name": f.Text(),
                        "inner": {"weight": np.float32},
                    },
                }),
                supervised_keys=("image", "label"),
            )

        def _split_generators(self, dl_manager):
            return {"train": self._generate_examples(24, seed=1),
                    "test": self._generate_examples(10, seed=2)}

        def _generate_examples(self, n, seed):
            rng = np.random.default_rng(seed)
            for i in range(n):
                h, w = (6, 8) if i % 2 else (9, 7)  # images of two sizes
                count = int(rng.integers(0, 4))
                boxes = np.sort(rng.random((count, 4)).astype(np.float32), axis=1)
                yield f"{seed}-{i:03d}", {
                    "image": rng.integers(0, 255, (h, w, 3), dtype=np.uint8),
                    "mask": rng.integers(0, 2, (4, 5, 1), dtype=np.uint8),
                    "label": int(rng.integers(0, 3)),
                    "matrix": rng.random((2, 3)).astype(np.float32),
                    "big": rng.random(2),
                    "small": np.int8(rng.integers(-128, 127)),
                    "wide": rng.integers(0, 65535, 3).astype(np.uint16),
                    "flag": bool(i % 3 == 0),
                    "ragged": rng.integers(-9, 9, int(rng.integers(0, 5))),
                    "packed": rng.random((2, 2)).astype(np.float16),
                    "zipped": rng.integers(-1000, 1000, 3).astype(np.int32),
                    "clip": rng.integers(0, 255, (1 + i % 3, 4, 6, 3), dtype=np.uint8),
                    "caption": f"example {i} \u00e9\u4e2d",
                    "objects": {
                        "bbox": [tfds.features.BBox(*b[[1, 0, 3, 2]].tolist()) for b in boxes],
                        "kind": rng.integers(0, 2, count).tolist(),
                        "score": rng.random(count).astype(np.float32),
                    },
                    "steps": rng.integers(-5, 5, (int(rng.integers(0, 3)), 2)).astype(np.int32),
                    "meta": {"id": i, "name": f"n{i}", "inner": {"weight": float(i) / 4}},
                }

    return TfrecFastFixture(data_dir=data_dir)


def to_json(value):
    """A value of tfds.as_numpy as JSON, exactly: arrays with dtype and shape."""
    if isinstance(value, dict):
        return {"dict": {k: to_json(v) for k, v in sorted(value.items())}}
    if isinstance(value, bytes):
        return {"bytes": base64.b64encode(value).decode()}
    if isinstance(value, np.ndarray) and value.dtype == object:
        return {"objects": [to_json(v) for v in value.ravel()], "shape": list(value.shape)}
    array = np.asarray(value)
    return {"dtype": array.dtype.str, "shape": list(array.shape),
            "scalar": isinstance(value, np.generic),  # a numpy scalar, not a 0-d array
            "data": base64.b64encode(np.ascontiguousarray(array).tobytes()).decode()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "tests/data/tfds"))
    args = ap.parse_args(argv)
    import tensorflow_datasets as tfds

    out = Path(args.out)
    if (out / NAME).exists():
        shutil.rmtree(out / NAME)
    out.mkdir(parents=True, exist_ok=True)
    builder = make_builder(str(out))
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(num_shards=3))
    expected = {}
    for split in ("train", "test"):
        ds = builder.as_dataset(split=split, shuffle_files=False)
        expected[split] = [to_json(example) for example in tfds.as_numpy(ds)]
    (out / "expected.json").write_text(json.dumps(expected, sort_keys=True) + "\n")
    print(f"built {out / NAME / VERSION} with tensorflow-datasets {tfds.__version__}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
