#!/usr/bin/env python3
"""tfrec_fast.tfds against TensorFlow Datasets: one epoch of a built image dataset, samples/s;
one epoch of RLDS robot episodes, episodes/s and steps/s.

    python bench/bench_tfds.py [--repeats 5] [--datasets bench_mnist,bench_photos,bench_rlds]
                               [--rlds-episodes 200] [--markdown FILE]

Needs tensorflow-cpu and tensorflow-datasets next to tfrec_fast (e.g. CI's peers venv, .venv-peers;
bench/data/ is git-ignored). First builds, with TFDS itself, two datasets into
bench/data/tfds/ (seeded, 8 shards each):

- ``bench_mnist``: 60,000 x (28x28x1 PNG, ClassLabel of 10), ~ MNIST;
- ``bench_photos``: 4,000 x (128x128x3 JPEG of smooth noise, ClassLabel of 100);
- ``bench_rlds``: 200 RLDS episodes (``--rlds-episodes``) of 20 to 80 steps (~10,000 steps), each
  step a 64x64x3 JPEG camera image, a 32x32x3 PNG wrist image, an 8-float state, a 7-float
  action, reward, discount, is_first/is_last/is_terminal, a language instruction and a 16-float
  embedding, plus episode metadata (as Open X-Embodiment datasets are laid out).

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

RLDS cases (``bench_rlds``), each an epoch of every episode and every step of it:

- ``tfds``: ``for episode in tfds.as_numpy(tfds.builder_from_directory(path).as_dataset(
  split="train"))``, then ``for step in episode["steps"]`` (the nested tf.data.Dataset as
  tfds.as_numpy iterates it, images decoded; the prepared directory is named by the number of
  episodes, ``1.0.<episodes>``, so it is opened by path); ``tfds_skip``: images left encoded
  (SkipDecoding on both cameras);
- ``tfrec``: ``tfrec_fast.tfds.open(path, decode_images=True)["train"]``, the steps a list of
  step dicts; ``tfrec_bytes``: images left encoded; ``tfrec_columns``: ``nested="columns"``
  (each episode's steps as arrays stacked over time, images decoded);
- ``tfrec_steps``: ``tfrec_fast.tfds.torch.StepsDataset`` iterated in the process (no DataLoader):
  one item per step, with the episode's index and metadata.

Every epoch of every case is checked: the number of examples and the sum of the labels (RLDS: the
number of episodes, of steps, and the sum of the steps' is_last, one per non-empty episode).
Each case also sums what it read, and its sums must equal TFDS's (``tfds`` for the cases that
decode images, ``tfds_skip`` for those that do not): the pixels of each image's first row (or,
undecoded, the bytes of each image); RLDS: the bits of every action (their float32 bit patterns
as integers, so the order of the sum does not matter) and the pixels (or bytes) of each
episode's first step's images. JPEG pixels may differ from TensorFlow's by a few levels when
simplejpeg is not installed (Pillow decodes them): those sums are allowed 16 levels per pixel.
Prints the target: tfrec_bytes >= 5x tfds_skip (tfds.as_numpy without decoding).
"""

from __future__ import annotations

import argparse
import itertools
import sys

import _common as C
from _common import harness as H

DATA = C.DATA_DIR / "tfds"
DATASETS = {
    "bench_mnist": dict(
        n=60_000,
        shape=(28, 28, 1),
        fmt="png",
        classes=10,
        label="60,000 MNIST-like examples: 28x28x1 PNG + label",
    ),
    "bench_photos": dict(
        n=4_000,
        shape=(128, 128, 3),
        fmt="jpeg",
        classes=100,
        label="4,000 photo-like examples: 128x128x3 JPEG + label",
    ),
    "bench_rlds": dict(
        n=200,
        rlds=True,
        label="RLDS episodes of 20 to 80 steps: 64x64x3 JPEG + 32x32x3 PNG, "
        "state, action, language per step",
    ),
}
RLDS_STEPS = (20, 80)  # steps per episode, uniform
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
        image = Image.fromarray(
            pixels.astype(np.uint8).squeeze(-1) if c == 1 else pixels.astype(np.uint8)
        )
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
        return tfds.core.DatasetInfo(
            builder=self,
            features=tfds.features.FeaturesDict(
                {
                    "image": tfds.features.Image(shape=spec["shape"], encoding_format=spec["fmt"]),
                    "label": tfds.features.ClassLabel(num_classes=spec["classes"]),
                }
            ),
        )

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples()}

    def _generate_examples(self):
        for i, (image, label) in enumerate(_images(name, spec)):
            yield i, {"image": image, "label": label}

    # The class name makes the dataset's name (BenchMnist -> bench_mnist).
    camel = "".join(part.title() for part in name.split("_"))
    Builder = type(
        camel,
        (tfds.core.GeneratorBasedBuilder,),
        dict(
            VERSION=tfds.core.Version(VERSION),
            _info=_info,
            _split_generators=_split_generators,
            _generate_examples=_generate_examples,
        ),
    )
    builder = Builder(data_dir=str(DATA))
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(num_shards=SHARDS))
    return str(path)


def _rlds_lengths(n: int) -> list:
    import numpy as np

    return np.random.default_rng(7).integers(RLDS_STEPS[0], RLDS_STEPS[1] + 1, n).tolist()


def build_rlds(opts) -> str:
    """Builds the RLDS dataset of ``opts.episodes`` episodes with TFDS (unless built), in a
    process of its own: its prepared directory."""
    name, n = opts.name, opts.episodes
    version = f"1.0.{n}"  # one prepared directory per size
    path = DATA / name / version
    if (path / "dataset_info.json").exists():
        return str(path)
    np, tfds = H.need("numpy"), H.need("tensorflow_datasets")
    F = tfds.features
    camera = DATASETS["bench_photos"]

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self,
            features=F.FeaturesDict(
                {
                    "steps": F.Dataset(
                        {
                            "observation": {
                                "image": F.Image(shape=(64, 64, 3), encoding_format="jpeg"),
                                "wrist_image": F.Image(shape=(32, 32, 3), encoding_format="png"),
                                "state": F.Tensor(shape=(8,), dtype=np.float32),
                            },
                            "action": F.Tensor(shape=(7,), dtype=np.float32),
                            "reward": F.Scalar(dtype=np.float32),
                            "discount": F.Scalar(dtype=np.float32),
                            "is_first": F.Scalar(dtype=np.bool_),
                            "is_last": F.Scalar(dtype=np.bool_),
                            "is_terminal": F.Scalar(dtype=np.bool_),
                            "language_instruction": F.Text(),
                            "language_embedding": F.Tensor(shape=(16,), dtype=np.float32),
                        }
                    ),
                    "episode_metadata": {
                        "file_path": F.Text(),
                        "episode_id": F.Scalar(dtype=np.int64),
                    },
                }
            ),
        )

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples()}

    def _generate_examples(self):
        rng = np.random.default_rng(8)
        cams = _images("rlds_cam", dict(camera, n=64, shape=(64, 64, 3)))
        wrists = _images("rlds_wrist", dict(camera, n=64, shape=(32, 32, 3), fmt="png"))
        images = [image for image, _ in cams]
        wrist = [image for image, _ in wrists]
        for e, length in enumerate(_rlds_lengths(n)):
            embedding = rng.standard_normal(16).astype(np.float32)
            steps = [
                {
                    "observation": {
                        "image": images[(e + t) % 64],
                        "wrist_image": wrist[(e * 7 + t) % 64],
                        "state": rng.standard_normal(8).astype(np.float32),
                    },
                    "action": rng.uniform(-1, 1, 7).astype(np.float32),
                    "reward": np.float32(t == length - 1),
                    "discount": np.float32(1),
                    "is_first": t == 0,
                    "is_last": t == length - 1,
                    "is_terminal": t == length - 1,
                    "language_instruction": "pick up the cup",
                    "language_embedding": embedding,
                }
                for t in range(length)
            ]
            yield (
                e,
                {
                    "steps": steps,
                    "episode_metadata": {"file_path": f"episode_{e}", "episode_id": e},
                },
            )

    Builder = type(
        "BenchRlds",
        (tfds.core.GeneratorBasedBuilder,),
        dict(
            VERSION=tfds.core.Version(version),
            _info=_info,
            _split_generators=_split_generators,
            _generate_examples=_generate_examples,
        ),
    )
    builder = Builder(data_dir=str(DATA))
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(num_shards=SHARDS))
    return str(path)


def expected(name: str, episodes: int = 0) -> tuple:
    spec = DATASETS[name]
    if spec.get("rlds"):
        lengths = _rlds_lengths(episodes)
        return episodes, sum(lengths), sum(1 for x in lengths if x)
    return spec["n"], sum(i % spec["classes"] for i in range(spec["n"]))


# ---- cases (opts: name, path = the prepared directory, expected = (examples, label sum)) ----------


def _image_sum(image) -> int:
    """What a case adds up of one image: the pixels of its first row, or its encoded bytes."""
    if isinstance(image, bytes):
        return len(image)
    return int(image[0].sum(dtype="int64"))


def _epochs(opts, examples, info: str) -> H.Body:
    """run(): one epoch of ``examples()``, checked: the number of examples and their label sum;
    the sum of what it read of the images goes to the result (compared with TFDS's)."""
    want = tuple(opts.expected)
    content: dict = {}

    def run():
        n = labels = images = 0
        for example in examples():
            n += 1
            labels += int(example["label"])
            images += _image_sum(example["image"])
        if (n, labels) != want:
            raise AssertionError(f"(examples, label sum) {(n, labels)}, expected {want}")
        content["images"] = images
        return n

    return H.Body(run, info=info, extras=lambda: dict(content))


def tfds_load(opts) -> H.Body:
    tf, tfds = H.need("tensorflow"), H.need("tensorflow_datasets")
    tf.config.set_visible_devices([], "GPU")
    decoders = {"image": tfds.decode.SkipDecoding()} if opts.case == "tfds_skip" else None
    ds = tfds.as_numpy(
        tfds.load(opts.name, split="train", data_dir=str(DATA), decoders=decoders, download=False)
    )
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
    batches = [order[i : i + 256] for i in range(0, len(order), 256)]
    return _epochs(
        opts,
        lambda: itertools.chain.from_iterable(map(split.get_batch, batches)),
        f"{len(batches)} calls, each example once",
    )


# ---- RLDS cases (opts also: expected = (episodes, steps, is_last sum)) ----------------------------


def _action_bits(action) -> int:
    """The float32 bit patterns of actions summed as integers: exact in any order."""
    import numpy as np

    return int(np.asarray(action, dtype=np.float32).view(np.int32).sum(dtype=np.int64))


class _Content:
    """The sums an RLDS case makes of what it read, compared with TFDS's after the run."""

    def __init__(self):
        self.sums = {"actions": 0, "first_image": 0, "first_wrist": 0}

    def step(self, step, first: bool) -> None:
        self.sums["actions"] += _action_bits(step["action"])
        if first:
            self.sums["first_image"] += _image_sum(step["observation"]["image"])
            self.sums["first_wrist"] += _image_sum(step["observation"]["wrist_image"])

    def columns(self, steps) -> None:
        self.sums["actions"] += _action_bits(steps["action"])
        if len(steps["action"]):
            observation = steps["observation"]
            self.sums["first_image"] += _image_sum(observation["image"][0])
            self.sums["first_wrist"] += _image_sum(observation["wrist_image"][0])


def _episodes(opts, episodes, info: str, columns: bool = False) -> H.Body:
    """run(): one epoch of ``episodes()`` and of every step of each, checked; the sums of what
    it read go to the result (compared with TFDS's)."""
    want = tuple(opts.expected)
    content: dict = {}

    def run():
        n = steps = last = 0
        sums = _Content()
        for episode in episodes():
            n += 1
            if columns:
                steps += len(episode["steps"]["is_last"])
                last += int(episode["steps"]["is_last"].sum())
                sums.columns(episode["steps"])
                continue
            for t, step in enumerate(episode["steps"]):
                steps += 1
                last += bool(step["is_last"])
                sums.step(step, t == 0)
        if (n, steps, last) != want:
            raise AssertionError(f"(episodes, steps, is_last) {(n, steps, last)}, expected {want}")
        content.update(sums.sums)
        return n

    return H.Body(run, info=info, extras=lambda: dict(content))


def rlds_tfds(opts) -> H.Body:
    tf, tfds = H.need("tensorflow"), H.need("tensorflow_datasets")
    tf.config.set_visible_devices([], "GPU")
    skip = tfds.decode.SkipDecoding()
    decoders = (
        {"steps": {"observation": {"image": skip, "wrist_image": skip}}}
        if opts.case == "tfds_skip"
        else None
    )
    ds = tfds.as_numpy(
        tfds.builder_from_directory(opts.path).as_dataset(split="train", decoders=decoders)
    )
    return _episodes(
        opts, lambda: ds, f"tensorflow-datasets {tfds.__version__}, TF {tf.__version__}"
    )


def rlds_tfrec(opts) -> H.Body:
    tfds = H.need("tfrec_fast.tfds")
    columns = opts.case == "tfrec_columns"
    split = tfds.open(
        opts.path,
        decode_images=opts.case != "tfrec_bytes",
        nested="columns" if columns else "steps",
    )["train"]
    return _episodes(opts, lambda: split, "", columns)


def rlds_steps(opts) -> H.Body:
    tfds, torch_view = H.need("tfrec_fast.tfds"), H.need("tfrec_fast.tfds.torch")
    steps = torch_view.StepsDataset(tfds.open(opts.path, decode_images=True)["train"])
    episodes, total, ends = opts.expected

    content: dict = {}

    def run():
        seen = set()
        n = last = 0
        sums = _Content()
        for item in steps:
            seen.add(item["episode_index"])
            n += 1
            last += bool(item["steps"]["is_last"])
            sums.step(item["steps"], item["step_index"] == 0)
        if (len(seen), n, last) != (episodes, total, ends):  # (no empty episodes here)
            raise AssertionError(
                f"(episodes, steps, is_last) {(len(seen), n, last)}, "
                f"expected {(episodes, total, ends)}"
            )
        content.update(sums.sums)
        return len(seen)

    return H.Body(
        run,
        info="StepsDataset, one item per step, in the benchmark's process",
        extras=lambda: dict(content),
    )


RLDS_CASES = [
    H.Case(
        "tfds",
        "TFDS `tfds.as_numpy(...)`, each episode's steps iterated, images decoded",
        rlds_tfds,
    ),
    H.Case("tfds_skip", "TFDS, images SkipDecoding (bytes)", rlds_tfds),
    H.Case(
        "tfrec", "tfrec_fast.tfds, `decode_images=True` (steps: a list of step dicts)", rlds_tfrec
    ),
    H.Case("tfrec_bytes", "tfrec_fast.tfds, `decode_images=False` (bytes)", rlds_tfrec),
    H.Case("tfrec_columns", "tfrec_fast.tfds, `nested='columns'`, images decoded", rlds_tfrec),
    H.Case("tfrec_steps", "tfrec_fast.tfds.torch `StepsDataset` (one item per step)", rlds_steps),
]


CASES = [
    H.Case("tfds", "TFDS `tfds.as_numpy(tfds.load(...))`, images decoded", tfds_load),
    H.Case("tfds_skip", "TFDS, `decoders={'image': SkipDecoding()}` (bytes)", tfds_load),
    H.Case("tfrec", "tfrec_fast.tfds, `decode_images=True`", tfrec_open),
    H.Case("tfrec_bytes", "tfrec_fast.tfds, `decode_images=False` (bytes)", tfrec_open),
    H.Case(
        "tfrec_random", "tfrec_fast.tfds `get_batch` of 256 random indices (bytes)", tfrec_get_batch
    ),
]
TARGET = 5.0  # tfrec_fast.tfds without decoding against tfds.as_numpy without decoding


# Which TFDS case reads what a case reads (images decoded, or their bytes).
PEER = {
    "tfds": None,
    "tfds_skip": None,
    "tfrec": "tfds",
    "tfrec_bytes": "tfds_skip",
    "tfrec_random": "tfds_skip",
    "tfrec_columns": "tfds",
    "tfrec_steps": "tfds",
}
JPEG_LEVELS = 16  # the most a JPEG pixel decoded by Pillow differs from TensorFlow's
CONTENT = ("images", "actions", "first_image", "first_wrist")  # the sums compared


def same_content(results, name: str, episodes: int = 0) -> None:
    """Marks as failed every row whose sums of what it read differ from its TFDS peer's: exactly,
    but for decoded JPEG pixels (JPEG_LEVELS per pixel summed)."""
    spec = DATASETS[name]
    by_name = {r.name: r for r in results if r.ok}
    if spec.get("rlds"):
        jpeg = {"first_image": JPEG_LEVELS * episodes * 64 * 3}  # first row of 64x64x3
    else:
        _, w, c = spec["shape"]
        jpeg = {"images": JPEG_LEVELS * spec["n"] * w * c} if spec["fmt"] == "jpeg" else {}
    for r in results:
        peer = by_name.get(PEER.get(r.name) or "")
        if not r.ok or peer is None:
            continue
        decoded = PEER[r.name] == "tfds"
        for key in CONTENT:
            if key not in peer.extra or key not in r.extra:
                continue
            theirs, mine = peer.extra[key][0], r.extra[key][0]
            allowed = jpeg.get(key, 0) if decoded else 0
            if abs(mine - theirs) > allowed:
                r.error = (
                    f"read other content than {peer.name}: {key} sums to {mine}, "
                    f"{peer.name}'s to {theirs}"
                )


def rlds_columns(steps: int) -> list:
    return [
        H.per_second("episodes/s", lambda r: r.records),
        H.per_second("steps/s", steps),
        H.Versus("vs TFDS decoded", "tfds"),
        H.Versus("vs TFDS without decoding", "tfds_skip"),
        *H.timing(".3f"),
    ]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    H.add_arguments(ap, repeats=5)
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument(
        "--rlds-episodes",
        type=int,
        default=200,
        help="episodes of bench_rlds (20 to 80 steps each)",
    )
    args = ap.parse_args(argv)
    if args.repeats < 3:
        ap.error("--repeats must be at least 3")
    columns = [
        H.per_second("samples/s", lambda r: r.records),
        H.Versus("vs TFDS decoded", "tfds"),
        H.Versus(
            "vs TFDS without decoding",
            "tfds_skip",
            target=TARGET,
            mine=lambda r: r.name == "tfrec_bytes",
        ),
        *H.timing(".3f"),
    ]
    md = [
        C.header(
            args,
            "The dataset object is made before timing; every epoch is checked (examples, label "
            "sum; RLDS: episodes, steps, is_last). TFDS keeps datasets under 250 MiB in memory after their first epoch "
            "(ReadConfig.try_autocache, on by default): its timed epochs come from memory, "
            "tfrec_fast's from the shards.",
        )
    ]
    raw, summary = {}, []
    for name in args.datasets.split(","):
        print(f"== {name}: building with TFDS if needed", file=sys.stderr)
        rlds = DATASETS[name].get("rlds", False)
        n = args.rlds_episodes if rlds else DATASETS[name]["n"]
        path = H.call(
            build_rlds if rlds else build,
            {"name": name, "episodes": n},
            timeout=args.timeout,
            log_dir=C.log_dir(f"tfds-{name}"),
        )
        opts = {"name": name, "path": path, "expected": expected(name, n)}
        res = H.measure(
            H.select(RLDS_CASES if rlds else CASES, args.cases),
            opts,
            log_dir=C.log_dir(f"tfds-{name}"),
            **H.timing_options(args),
        )
        H.expect_records(res, n)
        same_content(res, name, n)
        shown = rlds_columns(opts["expected"][1]) if rlds else columns
        title = (
            f"{n} {DATASETS[name]['label']} ({opts['expected'][1]:,} steps, {SHARDS} shards)"
            if rlds
            else f"{DATASETS[name]['label']} ({SHARDS} shards)"
        )
        md.append(H.section(title, *H.table(res, shown, first="case")))
        summary += H.targets(res, shown, name)
        raw[name] = H.raw(res)
    return H.emit(md, raw, args.markdown, args.json, summary)


if __name__ == "__main__":
    sys.exit(main())
