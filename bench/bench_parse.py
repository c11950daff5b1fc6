#!/usr/bin/env python3
"""Parsing at memory speed (issue #39): read + parse of four record shapes on one core, against
Parquet (snappy, pyarrow.parquet.read_table with 1 thread) and the `tfrecord` package, with the
breakdown of where the time goes, all measured in the same run on the project's harness
(bench/harness.py; every row a case in its own process, page cache warm).

    python bench/bench_parse.py --make-data       # bench/data/parse/ (seeded, ~1.2 GB with Parquet;
                                                  # --scale 0.05 for a quick run)
    python bench/bench_parse.py [--shapes mnist,small4,voc,jpeg] [--repeats 5] [--processes 3]
                                [--markdown out.md] [--json out.json]

Shapes (records x bytes each, TFRecord framing included):
  mnist    200,000 x ~860 B    index, label, a 784-byte image_raw
  small4 1,000,000 x ~100 B    TensorFlow's tutorial record: two small ints, a word, a float
  voc       50,000 x ~2.4 KB   VOC-like: 1..3.6 KB image bytes, height, width, 0..6 objects
                               (VarLen xmin/ymin/xmax/ymax floats, class labels and texts)
  jpeg       4,000 x ~110 KB   one JPEG-sized bytes feature and a label

Rows of each shape's table (one core each):
  read          the file into a reused 1 MiB buffer (readinto): what the OS copy costs
  frame_crc     TFRecordReader.iter_batches(num_threads=1): read, frame, both CRCs (512 KiB batches)
  decode        _core.decode_examples on the file's 1024-record RecordBatches, in memory: the C++
                decoder alone (raw arrays)
  parse         parse_examples on the same batches: decode and the hand-over (columns, dict)
  batched       read_batches(max_records=1024, num_threads=1) + parse_examples: read + parse
                (targets: >= 3 GB/s of file bytes; >= Parquet's rows/s)
  read_examples read_examples(path, spec, num_threads=1): the same through the entry point
  default       read_examples(path, spec), every argument its default (target: >= 0.8x batched)
  parquet       pyarrow.parquet.read_table of the same columns written with snappy, use_threads=False
  tfrecord      the `tfrecord` package's tfrecord_loader (reading and per-record protobuf parsing)
The breakdown: read -> frame_crc is the framing and the CRCs; decode is the decoder; parse -
decode the hand-over; batched - frame_crc - parse what joining them costs.

The jpeg shape also gets a fresh-process table: each sample a new process, one pass over the file
as a job's first epoch sees it (no warm-up; its buffers not yet in the process): read_examples
against the raw batched read (target >= 0.9x) and the `tfrecord` package (target >= 2x).

Every case hands over all the records (checked); the tfrec_fast rows' first integer column is
compared with the generator's after the warm-up.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import _common as C
from _common import harness as H

DATA = C.DATA_DIR / "parse"
SHAPES = {
    "mnist": {"records": 200_000, "label": "MNIST-like: index, label, 784-byte image_raw"},
    "small4": {"records": 1_000_000, "label": "4 small features (TF tutorial record)"},
    "voc": {"records": 50_000, "label": "VOC-like: image bytes, size, 0..6 objects (VarLen)"},
    "jpeg": {"records": 4_000, "label": "110 KB JPEG-sized bytes feature + label"},
}
TARGET_GBPS = 3.0
BATCH = 1024
WORDS = [b"cat", b"dog", b"chicken", b"horse", b"goat"]
VOC_CLASSES = [b"person", b"car", b"dog", b"bicycle", b"chair", b"bottle"]


def path_of(shape: str, suffix: str = ".tfrecord") -> Path:
    return DATA / f"{shape}{suffix}"


# ---- data ----------------------------------------------------------------------------------------


def columns_of(shape: str, n: int, seed: int = 39) -> dict:
    """The shape's n rows as columns (numpy arrays and lists), from one seeded generator."""
    import numpy as np

    rng = np.random.default_rng(seed)
    if shape == "mnist":
        return {
            "index": np.arange(n, dtype=np.int64),
            "label": rng.integers(0, 10, n),
            "image_raw": rng.integers(0, 256, (n, 784), dtype=np.uint8),
        }
    if shape == "small4":
        return {
            "feature0": rng.integers(0, 2, n),
            "feature1": rng.integers(0, 5, n),
            "feature2": [WORDS[i] for i in rng.integers(0, 5, n)],
            "feature3": rng.standard_normal(n).astype(np.float32),
        }
    if shape == "voc":
        objects = rng.integers(0, 7, n)
        box = lambda: [rng.random(k).astype(np.float32) for k in objects]  # noqa: E731
        # (images: distinct random bytes, as compressed images are to Parquet's snappy)
        return {
            "image/encoded": [rng.bytes(int(s)) for s in rng.integers(1000, 3600, n)],
            "image/height": rng.integers(200, 500, n),
            "image/width": rng.integers(200, 500, n),
            "image/object/bbox/xmin": box(),
            "image/object/bbox/ymin": box(),
            "image/object/bbox/xmax": box(),
            "image/object/bbox/ymax": box(),
            "image/object/class/label": [rng.integers(0, 20, k) for k in objects],
            "image/object/class/text": [[VOC_CLASSES[j % 6] for j in range(k)] for k in objects],
        }
    return {"image_raw": [rng.bytes(110_000) for _ in range(n)], "label": np.arange(n) % 10}


def spec_of(tfr, shape: str) -> dict:
    if shape == "mnist":
        return {
            "index": tfr.FixedLen((), "int64"),
            "label": tfr.FixedLen((), "int64"),
            "image_raw": tfr.FixedLen((), "bytes"),
        }
    if shape == "small4":
        return {
            "feature0": tfr.FixedLen((), "int64"),
            "feature1": tfr.FixedLen((), "int64"),
            "feature2": tfr.FixedLen((), "bytes"),
            "feature3": tfr.FixedLen((), "float32"),
        }
    if shape == "voc":
        return {
            "image/encoded": tfr.FixedLen((), "bytes"),
            "image/height": tfr.FixedLen((), "int64"),
            "image/width": tfr.FixedLen((), "int64"),
            **{
                f"image/object/bbox/{c}": tfr.VarLen("float32")
                for c in ("xmin", "ymin", "xmax", "ymax")
            },
            "image/object/class/label": tfr.VarLen("int64"),
            "image/object/class/text": tfr.VarLen("bytes"),
        }
    return {"image_raw": tfr.FixedLen((), "bytes"), "label": tfr.FixedLen((), "int64")}


def description_of(shape: str) -> dict:
    """The `tfrecord` package's description of the same features."""
    kinds = {
        "mnist": ["int", "int", "byte"],
        "small4": ["int", "int", "byte", "float"],
        "voc": ["byte", "int", "int", "float", "float", "float", "float", "int", "byte"],
        "jpeg": ["byte", "int"],
    }[shape]
    return dict(zip(columns_of(shape, 1), kinds))


CHECK_KEY = {"mnist": "index", "small4": "feature1", "voc": "image/height", "jpeg": "label"}


def records_in(shape: str) -> int:
    """The records --make-data wrote for a shape (its sidecar), or 0 when its files are missing."""
    sidecar = path_of(shape, ".json")
    if not (sidecar.exists() and path_of(shape).exists() and path_of(shape, ".parquet").exists()):
        return 0
    return int(json.loads(sidecar.read_text())["records"])


def make_data(shapes, scale: float) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    import tfrec_fast as tfr

    DATA.mkdir(parents=True, exist_ok=True)
    wrap = {"int": tfr.Int64s, "float": tfr.Floats, "byte": tfr.Bytes}
    for shape in shapes:
        n = max(1, int(SHAPES[shape]["records"] * scale))
        cols = columns_of(shape, n)
        kinds = description_of(shape)
        with tfr.TFRecordWriter(str(path_of(shape))) as w:
            for a in range(0, n, 8192):  # (kinds forced: a VarLen column's rows may all be empty)
                w.write_batch(
                    tfr.encode_examples(
                        {k: wrap[kinds[k]](v[a : a + 8192]) for k, v in cols.items()}
                    )
                )
        arrays = {}
        for k, v in cols.items():
            if isinstance(v, np.ndarray) and v.ndim == 2:
                arrays[k] = pa.array([row.tobytes() for row in v], pa.binary())
            elif isinstance(v, np.ndarray):
                arrays[k] = pa.array(v)
            else:
                arrays[k] = pa.array(
                    [list(x) if isinstance(x, (list, np.ndarray)) else x for x in v]
                )
        pq.write_table(pa.table(arrays), str(path_of(shape, ".parquet")), compression="snappy")
        first = [int(v) for v in cols[CHECK_KEY[shape]][:BATCH]]  # what the checks compare with
        path_of(shape, ".json").write_text(
            json.dumps({"records": n, "seed": 39, "first": first}) + "\n"
        )
        size = path_of(shape).stat().st_size
        print(
            f"{path_of(shape)}: {n:,} records, {size / 1e6:.1f} MB ({size / n:.0f} B each); "
            f"Parquet {path_of(shape, '.parquet').stat().st_size / 1e6:.1f} MB",
            file=sys.stderr,
        )


# ---- cases ---------------------------------------------------------------------------------------


def _setup(opts):
    tfr = H.need("tfrec_fast")
    return tfr, spec_of(tfr, opts.shape), str(path_of(opts.shape))


def _check(opts, tfr, first_batch):
    """check(): the first batch's check column against what --make-data wrote (its sidecar)."""
    import numpy as np

    def check():
        got = np.asarray(first_batch()[CHECK_KEY[opts.shape]]).reshape(-1)
        want = json.loads(path_of(opts.shape, ".json").read_text())["first"][: len(got)]
        return (
            None
            if got.tolist() == want
            else f"{opts.shape}: column {CHECK_KEY[opts.shape]} differs"
        )

    return check


def _batches(tfr, path):
    with tfr.TFRecordReader(path) as r:
        return list(r.iter_batches(max_records=BATCH, num_threads=1))


def case_read(opts):
    path = str(path_of(opts.shape))
    n = records_in(opts.shape)

    def run():
        buf = bytearray(1 << 20)
        with open(path, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass
        return n

    return H.Body(run, info="readinto a reused 1 MiB buffer (no framing): the OS copy")


def case_frame_crc(opts):
    tfr, _, path = _setup(opts)

    def run():
        with tfr.TFRecordReader(path) as r:
            return sum(len(b) for b in r.iter_batches(num_threads=1))

    return H.Body(run, info="TFRecordReader.iter_batches(num_threads=1): read, frame, both CRCs")


def case_decode(opts):
    tfr, spec, path = _setup(opts)
    from tfrec_fast import _core
    from tfrec_fast.example import _compile, normalize_spec

    fields = _core.FieldSpecs(_compile(normalize_spec(spec)))
    batches = _batches(tfr, path)

    def run():
        for b in batches:
            _core.decode_examples(b, fields, "", False, 1, False, None)
        return sum(map(len, batches))

    return H.Body(
        run,
        info=f"_core.decode_examples(RecordBatch of {BATCH}, num_threads=1): the C++ decoder "
        "and its raw arrays, records in memory",
    )


def case_parse(opts):
    tfr, spec, path = _setup(opts)
    batches = _batches(tfr, path)

    def run():
        for b in batches:
            tfr.parse_examples(b, spec, num_threads=1)
        return sum(map(len, batches))

    return H.Body(
        run,
        check=_check(opts, tfr, lambda: tfr.parse_examples(batches[0], spec)),
        info=f"parse_examples(RecordBatch of {BATCH}, spec, num_threads=1), records in memory",
    )


def case_batched(opts):
    tfr, spec, path = _setup(opts)

    def batches():
        return tfr.read_batches(path, max_records=BATCH, num_threads=1)

    def run():
        return sum(
            len(tfr.parse_examples(b, spec, num_threads=1)[CHECK_KEY[opts.shape]])
            for b in batches()
        )

    return H.Body(
        run,
        check=_check(opts, tfr, lambda: tfr.parse_examples(next(iter(batches())), spec)),
        info=f"read_batches(max_records={BATCH}, num_threads=1) + parse_examples(num_threads=1)",
    )


def case_read_examples(opts):
    tfr, spec, path = _setup(opts)
    key = CHECK_KEY[opts.shape]

    def run():
        return sum(len(c[key]) for c in tfr.read_examples(path, spec, num_threads=1))

    return H.Body(
        run,
        check=_check(opts, tfr, lambda: next(iter(tfr.read_examples(path, spec, num_threads=1)))),
        info="read_examples(path, spec, num_threads=1)",
    )


def case_default(opts):
    tfr, spec, path = _setup(opts)
    key = CHECK_KEY[opts.shape]

    def run():
        return sum(len(c[key]) for c in tfr.read_examples(path, spec))

    return H.Body(
        run,
        check=_check(opts, tfr, lambda: next(iter(tfr.read_examples(path, spec)))),
        info="read_examples(path, spec), every argument its default",
    )


def case_parquet(opts):
    pq = H.need("pyarrow.parquet")
    path = str(path_of(opts.shape, ".parquet"))
    return H.Body(
        lambda: pq.read_table(path, use_threads=False).num_rows,
        info="pyarrow.parquet.read_table(use_threads=False) of the same columns, snappy",
    )


def case_tfrecord(opts):
    tfrecord_loader = H.need("tfrecord.reader").tfrecord_loader
    path, description = str(path_of(opts.shape)), description_of(opts.shape)

    def run():
        return sum(1 for _ in tfrecord_loader(path, None, description))

    return H.Body(
        run, info="tfrecord.reader.tfrecord_loader(path, None, description): reading + protobuf"
    )


CASES = [
    H.Case("read", "read (readinto, no framing)", case_read),
    H.Case("frame_crc", "read + frame + CRC (iter_batches)", case_frame_crc),
    H.Case("decode", "decode only (_core.decode_examples, in memory)", case_decode),
    H.Case("parse", "parse_examples (in memory: decode + hand-over)", case_parse),
    H.Case("batched", "read + parse, batched (read_batches + parse_examples)", case_batched),
    H.Case("read_examples", "read_examples(num_threads=1)", case_read_examples),
    H.Case("default", "read_examples(path, spec), defaults", case_default),
    H.Case("parquet", "Parquet snappy, pyarrow read_table 1 thread (peer)", case_parquet),
    H.Case("tfrecord", "tfrecord package tfrecord_loader (peer)", case_tfrecord),
]
FRESH = [
    H.Case("read_examples", "read_examples(path, spec), defaults, fresh process", case_default),
    H.Case("frame_crc", "raw batched read (iter_batches), fresh process", case_frame_crc),
    H.Case("tfrecord", "tfrecord package tfrecord_loader, fresh process (peer)", case_tfrecord),
]


def columns(n: int, nbytes: int):
    return [
        H.per_second("records/s", n),
        H.per_second("GB/s", nbytes / 1e9, ".2f"),
        H.Versus(
            "vs Parquet 1 thread",
            "parquet",
            target=1.0,
            mine=lambda r: r.name in ("batched", "read_examples"),
        ),
        H.Versus("vs batched", "batched", target=0.8, mine=lambda r: r.name == "default"),
        H.Versus("vs tfrecord", "tfrecord"),
        *H.timing(".4f"),
    ]


def fresh_columns(n: int, nbytes: int):
    return [
        H.per_second("records/s", n),
        H.per_second("GB/s", nbytes / 1e9, ".2f"),
        H.Versus(
            "vs raw batched read", "frame_crc", target=0.9, mine=lambda r: r.name == "read_examples"
        ),
        H.Versus("vs tfrecord", "tfrecord", target=2.0, mine=lambda r: r.name == "read_examples"),
        *H.timing(".4f"),
    ]


def breakdown(results, n: int, nbytes: int) -> list:
    """Notes: ns per record of each step, from the rows' medians."""
    t = {r.name: r.median for r in results if r.ok}
    if not all(k in t for k in ("read", "frame_crc", "decode", "parse", "batched")):
        return []
    ns = lambda s: f"{s * 1e9 / n:.1f} ns/record"  # noqa: E731
    return [
        f"breakdown: read {ns(t['read'])}; framing + CRC {ns(t['frame_crc'] - t['read'])}; "
        f"decode {ns(t['decode'])}; hand-over {ns(t['parse'] - t['decode'])}; joining read and parse "
        f"{ns(t['batched'] - t['frame_crc'] - t['parse'])} (batched: {ns(t['batched'])}, "
        f"{nbytes / t['batched'] / 1e9:.2f} GB/s)"
    ]


def gbps_targets(results, shape: str, nbytes: int) -> list:
    lines = []
    for r in results:
        if r.ok and r.name in ("batched", "read_examples"):
            g = nbytes / r.median / 1e9
            lines.append(
                f"parse {shape}, {r.label}: {g:.2f} GB/s (target {TARGET_GBPS:g} GB/s: "
                f"{'met' if g >= TARGET_GBPS else 'MISSED'})"
            )
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    H.add_arguments(ap, repeats=5, min_time=0.5)
    ap.add_argument("--shapes", default=",".join(SHAPES), help="comma list: " + ", ".join(SHAPES))
    ap.add_argument("--make-data", action="store_true", help="write bench/data/parse/ and exit")
    ap.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="--make-data: this fraction of the records (quick runs)",
    )
    ap.add_argument(
        "--fresh-processes",
        type=int,
        default=5,
        help="jpeg's fresh-process table: how many new processes (one sample each)",
    )
    args = ap.parse_args(argv)
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    if args.make_data:
        make_data(shapes, args.scale)
        return 0
    for shape in shapes:
        if not records_in(shape):
            print(
                f"error: {path_of(shape)} missing: run bench/bench_parse.py --make-data first",
                file=sys.stderr,
            )
            return 2
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    md = [
        C.header(
            args,
            "One core per row (num_threads=1 where there is a choice). GB/s counts the "
            "TFRecord file's bytes; Parquet reads its own (smaller) file of the same columns. "
            "✅/❌: issue #39's targets.",
        )
    ]
    raw, summary = {}, []
    for shape in shapes:
        n, nbytes = records_in(shape), path_of(shape).stat().st_size
        print(f"== parse {shape}", file=sys.stderr)
        res = H.measure(
            H.select(CASES, args.cases),
            {"shape": shape},
            log_dir=C.log_dir(f"parse-{shape}"),
            **H.timing_options(args),
        )
        H.expect_records(res, n)
        cols = columns(n, nbytes)
        text, notes = H.table(res, cols)
        title = (
            f"{SHAPES[shape]['label']} ({n:,} records, {nbytes / 1e6:.1f} MB, "
            f"{nbytes / n:.0f} B a record)"
        )
        md.append(H.section(title, text, breakdown(res, n, nbytes) + notes))
        summary += H.targets(res, cols, f"parse {shape}") + gbps_targets(res, shape, nbytes)
        raw[shape] = H.raw(res)
        if shape == "jpeg" and args.fresh_processes > 0:
            print("== parse jpeg, fresh processes", file=sys.stderr)
            res = H.measure(
                H.select(FRESH, args.cases),
                {"shape": shape},
                repeats=1,
                warmup=0,
                min_time=0,
                timeout=args.timeout,
                verbose=not args.quiet,
                processes=args.fresh_processes,
                log_dir=C.log_dir("parse-jpeg-fresh"),
            )
            H.expect_records(res, n)
            cols = fresh_columns(n, nbytes)
            text, notes = H.table(res, cols)
            md.append(
                H.section(
                    f"{SHAPES[shape]['label']}: one pass in a fresh process (median of "
                    f"{args.fresh_processes} processes, no warm-up)",
                    text,
                    notes,
                )
            )
            summary += H.targets(res, cols, "fresh jpeg")
            raw["jpeg_fresh"] = H.raw(res)
    return H.emit(md, raw, args.markdown, args.json, summary)


if __name__ == "__main__":
    sys.exit(main())
