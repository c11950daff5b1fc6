"""Nothing that writes may destroy its input: verify --repair, index, create_index, convert,
ShardedWriter (issue #10, finding A)."""

from __future__ import annotations

import io
import os

import _oracle
import numpy as np
import pytest
from _images import make_voc

import tfrec_fast
from tfrec_fast import cli, records
from tfrec_fast.cli import main
from tfrec_fast.convert import convert_numpy, convert_voc

PAYLOADS = [b"a" * n for n in (0, 3, 100, 7)]


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "in.tfrecord"
    path.write_bytes(_oracle.build_file(PAYLOADS))
    return path


def _same_path_spellings(path):
    """Ways to name the input again: itself, ./itself, a symlink, a hard link."""
    os.symlink(path.name, path.parent / "link.tfrecord")
    os.link(path, path.parent / "hard.tfrecord")
    return [
        str(path),
        os.path.join(str(path.parent), ".", path.name),
        str(path.parent / "link.tfrecord"),
        str(path.parent / "hard.tfrecord"),
    ]


@pytest.mark.posix  # symlinks need privileges on Windows
def test_repair_refuses_to_write_over_its_input(data, capsys):
    before = data.read_bytes()
    for out in _same_path_spellings(data):
        status = main(["verify", str(data), "--repair", out])
        _, err = capsys.readouterr()
        assert status != 0, out
        assert err.startswith(f"ERROR {out}: ") and "input" in err, err
        assert data.read_bytes() == before, out


def test_repair_refuses_its_input_named_relatively(data, capsys, monkeypatch):
    monkeypatch.chdir(data.parent)
    before = data.read_bytes()
    assert main(["verify", data.name, "--repair", "./" + data.name]) != 0
    assert "ERROR" in capsys.readouterr().err
    assert data.read_bytes() == before


class _FailingWriter(records.TFRecordWriter):
    def write_batch(self, batch):
        raise OSError(28, "No space left on device")


def test_repair_failing_midway_keeps_the_old_output(data, tmp_path, capsys, monkeypatch):
    """OUT is written under a temporary name: a failed repair leaves an existing OUT as it
    was, and no temporary file behind."""
    out = tmp_path / "out.tfrecord"
    out.write_bytes(b"an earlier output")
    monkeypatch.setattr(records, "TFRecordWriter", _FailingWriter)
    monkeypatch.setattr(cli, "TFRecordWriter", _FailingWriter, raising=False)
    status = main(["verify", str(data), "--repair", str(out)])
    err = capsys.readouterr().err
    assert status == 1 and "No space left on device" in err and "Traceback" not in err
    assert out.read_bytes() == b"an earlier output"
    assert sorted(os.listdir(tmp_path)) == ["in.tfrecord", "out.tfrecord"]


def test_repair_output_is_complete_and_alone(data, tmp_path, capsys):
    out = tmp_path / "fixed.tfrecord"
    assert main(["verify", str(data), "--repair", str(out)]) == 0
    assert out.read_bytes() == data.read_bytes()
    assert sorted(os.listdir(tmp_path)) == ["fixed.tfrecord", "in.tfrecord"]
    assert oct(out.stat().st_mode & 0o777) != oct(0o600)  # not mkstemp's private mode


def test_index_cli_refuses_to_write_over_the_data(data, capsys):
    before = data.read_bytes()
    status = main(["index", str(data), "--suffix", ""])
    err = capsys.readouterr().err
    assert status == 1 and err.startswith(f"ERROR {data}: ") and "Traceback" not in err
    assert data.read_bytes() == before


@pytest.mark.posix  # symlinks need privileges on Windows
def test_create_index_refuses_the_data_path(data):
    before = data.read_bytes()
    for index_path in _same_path_spellings(data):
        with pytest.raises(ValueError, match="data file"):
            tfrec_fast.create_index(data, index_path)
        assert data.read_bytes() == before, index_path
    tfrec_fast.create_index(data, str(data) + ".idx")  # any other path is fine


def test_convert_numpy_refuses_to_replace_its_input(tmp_path):
    """An .npz named like a shard of the output, with overwrite=True: refused, kept."""
    src = tmp_path / "rows-00000-of-00001.tfrecord"
    buffer = io.BytesIO()
    np.savez(buffer, x=np.arange(5))
    src.write_bytes(buffer.getvalue())
    with pytest.raises(ValueError, match="input"):
        convert_numpy(src, tmp_path, prefix="rows", overwrite=True)
    assert src.read_bytes() == buffer.getvalue()
    assert sorted(os.listdir(tmp_path)) == [src.name]  # nothing written, no temporary left


def test_sharded_writer_protect(tmp_path):
    existing = tmp_path / "train-00000-of-00002.tfrecord"
    existing.write_bytes(_oracle.build_file(PAYLOADS))
    with pytest.raises(ValueError, match="input"):
        tfrec_fast.ShardedWriter(tmp_path, "train", overwrite=True, protect=[existing])
    manifest = tmp_path / "data.tfrecord"
    manifest.write_bytes(b"precious")
    with pytest.raises(ValueError, match="input"):
        tfrec_fast.ShardedWriter(tmp_path / "out", "x", manifest=manifest, protect=[manifest])
    assert manifest.read_bytes() == b"precious"
    assert existing.read_bytes() == _oracle.build_file(PAYLOADS)


def test_reshard_in_place_keeps_every_record(tmp_path):
    """Reading shards while writing their replacement (overwrite=True): the new shards are
    renamed in only at close, after the old ones were read."""
    with tfrec_fast.ShardedWriter(tmp_path, "train", num_shards=3) as w:
        w.write_batch(str(i).encode() for i in range(30))
    before = sorted(bytes(r) for r in tfrec_fast.read_records(str(tmp_path / "train-*")))
    with tfrec_fast.ShardedWriter(tmp_path, "train", num_shards=2, overwrite=True) as w:
        w.write_batch(tfrec_fast.read_records(str(tmp_path / "train-*")))
    after = sorted(bytes(r) for r in tfrec_fast.read_records(str(tmp_path / "train-*")))
    assert after == before and len(w.shards) == 2


def test_voc_keeps_a_label_file_that_is_the_label_map(tmp_path):
    """--labels pointing at the label map an earlier run wrote: read, and left as it is."""
    make_voc(tmp_path / "voc")
    out = tmp_path / "out"
    out.mkdir()
    labels = out / "train.labels.txt"
    text = "none\n\ncar\ncat\n  dog\nperson\ntvmonitor\n"  # a blank line, an indent
    labels.write_text(text)
    summary = convert_voc(tmp_path / "voc", out, labels=labels)
    assert summary.records == 3 and summary.skipped == []
    assert summary.label_map == str(labels)
    assert labels.read_text() == text


def test_repair_refuses_its_input_named_by_a_file_url(data, capsys):
    # A file:// URL is a local path: it is the input as much as the plain path is.
    before = data.read_bytes()
    for args in ([str(data), data.as_uri()], [data.as_uri(), str(data)]):
        assert main(["verify", args[0], "--repair", args[1]]) == 2, args
        assert "is the input file" in capsys.readouterr().err
        assert data.read_bytes() == before


def test_repair_into_a_file_url(data, tmp_path, capsys):
    # It used to fail with AttributeError ('str' object has no attribute 'parent').
    out = tmp_path / "fixed.tfrecord"
    assert main(["verify", str(data), "--repair", out.as_uri()]) == 0
    assert out.read_bytes() == data.read_bytes()
    assert sorted(os.listdir(tmp_path)) == ["fixed.tfrecord", "in.tfrecord"]
