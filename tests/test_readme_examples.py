"""Runs every ```python block of README.md and of the docs site's pages (docs/**/*.md).

Each block runs as a script in a fresh temporary directory (code under
``if __name__ == "__main__":`` runs too: DataLoader workers may import it again), with a
``tests`` link to the repository's tests/ for the blocks that read its fixtures. Tracebacks
point at the page's own line numbers. A block whose optional packages are not installed skips,
naming the extra it needs.

A block that cannot run here (it needs a server or a cluster nobody starts) carries the line
``<!-- not-run: the reason -->`` just above its fence: it is compiled, not run, and the reason
must be given. The tutorials (docs/guide/tutorials.md) also run in this process, each in a fresh
namespace, checking that they import tfrec_fast as tfr and write their files under ``tempfile``'s
directory. The README's first ```bash block holds the two set-up commands .ci/run reads.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List, NamedTuple, Optional

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
TUTORIALS = DOCS / "guide" / "tutorials.md"
PAGES = [README] + sorted(DOCS.rglob("*.md"))
NOT_RUN = re.compile(r"^<!--\s*not-run:(.*?)-->\s*$", re.MULTILINE)  # on a line of its own


class Block(NamedTuple):
    page: Path
    first: int  # 1-based line number of the block's first line of code
    code: str
    not_run: Optional[str]  # the reason given above the fence, or None: it runs

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT).as_posix()}:{self.first}"


def blocks(page: Path, language: str = "python") -> List[Block]:
    """The ```language blocks of a page, with the not-run reason written above each."""
    found, code, first, reason, previous = [], None, 0, None, ""
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if code is None and line.strip() == "```" + language:
            marker = NOT_RUN.search(previous)
            code, first, reason = [], number + 1, marker.group(1).strip() if marker else None
        elif code is not None and line.strip() == "```":
            found.append(Block(page, first, "\n".join(code) + "\n", reason))
            code = None
        elif code is not None:
            code.append(line)
        if line.strip():
            previous = line
    assert code is None, f"{page}: unterminated ```{language} block at line {first - 1}"
    return found


ALL = [block for page in PAGES for block in blocks(page)]


def missing_packages(code):
    """The optional packages a snippet imports (or uses for its URLs: fsspec) that are not
    installed: the extras the page names for it (a wheel's test run has only the core's)."""
    wanted = set(re.findall(r"^\s*(?:import|from)\s+([A-Za-z_]\w*)", code, re.MULTILINE))
    wanted -= set(sys.stdlib_module_names) | {"tfrec_fast"}
    if "://" in code:
        wanted.add("fsspec")
    if "decode_images=True" in code:  # tfrec_fast.tfds decodes with Pillow
        wanted.add("PIL")
    return sorted(m for m in wanted if importlib.util.find_spec(m) is None)


def needs_marks(code):
    missing = missing_packages(code)
    return [pytest.mark.skipif(bool(missing), reason=f"needs {', '.join(missing)} (an extra)")]


# ---- the pages as a whole -------------------------------------------------------------------


def test_the_readme_starts_with_the_two_setup_commands():
    """.ci/run runs the command lines of the README's first ```bash block, and wants two."""
    first = blocks(README, "bash")[0]
    commands = [
        line for line in first.code.splitlines() if line.strip() and not line.startswith("#")
    ]
    assert len(commands) == 2 and commands[0].startswith("python3 -m venv .venv")
    assert "pytest" in commands[1]


def test_every_not_run_marker_gives_a_reason_and_sits_on_a_block():
    marked = [b for b in ALL if b.not_run is not None]
    assert all(b.not_run for b in marked), [b.name for b in marked if not b.not_run]
    markers = sum(len(NOT_RUN.findall(page.read_text(encoding="utf-8"))) for page in PAGES)
    assert markers == len(marked), "a not-run marker must be the line just above a ```python fence"


def test_the_pages_have_their_examples():
    """The blocks are found: a parser that found none would pass every test below."""
    assert len(blocks(TUTORIALS)) >= 4
    assert len(blocks(README)) >= 2
    assert len([b for b in ALL if b.not_run is None]) >= 15


# ---- every block ----------------------------------------------------------------------------

RUN = [
    pytest.param(b.page.name, b.first, b.code, id=b.name, marks=needs_marks(b.code))
    for b in ALL
    if b.not_run is None
]
NOT_RUN_BLOCKS = [
    pytest.param(b.page.name, b.first, b.code, id=b.name) for b in ALL if b.not_run is not None
]


@pytest.mark.parametrize("page, first, code", RUN)
def test_every_snippet_runs_as_written(page, first, code, tmp_path):
    """Each snippet is self-contained (it writes its own input) and runs as a script."""
    (tmp_path / "tests").symlink_to(ROOT / "tests")  # "run from the repository"
    script = tmp_path / "snippet.py"
    script.write_text("\n" * (first - 1) + code)  # the page's line numbers in tracebacks
    out = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, f"{page} line {first}:\n{out.stderr[-3000:]}"


@pytest.mark.parametrize("page, first, code", NOT_RUN_BLOCKS)
def test_snippets_that_cannot_run_here_still_compile(page, first, code):
    compile("\n" * (first - 1) + code, page, "exec")


# ---- the tutorials, in this process ---------------------------------------------------------

TUTORIAL_BLOCKS = [pytest.param(b.first, b.code, id=b.name) for b in blocks(TUTORIALS)]


@pytest.mark.parametrize("first, code", TUTORIAL_BLOCKS)
def test_tutorial(first, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    source = "\n" * (first - 1) + code  # keep the page's line numbers in tracebacks
    namespace = {"__name__": "__docs_tutorial__"}
    exec(compile(source, str(TUTORIALS), "exec"), namespace)
    assert "tfr" in namespace, "the tutorial should import tfrec_fast as tfr"
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert written, "the tutorial should write its records into a temporary directory"
