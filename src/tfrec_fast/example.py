"""tf.train.Example parsing: feature specs in, numpy columns out.

The C++ decoder reads a whole RecordBatch with the GIL released and fills one column per
requested feature; features not asked for are skipped without being decoded. Numeric features
come back as numpy arrays; bytes features as a :class:`BytesColumn` that views the batch's own
buffer (no copy).
"""

from __future__ import annotations

import math
import operator
import sys
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

import numpy as np

from . import _buffers, _core, _pipeline
from .columns import BytesColumn, Ragged
from .errors import DataLossError, ExampleParseError
from .records import (
    RecordBatch,
    TFRecordReader,
    _as_sources,
    _display,
    _is_path,
    normalize_compression,
)
from .spec import (
    _BYTES,
    _FLOAT,
    _KIND_DTYPE,
    _NUMPY,
    FixedLen,
    FixedLenSequence,
    Spec,
    VarLen,
    VarLenSequence,
    _Described,
    _SpecObject,
    normalize_spec,
    spec_from_json,
    spec_to_json,
)

__all__ = [
    "parse_examples",
    "parse_example",
    "parse_sequence_examples",
    "read_examples",
    "feature_kinds",
    "batches_across_files",
    # The specs and columns parsing takes and gives, defined in .spec and .columns:
    "FixedLen",
    "VarLen",
    "FixedLenSequence",
    "VarLenSequence",
    "Ragged",
    "BytesColumn",
    "normalize_spec",
    "spec_to_json",
    "spec_from_json",
]

_FIXED, _VAR, _RAW_BYTES = _core.Layout.FIXED, _core.Layout.VAR, _core.Layout.RAW_BYTES


def feature_kinds(
    batch: RecordBatch,
    name: str = "<records>",
    sequence_examples: bool = False,
    strict: bool = True,
) -> Dict[str, Optional[_core.Kind]]:
    """{feature name: its list kind (_INT64, _FLOAT, _BYTES), or None for a Feature holding no
    list} over a batch, in the order first seen: the C++ decoder's own wire scan. A malformed
    record raises ExampleParseError (``strict``) or ends the scan before it. A name that is not
    UTF-8 (which protobuf refuses) is an ExampleParseError naming its record (``strict``) or is
    kept with its bad bytes escaped."""
    kinds: Dict[str, Optional[_core.Kind]] = {}
    for raw, kind, record in _core.feature_kinds(batch, name, sequence_examples, strict):
        try:
            key = raw.decode("utf-8")
        except UnicodeDecodeError:
            if strict:
                raise ExampleParseError(
                    f"a feature name that is not valid UTF-8: {raw!r}",
                    path=name,
                    record_index=record,
                ) from None
            key = raw.decode("utf-8", "surrogateescape")
        kinds[key] = kind
    return kinds


def _infer(
    batch: RecordBatch, names, name: str = "<records>", sequence_examples: bool = False
) -> Dict[str, Optional[Spec]]:
    """VarLen specs for features given by name only, typed from the first record holding each
    (up to the first damaged record, which the decoder then reports). Names no record holds come
    back as None (still unknown)."""
    kinds = feature_kinds(batch, name, sequence_examples, strict=False)
    out: Dict[str, Optional[Spec]] = {}
    for key in names:
        kind = kinds.get(key)
        out[key] = VarLen(_KIND_DTYPE[kind]) if kind is not None else None
    return out


def _typed(
    batch: RecordBatch,
    spec: Dict[str, Optional[Spec]],
    name: str = "<records>",
    sequence_examples: bool = False,
) -> Dict[str, Spec]:
    """Resolves by-name specs from this batch (learning their kinds into `spec` once seen); a
    name no record has shown yet reads as an empty float32 VarLen for this batch only."""
    if None not in spec.values():
        return dict(spec)  # type: ignore[arg-type]  # (no None left)
    untyped = [k for k, s in spec.items() if s is None]
    spec.update(
        {k: s for k, s in _infer(batch, untyped, name, sequence_examples).items() if s is not None}
    )
    return {k: VarLen("float32") if s is None else s for k, s in spec.items()}


def _compile(spec: Mapping[str, Spec], sequence: Optional[Mapping[str, Any]] = None) -> list:
    """Specs -> the FieldSpecs the C++ decoder takes."""
    FieldSpec = _core.FieldSpec
    compiled = []
    for name, s in spec.items():
        if isinstance(s, VarLen):
            compiled.append(FieldSpec(name, s.kind, _VAR, required=s.default is None))
            continue
        count = math.prod(s.shape)
        default = None
        if s.from_bytes:
            count *= s.dtype.itemsize
            if s.default is not None:
                default = np.broadcast_to(np.asarray(s.default, s.dtype), s.shape).tobytes()
            compiled.append(FieldSpec(name, _BYTES, _RAW_BYTES, count=count, default=default))
            continue
        if s.default is not None:
            default = (
                bytes(s.default)
                if s.kind == _BYTES
                else np.broadcast_to(np.asarray(s.default, _NUMPY[s.kind]), s.shape).tobytes()
            )
        compiled.append(FieldSpec(name, s.kind, _FIXED, count=count, default=default))
    for name, s in (sequence or {}).items():
        layout = _VAR if isinstance(s, VarLenSequence) else _FIXED
        count = 0 if layout == _VAR else math.prod(s.shape)
        compiled.append(FieldSpec(name, s.kind, layout, count=count, sequence=True))
    return compiled


def _column_maker(s: Spec) -> Optional[Callable[[int, Any, tuple], Any]]:
    """How the decoder's raw arrays for one feature become its column: f(n, data, raw), or
    None for raw[0] itself (the usual scalar number: no call)."""
    if isinstance(s, VarLen):
        if s.kind == _BYTES:
            return lambda n, data, raw: BytesColumn(data, raw[1], raw[2], raw[3])
        return lambda n, data, raw: Ragged(raw[0], raw[3])
    shape = s.shape
    if s.from_bytes:
        dtype = s.dtype
        return lambda n, data, raw: raw[0].view(dtype).reshape((n,) + shape)
    if s.kind == _BYTES:
        default = bytes(s.default or b"")
        if shape == ():
            return lambda n, data, raw: BytesColumn(data, raw[1], raw[2], None, default)
        width = math.prod(shape)
        return lambda n, data, raw: BytesColumn(
            data, raw[1], raw[2], np.arange(n + 1, dtype=np.int64) * width, default
        )
    if shape == ():
        return None  # raw[0] as it is: already int64 / float32 of [n]
    return lambda n, data, raw: raw[0].reshape((n,) + shape)


class _Plan:
    """What parsing needs for one spec, worked out once (see _plan): the decoder's FieldSpecs
    and, per feature, how its raw arrays become its column."""

    def __init__(self, spec: Mapping[str, Spec], sequence: Optional[Mapping[str, Any]]):
        self.fields = _core.FieldSpecs(_compile(spec, sequence))  # checked and copied once
        self.records_for_pool = self.fields.records_for_pool  # large columns: pooled memory
        self.makers = [(name, _column_maker(s)) for name, s in spec.items()]
        self.bytes_columns = any(
            s.kind == _BYTES and not getattr(s, "from_bytes", False) for s in spec.values()
        )
        self.described = any(isinstance(s, _Described) for s in spec.values())

    def decode(
        self,
        batch: RecordBatch,
        spec: Mapping[str, Spec],
        name: str,
        sequence_examples: bool,
        num_threads: Optional[int],
        presence: bool,
    ) -> list:
        """The decoder's raw columns, with errors that say what to do."""
        try:
            pool = _buffers.shared_pool() if len(batch) >= self.records_for_pool else None
            raw = _core.decode_examples(
                batch, self.fields, name, sequence_examples, num_threads, presence, pool
            )  # (by position: see binding)
        except ExampleParseError as error:
            raise _explained(error, spec) from None
        if self.described:
            _check_present(batch, spec, raw, name, sequence_examples)
        return raw

    def columns(self, batch: RecordBatch, raw: list) -> Dict[str, Any]:
        n = len(batch)
        data = batch.data if self.bytes_columns else None
        return {
            name: r[0] if make is None else make(n, data, r)
            for (name, make), r in zip(self.makers, raw)
        }


_PLANS: Dict[tuple, _Plan] = {}
_MAX_PLANS = 256  # distinct specs remembered (then forgotten all at once)
# The same spec objects again (a reader's every batch): (names, the objects' ids) -> (plan, their
# keys, the objects, held so that their ids stay theirs). Ids, not the objects: a spec subclass
# may be unhashable.
_PLANS_BY_OBJECT: Dict[tuple, Tuple[_Plan, list, tuple]] = {}
_KEY_OF = operator.attrgetter("_key")


def _plan(spec: Mapping[str, Spec], sequence: Optional[Mapping[str, Any]] = None) -> _Plan:
    """The plan of a typed spec, made once per distinct spec: specs are matched by what they
    say (names, kinds, shapes, defaults), so specs built anew for every call share a plan too.
    A spec with a mutable default (a list, an array) gets a fresh plan every call."""
    if sequence is None:
        # First by the spec objects themselves (hashed by identity, cheap), valid while none
        # of them has changed since (a changed attribute clears its _key).
        objects = tuple(spec.values())
        ids = (tuple(spec), tuple(map(id, objects)))
        known = _PLANS_BY_OBJECT.get(ids)
        if known is not None and list(map(_KEY_OF, objects)) == known[1]:
            return known[0]
    features = tuple([(name, s._key or _summary_of(s)) for name, s in spec.items()])
    lists = tuple([(name, _summary_of(s)) for name, s in sequence.items()]) if sequence else ()
    key: Optional[tuple] = (features, lists)
    if any(summary is None for _, summary in features + lists):
        key = None
    plan = _PLANS.get(key) if key is not None else None
    if plan is None:
        plan = _Plan(spec, sequence)
        if key is not None:
            if len(_PLANS) >= _MAX_PLANS:
                _PLANS.clear()
            _PLANS[key] = plan
    if key is not None and sequence is None:
        if len(_PLANS_BY_OBJECT) >= _MAX_PLANS:
            _PLANS_BY_OBJECT.clear()
        _PLANS_BY_OBJECT[ids] = (plan, [summary for _, summary in features], objects)
    return plan


def _summary_of(s) -> Optional[tuple]:
    summary = s._key
    if summary is None:
        summary = s._summary()
        if summary is not None:
            object.__setattr__(s, "_key", summary)
    return summary


def _columns(batch: RecordBatch, spec: Mapping[str, Spec], raw: list) -> Dict[str, Any]:
    return _plan(spec).columns(batch, raw)


def _as_batch(records) -> RecordBatch:
    return records if isinstance(records, RecordBatch) else RecordBatch.from_records(records)


def _check_num_threads(num_threads: Optional[int]) -> Optional[int]:
    """num_threads checked; None stays None (the binding's choice by batch size) except in a
    DataLoader worker, where the workers already share the cores: 1 there."""
    if num_threads is not None:
        return _pipeline.check_threads(num_threads)
    torch_data = sys.modules.get("torch.utils.data")
    return 1 if torch_data is not None and torch_data.get_worker_info() is not None else None


def parse_examples(
    records,
    spec,
    *,
    name: Optional[str] = None,
    num_threads: Optional[int] = None,
    copy_bytes: bool = False,
) -> Dict[str, Any]:
    """Parses a RecordBatch (or any sequence of serialized Examples) into one column per feature.

    FixedLen numeric -> numpy ``[N, *shape]``; VarLen numeric -> :class:`Ragged`; bytes ->
    :class:`BytesColumn` (zero-copy views of the batch). Only the features in ``spec`` are
    decoded.

    Parameters
    ----------
    records : RecordBatch or sequence of bytes-like
        Serialized tf.train.Example records.
    spec : dict or list
        ``{name: FixedLen | VarLen}`` (or the ``tfrecord`` package's descriptions, TensorFlow's
        feature specs, or a list of names whose kinds come from the data).
    name : str, optional
        What errors call the records (a file name).
    num_threads : int, optional
        How many threads may decode at once, the calling thread among them (the meaning it
        has for every function of the package). The batch is cut into contiguous parts decoded
        by a persistent pool of C++ threads with the GIL released, with the same result and the
        same error as one thread. ``1`` decodes in the calling thread only; ``None`` (the
        default) uses one thread for small batches and up to the cores this process may use for
        large ones (one inside a PyTorch DataLoader worker, whose siblings share the cores).
    copy_bytes : bool
        Bytes columns own copies of their values (:meth:`BytesColumn.copy`) instead of viewing
        the batch, which they would otherwise keep alive.

    Returns
    -------
    dict
        One column per feature of ``spec``, in its order.

    Raises
    ------
    ExampleParseError
        Naming the record and feature that do not fit the spec.
    """
    num_threads = _check_num_threads(num_threads)
    batch = records if type(records) is RecordBatch else _as_batch(records)
    name = name or "<records>"
    typed, plan = _typed_plan(batch, spec, name)
    columns = plan.columns(batch, plan.decode(batch, typed, name, False, num_threads, False))
    return _owned(columns) if copy_bytes else columns


def _owned(columns: Dict[str, Any]) -> Dict[str, Any]:
    """The columns with every BytesColumn (also inside a Ragged) an owned copy."""
    out: Dict[str, Any] = {}
    for key, col in columns.items():
        if isinstance(col, BytesColumn):
            col = col.copy()
        elif isinstance(col, Ragged) and isinstance(col.values, BytesColumn):
            col = Ragged(col.values.copy(), col.row_splits)
        out[key] = col
    return out


# A user's spec dict seen before: id -> (the dict, its names, its values' ids, the values (held,
# so that the ids stay theirs), its typed spec, its plan, the typed objects' keys read before
# that plan was made, None if one had none: a mutable default, or an edit not yet planned). Calls
# with the same dict (a loop over batches) skip normalising, typing and planning it while it
# holds the same objects and none of them was edited since (an edit clears an object's _key).
_TYPED_SPECS: Dict[int, tuple] = {}


def _typed_plan(batch: RecordBatch, spec, name: str) -> Tuple[Dict[str, Spec], _Plan]:
    """normalize_spec, _typed and _plan of a user's spec for this batch."""
    if type(spec) is not dict:
        return _typed_plan_of(batch, spec, name)
    seen = _TYPED_SPECS.get(id(spec))  # (the entry holds the dict: its id is not reused)
    if seen is not None and seen[1] == tuple(spec) and seen[2] == tuple(map(id, spec.values())):
        typed = seen[4]
        keys = list(map(_KEY_OF, typed.values()))
        if keys == seen[6]:
            return typed, seen[5]
        # An object edited since: planned anew, and remembered under the keys read before the
        # plan was made (an edit in between, in another thread, then only costs a plan more).
        plan = _plan(typed)
        _TYPED_SPECS[id(spec)] = seen[:5] + (plan, None if None in keys else keys)
        return typed, plan
    # One snapshot, taken first: what is normalised below is what is remembered, even if another
    # thread changes the dict meanwhile.
    snapshot = spec.copy()
    values = tuple(snapshot.values())
    # Only our own spec objects and descriptions: any other object (TensorFlow's features, whose
    # shape is a list) may change without a trace, so it is normalised anew on every call.
    if not all(isinstance(v, (_SpecObject, str)) for v in values):
        return _typed_plan_of(batch, snapshot, name)
    typed = _typed(batch, normalize_spec(snapshot), name)
    plan = _plan(typed)
    if len(_TYPED_SPECS) >= _MAX_PLANS:
        _TYPED_SPECS.clear()
    # No keys yet (None: never equal): the next call reads them, plans once more, keeps both.
    _TYPED_SPECS[id(spec)] = (
        spec,
        tuple(snapshot),
        tuple(map(id, values)),
        values,
        typed,
        plan,
        None,
    )
    return typed, plan


def _typed_plan_of(batch: RecordBatch, spec, name: str) -> Tuple[Dict[str, Spec], _Plan]:
    typed = _typed(batch, normalize_spec(spec), name)
    return typed, _plan(typed)


def _decode(
    batch: RecordBatch,
    spec: Mapping[str, Spec],
    name: str,
    sequence: Optional[Mapping[str, Any]] = None,
    *,
    num_threads: Optional[int] = 1,
    presence: bool = True,
) -> list:
    """The decoder's raw columns for `spec` (then `sequence`), with errors that say what to do:
    per feature (values, starts, ends, row_splits, step_splits, present), None where the layout
    has no such array (present: only with `presence`)."""
    return _plan(spec, sequence).decode(
        batch, spec, name, sequence is not None, num_threads, presence
    )


def _check_present(
    batch: RecordBatch, spec: Mapping[str, Spec], raw: list, name: str, sequence_examples: bool
) -> None:
    """A described feature that no record of the batch holds is a misspelled name, usually: an
    error. Looked into only when its column came back empty, so the common case costs nothing."""
    present = None
    for (key, s), column in zip(spec.items(), raw):
        if not isinstance(s, _Described) or not len(batch) or column[3][-1] != 0:
            continue
        if present is None:
            present = feature_kinds(batch, name, sequence_examples, strict=False)
        if key not in present:
            raise ExampleParseError(
                f"no record of these {len(batch)} holds it (misspelled?); the records hold "
                f"{sorted(present)}",
                path=name,
                record_index=0,
                feature=key,
            )


def _explained(error: ExampleParseError, spec: Mapping[str, Spec]) -> ExampleParseError:
    """A kind mismatch on a FixedLen of another numpy dtype: say that it reads raw bytes."""
    s = spec.get(error.feature) if error.feature is not None else None
    if not (
        isinstance(s, FixedLen)
        and s.from_bytes
        and "the spec asks for a bytes_list" in str(error.detail)
    ):
        return error
    return ExampleParseError(
        f"{error.detail}; FixedLen dtype {s.dtype} reads a bytes feature holding the raw array "
        "(np.frombuffer): only 'int64' and 'float32' read int64_list and float_list values, so "
        "use one of those (and cast) or write the array as bytes",
        path=error.path,
        record_index=error.record_index,
        feature=error.feature,
    )


def parse_sequence_examples(
    records,
    context_spec=None,
    sequence_spec=None,
    *,
    name: Optional[str] = None,
    num_threads: Optional[int] = None,
    copy_bytes: bool = False,
):
    """Parses tf.train.SequenceExample records: returns ``(context, sequences)``.

    ``context_spec`` works as in :func:`parse_examples`. ``sequence_spec`` maps feature-list
    names to :class:`FixedLenSequence` (-> :class:`Ragged` over steps, values ``[steps, *shape]``)
    or :class:`VarLenSequence` (-> a :class:`Ragged` over steps whose values are a Ragged (or
    BytesColumn) over each step's values). A missing feature list has no steps.
    ``num_threads`` and ``copy_bytes`` as in :func:`parse_examples`.
    """
    num_threads = _check_num_threads(num_threads)
    batch = _as_batch(records)
    # Context and Example features share field 1, so names-only context specs are typed alike.
    context = _typed(batch, normalize_spec(context_spec or {}), name or "<records>", True)
    sequence = dict(sequence_spec or {})
    for key, s in sequence.items():
        if not isinstance(s, (FixedLenSequence, VarLenSequence)):
            raise TypeError(f"feature list {key!r}: use FixedLenSequence or VarLenSequence")
    raw = _decode(
        batch, context, name or "<records>", sequence, num_threads=num_threads, presence=False
    )
    out = _columns(batch, context, raw[: len(context)])
    data = batch.data
    seqs = {}
    for (key, s), (values, starts, ends, row_splits, step_splits, _) in zip(
        sequence.items(), raw[len(context) :]
    ):
        steps: Any
        if isinstance(s, FixedLenSequence):
            if s.kind == _BYTES:
                steps = BytesColumn(data, starts, ends)
            else:
                steps = values.reshape((-1,) + s.shape)
        elif s.kind == _BYTES:
            steps = BytesColumn(data, starts, ends, step_splits)
        else:
            steps = Ragged(values, step_splits)
        seqs[key] = Ragged(steps, row_splits)
    if copy_bytes:
        out = _owned(out)
        seqs = {
            key: Ragged(_owned({key: col.values})[key], col.row_splits) for key, col in seqs.items()
        }
    return out, seqs


def parse_example(record, spec=None) -> Dict[str, Any]:
    """Parses one serialized Example (or any message with SerializeToString).

    Without a spec every feature comes back as a Python list. With one, FixedLen features come
    back as arrays of ``shape`` (bytes as ``bytes``) and VarLen ones as 1-D arrays (lists of
    ``bytes``).
    """
    if not isinstance(record, (bytes, bytearray, memoryview, np.ndarray)):
        from .proto import as_serialized

        record = as_serialized(record)
    if spec is None:  # every feature, typed by the decoder's own scan
        batch = RecordBatch.from_records([record])
        kinds = feature_kinds(batch)
        columns = parse_examples(
            batch,
            {k: VarLen(_KIND_DTYPE[_FLOAT if kind is None else kind]) for k, kind in kinds.items()},
        )
        return {
            k: (col.to_list()[0] if isinstance(col, BytesColumn) else col[0].tolist())
            for k, col in sorted(columns.items())
        }
    columns = parse_examples([record], spec)
    return {
        key: col.to_list()[0] if isinstance(col, BytesColumn) else col[0]
        for key, col in columns.items()
    }


def read_examples(
    paths,
    spec,
    batch_size: int = 1024,
    compression: Optional[str] = None,
    *,
    verify: bool = True,
    num_threads: Optional[int] = None,
    deterministic: bool = True,
    storage_options=None,
    filesystem=None,
    copy_bytes: bool = False,
) -> Iterator[Dict[str, Any]]:
    """Reads and parses Examples in batches of ``batch_size`` records (the last may be smaller),
    across file boundaries. Errors name the file and the record's index in it; a damaged file
    first yields the records before the damage (a short batch), then raises. Paths may be globs
    and URLs (``storage_options`` / ``filesystem``: see :mod:`tfrec_fast.storage`).

    ``num_threads`` is how many threads may decode at once, as for :func:`parse_examples`
    (default: half the cores, at most 4). Here each decodes whole batches: with more than one,
    the next batches are read on an I/O thread while up to ``num_threads`` batches are parsed
    at once on a pool (at most ``num_threads + 1`` batches read or parsed ahead of the one you hold; batches
    smaller than 1 MiB travel in bundles of up to 1 MiB). Batches come in file order;
    ``deterministic=False`` yields them as soon as they are parsed (errors still come after
    every batch before them). ``num_threads=1`` does everything in the calling thread.

    Bytes features come back as :class:`BytesColumn` views of the batch the records were read
    into (no second copy; the column keeps that batch alive); ``copy_bytes=True`` gives columns
    that own copies of their values instead, as :func:`parse_examples` does.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be positive")
    compression = normalize_compression(compression)
    spec = normalize_spec(spec)
    num_threads = _pipeline.check_threads(num_threads)
    sources = _as_sources(paths, storage_options, filesystem)
    groups = _groups(sources, spec, batch_size, compression, verify, _buffers.shared_pool())
    parse = _parse_owned_group if copy_bytes else _parse_group
    return _pipeline.ordered(
        parse,
        groups,
        num_threads,
        deterministic=deterministic,
        size_of=_group_bytes,
        name="tfrec_fast-examples",
    )


def _group_bytes(group) -> int:
    return group[0].nbytes


def _groups(sources, spec, batch_size: int, compression: str, verify: bool, pool):
    """(batch of batch_size records, its spec, where its records come from) across the sources,
    in order; on the I/O thread when there are threads. Names-only specs are typed here, batch
    after batch, so what one batch teaches holds for the next."""
    for batch, segments in _batches_across(sources, batch_size, compression, verify, pool):
        yield batch, _typed(batch, spec), segments


def batches_across_files(
    paths,
    batch_size: int,
    compression: Optional[str] = None,
    *,
    verify: bool = True,
    storage_options=None,
    filesystem=None,
) -> Iterator[Tuple[RecordBatch, list]]:
    """RecordBatches of ``batch_size`` records (the last may be smaller) across file boundaries,
    each with its segments ``[(file, index in the file of its first record there, count)]``
    for :func:`_locate`. A damaged file first yields the records before the damage (a short
    batch), then raises."""
    if batch_size < 1:
        raise ValueError("batch_size must be positive")
    compression = normalize_compression(compression)
    return _batches_across(
        _as_sources(paths, storage_options, filesystem), batch_size, compression, verify, None
    )


def _batches_across(
    sources, batch_size: int, compression: str, verify: bool, pool
) -> Iterator[Tuple[RecordBatch, list]]:
    """batches_across_files over resolved sources; batches that join parts of several files
    take their buffers from pool (None: fresh memory), as do the readers' batches."""
    pending: List[RecordBatch] = []
    segments: list = []

    def group():
        batch = pending[0] if len(pending) == 1 else RecordBatch.concat(pending, pool)
        out = (batch, list(segments))
        pending.clear()
        segments.clear()
        return out

    for source in sources:
        name = _display(source) if _is_path(source) else "<records>"
        with TFRecordReader(source, compression, verify=verify) as reader:
            if pool is not None:
                reader._reader.set_pool(pool)
            while True:
                have = sum(len(b) for b in pending)
                first = reader.records_read
                try:
                    batch = reader.read_batch(max_records=batch_size - have)
                except DataLossError:
                    if pending:  # the records before the damage first
                        yield group()
                    raise
                if not len(batch):
                    break
                pending.append(batch)
                segments.append((name, first, len(batch)))
                if have + len(batch) == batch_size:
                    yield group()
    if pending:
        yield group()


def _parse_group(group) -> Dict[str, Any]:
    batch, typed, segments = group
    plan = _plan(typed)
    try:
        return plan.columns(batch, plan.decode(batch, typed, "", False, 1, False))
    except ExampleParseError as error:
        raise _locate(error, segments) from None


def _parse_owned_group(group) -> Dict[str, Any]:
    return _owned(_parse_group(group))


def _locate(error: ExampleParseError, segments) -> ExampleParseError:
    """Maps a batch-relative record index to (file, index in that file)."""
    index = error.record_index
    for path, first, count in segments:
        if index < count:
            return ExampleParseError(
                error.detail, path=path, record_index=first + index, feature=error.feature
            )
        index -= count
    return error
