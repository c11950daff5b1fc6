"""Looking into Example files: records as JSON lines (``tfrec-fast cat``) and a feature spec
inferred from the data, written out as Python code (``tfrec-fast schema``).

``cat`` decodes Examples with the C++ decoder (as every reader does); SequenceExamples and the
schema's statistics (which need the kind of an empty list) use the protobuf classes of
:mod:`tfrec_fast.proto`. Records are decoded one at a time, so a malformed record is reported by
its index and nothing is assumed about the features.
"""

from __future__ import annotations

import base64
import json
import math
from typing import Dict, Iterator, List, Optional, Tuple

import numpy as np
from google.protobuf.message import DecodeError

from .errors import ExampleParseError
from .proto import Example, SequenceExample, example_to_dict, sequence_example_to_dict
from .records import TFRecordReader

__all__ = [
    "iter_records",
    "parse_message",
    "parse_record",
    "JsonFormatter",
    "record_to_json",
    "SchemaBuilder",
]

_BATCH_RECORDS = 64
_BATCH_BYTES = 1 << 20
_ELLIPSIS = "\u2026"

# Feature.kind -> (the name shown to people, the dtype a spec takes)
_KINDS = {
    "int64_list": ("int64", "int64"),
    "float_list": ("float", "float32"),
    "bytes_list": ("bytes", "bytes"),
}


def iter_records(
    reader: TFRecordReader, skip: int = 0, limit: Optional[int] = None
) -> Iterator[Tuple[int, memoryview]]:
    """Yields (index in the file, record) for records ``skip`` to ``skip + limit`` (all when
    ``limit`` is None). Reads in small batches and stops reading once ``limit`` records are out;
    the skipped records are read too (their checksums are checked).

    Parameters
    ----------
    reader : TFRecordReader
        Read from its current position.
    skip : int, default 0
        Records to pass over first.
    limit : int, optional
        At most this many records (None: to the end).

    Yields
    ------
    (int, memoryview)
        The record's index in the file and the record.

    Raises
    ------
    DataLossError
        A damaged record, skipped ones included.
    """
    index = 0
    while index < skip:
        batch = reader.read_batch(max_records=min(skip - index, 4096), max_bytes=_BATCH_BYTES)
        if not len(batch):
            return
        index += len(batch)
    end = None if limit is None else skip + limit
    while end is None or index < end:
        want = _BATCH_RECORDS if end is None else min(end - index, _BATCH_RECORDS)
        batch = reader.read_batch(max_records=want, max_bytes=_BATCH_BYTES)
        if not len(batch):
            return
        for record in batch:
            yield index, record
            index += 1


def parse_record(record, index: int, path: str, sequence: bool = False):
    """What ``cat`` prints of one record: an Example as {name: values}, decoded by the C++
    decoder (the one every reader uses), or a SequenceExample message.

    Parameters
    ----------
    record : bytes-like
        The serialized record.
    index : int
        Its index in the file, for messages.
    path : str
        Its file, for messages.
    sequence : bool, default False
        Parse it as a SequenceExample.

    Returns
    -------
    dict or SequenceExample
        ``{name: list of values}`` for an Example; the message for a SequenceExample.

    Raises
    ------
    ExampleParseError
        The record is not a valid one, naming the file and the record.
    """
    if sequence:
        return parse_message(record, index, path, True)
    from .example import parse_example

    try:
        return parse_example(record)
    except ExampleParseError as error:
        raise ExampleParseError(
            error.detail, path=path, record_index=index, feature=error.feature
        ) from None


def parse_message(record, index: int, path: str, sequence: bool = False):
    """One record as an Example (or SequenceExample) message.

    Parameters
    ----------
    record : bytes-like
        The serialized record.
    index : int
        Its index in the file, for messages.
    path : str
        Its file, for messages.
    sequence : bool, default False
        Parse it as a SequenceExample.

    Returns
    -------
    tfrec_fast.proto.Example or tfrec_fast.proto.SequenceExample
        The message.

    Raises
    ------
    ExampleParseError
        The record is not a valid one, naming the file and the record.
    """
    try:
        return (SequenceExample if sequence else Example).FromString(bytes(record))
    except DecodeError as error:
        kind = "SequenceExample" if sequence else "Example"
        raise ExampleParseError(
            f"not a valid tf.train.{kind} ({error})", path=path, record_index=index
        ) from None


# ---- cat ---------------------------------------------------------------------------------------


def _float(v: float) -> str:
    if math.isnan(v):
        return '"nan"'
    if math.isinf(v):
        return '"inf"' if v > 0 else '"-inf"'
    return str(np.float32(v))  # the shortest decimal that reads back as the same float32


def _is_text(text: str) -> bool:
    return (
        text.isprintable()
        or text.replace("\t", "").replace("\n", "").replace("\r", "").isprintable()
    )


def show_bytes(value: bytes, max_bytes: int = 32, full_base64: bool = False) -> str:
    """Printable UTF-8 as text, anything else as "0x" + hex; values longer than ``max_bytes``
    (0: no limit) are cut there and end with "…(N bytes)".

    Parameters
    ----------
    value : bytes
        The value to show.
    max_bytes : int, default 32
        Cut longer values here (0: never).
    full_base64 : bool, default False
        The whole value in base64 instead.

    Returns
    -------
    str
        The value as text.
    """
    if full_base64:
        return base64.b64encode(value).decode("ascii")
    cut = 0 < max_bytes < len(value)
    suffix = f"{_ELLIPSIS}({len(value)} bytes)" if cut else ""
    head = value[:max_bytes] if cut else value
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and _is_text(text):
        return (head.decode("utf-8", "ignore") if cut else text) + suffix
    return "0x" + head.hex() + suffix


class JsonFormatter:
    """Records as JSON lines: {"name": [values]} sorted by name, or for SequenceExamples
    {"context": {...}, "feature_lists": {"name": [[values of step 0], ...]}}.

    Parameters
    ----------
    max_bytes : int, default 32
        Bytes values longer than this are cut (see :func:`show_bytes`).
    full_base64 : bool, default False
        Bytes values whole, in base64.
    ensure_ascii : bool, default False
        Escape every non-ASCII character.
    """

    def __init__(self, max_bytes: int = 32, full_base64: bool = False, ensure_ascii: bool = False):
        self.max_bytes = max_bytes
        self.full_base64 = full_base64
        self.ensure_ascii = ensure_ascii

    def _str(self, s: str) -> str:
        return json.dumps(s, ensure_ascii=self.ensure_ascii)

    def values(self, values: list) -> str:
        """One feature's values as a JSON list (floats as float32 shows them; NaN and inf as
        strings)."""
        if not values:
            return "[]"
        first = values[0]
        if isinstance(first, bytes):
            items = [self._str(show_bytes(v, self.max_bytes, self.full_base64)) for v in values]
        elif isinstance(first, float):
            items = [_float(v) for v in values]
        else:
            items = [str(v) for v in values]
        return "[" + ", ".join(items) + "]"

    def features(self, features: Dict[str, list]) -> str:
        """``{name: values}`` as a JSON object, in the mapping's order."""
        return (
            "{" + ", ".join(f"{self._str(k)}: {self.values(v)}" for k, v in features.items()) + "}"
        )

    def message(self, message) -> str:
        """An Example (a message, or {name: values}) or SequenceExample message as one line of
        JSON.

        Parameters
        ----------
        message : dict, Example or SequenceExample
            What :func:`parse_record` returns.

        Returns
        -------
        str
            One line of JSON, without its newline.
        """
        if isinstance(message, dict):
            return self.features(message)
        if isinstance(message, Example):
            return self.features(example_to_dict(message))
        context, lists = sequence_example_to_dict(message)
        steps = ", ".join(
            f"{self._str(k)}: [" + ", ".join(self.values(s) for s in v) + "]"
            for k, v in lists.items()
        )
        return f'{{"context": {self.features(context)}, "feature_lists": {{{steps}}}}}'


def record_to_json(
    record,
    index: int = 0,
    path: str = "<records>",
    *,
    sequence: bool = False,
    max_bytes: int = 32,
    full_base64: bool = False,
) -> str:
    """One record as a JSON line (see :class:`JsonFormatter`).

    Parameters
    ----------
    record : bytes-like
        The serialized record.
    index : int, default 0
        Its index in the file, for messages.
    path : str, default "<records>"
        Its file, for messages.
    sequence : bool, default False
        Parse it as a SequenceExample.
    max_bytes
        As for :class:`JsonFormatter`.
    full_base64
        As for :class:`JsonFormatter`.

    Returns
    -------
    str
        One line of JSON.

    Raises
    ------
    ExampleParseError
        The record is not a valid Example (or SequenceExample).
    """
    return JsonFormatter(max_bytes, full_base64).message(
        parse_record(record, index, path, sequence)
    )


# ---- schema ------------------------------------------------------------------------------------


class _Stats:
    """What was seen of one feature (or feature list) across records."""

    def __init__(self) -> None:
        self.present = 0  # records holding it
        self.kinds: Dict[str, int] = {}  # Feature.kind -> records (steps) holding that kind
        # Values per record (per step for feature lists); None until a value is added.
        self.min_len: Optional[int] = None
        self.max_len: Optional[int] = None
        self.min_steps: Optional[int] = None  # feature lists only
        self.max_steps: Optional[int] = None

    def add_values(self, kind: Optional[str], n: int) -> None:
        if kind is not None:  # a Feature with no list set fits any kind
            self.kinds[kind] = self.kinds.get(kind, 0) + 1
        self.min_len = n if self.min_len is None else min(self.min_len, n)
        self.max_len = n if self.max_len is None else max(self.max_len, n)

    def add_steps(self, n: int) -> None:
        self.min_steps = n if self.min_steps is None else min(self.min_steps, n)
        self.max_steps = n if self.max_steps is None else max(self.max_steps, n)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _span(lo: Optional[int], hi: Optional[int], word: str) -> str:
    if lo is None:
        return f"no {word}s"
    return _plural(lo, word) if lo == hi else f"{lo}..{hi} {word}s"


def py_str(s: str, ascii_only: bool = False) -> str:
    """A double-quoted Python string literal for s (non-printable characters escaped).

    Parameters
    ----------
    s : str
        The text.
    ascii_only : bool, default False
        Escape every non-ASCII character too.

    Returns
    -------
    str
        The literal, quotes included.
    """
    out = []
    for c in s:
        if c in '"\\':
            out.append("\\" + c)
        elif " " <= c <= "~" or (not ascii_only and c > "\x7f" and c.isprintable()):
            out.append(c)
        elif c in "\n\r\t":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}[c])
        else:
            o = ord(c)
            out.append(
                f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}"
            )
    return '"' + "".join(out) + '"'


class SchemaBuilder:
    """Gathers per feature (and feature list) its kinds, list lengths and presence over Example
    (or SequenceExample) messages, and writes the spec they fit as Python code.

    Parameters
    ----------
    sequence : bool, default False
        The messages are SequenceExamples (a context spec and a sequence spec).
    """

    def __init__(self, sequence: bool = False):
        self.sequence = sequence
        self.records = 0
        self.context: Dict[str, _Stats] = {}
        self.lists: Dict[str, _Stats] = {}

    @staticmethod
    def _features(stats: Dict[str, _Stats], features) -> None:
        for name, feature in features.feature.items():
            s = stats.setdefault(name, _Stats())
            s.present += 1
            kind = feature.WhichOneof("kind")
            s.add_values(kind, len(getattr(feature, kind).value) if kind else 0)

    def add(self, message) -> None:
        """Takes in one Example (or SequenceExample) message.

        Parameters
        ----------
        message : Example or SequenceExample
            As :func:`parse_message` returns it.
        """
        self.records += 1
        if not self.sequence:
            self._features(self.context, message.features)
            return
        self._features(self.context, message.context)
        for name, flist in message.feature_lists.feature_list.items():
            s = self.lists.setdefault(name, _Stats())
            s.present += 1
            s.add_steps(len(flist.feature))
            for feature in flist.feature:
                kind = feature.WhichOneof("kind")
                s.add_values(kind, len(getattr(feature, kind).value) if kind else 0)

    # -- output --

    def _where(self, s: _Stats) -> str:
        text = f"in {s.present}/{self.records}"
        return text if s.present == self.records else text + " (missing in some)"

    def _mixed(self, s: _Stats, unit: str) -> str:
        kinds = ", ".join(f"{_KINDS[k][0]} in {n}" for k, n in sorted(s.kinds.items()))
        return f"mixed kinds ({kinds} {unit}): no single spec reads it, left out"

    def _context_entry(self, s: _Stats) -> Tuple[Optional[str], str]:
        if len(s.kinds) > 1:
            return None, self._mixed(s, "records")
        if not s.kinds:
            # only Features with no list set: they read as empty lists of any kind
            return 'tfr.VarLen("float32")', f"kind unknown (no values), {self._where(s)}"
        shown, dtype = _KINDS[next(iter(s.kinds))]
        note = f"{shown}, {_span(s.min_len, s.max_len, 'value')}, {self._where(s)}"
        if (
            s.present == self.records
            and s.min_len is not None
            and s.min_len == s.max_len
            and s.min_len > 0
        ):
            shape = "()" if s.min_len == 1 else f"({s.min_len},)"
            return f'tfr.FixedLen({shape}, "{dtype}")', note
        return f'tfr.VarLen("{dtype}")', note

    def _list_entry(self, s: _Stats) -> Tuple[Optional[str], str]:
        steps = _span(s.min_steps, s.max_steps, "step")
        if len(s.kinds) > 1:
            return None, self._mixed(s, "steps")
        if not s.kinds:
            return (
                'tfr.VarLenSequence("float32")',
                f"kind unknown (no values), {steps}, {self._where(s)}",
            )
        shown, dtype = _KINDS[next(iter(s.kinds))]
        per_step = "no steps" if s.min_len is None else _span(s.min_len, s.max_len, "value")
        note = f"{shown}, {per_step} per step, {steps}, {self._where(s)}"
        length = s.min_len
        if (
            length is not None
            and length == s.max_len
            and length > 0
            and (dtype != "bytes" or length == 1)
        ):
            shape = "()" if length == 1 else f"({length},)"
            return f'tfr.FixedLenSequence({shape}, "{dtype}")', note
        return f'tfr.VarLenSequence("{dtype}")', note

    @staticmethod
    def _dict(var: str, stats: Dict[str, _Stats], entry, ascii_only: bool) -> List[str]:
        rows = []
        for name in sorted(stats):
            code, note = entry(stats[name])
            key = py_str(name, ascii_only)
            if code is None:
                rows.append((f"    # {key}: ...,", note))
            else:
                rows.append((f"    {key}: {code},", note))
        width = min(max((len(code) for code, _ in rows), default=0), 64)
        lines = [f"{var} = {{"]
        lines += [f"{code.ljust(width)}  # {note}" for code, note in rows]
        lines.append("}")
        return lines

    def code(self, path: str, complete: bool = True, ascii_only: bool = False) -> str:
        """The spec as Python code.

        Parameters
        ----------
        path : str
            The file, named in the code's first comment.
        complete : bool, default True
            The whole file was read (else the comment says "the first").
        ascii_only : bool, default False
            Escape every non-ASCII character of names.

        Returns
        -------
        str
            Python source: the spec as a dict of ``tfr.FixedLen`` / ``tfr.VarLen`` / ...,
            each feature commented with what was seen of it.
        """
        what = "SequenceExample records" if self.sequence else "records"
        first = "" if complete else "the first "
        source = py_str(str(path), ascii_only)[1:-1]
        lines = [f"# {first}{self.records} {what} of {source}", "import tfrec_fast as tfr"]
        if self.sequence:
            lines += self._dict("context_spec", self.context, self._context_entry, ascii_only)
            lines += self._dict("sequence_spec", self.lists, self._list_entry, ascii_only)
            lines.append(
                "# context, sequences = tfr.parse_sequence_examples(batch, "
                "context_spec, sequence_spec)"
            )
        else:
            lines += self._dict("spec", self.context, self._context_entry, ascii_only)
            lines.append("# columns = tfr.parse_examples(batch, spec)")
        return "\n".join(lines) + "\n"
