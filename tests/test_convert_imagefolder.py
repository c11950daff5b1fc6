"""convert_imagefolder: a class-per-subdirectory image folder -> sharded Examples."""

from __future__ import annotations

import os

import pytest
from _images import (
    CORRUPT_IMAGE,
    FOLDER_CLASSES,
    final_files,
    make_image_folder,
    read_rows,
    shard_bytes,
)

import tfrec_fast as tfr
from tfrec_fast.convert import BadInputError, ConvertSummary, convert_imagefolder
from tfrec_fast.sharded import read_manifest


@pytest.fixture
def folder(tmp_path):
    src = tmp_path / "images"
    return src, make_image_folder(src)


def test_round_trip_every_feature(folder, tmp_path):
    src, expected = folder
    out = tmp_path / "out"
    summary = convert_imagefolder(src, out)
    assert isinstance(summary, ConvertSummary)
    assert summary.records == len(expected) == 5
    assert summary.ignored == 2  # dog/notes.txt and README.md; the hidden .cache/ is not looked at
    assert summary.skipped == [
        (
            os.path.join(str(src), *CORRUPT_IMAGE.split("/")),
            "not an image (Pillow cannot identify it)",
        )
    ]
    assert summary.shards == [str(out / "train-00000-of-00001.tfrecord")]
    assert summary.bytes == os.path.getsize(summary.shards[0])
    rows = read_rows(summary.manifest)
    # class order, then path order; every feature equal to the source (bytes identical)
    assert [r["image/filename"] for r in rows] == [rel.encode() for rel in expected]
    for row in rows:
        assert row == expected[row["image/filename"].decode()]
    assert (out / "train.labels.txt").read_text() == "".join(c + "\n" for c in FOLDER_CLASSES)
    assert summary.label_map == str(out / "train.labels.txt")


def test_summary_reads_well(folder, tmp_path):
    src, _ = folder
    text = str(convert_imagefolder(src, tmp_path / "out"))
    assert text.startswith("5 records written to 1 shard (")
    assert "1 skipped; 2 ignored" in text
    assert "manifest: " + str(tmp_path / "out" / "train.manifest.json") in text
    assert "label map: " + str(tmp_path / "out" / "train.labels.txt") in text


def test_manifest_spec_parses_the_output(folder, tmp_path):
    src, _ = folder
    summary = convert_imagefolder(src, tmp_path / "out", prefix="flowers")
    assert summary.manifest == str(tmp_path / "out" / "flowers.manifest.json")
    manifest = read_manifest(summary.manifest)
    assert manifest["total_records"] == 5
    spec = manifest["spec"]
    assert set(spec) == {
        "image/encoded",
        "image/format",
        "image/class/label",
        "image/class/text",
        "image/height",
        "image/width",
        "image/filename",
    }
    assert all(isinstance(s, tfr.FixedLen) and s.shape == () for s in spec.values())
    first = next(iter(tfr.read_records(manifest["paths"])))
    assert tfr.parse_example(first, spec)["image/class/text"] == b"bird"


def test_pixels_are_never_decoded(folder, tmp_path, monkeypatch):
    from PIL import ImageFile

    def refuse(self):
        raise AssertionError("pixels decoded")

    monkeypatch.setattr(ImageFile.ImageFile, "load", refuse)
    src, expected = folder
    assert convert_imagefolder(src, tmp_path / "out").records == len(expected)


def test_workers_give_identical_shards(folder, tmp_path):
    src, _ = folder
    one = convert_imagefolder(src, tmp_path / "w1", num_shards=2, shuffle=True, seed=5)
    two = convert_imagefolder(src, tmp_path / "w2", num_shards=2, shuffle=True, seed=5, workers=2)
    assert shard_bytes(one.shards) == shard_bytes(two.shards)
    assert one.skipped == two.skipped and one.records == two.records == 5


def test_shuffle_is_a_seeded_permutation(folder, tmp_path):
    src, expected = folder
    names = {}
    for name, kwargs in {"plain": {}, "a": {"seed": 1}, "b": {"seed": 1}, "c": {"seed": 2}}.items():
        shuffle = bool(kwargs)
        summary = convert_imagefolder(src, tmp_path / name, shuffle=shuffle, **kwargs)
        names[name] = [r["image/filename"] for r in read_rows(summary.manifest)]
    assert names["plain"] == [rel.encode() for rel in expected]
    assert names["a"] == names["b"]
    assert sorted(names["a"]) == sorted(names["plain"]) == sorted(names["c"])
    assert names["a"] != names["plain"] and names["a"] != names["c"]


@pytest.mark.parametrize(
    "kwargs, counts",
    [
        ({"records_per_shard": 2}, [2, 2, 1]),
        ({"num_shards": 4}, [2, 1, 1, 1]),
        ({"shard_size": "1K"}, None),  # every image is smaller than 1 KiB, two never fit
    ],
)
def test_shard_naming_and_counts(folder, tmp_path, kwargs, counts):
    src, _ = folder
    out = tmp_path / "out"
    summary = convert_imagefolder(src, out, prefix="part", **kwargs)
    n = len(summary.shards)
    assert summary.shards == [str(out / f"part-{i:05d}-of-{n:05d}.tfrecord") for i in range(n)]
    manifest = read_manifest(summary.manifest)
    records = [s["records"] for s in manifest["shards"]]
    assert sum(records) == 5
    if counts is not None:
        assert records == counts
    else:
        assert n > 1
    assert [tfr.count_records(p) for p in summary.shards] == records
    assert final_files(out) == sorted(
        [os.path.basename(p) for p in summary.shards] + ["part.manifest.json", "part.labels.txt"]
    )


def test_compression_and_index(folder, tmp_path):
    src, expected = folder
    gz = convert_imagefolder(src, tmp_path / "gz", compression="gzip")
    assert read_manifest(gz.manifest)["compression"] == "GZIP"
    assert [r["image/encoded"] for r in read_rows(gz.manifest)] == [
        e["image/encoded"] for e in expected.values()
    ]
    indexed = convert_imagefolder(src, tmp_path / "ix", records_per_shard=3, index=True)
    for shard in indexed.shards:
        offsets, _ = tfr.load_index(shard + ".idx")
        assert len(offsets) == tfr.count_records(shard)


def test_strict_raises_naming_the_file_and_leaves_nothing(folder, tmp_path):
    src, _ = folder
    out = tmp_path / "out"
    with pytest.raises(BadInputError) as info:
        convert_imagefolder(src, out, strict=True, records_per_shard=1)
    assert info.value.path == os.path.join(str(src), *CORRUPT_IMAGE.split("/"))
    assert "broken.jpg" in str(info.value)
    assert final_files(out) == []  # no shard, manifest, label map, nor a temporary file


def test_strict_with_workers_leaves_nothing(folder, tmp_path):
    src, _ = folder
    with pytest.raises(BadInputError, match="broken.jpg"):
        convert_imagefolder(src, tmp_path / "out", strict=True, workers=2)
    assert final_files(tmp_path / "out") == []


def test_extensions_option_and_unreadable_inputs(folder, tmp_path):
    src, _ = folder
    summary = convert_imagefolder(src, tmp_path / "out", extensions=["PNG", ".gif"])
    assert [r["image/filename"] for r in read_rows(summary.manifest)] == [
        b"cat/sub/b.PNG",
        b"dog/d.gif",
    ]
    assert summary.ignored == 6 and summary.skipped == []


def test_existing_output_needs_overwrite(folder, tmp_path):
    src, _ = folder
    convert_imagefolder(src, tmp_path / "out")
    with pytest.raises(FileExistsError):
        convert_imagefolder(src, tmp_path / "out")
    assert convert_imagefolder(src, tmp_path / "out", overwrite=True, num_shards=2).records == 5
    assert len(read_manifest(tmp_path / "out" / "train.manifest.json")["paths"]) == 2


def test_bad_arguments(folder, tmp_path):
    src, _ = folder
    with pytest.raises(ValueError, match="at most one"):
        convert_imagefolder(src, tmp_path / "out", num_shards=2, records_per_shard=3)
    with pytest.raises(FileNotFoundError):
        convert_imagefolder(tmp_path / "missing", tmp_path / "out")
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "a.jpg").write_bytes(b"")
    with pytest.raises(ValueError, match="no class subdirectories"):
        convert_imagefolder(tmp_path / "flat", tmp_path / "out")


def test_file_url_output_writes_the_label_map(folder, tmp_path):
    # A file:// URL is a local path everywhere; the label map was written as a remote file
    # (resolve() gave a str: AttributeError 'str' object has no attribute 'write_bytes').
    src, _ = folder
    out = tmp_path / "out"
    summary = convert_imagefolder(src, out.as_uri())
    assert summary.records == 5
    assert (out / "train.labels.txt").read_text() == "".join(c + "\n" for c in FOLDER_CLASSES)
