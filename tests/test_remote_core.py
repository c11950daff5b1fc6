"""The parts of the storage layer that need no fsspec: telling URLs from paths, masking
credentials, file:// URLs, local globs as Locations, settings in storage_options,
--storage-option, and the error a URL gives where fsspec is not installed."""

from __future__ import annotations

import importlib.util
import sys
import uuid

import pytest

import tfrec_fast as tfr
from tfrec_fast import storage
from tfrec_fast._cli_options import storage_option
from tfrec_fast.cli import main


@pytest.mark.parametrize(
    "text,url",
    [
        ("s3://bucket/train-*.tfrecord", True),
        ("gs://b/x", True),
        ("az://c/x", True),
        ("https://host/x.tfrecord", True),
        ("memory://x", True),
        ("file:///tmp/x", True),
        ("simplecache::s3://b/x", True),
        ("/tmp/x.tfrecord", False),
        ("x.tfrecord", False),
        ("C:\\data\\x.tfrecord", False),
        ("train-*.tfrecord", False),
        ("a:b/c", False),
    ],
)
def test_is_url(text, url):
    assert storage.is_url(text) is url


def test_redact_masks_user_info_and_query_strings():
    text = (
        "GET https://alice:hunter2@host:9000/b/k?X-Amz-Signature=abc&x=1 failed; "
        "see s3://key:secret@bucket/k"
    )
    masked = storage.redact(text)
    assert masked == ("GET https://***@host:9000/b/k?*** failed; see s3://***@bucket/k")
    assert storage.redact("/local/path?not-a-query") == "/local/path?not-a-query"


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
    for call in (
        lambda: tfr.count_records("s3://bucket/x.tfrecord"),
        lambda: tfr.TFRecordWriter("gs://bucket/x.tfrecord"),
        lambda: tfr.IndexedTFRecordReader("https://host/x.tfrecord"),
    ):
        with pytest.raises(ImportError, match=r"pip install 'tfrec_fast\[remote\]'"):
            call()


def test_storage_options_are_for_urls(tmp_path):
    path = tmp_path / "a.tfrecord"
    path.write_bytes(b"")
    with pytest.raises(ValueError, match="storage_options are for URLs"):
        tfr.count_records(str(path), storage_options={"anon": True})


def test_storage_option_values(capsys):
    assert storage_option("endpoint_url=http://127.0.0.1:9000") == (
        "endpoint_url",
        "http://127.0.0.1:9000",
    )
    assert storage_option("anon=true") == ("anon", True)
    assert storage_option('client_kwargs={"region_name": "eu-west-1"}') == (
        "client_kwargs",
        {"region_name": "eu-west-1"},
    )
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
def test_location_read_with_one_bound_reads_to_the_end_or_from_the_start():
    # read(start) used to fail with a TypeError (end - start with end None), and read(end=n)
    # returned the whole object.
    location = storage.resolve(f"memory://tfrec-fast-read-{uuid.uuid4().hex}/x.bin")
    location.write_bytes(b"0123456789")
    try:
        assert location.read() == b"0123456789"
        assert location.read(3, 5) == b"34"
        assert location.read(7) == b"789"
        assert location.read(end=4) == b"0123"
    finally:
        location.remove()


def test_local_globs_are_locations_of_the_local_store(tmp_path):
    for name in ("b.tfrecord", "a.tfrecord"):
        (tmp_path / name).write_bytes(b"")
    found = storage.expand(str(tmp_path / "*.tfrecord"))
    assert [loc.url for loc in found] == [
        str(tmp_path / "a.tfrecord"),
        str(tmp_path / "b.tfrecord"),
    ]
    assert all(loc.os_path == loc.url for loc in found)
    with pytest.raises(FileNotFoundError, match="no file matches") as error:
        storage.expand(str(tmp_path / "*.idx"))
    assert error.value.filename == str(tmp_path / "*.idx")


def test_settings_ride_in_storage_options(tmp_path, monkeypatch):
    fs_options, settings = storage.split_options(
        {"anon": True, "retries": 7, "range_size": 1 << 20}
    )
    assert fs_options == {"anon": True}
    assert (settings.retries, settings.range_size) == (7, 1 << 20)
    assert storage.split_options(None)[1] is storage.DEFAULTS
    with pytest.raises(ValueError, match="read_ahead"):
        storage.Settings(range_size=8 << 20, read_ahead=4 << 20)
    with pytest.raises(ValueError, match="retries"):
        storage.Settings(retries=-1)
    # settings only, for a local path: accepted (and meaningless), unlike fsspec options
    path = tmp_path / "a.tfrecord"
    with tfr.TFRecordWriter(path) as writer:
        writer.write(b"x")
    assert tfr.count_records(str(path), storage_options={"retries": 1}) == 1
    monkeypatch.setenv("TFREC_FAST_CACHE_DIR", "")
    assert storage.settings.cache_dir(storage.DEFAULTS) is None
    monkeypatch.setenv("TFREC_FAST_CACHE_DIR", str(tmp_path))
    assert storage.settings.cache_dir(storage.DEFAULTS) == str(tmp_path)
    assert storage.settings.cache_dir(storage.Settings(index_cache=False)) is None
