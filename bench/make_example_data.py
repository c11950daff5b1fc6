#!/usr/bin/env python3
"""Generate the tf.train.Example data sets of bench_example.py into bench/data/ (git-ignored).

  mnist     60,000 records: index int64, label int64 (0..9), image_raw 784 random bytes
  tutorial 100,000 records: the four-feature record of TensorFlow's TFRecord tutorial
            (feature0 int64 0/1, feature1 int64 0..4, feature2 bytes from 5 animal names, feature3 float)
  voc       20,000 records: Pascal-VOC-like detection records: image/encoded (2..6 KB random bytes),
            image/height, image/width int64, image/object/bbox/{xmin,ymin,xmax,ymax} float lists,
            image/object/class/label int64 list, image/object/class/text bytes list, 0..6 objects per
            record (zero-object records hold empty lists, as TF's create_pascal_tf_record.py writes)

Every value comes from a seeded numpy generator (the functions below are also used by the
encoding cases, which must see the same rows). Written with tfrec_fast.encode_examples +
TFRecordWriter.write_batch; when tfrec_fast is not importable, with the `tfrecord` package's
protobuf classes (SerializeToString(deterministic=True)) and the pure-Python framer of _common.
A JSON sidecar next to each file records what was made; a file with a matching sidecar is kept
unless --force.

Only numpy and the standard library are imported at module level (workers import this module).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import _common as C
import numpy as np

EXAMPLE_DATASETS = {
    "mnist": {
        "file": "ex_mnist.tfrecord",
        "n_records": 60_000,
        "seed": 11,
        "label": "MNIST-like: index, label, 784-byte image_raw",
    },
    "tutorial": {
        "file": "ex_tutorial.tfrecord",
        "n_records": 100_000,
        "seed": 12,
        "label": "TF tutorial record: 3 int64/bytes scalars + 1 float",
    },
    "voc": {
        "file": "ex_voc.tfrecord",
        "n_records": 20_000,
        "seed": 13,
        "label": "VOC-like: 2..6 KB image bytes, 0..6 objects (VarLen boxes/labels/texts)",
    },
}
# data set -> {feature: (layout, kind)}: layout "fixed" (one value per record) or "var" (any number)
EXAMPLE_SPECS = {
    "mnist": {
        "index": ("fixed", "int64"),
        "label": ("fixed", "int64"),
        "image_raw": ("fixed", "bytes"),
    },
    "tutorial": {
        "feature0": ("fixed", "int64"),
        "feature1": ("fixed", "int64"),
        "feature2": ("fixed", "bytes"),
        "feature3": ("fixed", "float"),
    },
    "voc": {
        "image/encoded": ("fixed", "bytes"),
        "image/height": ("fixed", "int64"),
        "image/width": ("fixed", "int64"),
        **{f"image/object/bbox/{c}": ("var", "float") for c in ("xmin", "ymin", "xmax", "ymax")},
        "image/object/class/label": ("var", "int64"),
        "image/object/class/text": ("var", "bytes"),
    },
}
ANIMALS = [b"cat", b"dog", b"chicken", b"horse", b"goat"]
VOC_CLASSES = [
    b"aeroplane",
    b"bicycle",
    b"bird",
    b"boat",
    b"bottle",
    b"bus",
    b"car",
    b"cat",
    b"chair",
    b"cow",
    b"diningtable",
    b"dog",
    b"horse",
    b"motorbike",
    b"person",
    b"pottedplant",
    b"sheep",
    b"sofa",
    b"train",
    b"tvmonitor",
]
VOC_BOX = ["xmin", "ymin", "xmax", "ymax"]


def tfrec_fast_spec(name: str) -> dict:
    """EXAMPLE_SPECS[name] as tfrec_fast FixedLen/VarLen features (imports tfrec_fast)."""
    from tfrec_fast.example import FixedLen, VarLen

    return {
        k: (FixedLen((), kind) if layout == "fixed" else VarLen(kind))
        for k, (layout, kind) in EXAMPLE_SPECS[name].items()
    }


def example_path(name: str):
    return C.DATA_DIR / EXAMPLE_DATASETS[name]["file"]


def example_meta(name: str) -> dict | None:
    """The sidecar of a data set, or None when the file is missing or stale."""
    p = example_path(name)
    m = p.with_name(p.name + ".json")
    if not p.exists() or not m.exists():
        return None
    meta = json.loads(m.read_text())
    return meta if meta.get("file_bytes") == p.stat().st_size else None


def dataset_of(path) -> str:
    """The data set name of a data file path (by file name)."""
    base = os.path.basename(str(path))
    for name, spec in EXAMPLE_DATASETS.items():
        if spec["file"] == base:
            return name
    raise ValueError(f"{path} is not one of the Example data sets")


# ---- the rows (columns of python/numpy values); the same for every writer and for encoding ----


def mnist_columns(n: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "index": np.arange(n, dtype=np.int64),
        "label": rng.integers(0, 10, size=n, dtype=np.int64),
        "image_raw": rng.integers(
            0, 256, size=(n, 784), dtype=np.uint8
        ),  # one 784-byte value per row
    }


def mnist_rows(n: int, seed: int) -> list[tuple[int, int, bytes]]:
    """(index, label, image_raw bytes) per row: the per-row input of the encoding cases."""
    c = mnist_columns(n, seed)
    img = c["image_raw"]
    return [
        (i, lab, img[k].tobytes())
        for k, (i, lab) in enumerate(zip(c["index"].tolist(), c["label"].tolist()))
    ]


def tutorial_columns(n: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "feature0": rng.integers(0, 2, size=n, dtype=np.int64),
        "feature1": rng.integers(0, 5, size=n, dtype=np.int64),
        "feature2": [ANIMALS[k] for k in rng.integers(0, 5, size=n).tolist()],
        "feature3": rng.standard_normal(n).astype(np.float32),
    }


def voc_columns(n: int, seed: int) -> dict:
    """Lists of per-row lists for the VarLen features (empty for zero-object rows)."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2000, 6001, size=n)
    blob = rng.bytes(int(sizes.sum()))
    ends = np.cumsum(sizes)
    nobj = rng.integers(0, 7, size=n)  # 0..6, ~1/7 of the records have no object
    cols: dict = {
        "image/encoded": [blob[e - s : e] for s, e in zip(sizes.tolist(), ends.tolist())],
        "image/height": rng.integers(200, 501, size=n, dtype=np.int64),
        "image/width": rng.integers(200, 501, size=n, dtype=np.int64),
    }
    total = int(nobj.sum())
    x = np.sort(rng.random((total, 2), dtype=np.float32), axis=1)
    y = np.sort(rng.random((total, 2), dtype=np.float32), axis=1)
    labels = rng.integers(1, 21, size=total)
    splits = np.concatenate([[0], np.cumsum(nobj)]).tolist()
    rows = lambda a: [a[s:e].tolist() for s, e in zip(splits[:-1], splits[1:])]  # noqa: E731
    cols["image/object/bbox/xmin"] = rows(x[:, 0])
    cols["image/object/bbox/ymin"] = rows(y[:, 0])
    cols["image/object/bbox/xmax"] = rows(x[:, 1])
    cols["image/object/bbox/ymax"] = rows(y[:, 1])
    cols["image/object/class/label"] = rows(labels)
    cols["image/object/class/text"] = [[VOC_CLASSES[k - 1] for k in r] for r in rows(labels)]
    return cols


COLUMNS = {"mnist": mnist_columns, "tutorial": tutorial_columns, "voc": voc_columns}
INT_FEATURES = {
    "index",
    "label",
    "feature0",
    "feature1",
    "image/height",
    "image/width",
    "image/object/class/label",
}


def _kind(name: str) -> str:
    if name in INT_FEATURES:
        return "int64"
    if name.startswith("image/object/bbox/") or name == "feature3":
        return "float"
    return "bytes"


# ---- writers -----------------------------------------------------------------------------------


def write_tfrec_fast(path, cols: dict, n: int, tfr) -> None:
    from tfrec_fast.encode import Bytes, Floats, Int64s

    wrap = {"int64": Int64s, "float": Floats, "bytes": Bytes}
    chunk = 4096
    with tfr.TFRecordWriter(str(path)) as w:
        for a in range(0, n, chunk):
            # forced kinds: the VarLen columns hold empty rows, and image_raw is uint8 raw bytes
            batch = {k: wrap[_kind(k)](v[a : a + chunk]) for k, v in cols.items()}
            w.write_batch(tfr.encode_examples(batch))


def write_temp(opts) -> dict:
    """For harness.call (in a process of its own): data set ``opts.dataset`` with ``opts.records``
    rows (0: its default count) written with tfrec_fast into the folder ``opts.dir``; what was
    made, as {"file", "n_records", "file_bytes", "label", "tfrec_fast"} (its version)."""
    tfr = C.harness.need("tfrec_fast")
    spec = EXAMPLE_DATASETS[opts.dataset]
    n = opts.records or spec["n_records"]
    path = os.path.join(opts.dir, spec["file"])
    write_tfrec_fast(path, COLUMNS[opts.dataset](n, spec["seed"]), n, tfr)
    return {
        "file": path,
        "n_records": n,
        "file_bytes": os.path.getsize(path),
        "label": spec["label"],
        "tfrec_fast": tfr.__version__,
    }


def write_python(path, cols: dict, n: int) -> None:
    import crc32c
    from tfrecord import example_pb2 as pb

    def feature(kind, v):
        if kind == "int64":
            return pb.Feature(int64_list=pb.Int64List(value=v))
        if kind == "float":
            return pb.Feature(float_list=pb.FloatList(value=v))
        return pb.Feature(bytes_list=pb.BytesList(value=v))

    names = list(cols)
    with open(path, "wb") as f:
        for i in range(n):
            feats = {}
            for k in names:
                v = cols[k][i]
                if isinstance(v, np.ndarray):  # image_raw row
                    v = [v.tobytes()]
                elif isinstance(v, np.generic):
                    v = [v.item()]
                elif not isinstance(v, list):
                    v = [v]
                feats[k] = feature(_kind(k), v)
            ex = pb.Example(features=pb.Features(feature=feats))
            f.write(C.frame_record(ex.SerializeToString(deterministic=True), crc32c.crc32c))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--which", default=",".join(EXAMPLE_DATASETS), help="comma list: mnist, tutorial, voc"
    )
    C.add_writer_arguments(ap)
    ap.add_argument(
        "--records", type=int, help="override every data set's record count (quick tests)"
    )
    args = ap.parse_args(argv)

    tfr, why = C.data_writer(args)
    for name in [w.strip() for w in args.which.split(",") if w.strip()]:
        spec = dict(EXAMPLE_DATASETS[name], **({"n_records": args.records} if args.records else {}))
        path, meta = example_path(name), example_meta(name)
        wanted = {k: spec[k] for k in ("n_records", "seed")}
        if meta and not args.force and all(meta.get(k) == v for k, v in wanted.items()):
            print(
                f"{path}: exists ({meta['n_records']} records, {meta['file_bytes'] / 1e6:.1f} MB), kept"
            )
            continue
        t0 = time.perf_counter()
        cols = COLUMNS[name](spec["n_records"], spec["seed"])
        tmp = path.with_name(path.name + ".tmp")
        if tfr is not None:
            writer = "tfrec_fast"
            write_tfrec_fast(tmp, cols, spec["n_records"], tfr)
        else:
            writer = "tfrecord.example_pb2 + python framer"
            write_python(tmp, cols, spec["n_records"])
        os.replace(tmp, path)
        meta = dict(
            wanted, dataset=name, file_bytes=path.stat().st_size, writer=writer, label=spec["label"]
        )
        path.with_name(path.name + ".json").write_text(json.dumps(meta, indent=1) + "\n")
        print(
            f"{path}: {spec['n_records']} records, {meta['file_bytes'] / 1e6:.1f} MB, writer={writer}, "
            f"{time.perf_counter() - t0:.1f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
