#!/usr/bin/env python3
"""Grain (JAX) data sources on the same records: tfrec_fast.grain.TFRecordDataSource against Grain's
own TFRecordIterDataset and ArrayRecordDataSource. Records per second over one epoch.

    python bench/bench_grain.py [--repeats 5] [--datasets mnist,voc] [--records N] [--shards 4]
                                [--threads N] [--batch 256]

Data: bench/make_example_data.py's generators (MNIST-like: index, label, 784-byte image; VOC-like:
2..6 KB image bytes, 0..6 objects of VarLen boxes, labels, texts), written by tfrec_fast into
--shards TFRecord files (with FILE.idx indexes) in a temporary directory, and the same serialized
records into as many ArrayRecord files (array_record's writer, 'group_size:1,uncompressed', what
Grain advises for random access). Rows:

  sequential   MapDataset.source(s).to_iter_dataset() in index order, for TFRecordDataSource and
               ArrayRecordDataSource; InterleaveIterDataset(TFRecordIterDataset per file,
               cycle_length=1) for Grain's TFRecord reader (it reads one file front to back)
  random       MapDataset.source(s).shuffle(seed).to_iter_dataset(): a full random permutation;
               TFRecordIterDataset has no random access (its row is skipped, saying so)
  pipelines    batches of --batch records through Grain, in order and shuffled: for tfrec_fast
  of batches   MapDataset.range(n)[.shuffle(seed)].batch(B, batch_fn=source.read_batch) (one
               read and one parse per batch); for ArrayRecord MapDataset.source(s)[.shuffle(seed)]
               .batch(B) (Grain reads record by record into each batch; Grain 0.2.18 does not
               call a source's batched read), with a batch_fn making what read_batch gives (a
               list of records; parsed: FixedLen features stacked, VarLen ones a list)
  direct       the source's batched read called directly with --batch shuffled indices at a
               time (TFRecordDataSource._getitems, ArrayRecordDataSource.__getitems__): what a
               batched read costs without Grain's pipeline
  parsed       the same, each record parsed into numpy: TFRecordDataSource(spec=...) parses in
               C++; the peers map a protobuf parse over their records (tfrec_fast.proto.Example,
               the protobuf runtime TensorFlow's example_pb2 uses, then numpy arrays, the values
               and dtypes TFRecordDataSource gives); one more row: ArrayRecord records parsed by
               tfrec_fast.parse_example, to tell the source from the parser

Grain pipelines use Grain's default ReadOptions (a thread pool reading ahead) unless --threads.
Each case runs in its own process through the harness (bench/harness.py): round-robin
after a warm-up, median of --repeats; every case must hand over every record of the epoch, and a
check after the warm-up compares what it read with the data written (a CRC of each record, in
order for the sequential rows; the sum of an int64 feature for parsed rows).
Needs grain and array_record in the venv (pip install grain).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import zlib

import _common as C
import make_example_data as D
from _common import harness as H

SEED = 7
DATASETS = ("mnist", "voc")
CHECK_KEY = {
    "mnist": "index",
    "voc": "image/height",
}  # an int64 FixedLen feature, summed by check()


# ---- data (written in a process of its own) ------------------------------------------------------


def write_data(opts) -> dict:
    """The data set split into opts.shards TFRecord files (with FILE.idx) and as many ArrayRecord
    files, in opts.dir; what was made, with the digests check() compares against."""
    tfr = H.need("tfrec_fast")
    ar = H.need("array_record.python.array_record_module")
    grain = H.need("grain")
    spec = D.EXAMPLE_DATASETS[opts.dataset]
    n = opts.records or spec["n_records"]
    cols = D.COLUMNS[opts.dataset](n, spec["seed"])
    whole = os.path.join(opts.dir, f"{opts.dataset}-all.tfrecord")
    D.write_tfrec_fast(whole, cols, n, tfr)
    records = [bytes(r) for r in tfr.read_records(whole)]
    os.unlink(whole)
    files, ar_files, bounds = [], [], [n * k // opts.shards for k in range(opts.shards + 1)]
    for k in range(opts.shards):
        part = records[bounds[k] : bounds[k + 1]]
        path = os.path.join(opts.dir, f"{opts.dataset}-{k:05d}-of-{opts.shards:05d}.tfrecord")
        with tfr.TFRecordWriter(path) as w:
            w.write_batch(part)
        tfr.create_index(path, path + ".idx")
        ar_path = path[: -len(".tfrecord")] + ".array_record"
        writer = ar.ArrayRecordWriter(ar_path, "group_size:1,uncompressed")
        for r in part:
            writer.write(r)
        writer.close()
        files.append(path)
        ar_files.append(ar_path)
    in_order = 0
    for r in records:
        in_order = zlib.crc32(r, in_order)
    key = CHECK_KEY[opts.dataset]
    return {
        "files": files,
        "ar_files": ar_files,
        "n_records": n,
        "label": spec["label"],
        "file_bytes": sum(os.path.getsize(f) for f in files),
        "ar_bytes": sum(os.path.getsize(f) for f in ar_files),
        "crc_in_order": in_order,
        "crc_sum": sum(zlib.crc32(r) for r in records),
        "key_sum": int(cols[key].sum()),
        "tfrec_fast": tfr.__version__,
        "grain": _version("grain", grain),
        "array_record": _version("array_record", None),
    }


def _version(name, module) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return getattr(module, "__version__", "?")


# ---- what the cases share ------------------------------------------------------------------------


def _grain(opts):
    grain = H.need("grain")
    read = grain.ReadOptions(num_threads=opts.threads) if opts.threads else None
    return grain, read


def _spec(name: str) -> dict:
    from tfrec_fast import FixedLen

    if name == "mnist":
        return {
            "index": FixedLen((), "int64"),
            "label": FixedLen((), "int64"),
            "image_raw": FixedLen((28, 28), "uint8"),
        }
    return D.tfrec_fast_spec(name)


def _proto_parser(name: str):
    """A per-record protobuf parse into the numpy values TFRecordDataSource(spec) gives."""
    import numpy as np

    from tfrec_fast.proto import Example

    if name == "mnist":

        def parse(record):
            f = Example.FromString(record).features.feature
            return {
                "index": np.int64(f["index"].int64_list.value[0]),
                "label": np.int64(f["label"].int64_list.value[0]),
                "image_raw": np.frombuffer(f["image_raw"].bytes_list.value[0], np.uint8).reshape(
                    28, 28
                ),
            }

        return parse

    def parse(record):
        f = Example.FromString(record).features.feature
        out = {
            "image/encoded": f["image/encoded"].bytes_list.value[0],
            "image/height": np.int64(f["image/height"].int64_list.value[0]),
            "image/width": np.int64(f["image/width"].int64_list.value[0]),
            "image/object/class/label": np.array(
                f["image/object/class/label"].int64_list.value, np.int64
            ),
            "image/object/class/text": np.array(
                list(f["image/object/class/text"].bytes_list.value) or [], dtype=object
            ),
        }
        for c in D.VOC_BOX:
            out[f"image/object/bbox/{c}"] = np.array(
                f[f"image/object/bbox/{c}"].float_list.value, np.float32
            )
        return out

    return parse


def _ours(opts, parsed: bool):
    from tfrec_fast.grain import TFRecordDataSource

    return TFRecordDataSource(opts.files, _spec(opts.dataset) if parsed else None)


def _array_record(opts):
    grain = H.need("grain")
    return grain.sources.ArrayRecordDataSource(opts.ar_files)


def _check(opts, items, parsed: bool, ordered: bool):
    """check(): the records of an epoch (``items()``: records, or rows when ``parsed``) against
    the data written."""

    def check():
        if parsed:
            got = sum(int(row[CHECK_KEY[opts.dataset]]) for row in items())
            return (
                None
                if got == opts.key_sum
                else f"sum of {CHECK_KEY[opts.dataset]} {got} != {opts.key_sum}"
            )
        if ordered:
            crc = 0
            for r in items():
                crc = zlib.crc32(r, crc)
            return (
                None
                if crc == opts.crc_in_order
                else "records differ from the data written (in order)"
            )
        return (
            None
            if sum(map(zlib.crc32, items())) == opts.crc_sum
            else "records differ from the data written"
        )

    return check


def _rows_of(batch):
    """The records (or parsed rows) of a batch: a list, or a dict of stacked columns."""
    if isinstance(batch, list):
        return batch
    names = list(batch)
    return [dict(zip(names, values)) for values in zip(*batch.values())]


def _body(ds, opts, parsed: bool, ordered: bool, batched: bool = False, info: str = ""):
    """Body: one epoch of ``ds`` (records, or batches when ``batched``) counted in records."""
    if batched:

        def run():
            return sum(len(b) if isinstance(b, list) else len(next(iter(b.values()))) for b in ds)

        def items():
            for b in ds:
                yield from _rows_of(b)

        return H.Body(run, check=_check(opts, items, parsed, ordered), info=info)
    return H.Body(
        H.counting(lambda: ds), check=_check(opts, lambda: ds, parsed, ordered), info=info
    )


def _pipeline(opts, source, shuffle: bool, parse=None):
    """MapDataset.source(source) [.shuffle] [.map(parse)] .to_iter_dataset(): record by record."""
    grain, read = _grain(opts)
    ds = grain.MapDataset.source(source)
    if shuffle:
        ds = ds.shuffle(seed=SEED)
    if parse is not None:
        ds = ds.map(parse)
    parsed = parse is not None or getattr(source, "spec", None) is not None
    return _body(ds.to_iter_dataset(read), opts, parsed, not shuffle)


def _read_batch_pipeline(opts, parsed: bool, shuffle: bool):
    """MapDataset.range(n) [.shuffle] .batch(B, batch_fn=source.read_batch) .to_iter_dataset()."""
    grain, read = _grain(opts)
    source = _ours(opts, parsed)
    ds = grain.MapDataset.range(len(source))
    if shuffle:
        ds = ds.shuffle(seed=SEED)
    ds = ds.batch(opts.batch, batch_fn=source.read_batch).to_iter_dataset(read)
    return _body(ds, opts, parsed, not shuffle, batched=True, info=f"batches of {opts.batch}")


def _grain_batch_pipeline(opts, parse, shuffle: bool):
    """MapDataset.source(ArrayRecord) [.shuffle] [.map(parse)] .batch(B, batch_fn) .to_iter_dataset():
    Grain reads record by record into each batch; batch_fn makes what read_batch gives (a list
    of records, or stacked columns: FixedLen stacked, VarLen a list)."""
    import numpy as np

    grain, read = _grain(opts)
    ds = grain.MapDataset.source(_array_record(opts))
    if shuffle:
        ds = ds.shuffle(seed=SEED)
    if parse is None:
        batch_fn = list
    else:
        from tfrec_fast import FixedLen

        spec = _spec(opts.dataset)
        ds = ds.map(parse)

        def batch_fn(rows):
            out = {}
            for name, s in spec.items():
                values = [r[name] for r in rows]
                if not isinstance(s, FixedLen):
                    out[name] = values
                elif s.dtype == object:
                    out[name] = np.empty(len(values), dtype=object)
                    out[name][:] = values
                else:
                    out[name] = np.stack(values)
            return out

    ds = ds.batch(opts.batch, batch_fn=batch_fn).to_iter_dataset(read)
    return _body(
        ds, opts, parse is not None, not shuffle, batched=True, info=f"batches of {opts.batch}"
    )


def _batched(opts, read, parsed: bool):
    """The source's batched read called directly, --batch shuffled indices a call."""
    import numpy as np

    order = np.random.default_rng(SEED).permutation(opts.n_records).tolist()
    b = opts.batch

    def items():
        for k in range(0, len(order), b):
            yield from read(order[k : k + b])

    return H.Body(
        H.counting(items),
        check=_check(opts, items, parsed, False),
        info=f"{b} shuffled indices a call, no Grain pipeline",
    )


def _tfrecord_iter(opts, parse=None):
    _grain(opts)
    from grain.experimental import InterleaveIterDataset, TFRecordIterDataset

    ds = InterleaveIterDataset([TFRecordIterDataset(p) for p in opts.files], cycle_length=1)
    if parse is not None:
        ds = ds.map(parse)
    return _body(ds, opts, parse is not None, True, info="no CRC checked, local files only")


# ---- cases -----------------------------------------------------------------------------------------
# seq_*: in index order; rand_*: shuffled; pipe_*: Grain pipelines of batches; batch_*: direct
# batched reads. *_spec / *_proto / *_ours: parsed into numpy (by the source's spec, by protobuf,
# by tfrec_fast.parse_example).


def seq_ours(opts):
    return _pipeline(opts, _ours(opts, False), False)


def seq_ar(opts):
    return _pipeline(opts, _array_record(opts), False)


def seq_tfr(opts):
    return _tfrecord_iter(opts)


def seq_pipe_ours(opts):
    return _read_batch_pipeline(opts, False, False)


def seq_pipe_ar(opts):
    return _grain_batch_pipeline(opts, None, False)


def rand_ours(opts):
    return _pipeline(opts, _ours(opts, False), True)


def rand_ar(opts):
    return _pipeline(opts, _array_record(opts), True)


def rand_tfr(opts):
    raise H.Skip("TFRecordIterDataset has no random access (it reads each file front to back)")


def pipe_ours(opts):
    return _read_batch_pipeline(opts, False, True)


def pipe_ar(opts):
    return _grain_batch_pipeline(opts, None, True)


def batch_ours(opts):
    return _batched(opts, _ours(opts, False)._getitems, False)


def batch_ar(opts):
    return _batched(opts, _array_record(opts).__getitems__, False)


def seq_ours_spec(opts):
    return _pipeline(opts, _ours(opts, True), False)


def seq_ar_proto(opts):
    return _pipeline(opts, _array_record(opts), False, _proto_parser(opts.dataset))


def seq_tfr_proto(opts):
    return _tfrecord_iter(opts, _proto_parser(opts.dataset))


def seq_pipe_ours_spec(opts):
    return _read_batch_pipeline(opts, True, False)


def seq_pipe_ar_proto(opts):
    return _grain_batch_pipeline(opts, _proto_parser(opts.dataset), False)


def rand_ours_spec(opts):
    return _pipeline(opts, _ours(opts, True), True)


def rand_ar_proto(opts):
    return _pipeline(opts, _array_record(opts), True, _proto_parser(opts.dataset))


def rand_ar_ours(opts):
    from tfrec_fast import parse_example

    spec = _spec(opts.dataset)
    return _pipeline(opts, _array_record(opts), True, lambda r: parse_example(r, spec))


def pipe_ours_spec(opts):
    return _read_batch_pipeline(opts, True, True)


def pipe_ar_proto(opts):
    return _grain_batch_pipeline(opts, _proto_parser(opts.dataset), True)


def batch_ours_spec(opts):
    return _batched(opts, _ours(opts, True)._getitems, True)


def batch_ar_proto(opts):
    parse = _proto_parser(opts.dataset)
    read = _array_record(opts).__getitems__
    return _batched(opts, lambda idx: [parse(r) for r in read(idx)], True)


OURS, AR, TFR = (
    "tfrec_fast TFRecordDataSource",
    "ArrayRecordDataSource",
    "grain TFRecordIterDataset",
)
PIPE_OURS = "MapDataset.range(n){}.batch(B, batch_fn=TFRecordDataSource{}.read_batch)"
PIPE_AR = "MapDataset.source(ArrayRecordDataSource){}.batch(B)"
TABLES = {
    "sequential epoch, raw records": (
        [
            H.Case("seq_ours", OURS, seq_ours),
            H.Case("seq_ar", AR, seq_ar),
            H.Case("seq_tfr", TFR, seq_tfr),
            H.Case("seq_pipe_ours", PIPE_OURS.format("", ""), seq_pipe_ours),
            H.Case("seq_pipe_ar", PIPE_AR.format(""), seq_pipe_ar),
        ],
        ("seq_ar", "seq_tfr"),
    ),
    "random epoch (shuffle), raw records": (
        [
            H.Case("rand_ours", OURS, rand_ours),
            H.Case("rand_ar", AR, rand_ar),
            H.Case("rand_tfr", TFR, rand_tfr),
            H.Case("pipe_ours", PIPE_OURS.format(".shuffle()", ""), pipe_ours),
            H.Case("pipe_ar", PIPE_AR.format(".shuffle()"), pipe_ar),
            H.Case("batch_ours", f"{OURS}._getitems, direct", batch_ours),
            H.Case("batch_ar", f"{AR}.__getitems__, direct", batch_ar),
        ],
        ("rand_ar", "pipe_ar"),
    ),
    "sequential epoch, parsed into numpy": (
        [
            H.Case("seq_ours_spec", f"{OURS}(spec)", seq_ours_spec),
            H.Case("seq_ar_proto", f"{AR} + protobuf parse", seq_ar_proto),
            H.Case("seq_tfr_proto", f"{TFR} + protobuf parse", seq_tfr_proto),
            H.Case("seq_pipe_ours_spec", PIPE_OURS.format("", "(spec)"), seq_pipe_ours_spec),
            H.Case("seq_pipe_ar_proto", PIPE_AR.format(".map(protobuf parse)"), seq_pipe_ar_proto),
        ],
        ("seq_ar_proto", "seq_tfr_proto"),
    ),
    "random epoch (shuffle), parsed into numpy": (
        [
            H.Case("rand_ours_spec", f"{OURS}(spec)", rand_ours_spec),
            H.Case("rand_ar_proto", f"{AR} + protobuf parse", rand_ar_proto),
            H.Case("rand_ar_ours", f"{AR} + tfrec_fast.parse_example", rand_ar_ours),
            H.Case("pipe_ours_spec", PIPE_OURS.format(".shuffle()", "(spec)"), pipe_ours_spec),
            H.Case(
                "pipe_ar_proto", PIPE_AR.format(".shuffle().map(protobuf parse)"), pipe_ar_proto
            ),
            H.Case("batch_ours_spec", f"{OURS}(spec)._getitems, direct", batch_ours_spec),
            H.Case("batch_ar_proto", f"{AR}.__getitems__ + protobuf parse, direct", batch_ar_proto),
        ],
        ("rand_ar_proto", "pipe_ar_proto"),
    ),
}


def _columns(n: int, peers) -> list:
    ar, other = peers
    return [
        H.per_second("records/s", n),
        H.Versus(f"vs {_label(ar)}", ar),
        H.Versus(f"vs {_label(other)}", other),
        *H.timing(".4f"),
    ]


def _label(name: str) -> str:
    for cases, _ in TABLES.values():
        for case in cases:
            if case.name == name:
                return case.label
    return name


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    H.add_arguments(ap, repeats=5, min_time=0.5)
    ap.add_argument("--datasets", default="mnist,voc", help="comma list: mnist, voc")
    ap.add_argument("--records", type=int, default=0, help="records per data set (0: its default)")
    ap.add_argument("--shards", type=int, default=4, help="files per data set")
    ap.add_argument(
        "--threads",
        type=int,
        default=0,
        help="Grain ReadOptions(num_threads=...) (0: Grain's default)",
    )
    ap.add_argument("--batch", type=int, default=256, help="indices per direct batched read")
    args = ap.parse_args(argv)
    md, raw = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in [d.strip() for d in args.datasets.split(",") if d.strip()]:
            if name not in DATASETS:
                ap.error(f"unknown data set {name!r}: {', '.join(DATASETS)}")
            print(f"== grain {name}", file=sys.stderr)
            made = H.call(
                write_data,
                {"dir": tmp, "dataset": name, "records": args.records, "shards": args.shards},
                log_dir=C.log_dir(f"grain-data-{name}"),
            )
            if not md:
                md.append(
                    C.header(
                        args,
                        f"tfrec_fast {made['tfrec_fast']}, grain {made['grain']}, array_record "
                        f"{made['array_record']}; {args.shards} files per data set; Grain "
                        f"ReadOptions {'num_threads=' + str(args.threads) if args.threads else 'default'}"
                        ". Ratios >1: faster than that row.",
                    )
                )
            opts = dict(made, dataset=name, threads=args.threads, batch=args.batch)
            n = made["n_records"]
            for title, (cases, peers) in TABLES.items():
                res = H.measure(
                    H.select(cases, args.cases),
                    opts,
                    log_dir=C.log_dir(f"grain-{name}"),
                    **H.timing_options(args),
                )
                if not res:
                    continue
                H.expect_records(res, n)
                text, notes = H.table(res, _columns(n, peers))
                md.append(
                    H.section(
                        f"{made['label']}: {title} ({n:,} records, TFRecord "
                        f"{made['file_bytes'] / 1e6:.1f} MB, ArrayRecord {made['ar_bytes'] / 1e6:.1f} MB)",
                        text,
                        notes,
                    )
                )
                raw[f"{name}/{title}"] = H.raw(res)
    return H.emit(md, raw, args.markdown, args.json)


if __name__ == "__main__":
    sys.exit(main())
