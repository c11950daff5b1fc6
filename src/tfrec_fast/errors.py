"""Exceptions raised by tfrec_fast."""

from __future__ import annotations

__all__ = ["DataLossError", "ExampleParseError"]

_REASONS = {
    "truncated": "the file ends inside a record",
    "length_checksum": "length checksum mismatch",
    "data_checksum": "data checksum mismatch",
    "length_too_large": "length field larger than the rest of the file",
    "compressed_stream": "damaged compressed stream",
    "index_mismatch": "the index does not match the file",
}


class DataLossError(OSError):
    """A TFRecord stream is damaged: truncated, failing a checksum, or badly compressed.

    Attributes: ``path`` (the file, or ``"<memory>"`` / a file-like's name), ``record_index``
    (0-based index of the damaged record), ``offset`` (byte offset of that record's header; in the
    decompressed stream for compressed input), ``reason`` (one of ``truncated``,
    ``length_checksum``, ``data_checksum``, ``length_too_large``, ``compressed_stream``, or
    ``index_mismatch`` when an index file points at bytes that are not its record) and
    ``detail`` (what exactly was found, in TensorFlow's words where it has them).
    """

    def __init__(self, detail, *, path=None, record_index=None, offset=None, reason=None):
        self.detail = detail
        self.path = path
        self.record_index = record_index
        self.offset = offset
        self.reason = reason
        message = (
            f"{path}: record {record_index} at offset {offset}: "
            f"{_REASONS.get(reason, reason)} ({detail})"
        )
        if offset == 0 and reason not in ("compressed_stream", "index_mismatch"):
            message += " (Is this even a TFRecord file?)"
        super().__init__(message)

    def __reduce__(self):
        return _rebuild, (type(self), self.detail, self.path, self.record_index, self.offset,
                          self.reason)


def _rebuild(cls, detail, path, record_index, offset, reason):
    return cls(detail, path=path, record_index=record_index, offset=offset, reason=reason)


class ExampleParseError(ValueError):
    """A record is not a valid tf.train.Example, or does not fit the feature spec.

    Attributes: ``path`` (file or description of the records), ``record_index`` (0-based, within
    the file when known), ``feature`` (the feature's name, or None when the record as a whole is
    malformed) and ``detail``.
    """

    def __init__(self, detail, *, path=None, record_index=None, feature=None):
        self.detail = detail
        self.path = path
        self.record_index = record_index
        self.feature = feature
        self.message = detail  # the name TensorFlow users look for
        where = f"{path}: record {record_index}"
        if feature is not None:
            where += f", feature {feature!r}"
        super().__init__(f"{where}: {detail}")

    def __reduce__(self):
        return _rebuild_parse_error, (type(self), self.detail, self.path, self.record_index,
                                      self.feature)


def _rebuild_parse_error(cls, detail, path, record_index, feature):
    return cls(detail, path=path, record_index=record_index, feature=feature)
