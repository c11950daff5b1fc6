"""parse_examples(num_threads=N): the batch cut into parts decoded on the C++ task pool must give
exactly what one thread gives (every spec kind, SequenceExamples, defaults, missing features,
damaged records: the same error, for the first failing record), start a bounded number of
threads, and work in a child process made by fork (which has none of its parent's threads)."""

from __future__ import annotations

import multiprocessing
import os
import struct
import sys
import threading

import numpy as np
import pytest

from tfrec_fast import RecordBatch, _core
from tfrec_fast.errors import ExampleParseError
from tfrec_fast.example import (
    BytesColumn,
    FixedLen,
    FixedLenSequence,
    Ragged,
    VarLen,
    VarLenSequence,
    parse_examples,
    parse_sequence_examples,
)

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st
from test_example_fuzz import ld, varint  # noqa: E402  (the wire format, written by hand)

# ---- records written by hand (so they can be unusual: repeated keys, packed and unpacked lists,
# lists of another kind) -------------------------------------------------------------------------


def feature(kind: str, values, packed: bool = True) -> bytes:
    if kind == "bytes":
        return ld(1, b"".join(ld(1, v) for v in values))
    if kind == "float":
        if packed:
            return ld(2, ld(1, struct.pack(f"<{len(values)}f", *values)) if values else b"")
        return ld(2, b"".join(varint(1 << 3 | 5) + struct.pack("<f", v) for v in values))
    if packed:
        return ld(3, ld(1, b"".join(varint(v) for v in values)) if values else b"")
    return ld(3, b"".join(varint(1 << 3) + varint(v) for v in values))


def features(entries) -> bytes:
    return b"".join(ld(1, ld(1, key.encode()) + ld(2, value)) for key, value in entries)


def example(entries) -> bytes:
    return ld(1, features(entries))


def sequence_example(context, lists) -> bytes:
    feature_lists = b"".join(
        ld(1, ld(1, key.encode()) + ld(2, b"".join(ld(1, f) for f in steps)))
        for key, steps in lists
    )
    return ld(1, features(context)) + ld(2, feature_lists)


# ---- random records and specs --------------------------------------------------------------------

KINDS = ("int64", "float", "bytes")
int64s = st.integers(-(1 << 63), (1 << 63) - 1)
floats = st.floats(width=32, allow_nan=False)
blobs = st.binary(max_size=12)


@st.composite
def values_of(draw, kind: str, size=None):
    n = draw(st.integers(0, 4)) if size is None else size
    element = {"int64": int64s, "float": floats, "bytes": blobs}[kind]
    return draw(st.lists(element, min_size=n, max_size=n))


@st.composite
def a_feature(draw, kind: str):
    """Mostly what the spec asks for (sometimes of another size or kind, or unpacked)."""
    if draw(st.integers(0, 9)) == 0:
        kind = draw(st.sampled_from(KINDS))
    size = draw(st.sampled_from([None, 1, 2, 4]))
    return feature(kind, draw(values_of(kind, size)), packed=draw(st.booleans()))


SPECS = {
    "i": FixedLen((), "int64"),
    "i_default": FixedLen((), "int64", default=-7),
    "f2": FixedLen((2,), "float32", default=[0.5, 1.5]),
    "b": FixedLen((), "bytes", default=b"none"),
    "b2": FixedLen((2,), "bytes"),
    "raw": FixedLen((4,), "uint8", default=[1, 2, 3, 4]),
    "vi": VarLen("int64"),
    "vf": VarLen("float32"),
    "vb": VarLen("bytes"),
    "req": VarLen("int64", default=None),
}
SPEC_KINDS = {
    "i": "int64",
    "i_default": "int64",
    "f2": "float",
    "b": "bytes",
    "b2": "bytes",
    "raw": "bytes",
    "vi": "int64",
    "vf": "float",
    "vb": "bytes",
    "req": "int64",
}


@st.composite
def a_record(draw, names):
    entries = []
    for name in names:
        if draw(st.integers(0, 5)) == 0:
            continue  # missing
        if name == "raw" and draw(st.booleans()):
            value = feature("bytes", [draw(st.binary(min_size=4, max_size=4))])
        else:
            value = draw(a_feature(SPEC_KINDS[name]))
        entries.append((name, value))
    entries += [(f"other{i}", feature("int64", [i])) for i in range(draw(st.integers(0, 2)))]
    entries = draw(st.permutations(entries))
    if entries and draw(st.integers(0, 15)) == 0:
        entries.append(entries[0])  # a key twice: the last one counts
    record = example(entries)
    if record and draw(st.integers(0, 30)) == 0:  # damage
        at = draw(st.integers(0, len(record) - 1))
        record = record[:at] + bytes([draw(st.integers(0, 255))]) + record[at + 1 :]
    return record


def canonical(column):
    """A column as plain data, comparable with ==."""
    if isinstance(column, Ragged):
        return ("ragged", canonical(column.values), column.row_splits.tolist())
    if isinstance(column, BytesColumn):
        splits = None if column.row_splits is None else column.row_splits.tolist()
        return ("bytes", column.to_list(), splits)
    return ("array", column.dtype.str, column.shape, column.tobytes())


def outcome(parse, *args, **kwargs):
    try:
        result = parse(*args, **kwargs)
    except ExampleParseError as error:
        return ("error", str(error), error.record_index, error.feature)
    if isinstance(result, tuple):  # parse_sequence_examples
        return tuple({k: canonical(v) for k, v in part.items()} for part in result)
    return {k: canonical(v) for k, v in result.items()}


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_threads_give_what_one_thread_gives(data):
    names = data.draw(st.lists(st.sampled_from(sorted(SPECS)), min_size=1, max_size=6, unique=True))
    records = data.draw(st.lists(a_record(names), max_size=40))
    spec = {name: SPECS[name] for name in names}
    batch = RecordBatch.from_records(records)
    one = outcome(parse_examples, batch, spec, num_threads=1)
    for threads in (2, 3, data.draw(st.integers(4, 9))):
        assert outcome(parse_examples, batch, spec, num_threads=threads) == one


@st.composite
def a_sequence_record(draw):
    context = [
        (name, draw(a_feature(kind)))
        for name, kind in (("c", "int64"), ("cb", "bytes"))
        if draw(st.integers(0, 4))
    ]
    lists = []
    for name, kind, size in (
        ("fixed", "float", 2),
        ("var", "int64", None),
        ("vbytes", "bytes", None),
    ):
        if draw(st.integers(0, 4)) == 0:
            continue
        steps = draw(
            st.lists(st.builds(lambda v, k=kind: feature(k, v), values_of(kind, size)), max_size=4)
        )
        lists.append((name, steps))
    return sequence_example(context, lists)


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.lists(a_sequence_record(), max_size=30), st.integers(2, 6))
def test_sequence_examples_with_threads(records, threads):
    batch = RecordBatch.from_records(records)
    context = {"c": VarLen("int64"), "cb": FixedLen((), "bytes", default=b"?")}
    lists = {
        "fixed": FixedLenSequence((2,), "float32"),
        "var": VarLenSequence("int64"),
        "vbytes": VarLenSequence("bytes"),
    }
    one = outcome(parse_sequence_examples, batch, context, lists, num_threads=1)
    assert outcome(parse_sequence_examples, batch, context, lists, num_threads=threads) == one


def mnist_like(n: int):
    return [
        example(
            [
                ("index", feature("int64", [i])),
                ("label", feature("int64", [i % 10])),
                ("image", feature("bytes", [bytes([i % 251]) * 784])),
            ]
        )
        for i in range(n)
    ]


MNIST_SPEC = {
    "index": FixedLen((), "int64"),
    "label": FixedLen((), "int64"),
    "image": FixedLen((784,), "uint8"),
}


def test_large_batch_same_columns():
    batch = RecordBatch.from_records(mnist_like(3000))
    one = parse_examples(batch, MNIST_SPEC, num_threads=1)
    for threads in (2, 4, None):
        many = parse_examples(batch, MNIST_SPEC, num_threads=threads)
        for key in MNIST_SPEC:
            assert np.array_equal(many[key], one[key]), (key, threads)
    assert one["index"].tolist() == list(range(3000))


@pytest.mark.parametrize("threads", [2, 3, 8])
def test_the_first_damaged_record_is_reported(threads):
    records = mnist_like(2000)
    records[1500] = records[1500][:-3]  # truncated
    records[300] = example(
        [
            ("index", feature("float", [1.0])),
            ("label", feature("int64", [1])),
            ("image", feature("bytes", [b"x" * 784])),
        ]
    )  # the wrong kind
    batch = RecordBatch.from_records(records)
    with pytest.raises(ExampleParseError) as one:
        parse_examples(batch, MNIST_SPEC, num_threads=1)
    with pytest.raises(ExampleParseError) as many:
        parse_examples(batch, MNIST_SPEC, num_threads=threads)
    assert one.value.record_index == 300 and one.value.feature == "index"
    assert (str(many.value), many.value.record_index) == (str(one.value), one.value.record_index)
    del records[300]  # now the truncated record (1499) comes first
    batch = RecordBatch.from_records(records)
    with pytest.raises(ExampleParseError) as later:
        parse_examples(batch, MNIST_SPEC, num_threads=threads)
    assert later.value.record_index == 1499


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "2"])
def test_num_threads_must_be_a_positive_int(bad):
    with pytest.raises(ValueError, match="num_threads"):
        parse_examples(mnist_like(1), MNIST_SPEC, num_threads=bad)


def test_the_pool_starts_at_most_the_threads_asked_for():
    batch = RecordBatch.from_records(mnist_like(200))
    for _ in range(20):
        parse_examples(batch, MNIST_SPEC, num_threads=3)
    started = _core._task_pool_threads()
    assert 2 <= started
    for _ in range(20):
        parse_examples(batch, MNIST_SPEC, num_threads=2)
    assert _core._task_pool_threads() == started  # the same workers, no new ones
    if os.path.isdir("/proc/self/task"):
        tasks = len(os.listdir("/proc/self/task"))
        for _ in range(50):
            parse_examples(batch, MNIST_SPEC, num_threads=3)
        assert len(os.listdir("/proc/self/task")) == tasks


def test_calls_from_several_python_threads_at_once():
    batch = RecordBatch.from_records(mnist_like(1500))
    want = parse_examples(batch, MNIST_SPEC, num_threads=1)
    failures = []

    def work():
        for _ in range(15):
            got = parse_examples(batch, MNIST_SPEC, num_threads=2)
            if not all(np.array_equal(got[k], want[k]) for k in MNIST_SPEC):
                failures.append("differs")

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures


def test_small_batches_start_no_thread():
    """The automatic choice stays in the calling thread below its threshold."""
    code = (
        "import tfrec_fast as t, tfrec_fast._core as c\n"
        "b = t.RecordBatch.from_records([t.encode_example({'x': [1]})] * 8)\n"
        "for _ in range(100): t.parse_examples(b, {'x': t.FixedLen((), 'int64')})\n"
        "print(c._task_pool_threads())\n"
    )
    assert _in_a_fresh_process(code) == ["0"]


def test_small_calls_wake_the_workers_only_for_the_next_call_of_a_loop():
    """A call with too little work to wait for a worker to start or wake runs in the calling
    thread; it starts (and wakes) the workers only when such calls come close together, for the
    next call. Asserted without a clock: a one-record call has nothing for a worker however
    close; the first call of a process has no earlier one to be close to; a loop of calls starts
    them. Whether "close" (the workers' 1 ms spin) pays is a benchmark's question:
    bench/bench_threads.py's parse_alternated:DATA:2:gap2000 rows."""
    code = (
        "import tfrec_fast as t, tfrec_fast._core as c\n"
        "b = t.RecordBatch.from_records([t.encode_example({'x': [1]})] * 256)\n"
        "one = t.RecordBatch.from_records([t.encode_example({'x': [1]})])\n"
        "s = {'x': t.FixedLen((), 'int64')}\n"
        "for _ in range(20):  # one record: one part, nothing for a worker\n"
        "    assert t.parse_examples(one, s, num_threads=2)['x'].tolist() == [1]\n"
        "print(c._task_pool_threads())\n"
        "assert t.parse_examples(b, s, num_threads=2)['x'].tolist() == [1] * 256\n"
        "print(c._task_pool_threads())  # the process's first small call: none before it\n"
        "calls = 0\n"
        "while c._task_pool_threads() == 0 and calls < 1000:  # a loop's calls\n"
        "    assert t.parse_examples(b, s, num_threads=2)['x'].tolist() == [1] * 256\n"
        "    calls += 1\n"
        "print(c._task_pool_threads())\n"
        "for _ in range(20):  # with the worker started: the same results\n"
        "    assert t.parse_examples(b, s, num_threads=2)['x'].tolist() == [1] * 256\n"
        "print(c._task_pool_threads())\n"
    )
    assert _in_a_fresh_process(code) == ["0", "0", "1", "1"]


def _in_a_fresh_process(code: str) -> list:
    """What `code` prints, run by a new interpreter (whose pool no earlier test has started),
    split into words."""
    import subprocess

    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


# Records enough for a call to start (or wait for) the pool's workers: with less work, a call
# that finds none awake runs in the calling thread (the first of a process among them).
POOL_RECORDS = 3000


def _parse_in_child(queue):
    batch = RecordBatch.from_records(mnist_like(POOL_RECORDS))
    got = parse_examples(batch, MNIST_SPEC, num_threads=2)
    queue.put((got["index"].tolist() == list(range(POOL_RECORDS)), _core._task_pool_threads()))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this system")
def test_a_forked_child_makes_its_own_pool():
    batch = RecordBatch.from_records(mnist_like(POOL_RECORDS))
    want = list(range(POOL_RECORDS))
    parse_examples(batch, MNIST_SPEC, num_threads=2)  # the parent's pool is running
    assert _core._task_pool_threads() >= 1
    pid = os.fork()
    if pid == 0:  # the child: none of the parent's workers exist here
        status = 1
        try:
            got = parse_examples(batch, MNIST_SPEC, num_threads=2)
            if got["index"].tolist() == want and _core._task_pool_threads() == 1:
                status = 0
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_parse_in_child, args=(queue,))
    child.start()
    ok, threads = queue.get(timeout=120)
    child.join(timeout=120)
    assert ok and threads == 1 and child.exitcode == 0
    assert parse_examples(batch, MNIST_SPEC, num_threads=2)["index"].tolist() == want


class _PoolInAWorker:
    """A map-style dataset of one item: parses POOL_RECORDS records with the automatic
    num_threads where it runs, and says whether the result is right, how many pool workers that
    process has then, and whether it is a DataLoader worker. (Module level: picklable for any
    start method.)"""

    def __len__(self):
        return 1

    def __getitem__(self, i):
        import torch.utils.data

        batch = RecordBatch.from_records(mnist_like(POOL_RECORDS))
        got = parse_examples(batch, MNIST_SPEC)
        return (
            got["index"].tolist() == list(range(POOL_RECORDS)),
            _core._task_pool_threads(),
            torch.utils.data.get_worker_info() is not None,
        )


_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


@pytest.mark.skipif(
    (_CORES or 1) < 2, reason="one usable core: the automatic choice is one thread everywhere"
)
def test_one_thread_by_default_inside_a_dataloader_worker():
    """DataLoader workers already share the cores: the automatic choice is one thread there, so a
    worker that parses a batch large enough for the pool starts none. A fresh process that is
    not a worker, parsing the same batch, starts it (the contrast shows the test can fail)."""
    torch = pytest.importorskip("torch")
    outside = _in_a_fresh_process(
        "import sys; sys.path.insert(0, %r)\n"
        "from test_parse_threads import _PoolInAWorker\n"
        "print(*_PoolInAWorker()[0])\n" % os.path.dirname(os.path.abspath(__file__))
    )
    assert outside[0] == "True" and int(outside[1]) >= 1 and outside[2] == "False", outside
    loader = torch.utils.data.DataLoader(_PoolInAWorker(), batch_size=None, num_workers=1)
    ((ok, workers, in_worker),) = list(loader)
    assert in_worker and ok and workers == 0
