"""Runs the ```python blocks of README.md's examples and conversion sections, each in a fresh
namespace.

The examples check their own round trips with ``assert``. Each runs with the working directory
and ``tempfile``'s directory set to a fresh ``tmp_path``, so the files it writes land there.
Tracebacks point at README.md's own line numbers.
"""
from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
SECTION = "## Examples (from the tutorials the project was born from)"
CONVERSION = "## Converting datasets"


def examples(section=SECTION):
    """[(subsection title, first line number of the code, code)] of a README section."""
    lines = README.read_text(encoding="utf-8").splitlines()
    try:
        start = lines.index(section)
    except ValueError:
        return []
    found, title, block, first = [], section[3:], None, 0
    for number, line in enumerate(lines[start + 1:], start + 2):  # 1-based README line numbers
        if block is None and re.match(r"##(?!#)", line):
            break  # the next level-2 section ends this one
        if block is None and line.startswith("### "):
            title = line[4:].strip()
        elif block is None and line.strip() == "```python":
            block, first = [], number + 1
        elif block is not None and line.strip() == "```":
            found.append((title, first, "\n".join(block) + "\n"))
            block = None
        elif block is not None:
            block.append(line)
    assert block is None, f"README.md: unterminated ```python block at line {first - 1}"
    return found


EXAMPLES = examples() + examples(CONVERSION)


def test_section_has_the_examples():
    assert len(EXAMPLES) >= 4, f"{SECTION!r} in README.md should hold at least 4 python blocks"


@pytest.mark.parametrize("title, first, code", EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_readme_example(title, first, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    source = "\n" * (first - 1) + code  # keep README.md's line numbers in tracebacks
    namespace = {"__name__": "__readme_example__"}
    exec(compile(source, str(README), "exec"), namespace)
    assert "tfr" in namespace, "the example should import tfrec_fast as tfr"
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert written, "the example should write its records into a temporary directory"


def all_blocks():
    """[(first line number, code)] of every ```python block of README.md."""
    found, block, first = [], None, 0
    for number, line in enumerate(README.read_text(encoding="utf-8").splitlines(), 1):
        if block is None and line.strip() == "```python":
            block, first = [], number + 1
        elif block is not None and line.strip() == "```":
            found.append((first, "\n".join(block) + "\n"))
            block = None
        elif block is not None:
            block.append(line)
    return found


def missing_packages(code):
    """The optional packages a snippet imports (or uses for its URLs: fsspec) that are not
    installed: the extras the README names for it (a wheel's test run has only the core's)."""
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


OTHER_BLOCKS = [pytest.param(first, code, id=f"line{first}", marks=needs_marks(code))
                for first, code in all_blocks() if first not in {f for _, f, _ in EXAMPLES}]


@pytest.mark.parametrize("first, code", OTHER_BLOCKS)
def test_every_readme_snippet_runs_as_written(first, code, tmp_path):
    """Each snippet is self-contained (it writes its own input) and runs as a script, so code
    under `if __name__ == "__main__":` runs too (DataLoader workers may import it again)."""
    (tmp_path / "tests").symlink_to(README.parent / "tests")  # "run from the repository"
    script = tmp_path / "snippet.py"
    script.write_text("\n" * (first - 1) + code)  # README.md's line numbers in tracebacks
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, f"README.md line {first}:\n{out.stderr[-3000:]}"
