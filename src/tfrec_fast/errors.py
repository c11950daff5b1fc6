"""Exceptions raised by tfrec_fast."""

from __future__ import annotations

import ast
import errno
import re

__all__ = ["DataLossError", "ExampleParseError", "ObjectChangedError"]

_REASONS = {
    "truncated": "the file ends inside a record",
    "length_checksum": "length checksum mismatch",
    "data_checksum": "data checksum mismatch",
    "length_too_large": "length field larger than the rest of the file",
    "compressed_stream": "damaged compressed stream",
    "index_mismatch": "the index does not match the file",
    "shard_lengths": "the shard does not hold the records its dataset's metadata lists",
}


_NO_TF_FILE = " (Is this even a TFRecord file?)"


class DataLossError(OSError):
    """A TFRecord stream is damaged: truncated, failing a checksum, or badly compressed.

    It survives pickling, and the one-string rebuild PyTorch's DataLoader does for exceptions
    raised in its workers: the attributes are read back from the message.

    Parameters
    ----------
    detail : str
        What exactly was found, in TensorFlow's words where it has them; alone, a whole
        message to read the attributes back from.
    path : optional
        The attributes below.
    record_index : optional
        The attributes below.
    offset : optional
        The attributes below.
    reason : optional
        The attributes below.

    Attributes
    ----------
    path : str or None
        The file, or ``"<memory>"`` / a file-like's name.
    record_index : int or None
        0-based index of the damaged record.
    offset : int or None
        Byte offset of that record's header; in the decompressed stream for compressed input.
    reason : str or None
        One of ``truncated``, ``length_checksum``, ``data_checksum``, ``length_too_large``,
        ``compressed_stream``, ``index_mismatch`` (an index file points at bytes that are not
        its record) or ``shard_lengths`` (a TFDS shard holds another number of records than
        its dataset_info.json says).
    detail : str
        What exactly was found.
    """

    def __init__(self, detail, *, path=None, record_index=None, offset=None, reason=None):
        message = None
        if path is None and record_index is None and offset is None and reason is None:
            parsed = _parse_data_loss(str(detail))
            if parsed:  # rebuilt from a message (torch): keep that message, traceback and all
                message = str(detail)
                detail, path, record_index, offset, reason = parsed
        self.detail = detail
        self.path = path
        self.record_index = record_index
        self.offset = offset
        self.reason = reason
        if message is None:
            message = _data_loss_message(detail, path, record_index, offset, reason)
        super().__init__(message)

    def __reduce__(self):
        return _rebuild, (
            type(self),
            self.detail,
            self.path,
            self.record_index,
            self.offset,
            self.reason,
        )


def _data_loss_message(detail, path, record_index, offset, reason) -> str:
    where = [str(path)] if path is not None else []
    if record_index is not None:
        where.append(
            f"record {record_index}" + (f" at offset {offset}" if offset is not None else "")
        )
    what = _REASONS.get(reason, reason)
    text = f"{what} ({detail})" if what else str(detail)
    message = ": ".join(where + [text])
    if offset == 0 and reason not in ("compressed_stream", "index_mismatch", "shard_lengths"):
        message += _NO_TF_FILE
    return message


_DATA_LOSS_LINE = re.compile(
    r"DataLossError: (?P<path>.*?): record (?P<index>\d+) at offset "
    r"(?P<offset>\d+): (?P<rest>.*)$",
    re.MULTILINE,
)


def _parse_data_loss(message: str):
    """(detail, path, record_index, offset, reason) from a message that ends with this class's
    own, as PyTorch's worker re-raise passes it (the traceback text); None if there is none."""
    found = list(_DATA_LOSS_LINE.finditer(message))
    if not found:
        return None
    m = found[-1]
    rest = m.group("rest")
    if rest.endswith(_NO_TF_FILE):
        rest = rest[: -len(_NO_TF_FILE)]
    for reason, text in _REASONS.items():
        if rest.startswith(text + " (") and rest.endswith(")"):
            return (
                rest[len(text) + 2 : -1],
                m.group("path"),
                int(m.group("index")),
                int(m.group("offset")),
                reason,
            )
    return None


def _rebuild(cls, detail, path, record_index, offset, reason):
    return cls(detail, path=path, record_index=record_index, offset=offset, reason=reason)


class ExampleParseError(ValueError):
    """A record is not a valid tf.train.Example, or does not fit the feature spec.

    Survives pickling and PyTorch's worker re-raise, as :class:`DataLossError` does.

    Parameters
    ----------
    detail : str
        What is wrong; alone, a whole message to read the attributes back from.
    path : optional
        The attributes below.
    record_index : optional
        The attributes below.
    feature : optional
        The attributes below.

    Attributes
    ----------
    path : str or None
        The file, or a description of the records.
    record_index : int or None
        0-based, within the file when known.
    feature : str or None
        The feature's name, or None when the record as a whole is malformed.
    detail : str
        What is wrong (also as ``message``, the name TensorFlow users look for).
    """

    def __init__(self, detail, *, path=None, record_index=None, feature=None):
        message = None
        if path is None and record_index is None and feature is None:
            parsed = _parse_example_error(str(detail))
            if parsed:
                message = str(detail)
                detail, path, record_index, feature = parsed
        self.detail = detail
        self.path = path
        self.record_index = record_index
        self.feature = feature
        self.message = detail  # the name TensorFlow users look for
        if message is None:
            where = ": ".join(
                str(x) for x in (path, record_index is not None and f"record {record_index}") if x
            )
            if feature is not None:
                where += (", " if where else "") + f"feature {feature!r}"
            message = f"{where}: {detail}" if where else str(detail)
        super().__init__(message)

    def __reduce__(self):
        return _rebuild_parse_error, (
            type(self),
            self.detail,
            self.path,
            self.record_index,
            self.feature,
        )


_PARSE_LINE = re.compile(
    r"ExampleParseError: (?P<path>.*?): record (?P<index>\d+)"
    r"(?:, feature (?P<feature>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"))?"
    r": (?P<detail>.*)$",
    re.MULTILINE,
)


def _parse_example_error(message: str):
    found = list(_PARSE_LINE.finditer(message))
    if not found:
        return None
    m = found[-1]
    feature = m.group("feature")
    return (
        m.group("detail"),
        m.group("path"),
        int(m.group("index")),
        ast.literal_eval(feature) if feature else None,
    )


def _rebuild_parse_error(cls, detail, path, record_index, feature):
    return cls(detail, path=path, record_index=record_index, feature=feature)


class ObjectChangedError(OSError):
    """A remote object changed (was rewritten, replaced or removed) while it was being read.

    Where the store gives a version to read at (an ETag, a generation, a version id), every
    record handed out before the error came from the version the read started at, and the
    store's refusal of the next request is what raised this (``pinned`` is True). Where it gives
    none, the change is found by size and modification time once a block looked damaged
    (``pinned`` False): the records just before may be of either version. Read the object again
    to get the new version.

    ``errno`` is ESTALE. It is not a :class:`DataLossError`: the data is not damaged.

    Parameters
    ----------
    detail : str
        What was found.
    path : optional
        The attributes below.
    offset : optional
        The attributes below.
    pinned : optional
        The attributes below.

    Attributes
    ----------
    path : str or None
        The URL, credentials masked.
    offset : int or None
        The byte offset of the read that found the change, when known.
    detail : str
        What was found.
    pinned : bool
        Whether the read was pinned to a version (True) or the change was found by size and
        modification time (False).
    """

    def __init__(self, detail, *, path=None, offset=None, pinned=True):
        self.detail = detail
        self.path = path
        self.offset = offset
        self.pinned = pinned
        if path is None and offset is None:
            message = str(detail)  # rebuilt from its message (PyTorch's worker re-raise)
        else:
            where = f" at byte offset {offset}" if offset is not None else ""
            after = (
                "no record of the new version was delivered"
                if pinned
                else "found when its data stopped making sense; the store gives no version to "
                "read at, so the records just before may be of either version"
            )
            message = (
                f"{path}: the object changed while it was read{where} ({detail}); "
                f"{after}: read it again"
            )
        super().__init__(message)
        self.errno = errno.ESTALE
        self.filename = path

    def __str__(self) -> str:
        return self.args[0]

    def __reduce__(self):
        return _rebuild_changed, (type(self), self.detail, self.path, self.offset, self.pinned)


def _rebuild_changed(cls, detail, path, offset, pinned=True):
    return cls(detail, path=path, offset=offset, pinned=pinned)
