"""Independent pure-Python reference implementations used as test oracles.

Nothing in here imports tfrec_fast: CRC32C, the TFRecord framing and a tiny
reference reader are written from the format description alone, so the tests
can check the library against something that does not share its bugs.
Byte-surgery helpers follow leveldb's log_test (set_byte, flip_bit,
fix_length_crc, truncate).
"""

from __future__ import annotations

import struct

POLY = 0x82F63B78  # CRC32C (Castagnoli), reflected
MASK_DELTA = 0xA282EAD8
HEADER = 12  # u64 length + u32 masked crc of the length
FOOTER = 4  # u32 masked crc of the payload


def _make_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ POLY if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _make_table()


def crc32c(data, value: int = 0) -> int:
    """Table-driven CRC32C of ``data`` extending ``value`` (like RFC 3720)."""
    crc = value ^ 0xFFFFFFFF
    t = _TABLE
    for b in bytes(data):
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def mask(crc: int) -> int:
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + MASK_DELTA) & 0xFFFFFFFF


def masked_crc32c(data) -> int:
    return mask(crc32c(data))


def header(length: int) -> bytes:
    """12-byte record header for a payload of ``length`` bytes (valid length CRC)."""
    lb = struct.pack("<Q", length)
    return lb + struct.pack("<I", masked_crc32c(lb))


def frame(payload) -> bytes:
    """One framed TFRecord record (independent of tfrec_fast)."""
    payload = bytes(payload)
    return header(len(payload)) + payload + struct.pack("<I", masked_crc32c(payload))


def build_file(payloads) -> bytes:
    return b"".join(frame(p) for p in payloads)


def record_offsets(payloads):
    """Header offset of each record, plus the file size as the last element."""
    out = [0]
    for p in payloads:
        out.append(out[-1] + HEADER + len(p) + FOOTER)
    return out


def parse(data: bytes):
    """Strict reference reader: returns the list of payloads or raises ValueError."""
    data = bytes(data)
    pos, out = 0, []
    while pos < len(data):
        if len(data) - pos < HEADER:
            raise ValueError("truncated header at %d" % pos)
        (n,) = struct.unpack_from("<Q", data, pos)
        (lc,) = struct.unpack_from("<I", data, pos + 8)
        if masked_crc32c(data[pos : pos + 8]) != lc:
            raise ValueError("length crc at %d" % pos)
        end = pos + HEADER + n + FOOTER
        if end > len(data):
            raise ValueError("truncated record at %d" % pos)
        payload = data[pos + HEADER : pos + HEADER + n]
        (dc,) = struct.unpack_from("<I", data, pos + HEADER + n)
        if masked_crc32c(payload) != dc:
            raise ValueError("data crc at %d" % pos)
        out.append(payload)
        pos = end
    return out


# ---- byte surgery (leveldb log_test style) ---------------------------------


def set_byte(data, offset: int, value: int) -> bytes:
    b = bytearray(data)
    b[offset] = value & 0xFF
    return bytes(b)


def increment_byte(data, offset: int, delta: int = 1) -> bytes:
    b = bytearray(data)
    b[offset] = (b[offset] + delta) & 0xFF
    return bytes(b)


def flip_bit(data, offset: int, bit: int = 0) -> bytes:
    b = bytearray(data)
    b[offset] ^= 1 << bit
    return bytes(b)


def fix_length_crc(data, record_offset: int) -> bytes:
    """Recompute the length CRC of the header at ``record_offset`` (after editing the length)."""
    b = bytearray(data)
    lb = bytes(b[record_offset : record_offset + 8])
    struct.pack_into("<I", b, record_offset + 8, masked_crc32c(lb))
    return bytes(b)


def set_length(data, record_offset: int, length: int, fix_crc: bool = True) -> bytes:
    b = bytearray(data)
    struct.pack_into("<Q", b, record_offset, length)
    out = bytes(b)
    return fix_length_crc(out, record_offset) if fix_crc else out


def truncate(data, size: int) -> bytes:
    return bytes(data[:size])
