"""The main job on the bundled example: read and verify a TensorFlow-written file, then write it
again (plain and gzip), read the copies back and check they hold the same records."""

import tempfile
from pathlib import Path

import numpy as np

import tfrec_fast as tfr

SAMPLE = Path(__file__).with_name("data") / "mnist_like.tfrecord"

records = list(tfr.read_records(SAMPLE))  # read-only memoryviews, both CRCs checked
print(f"{SAMPLE.name}: {len(records)} records, CRC32C backend {tfr.crc32c_backend()}")

with tfr.TFRecordReader(SAMPLE) as reader:
    batch = reader.read_batch()  # one buffer + offsets, numpy views of C++ memory
print(f"one batch: {len(batch)} records, {batch.nbytes} bytes, offsets {batch.offsets[:4]}...")

with tempfile.TemporaryDirectory() as tmp:
    for compression in (None, "gzip"):
        copy = Path(tmp) / f"copy-{compression}.tfrecord"
        with tfr.TFRecordWriter(copy, compression=compression) as writer:
            writer.write_batch(batch)
        again = list(tfr.read_records(copy, compression))
        assert [bytes(r) for r in again] == [bytes(r) for r in records]
        print(f"rewritten with compression={compression}: {copy.stat().st_size} bytes, identical")
    same = (Path(tmp) / "copy-None.tfrecord").read_bytes() == SAMPLE.read_bytes()
    print(f"uncompressed copy byte-identical to TensorFlow's file: {same}")
    assert same and np.array_equal(
        batch.data[: len(records[0])], np.frombuffer(records[0], np.uint8)
    )
