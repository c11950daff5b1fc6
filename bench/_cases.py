"""The measured cases. Each runs in its own worker process (see _worker.py), so TensorFlow and the
`tfrecord` package are never imported next to tfrec_fast, and import costs are never timed.

A case's setup(opts) does the imports and untimed preparation and returns a Case whose run() is
the timed body and returns the number of records it handled. Raise Skip to skip with a reason.
"""

from __future__ import annotations

import filecmp
import os

import _common as C


class Skip(Exception):
    """The case cannot run here (a package is missing); the message says why."""


class Case:
    def __init__(self, run, prepare=None, check=None, info=""):
        self.run = run  # timed; returns the number of records
        self.prepare = prepare or (lambda: None)  # untimed, before every run
        self.check = check or (lambda: None)  # untimed, after the warm-up; returns an error string or None
        self.info = info  # shown in the table notes (e.g. which CRC the probe used)


def _tfrec_fast():
    tfr, why = C.probe_tfrec_fast()
    if tfr is None:
        raise Skip(why)
    return tfr


# ------------------------------------------------------------------------------------------ read


def _probe(path, crc, info):
    bufsize = 1 << 20

    def run():
        buf = bytearray(bufsize)
        mv = memoryview(buf)
        c = 0
        with open(path, "rb", buffering=0) as f:
            readinto = f.readinto
            while True:
                k = readinto(buf)
                if not k:
                    break
                c = crc(mv[:k], c)
        return 0  # the probe does not frame records

    return Case(run, info=info)


def read_ceiling(opts):
    """readinto(1 MiB) + CRC32C of each chunk: the physical limit (tfrec_fast.crc32c, else `crc32c`)."""
    tfr, _ = C.probe_tfrec_fast()
    if tfr is not None:
        return _probe(opts.file, tfr.crc32c, f"tfrec_fast.crc32c ({tfr.crc32c_backend()})")
    import crc32c

    return _probe(opts.file, crc32c.crc32c, "`crc32c` package (tfrec_fast not importable)")


def read_ceiling_pkg(opts):
    """The same probe with the `crc32c` package's CRC (informational, shown when tfrec_fast exists)."""
    if C.probe_tfrec_fast()[0] is None:
        raise Skip("same as the ceiling row while tfrec_fast is not importable")
    import crc32c

    return _probe(opts.file, crc32c.crc32c, "`crc32c` package")


def read_tfrec_fast_batches(opts):
    tfr = _tfrec_fast()
    path, mr = opts.file, opts.batch_records

    def run():
        n = 0
        with tfr.TFRecordReader(path) as r:
            for b in r.iter_batches(max_records=mr):
                n += len(b)
        return n

    return Case(run, info=f"iter_batches(max_records={mr})")


def read_tfrec_fast_records(opts):
    tfr = _tfrec_fast()
    path = opts.file

    def run():
        n = 0
        for _r in tfr.read_records(path):
            n += 1
        return n

    return Case(run)


def read_tf(opts):
    try:
        import tensorflow as tf
    except ImportError as e:
        raise Skip(f"tensorflow not importable: {e}") from e
    path = opts.file

    def run():
        n = 0
        for b in tf.data.TFRecordDataset(path).batch(1024):
            n += b.shape[0]
        return n

    return Case(run, info=f"TF {tf.__version__}, TFRecordDataset(path).batch(1024), CRCs checked")


def read_tfrecord(opts):
    try:
        from tfrecord.reader import tfrecord_iterator
    except ImportError as e:
        raise Skip(f"tfrecord not importable: {e}") from e
    path = opts.file

    def run():
        n = 0
        for _r in tfrecord_iterator(path):
            n += 1
        return n

    return Case(run, info="tfrecord.reader.tfrecord_iterator: raw records, NO CRC check, reused buffer")


# ----------------------------------------------------------------------------------------- write


def _write_case(opts, make_run, info=""):
    """Records come from opts.file (parsed in pure Python, untimed); output goes to opts.out and must
    be byte-identical to opts.file (every writer here frames exactly like TensorFlow)."""
    records = C.read_payloads_py(opts.file)
    out = opts.out

    def prepare():
        if os.path.exists(out):
            os.unlink(out)

    def check():
        if not os.path.exists(out):
            return "no output file"
        if not filecmp.cmp(out, opts.file, shallow=False):
            return f"output differs from {os.path.basename(opts.file)}"
        return None

    return Case(make_run(records, out), prepare, check, info)


def write_tfrec_fast_batch(opts):
    tfr = _tfrec_fast()

    def make_run(records, out):
        def run():
            with tfr.TFRecordWriter(out) as w:
                w.write_batch(records)
            return len(records)

        return run

    return _write_case(opts, make_run, "write_batch(list of 2M bytes)")


def write_tfrec_fast_each(opts):
    tfr = _tfrec_fast()

    def make_run(records, out):
        def run():
            with tfr.TFRecordWriter(out) as w:
                write = w.write
                for r in records:
                    write(r)
            return len(records)

        return run

    return _write_case(opts, make_run, "write(r) per record")


def write_tfrecord(opts):
    try:
        from tfrecord.writer import TFRecordWriter
    except ImportError as e:
        raise Skip(f"tfrecord not importable: {e}") from e
    # The package only writes tf.train.Example dicts; make its serializer the identity so write()
    # runs exactly its own framing code (struct.pack + crc32c + 4 file writes) on raw records.
    TFRecordWriter.serialize_tf_example = staticmethod(lambda datum: datum)

    def make_run(records, out):
        def run():
            w = TFRecordWriter(out)
            write = w.write
            for r in records:
                write(r)
            w.close()
            return len(records)

        return run

    return _write_case(opts, make_run, "tfrecord.writer.TFRecordWriter.write, Example serialization bypassed")


def write_tf(opts):
    try:
        import tensorflow as tf
    except ImportError as e:
        raise Skip(f"tensorflow not importable: {e}") from e

    def make_run(records, out):
        def run():
            with tf.io.TFRecordWriter(out) as w:
                write = w.write
                for r in records:
                    write(r)
            return len(records)

        return run

    return _write_case(opts, make_run, f"TF {tf.__version__}, tf.io.TFRecordWriter.write per record")



# ------------------------------------------------------------------- Example parsing / encoding
# --file is one of make_example_data.py's files; the data set follows from its name. Records are
# read from the file in setup (untimed); run() times only the parse (or, for encoding, the encode).

# data set -> {feature: (layout, kind)}: layout "fixed" (one value per record) or "var" (any number)
EXAMPLE_SPECS = {
    "mnist": {"index": ("fixed", "int64"), "label": ("fixed", "int64"), "image_raw": ("fixed", "bytes")},
    "tutorial": {"feature0": ("fixed", "int64"), "feature1": ("fixed", "int64"),
                 "feature2": ("fixed", "bytes"), "feature3": ("fixed", "float")},
    "voc": {"image/encoded": ("fixed", "bytes"), "image/height": ("fixed", "int64"),
            "image/width": ("fixed", "int64"),
            **{f"image/object/bbox/{c}": ("var", "float") for c in ("xmin", "ymin", "xmax", "ymax")},
            "image/object/class/label": ("var", "int64"), "image/object/class/text": ("var", "bytes")},
}
# the feature the output check compares with the generator (first batch)
_CHECK_FEATURE = {"mnist": "label", "tutorial": "feature1", "voc": "image/object/class/label"}
EXAMPLE_BATCH = 1024


def _ex_setup(opts):
    import make_example_data as D

    name = D.dataset_of(opts.file)
    meta = D.example_meta(name)
    if meta is None:
        raise Skip(f"{opts.file} missing or stale: run bench/make_example_data.py")
    return D, name, meta, opts.batch_records or EXAMPLE_BATCH


def _ex_expected(D, name, meta, n):
    """(values, row lengths) of the check feature for the first n rows, from the generator."""
    col = D.COLUMNS[name](meta["n_records"], meta["seed"])[_CHECK_FEATURE[name]][:n]
    if EXAMPLE_SPECS[name][_CHECK_FEATURE[name]][0] == "fixed":
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
    tfr = _tfrec_fast()
    import numpy as np
    from tfrec_fast.example import FixedLen, VarLen, parse_examples

    D, name, meta, bs = _ex_setup(opts)
    spec = {k: (FixedLen((), kind) if layout == "fixed" else VarLen(kind))
            for k, (layout, kind) in EXAMPLE_SPECS[name].items()}
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
        want = _ex_expected(D, name, meta, len(batches[0]))
        if isinstance(col, np.ndarray):
            return _ex_compare(col.tolist(), None, want)
        return _ex_compare(col.values.tolist(), col.row_lengths.tolist(), want)

    return Case(run, check=check, info=f"parse_examples(RecordBatch of {bs}, FixedLen/VarLen spec); "
                                       "bytes features come back as zero-copy BytesColumn views")


def _tf_features(tf, name):
    dt = {"int64": tf.int64, "float": tf.float32, "bytes": tf.string}
    return {k: (tf.io.FixedLenFeature([], dt[kind]) if layout == "fixed" else tf.io.VarLenFeature(dt[kind]))
            for k, (layout, kind) in EXAMPLE_SPECS[name].items()}


def _ex_parse_tf(opts, use_function: bool):
    try:
        import tensorflow as tf
    except ImportError as e:
        raise Skip(f"tensorflow not importable: {e}") from e
    import numpy as np

    D, name, meta, bs = _ex_setup(opts)
    features = _tf_features(tf, name)
    records = C.read_payloads_py(opts.file)
    batches = [tf.constant(records[a:a + bs]) for a in range(0, len(records), bs)]
    del records
    if use_function:
        parse = tf.function(lambda s: tf.io.parse_example(s, features),
                            input_signature=[tf.TensorSpec([None], tf.string)])
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
        want = _ex_expected(D, name, meta, int(batches[0].shape[0]))
        if isinstance(col, tf.SparseTensor):
            rows = col.indices.numpy()[:, 0]
            lengths = np.bincount(rows, minlength=int(batches[0].shape[0]))
            return _ex_compare(col.values.numpy().tolist(), lengths.tolist(), want)
        return _ex_compare(col.numpy().tolist(), None, want)

    how = "tf.function(input_signature=[None] strings), traced in setup" if use_function else "eager"
    return Case(run, check=check, info=f"TF {tf.__version__}, tf.io.parse_example on tf.constant batches of {bs}, "
                                       f"{how}; VarLen -> SparseTensor")


def ex_parse_tf_eager(opts):
    return _ex_parse_tf(opts, False)


def ex_parse_tf_function(opts):
    return _ex_parse_tf(opts, True)


def ex_parse_tfrecord(opts):
    try:
        from tfrecord import example_pb2
        from tfrecord.reader import extract_feature_dict
    except ImportError as e:
        raise Skip(f"tfrecord not importable: {e}") from e
    import numpy as np

    D, name, meta, _ = _ex_setup(opts)
    tname = {"int64": "int", "float": "float", "bytes": "byte"}
    description = {k: tname[kind] for k, (_, kind) in EXAMPLE_SPECS[name].items()}
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
        want = _ex_expected(D, name, meta, len(rows))
        if want[1] is None:  # process_feature gives fixed features as 1-element arrays
            return _ex_compare([int(np.asarray(v).reshape(-1)[0]) for v in rows], None, want)
        return _ex_compare([int(v) for row in rows for v in row], [len(row) for row in rows], want)

    return Case(run, check=check, info="per record, what tfrecord.reader.example_loader runs per record: "
                                       "example_pb2.Example().ParseFromString(bytes) + "
                                       "reader.extract_feature_dict(features, description, mapping); "
                                       "file reading (tfrecord_iterator) not timed")


def _enc_setup(opts):
    import make_example_data as D

    name = D.dataset_of(opts.file)
    if name != "mnist":
        raise Skip("the encoding cases take the mnist data set")
    spec = D.EXAMPLE_DATASETS[name]
    return D, spec["n_records"], spec["seed"]


def _enc_check(encode_row, rows, parse) -> str | None:
    """encode rows[:10] with the case's own code, parse with a protobuf class, compare."""
    for row in rows[:10]:
        ex = parse(encode_row(row))
        f = ex.features.feature
        got = (f["index"].int64_list.value[0], f["label"].int64_list.value[0], f["image_raw"].bytes_list.value[0])
        if got != row or len(f) != 3:
            return f"row {row[0]}: encoded record parses to other values"
    return None


def ex_enc_tfrec_fast_columns(opts):
    _tfrec_fast()
    from tfrec_fast.encode import Bytes, encode_examples
    from tfrec_fast.proto import Example

    D, n, seed = _enc_setup(opts)
    cols = D.mnist_columns(n, seed)
    bs = opts.batch_records or EXAMPLE_BATCH
    chunks = [{"index": cols["index"][a:a + bs], "label": cols["label"][a:a + bs],
               "image_raw": Bytes(cols["image_raw"][a:a + bs])} for a in range(0, n, bs)]

    def run():
        k = 0
        for c in chunks:
            k += len(encode_examples(c))
        return k

    def check():
        got = [bytes(r) for r in encode_examples(chunks[0])][:10]
        rows = [(int(cols["index"][k]), int(cols["label"][k]), cols["image_raw"][k].tobytes()) for k in range(10)]
        return _enc_check(lambda row: got[row[0]], rows, Example.FromString)

    return Case(run, check=check, info=f"encode_examples(columns) per {bs} rows: int64 numpy columns + "
                                       "Bytes(uint8 array [rows, 784]) -> a RecordBatch")


def ex_enc_tfrec_fast_each(opts):
    _tfrec_fast()
    from tfrec_fast.encode import encode_example
    from tfrec_fast.proto import Example

    D, n, seed = _enc_setup(opts)
    rows = D.mnist_rows(n, seed)

    def encode_row(row):
        return encode_example({"index": row[0], "label": row[1], "image_raw": row[2]})

    def run():
        for i, lab, img in rows:
            encode_example({"index": i, "label": lab, "image_raw": img})
        return len(rows)

    return Case(run, check=lambda: _enc_check(encode_row, rows, Example.FromString),
                info="encode_example({'index': int, 'label': int, 'image_raw': bytes}) per row")


def _enc_protobuf(opts, mod, parse, info):
    D, n, seed = _enc_setup(opts)
    rows = D.mnist_rows(n, seed)
    Example, Features, Feature, Int64List, BytesList = (mod.Example, mod.Features, mod.Feature, mod.Int64List,
                                                        mod.BytesList)

    def encode_row(row):
        i, lab, img = row
        return Example(features=Features(feature={
            "index": Feature(int64_list=Int64List(value=[i])),
            "label": Feature(int64_list=Int64List(value=[lab])),
            "image_raw": Feature(bytes_list=BytesList(value=[img])),
        })).SerializeToString()

    def run():
        for i, lab, img in rows:
            Example(features=Features(feature={
                "index": Feature(int64_list=Int64List(value=[i])),
                "label": Feature(int64_list=Int64List(value=[lab])),
                "image_raw": Feature(bytes_list=BytesList(value=[img])),
            })).SerializeToString()
        return len(rows)

    return Case(run, check=lambda: _enc_check(encode_row, rows, parse), info=info)


def ex_enc_proto_tf(opts):
    try:
        import tensorflow as tf
    except ImportError as e:
        raise Skip(f"tensorflow not importable: {e}") from e
    from google.protobuf.internal import api_implementation

    return _enc_protobuf(opts, tf.train, tf.train.Example.FromString,
                         f"TF {tf.__version__}: tf.train.Example(features=Features(feature={{...Feature(...List(value=[v]))}}))"
                         f".SerializeToString() per row; protobuf runtime: {api_implementation.Type()}")


def ex_enc_proto_tfrec_fast(opts):
    _tfrec_fast()
    from google.protobuf.internal import api_implementation
    from tfrec_fast import proto

    return _enc_protobuf(opts, proto, proto.Example.FromString,
                         "tfrec_fast.proto.Example built the same way, .SerializeToString() per row; "
                         f"protobuf runtime: {api_implementation.Type()}")


# ------------------------------------------------------------ PyTorch DataLoader (MNIST-like)
# --file is ex_mnist.tfrecord (index, label, 784-byte image_raw; 60k records) with its index
# FILE.idx (made by bench_torch.py). Every case yields batches of TORCH_BATCH samples to the
# training loop: image_raw as a uint8 [B, 28, 28] tensor and label as int64 [B]; run() iterates one
# full epoch and counts samples. DataLoaders are persistent (workers forked once, in setup/warm-up).

TORCH_BATCH = 256
TORCH_WORKERS = 2


def _torch_setup(opts):
    try:
        import torch
    except ImportError as e:
        raise Skip(f"torch not importable: {e}") from e
    import make_example_data as D

    if D.dataset_of(opts.file) != "mnist":
        raise Skip("the DataLoader cases take the mnist data set")
    meta = D.example_meta("mnist")
    if meta is None:
        raise Skip(f"{opts.file} missing or stale: run bench/make_example_data.py")
    idx = C.index_path(opts.file)
    if not idx.exists():
        raise Skip(f"{idx} missing: bench_torch.py writes it")
    bs = opts.batch_records or TORCH_BATCH
    workers = TORCH_WORKERS if opts.workers is None else opts.workers
    return torch, D, meta, str(idx), bs, workers


def _dl_kwargs(workers):
    return dict(num_workers=workers, persistent_workers=workers > 0)


def _loader_case(torch, D, meta, loader, info, img="image_raw", label="label"):
    import numpy as np

    def run():
        n = 0
        for b in loader:
            n += len(b[label])
        return n

    def check():
        """One more epoch, untimed: types/shapes/dtypes of every batch, and the label histogram and the
        pixel sum of the whole epoch against the generator (the order differs between cases)."""
        hist, pix, n = np.zeros(10, np.int64), 0, 0
        for b in loader:
            x, y = b[img], b[label]
            if not isinstance(x, torch.Tensor) or x.dtype != torch.uint8 or tuple(x.shape[1:]) != (28, 28):
                return f"image batch is {type(x).__name__} {getattr(x, 'dtype', '')} {tuple(getattr(x, 'shape', ()))}"
            if not isinstance(y, torch.Tensor) or y.dtype != torch.int64 or y.dim() != 1 or len(y) != len(x):
                return f"label batch is {type(y).__name__} {getattr(y, 'dtype', '')} {tuple(getattr(y, 'shape', ()))}"
            hist += np.bincount(y.numpy(), minlength=10)
            pix += int(x.sum(dtype=torch.int64))
            n += len(y)
        cols = D.mnist_columns(meta["n_records"], meta["seed"])
        if n != meta["n_records"]:
            return f"{n} samples in an epoch, expected {meta['n_records']}"
        if hist.tolist() != np.bincount(cols["label"], minlength=10).tolist():
            return "label histogram differs from the generated data"
        if pix != int(cols["image_raw"].sum(dtype=np.int64)):
            return "pixel sum differs from the generated data"
        return None

    return Case(run, check=check, info=info)


def _mnist_spec():
    from tfrec_fast.example import FixedLen

    return {"image_raw": FixedLen((28, 28), "uint8"), "label": FixedLen((), "int64")}


def dl_tfrec_fast_records(opts):
    _tfrec_fast()
    torch, D, meta, idx, bs, workers = _torch_setup(opts)
    from tfrec_fast.torch import TFRecordDataset, collate

    ds = TFRecordDataset(opts.file, index=idx, spec=_mnist_spec())
    loader = torch.utils.data.DataLoader(ds, batch_size=bs, collate_fn=collate, **_dl_kwargs(workers))
    return _loader_case(torch, D, meta, loader,
                        f"tfrec_fast.torch.TFRecordDataset(file, index=FILE.idx, spec={{image_raw: FixedLen((28, 28), "
                        f"'uint8'), label: FixedLen((), 'int64')}}) -> a dict of tensor views per sample; "
                        f"DataLoader(batch_size={bs}, num_workers={workers}, collate_fn=tfrec_fast.torch.collate)")


def dl_tfrec_fast_batched(opts):
    _tfrec_fast()
    torch, D, meta, idx, bs, workers = _torch_setup(opts)
    from tfrec_fast.torch import TFRecordDataset

    ds = TFRecordDataset(opts.file, index=idx, spec=_mnist_spec(), batch_size=bs)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, **_dl_kwargs(workers))
    return _loader_case(torch, D, meta, loader,
                        f"the same dataset with batch_size={bs} (one parse_examples per batch, columns -> "
                        f"torch.from_numpy; batches reach the training process through the worker's "
                        f"shared-memory ring); DataLoader(batch_size=None, num_workers={workers})")


def dl_tfrec_fast_batched_noring(opts):
    """The batched dataset with worker_ring=False: torch's own per-tensor hand-over from the workers."""
    _tfrec_fast()
    torch, D, meta, idx, bs, workers = _torch_setup(opts)
    from tfrec_fast.torch import TFRecordDataset

    ds = TFRecordDataset(opts.file, index=idx, spec=_mnist_spec(), batch_size=bs, worker_ring=False)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, **_dl_kwargs(workers))
    return _loader_case(torch, D, meta, loader,
                        f"the same dataset with batch_size={bs}, worker_ring=False: each tensor of each batch "
                        "handed over by torch (a new shared-memory segment, its file descriptor sent over a "
                        f"socket); DataLoader(batch_size=None, num_workers={workers})")


def dl_tfrec_fast_batched_inproc(opts):
    """The batched dataset with num_workers=0: reading and parsing in the training process (GIL released
    while reading and parsing), as tf.data runs there -- no worker -> main tensor transfer."""
    _tfrec_fast()
    torch, D, meta, idx, bs, _ = _torch_setup(opts)
    from tfrec_fast.torch import TFRecordDataset

    ds = TFRecordDataset(opts.file, index=idx, spec=_mnist_spec(), batch_size=bs)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
    return _loader_case(torch, D, meta, loader,
                        f"the same dataset with batch_size={bs}; DataLoader(batch_size=None, num_workers=0): in "
                        "the training process, like the tf.data row (informational: not the issue's setting)")


def dl_tfrec_fast_indexed(opts):
    _tfrec_fast()
    torch, D, meta, idx, bs, workers = _torch_setup(opts)
    from tfrec_fast.torch import IndexedTFRecordDataset, collate

    ds = IndexedTFRecordDataset(opts.file, _mnist_spec(), index=idx)
    sampler = torch.utils.data.RandomSampler(ds, generator=torch.Generator().manual_seed(0))
    loader = torch.utils.data.DataLoader(ds, batch_size=bs, sampler=sampler, collate_fn=collate,
                                         **_dl_kwargs(workers))
    return _loader_case(torch, D, meta, loader,
                        f"tfrec_fast.torch.IndexedTFRecordDataset(file, spec, index=FILE.idx), RandomSampler "
                        f"(exact shuffle, a new permutation every epoch); DataLoader(batch_size={bs}, "
                        f"num_workers={workers}, collate_fn=tfrec_fast.torch.collate): __getitems__ = one "
                        "get_batch + parse_examples per batch, then stacked and handed over through the ring")


def _tfrecord_decode(x):
    """The transform given to the tfrecord package's dataset: bytes -> uint8 [28, 28], [label] -> int64 []."""
    import numpy as np
    import torch

    return {"image_raw": torch.from_numpy(np.frombuffer(x["image_raw"], dtype=np.uint8).reshape(28, 28)),
            "label": torch.from_numpy(x["label"]).reshape(())}


def dl_tfrecord(opts):
    torch, D, meta, idx, bs, workers = _torch_setup(opts)
    try:
        from tfrecord.torch.dataset import TFRecordDataset
    except ImportError as e:
        raise Skip(f"tfrecord not importable: {e}") from e
    import warnings

    # np.frombuffer(bytes) is read-only; torch.from_numpy warns once about it (no copy is made)
    warnings.filterwarnings("ignore", message=".*not writable.*")
    ds = TFRecordDataset(opts.file, idx, description={"image_raw": "byte", "label": "int"},
                         transform=_tfrecord_decode)
    loader = torch.utils.data.DataLoader(ds, batch_size=bs, **_dl_kwargs(workers))
    return _loader_case(torch, D, meta, loader,
                        f"tfrecord.torch.dataset.TFRecordDataset(file, FILE.idx, description={{'image_raw': 'byte', "
                        f"'label': 'int'}}, transform=np.frombuffer(...).reshape(28, 28) -> torch.from_numpy); "
                        f"DataLoader(batch_size={bs}, num_workers={workers}); the index shards the file across workers")


class _TFToTorch:
    """Iterating yields the tf.data pipeline's batches as dicts of torch tensors."""

    def __init__(self, tf, torch, ds):
        self.tf, self.torch, self.ds = tf, torch, ds

    def __iter__(self):
        from_numpy = self.torch.from_numpy
        for b in self.ds:
            yield {"image_raw": from_numpy(b["image_raw"].numpy()), "label": from_numpy(b["label"].numpy())}


def dl_tf(opts):
    torch, D, meta, idx, bs, workers = _torch_setup(opts)
    try:
        import tensorflow as tf
    except ImportError as e:
        raise Skip(f"tensorflow not importable: {e}") from e
    features = {"image_raw": tf.io.FixedLenFeature([], tf.string), "label": tf.io.FixedLenFeature([], tf.int64)}

    def parse(serialized):
        ex = tf.io.parse_example(serialized, features)
        img = tf.reshape(tf.io.decode_raw(ex["image_raw"], tf.uint8), [-1, 28, 28])
        return {"image_raw": img, "label": ex["label"]}

    ds = (tf.data.TFRecordDataset(opts.file).batch(bs)
          .map(parse, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE))
    return _loader_case(torch, D, meta, _TFToTorch(tf, torch, ds),
                        f"TF {tf.__version__}: tf.data.TFRecordDataset(file).batch({bs}).map(tf.io.parse_example + "
                        "tf.io.decode_raw + reshape, num_parallel_calls=AUTOTUNE).prefetch(AUTOTUNE); each batch "
                        "-> torch.from_numpy(t.numpy()); no DataLoader (tf.data runs its own threads)")


# ---------------------------------------------------------------------------------- random access
# --file is small_64b.tfrecord or large_100k.tfrecord with its index FILE.idx. Every case reads the
# same records: n_access indices drawn uniformly (seeded) in setup. Records/s counts records read.

RA_SEED = 7
RA_BATCH = 256
RA_DEFAULT_ACCESS = {"small_64b.tfrecord": 256 * 1024, "large_100k.tfrecord": 256 * 16}


def _ra_setup(opts):
    import numpy as np

    idx = C.index_path(opts.file)
    if not idx.exists():
        raise Skip(f"{idx} missing: bench_torch.py writes it")
    raw = np.array(idx.read_bytes().split(), dtype=np.int64).reshape(-1, 2)  # setup only
    offsets, sizes = raw[:, 0].copy(), raw[:, 1].copy()
    n = opts.n_access or RA_DEFAULT_ACCESS.get(os.path.basename(opts.file), 256 * 256)
    which = np.random.default_rng(RA_SEED).integers(0, len(offsets), size=n, dtype=np.int64)
    return idx, offsets, sizes, which


def _ra_expected(path, offsets, sizes, which, k=RA_BATCH) -> list[bytes]:
    """Payloads of the first k accessed records, read with plain pread (no CRC check)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return [os.pread(fd, int(sizes[i]) - 16, int(offsets[i]) + 12) for i in which[:k]]
    finally:
        os.close(fd)


def _ra_check(got, want) -> str | None:
    if len(got) != len(want):
        return f"{len(got)} records, expected {len(want)}"
    for j, (g, w) in enumerate(zip(got, want)):
        if bytes(g) != w:
            return f"access {j}: payload differs from pread at the index's offset"
    return None


def ra_tfrec_fast_batch(opts):
    tfr = _tfrec_fast()
    from tfrec_fast.index import IndexedTFRecordReader, load_index

    idx, offsets, sizes, which = _ra_setup(opts)
    reader = IndexedTFRecordReader(opts.file, load_index(idx))
    chunks = [which[a:a + RA_BATCH] for a in range(0, len(which), RA_BATCH)]
    get_batch = reader.get_batch

    def run():
        n = 0
        for c in chunks:
            n += len(get_batch(c))
        return n

    def check():
        return _ra_check(reader.get_batch(which[:RA_BATCH]).to_list(), _ra_expected(opts.file, offsets, sizes, which))

    return Case(run, check=check, info=f"IndexedTFRecordReader(file, load_index(FILE.idx)).get_batch(int64 array of "
                                       f"{RA_BATCH} random indices) per call; both CRCs and the index's sizes verified")


def ra_tfrec_fast_single(opts):
    _tfrec_fast()
    from tfrec_fast.index import IndexedTFRecordReader, load_index

    idx, offsets, sizes, which = _ra_setup(opts)
    reader = IndexedTFRecordReader(opts.file, load_index(idx))
    indices = which.tolist()

    def run():
        for i in indices:
            reader[i]
        return len(indices)

    def check():
        return _ra_check([reader[i] for i in indices[:RA_BATCH]], _ra_expected(opts.file, offsets, sizes, which))

    return Case(run, check=check, info="r[i] per record (Python int), both CRCs verified")


def ra_probe(opts):
    try:
        import crc32c
    except ImportError as e:
        raise Skip(f"crc32c not importable: {e}") from e
    import struct

    idx, offsets, sizes, which = _ra_setup(opts)
    offs, szs = offsets.tolist(), sizes.tolist()
    indices = which.tolist()
    path = opts.file
    crc, masked, unpack_from = crc32c.crc32c, C.masked, struct.unpack_from

    def read(fd, i):
        off, size = offs[i], szs[i]
        buf = os.pread(fd, size, off)
        (length,) = unpack_from("<Q", buf, 0)
        mv = memoryview(buf)
        if len(buf) != size or length != size - 16:
            raise ValueError(f"record {i}: length {length} does not match the index's size {size}")
        if unpack_from("<I", buf, 8)[0] != masked(crc(mv[:8])):
            raise ValueError(f"record {i}: length CRC mismatch")
        data = mv[12:12 + length]
        if unpack_from("<I", buf, 12 + length)[0] != masked(crc(data)):
            raise ValueError(f"record {i}: data CRC mismatch")
        return data

    def run():
        fd = os.open(path, os.O_RDONLY)
        try:
            for i in indices:
                read(fd, i)
        finally:
            os.close(fd)
        return len(indices)

    def check():
        fd = os.open(path, os.O_RDONLY)
        try:
            got = [read(fd, i) for i in indices[:RA_BATCH]]
        finally:
            os.close(fd)
        return _ra_check(got, _ra_expected(path, offsets, sizes, which))

    return Case(run, check=check, info="per record: os.pread(fd, size, offset) from the index + both CRCs with the "
                                       "`crc32c` package, in Python (the tfrecord package has no random access)")


# name -> (row label, setup). Labels are what the tables show.
CASES = {
    "ceiling": ("ceiling: readinto(1 MiB) + CRC32C", read_ceiling),
    "ceiling_pkg": ("probe: readinto(1 MiB) + `crc32c` pkg", read_ceiling_pkg),
    "tfrec_fast_batches": ("tfrec_fast TFRecordReader.iter_batches", read_tfrec_fast_batches),
    "tfrec_fast_records": ("tfrec_fast read_records (per record)", read_tfrec_fast_records),
    "tf": ("TensorFlow TFRecordDataset.batch(1024)", read_tf),
    "tfrecord": ("tfrecord tfrecord_iterator", read_tfrecord),
    "w_tfrec_fast_batch": ("tfrec_fast TFRecordWriter.write_batch", write_tfrec_fast_batch),
    "w_tfrec_fast_each": ("tfrec_fast TFRecordWriter.write (per record)", write_tfrec_fast_each),
    "w_tfrecord": ("tfrecord TFRecordWriter.write", write_tfrecord),
    "w_tf": ("TensorFlow tf.io.TFRecordWriter.write", write_tf),
    "ex_tfrec_fast": ("tfrec_fast parse_examples (batch 1024)", ex_parse_tfrec_fast),
    "ex_tf_eager": ("TensorFlow tf.io.parse_example (batch 1024, eager)", ex_parse_tf_eager),
    "ex_tf_function": ("TensorFlow tf.io.parse_example (batch 1024, tf.function)", ex_parse_tf_function),
    "ex_tfrecord": ("tfrecord example_loader per-record decode", ex_parse_tfrecord),
    "enc_tfrec_fast_columns": ("tfrec_fast encode_examples (columns, 1024 rows)", ex_enc_tfrec_fast_columns),
    "enc_tfrec_fast_each": ("tfrec_fast encode_example (per row)", ex_enc_tfrec_fast_each),
    "enc_proto_tf": ("protobuf tf.train.Example.SerializeToString (per row)", ex_enc_proto_tf),
    "enc_proto_tfrec_fast": ("protobuf tfrec_fast.proto.Example.SerializeToString (per row)", ex_enc_proto_tfrec_fast),
    "dl_tfrec_fast_batched": ("tfrec_fast TFRecordDataset(batch_size=256)", dl_tfrec_fast_batched),
    "dl_tfrec_fast_batched_noring": ("tfrec_fast TFRecordDataset(batch_size=256, worker_ring=False)",
                                     dl_tfrec_fast_batched_noring),
    "dl_tfrec_fast_batched_inproc": ("tfrec_fast TFRecordDataset(batch_size=256), num_workers=0",
                                     dl_tfrec_fast_batched_inproc),
    "dl_tfrec_fast_records": ("tfrec_fast TFRecordDataset (per sample)", dl_tfrec_fast_records),
    "dl_tfrec_fast_indexed": ("tfrec_fast IndexedTFRecordDataset + RandomSampler", dl_tfrec_fast_indexed),
    "dl_tfrecord": ("tfrecord TFRecordDataset (with index)", dl_tfrecord),
    "dl_tf": ("TensorFlow tf.data -> torch.from_numpy", dl_tf),
    "ra_tfrec_fast_batch": ("tfrec_fast get_batch(256 random)", ra_tfrec_fast_batch),
    "ra_tfrec_fast_single": ("tfrec_fast r[i]", ra_tfrec_fast_single),
    "ra_probe": ("probe: os.pread + crc32c in Python", ra_probe),
}
