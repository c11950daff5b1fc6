#!/usr/bin/env python3
"""Converting a folder of JPEGs to sharded TFRecord files: tfrec_fast.convert.convert_imagefolder
against the equivalent TensorFlow script, all measured in this one run.

Data (made once by this script, cached in bench/data/jpeg_folder/, git-ignored): 10 classes x 300
JPEGs, one sub-directory per class, 480..520 x 355..395 pixels, Pillow quality 90 of smooth random
fields + gradient + grain (realistic sizes: ~25..85 KB, mean ~54 KB). Every case writes 4 shards
train-0000i-of-00004.tfrecord of Examples with the same seven features (image/encoded = the file's
bytes, image/format, image/class/label, image/class/text, image/height, image/width,
image/filename), records in class-then-file-name order, record k to shard k % 4 (round robin: what
convert_imagefolder does, and what TF's object_detection scripts do with
open_sharded_output_tfrecords + output_tfrecords[idx % num_shards].write):
  TF script (Pillow size)     seed 002's generate_tfrecord.py brought to TF 2 and sharded:
                              tf.io.gfile.GFile(path, 'rb').read(), PIL.Image.open(BytesIO).size,
                              tf.train.Example(features=tf.train.Features(feature={...})),
                              .SerializeToString(), tf.io.TFRecordWriter per shard
  TF script (decode_jpeg)     the TF tutorial's image_example (seed 003): open(path, 'rb').read(),
                              tf.image.decode_jpeg(image_string).shape for height/width, otherwise the same
  tfrec_fast workers=1 / 2    convert_imagefolder(src, out, num_shards=4, workers=W)
  probe                       the physical limit: plain Python open().read() of every file and
                              .write() to one output file (no Example, no framing, no CRC)
  tfrec_fast on 20 images     workers=1 / 2 on bench/data/jpeg_folder_tiny/ (2 classes x 10 of the
                              same files): the fixed cost of one call (workers=2 starts a process pool)

Each case runs in its own process (imports untimed, TensorFlow never next to tfrec_fast), kept alive
across repeats and driven round-robin with a rotating start. Before every run, untimed: the case's
output directory is emptied and os.sync() flushes the previous run's dirty pages. Page caches cannot
be dropped here (no root), so the folder is read once before the first run and every run reads it
warm. Timed: listing the folder to the last shard closed; the case process's CPU time (user + sys,
all its threads) is recorded too. convert_imagefolder fsyncs its shards on close (ShardedWriter's
default): those calls are timed by wrapping them, shown in the notes. After the runs, every output
is verified (untimed) in two separate processes: tfrec_fast reads every output (TF's too), TensorFlow reads every
output (tfrec_fast's too); see check_outputs().

  python bench/bench_convert.py [--repeats 5] [--per-class 300] [--markdown FILE] [--json FILE]
  python bench/bench_convert.py --profile tfr_w1     # cProfile one run of a case, in this process
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import _common as C
from _common import harness as H

JPEG_DIR = C.DATA_DIR / "jpeg_folder"
JPEG_META = C.DATA_DIR / "jpeg_folder.json"
OUT_ROOT = C.OUT_DIR / "convert"
CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
PER_CLASS = 300
GEN_VERSION = 1
NUM_SHARDS = 4
PREFIX = "train"
FEATURES = (
    "image/encoded",
    "image/format",
    "image/class/label",
    "image/class/text",
    "image/height",
    "image/width",
    "image/filename",
)

TINY_DIR = C.DATA_DIR / "jpeg_folder_tiny"  # 2 classes x 10 images copied from jpeg_folder


# ---------------------------------------------------------------------------------------- data


def _render(rng, w, h, grain):
    import numpy as np  # noqa: PLC0415
    from PIL import Image  # noqa: PLC0415

    lw, lh = int(rng.integers(6, 24)), int(rng.integers(5, 18))
    low = rng.integers(0, 256, (lh, lw, 3), dtype=np.uint8)
    img = np.asarray(Image.fromarray(low).resize((w, h), Image.BICUBIC), dtype=np.float32)
    gx = np.linspace(0, 1, w, dtype=np.float32)[None, :, None]
    gy = np.linspace(0, 1, h, dtype=np.float32)[:, None, None]
    img = img * 0.7 + 60 * (gx * rng.uniform(-1, 1, 3) + gy * rng.uniform(-1, 1, 3)).astype(
        np.float32
    )
    img += rng.normal(0, grain, (h, w, 3)).astype(np.float32)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))


def _scan(root: Path) -> list[tuple[str, int, Path]]:
    """(class, label, path) of every image, classes and files sorted by name."""
    classes = sorted(d.name for d in root.iterdir() if d.is_dir())
    return [
        (c, i, p)
        for i, c in enumerate(classes)
        for p in sorted((root / c).iterdir())
        if p.is_file()
    ]


def ensure_jpegs(per_class=PER_CLASS, quiet=False) -> dict:
    """Makes bench/data/jpeg_folder/ unless the sidecar matches what is on disk; returns the sidecar."""
    want = {"version": GEN_VERSION, "classes": CLASSES, "per_class": per_class}
    if JPEG_META.exists() and JPEG_DIR.is_dir():
        meta = json.loads(JPEG_META.read_text())
        if all(meta.get(k) == v for k, v in want.items()):
            items = _scan(JPEG_DIR)
            if (
                len(items) == meta["n_images"]
                and sum(p.stat().st_size for *_, p in items) == meta["bytes"]
            ):
                return meta
    import numpy as np  # noqa: PLC0415

    if not quiet:
        print(f"== making {len(CLASSES)} x {per_class} JPEGs in {JPEG_DIR}", file=sys.stderr)
    shutil.rmtree(JPEG_DIR, ignore_errors=True)
    rng = np.random.default_rng(6)
    for cls in CLASSES:
        (JPEG_DIR / cls).mkdir(parents=True)
        for i in range(per_class):
            w, h = int(rng.integers(480, 521)), int(rng.integers(355, 396))
            img = _render(rng, w, h, float(rng.uniform(3, 12)))
            img.save(JPEG_DIR / cls / f"{cls}_{i:04d}.jpg", "JPEG", quality=90)
    sizes = [p.stat().st_size for *_, p in _scan(JPEG_DIR)]
    meta = dict(
        want, n_images=len(sizes), bytes=sum(sizes), min_bytes=min(sizes), max_bytes=max(sizes)
    )
    JPEG_META.write_text(json.dumps(meta, indent=1))
    return meta


def ensure_tiny() -> int:
    """bench/data/jpeg_folder_tiny/: the first 10 images of the first 2 classes; returns the count."""
    want = [(cls, p) for cls in CLASSES[:2] for p in sorted((JPEG_DIR / cls).iterdir())[:10]]
    have = _scan(TINY_DIR) if TINY_DIR.is_dir() else []
    if [(c, p.name, p.stat().st_size) for c, _, p in have] != [
        (c, p.name, p.stat().st_size) for c, p in want
    ]:
        shutil.rmtree(TINY_DIR, ignore_errors=True)
        for cls, p in want:
            (TINY_DIR / cls).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, TINY_DIR / cls / p.name)
    return len(want)


def warm_folder() -> float:
    """Reads every file once (the page cache cannot be dropped without root); returns seconds."""
    t0 = time.perf_counter()
    for *_, p in _scan(JPEG_DIR) + _scan(TINY_DIR):
        with open(p, "rb") as f:
            f.read()
    return time.perf_counter() - t0


# --------------------------------------------------------------------------------------- cases
# opts: src (the folder), tiny_src (the 20-image folder, for cases named *_tiny), num_shards, case.


def _src(opts) -> str:
    return opts.tiny_src if opts.case.endswith("_tiny") else opts.src


def _out(opts) -> str:
    return str(OUT_ROOT / opts.case)


def prepare_out(out: str) -> None:
    """Untimed, before every run: an empty output directory, the previous run's pages written back."""
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    os.sync()


def _tf_script(opts, size_from: str):
    """The TensorFlow script as users write it (seed 002 / seed 003), in a function."""
    import glob  # noqa: PLC0415

    tf = H.need("tensorflow")
    from PIL import Image  # noqa: PLC0415

    src, out, num_shards = _src(opts), _out(opts), opts.num_shards

    def _bytes_feature(value):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))

    def _int64_feature(value):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))

    def create_tf_example_pillow(image_path, label, class_text):  # seed 002
        with tf.io.gfile.GFile(image_path, "rb") as fid:
            encoded_jpg = fid.read()
        encoded_jpg_io = io.BytesIO(encoded_jpg)
        image = Image.open(encoded_jpg_io)
        width, height = image.size
        return tf.train.Example(
            features=tf.train.Features(
                feature={
                    "image/encoded": _bytes_feature(encoded_jpg),
                    "image/format": _bytes_feature(b"jpeg"),
                    "image/class/label": _int64_feature(label),
                    "image/class/text": _bytes_feature(class_text.encode()),
                    "image/height": _int64_feature(height),
                    "image/width": _int64_feature(width),
                    "image/filename": _bytes_feature(os.path.basename(image_path).encode()),
                }
            )
        )

    def create_tf_example_decode(
        image_path, label, class_text
    ):  # seed 003 (TF tutorial's image_example)
        image_string = open(image_path, "rb").read()
        image_shape = tf.image.decode_jpeg(image_string).shape
        feature = {
            "image/encoded": _bytes_feature(image_string),
            "image/format": _bytes_feature(b"jpeg"),
            "image/class/label": _int64_feature(label),
            "image/class/text": _bytes_feature(class_text.encode()),
            "image/height": _int64_feature(image_shape[0]),
            "image/width": _int64_feature(image_shape[1]),
            "image/filename": _bytes_feature(os.path.basename(image_path).encode()),
        }
        return tf.train.Example(features=tf.train.Features(feature=feature))

    create_tf_example = (
        create_tf_example_pillow if size_from == "pillow" else create_tf_example_decode
    )

    def open_sharded_output_tfrecords(
        exit_stack, base_path, num_shards
    ):  # object_detection's helper
        tf_record_output_filenames = [
            "{}-{:05d}-of-{:05d}.tfrecord".format(base_path, idx, num_shards)
            for idx in range(num_shards)
        ]
        return [
            exit_stack.enter_context(tf.io.TFRecordWriter(file_name))
            for file_name in tf_record_output_filenames
        ]

    def run():
        classes = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
        images = [
            (path, label, cls)
            for label, cls in enumerate(classes)
            for path in sorted(glob.glob(os.path.join(src, cls, "*.jpg")))
        ]
        with contextlib.ExitStack() as tf_record_close_stack:
            output_tfrecords = open_sharded_output_tfrecords(
                tf_record_close_stack, os.path.join(out, PREFIX), num_shards
            )
            for idx, (path, label, cls) in enumerate(images):
                tf_example = create_tf_example(path, label, cls)
                output_tfrecords[idx % num_shards].write(tf_example.SerializeToString())
        return len(images)

    return H.Body(run, prepare=lambda: prepare_out(out), info=f"TensorFlow {tf.__version__}")


def tf_pillow(opts):
    return _tf_script(opts, "pillow")


def tf_decode(opts):
    return _tf_script(opts, "decode")


def _tfrec_fast(opts, workers: int):
    tfr = H.need("tfrec_fast")
    import tfrec_fast.sharded as sharded  # noqa: PLC0415
    from tfrec_fast.convert import convert_imagefolder  # noqa: PLC0415

    # ShardedWriter fsyncs each shard (and the directory) when it closes: time those calls (behaviour
    # unchanged) so that the table can say how much of a run they are.
    fsync = [0.0]

    def timed(fn):
        def wrapper(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                fsync[0] += time.perf_counter() - t0

        return wrapper

    for name in ("_fsync_file", "_fsync_directory"):
        setattr(sharded, name, timed(getattr(sharded, name)))
    src, out = _src(opts), _out(opts)

    def prepare():
        fsync[0] = 0.0
        prepare_out(out)

    def run():
        s = convert_imagefolder(
            src, out, prefix=PREFIX, num_shards=opts.num_shards, workers=workers
        )
        if s.skipped:
            raise RuntimeError(
                f"convert_imagefolder skipped {len(s.skipped)} images: {s.skipped[:3]}"
            )
        return s.records

    return H.Body(
        run,
        prepare=prepare,
        info=f"tfrec_fast {tfr.__version__} from {Path(tfr.__file__).parent}",
        extras=lambda: {"fsync_s": fsync[0]},
    )


def tfr_w1(opts):
    return _tfrec_fast(opts, 1)


def tfr_w2(opts):
    return _tfrec_fast(opts, 2)


def probe(opts):
    src, out = _src(opts), _out(opts)

    def run():
        classes = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
        paths = [
            os.path.join(src, c, f)
            for c in classes
            for f in sorted(os.listdir(os.path.join(src, c)))
        ]
        with open(os.path.join(out, "all.bin"), "wb") as o:
            for p in paths:
                with open(p, "rb") as f:
                    o.write(f.read())
        return len(paths)

    return H.Body(run, prepare=lambda: prepare_out(out))


MAIN = [
    H.Case("tf_pillow", "TF script (Pillow size, seed 002)", tf_pillow),
    H.Case("tf_decode", "TF script (tf.image.decode_jpeg size, seed 003 / TF tutorial)", tf_decode),
    H.Case("tfr_w1", "tfrec_fast convert_imagefolder(workers=1)", tfr_w1),
    H.Case("tfr_w2", "tfrec_fast convert_imagefolder(workers=2)", tfr_w2),
    H.Case("probe", "probe: read() every file + write() to one file", probe),
]
TINY = [
    H.Case(
        "tfr_w1_tiny", "tfrec_fast convert_imagefolder(workers=1), 20-image folder", tfr_w1
    ),  # the fixed
    H.Case("tfr_w2_tiny", "tfrec_fast convert_imagefolder(workers=2), 20-image folder", tfr_w2),
]  # cost of a call
TF_CASES = ("tf_pillow", "tf_decode")
TFR_CASES = ("tfr_w1", "tfr_w2")


# -------------------------------------------------------------------------------------- checks


def _expected(src: Path) -> dict:
    """basename -> (label, class, path, width, height), from the folder (Pillow header read)."""
    from PIL import Image  # noqa: PLC0415

    exp = {}
    for cls, label, p in _scan(src):
        with Image.open(p) as im:
            w, h = im.size
        exp[p.name] = (label, cls, p, w, h)
    return exp


def _shards(d: Path, num_shards: int) -> tuple[list[Path], str | None]:
    want = [d / f"{PREFIX}-{i:05d}-of-{num_shards:05d}.tfrecord" for i in range(num_shards)]
    got = sorted(p for p in d.iterdir() if p.name.endswith(".tfrecord"))
    if got != want:
        return got, f"shard files {[p.name for p in got]} != {[p.name for p in want]}"
    return got, None


def _check_record(feats: dict, exp: dict, seen: set, full: bool) -> str | None:
    """feats: name -> list of values (bytes or ints). None when the record matches its source image."""
    missing = [k for k in FEATURES if k not in feats]
    if missing:
        return f"features missing: {missing} (has {sorted(feats)})"
    fname = bytes(feats["image/filename"][0]).decode()
    base = os.path.basename(fname)
    if base not in exp:
        return f"image/filename {fname!r} is not a source file"
    if base in seen:
        return f"{base} written twice"
    seen.add(base)
    label, cls, path, w, h = exp[base]
    got = (
        int(feats["image/class/label"][0]),
        bytes(feats["image/class/text"][0]).decode(),
        int(feats["image/width"][0]),
        int(feats["image/height"][0]),
    )
    if got != (label, cls, w, h):
        return f"{base}: (label, text, width, height) = {got}, expected {(label, cls, w, h)}"
    if full and bytes(feats["image/encoded"][0]) != path.read_bytes():
        return f"{base}: image/encoded differs from the file's bytes"
    return None


def read_back(opts) -> dict:
    """In a process of its own (harness.call): every output directory in opts.dirs read back by
    tfrec_fast (opts.kind 'tfrec_fast': every record's image bytes compared with the file) or by
    TensorFlow ('tf': every 30th record's bytes compared and its JPEG decoded). dir -> report."""
    if opts.kind == "tfrec_fast":
        tfr = H.need("tfrec_fast")

        def read(shard):
            return (tfr.parse_example(bytes(rec)) for rec in tfr.read_records(shard))

        every, decoded_size = 1, None
    else:
        tf = H.need("tensorflow")

        def read(shard):
            for rec in tf.data.TFRecordDataset([shard]):
                f = tf.train.Example.FromString(rec.numpy()).features.feature
                yield {
                    k: list(v.bytes_list.value) or list(v.int64_list.value) for k, v in f.items()
                }

        def decoded_size(data):
            height, width = tf.image.decode_jpeg(data).shape[:2]
            return width, height

        every = 30
    exp = _expected(Path(opts.src))
    return {
        d: _read_back_dir(Path(d), exp, opts.num_shards, read, every, decoded_size)
        for d in opts.dirs
    }


def _read_back_dir(d: Path, exp: dict, num_shards: int, read, every: int, decoded_size) -> dict:
    rep = {"errors": []}
    if not d.is_dir():
        rep["errors"].append("no output directory")
        return rep
    shards, err = _shards(d, num_shards)
    if err:
        rep["errors"].append(err)
    seen: set = set()
    formats, per_shard = set(), []
    for s in shards:
        per_shard.append(order := [])
        for feats in read(str(s)):
            full = len(seen) % every == 0
            e = _check_record(feats, exp, seen, full)
            if e is None and full and decoded_size is not None:
                size = decoded_size(feats["image/encoded"][0])
                if size != (feats["image/width"][0], feats["image/height"][0]):
                    e = f"decode_jpeg size {size} != width/height features"
            if e:
                rep["errors"].append(e)
                break
            formats.add(bytes(feats["image/format"][0]).decode())
            order.append(os.path.basename(bytes(feats["image/filename"][0]).decode()))
    if len(seen) != len(exp) and not rep["errors"]:
        rep["errors"].append(f"{len(seen)} distinct images written, {len(exp)} in the folder")
    # record k of the source order goes to shard k % n as its (k // n)-th record
    want = sorted(exp, key=lambda b: (exp[b][0], b))
    rr = [want[i :: len(per_shard)] for i in range(len(per_shard))] if per_shard else []
    counts = [len(order) for order in per_shard]
    rep.update(
        records=sum(counts),
        shard_counts=counts,
        formats=sorted(formats),
        round_robin_order=per_shard == rr,
    )
    return rep


def run_checker(
    kind: str, dirs: list[Path], src: Path, num_shards: int, timeout: float
) -> tuple[dict, str | None]:
    """(dir -> report, None), or ({}, why) when the reader is not installed."""
    opts = {"kind": kind, "src": str(src), "dirs": [str(d) for d in dirs], "num_shards": num_shards}
    try:
        return H.call(
            read_back, opts, timeout=timeout, log_dir=C.log_dir(f"convert-check-{kind}")
        ), None
    except H.Skip as e:
        return {}, f"{kind} read-back skipped: {e}"
    except RuntimeError as e:
        return {str(d): {"errors": [f"{kind} checker failed: {e}"]} for d in dirs}, None


def run_cli_once(src: Path, out: Path, num_shards: int, timeout: float) -> str | None:
    """`python -m tfrec_fast convert imagefolder SRC OUT --workers 2 --num-shards N` once (untimed)."""
    prepare_out(str(out))
    cmd = [
        sys.executable,
        "-m",
        "tfrec_fast",
        "convert",
        "imagefolder",
        str(src),
        str(out),
        "--workers",
        "2",
        "--num-shards",
        str(num_shards),
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode:
        return f"exit {p.returncode}: {(p.stderr or p.stdout).strip().splitlines()[-1:]}"
    return None


def check_outputs(results, src, meta, num_shards, timeout, n_tiny) -> list[str]:
    """Every output read back by tfrec_fast and by TensorFlow; errors go on the rows, facts in notes."""
    notes = []
    by = {r.name: r for r in results}
    dirs = [OUT_ROOT / r.name for r in results if r.ok and r.name in TF_CASES + TFR_CASES]
    cli_dir = OUT_ROOT / "cli"
    if any(by.get(c) and by[c].ok for c in TFR_CASES):
        cli_err = run_cli_once(src, cli_dir, num_shards, timeout)
        if cli_err is None:
            dirs.append(cli_dir)
        else:
            notes.append(
                f"**CLI `tfrec-fast convert imagefolder ... --workers 2 --num-shards {num_shards}` failed**: "
                f"{cli_err}"
            )
    reports = {}
    for kind in ("tfrec_fast", "tf") if dirs else ():
        reports[kind], skipped = run_checker(kind, dirs, src, num_shards, timeout)
        notes += [skipped] if skipped else []
    shard_counts = {}
    for d in dirs:
        name = d.name
        errs = [
            f"{k} read-back: {e}"
            for k in reports
            for e in reports[k].get(str(d), {}).get("errors", [])
        ]
        tfr_rep, tf_rep = (
            reports.get("tfrec_fast", {}).get(str(d), {}),
            reports.get("tf", {}).get(str(d)),
        )
        shard_counts[name] = tuple(tfr_rep.get("shard_counts", ()))
        if tf_rep is not None and tf_rep.get("shard_counts") != tfr_rep.get("shard_counts"):
            errs.append(
                f"shard record counts: tfrec_fast reads {tfr_rep.get('shard_counts')}, "
                f"TF reads {tf_rep.get('shard_counts')}"
            )
        order = (
            f"record k of class-then-file order in shard k % {num_shards}"
            if tfr_rep.get("round_robin_order")
            else "NOT in round-robin class-then-file order"
        )
        summary = (
            f"{tfr_rep.get('records')} records in shards of {tfr_rep.get('shard_counts')}; "
            f"image/format {tfr_rep.get('formats')}; {order}"
        )
        if name in by:
            if errs:
                by[name].error = "; ".join(errs[:3])
            by[name].notes.append(f"output checked: {summary}")
        elif name == "cli":
            notes.append(
                "CLI `python -m tfrec_fast convert imagefolder SRC OUT --workers 2 --num-shards "
                f"{num_shards}` (run once, untimed): "
                + ("; ".join(errs[:3]) if errs else "ok, " + summary)
            )
    ref = shard_counts.get("tf_pillow")
    for name, counts in shard_counts.items():
        if ref and counts != ref and name in by and by[name].ok:
            notes.append(
                f"{by[name].label}: shards hold {list(counts)} records, the TF script's {list(ref)}"
            )
    p = by.get("probe")
    if p and p.ok:
        size = (OUT_ROOT / "probe" / "all.bin").stat().st_size
        if size != meta["bytes"]:
            p.error = f"wrote {size} bytes, the folder holds {meta['bytes']}"
        else:
            p.notes.append(f"output checked: {size:,} bytes = the folder's")
    H.expect_records(
        [r for r in results if r.name in TFR_CASES + TF_CASES + ("probe",)], meta["n_images"]
    )
    H.expect_records([r for r in results if r.name.endswith("_tiny")], n_tiny)
    return notes


# -------------------------------------------------------------------------------------- report


def _median_extra(key):
    return lambda r: statistics.median(r.extra[key]) if r.extra.get(key) else None


def table(results, meta):
    for r in results:
        fsync = _median_extra("fsync_s")(r)
        if fsync is not None:
            r.notes.insert(
                0,
                f"of each run, {fsync:.3f} s (median) went to the fsyncs of ShardedWriter.close "
                "(shards + directory; the TF script and the probe do not fsync)",
            )
    columns = [
        H.per_second("images/s", meta["n_images"], ",.0f"),
        H.per_second("MB/s (JPEG bytes)", meta["bytes"] / 1e6, ".0f"),
        H.Versus("vs TF script (Pillow)", "tf_pillow"),
        H.Versus("vs TF script (decode_jpeg)", "tf_decode"),
        *H.timing(".3f")[:2],
        H.figure("CPU s of its process", _median_extra("cpu_s"), ".3f"),
    ]
    return H.table(results, columns)


def tiny_table(results, n_tiny):
    text, notes = H.table(results, H.timing(".3f")[:2])
    t1, t2 = (H.fastest(results, [name]) for name in ("tfr_w1_tiny", "tfr_w2_tiny"))
    if t1 is not None and t2 is not None:
        notes.append(
            f"workers=2 costs {t2.median - t1.median:.2f} s more per call than workers=1 before any image is "
            "done: the process pool's start-up (forked worker processes when no other thread runs, else a "
            "forkserver whose workers import tfrec_fast, numpy and Pillow), paid by every convert_imagefolder "
            "call"
        )
    return text, notes


def profile_case(case, src, num_shards, out_n=30):
    import cProfile  # noqa: PLC0415
    import pstats  # noqa: PLC0415

    setup = next(c.setup for c in MAIN + TINY if c.name == case)
    body = setup(
        SimpleNamespace(case=case, src=str(src), tiny_src=str(TINY_DIR), num_shards=num_shards)
    )
    body.prepare()
    body.run()  # warm-up
    body.prepare()
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    body.run()
    prof.disable()
    print(
        f"== {case} ({body.info}): {time.perf_counter() - t0:.3f} s under cProfile", file=sys.stderr
    )
    pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(out_n)
    shutil.rmtree(OUT_ROOT / case, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    H.add_arguments(ap, repeats=5, min_time=0)
    ap.add_argument("--num-shards", type=int, default=NUM_SHARDS)
    ap.add_argument(
        "--per-class", type=int, default=PER_CLASS, help="JPEGs per class in the folder (>= 10)"
    )
    ap.add_argument("--keep-output", action="store_true", help=f"leave the outputs in {OUT_ROOT}")
    ap.add_argument(
        "--profile", metavar="CASE", help="cProfile one run of CASE in this process, then exit"
    )
    args = ap.parse_args(argv)

    C.ensure_dirs()
    meta = ensure_jpegs(args.per_class, args.quiet)
    n_tiny = ensure_tiny()
    if args.profile:
        warm_folder()
        profile_case(args.profile, JPEG_DIR, args.num_shards)
        return 0
    pythonpath = os.environ.get("PYTHONPATH")
    cmdline = (
        f"{'PYTHONPATH=' + pythonpath + ' ' if pythonpath else ''}{sys.executable} bench/bench_convert.py"
        + "".join(f" {a}" for a in (argv if argv is not None else sys.argv[1:]))
    )
    load_before = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    t_warm = warm_folder()
    if not args.quiet:
        print(
            f"== convert: {meta['n_images']} JPEGs ({meta['bytes'] / 1e6:.1f} MB), folder read once in "
            f"{t_warm:.2f} s",
            file=sys.stderr,
        )
    t0 = time.time()
    opts = {"src": str(JPEG_DIR), "tiny_src": str(TINY_DIR), "num_shards": args.num_shards}
    results = H.measure(
        H.select(MAIN + TINY, args.cases),
        opts,
        log_dir=C.log_dir("convert"),
        **H.timing_options(args),
    )
    check_notes = check_outputs(results, JPEG_DIR, meta, args.num_shards, args.timeout, n_tiny)
    if not args.keep_output:
        shutil.rmtree(OUT_ROOT, ignore_errors=True)
    main_results = [r for r in results if not r.name.endswith("_tiny")]
    tiny_results = [r for r in results if r.name.endswith("_tiny")]
    tbl, notes = table(main_results, meta)
    head = [
        f"- Command: `{cmdline}` (from the repository root); "
        f"date {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}; "
        f"{time.time() - t0:.0f} s wall.",
        *(f"- {line}" for line in H.machine()),
        f"- Load average before the runs: {load_before}.",
        f"- Data: {meta['n_images']:,} JPEGs in {len(meta['classes'])} class sub-directories of "
        "bench/data/jpeg_folder/ "
        f"(made by this script: 480..520 x 355..395 px, Pillow quality 90), {meta['bytes'] / 1e6:.1f} MB, "
        f"{meta['min_bytes'] / 1e3:.0f}..{meta['max_bytes'] / 1e3:.0f} KB, mean "
        f"{meta['bytes'] / meta['n_images'] / 1e3:.0f} KB. Output: {args.num_shards} shards "
        f"`{PREFIX}-0000i-of-{args.num_shards:05d}.tfrecord`, seven features per Example.",
        f"- {H.method(args)} **Warm page cache**: caches cannot be dropped here, so the folder "
        f"was read once ({t_warm:.2f} s) before the first run and every run reads it from memory. Untimed "
        "before every run: the output directory emptied and `os.sync()`. Timed: listing the folder .. last shard "
        "closed (the TF script and the probe leave their data in the page cache; convert_imagefolder fsyncs its "
        "shards, see the notes). MB/s counts the source JPEG bytes. 'CPU s of its process': median user+sys time "
        "of the case's own process (all its threads) during a run; for workers=2 the pool's worker processes come "
        "on top.",
    ]
    notes = (
        notes
        + check_notes
        + [
            "Verification (untimed, after the runs, in two separate processes): tfrec_fast reads every output "
            "(TF's and its own: record and per-shard counts, all seven features of every record against the source "
            "folder, image/encoded byte-identical to the file for every record); TensorFlow reads every output "
            "(tf.data.TFRecordDataset + tf.train.Example.FromString: counts, features, image/encoded bytes and "
            "tf.image.decode_jpeg shape vs height/width for every 30th record)."
        ]
    )
    text = "\n".join(head) + "\n\n" + tbl + "\n\n" + "\n".join(f"- {x}" for x in notes) + "\n"
    if tiny_results:
        tiny_tbl, tiny_notes = tiny_table(tiny_results, n_tiny)
        text += (
            f"\nFixed cost of one call: the same converter on a {n_tiny}-image folder (2 classes x 10 of the "
            "images above, bench/data/jpeg_folder_tiny/), measured in the same rounds:\n\n"
            + tiny_tbl
            + "\n\n"
            + "".join(f"- {x}\n" for x in tiny_notes)
        )
    raw = H.raw(results)
    return H.emit(
        [text], raw, args.markdown, args.json
    )  # failed rows are in the table; a non-zero exit
    # would make run_all.sh drop it


if __name__ == "__main__":
    sys.exit(main())
