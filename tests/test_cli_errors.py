"""The tfrec-fast command line: errors as one line (never a traceback), piped input, globs,
--compression choices, --version, plain help (issue #10, findings B and E)."""

from __future__ import annotations

import argparse
import gzip
import re
import subprocess
import sys
import zlib

import _oracle
import numpy as np
import pytest
from _images import make_image_folder

import tfrec_fast
from tfrec_fast.cli import build_parser, main

PAYLOADS = [tfrec_fast.encode_example({"b": b"x" * n}) for n in (0, 5, 100, 3000, 7)]


@pytest.fixture
def files(tmp_path):
    good = tmp_path / "good.tfrecord"
    good.write_bytes(_oracle.build_file(PAYLOADS))
    raw = _oracle.build_file(PAYLOADS)
    damaged = tmp_path / "damaged.tfrecord"
    damaged.write_bytes(_oracle.flip_bit(raw, _oracle.record_offsets(PAYLOADS)[3] + 1))
    gz = tmp_path / "good.tfrecord.gz"
    gz.write_bytes(gzip.compress(raw))
    return {
        "good": good,
        "damaged": damaged,
        "gz": gz,
        "missing": tmp_path / "missing.tfrecord",
        "dir": tmp_path,
    }


def run_cli(*args, stdin=None):
    return subprocess.run(
        [sys.executable, "-m", "tfrec_fast", *map(str, args)],
        input=stdin,
        capture_output=True,
        timeout=120,
    )


# ---- B: piped input ------------------------------------------------------------------------------

COMPRESS = {"none": lambda b: b, "gzip": gzip.compress, "zlib": zlib.compress}


@pytest.mark.parametrize("kind", sorted(COMPRESS))
@pytest.mark.parametrize("name", [pytest.param("/dev/stdin", marks=pytest.mark.posix), "-"])
def test_verify_reads_a_pipe(kind, name):
    data = COMPRESS[kind](_oracle.build_file(PAYLOADS))
    out = run_cli("verify", name, stdin=data)
    assert out.returncode == 0, out.stderr
    shown = "<stdin>" if name == "-" else name
    assert (
        out.stdout.decode() == f"OK {shown}: 5 records, {sum(map(len, PAYLOADS))} payload bytes\n"
    )


@pytest.mark.parametrize("kind", sorted(COMPRESS))
def test_count_cat_schema_repair_read_stdin(kind, tmp_path):
    examples = [tfrec_fast.encode_example({"i": i}) for i in range(4)]
    data = COMPRESS[kind](_oracle.build_file(examples))
    out = run_cli("count", "-", stdin=data)
    assert (out.returncode, out.stdout.decode()) == (0, "4\t<stdin>\n"), out.stderr
    out = run_cli("cat", "-", "--limit", "0", stdin=data)
    assert out.returncode == 0 and out.stdout.decode().splitlines()[3] == '{"i": [3]}'
    out = run_cli("schema", "-", stdin=data)
    assert out.returncode == 0 and b'"i"' in out.stdout
    fixed = tmp_path / "fixed.tfrecord"
    out = run_cli("verify", "-", "--repair", fixed, stdin=data)
    assert out.returncode == 0, out.stderr
    with tfrec_fast.TFRecordReader(fixed, "auto") as reader:  # same compression, records
        assert [bytes(r) for r in reader] == examples
        assert reader.compression == ("" if kind == "none" else kind)


def test_bench_and_index_with_stdin(files):
    data = files["good"].read_bytes()
    out = run_cli("bench", "-", "--repeat", "1", "--no-peers", stdin=data)
    assert out.returncode == 0 and b"tfrec_fast batched" in out.stdout, out.stderr
    out = run_cli("index", "-", stdin=data)
    assert out.returncode == 1 and out.stderr.startswith(b"ERROR <stdin>: ")
    assert b"Traceback" not in out.stderr


# ---- E: errors are one line ------------------------------------------------------------------------

COMMANDS = [
    ["count"],
    ["verify"],
    ["index"],
    ["bench", "--repeat", "1", "--no-peers"],
    ["cat"],
    ["schema"],
]


def check_error(status, err, prefix):
    assert status == 1, err
    assert "Traceback" not in err
    assert err.startswith(prefix), err


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_missing_and_unreadable_inputs(files, command, capsys):
    for what in ("missing", "dir"):
        path = files[what]
        status = main([*command, str(path)])
        _, err = capsys.readouterr()
        check_error(status, err, f"ERROR {path}: ")
        assert ("No such file" if what == "missing" else "directory") in err


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_damaged_input_is_reported_as_damaged(files, command, capsys):
    status = main([*command, str(files["damaged"])])
    _, err = capsys.readouterr()
    check_error(status, err, f"DAMAGED {files['damaged']}: record 3 at offset")


def test_repair_of_missing_and_unreadable_inputs(files, capsys):
    out = files["dir"] / "out.tfrecord"
    for what in ("missing", "dir"):
        status = main(["verify", str(files[what]), "--repair", str(out)])
        _, err = capsys.readouterr()
        check_error(status, err, f"ERROR {files[what]}: ")
        assert not out.exists()


def test_repair_into_a_missing_directory(files, capsys):
    out = files["dir"] / "no" / "such" / "out.tfrecord"
    status = main(["verify", str(files["good"]), "--repair", str(out)])
    _, err = capsys.readouterr()
    check_error(status, err, "ERROR ")
    assert "No such file or directory" in err


def test_module_subprocess_reports_without_traceback(files):
    out = run_cli("bench", files["missing"])
    assert out.returncode == 1
    assert out.stderr.decode() == f"ERROR {files['missing']}: No such file or directory\n"
    out = run_cli("verify", files["damaged"], "--repair", files["dir"] / "fixed.tfrecord")
    assert out.returncode == 1 and b"Traceback" not in out.stderr
    assert out.stdout.startswith(b"REPAIRED ")


# ---- globs on the command line ---------------------------------------------------------------------


def test_quoted_patterns(files, capsys):
    pattern = str(files["dir"] / "good.tfrecord*")
    assert main(["count", pattern]) == 0
    out, _ = capsys.readouterr()
    assert out == (f"5\t{files['good']}\n5\t{files['gz']}\n10\ttotal\n")
    nothing = str(files["dir"] / "nothing-*.tfrecord")
    status = main(["verify", str(files["good"]), nothing])
    out, err = capsys.readouterr()
    check_error(status, err, f"ERROR {nothing}: no file matches")
    assert out.startswith(f"OK {files['good']}: 5 records")  # the rest is still done
    status = main(["cat", pattern])
    _, err = capsys.readouterr()
    check_error(status, err, f"ERROR {pattern}: matches 2 files")


# ---- options, version, help ------------------------------------------------------------------------


def test_compression_choices(files, capsys):
    with pytest.raises(SystemExit) as info:
        main(["count", "--compression", "bz2", str(files["good"])])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "'bz2'" in err and all(f"'{c}'" in err for c in ("none", "gzip", "zlib", "auto"))
    with pytest.raises(SystemExit):
        main(["verify", "--help"])
    out = capsys.readouterr().out
    assert "{none,gzip,zlib,auto}" in out and "default: auto" in out
    assert main(["count", "--compression", "GZIP", str(files["gz"])]) == 0


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out == f"tfrec-fast {tfrec_fast.__version__}\n"


def _parsers(parser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def test_help_has_no_restructuredtext_markup():
    helps = [p.format_help() for p in _parsers(build_parser())]
    assert len(helps) == 11  # tfrec-fast, 6 commands, convert and its 3 kinds
    for text in helps:
        assert not re.search(r"``|:(func|class|meth|data|attr):|^\.\. ", text, re.M), text


# ---- convert ---------------------------------------------------------------------------------------


def test_convert_existing_output_names_the_option(tmp_path, capsys):
    np.savez(tmp_path / "a.npz", x=np.arange(3))
    args = ["convert", "numpy", str(tmp_path / "a.npz"), str(tmp_path / "out")]
    assert main(args) == 0
    capsys.readouterr()
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.startswith("ERROR ") and "--overwrite" in err and "overwrite=True" not in err
    assert main(args + ["--overwrite"]) == 0


def test_convert_summary_names_ignored_files(tmp_path, capsys):
    make_image_folder(tmp_path / "src")
    assert (
        main(
            [
                "convert",
                "imagefolder",
                str(tmp_path / "src"),
                str(tmp_path / "out"),
                "--no-progress",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "2 ignored" in out
    assert "ignored files: README.md, dog/notes.txt\n" in out


def test_convert_numpy_from_stdin(tmp_path):
    np.savez(tmp_path / "a.npz", x=np.arange(3))
    out = run_cli(
        "convert", "numpy", "-", tmp_path / "out", stdin=(tmp_path / "a.npz").read_bytes()
    )
    assert out.returncode == 0, out.stderr
    assert tfrec_fast.count_records(str(tmp_path / "out" / "data-*.tfrecord")) == 3
