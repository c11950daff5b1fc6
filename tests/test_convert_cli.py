"""`tfrec-fast convert imagefolder|voc|numpy` and the size parser behind --shard-size."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from _images import final_files, make_image_folder, make_voc, read_rows

from tfrec_fast.cli import main
from tfrec_fast.convert import parse_size
from tfrec_fast.sharded import read_manifest


def test_imagefolder(tmp_path, capsys):
    make_image_folder(tmp_path / "src")
    status = main(
        [
            "convert",
            "imagefolder",
            str(tmp_path / "src"),
            str(tmp_path / "out"),
            "--records-per-shard",
            "2",
            "--prefix",
            "pets",
            "--index",
            "--no-progress",
        ]
    )
    out, err = capsys.readouterr()
    assert status == 0, err
    assert out.startswith("5 records written to 3 shards")
    assert (
        err == f"SKIPPED {tmp_path / 'src' / 'dog' / 'broken.jpg'}: "
        "not an image (Pillow cannot identify it)\n"
    )
    assert final_files(tmp_path / "out") == sorted(
        [f"pets-{i:05d}-of-00003.tfrecord{ext}" for i in range(3) for ext in ("", ".idx")]
        + ["pets.labels.txt", "pets.manifest.json"]
    )


def test_voc_shuffled_round_robin(tmp_path, capsys):
    make_voc(tmp_path / "voc")
    args = [
        "convert",
        "voc",
        str(tmp_path / "voc"),
        str(tmp_path / "out"),
        "--split",
        "train",
        "--num-shards",
        "2",
        "--shuffle",
        "--seed",
        "3",
        "--compression",
        "gzip",
    ]
    assert main(args) == 0
    assert "3 records written to 2 shards" in capsys.readouterr().out
    manifest = read_manifest(tmp_path / "out" / "train.manifest.json")
    assert manifest["compression"] == "GZIP" and len(manifest["paths"]) == 2
    assert len(read_rows(tmp_path / "out" / "train.manifest.json")) == 3


def test_numpy_keys_and_shard_size(tmp_path, capsys):
    np.savez(tmp_path / "d.npz", x=np.zeros((40, 100), np.uint8), y=np.arange(40), z=np.ones(40))
    assert (
        main(
            [
                "convert",
                "numpy",
                str(tmp_path / "d.npz"),
                str(tmp_path / "out"),
                "--key",
                "y",
                "--key",
                "x",
                "--shard-size",
                "1K",
            ]
        )
        == 0
    )
    manifest = read_manifest(tmp_path / "out" / "d.manifest.json")
    assert list(manifest["spec"]) == ["y", "x", "x/shape", "x/dtype"]
    assert len(manifest["paths"]) > 1 and manifest["total_records"] == 40


def test_progress_bar_on_request(tmp_path, capsys):
    make_image_folder(tmp_path / "src")
    assert (
        main(["convert", "imagefolder", str(tmp_path / "src"), str(tmp_path / "out"), "--progress"])
        == 0
    )
    assert "img" in capsys.readouterr().err  # tqdm's bar, counting images


def test_strict_failure_is_an_error_line(tmp_path, capsys):
    make_image_folder(tmp_path / "src")
    status = main(
        ["convert", "imagefolder", str(tmp_path / "src"), str(tmp_path / "out"), "--strict"]
    )
    out, err = capsys.readouterr()
    assert status == 1 and out == ""
    assert err.startswith(f"ERROR {tmp_path / 'src' / 'dog' / 'broken.jpg'}: not an image")
    assert final_files(tmp_path / "out") == []


def test_existing_output_and_overwrite(tmp_path, capsys):
    np.savez(tmp_path / "d.npz", y=np.arange(4))
    args = ["convert", "numpy", str(tmp_path / "d.npz"), str(tmp_path / "out")]
    assert main(args) == 0
    assert main(args) == 1
    assert "already exists" in capsys.readouterr().err
    assert main(args + ["--overwrite"]) == 0


def test_usage_errors(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["convert", "numpy", "a.npz", "out", "--num-shards", "2", "--shard-size", "1M"])
    assert info.value.code == 2
    with pytest.raises(SystemExit):
        main(["convert", "numpy", "a.npz", "out", "--shard-size", "12Q"])
    assert "not a size" in capsys.readouterr().err
    assert main(["convert", "numpy", str(tmp_path / "missing.npz"), str(tmp_path / "o")]) == 1
    assert "ERROR" in capsys.readouterr().err


@pytest.mark.parametrize(
    "text, size",
    [
        ("500000", 500000),
        ("64K", 64 << 10),
        ("128MB", 128 << 20),
        ("1.5m", 3 << 19),
        ("2GiB", 2 << 30),
        (" 1 G ", 1 << 30),
    ],
)
def test_parse_size(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "MB", "12Q", "-1K", "0"])
def test_parse_size_rejects(text):
    with pytest.raises(ValueError):
        parse_size(text)


def test_module_subprocess_with_workers(tmp_path):
    """python -m tfrec_fast convert ... with worker processes (they must not rerun __main__)."""
    make_image_folder(tmp_path / "src")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "tfrec_fast",
            "convert",
            "imagefolder",
            str(tmp_path / "src"),
            str(tmp_path / "out"),
            "--workers",
            "2",
            "--num-shards",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONIOENCODING="utf-8"),
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("5 records written to 2 shards")
    assert "SKIPPED" in out.stderr and "broken.jpg" in out.stderr
    assert len(read_rows(tmp_path / "out" / "train.manifest.json")) == 5
