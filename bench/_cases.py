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
}
