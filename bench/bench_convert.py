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

  python bench/bench_convert.py [--repeats 5] [--markdown FILE] [--json FILE]
  python bench/bench_convert.py --profile tfr_w1     # cProfile one run of a case, in this process
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import json
import os
import platform
import queue
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import _common as C

JPEG_DIR = C.DATA_DIR / "jpeg_folder"
JPEG_META = C.DATA_DIR / "jpeg_folder.json"
OUT_ROOT = C.OUT_DIR / "convert"
CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
PER_CLASS = 300
GEN_VERSION = 1
NUM_SHARDS = 4
PREFIX = "train"
FEATURES = ("image/encoded", "image/format", "image/class/label", "image/class/text", "image/height",
            "image/width", "image/filename")

CASES = {  # name -> label
    "tf_pillow": "TF script (Pillow size, seed 002)",
    "tf_decode": "TF script (tf.image.decode_jpeg size, seed 003 / TF tutorial)",
    "tfr_w1": "tfrec_fast convert_imagefolder(workers=1)",
    "tfr_w2": "tfrec_fast convert_imagefolder(workers=2)",
    "probe": "probe: read() every file + write() to one file",
    "tfr_w1_tiny": "tfrec_fast convert_imagefolder(workers=1), 20-image folder",
    "tfr_w2_tiny": "tfrec_fast convert_imagefolder(workers=2), 20-image folder",
}
MAIN_CASES = ("tf_pillow", "tf_decode", "tfr_w1", "tfr_w2", "probe")
TINY_CASES = ("tfr_w1_tiny", "tfr_w2_tiny")  # the fixed cost of one call
TF_CASES = ("tf_pillow", "tf_decode")
TFR_CASES = ("tfr_w1", "tfr_w2")
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
    img = img * 0.7 + 60 * (gx * rng.uniform(-1, 1, 3) + gy * rng.uniform(-1, 1, 3)).astype(np.float32)
    img += rng.normal(0, grain, (h, w, 3)).astype(np.float32)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))


def _scan(root: Path) -> list[tuple[str, int, Path]]:
    """(class, label, path) of every image, classes and files sorted by name."""
    classes = sorted(d.name for d in root.iterdir() if d.is_dir())
    return [(c, i, p) for i, c in enumerate(classes) for p in sorted((root / c).iterdir()) if p.is_file()]


def ensure_jpegs(quiet=False) -> dict:
    """Makes bench/data/jpeg_folder/ unless the sidecar matches what is on disk; returns the sidecar."""
    want = {"version": GEN_VERSION, "classes": CLASSES, "per_class": PER_CLASS}
    if JPEG_META.exists() and JPEG_DIR.is_dir():
        meta = json.loads(JPEG_META.read_text())
        if all(meta.get(k) == v for k, v in want.items()):
            items = _scan(JPEG_DIR)
            if len(items) == meta["n_images"] and sum(p.stat().st_size for *_, p in items) == meta["bytes"]:
                return meta
    import numpy as np  # noqa: PLC0415

    if not quiet:
        print(f"== making {len(CLASSES)} x {PER_CLASS} JPEGs in {JPEG_DIR}", file=sys.stderr)
    shutil.rmtree(JPEG_DIR, ignore_errors=True)
    rng = np.random.default_rng(6)
    for cls in CLASSES:
        (JPEG_DIR / cls).mkdir(parents=True)
        for i in range(PER_CLASS):
            w, h = int(rng.integers(480, 521)), int(rng.integers(355, 396))
            img = _render(rng, w, h, float(rng.uniform(3, 12)))
            img.save(JPEG_DIR / cls / f"{cls}_{i:04d}.jpg", "JPEG", quality=90)
    sizes = [p.stat().st_size for *_, p in _scan(JPEG_DIR)]
    meta = dict(want, n_images=len(sizes), bytes=sum(sizes), min_bytes=min(sizes), max_bytes=max(sizes))
    JPEG_META.write_text(json.dumps(meta, indent=1))
    return meta


def ensure_tiny() -> int:
    """bench/data/jpeg_folder_tiny/: the first 10 images of the first 2 classes; returns the count."""
    want = [(cls, p) for cls in CLASSES[:2] for p in sorted((JPEG_DIR / cls).iterdir())[:10]]
    have = _scan(TINY_DIR) if TINY_DIR.is_dir() else []
    if [(c, p.name, p.stat().st_size) for c, _, p in have] != [(c, p.name, p.stat().st_size) for c, p in want]:
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


class Skip(Exception):
    pass


def setup_tf_script(src: str, out: str, num_shards: int, size_from: str):
    """The TensorFlow script as users write it (seed 002 / seed 003), in a function."""
    import glob  # noqa: PLC0415

    import tensorflow as tf  # noqa: PLC0415
    from PIL import Image  # noqa: PLC0415

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
        return tf.train.Example(features=tf.train.Features(feature={
            "image/encoded": _bytes_feature(encoded_jpg),
            "image/format": _bytes_feature(b"jpeg"),
            "image/class/label": _int64_feature(label),
            "image/class/text": _bytes_feature(class_text.encode()),
            "image/height": _int64_feature(height),
            "image/width": _int64_feature(width),
            "image/filename": _bytes_feature(os.path.basename(image_path).encode()),
        }))

    def create_tf_example_decode(image_path, label, class_text):  # seed 003 (TF tutorial's image_example)
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

    create_tf_example = create_tf_example_pillow if size_from == "pillow" else create_tf_example_decode

    def open_sharded_output_tfrecords(exit_stack, base_path, num_shards):  # object_detection's helper
        tf_record_output_filenames = [
            "{}-{:05d}-of-{:05d}.tfrecord".format(base_path, idx, num_shards) for idx in range(num_shards)]
        return [exit_stack.enter_context(tf.io.TFRecordWriter(file_name))
                for file_name in tf_record_output_filenames]

    def run():
        classes = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
        images = [(path, label, cls) for label, cls in enumerate(classes)
                  for path in sorted(glob.glob(os.path.join(src, cls, "*.jpg")))]
        with contextlib.ExitStack() as tf_record_close_stack:
            output_tfrecords = open_sharded_output_tfrecords(tf_record_close_stack, os.path.join(out, PREFIX),
                                                             num_shards)
            for idx, (path, label, cls) in enumerate(images):
                tf_example = create_tf_example(path, label, cls)
                output_tfrecords[idx % num_shards].write(tf_example.SerializeToString())
        return len(images)

    return run, f"TensorFlow {tf.__version__}", None


def setup_tfrec_fast(src: str, out: str, num_shards: int, workers: int):
    tfr, why = C.probe_tfrec_fast()
    if tfr is None:
        raise Skip(why)
    try:
        from tfrec_fast.convert import convert_imagefolder  # noqa: PLC0415
    except ImportError as e:
        raise Skip(f"tfrec_fast.convert not importable ({e})") from None

    # ShardedWriter fsyncs each shard (and the directory) when it closes: time those calls (behaviour
    # unchanged) so that the table can say how much of a run they are.
    fsync = [0.0]
    try:
        import tfrec_fast.sharded as sharded  # noqa: PLC0415

        def timed(fn):
            def wrapper(*a, **k):
                t0 = time.perf_counter()
                try:
                    return fn(*a, **k)
                finally:
                    fsync[0] += time.perf_counter() - t0
            return wrapper

        for name in ("_fsync_file", "_fsync_directory"):
            if hasattr(sharded, name):
                setattr(sharded, name, timed(getattr(sharded, name)))
    except ImportError:
        pass

    def run():
        fsync[0] = 0.0
        s = convert_imagefolder(src, out, prefix=PREFIX, num_shards=num_shards, workers=workers)
        if s.skipped:
            raise RuntimeError(f"convert_imagefolder skipped {len(s.skipped)} images: {s.skipped[:3]}")
        return s.records

    return run, f"tfrec_fast {getattr(tfr, '__version__', '?')} from {Path(tfr.__file__).parent}", \
        lambda: {"fsync_s": fsync[0]}


def setup_probe(src: str, out: str, num_shards: int):
    def run():
        classes = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
        paths = [os.path.join(src, c, f) for c in classes for f in sorted(os.listdir(os.path.join(src, c)))]
        with open(os.path.join(out, "all.bin"), "wb") as o:
            for p in paths:
                with open(p, "rb") as f:
                    o.write(f.read())
        return len(paths)

    return run, "", None


def setup_case(case: str, src: str, out: str, num_shards: int):
    if case == "tf_pillow":
        return setup_tf_script(src, out, num_shards, "pillow")
    if case == "tf_decode":
        return setup_tf_script(src, out, num_shards, "decode")
    if case in ("tfr_w1", "tfr_w1_tiny"):
        return setup_tfrec_fast(src, out, num_shards, 1)
    if case in ("tfr_w2", "tfr_w2_tiny"):
        return setup_tfrec_fast(src, out, num_shards, 2)
    if case == "probe":
        return setup_probe(src, out, num_shards)
    raise ValueError(case)


def prepare_out(out: str) -> None:
    """Untimed, before every run: an empty output directory, the previous run's pages written back."""
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    os.sync()


# -------------------------------------------------------------------------------------- worker


def say(obj) -> None:
    sys.__stdout__.write("@@ " + json.dumps(obj) + "\n")
    sys.__stdout__.flush()


def worker_main(opts) -> int:
    """One case in this process, driven over stdin/stdout (the protocol of _worker.py)."""
    import traceback  # noqa: PLC0415

    sys.stdout = sys.stderr
    try:
        run, info, extra = setup_case(opts.worker, opts.src, opts.out, opts.num_shards)
    except Skip as e:
        say({"skip": str(e)})
        return 0
    except Exception as e:
        traceback.print_exc()
        say({"skip": f"setup failed: {type(e).__name__}: {e}"})
        return 0
    say({"ready": True, "info": info})
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "run":
            try:
                prepare_out(opts.out)
                c0, t0 = time.process_time(), time.perf_counter()
                n = run()
                dt, cpu = time.perf_counter() - t0, time.process_time() - c0
                say({"seconds": dt, "records": int(n), "cpu_s": cpu, **(extra() if extra else {})})
            except Exception as e:
                traceback.print_exc()
                say({"error": f"{type(e).__name__}: {e}"})
        elif cmd == "quit":
            break
    return 0


class Result:
    def __init__(self, case):
        self.case, self.label = case, CASES[case]
        self.info, self.times, self.records = "", [], None
        self.skip: str | None = None
        self.error: str | None = None
        self.check: str | None = None  # verification summary
        self.extra: dict = {}  # per measured run: name -> [values]

    @property
    def ok(self):
        return self.skip is None and self.error is None and bool(self.times)

    @property
    def median(self):
        return statistics.median(self.times) if self.times else None


class Worker:
    def __init__(self, case: str, src: Path, out: Path, num_shards: int):
        self.case, self.out, self.result = case, out, Result(case)
        self.log_path = C.OUT_DIR / "logs" / f"convert-{case}.log"
        self._log = open(self.log_path, "w")
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", case, "--src", str(src), "--out", str(out),
               "--num-shards", str(num_shards)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True,
                                     bufsize=1, env=C.env_for_workers(), cwd=str(C.BENCH_DIR))
        self._q: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            if line.startswith("@@ "):
                self._q.put(json.loads(line[3:]))
        self._q.put(None)

    def recv(self, timeout):
        try:
            msg = self._q.get(timeout=timeout)
        except queue.Empty:
            self.kill()
            raise RuntimeError(f"timed out after {timeout:.0f} s (log: {self.log_path})") from None
        if msg is None:
            self._log.flush()
            tail = " | ".join(x for x in self.log_path.read_text(errors="replace").splitlines()[-3:] if x.strip())
            raise RuntimeError(f"worker died (exit {self.proc.wait()}): {tail} (log: {self.log_path})")
        return msg

    def send(self, cmd):
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def close(self):
        if self.proc.poll() is None:
            try:
                self.send("quit")
                self.proc.wait(timeout=60)
            except Exception:
                self.kill()
        self._log.close()


def measure(cases, num_shards, repeats, warmup, timeout, verbose=True) -> list[Result]:
    """cases: [(case, source folder)]."""
    workers = [Worker(c, src, OUT_ROOT / c, num_shards) for c, src in cases]
    live = []
    for w in workers:
        try:
            msg = w.recv(timeout)
        except RuntimeError as e:
            w.result.skip = f"setup crashed: {e}"
            continue
        if "skip" in msg:
            w.result.skip = msg["skip"]
            w.close()
            if verbose:
                print(f"  skip {w.case}: {w.result.skip}", file=sys.stderr)
        else:
            w.result.info = msg.get("info", "")
            live.append(w)
    for r in range(warmup + repeats):
        keep = r >= warmup
        k = r % len(live) if live else 0
        for w in live[k:] + live[:k]:
            if w.result.error:
                continue
            try:
                w.send("run")
                msg = w.recv(timeout)
            except RuntimeError as e:
                w.result.error = str(e)
                w.kill()
                continue
            if "error" in msg:
                w.result.error = msg["error"]
                continue
            if w.result.records is not None and msg["records"] != w.result.records:
                w.result.error = f"record count changed between runs ({w.result.records} -> {msg['records']})"
                continue
            w.result.records = msg["records"]
            if keep:
                w.result.times.append(msg["seconds"])
                for key, value in msg.items():
                    if key not in ("seconds", "records"):
                        w.result.extra.setdefault(key, []).append(value)
            if verbose:
                print(f"  {'run ' if keep else 'warm'} {r}: {w.case:<10} {msg['seconds']:8.3f} s", file=sys.stderr)
    for w in workers:
        w.close()
    return [w.result for w in workers]


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
    got = (int(feats["image/class/label"][0]), bytes(feats["image/class/text"][0]).decode(),
           int(feats["image/width"][0]), int(feats["image/height"][0]))
    if got != (label, cls, w, h):
        return f"{base}: (label, text, width, height) = {got}, expected {(label, cls, w, h)}"
    if full and bytes(feats["image/encoded"][0]) != path.read_bytes():
        return f"{base}: image/encoded differs from the file's bytes"
    return None


def check_main(opts) -> int:
    """Run in its own process: --check tfrec_fast | tf. Prints one JSON line: dir -> report."""
    src, dirs, n_shards = Path(opts.src), [Path(d) for d in opts.dirs], opts.num_shards
    exp = _expected(src)
    out = {}
    for d in dirs:
        rep = {"errors": []}
        out[str(d)] = rep
        if not d.is_dir():
            rep["errors"].append("no output directory")
            continue
        shards, err = _shards(d, n_shards)
        if err:
            rep["errors"].append(err)
        seen: set = set()
        counts, formats, per_shard = [], set(), []
        if opts.check == "tfrec_fast":
            import tfrec_fast as tfr  # noqa: PLC0415

            for s in shards:
                counts.append(tfr.count_records(str(s)))
                per_shard.append(order := [])
                for rec in tfr.read_records(str(s)):
                    feats = tfr.parse_example(bytes(rec))
                    e = _check_record(feats, exp, seen, full=True)  # every record's bytes compared
                    if e:
                        rep["errors"].append(e)
                        break
                    formats.add(bytes(feats["image/format"][0]).decode())
                    order.append(os.path.basename(bytes(feats["image/filename"][0]).decode()))
        else:
            import tensorflow as tf  # noqa: PLC0415

            for s in shards:
                n = 0
                per_shard.append(order := [])
                for raw in tf.data.TFRecordDataset([str(s)]):
                    ex = tf.train.Example.FromString(raw.numpy())
                    f = ex.features.feature
                    feats = {k: list(v.bytes_list.value) or list(v.int64_list.value) for k, v in f.items()}
                    sample = len(seen) % 30 == 0  # every 30th record: bytes compared, JPEG decoded by TF
                    e = _check_record(feats, exp, seen, full=sample)
                    if e is None and sample:
                        shape = tf.image.decode_jpeg(feats["image/encoded"][0]).shape
                        if (shape[1], shape[0]) != (feats["image/width"][0], feats["image/height"][0]):
                            e = f"decode_jpeg shape {shape} != width/height features"
                    if e:
                        rep["errors"].append(e)
                        break
                    formats.add(bytes(feats["image/format"][0]).decode())
                    order.append(os.path.basename(bytes(feats["image/filename"][0]).decode()))
                    n += 1
                counts.append(n)
        if len(seen) != len(exp) and not rep["errors"]:
            rep["errors"].append(f"{len(seen)} distinct images written, {len(exp)} in the folder")
        # record k of the source order goes to shard k % n as its (k // n)-th record
        want = sorted(exp, key=lambda b: (exp[b][0], b))
        rr = [want[i::len(per_shard)] for i in range(len(per_shard))] if per_shard else []
        rep.update(records=sum(counts), shard_counts=counts, formats=sorted(formats), round_robin_order=per_shard == rr)
    print("@@ " + json.dumps(out))
    return 0


def run_checker(kind: str, dirs: list[Path], src: Path, num_shards: int, timeout: float) -> dict:
    log = C.OUT_DIR / "logs" / f"convert-check-{kind}.log"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--check", kind, "--src", str(src),
           "--num-shards", str(num_shards), "--dirs", *map(str, dirs)]
    with open(log, "w") as lf:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=lf, text=True, env=C.env_for_workers(),
                           cwd=str(C.BENCH_DIR), timeout=timeout)
    for line in p.stdout.splitlines():
        if line.startswith("@@ "):
            return json.loads(line[3:])
    tail = " | ".join(log.read_text(errors="replace").splitlines()[-3:])
    return {str(d): {"errors": [f"{kind} checker failed (exit {p.returncode}): {tail} (log: {log})"]} for d in dirs}


def run_cli_once(src: Path, out: Path, num_shards: int, timeout: float) -> str | None:
    """`python -m tfrec_fast convert imagefolder SRC OUT --workers 2 --num-shards N` once (untimed)."""
    prepare_out(str(out))
    cmd = [sys.executable, "-m", "tfrec_fast", "convert", "imagefolder", str(src), str(out), "--workers", "2",
           "--num-shards", str(num_shards)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=C.env_for_workers(), timeout=timeout)
    if p.returncode:
        return f"exit {p.returncode}: {(p.stderr or p.stdout).strip().splitlines()[-1:] }"
    return None


def check_outputs(results, src, meta, num_shards, timeout, n_tiny) -> list[str]:
    """Every output read back by tfrec_fast and by TensorFlow; errors go on the rows, facts in notes."""
    notes = []
    by = {r.case: r for r in results}
    dirs = [OUT_ROOT / r.case for r in results if r.ok and r.case in TF_CASES + TFR_CASES]
    cli_dir = OUT_ROOT / "cli"
    cli_err = None
    if any(by.get(c) and by[c].ok for c in TFR_CASES):
        cli_err = run_cli_once(src, cli_dir, num_shards, timeout)
        if cli_err is None:
            dirs.append(cli_dir)
        else:
            notes.append(f"**CLI `tfrec-fast convert imagefolder ... --workers 2 --num-shards {num_shards}` failed**: "
                         f"{cli_err}")
    reports = {k: run_checker(k, dirs, src, num_shards, timeout) for k in ("tfrec_fast", "tf")} if dirs else {}
    shard_counts = {}
    for d in dirs:
        name = d.name
        errs = [f"{k} read-back: {e}" for k in reports for e in reports[k].get(str(d), {}).get("errors", [])]
        tfr_rep, tf_rep = reports.get("tfrec_fast", {}).get(str(d), {}), reports.get("tf", {}).get(str(d), {})
        shard_counts[name] = tuple(tfr_rep.get("shard_counts", ()))
        if tf_rep.get("shard_counts") != tfr_rep.get("shard_counts"):
            errs.append(f"shard record counts: tfrec_fast reads {tfr_rep.get('shard_counts')}, "
                        f"TF reads {tf_rep.get('shard_counts')}")
        order = (f"record k of class-then-file order in shard k % {num_shards}" if tfr_rep.get("round_robin_order")
                 else "NOT in round-robin class-then-file order")
        summary = (f"{tfr_rep.get('records')} records in shards of {tfr_rep.get('shard_counts')}; "
                   f"image/format {tfr_rep.get('formats')}; {order}")
        if name in by:
            if errs:
                by[name].error = "; ".join(errs[:3])
            by[name].check = summary
        elif name == "cli":
            notes.append("CLI `python -m tfrec_fast convert imagefolder SRC OUT --workers 2 --num-shards "
                         f"{num_shards}` (run once, untimed): " + ("; ".join(errs[:3]) if errs else "ok, " + summary))
    ref = shard_counts.get("tf_pillow")
    for name, counts in shard_counts.items():
        if ref and counts != ref and name in by and by[name].ok:
            notes.append(f"{CASES.get(name, name)}: shards hold {list(counts)} records, the TF script's {list(ref)}")
    p = by.get("probe")
    if p and p.ok:
        size = (OUT_ROOT / "probe" / "all.bin").stat().st_size
        if size != meta["bytes"]:
            p.error = f"wrote {size} bytes, the folder holds {meta['bytes']}"
        else:
            p.check = f"{size:,} bytes = the folder's"
    for r in results:
        n = n_tiny if r.case in TINY_CASES else meta["n_images"]
        if r.ok and r.records != n:
            r.error = f"handled {r.records} images, expected {n}"
    return notes


# -------------------------------------------------------------------------------------- report


def _ratio(t, tp):
    return "—" if t is None or tp is None else f"{tp / t:.2f}x"


def machine_lines(load_before, load_after) -> list[str]:
    model = "?"
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    nproc = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip() or str(os.cpu_count())
    fmt = lambda la: ", ".join(f"{x:.2f}" for x in la)  # noqa: E731
    return [f"Machine: `nproc` = {nproc}, `lscpu` Model name: {model}; Python {platform.python_version()} "
            f"({sys.executable}); load average (1, 5, 15 min) {fmt(load_before)} before, {fmt(load_after)} after."]


def table(results, meta) -> tuple[str, list[str]]:
    t_pil = next((r.median for r in results if r.case == "tf_pillow" and r.ok), None)
    t_dec = next((r.median for r in results if r.case == "tf_decode" and r.ok), None)
    rows, notes = [], []
    for r in results:
        if r.case not in MAIN_CASES:
            continue
        if not r.ok:
            notes.append(f"{r.label}: {'skipped' if r.skip else 'FAILED'} -- {r.skip or r.error}")
            continue
        t = r.median
        cpu = statistics.median(r.extra["cpu_s"]) if r.extra.get("cpu_s") else None
        rows.append([r.label, f"{meta['n_images'] / t:,.0f}", f"{meta['bytes'] / t / 1e6:.0f}", _ratio(t, t_pil),
                     _ratio(t, t_dec), f"{t:.3f}", C.fmt_num(100 * C.spread(r.times), ".0f", "%"),
                     C.fmt_num(cpu, ".3f")])
        fsync = (f"of each run, {statistics.median(r.extra['fsync_s']):.3f} s (median) went to the fsyncs of "
                 "ShardedWriter.close (shards + directory; the TF script and the probe do not fsync)"
                 if r.extra.get("fsync_s") else "")
        extra = "; ".join(x for x in (r.info, fsync, f"output checked: {r.check}" if r.check else "") if x)
        if extra:
            notes.append(f"{r.label}: {extra}")
    headers = ["implementation", "images/s", "MB/s (JPEG bytes)", "vs TF script (Pillow)",
               "vs TF script (decode_jpeg)", "median s", "IQR/median", "CPU s of its process"]
    return C.md_table(headers, rows), notes


def tiny_table(results, n_tiny) -> tuple[str, list[str]]:
    rows, notes = [], []
    for r in results:
        if r.case not in TINY_CASES:
            continue
        if not r.ok:
            notes.append(f"{r.label}: {'skipped' if r.skip else 'FAILED'} -- {r.skip or r.error}")
            continue
        rows.append([r.label, f"{r.median:.3f}", C.fmt_num(100 * C.spread(r.times), ".0f", "%")])
    t1 = next((r.median for r in results if r.case == "tfr_w1_tiny" and r.ok), None)
    t2 = next((r.median for r in results if r.case == "tfr_w2_tiny" and r.ok), None)
    if t1 is not None and t2 is not None:
        notes.append(f"workers=2 costs {t2 - t1:.2f} s more per call than workers=1 before any image is done: the "
                     "process pool's start-up (forked worker processes when no other thread runs, else a forkserver "
                     "whose workers import tfrec_fast, numpy and Pillow), paid by every convert_imagefolder call")
    return C.md_table(["implementation", "median s per call", "IQR/median"], rows), notes


def profile_case(case, src, num_shards, out_n=30):
    import cProfile  # noqa: PLC0415
    import pstats  # noqa: PLC0415

    out = OUT_ROOT / f"profile-{case}"
    run, info, _ = setup_case(case, str(src), str(out), num_shards)
    prepare_out(str(out))
    run()  # warm-up
    prepare_out(str(out))
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    run()
    prof.disable()
    print(f"== {case} ({info}): {time.perf_counter() - t0:.3f} s under cProfile", file=sys.stderr)
    pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(out_n)
    shutil.rmtree(out, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5, help="measured runs per case (median shown)")
    ap.add_argument("--warmup", type=int, default=1, help="unmeasured runs per case first")
    ap.add_argument("--cases", help=f"comma list of {', '.join(CASES)} (default: all)")
    ap.add_argument("--num-shards", type=int, default=NUM_SHARDS)
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds allowed per single run")
    ap.add_argument("--keep-output", action="store_true", help=f"leave the outputs in {OUT_ROOT}")
    ap.add_argument("--markdown", help="also write the table to this Markdown file")
    ap.add_argument("--json", help="also write the raw timings to this JSON file")
    ap.add_argument("--profile", metavar="CASE", help="cProfile one run of CASE in this process, then exit")
    ap.add_argument("-q", "--quiet", action="store_true")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--check", choices=["tfrec_fast", "tf"], help=argparse.SUPPRESS)
    ap.add_argument("--src", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--dirs", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker_main(args)
    if args.check:
        return check_main(args)

    C.ensure_dirs()
    meta = ensure_jpegs(args.quiet)
    if args.profile:
        warm_folder()
        profile_case(args.profile, JPEG_DIR, args.num_shards)
        return 0
    n_tiny = ensure_tiny()
    cases = [(c, TINY_DIR if c in TINY_CASES else JPEG_DIR) for c in CASES
             if not args.cases or c in args.cases.split(",")]
    pythonpath = os.environ.get("PYTHONPATH")
    cmdline = (f"{'PYTHONPATH=' + pythonpath + ' ' if pythonpath else ''}{sys.executable} bench/bench_convert.py"
               + "".join(f" {a}" for a in (argv if argv is not None else sys.argv[1:])))
    load_before = os.getloadavg()
    t_warm = warm_folder()
    if not args.quiet:
        print(f"== convert: {meta['n_images']} JPEGs ({meta['bytes'] / 1e6:.1f} MB), folder read once in "
              f"{t_warm:.2f} s", file=sys.stderr)
    t0 = time.time()
    results = measure(cases, args.num_shards, args.repeats, args.warmup, args.timeout, not args.quiet)
    load_after = os.getloadavg()
    check_notes = check_outputs(results, JPEG_DIR, meta, args.num_shards, args.timeout, n_tiny)
    if not args.keep_output:
        shutil.rmtree(OUT_ROOT, ignore_errors=True)
    tbl, notes = table(results, meta)
    tiny_tbl, tiny_notes = tiny_table(results, n_tiny)
    head = [
        f"- Command: `{cmdline}` (from the repository root); "
        f"date {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}; "
        f"{time.time() - t0:.0f} s wall.",
        "- " + machine_lines(load_before, load_after)[0],
        f"- Data: {meta['n_images']:,} JPEGs in {len(meta['classes'])} class sub-directories of "
        "bench/data/jpeg_folder/ "
        f"(made by this script: 480..520 x 355..395 px, Pillow quality 90), {meta['bytes'] / 1e6:.1f} MB, "
        f"{meta['min_bytes'] / 1e3:.0f}..{meta['max_bytes'] / 1e3:.0f} KB, mean "
        f"{meta['bytes'] / meta['n_images'] / 1e3:.0f} KB. Output: {args.num_shards} shards "
        f"`{PREFIX}-0000i-of-{args.num_shards:05d}.tfrecord`, seven features per Example.",
        f"- Median of {args.repeats} runs after {args.warmup} warm-up, each case in its own process, rounds "
        "round-robin with a rotating start. **Warm page cache**: caches cannot be dropped here, so the folder "
        f"was read once ({t_warm:.2f} s) before the first run and every run reads it from memory. Untimed "
        "before every run: the output directory emptied and `os.sync()`. Timed: listing the folder .. last shard "
        "closed (the TF script and the probe leave their data in the page cache; convert_imagefolder fsyncs its "
        "shards, see the notes). Ratios: how many times faster than that TF script row (>1 = faster). MB/s counts the "
        "source JPEG bytes. 'CPU s of its process': median user+sys time of the case's own process (all its "
        "threads) during a run; for workers=2 the pool's worker processes come on top.",
    ]
    notes = notes + check_notes + [
        "Verification (untimed, after the runs, in two separate processes): tfrec_fast reads every output "
        "(TF's and its own: record and per-shard counts, all seven features of every record against the source "
        "folder, image/encoded byte-identical to the file for every record); TensorFlow reads every output "
        "(tf.data.TFRecordDataset + tf.train.Example.FromString: counts, features, image/encoded bytes and "
        "tf.image.decode_jpeg shape vs height/width for every 30th record)."]
    text = "\n".join(head) + "\n\n" + tbl + "\n\n" + "\n".join(f"- {x}" for x in notes) + "\n"
    if tiny_tbl.count("\n") > 1 or tiny_notes:
        text += (f"\nFixed cost of one call: the same converter on a {n_tiny}-image folder (2 classes x 10 of the "
                 "images above, bench/data/jpeg_folder_tiny/), measured in the same rounds:\n\n" + tiny_tbl + "\n\n"
                 + "".join(f"- {x}\n" for x in tiny_notes))
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text)
    if args.json:
        Path(args.json).write_text(json.dumps({r.case: vars(r) for r in results}, indent=1, default=str))
    return 0  # failed rows are in the table; a non-zero exit would make run_all.sh drop it


if __name__ == "__main__":
    sys.exit(main())
