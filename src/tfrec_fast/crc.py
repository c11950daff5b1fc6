"""CRC32C (Castagnoli) with a hardware backend chosen at import.

The functions are the extension's own (``tfrec_fast._core``), re-exported here and from the
package root; the GIL is released while they run.

``crc32c(data, value=0) -> int``
    The CRC32C of ``data`` (any bytes-like object), continuing from ``value`` (a previous
    result, to checksum data in pieces).
``masked_crc32c(data) -> int``
    The masked CRC32C TFRecord stores in each record's header and footer:
    ``((crc >> 15 | crc << 17) + 0xa282ead8) mod 2**32``.
``crc32c_backend() -> str``
    The backend in use: ``"avx512"``, ``"sse42"``, ``"arm64"`` or ``"portable"``.

The environment variable ``TFREC_FAST_CRC32C`` (read once, at import) picks a backend
(``portable`` forces the fallback); a name that is not a backend, or one this CPU cannot run,
gives a ``RuntimeWarning`` and the best backend the CPU has.
"""

import os
import warnings

from ._core import crc32c, crc32c_backend, crc32c_backends, masked_crc32c

__all__ = ["crc32c", "masked_crc32c", "crc32c_backend"]

BACKENDS = ("auto", "avx512", "sse42", "arm64", "portable")


def _check_requested_backend() -> None:
    """TFREC_FAST_CRC32C names a backend (read once, by the C++ dispatcher): say so when it
    names none, or one this CPU cannot run, instead of falling back silently."""
    requested = os.environ.get("TFREC_FAST_CRC32C", "")
    if requested in ("", "auto", crc32c_backend()):
        return
    if requested not in BACKENDS:
        why = f"is not a CRC32C backend (use one of {', '.join(BACKENDS)})"
    else:
        why = f"cannot run on this CPU (it has {', '.join(crc32c_backends())})"
    warnings.warn(
        f"TFREC_FAST_CRC32C={requested!r} {why}: using {crc32c_backend()!r}",
        RuntimeWarning,
        stacklevel=2,
    )


_check_requested_backend()
