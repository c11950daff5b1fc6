#!/usr/bin/env python3
"""tf.train.Example codec throughput of tfrec_fast against its peers, all measured in this one run.

Parsing, on each data set of make_example_data.py (mnist 60k, tutorial 100k, voc 20k records).
Every case reads the file's records first (untimed) and then times only the parse:
  tfrec_fast   parse_examples(RecordBatch, spec) over RecordBatches of 1024 (TFRecordReader.read_batch)
  TensorFlow   tf.io.parse_example(tf.constant batch of 1024 serialized records, FixedLen/VarLenFeature
               spec), eager and inside a tf.function; the ratio "vs TF" uses the faster of the two
  tfrecord     what tfrecord.reader.example_loader runs per record: example_pb2.Example().ParseFromString
               + reader.extract_feature_dict(features, description, typename_mapping)
Encoding the MNIST-like rows (index, label, 784-byte image):
  tfrec_fast   encode_examples(columns) per 1024 rows (numpy columns), encode_example(dict) per row
  protobuf     Example(features=Features(feature={...})).SerializeToString() per row, with
               tf.train.Example (TensorFlow's process) and tfrec_fast.proto.Example (same upb runtime)

Targets (tfrec_fast issue; reported, not enforced): parsing >= 20x TensorFlow batched and >= 50x the
tfrecord package; encoding >= 10x protobuf.
"""

from __future__ import annotations

import argparse
import sys

import _common as C
import make_example_data as D
import numpy as np
from _common import harness as H

# ---- cases -----------------------------------------------------------------------------------------
# --file is one of make_example_data.py's files; the data set follows from its name. Records are
# read from the file in setup (untimed); run() times only the parse (or, for encoding, the encode).

# the feature the output check compares with the generator (first batch)
_CHECK_FEATURE = {"mnist": "label", "tutorial": "feature1", "voc": "image/object/class/label"}
EXAMPLE_BATCH = 1024


def _ex_setup(opts):
    name = D.dataset_of(opts.file)
    meta = D.example_meta(name)
    if meta is None:
        raise H.Skip(f"{opts.file} missing or stale: run bench/make_example_data.py")
    return name, meta, opts.batch_records or EXAMPLE_BATCH


def _ex_expected(name, meta, n):
    """(values, row lengths) of the check feature for the first n rows, from the generator."""
    col = D.COLUMNS[name](meta["n_records"], meta["seed"])[_CHECK_FEATURE[name]][:n]
    if D.EXAMPLE_SPECS[name][_CHECK_FEATURE[name]][0] == "fixed":
        return [int(v) for v in col], None
    return [int(v) for row in col for v in row], [len(row) for row in col]


def _ex_compare(got_values, got_lengths, want) -> str | None:
    wv, wl = want
    if list(map(int, got_values)) != wv:
        return "parsed values differ from the generated data"
    if wl is not None and list(map(int, got_lengths)) != wl:
        return "parsed row lengths differ from the generated data"
    return None


def ex_parse_tfrec_fast(opts):
    tfr = H.need("tfrec_fast")
    from tfrec_fast.example import parse_examples

    name, meta, bs = _ex_setup(opts)
    spec = D.tfrec_fast_spec(name)
    batches = []
    with tfr.TFRecordReader(opts.file) as r:
        while True:
            b = r.read_batch(max_records=bs)
            if not len(b):
                break
            batches.append(b)

    def run():
        n = 0
        for b in batches:
            parse_examples(b, spec)
            n += len(b)
        return n

    def check():
        col = parse_examples(batches[0], spec)[_CHECK_FEATURE[name]]
        want = _ex_expected(name, meta, len(batches[0]))
        if isinstance(col, np.ndarray):
            return _ex_compare(col.tolist(), None, want)
        return _ex_compare(col.values.tolist(), col.row_lengths.tolist(), want)

    return H.Body(
        run,
        check=check,
        info=f"parse_examples(RecordBatch of {bs}, FixedLen/VarLen spec); "
        "bytes features come back as zero-copy BytesColumn views",
    )


def _tf_features(tf, name):
    dt = {"int64": tf.int64, "float": tf.float32, "bytes": tf.string}
    return {
        k: (
            tf.io.FixedLenFeature([], dt[kind])
            if layout == "fixed"
            else tf.io.VarLenFeature(dt[kind])
        )
        for k, (layout, kind) in D.EXAMPLE_SPECS[name].items()
    }


def _ex_parse_tf(opts, use_function: bool):
    tf = H.need("tensorflow")

    name, meta, bs = _ex_setup(opts)
    features = _tf_features(tf, name)
    records = C.read_payloads_py(opts.file)
    batches = [tf.constant(records[a : a + bs]) for a in range(0, len(records), bs)]
    del records
    if use_function:
        parse = tf.function(
            lambda s: tf.io.parse_example(s, features),
            input_signature=[tf.TensorSpec([None], tf.string)],
        )
        parse(batches[0])  # trace once, untimed
    else:
        parse = lambda s: tf.io.parse_example(s, features)  # noqa: E731

    def run():
        n = 0
        for b in batches:
            parse(b)
            n += int(b.shape[0])
        return n

    def check():
        col = parse(batches[0])[_CHECK_FEATURE[name]]
        want = _ex_expected(name, meta, int(batches[0].shape[0]))
        if isinstance(col, tf.SparseTensor):
            rows = col.indices.numpy()[:, 0]
            lengths = np.bincount(rows, minlength=int(batches[0].shape[0]))
            return _ex_compare(col.values.numpy().tolist(), lengths.tolist(), want)
        return _ex_compare(col.numpy().tolist(), None, want)

    how = (
        "tf.function(input_signature=[None] strings), traced in setup" if use_function else "eager"
    )
    return H.Body(
        run,
        check=check,
        info=f"TF {tf.__version__}, tf.io.parse_example on tf.constant batches of {bs}, "
        f"{how}; VarLen -> SparseTensor",
    )


def ex_parse_tf_eager(opts):
    return _ex_parse_tf(opts, False)


def ex_parse_tf_function(opts):
    return _ex_parse_tf(opts, True)


def ex_parse_tfrecord(opts):
    example_pb2 = H.need("tfrecord.example_pb2")
    extract_feature_dict = H.need("tfrecord.reader").extract_feature_dict

    name, meta, _ = _ex_setup(opts)
    tname = {"int64": "int", "float": "float", "bytes": "byte"}
    description = {k: tname[kind] for k, (_, kind) in D.EXAMPLE_SPECS[name].items()}
    # as in tfrecord.reader.example_loader
    typename_mapping = {"byte": "bytes_list", "float": "float_list", "int": "int64_list"}
    records = C.read_payloads_py(opts.file)
    Example = example_pb2.Example

    def parse_one(record):  # the body of example_loader's loop, verbatim
        example = Example()
        example.ParseFromString(record)
        return extract_feature_dict(example.features, description, typename_mapping)

    def run():
        for record in records:
            parse_one(record)
        return len(records)

    def check():
        k = _CHECK_FEATURE[name]
        rows = [parse_one(r)[k] for r in records[:EXAMPLE_BATCH]]
        want = _ex_expected(name, meta, len(rows))
        if want[1] is None:  # process_feature gives fixed features as 1-element arrays
            return _ex_compare([int(np.asarray(v).reshape(-1)[0]) for v in rows], None, want)
        return _ex_compare([int(v) for row in rows for v in row], [len(row) for row in rows], want)

    return H.Body(
        run,
        check=check,
        info="per record, what tfrecord.reader.example_loader runs per record: "
        "example_pb2.Example().ParseFromString(bytes) + "
        "reader.extract_feature_dict(features, description, mapping); "
        "file reading (tfrecord_iterator) not timed",
    )


def _enc_setup(opts):
    name, meta, _ = _ex_setup(opts)
    if name != "mnist":
        raise H.Skip("the encoding cases take the mnist data set")
    return meta["n_records"], meta["seed"]


def _enc_check(encode_row, rows, parse) -> str | None:
    """encode rows[:10] with the case's own code, parse with a protobuf class, compare."""
    for row in rows[:10]:
        ex = parse(encode_row(row))
        f = ex.features.feature
        got = (
            f["index"].int64_list.value[0],
            f["label"].int64_list.value[0],
            f["image_raw"].bytes_list.value[0],
        )
        if got != row or len(f) != 3:
            return f"row {row[0]}: encoded record parses to other values"
    return None


def ex_enc_tfrec_fast_columns(opts):
    H.need("tfrec_fast")
    from tfrec_fast.encode import Bytes, encode_examples
    from tfrec_fast.proto import Example

    n, seed = _enc_setup(opts)
    cols = D.mnist_columns(n, seed)
    bs = opts.batch_records or EXAMPLE_BATCH
    chunks = [
        {
            "index": cols["index"][a : a + bs],
            "label": cols["label"][a : a + bs],
            "image_raw": Bytes(cols["image_raw"][a : a + bs]),
        }
        for a in range(0, n, bs)
    ]

    def check():
        got = [bytes(r) for r in encode_examples(chunks[0])][:10]
        rows = [
            (int(cols["index"][k]), int(cols["label"][k]), cols["image_raw"][k].tobytes())
            for k in range(10)
        ]
        return _enc_check(lambda row: got[row[0]], rows, Example.FromString)

    return H.Body(
        H.summing(lambda: map(encode_examples, chunks)),
        check=check,
        info=f"encode_examples(columns) per {bs} rows: int64 numpy columns + Bytes(uint8 array [rows, "
        "784]) -> a RecordBatch",
    )


def ex_enc_tfrec_fast_each(opts):
    H.need("tfrec_fast")
    from tfrec_fast.encode import encode_example
    from tfrec_fast.proto import Example

    n, seed = _enc_setup(opts)
    rows = D.mnist_rows(n, seed)

    def encode_row(row):
        return encode_example({"index": row[0], "label": row[1], "image_raw": row[2]})

    def run():
        for i, lab, img in rows:
            encode_example({"index": i, "label": lab, "image_raw": img})
        return len(rows)

    return H.Body(
        run,
        check=lambda: _enc_check(encode_row, rows, Example.FromString),
        info="encode_example({'index': int, 'label': int, 'image_raw': bytes}) per row",
    )


def _enc_protobuf(opts, mod, parse, info):
    n, seed = _enc_setup(opts)
    rows = D.mnist_rows(n, seed)
    Example, Features, Feature, Int64List, BytesList = (
        mod.Example,
        mod.Features,
        mod.Feature,
        mod.Int64List,
        mod.BytesList,
    )

    def encode_row(row):
        i, lab, img = row
        return Example(
            features=Features(
                feature={
                    "index": Feature(int64_list=Int64List(value=[i])),
                    "label": Feature(int64_list=Int64List(value=[lab])),
                    "image_raw": Feature(bytes_list=BytesList(value=[img])),
                }
            )
        ).SerializeToString()

    def run():
        for i, lab, img in rows:
            Example(
                features=Features(
                    feature={
                        "index": Feature(int64_list=Int64List(value=[i])),
                        "label": Feature(int64_list=Int64List(value=[lab])),
                        "image_raw": Feature(bytes_list=BytesList(value=[img])),
                    }
                )
            ).SerializeToString()
        return len(rows)

    return H.Body(run, check=lambda: _enc_check(encode_row, rows, parse), info=info)


def ex_enc_proto_tf(opts):
    tf = H.need("tensorflow")
    from google.protobuf.internal import api_implementation

    return _enc_protobuf(
        opts,
        tf.train,
        tf.train.Example.FromString,
        f"TF {tf.__version__}: tf.train.Example(features=Features(feature={{...Feature(...List(value=[v]))}}))"
        f".SerializeToString() per row; protobuf runtime: {api_implementation.Type()}",
    )


def ex_enc_proto_tfrec_fast(opts):
    H.need("tfrec_fast")
    from google.protobuf.internal import api_implementation

    from tfrec_fast import proto

    return _enc_protobuf(
        opts,
        proto,
        proto.Example.FromString,
        "tfrec_fast.proto.Example built the same way, .SerializeToString() per row; "
        f"protobuf runtime: {api_implementation.Type()}",
    )


PARSE = [
    H.Case("ex_tfrec_fast", "tfrec_fast parse_examples (batch 1024)", ex_parse_tfrec_fast),
    H.Case("ex_tf_eager", "TensorFlow tf.io.parse_example (batch 1024, eager)", ex_parse_tf_eager),
    H.Case(
        "ex_tf_function",
        "TensorFlow tf.io.parse_example (batch 1024, tf.function)",
        ex_parse_tf_function,
    ),
    H.Case("ex_tfrecord", "tfrecord example_loader per-record decode", ex_parse_tfrecord),
]
ENCODE = [
    H.Case(
        "enc_tfrec_fast_columns",
        "tfrec_fast encode_examples (columns, 1024 rows)",
        ex_enc_tfrec_fast_columns,
    ),
    H.Case("enc_tfrec_fast_each", "tfrec_fast encode_example (per row)", ex_enc_tfrec_fast_each),
    H.Case(
        "enc_proto_tf", "protobuf tf.train.Example.SerializeToString (per row)", ex_enc_proto_tf
    ),
    H.Case(
        "enc_proto_tfrec_fast",
        "protobuf tfrec_fast.proto.Example.SerializeToString (per row)",
        ex_enc_proto_tfrec_fast,
    ),
]
TF_PARSE = ("ex_tf_eager", "ex_tf_function")
PROTOBUF = ("enc_proto_tf", "enc_proto_tfrec_fast")
TARGET_TF, TARGET_TFRECORD, TARGET_PROTO = 20.0, 50.0, 10.0

# ---- tables ------------------------------------------------------------------------------------------


def parse_columns(meta):
    def mine(r):
        return r.name == "ex_tfrec_fast"

    return [
        H.per_second("records/s", meta["n_records"]),
        H.per_second("MB/s", meta["file_bytes"] / 1e6, ".0f"),
        H.Versus("vs TF batched", *TF_PARSE, target=TARGET_TF, mine=mine),
        H.Versus("vs tfrecord", "ex_tfrecord", target=TARGET_TFRECORD, mine=mine),
        *H.timing(".4f"),
    ]


def encode_columns(n):
    def mine(r):
        return r.name.startswith("enc_tfrec_fast")

    return [
        H.per_second("records/s", n),
        H.Versus("vs protobuf (faster)", *PROTOBUF, target=TARGET_PROTO, mine=mine),
        H.Versus("vs tf.train.Example", "enc_proto_tf"),
        H.Versus("vs tfrec_fast.proto.Example", "enc_proto_tfrec_fast"),
        *H.timing(".4f"),
    ]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    H.add_arguments(ap, repeats=5, min_time=0.5)
    ap.add_argument(
        "--datasets", default="mnist,tutorial,voc", help="comma list: mnist, tutorial, voc"
    )
    ap.add_argument(
        "--batch-records", type=int, default=EXAMPLE_BATCH, help="records per parse/encode batch"
    )
    ap.add_argument("--no-parse", action="store_true")
    ap.add_argument("--no-encode", action="store_true")
    args = ap.parse_args(argv)

    names = [d.strip() for d in args.datasets.split(",") if d.strip()]
    need = ([] if args.no_parse else names) + ([] if args.no_encode else ["mnist"])
    metas = {name: D.example_meta(name) for name in need}
    for name, meta in metas.items():
        if meta is None:
            print(
                f"error: {D.example_path(name)} missing or stale: run bench/make_example_data.py first",
                file=sys.stderr,
            )
            return 2
    md = [
        C.header(
            args,
            "Records are read from the file before timing; only parsing (or encoding) is timed. ✅/❌ "
            "mark the tfrec_fast targets (parse ≥20x TF batched, ≥50x tfrecord; encode ≥10x protobuf). "
            "MB/s counts the file's bytes.",
        )
    ]
    raw, summary = {}, []
    timing = H.timing_options(args)

    if not args.no_parse:
        for name in names:
            meta, path = metas[name], D.example_path(name)
            print(f"== parse {name}: {path}", file=sys.stderr)
            res = H.measure(
                H.select(PARSE, args.cases),
                {"file": str(path), "batch_records": args.batch_records},
                log_dir=C.log_dir(f"parse-{name}"),
                **timing,
            )
            H.expect_records(res, meta["n_records"])
            columns = parse_columns(meta)
            text, notes = H.table(res, columns)
            tf_row = H.fastest(res, TF_PARSE)
            if tf_row is not None:
                notes.append(f"'vs TF' is against the faster TensorFlow row: {tf_row.label}")
            title = f"Parse: {meta['label']} ({meta['n_records']:,} records, {meta['file_bytes'] / 1e6:.1f} MB)"
            md.append(H.section(title, text, notes))
            summary += H.targets(res, columns, f"parse {name}")
            raw[f"parse_{name}"] = H.raw(res)

    if not args.no_encode:
        meta, path = metas["mnist"], D.example_path("mnist")
        print("== encode mnist rows", file=sys.stderr)
        res = H.measure(
            H.select(ENCODE, args.cases),
            {"file": str(path), "batch_records": args.batch_records},
            log_dir=C.log_dir("encode"),
            **timing,
        )
        H.expect_records(res, meta["n_records"])
        columns = encode_columns(meta["n_records"])
        text, notes = H.table(res, columns)
        notes.append(
            "'vs protobuf' is against the faster of the two protobuf rows; the output of every case is "
            "checked (after the warm-up) to parse back to the same rows"
        )
        title = f"Encode: MNIST-like rows ({meta['n_records']:,} records: index, label, 784-byte image_raw)"
        md.append(H.section(title, text, notes))
        summary += H.targets(res, columns, "encode")
        raw["encode_mnist"] = H.raw(res)

    return H.emit(md, raw, args.markdown, args.json, summary)


if __name__ == "__main__":
    sys.exit(main())
