"""CRC32C: RFC 3720 vectors, every backend against a pure-Python oracle, masking."""

from __future__ import annotations

import os
import random
import subprocess
import sys

import _oracle
import numpy as np
import pytest

import tfrec_fast
from tfrec_fast import _core

# RFC 3720 B.4 and the classic check value.
ISCSI_READ_PDU = bytes.fromhex(
    "01c00000000000000000000000000000"
    "14000000000004000000001400000018"
    "28000000000000000200000000000000"
)
RFC3720_VECTORS = [
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
    (ISCSI_READ_PDU, 0xD9963A56),
    (b"123456789", 0xE3069283),
    (b"", 0),
]


def _backends():
    try:
        return list(_core.crc32c_backends())
    except Exception:  # the listing itself is checked by test_backends_list_sane
        return ["portable"]


BACKENDS = _backends()
BIG_LENGTHS = [
    511,
    512,
    513,
    1023,
    1024,
    1025,
    4095,
    4096,
    4097,
    8191,
    8192,
    8193,
    12345,
    32768,
    65535,
    65536,
    65537,
    70000,
]
ALIGNMENTS = [0, 1, 2, 3, 5, 7, 8, 13]


_RND = random.Random(3720)
BIG = bytes(_RND.getrandbits(8) for _ in range(70000 + 64))
_ORACLE_CACHE = {}


def oracle_slice(align, n):
    """Oracle CRC of BIG[align:align+n], computed once for all backends."""
    key = (align, n)
    if key not in _ORACLE_CACHE:
        _ORACLE_CACHE[key] = _oracle.crc32c(BIG[align : align + n])
    return _ORACLE_CACHE[key]


@pytest.fixture(scope="module")
def big_buffer():
    return BIG


def test_oracle_matches_rfc3720():
    """Guards the oracle itself: a wrong oracle would make every agreement test meaningless."""
    for data, want in RFC3720_VECTORS:
        assert _oracle.crc32c(data) == want


@pytest.mark.parametrize("data,want", RFC3720_VECTORS, ids=lambda v: None)
def test_rfc3720_default_backend(data, want):
    """tfrec_fast.crc32c gives the RFC 3720 check values."""
    assert tfrec_fast.crc32c(data) == want


@pytest.mark.parametrize("backend", BACKENDS)
def test_rfc3720_each_backend(backend):
    """Every backend this CPU can run gives the RFC 3720 check values."""
    for data, want in RFC3720_VECTORS:
        assert _core.crc32c_with(backend, data) == want, (backend, data[:8])


def test_backends_list_sane():
    """portable is always available and the active backend is one of the listed ones."""
    listed = _core.crc32c_backends()
    assert isinstance(listed, list) and all(isinstance(b, str) for b in listed)
    assert "portable" in listed
    assert tfrec_fast.crc32c_backend() in listed


def test_unknown_backend_rejected():
    """Asking crc32c_with for a backend that does not exist is an error, not a silent fallback."""
    with pytest.raises((ValueError, KeyError, RuntimeError)):
        _core.crc32c_with("no-such-backend", b"abc")


@pytest.mark.parametrize("backend", BACKENDS)
def test_backends_agree_with_oracle_small(backend, big_buffer):
    """All lengths 0..300 at several alignments match the oracle (tail handling of SIMD loops)."""
    mv = memoryview(big_buffer)
    for align in (0, 1, 3, 7):
        for n in range(0, 301):
            chunk = mv[align : align + n]
            want = oracle_slice(align, n)
            assert _core.crc32c_with(backend, chunk) == want, (backend, align, n)


@pytest.mark.parametrize("backend", BACKENDS)
def test_backends_agree_with_oracle_large(backend, big_buffer):
    """Selected lengths up to 70000 at several alignments match the oracle (multi-stream paths)."""
    mv = memoryview(big_buffer)
    for n in BIG_LENGTHS:
        for align in (0, 1, 5) if n > 10000 else ALIGNMENTS:
            chunk = mv[align : align + n]
            want = oracle_slice(align, n)
            assert _core.crc32c_with(backend, chunk) == want, (backend, align, n)


def test_default_agrees_with_every_backend(big_buffer):
    """tfrec_fast.crc32c and every named backend agree on the same random inputs."""
    rnd = random.Random(7)
    mv = memoryview(big_buffer)
    for _ in range(200):
        a = rnd.randrange(0, 64)
        n = rnd.randrange(0, 70000)
        chunk = mv[a : a + n]
        want = tfrec_fast.crc32c(chunk)
        for b in BACKENDS:
            assert _core.crc32c_with(b, chunk) == want, (b, a, n)


@pytest.mark.parametrize("backend", [None] + BACKENDS)
def test_extend_property(backend, big_buffer):
    """crc32c(b, crc32c(a)) == crc32c(a + b) for every split point class."""
    f = tfrec_fast.crc32c if backend is None else (lambda d, v=0: _core.crc32c_with(backend, d, v))
    data = big_buffer[:5000]
    whole = _oracle.crc32c(data)
    for cut in [0, 1, 2, 7, 8, 9, 63, 64, 65, 1000, 4095, 4999, 5000]:
        a, b = data[:cut], data[cut:]
        assert f(b, f(a)) == whole, (backend, cut)
    # value passed by keyword too, and a non-zero starting value vs the oracle.
    assert tfrec_fast.crc32c(b"world", value=tfrec_fast.crc32c(b"hello ")) == _oracle.crc32c(
        b"hello world"
    )
    assert f(b"xyz", 0xDEADBEEF) == _oracle.crc32c(b"xyz", 0xDEADBEEF)


def test_masked_crc32c_formula(big_buffer):
    """masked_crc32c == ((crc >> 15 | crc << 17) + 0xa282ead8) mod 2**32."""
    for n in [0, 1, 8, 9, 100, 4096, 65537]:
        d = big_buffer[:n]
        crc = tfrec_fast.crc32c(d)
        want = ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF
        assert tfrec_fast.masked_crc32c(d) == want == _oracle.masked_crc32c(d)
    # Known value from a real TFRecord header: length 0 record (raw/one_empty_record).
    assert tfrec_fast.masked_crc32c(bytes(8)) == _oracle.masked_crc32c(bytes(8))


def test_accepts_bytes_like_types(big_buffer):
    """bytes, bytearray, memoryview (also sliced) and contiguous numpy arrays are accepted."""
    data = big_buffer[:1000]
    want = _oracle.crc32c(data)
    arr = np.frombuffer(data, dtype=np.uint8).copy()
    inputs = [
        data,
        bytearray(data),
        memoryview(data),
        memoryview(b"xx" + data)[2:],
        arr,
        arr.view(np.int32)[:250],  # other dtype, same bytes
        np.frombuffer(data, dtype=np.uint8),  # read-only array
    ]
    for x in inputs:
        assert tfrec_fast.crc32c(x) == want, type(x)
        assert tfrec_fast.masked_crc32c(x) == _oracle.mask(want), type(x)
    for b in BACKENDS:
        assert _core.crc32c_with(b, bytearray(data)) == want
        assert _core.crc32c_with(b, arr) == want


def test_rejects_non_bytes_like():
    """A str or int is not silently encoded/converted."""
    with pytest.raises(TypeError):
        tfrec_fast.crc32c("abc")
    with pytest.raises(TypeError):
        tfrec_fast.crc32c(12)


def test_env_var_forces_portable_backend(tmp_path):
    """TFREC_FAST_CRC32C=portable (read at import) selects portable and gives identical results."""
    code = (
        "import tfrec_fast, sys\n"
        "d = bytes(range(256)) * 300\n"
        "print(tfrec_fast.crc32c_backend())\n"
        "print(tfrec_fast.crc32c(d))\n"
        "print(tfrec_fast.crc32c(d[3:70003 - 3]))\n"
        "print(tfrec_fast.masked_crc32c(d[:77]))\n"
    )
    env = dict(os.environ, TFREC_FAST_CRC32C="portable")
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(tmp_path),
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split()
    assert lines[0] == "portable"
    d = bytes(range(256)) * 300
    assert int(lines[1]) == tfrec_fast.crc32c(d) == _oracle.crc32c(d)
    assert int(lines[2]) == tfrec_fast.crc32c(d[3:70000])
    assert int(lines[3]) == _oracle.masked_crc32c(d[:77])
