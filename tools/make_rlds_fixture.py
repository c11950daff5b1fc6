"""Builds the RLDS and feature-catalogue fixtures with tensorflow-datasets and dumps what
tfds.as_numpy gives.

    python tools/make_rlds_fixture.py [OUT_DIR]       (default: tests/data/tfds)

Needs tensorflow, tensorflow-datasets and pydub (TFDS decodes audio stored as files with it; CI's
peers venv installs them, see .ci/run). As tools/make_tfds_fixture.py does, writes each dataset
to OUT_DIR/<name>/<version>/ as `tfds build` would, and beside it
OUT_DIR/<name>/<version>.as_numpy.json.gz: every split of ``tfds.as_numpy(builder.as_dataset(
split, shuffle_files=False))`` with images decoded and with SkipDecoding on every image (nested
datasets dumped as lists of their elements, see tests/_tfds_dump.py). Everything comes from fixed
seeds: a rebuild with the same tensorflow-datasets gives the same values
(tests/test_rlds_peer.py checks it).

- ``rlds_fixture``: episodes in RLDS form: ``steps`` a tfds.features.Dataset of step dicts (PNG
  and JPEG camera images, a 16-bit depth image, float states and actions, rewards, the is_first /
  is_last / is_terminal booleans, a language instruction and its embedding, a ClassLabel whose
  names come from a names file, a ragged list per step) and ``episode_metadata``; episodes of
  0 to 8 steps in two splits of several shards.
- ``tfds_catalog``: the rest of the feature catalogue: Audio stored as WAV files (16-, 8- and
  24-bit, stereo, stereo read as mono, as floats) and as zlib / raw bytes tensors, Text with a
  (deprecated) encoder, optional Scalars and Tensors, and nested Datasets as TFDS allows them
  (images of a different size at each step, a dynamic zlib Tensor and a Video in each step, a
  Dataset in a Dataset, a Dataset of scalars, Datasets inside Sequences).
"""

from __future__ import annotations

import io
import os
import shutil
import sys
import tempfile
import warnings
import wave

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

with warnings.catch_warnings():  # TensorFlow's, TFDS's and pydub's import-time noise
    warnings.simplefilter("ignore")
    import make_tfds_fixture as base  # noqa: E402  (imports TensorFlow and TFDS)
    import pydub  # noqa: E402,F401  (TFDS needs it to decode the audio files)
    import tensorflow_datasets as tfds  # noqa: E402

F = tfds.features
SKILLS = ["reach", "grasp", "place"]
RESULTS = ["failure", "partial", "success"]


def _class_label(names, directory):
    """A ClassLabel made from a names file written in ``directory`` (TFDS reads the names when
    the feature is made, and writes them into the prepared dataset)."""
    path = os.path.join(directory, f"{names[0]}.txt")
    with open(path, "w") as f:
        f.write("\n".join(names) + "\n")
    return F.ClassLabel(names_file=path)


def _smooth(rng, shape, dtype=np.uint8, top=256):
    """A small image that compresses (a gradient, an offset and a little noise)."""
    h, w, c = shape
    ramp = np.add.outer(np.arange(h), np.arange(w))[..., None] * (top // (h + w + 2))
    image = ramp + rng.integers(0, top // 2) + rng.integers(0, 4, (h, w, c))
    return (image % top).astype(dtype)


class RldsFixture(tfds.core.GeneratorBasedBuilder):
    """Robot episodes in RLDS form, two splits of several shards."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "The RLDS fixture of tfrec_fast's tests."}

    def _info(self):
        with tempfile.TemporaryDirectory(prefix="rlds-names-") as names_dir:
            return self._info_with_names(names_dir)

    def _info_with_names(self, names_dir):
        return tfds.core.DatasetInfo(
            builder=self,
            description="Robot episodes in RLDS form (steps as a nested tfds.features.Dataset).",
            features=F.FeaturesDict(
                {
                    "steps": F.Dataset(
                        {
                            "observation": {
                                "image": F.Image(shape=(12, 12, 3)),
                                "wrist_image": F.Image(shape=(8, 8, 3), encoding_format="jpeg"),
                                "depth": F.Image(shape=(6, 6, 1), dtype=np.uint16),
                                "state": F.Tensor(shape=(7,), dtype=np.float32),
                            },
                            "action": F.Tensor(shape=(4,), dtype=np.float32),
                            "reward": F.Scalar(dtype=np.float32),
                            "discount": F.Scalar(dtype=np.float32),
                            "is_first": F.Scalar(dtype=np.bool_),
                            "is_last": F.Scalar(dtype=np.bool_),
                            "is_terminal": F.Scalar(dtype=np.bool_),
                            "language_instruction": F.Text(),
                            "language_embedding": F.Tensor(shape=(8,), dtype=np.float32),
                            "skill": _class_label(SKILLS, names_dir),
                            "contacts": F.Sequence(np.int32),
                        }
                    ),
                    "episode_metadata": {
                        "file_path": F.Text(),
                        "episode_id": F.Scalar(dtype=np.int64),
                        "success": F.Scalar(dtype=np.bool_),
                        "result": _class_label(RESULTS, names_dir),
                    },
                }
            ),
            homepage="https://example.org/tfrec_fast/rlds",
        )

    def _split_generators(self, dl_manager):
        return {
            "train": self._generate_examples(10, seed=11),
            "val": self._generate_examples(5, seed=12),
        }

    def _generate_examples(self, n, seed):
        rng = np.random.default_rng(seed)
        for e in range(n):
            length = 0 if (seed, e) == (12, 2) else int(rng.integers(1, 9))
            yield f"{seed}-{e}", _episode(rng, seed * 1000 + e, length)


def _episode(rng, episode_id, length):
    instruction = ["pick up the red block", "open the drawer", "stack the cups"][episode_id % 3]
    embedding = rng.standard_normal(8).astype(np.float32)
    steps = []
    for t in range(length):
        steps.append(
            {
                "observation": {
                    "image": _smooth(rng, (12, 12, 3)),
                    "wrist_image": _smooth(rng, (8, 8, 3)),
                    "depth": _smooth(rng, (6, 6, 1), np.uint16, 65536),
                    "state": rng.standard_normal(7).astype(np.float32),
                },
                "action": rng.uniform(-1, 1, 4).astype(np.float32),
                "reward": np.float32(t == length - 1),
                "discount": np.float32(1.0),
                "is_first": t == 0,
                "is_last": t == length - 1,
                "is_terminal": t == length - 1 and episode_id % 2 == 0,
                "language_instruction": instruction,
                "language_embedding": embedding,
                "skill": SKILLS[min(t * 3 // max(length, 1), 2)],
                "contacts": rng.integers(0, 100, int(rng.integers(0, 4))).astype(np.int32),
            }
        )
    return {
        "steps": steps,
        "episode_metadata": {
            "file_path": f"/data/episode_{episode_id}.npy",
            "episode_id": episode_id,
            "success": episode_id % 3 != 1,
            "result": RESULTS[episode_id % 3],
        },
    }


def _wav(samples, channels, width):
    """A WAV file of ``width``-byte samples (interleaved when stereo)."""
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(8000)
        if width == 1:
            data = (np.asarray(samples, np.int16) + 128).astype(np.uint8).tobytes()
        elif width == 3:
            data = np.asarray(samples, "<i4").view(np.uint8).reshape(-1, 4)[:, :3].tobytes()
        else:
            data = np.asarray(samples, {2: "<i2", 4: "<i4"}[width]).tobytes()
        w.writeframes(data)
    return io.BytesIO(out.getvalue())


class TfdsCatalog(tfds.core.GeneratorBasedBuilder):
    """The feature types rlds_fixture and tfrec_fixture leave out."""

    VERSION = tfds.core.Version("1.0.0")

    def _info(self):
        wav = dict(file_format="wav", lazy_decode=True)
        return tfds.core.DatasetInfo(
            builder=self,
            description="Audio, encoded text, optional values and nested datasets.",
            features=F.FeaturesDict(
                {
                    "wav16": F.Audio(shape=(None,), dtype=np.int16, sample_rate=8000, **wav),
                    "wav_stereo": F.Audio(shape=(None, 2), dtype=np.int16, **wav),
                    "wav_as_mono": F.Audio(shape=(None,), dtype=np.int32, **wav),
                    "wav8": F.Audio(shape=(None,), dtype=np.int32, **wav),
                    "wav24": F.Audio(shape=(None,), dtype=np.int64, **wav),
                    "wav_float": F.Audio(shape=(None,), dtype=np.float32, **wav),
                    "audio_zlib": F.Audio(
                        file_format="wav", shape=(None, 2), dtype=np.int16, encoding="zlib"
                    ),
                    "audio_bytes": F.Audio(
                        file_format="wav", shape=(None,), dtype=np.int16, encoding="bytes"
                    ),
                    "text_ids": F.Text(encoder=tfds.deprecated.text.ByteTextEncoder()),
                    "opt_int": F.Scalar(dtype=np.int32, optional=True),
                    "opt_float": F.Scalar(dtype=np.float32, optional=True),
                    "opt_bool": F.Scalar(dtype=np.bool_, optional=True),
                    "opt_str": F.Scalar(dtype=np.str_, optional=True),
                    "opt_tensor": F.Tensor(shape=(2,), dtype=np.float64, optional=True),
                    "steps": F.Dataset(
                        {
                            "camera": F.Image(shape=(None, None, 3)),
                            "grid": F.Tensor(shape=(None, None), dtype=np.uint16, encoding="zlib"),
                            "clip": F.Video(shape=(None, 4, 4, 3)),
                            "objects": F.Sequence(
                                {"area": np.float32, "ids": F.Sequence(np.int64)}
                            ),
                            "inner": F.Dataset({"x": np.int32}),
                        }
                    ),
                    "scalars": F.Dataset(np.float32),
                    "episodes": F.Sequence(
                        F.Dataset(
                            {
                                "x": np.int32,
                                "t": F.Sequence(np.int64),
                                "c": F.ClassLabel(num_classes=3),
                            }
                        )
                    ),
                    "group": F.Sequence({"eps": F.Dataset({"x": np.int32}), "y": np.int32}),
                }
            ),
        )

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples(6)}

    def _generate_examples(self, n):
        rng = np.random.default_rng(21)
        for i in range(n):
            yield i, _catalog_example(rng, i)


def _catalog_example(rng, i):
    k = int(rng.integers(0, 7))
    missing = i % 2 == 1

    def ints(bits, count):
        return rng.integers(-(2 ** (bits - 1)), 2 ** (bits - 1), count)

    return {
        "wav16": _wav(ints(16, k), 1, 2),
        "wav_stereo": _wav(ints(16, 2 * k), 2, 2),
        "wav_as_mono": _wav(
            [-32768, -32767, 1, 2, -1, -2, 32767, 32767] + list(ints(16, 2 * k)), 2, 2
        ),
        "wav8": _wav(ints(8, k), 1, 1),
        "wav24": _wav(ints(24, k + 1), 1, 3),  # (pydub reads no empty 24-bit WAV itself)
        "wav_float": _wav(ints(16, k), 1, 2),
        "audio_zlib": _wav(ints(16, 2 * k), 2, 2),
        "audio_bytes": _wav(ints(16, k), 1, 2),
        "text_ids": f"épisode {i}",
        "opt_int": None if missing else int(rng.integers(-9, 9)),
        "opt_float": None if missing else float(rng.random()),
        "opt_bool": None if missing else bool(i % 4),
        "opt_str": None if missing else f"value {i}",
        "opt_tensor": None if missing else rng.standard_normal(2),
        "steps": [_catalog_step(rng, t) for t in range(int(rng.integers(0, 5)))],
        "scalars": [float(x) for x in rng.standard_normal(int(rng.integers(0, 4)))],
        "episodes": [
            [
                {"x": int(rng.integers(0, 9)), "t": list(rng.integers(0, 9, s % 3)), "c": s % 3}
                for s in range(int(rng.integers(0, 3)))
            ]
            for _ in range(int(rng.integers(0, 3)))
        ],
        "group": [{"eps": [{"x": j}], "y": j} for j in range(int(rng.integers(0, 3)))],
    }


def _catalog_step(rng, t):
    h, w = 3 + t, 6 - t  # another size at each step
    return {
        "camera": _smooth(rng, (h, w, 3)),
        "grid": rng.integers(0, 65536, (t, 2), dtype=np.uint16),
        "clip": _smooth(rng, (4, 4, 3))[None].repeat(t % 3, axis=0),
        "objects": {
            "area": [float(x) for x in rng.random(t + 1)],
            "ids": [list(rng.integers(0, 9, (j + t) % 3)) for j in range(t + 1)],
        },
        "inner": [{"x": t * 10 + j} for j in range(t)],
    }


BUILDERS = (RldsFixture, TfdsCatalog)


def main(argv):
    out_dir = os.path.abspath(
        argv[1] if len(argv) > 1 else os.path.join(HERE, "..", "tests", "data", "tfds")
    )
    scratch = tempfile.mkdtemp(prefix="rlds-fixture-")
    try:
        for builder_cls in BUILDERS:
            built = base.build(builder_cls, scratch)
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
