"""Shared fixtures for the tfrec_fast test-suite."""
from __future__ import annotations

import io
import os
import random
import sys

import pytest

import _corpus
import _oracle


# ---- OS features (markers declared in pyproject.toml) --------------------------------

_LACKING = {
    "posix": (os.name != "posix", "needs POSIX (fork, signals, FIFOs, /dev files, symlinks)"),
    "linux": (not sys.platform.startswith("linux"), "needs Linux (/dev/full, /proc)"),
}


def pytest_collection_modifyitems(config, items):
    """Tests marked with an OS feature this system lacks are skipped, saying which."""
    for item in items:
        for name, (lacking, reason) in _LACKING.items():
            if lacking and item.get_closest_marker(name) is not None:
                item.add_marker(pytest.mark.skip(reason=f"{reason}; this is {sys.platform}"))


# ---- corpus -----------------------------------------------------------------

@pytest.fixture(scope="session")
def corpus_dir():
    """The conformance corpus directory; fails (not skips) when it is missing."""
    reason = _corpus.corpus_missing_reason()
    if reason:
        pytest.fail(reason)
    return _corpus.corpus_dir()


@pytest.fixture(scope="session")
def corpus_cases(corpus_dir):
    """Every .tfrecord data file of the corpus with its parsed .expected.json."""
    cases = _corpus.load_cases()
    assert cases, "empty corpus at %s" % corpus_dir
    return cases


@pytest.fixture(scope="session")
def corpus_file(corpus_dir):
    """Lookup of a corpus data file by relative path, failing loudly if absent."""
    def get(rel):
        p = corpus_dir / rel
        if not p.is_file():
            pytest.fail("corpus file missing: %s" % p)
        return p
    return get


# ---- reference framing -------------------------------------------------------

@pytest.fixture(scope="session")
def frame():
    """Independent pure-Python framer: frame(payload) -> bytes (see _oracle)."""
    return _oracle.frame


@pytest.fixture(scope="session")
def build_file():
    return _oracle.build_file


@pytest.fixture(scope="session")
def oracle():
    return _oracle


# ---- synthetic data ------------------------------------------------------------

def make_payloads(seed=1234, lengths=(0, 1, 7, 12, 33, 100, 255, 1000, 4097, 3)):
    rnd = random.Random(seed)
    return [bytes(rnd.getrandbits(8) for _ in range(n)) for n in lengths]


@pytest.fixture
def payloads():
    """A few distinct records of varied lengths, including an empty one."""
    return make_payloads()


@pytest.fixture
def tfrecord_file(tmp_path, payloads):
    """(path, payloads) of a small uncompressed file framed by the oracle."""
    p = tmp_path / "small.tfrecord"
    p.write_bytes(_oracle.build_file(payloads))
    return p, payloads


class KeepBytesIO(io.BytesIO):
    """BytesIO that remembers its content when closed (the writer may close it)."""

    final = None

    def close(self):
        if not self.closed:
            self.final = self.getvalue()
        super().close()

    def value(self) -> bytes:
        return self.final if self.closed else self.getvalue()


class StreamOnly(io.RawIOBase):
    """A non-seekable binary stream of unknown size (only read/readinto)."""

    def __init__(self, data: bytes, chunk: int = 1 << 16):
        self._data = memoryview(bytes(data))
        self._pos = 0
        self._chunk = chunk

    def readable(self):
        return True

    def seekable(self):
        return False

    def readinto(self, b):
        n = min(len(b), self._chunk, len(self._data) - self._pos)
        b[:n] = self._data[self._pos:self._pos + n]
        self._pos += n
        return n


@pytest.fixture
def keep_bytesio():
    return KeepBytesIO


@pytest.fixture
def stream_only():
    return StreamOnly
