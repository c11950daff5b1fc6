"""Builds the TFDS fixture datasets with tensorflow-datasets and dumps what tfds.as_numpy gives.

    python tools/make_tfds_fixture.py [OUT_DIR]       (default: tests/data/tfds)

Needs tensorflow and tensorflow-datasets (CI's peers venv has them, see .ci/run). Writes, for each builder below,
OUT_DIR/<name>/<version>/ as `tfds build` would (dataset_info.json, features.json, label files,
TFRecord shards) and beside it OUT_DIR/<name>/<version>.as_numpy.json.gz: every split of
``tfds.as_numpy(builder.as_dataset(split, shuffle_files=False))``, once with images decoded and
once with ``tfds.decode.SkipDecoding()`` on every image feature (tests/_tfds_dump.py says how
values are written). Everything is generated from fixed seeds, so a rebuild with the same
tensorflow-datasets gives the same values (tests/test_tfds_peer.py checks that).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import _tfds_dump  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_datasets as tfds  # noqa: E402

tf.config.set_visible_devices([], "GPU")

SHARDS = 3


class TfrecFixture(tfds.core.GeneratorBasedBuilder):
    """Every kind of feature tfrec_fast.tfds reads, in two splits of several shards."""

    VERSION = tfds.core.Version("1.2.0")
    RELEASE_NOTES = {"1.2.0": "The fixture of tfrec_fast's tests."}

    def _info(self):
        F = tfds.features
        return tfds.core.DatasetInfo(
            builder=self,
            description="A small dataset holding every feature type tfrec_fast.tfds decodes.",
            features=F.FeaturesDict(
                {
                    "image": F.Image(shape=(None, None, 3)),  # two sizes
                    "mask": F.Image(shape=(6, 5, 1)),  # grayscale
                    "photo": F.Image(shape=(None, None, 3), encoding_format="jpeg"),
                    "depth": F.Image(shape=(4, 3, 1), dtype=np.uint16),  # 16-bit PNG
                    "heat": F.Image(shape=(3, 2, 1), dtype=np.float32),  # RGBA-packed float
                    "label": F.ClassLabel(names=["cat", "dog", "bird"]),
                    "text": F.Text(),
                    "bbox": F.BBoxFeature(),
                    "f32": F.Tensor(shape=(2, 3), dtype=np.float32),
                    "f64": F.Tensor(shape=(3,), dtype=np.float64),
                    "i32_var": F.Tensor(shape=(None,), dtype=np.int32),
                    "i16_rows": F.Tensor(shape=(None, 2), dtype=np.int16),
                    "u8_bytes": F.Tensor(shape=(4, 4), dtype=np.uint8, encoding="bytes"),
                    "f16_zlib": F.Tensor(shape=(None, None), dtype=np.float16, encoding="zlib"),
                    "i64_bytes_var": F.Tensor(shape=(None, 3), dtype=np.int64, encoding="bytes"),
                    "u64": F.Tensor(shape=(), dtype=np.uint64),
                    "flag": F.Tensor(shape=(), dtype=np.bool_),
                    "flags": F.Tensor(shape=(None,), dtype=np.bool_),
                    "words": F.Tensor(shape=(None,), dtype=tf.string),
                    "pair": F.Tensor(shape=(2,), dtype=tf.string),
                    "maybe": F.Scalar(dtype=np.int32, optional=True),
                    "objects": F.Sequence(
                        {
                            "bbox": F.BBoxFeature(),
                            "kind": F.ClassLabel(names=["car", "tree"]),
                            "area": np.float32,
                            "name": F.Text(),
                            "code": F.Tensor(shape=(2,), dtype=np.uint8, encoding="bytes"),
                        }
                    ),
                    "tokens": F.Sequence(F.Sequence(np.int64)),
                    "steps": F.Sequence(np.float32, length=3),
                    "video": F.Video(shape=(None, 4, 4, 3)),
                    "meta": {
                        "id": np.int64,
                        "info": {
                            "score": np.float32,
                            "tag": F.ClassLabel(names=["low", "high"]),
                        },
                    },
                    "translation": F.Translation(languages=["en", "fr"]),
                    "languages": F.TranslationVariableLanguages(languages=["de", "en", "fr"]),
                    "segmentation": F.LabeledImage(labels=["background", "thing"], shape=(4, 4, 1)),
                    "audio": F.Audio(shape=(None,), dtype=np.int16, sample_rate=8000),
                    "phrases": F.Sequence(F.Sequence(F.Text())),
                    "pairs": F.Sequence(F.Image(shape=(3, 3, 3)), length=2),
                }
            ),
            supervised_keys=("image", "label"),
            homepage="https://example.org/tfrec_fast",
            citation="@misc{tfrec_fixture, title={A fixture}}",
        )

    def _split_generators(self, dl_manager):
        return {
            "train": self._generate_examples(70, seed=1),
            "test": self._generate_examples(20, seed=2),
        }

    def _generate_examples(self, n, seed):
        rng = np.random.default_rng(seed)
        for i in range(n):
            yield f"{seed}-{i}", _example(rng, i)


def _example(rng, i):
    h, w = ((8, 6), (5, 7))[i % 2]
    n_objects = int(rng.integers(0, 4))
    n_frames = int(rng.integers(0, 3))
    words = [f"w{k}".encode() for k in range(int(rng.integers(0, 4)))]
    rows = int(rng.integers(0, 3))
    return {
        "image": rng.integers(0, 256, (h, w, 3), dtype=np.uint8),
        "mask": rng.integers(0, 256, (6, 5, 1), dtype=np.uint8),
        "photo": rng.integers(0, 256, (w, h, 3), dtype=np.uint8),
        "depth": rng.integers(0, 65536, (4, 3, 1), dtype=np.uint16),
        "heat": rng.standard_normal((3, 2, 1)).astype(np.float32),
        "label": int(rng.integers(0, 3)),
        "text": f"example {i}: été ☃" if i % 3 else "",
        "bbox": _bbox(rng),
        "f32": rng.standard_normal((2, 3)).astype(np.float32),
        "f64": rng.standard_normal(3),
        "i32_var": rng.integers(-(2**31), 2**31, int(rng.integers(0, 5)), dtype=np.int32),
        "i16_rows": rng.integers(-(2**15), 2**15, (rows, 2), dtype=np.int16),
        "u8_bytes": rng.integers(0, 256, (4, 4), dtype=np.uint8),
        "f16_zlib": rng.standard_normal((int(rng.integers(0, 3)), 2)).astype(np.float16),
        "i64_bytes_var": rng.integers(-(2**63), 2**63 - 1, (rows, 3), dtype=np.int64),
        "u64": np.uint64(rng.integers(0, 2**63)) * np.uint64(2) + np.uint64(i % 2),
        "flag": bool(i % 2),
        "flags": rng.random(int(rng.integers(0, 4))) < 0.5,
        "words": words,
        "pair": [b"left", f"right{i}".encode()],
        "maybe": None if i % 4 == 0 else int(rng.integers(-100, 100)),
        "objects": {
            "bbox": [_bbox(rng) for _ in range(n_objects)],
            "kind": [int(rng.integers(0, 2)) for _ in range(n_objects)],
            "area": [float(rng.random()) for _ in range(n_objects)],
            "name": [f"object {k}" for k in range(n_objects)],
            "code": [rng.integers(0, 256, 2, dtype=np.uint8) for _ in range(n_objects)],
        },
        "tokens": [
            list(rng.integers(0, 1000, int(rng.integers(0, 4))))
            for _ in range(int(rng.integers(0, 4)))
        ],
        "steps": rng.standard_normal(3).astype(np.float32),
        "video": rng.integers(0, 256, (n_frames, 4, 4, 3), dtype=np.uint8),
        "meta": {
            "id": 1000 + i,
            "info": {"score": float(rng.random()), "tag": ["low", "high"][i % 2]},
        },
        "translation": {"en": f"hello {i}", "fr": f"bonjour {i}"},
        "languages": {lang: f"{lang} {i}" for lang in ("de", "en", "fr")[: 1 + i % 3]},
        "segmentation": rng.integers(0, 2, (4, 4, 1), dtype=np.uint8),
        "audio": rng.integers(-(2**15), 2**15, int(rng.integers(0, 6)), dtype=np.int16),
        "phrases": [
            [f"p{i}.{j}.{k}" for k in range(int(rng.integers(0, 3)))]
            for j in range(int(rng.integers(0, 3)))
        ],
        "pairs": rng.integers(0, 256, (2, 3, 3, 3), dtype=np.uint8),
    }


def _bbox(rng):
    ymin, ymax = sorted(rng.random(2))
    xmin, xmax = sorted(rng.random(2))
    return tfds.features.BBox(ymin=ymin, xmin=xmin, ymax=ymax, xmax=xmax)


class TfrecOrdered(tfds.core.GeneratorBasedBuilder):
    """disable_shuffling=True: TFDS keeps the generation order and reads shards one by one."""

    VERSION = tfds.core.Version("0.1.0")

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self,
            description="Examples in generation order.",
            features=tfds.features.FeaturesDict(
                {
                    "index": np.int64,
                    "image": tfds.features.Image(shape=(2, 2, 3)),
                }
            ),
            disable_shuffling=True,
        )

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples(40)}

    def _generate_examples(self, n):
        rng = np.random.default_rng(3)
        for i in range(n):
            yield i, {"index": i, "image": rng.integers(0, 256, (2, 2, 3), dtype=np.uint8)}


BUILDERS = (TfrecFixture, TfrecOrdered)


def image_features(features, prefix=""):
    """Paths of the Image features (and of Sequences of them: Video), for SkipDecoding."""
    out = {}
    for key, feature in features.items():
        inner = feature.feature if isinstance(feature, tfds.features.Sequence) else feature
        if isinstance(inner, tfds.features.Image):
            out[key] = tfds.decode.SkipDecoding()
        elif isinstance(inner, tfds.features.FeaturesDict):
            sub = image_features(inner)
            if sub:
                out[key] = sub
    return out


def build(builder_cls, out_dir):
    """Builds one dataset into out_dir/<name>/<version> and writes its as_numpy dump."""
    builder = builder_cls(data_dir=out_dir)
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(num_shards=SHARDS))
    dump = {}
    for decoded, decoders in ((True, None), (False, image_features(builder.info.features))):
        for split in builder.info.splits:
            ds = builder.as_dataset(split=split, shuffle_files=False, decoders=decoders)
            dump[_tfds_dump.key(split, decoded)] = list(tfds.as_numpy(ds))
    _tfds_dump.save(
        os.path.join(out_dir, builder.name, f"{builder.version}.as_numpy.json.gz"), dump
    )
    return os.path.join(out_dir, builder.name, str(builder.version))


def main(argv):
    out_dir = os.path.abspath(
        argv[1] if len(argv) > 1 else os.path.join(HERE, "..", "tests", "data", "tfds")
    )
    # Build in a scratch directory, then move: a failed build never leaves half a fixture.
    scratch = tempfile.mkdtemp(prefix="tfds-fixture-")
    try:
        for builder_cls in BUILDERS:
            built = build(builder_cls, scratch)
            name = os.path.basename(os.path.dirname(built))
            target = os.path.join(out_dir, name)
            shutil.rmtree(target, ignore_errors=True)
            os.makedirs(out_dir, exist_ok=True)
            shutil.copytree(os.path.join(scratch, name), target)
            print(f"built {target}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv)
