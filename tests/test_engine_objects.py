"""The engine's pybind11 objects under misuse: an instance made by `Cls.__new__(Cls)` alone, whose
C++ value was never built, and pickling at every protocol. Each must raise a TypeError, never run
on raw memory or abort the process (pybind11 <= 3.1 does both by default)."""

import json
import pickle
import subprocess
import sys

import pytest

import tfrec_fast
from tfrec_fast import _core

# Every attribute of every class of _core, on a fresh __new__-only instance, called with 0..3
# arguments: what each call raised. Runs in a child process, as a crash would end it.
SWEEP = r"""
import json
from tfrec_fast import _core
SKIP = {"__new__", "__init__", "__class__", "__init_subclass__", "__subclasshook__"}
seen = {}
for cname, cls in sorted(vars(_core).items()):
    if not isinstance(cls, type) or type(cls).__name__ != "pybind11_type":
        continue
    for aname in sorted(set(dir(cls)) - SKIP):
        for nargs in range(4):
            try:
                attr = getattr(cls.__new__(cls), aname)
                if callable(attr):
                    attr(*[None] * nargs)
                outcome = "ok"
            except Exception as e:
                outcome = f"{type(e).__name__}: {e}"
            seen.setdefault(f"{cname}.{aname}", []).append(outcome)
            if not callable(getattr(cls, aname)):
                break
    for name, probe in (("len", len), ("next", next), ("repr", repr), ("bool", bool)):
        try:
            probe(cls.__new__(cls))
            outcome = "ok"
        except Exception as e:
            outcome = f"{type(e).__name__}: {e}"
        seen[f"{cname}.<{name}>"] = [outcome]
print(json.dumps(seen))
"""

# A sample of each class's methods and properties: the sweep must find them refused.
REFUSED = [
    "RecordWriter.close",
    "RecordWriter.flush",
    "RecordWriter.write_batch",
    "RecordWriter.records_written",
    "RecordWriter.write",
    "RecordReader.read_batch",
    "RecordReader.tell",
    "RecordReader.close",
    "RecordReader.name",
    "RecordReader.<next>",
    "IndexedReader.read",
    "IndexedReader.read_one",
    "IndexedReader.path",
    "IndexedReader.<len>",
    "RecordBatch.data",
    "RecordBatch.offsets",
    "RecordBatch.to_list",
    "RecordBatch.<len>",
    "RecordBatch.<repr>",
    "_BatchIterator.<next>",
    "FieldSpec.name",
    "FieldSpec.count",
    "FieldSpec.default",
    "FieldSpec.<repr>",
    "BufferPool.kept_bytes",
    "BufferPool.max_bytes",
]


def test_no_method_runs_on_an_instance_made_by_new_alone():
    child = subprocess.run(
        [sys.executable, "-c", SWEEP], capture_output=True, text=True, timeout=300
    )
    assert child.returncode == 0, child.stderr[-2000:]
    seen = json.loads(child.stdout)
    for name in REFUSED:
        assert any("TypeError" in o and "not initialized" in o for o in seen[name]), (
            name,
            seen[name],
        )
    for name, outcomes in seen.items():
        assert not any(o.startswith(("SystemError", "MemoryError")) for o in outcomes), (
            name,
            outcomes,
        )


def test_functions_refuse_an_unbuilt_batch_argument():
    batch = _core.RecordBatch.__new__(_core.RecordBatch)
    with pytest.raises(TypeError, match="not initialized"):
        tfrec_fast.parse_examples(batch, {"x": tfrec_fast.FixedLen((), "int64")})


def test_hand_written_slots_refuse_an_unbuilt_instance():
    """The calls that bypass pybind11's dispatch (RecordWriter.write, reader and batch iteration,
    len of a batch) check for themselves."""
    with pytest.raises(TypeError):
        _core.RecordWriter.__new__(_core.RecordWriter).write(b"x")
    with pytest.raises(TypeError):
        _core.RecordWriter.write(object(), b"x")
    with pytest.raises(TypeError):
        next(_core.RecordReader.__new__(_core.RecordReader))
    with pytest.raises(TypeError):
        next(_core._BatchIterator.__new__(_core._BatchIterator))
    with pytest.raises(TypeError):
        len(tfrec_fast.RecordBatch.__new__(tfrec_fast.RecordBatch))


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_engine_objects_refuse_pickling_at_every_protocol(protocol, tmp_path):
    """Protocols 0 and 1 used to abort the process (copyreg builds pybind11's base class)."""
    path = str(tmp_path / "a.tfrecord")
    with tfrec_fast.TFRecordWriter(path) as w:
        w.write(b"abc")
    reader = _core.RecordReader.open_path(
        path, buffer_size=1 << 16, batch_records=16, batch_bytes=1 << 20
    )
    batch = reader.read_batch(16, 1 << 20)
    objects = [
        reader,
        batch,
        iter(batch),
        _core.FieldSpec.__new__(_core.FieldSpec),
        tfrec_fast.TFRecordReader(path),
    ]
    for obj in objects:
        with pytest.raises(TypeError, match="pickle"):
            pickle.dumps(obj, protocol)
    reader.close()


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_engine_enums_pickle_by_value(protocol):
    for enum in (_core.Kind, _core.Layout):
        for member in enum.__members__.values():
            assert pickle.loads(pickle.dumps(member, protocol)) == member


class _Named(_core.FieldSpec):
    """A subclass that says how it pickles."""

    def __init__(self, name):
        super().__init__(name, _core.Kind.INT64, _core.Layout.FIXED, count=1)

    def __getstate__(self):
        return {"name": self.name}

    def __setstate__(self, state):
        _Named.__init__(self, state["name"])


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_a_subclass_with_its_own_state_pickles_and_copies(protocol):
    import copy

    spec = _Named("x")
    for twin in (pickle.loads(pickle.dumps(spec, protocol)), copy.copy(spec), copy.deepcopy(spec)):
        assert type(twin) is _Named and twin.name == "x" and twin.count == 1
