#!/usr/bin/env python3
"""tfrec_fast.tfds against TensorFlow Datasets: one epoch of a built image dataset, samples/s.

    python bench/bench_tfds.py [--repeats 5] [--markdown FILE] [--json FILE]

Needs tensorflow-cpu and tensorflow-datasets next to tfrec_fast (e.g. CI's peers venv, .venv-peers;
bench/data/ is git-ignored). First builds, with TFDS itself, two datasets into
bench/data/tfds/ (seeded, 8 shards each):

- ``bench_mnist``: 60,000 x (28x28x1 PNG, ClassLabel of 10), ~ MNIST;
- ``bench_photos``: 4,000 x (128x128x3 JPEG of smooth noise, ClassLabel of 100).

Cases, each in its own process (TensorFlow never imported next to tfrec_fast), the dataset
object made before timing, one unmeasured warm-up epoch then the median of ``--repeats`` epochs:

- ``tfds``: ``for ex in tfds.as_numpy(tfds.load(name, split="train", data_dir=...))`` (images
  decoded by TensorFlow); ``tfds skip``: the same with
  ``decoders={"image": tfds.decode.SkipDecoding()}`` (encoded bytes);
- ``tfrec_fast``: ``for ex in tfrec_fast.tfds.open(path, decode_images=True)["train"]``
  (Pillow, simplejpeg for JPEG when installed); ``tfrec_fast bytes``: decode_images=False;
- ``tfrec_fast get_batch``: random access, ``split.get_batch`` of 256 random indices at a time
  over one epoch's worth of examples (indexes made before timing); no TFDS peer (tfds.data_source
  needs ArrayRecord).

Every epoch of every case is checked: the number of examples and the sum of the labels.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import _common as C

DATA = C.DATA_DIR / "tfds"
DATASETS = {
    "bench_mnist": dict(n=60_000, shape=(28, 28, 1), fmt="png", classes=10,
                        label="60,000 MNIST-like examples: 28x28x1 PNG + label"),
    "bench_photos": dict(n=4_000, shape=(128, 128, 3), fmt="jpeg", classes=100,
                         label="4,000 photo-like examples: 128x128x3 JPEG + label"),
}
CASES = {
    "tfds": "TFDS `tfds.as_numpy(tfds.load(...))`, images decoded",
    "tfds_skip": "TFDS, `decoders={'image': SkipDecoding()}` (bytes)",
    "tfrec": "tfrec_fast.tfds, `decode_images=True`",
    "tfrec_bytes": "tfrec_fast.tfds, `decode_images=False` (bytes)",
    "tfrec_random": "tfrec_fast.tfds `get_batch` of 256 random indices (bytes)",
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


def build(name: str) -> str:
    """Builds one dataset with TFDS (unless built): its prepared directory."""
    path = DATA / name / VERSION
    if (path / "dataset_info.json").exists():
        return str(path)
    import tensorflow_datasets as tfds

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


# ---- one case, in its own process -------------------------------------------------------------

def _epoch_tfds(name, skip):
    import tensorflow as tf
    import tensorflow_datasets as tfds
    tf.config.set_visible_devices([], "GPU")
    decoders = {"image": tfds.decode.SkipDecoding()} if skip else None
    ds = tfds.as_numpy(tfds.load(name, split="train", data_dir=str(DATA), decoders=decoders,
                                 download=False))

    def epoch():
        n = labels = 0
        for example in ds:
            n += 1
            labels += int(example["label"])
        return n, labels
    return epoch


def _epoch_tfrec(name, decode):
    import tfrec_fast.tfds
    split = tfrec_fast.tfds.open(str(DATA / name / VERSION), decode_images=decode)["train"]

    def epoch():
        n = labels = 0
        for example in split:
            n += 1
            labels += int(example["label"])
        return n, labels
    return epoch


def _epoch_random(name):
    import numpy as np

    import tfrec_fast.tfds
    split = tfrec_fast.tfds.open(str(DATA / name / VERSION))["train"]
    split.get_batch(np.arange(len(split)))  # builds (or loads) the shard indexes, untimed
    rng = np.random.default_rng(0)
    order = rng.permutation(len(split))
    labels_of = np.array([int(e["label"]) for e in split.get_batch(np.arange(len(split)))])

    def epoch():
        n = labels = 0
        for start in range(0, len(order), 256):
            picked = order[start:start + 256]
            examples = split.get_batch(picked)
            n += len(examples)
            labels += sum(int(e["label"]) for e in examples)
        assert labels == int(labels_of[order].sum())
        return n, labels
    return epoch


def worker(case: str, name: str, repeats: int) -> dict:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    make = {"tfds": lambda: _epoch_tfds(name, False), "tfds_skip": lambda: _epoch_tfds(name, True),
            "tfrec": lambda: _epoch_tfrec(name, True),
            "tfrec_bytes": lambda: _epoch_tfrec(name, False),
            "tfrec_random": lambda: _epoch_random(name)}[case]
    epoch = make()
    want = expected(name)
    times = []
    for run in range(repeats + 1):  # the first is the warm-up
        t0 = time.perf_counter()
        got = epoch()
        elapsed = time.perf_counter() - t0
        if got != want:
            raise AssertionError(f"{case} on {name}: (examples, label sum) {got}, expected {want}")
        if run:
            times.append(elapsed)
    return {"case": case, "dataset": name, "times": times, "examples": want[0]}


def run_case(case: str, name: str, repeats: int) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", case, "--dataset", name,
           "--repeats", str(repeats)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=C.env_for_workers())
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("@@ ")]
    if proc.returncode or not lines:
        return {"case": case, "dataset": name, "error": (proc.stderr or proc.stdout)[-2000:]}
    return json.loads(lines[-1][3:])


# ---- report -----------------------------------------------------------------------------------

def table(results: list) -> tuple:
    rate = {r["case"]: r["examples"] / statistics.median(r["times"]) for r in results
            if "times" in r}
    rows, summary = [], []
    for r in results:
        if "times" not in r:
            rows.append([CASES[r["case"]], "failed", "—", "—", "—"])
            continue
        ratio = "—"
        peer = {"tfrec": "tfds", "tfrec_bytes": "tfds_skip"}.get(r["case"])
        if peer in rate:
            ratio = f"{rate[r['case']] / rate[peer]:.1f}x"
        rows.append([CASES[r["case"]], C.fmt_rate(rate[r["case"]]),
                     f"{statistics.median(r['times']):.3f}", C.fmt_num(C.spread(r["times"]), ".0%"),
                     ratio])
    if "tfrec_bytes" in rate and "tfds_skip" in rate:
        x = rate["tfrec_bytes"] / rate["tfds_skip"]
        summary.append(f"without decoding {x:.1f}x TFDS ({'✅' if x >= 5 else '❌'} target >= 5x)")
    if "tfrec" in rate and "tfds" in rate:
        summary.append(f"decoding images {rate['tfrec'] / rate['tfds']:.1f}x TFDS")
    headers = ["case", "samples/s", "median s/epoch", "IQR/median", "vs TFDS"]
    return C.md_table(headers, rows), summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5, help="measured epochs per case (>= 3)")
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--markdown", help="also write the tables to this Markdown file")
    ap.add_argument("--json", help="also write the raw timings to this JSON file")
    ap.add_argument("--worker", choices=sorted(CASES), help=argparse.SUPPRESS)
    ap.add_argument("--dataset", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print("@@ " + json.dumps(worker(args.worker, args.dataset, args.repeats)), flush=True)
        return 0
    if args.repeats < 3:
        ap.error("--repeats must be at least 3")
    md = [f"Median of {args.repeats} epochs after a warm-up epoch, each case in its own process "
          "(dataset object made before timing). Ratios: tfrec_fast samples/s over TFDS's in the "
          "same mode. TFDS keeps datasets under 250 MiB in memory after their first epoch "
          "(ReadConfig.try_autocache, on by default): its timed epochs come from memory, "
          "tfrec_fast's from the shards.\n"]
    raw, summary = {}, []
    for name in args.datasets.split(","):
        print(f"== {name}: building with TFDS if needed", file=sys.stderr)
        build(name)
        results = []
        for case in args.cases.split(","):
            print(f"   {case} ...", file=sys.stderr)
            results.append(run_case(case, name, args.repeats))
            if "error" in results[-1]:
                print(results[-1]["error"], file=sys.stderr)
        text, notes = table(results)
        md.append(f"### {DATASETS[name]['label']} ({SHARDS} shards)\n\n{text}\n")
        summary += [f"{name}: {note}" for note in notes]
        raw[name] = results
    return C.emit(md, raw, args.markdown, args.json, summary)


if __name__ == "__main__":
    sys.exit(main())
