"""The `tfrec-fast` command line (python -m tfrec_fast and the console script)."""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import _oracle
import pytest
from conftest import make_payloads


def ok_line(path, n):
    """'OK <file> <n> records' (spec); a colon after the file name is tolerated."""
    return re.compile(r"^OK %s:? %d records\b" % (re.escape(str(path)), n), re.M)


def run_cli(*args, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "tfrec_fast", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def files(tmp_path):
    good = make_payloads(21, (0, 5, 100, 3000, 7))
    g = tmp_path / "good.tfrecord"
    g.write_bytes(_oracle.build_file(good))
    g2 = tmp_path / "good2.tfrecord"
    g2.write_bytes(_oracle.build_file(good[:2]))
    bad = tmp_path / "bad.tfrecord"
    offs = _oracle.record_offsets(good)
    bad.write_bytes(_oracle.flip_bit(_oracle.build_file(good), offs[2] + 12 + 50, 1))
    gz = tmp_path / "good.tfrecord.gz"
    gz.write_bytes(gzip.compress(_oracle.build_file(good)))
    return {"good": g, "good2": g2, "bad": bad, "gz": gz, "n": len(good), "bad_offset": offs[2]}


def test_count_single(files):
    """count prints '<count>\\t<file>' and exits 0."""
    out = run_cli("count", files["good"])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[0] == "%d\t%s" % (files["n"], files["good"])


def test_count_several_with_total(files):
    """count with several files prints one line per file and a total line."""
    out = run_cli("count", files["good"], files["good2"])
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "%d\t%s" % (files["n"], files["good"])
    assert lines[1] == "%d\t%s" % (2, files["good2"])
    assert len(lines) == 3 and str(files["n"] + 2) in lines[2]


def test_count_compressed(files):
    """count --compression gzip counts a gzip file."""
    out = run_cli("count", files["gz"], "--compression", "gzip")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[0] == "%d\t%s" % (files["n"], files["gz"])


def test_count_damaged_exit_1(tmp_path, files):
    """count exits 1 with a message on stderr when a file's framing is damaged."""
    t = tmp_path / "trunc.tfrecord"
    t.write_bytes(files["good"].read_bytes()[:-3])
    out = run_cli("count", t)
    assert out.returncode == 1
    assert out.stderr.strip()


def test_verify_good(files):
    """verify prints 'OK <file> <n> records' and exits 0 on good files."""
    out = run_cli("verify", files["good"], files["good2"])
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert ok_line(files["good"], files["n"]).search(text), text
    assert ok_line(files["good2"], 2).search(text), text


def test_verify_compressed(files):
    """verify --compression gzip checks a gzip file."""
    out = run_cli("verify", "--compression", "gzip", files["gz"])
    assert out.returncode == 0, out.stderr
    assert ok_line(files["gz"], files["n"]).search(out.stdout), out.stdout


def test_verify_damaged(files):
    """verify exits 1 on a damaged file and reports DAMAGED with offset and reason."""
    out = run_cli("verify", files["good"], files["bad"])
    assert out.returncode == 1
    text = out.stdout + out.stderr
    assert "OK %s" % files["good"] in text
    assert "DAMAGED %s" % files["bad"] in text
    assert str(files["bad_offset"]) in text
    assert "data_checksum" in text or "data checksum" in text or "corrupted record" in text


def test_verify_missing_file(tmp_path):
    """verify of a missing file exits non-zero (no traceback required, but not success)."""
    out = run_cli("verify", tmp_path / "missing.tfrecord")
    assert out.returncode != 0


def test_bench_small_file(files):
    """bench on a small file exits 0 and reports records/s."""
    out = run_cli("bench", files["good"], timeout=300)
    assert out.returncode == 0, out.stderr
    assert "records/s" in out.stdout


def test_bench_counts_and_times_both_readers(tmp_path, capsys):
    import tfrec_fast
    from tfrec_fast.cli import main

    path = tmp_path / "r.tfrecord"
    with tfrec_fast.TFRecordWriter(str(path)) as w:
        w.write_batch([b"x" * 100] * 50)
    assert main(["bench", str(path), "--repeat", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("50 records, 0.0 MB of payload; median of 2 runs")
    rows = [line for line in out.splitlines() if line.startswith("| tfrec_fast")]
    assert [row.split(" | ")[0] for row in rows] == [
        "| tfrec_fast batched (read_batches)",
        "| tfrec_fast per record (read_records)",
    ]


def _installed() -> bool:
    from importlib import metadata

    try:
        metadata.distribution("tfrec_fast")
        return True
    except metadata.PackageNotFoundError:
        return False


def test_console_script_is_declared(files, capsys):
    """pyproject.toml's `tfrec-fast` entry point names a function that runs the CLI."""
    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert 'tfrec-fast = "tfrec_fast.cli:main"' in text
    from tfrec_fast.cli import main

    assert main(["count", str(files["good"])]) == 0
    assert capsys.readouterr().out.startswith("%d\t" % files["n"])


@pytest.mark.skipif(
    not _installed(),
    reason="run from the source tree: no installed "
    "distribution, so no console script (the README's install runs this)",
)
def test_console_script_installed(files):
    """The `tfrec-fast` console script sits next to the interpreter and works."""
    bindir = Path(sys.executable).parent
    script = bindir / ("tfrec-fast.exe" if os.name == "nt" else "tfrec-fast")
    found = script if script.exists() else shutil.which("tfrec-fast")
    assert found, "tfrec-fast console script not installed in %s" % bindir
    out = subprocess.run(
        [str(found), "count", str(files["good"])], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("%d\t" % files["n"])
