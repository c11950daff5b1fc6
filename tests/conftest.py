"""Shared fixtures for the tfrec_fast test-suite."""

from __future__ import annotations

import ast
import functools
import inspect
import io
import os
import random
import re
import sys
import textwrap

import _corpus
import _oracle
import pytest

# ---- OS features and peers (markers declared in pyproject.toml) --------------------------

_LACKING = {
    "posix": (os.name != "posix", "needs POSIX (fork, signals, FIFOs, /dev files, symlinks)"),
    "linux": (not sys.platform.startswith("linux"), "needs Linux (/dev/full, /proc)"),
}

# The peers a test may compare with, by import name, and the marker a test that needs one gets.
# Every test given one also gets `peer`: CI's peers step runs `-m peer` with them installed.
PEERS = {
    "tensorflow": "tensorflow",
    "tfrecord": "tfrecord_pkg",
    "ray": "ray",
    "tensorflow_datasets": "tfds",
    "datasets": "hf_datasets",
    "torchdata": "torchdata",
    "grain": "grain",
}


def pytest_addoption(parser):
    parser.addoption(
        "--require-peers",
        action="store_true",
        help="every selected test must run: a skip (a peer or anything else missing) "
        "fails it, and so does a test module skipped whole (CI's peers step)",
    )


def pytest_collection_modifyitems(config, items):
    """Tests marked with an OS feature this system lacks are skipped, saying which; tests that
    need a peer get its marker and `peer`."""
    for item in items:
        for name, (lacking, reason) in _LACKING.items():
            if lacking and item.get_closest_marker(name) is not None:
                item.add_marker(pytest.mark.skip(reason=f"{reason}; this is {sys.platform}"))
        needed = _peers_of(item)
        for peer in sorted(needed):
            if item.get_closest_marker(PEERS[peer]) is None:
                item.add_marker(PEERS[peer])
        if needed:
            item.add_marker("peer")


# What a test needs is read from its code, so that no list of files or marks can forget a new
# one: the import names it passes to pytest.importorskip / importlib.util.find_spec /
# import_module (or a helper named _has / need), or imports, in the test function (decorators
# included), in the fixtures it uses, at its module's top level (which covers a module-level
# importorskip and HAVE_X = find_spec("x") flags) or in code given to it as a parameter; and the
# peers a skipif's reason names. A test skipped by importorskip for a peer it was not marked with
# fails (below), so a form this misses shows up as a failure of the core suite, not as a test
# that never runs anywhere.
_ASKERS = {"importorskip", "find_spec", "import_module", "__import__", "_has", "need"}
_REASON_WORDS = re.compile(
    r"\b(tensorflow[-_]datasets|tensorflow|tfrecord|ray|datasets|torchdata|"
    r"grain)\b",
    re.IGNORECASE,
)


def _peer_of_name(name) -> str | None:
    top = name.split(".")[0] if isinstance(name, str) else None
    return top if top in PEERS else None


@functools.lru_cache(maxsize=None)
def _peers_in_code(tree_source: str, top_level_only: bool) -> frozenset:
    try:
        tree = ast.parse(textwrap.dedent(tree_source))
    except SyntaxError:
        return frozenset()
    if top_level_only:  # a module: its statements, not its functions and classes
        nodes = [
            n
            for stmt in tree.body
            if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            for n in ast.walk(stmt)
        ]
    else:
        nodes = list(ast.walk(tree))
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in _ASKERS:
                found.add(node.args[0].value)
    return frozenset(p for p in map(_peer_of_name, found) if p)


@functools.lru_cache(maxsize=None)
def _source(obj) -> str:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return ""


def _peers_of(item) -> set:
    function = getattr(item, "function", None)
    if function is None:
        return set()
    needed = set(_peers_in_code(_source(function), False))
    module = getattr(item, "module", None)
    if module is not None:
        needed |= _peers_in_code(_source(module), True)
    fixtures = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    for defs in fixtures.values():
        for fixturedef in defs:
            needed |= _peers_in_code(_source(fixturedef.func), False)
    callspec = getattr(item, "callspec", None)
    for value in callspec.params.values() if callspec else ():
        if isinstance(value, str) and "import" in value:  # code the test runs (README snippets)
            needed |= _peers_in_code(value, False)
    for mark in item.iter_markers("skipif"):
        for word in _REASON_WORDS.findall(str(mark.kwargs.get("reason", ""))):
            word = word.lower()
            needed.add(word.replace("-", "_"))
    return needed & PEERS.keys()


_IMPORTORSKIP = re.compile(r"could not import '([\w.]+)'")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A skip fails the test under --require-peers; so does a skip for a peer the test was not
    marked with (whatever the options): the peers step would never run it."""
    report = yield
    if not report.skipped or hasattr(report, "wasxfail"):
        return report
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    missing = _IMPORTORSKIP.search(reason)
    peer = _peer_of_name(missing.group(1)) if missing else None
    if item.config.getoption("require_peers"):
        report.outcome = "failed"
        report.longrepr = f"skipped, and --require-peers lets no test skip: {reason}"
    elif peer is not None and item.get_closest_marker(PEERS[peer]) is None:
        report.outcome = "failed"
        report.longrepr = (
            f"skipped for the missing peer {peer!r}, but not marked "
            f"{PEERS[peer]!r}: tests/conftest.py's _peers_of does not see how this "
            f"test needs it, so CI's peers step (-m peer) would never run it. "
            f"Ask for it with pytest.importorskip({peer!r}) ({reason})"
        )
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    """Under --require-peers a module skipped whole at import (a module-level importorskip)
    fails the collection."""
    report = yield
    if report.skipped and collector.config.getoption("require_peers"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = (
            f"{collector.nodeid} skipped whole, and --require-peers lets nothing skip: {reason}"
        )
    return report


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
        b[:n] = self._data[self._pos : self._pos + n]
        self._pos += n
        return n


@pytest.fixture
def keep_bytesio():
    return KeepBytesIO


@pytest.fixture
def stream_only():
    return StreamOnly


# ---- servers shared by the remote tests -------------------------------------------------------


@pytest.fixture(scope="module")
def s3():
    """moto's S3 server on 127.0.0.1, with the AWS environment that keeps clients off any cloud."""
    pytest.importorskip("moto.server")
    from _servers import S3Server

    with pytest.MonkeyPatch.context() as env:
        env.setenv("AWS_EC2_METADATA_DISABLED", "true")  # never ask a cloud's metadata service
        env.setenv("AWS_DEFAULT_REGION", "us-east-1")
        server = S3Server().start()
        yield server
        server.stop()


@pytest.fixture(scope="module")
def s3_options(s3):
    """What s3fs needs to reach the server."""
    return {"endpoint_url": s3.endpoint, "key": "testing", "secret": "testing"}
