"""Telling a stream's compression from its first bytes, without losing them on a pipe."""

from __future__ import annotations

import io
from typing import Optional

from .._core import masked_crc32c

__all__ = ["HEAD", "sniff_compression", "read_head", "Replay"]

HEAD = 12  # bytes looked at: one record header


def sniff_compression(head: bytes) -> str:
    """Guesses a stream's compression from its first 12 bytes (a valid record header wins).

    Parameters
    ----------
    head : bytes
        The stream's first bytes (fewer than 12 for a short stream).

    Returns
    -------
    str
        ``""`` (uncompressed), ``"gzip"`` or ``"zlib"``.
    """
    if len(head) >= HEAD and masked_crc32c(head[:8]) == int.from_bytes(head[8:HEAD], "little"):
        return ""
    if head[:2] == b"\x1f\x8b":
        return "gzip"
    if len(head) >= 2 and head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0:
        return "zlib"
    return ""


def read_head(stream) -> bytes:
    """The first 12 bytes of a stream (fewer at its end), however short its reads are.

    Parameters
    ----------
    stream : binary file-like
        Read with ``read``.

    Returns
    -------
    bytes
    """
    head = b""
    while len(head) < HEAD:
        got = stream.read(HEAD - len(head))
        if not got:  # the end, or None from a non-blocking stream with nothing ready
            break
        head += got
    return head


class Replay(io.RawIOBase):
    """A stream whose first bytes were read already (to tell its compression): hands them out
    again, then the rest of the stream. How a pipe is sniffed without losing data.

    Parameters
    ----------
    head : bytes
        The bytes read already.
    stream : binary file-like
        The rest of the stream.
    name : str
        The stream's name.
    """

    def __init__(self, head: bytes, stream, name: str):
        super().__init__()
        self._head = head
        self._stream = stream
        self.name = name

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> Optional[int]:
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        if hasattr(self._stream, "readinto"):
            return self._stream.readinto(buffer)
        data = self._stream.read(len(buffer))
        if data is None:
            return None
        buffer[: len(data)] = data
        return len(data)
