"""Locating and loading the conformance corpus (tests/data/conformance in the repository).

The corpus lives in the repository, so a bare clone tests itself; the environment variable
TFREC_FAST_CONFORMANCE points the tests at another copy of the same format (a refreshed corpus).
A missing corpus is an error, never a skip.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

DEFAULT_CORPUS = Path(__file__).resolve().parent / "data" / "conformance"
SUFFIX = ".expected.json"


def corpus_dir() -> Path:
    env = os.environ.get("TFREC_FAST_CONFORMANCE")
    return Path(env) if env else DEFAULT_CORPUS


def corpus_missing_reason():
    d = corpus_dir()
    if not d.is_dir():
        return "conformance corpus not found at %s (set TFREC_FAST_CONFORMANCE)" % d
    if not (d / "MANIFEST.md").is_file() or not list(d.rglob("*" + SUFFIX)):
        return "conformance corpus at %s has no MANIFEST.md or no *.expected.json" % d
    return None


class Case:
    """One data file of the corpus with its parsed sidecar."""

    def __init__(self, path: Path, expected: dict, rel: str):
        self.path = path
        self.expected = expected
        self.rel = rel

    @property
    def compression(self):
        return self.expected["compression_type"]  # "", "GZIP", "ZLIB" (TF names)

    @property
    def well_formed(self) -> bool:
        return bool(self.expected["well_formed"])

    def read_bytes(self) -> bytes:
        return self.path.read_bytes()

    def __repr__(self):
        return "Case(%s)" % self.rel


def load_cases():
    """All data files that have a sidecar, sorted by relative path."""
    d = corpus_dir()
    cases = []
    for side in sorted(d.rglob("*" + SUFFIX)):
        data = side.with_name(side.name[: -len(SUFFIX)])
        with open(side, "r", encoding="utf-8") as f:
            exp = json.load(f)
        rel = data.relative_to(d).as_posix()
        cases.append(Case(data, exp, rel))
    return cases


def case_params(pytest, predicate=None):
    """pytest params for every case (ids = relative paths). When the corpus is
    missing, a single param that makes the test fail loudly."""
    reason = corpus_missing_reason()
    if reason:
        return [pytest.param(reason, id="CORPUS-MISSING")]
    cases = [c for c in load_cases() if predicate is None or predicate(c)]
    if not cases:
        return [
            pytest.param(
                "no corpus case matches the selection in %s" % corpus_dir(),
                id="CORPUS-EMPTY-SELECTION",
            )
        ]
    return [pytest.param(c, id=c.rel) for c in cases]


def require_case(pytest, case):
    """Called first in a parametrized test: fail loudly for the missing-corpus param."""
    if isinstance(case, str):
        pytest.fail(case)
    if not case.path.is_file():
        pytest.fail("corpus data file missing: %s" % case.path)
    return case
