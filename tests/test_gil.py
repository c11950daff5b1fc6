"""The GIL is released while a batch is read, inflated and checksummed."""

import threading
import time

import tfrec_fast


def _longest_stall(work):
    """Runs work() in a thread; returns (its duration, the longest pause of this thread meanwhile)."""
    done = threading.Event()
    span = {}

    def run():
        start = time.perf_counter()
        work()
        span["seconds"] = time.perf_counter() - start
        done.set()

    thread = threading.Thread(target=run)
    last = time.perf_counter()
    longest = 0.0
    thread.start()
    while not done.is_set():
        now = time.perf_counter()
        longest = max(longest, now - last)
        last = now
    thread.join()
    return span["seconds"], longest


def test_reading_a_batch_lets_other_threads_run(tmp_path):
    path = tmp_path / "big.tfrecord"
    record = bytes(range(256)) * 4096  # 1 MiB
    with tfrec_fast.TFRecordWriter(path, compression="gzip", level=1) as writer:
        for _ in range(192):
            writer.write(record)

    def read_all_at_once():
        with tfrec_fast.TFRecordReader(path, "gzip") as reader:
            assert len(reader.read_batch(max_bytes=1 << 40)) == 192

    seconds, stall = _longest_stall(read_all_at_once)
    # Holding the GIL would stall this thread for the whole read.
    assert seconds > 0.05, "the read was too short to tell"
    assert stall < seconds / 2, (seconds, stall)
