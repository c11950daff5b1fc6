"""The parts of remote data that need no fsspec: telling URLs from paths, masking credentials,
file:// URLs, --storage-option, and the error a URL gives where fsspec is not installed."""
from __future__ import annotations

import importlib.util
import sys
import uuid

import pytest

import tfrec_fast as tfr
from tfrec_fast import remote
from tfrec_fast.cli import main, storage_option


@pytest.mark.parametrize("text,url", [
    ("s3://bucket/train-*.tfrecord", True), ("gs://b/x", True), ("az://c/x", True),
    ("https://host/x.tfrecord", True), ("memory://x", True), ("file:///tmp/x", True),
    ("simplecache::s3://b/x", True), ("/tmp/x.tfrecord", False), ("x.tfrecord", False),
    ("C:\\data\\x.tfrecord", False), ("train-*.tfrecord", False), ("a:b/c", False)])
def test_is_url(text, url):
    assert remote.is_url(text) is url


def test_redact_masks_user_info_and_query_strings():
    text = ("GET https://alice:hunter2@host:9000/b/k?X-Amz-Signature=abc&x=1 failed; "
            "see s3://key:secret@bucket/k")
    masked = remote.redact(text)
    assert masked == ("GET https://***@host:9000/b/k?*** failed; see s3://***@bucket/k")
    assert remote.redact("/local/path?not-a-query") == "/local/path?not-a-query"


def test_file_urls_are_local_paths_without_fsspec(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "fsspec", None)  # as if not installed
    path = tmp_path / "a b.tfrecord"
    with tfr.TFRecordWriter(path) as writer:
        writer.write_batch([b"one", b"two"])
    url = path.as_uri()  # file:///.../a%20b.tfrecord
    assert list(tfr.read_records(url, copy=True)) == [b"one", b"two"]
    assert tfr.count_records(url) == 2
    with tfr.IndexedTFRecordReader(url) as reader:
        assert bytes(reader[1]) == b"two"


def test_url_without_fsspec_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "fsspec", None)
    for call in (lambda: tfr.count_records("s3://bucket/x.tfrecord"),
                 lambda: tfr.TFRecordWriter("gs://bucket/x.tfrecord"),
                 lambda: tfr.IndexedTFRecordReader("https://host/x.tfrecord")):
        with pytest.raises(ImportError, match=r"pip install 'tfrec_fast\[remote\]'"):
            call()


def test_storage_options_are_for_urls(tmp_path):
    path = tmp_path / "a.tfrecord"
    path.write_bytes(b"")
    with pytest.raises(ValueError, match="storage_options are for URLs"):
        tfr.count_records(str(path), storage_options={"anon": True})


def test_storage_option_values(capsys):
    assert storage_option("endpoint_url=http://127.0.0.1:9000") == \
        ("endpoint_url", "http://127.0.0.1:9000")
    assert storage_option("anon=true") == ("anon", True)
    assert storage_option("client_kwargs={\"region_name\": \"eu-west-1\"}") == \
        ("client_kwargs", {"region_name": "eu-west-1"})
    assert storage_option("token=") == ("token", "")
    with pytest.raises(SystemExit) as exit_:
        main(["count", "--storage-option", "s3cr3t", "x.tfrecord"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "expected KEY=VALUE" in err and "s3cr3t" not in err


def test_local_paths_take_no_storage_option_from_the_cli(tmp_path, capsys):
    path = tmp_path / "a.tfrecord"
    with tfr.TFRecordWriter(path) as writer:
        writer.write(b"x")
    assert main(["count", "--storage-option", "anon=true", str(path)]) == 0
    assert capsys.readouterr().out == f"1\t{path}\n"


@pytest.mark.skipif(importlib.util.find_spec("fsspec") is None, reason="needs fsspec")
def test_remote_path_read_with_one_bound_reads_to_the_end_or_from_the_start():
    # read(start) used to fail with a TypeError (end - start with end None), and read(end=n)
    # returned the whole object.
    rp = remote.resolve(f"memory://tfrec-fast-read-{uuid.uuid4().hex}/x.bin")
    rp.write_bytes(b"0123456789")
    try:
        assert rp.read() == b"0123456789"
        assert rp.read(3, 5) == b"34"
        assert rp.read(7) == b"789"
        assert rp.read(end=4) == b"0123"
    finally:
        rp.remove()


def test_expand_refuses_a_local_path_clearly(tmp_path):
    # It used to fail with AttributeError ('str' object has no attribute 'path').
    with pytest.raises(ValueError, match="is a local path"):
        remote.expand(str(tmp_path / "*.tfrecord"))
