"""The GIL is released while a batch is read, inflated and checksummed.

No clock: the switch interval is set so long that CPython never takes the GIL from a thread by
force, so another thread can run only while the running one releases it itself. The reader thread
signals just before its call; the main thread, woken by that signal, records whether the call had
returned by the time it first ran. It can run before then only if the call released the GIL.
(How much the release is worth, threads against one, is measured by bench/bench_threads.py.)
"""

import sys
import threading

import pytest

import tfrec_fast


def _ran_during(call):
    """Whether another thread ran Python code while `call()` was under way in a thread."""
    entered, returned = threading.Event(), []

    def run():
        entered.set()  # nothing after this releases the GIL before call() itself might
        try:
            call()
        finally:
            returned.append(True)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e6)  # no forced switch: the GIL changes hands only when released
    try:
        thread = threading.Thread(target=run)
        thread.start()
        entered.wait()  # (blocks, releasing the GIL: the thread runs up to its call)
        during = not returned  # the first thing this thread does once it holds the GIL again
        thread.join()
    finally:
        sys.setswitchinterval(interval)
    return during


@pytest.fixture(scope="module")
def big_gzip_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("gil") / "big.tfrecord"
    record = bytes(range(256)) * 4096  # 1 MiB
    with tfrec_fast.TFRecordWriter(path, compression="gzip", level=1) as writer:
        for _ in range(64):
            writer.write(record)
    return path


def test_reading_a_batch_lets_other_threads_run(big_gzip_file):
    # A call that keeps the GIL can never let the main thread run first; one that releases it
    # does unless the woken thread is not scheduled during the whole read (~64 MiB inflated and
    # checksummed): a second or third try cannot make a GIL-holding call pass.
    got, ran = [], []
    for _ in range(3):
        with tfrec_fast.TFRecordReader(big_gzip_file, "gzip") as reader:  # (opened beforehand)
            ran.append(_ran_during(lambda: got.append(len(reader.read_batch(max_bytes=1 << 40)))))
        if ran[-1]:
            break
    assert ran[-1], ran
    assert set(got) == {64}


def test_the_method_tells_a_call_that_keeps_the_gil():
    """A pure-Python loop holds the GIL to the end: no other thread runs before it returns."""
    assert not _ran_during(lambda: sum(range(3_000_000)))
