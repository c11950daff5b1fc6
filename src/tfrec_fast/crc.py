"""CRC32C (Castagnoli) with a hardware backend chosen at import."""

from ._core import crc32c, crc32c_backend, masked_crc32c

__all__ = ["crc32c", "masked_crc32c", "crc32c_backend"]
