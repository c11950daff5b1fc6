"""convert_voc: a PASCAL VOC tree -> sharded Examples with SSD's and deeplab's keys."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
from _images import (
    VOC_MASKS,
    VOC_OBJECTS,
    VOC_SIZES,
    final_files,
    image_bytes,
    make_voc,
    read_rows,
    shard_bytes,
    voc_xml,
)

import tfrec_fast as tfr
from tfrec_fast.convert import VOC_LABELS, BadInputError, convert_voc
from tfrec_fast.sharded import read_manifest


@pytest.fixture
def voc(tmp_path):
    root = tmp_path / "VOC2007"
    return root, make_voc(root)


def f32(values):
    return np.float32(values).tolist()


def test_round_trip_every_feature(voc, tmp_path):
    root, sources = voc
    summary = convert_voc(root, tmp_path / "out")
    assert summary.records == 3 and summary.skipped == []
    assert summary.shards == [str(tmp_path / "out" / "train-00000-of-00001.tfrecord")]
    rows = read_rows(summary.manifest)
    assert [r["image/filename"] for r in rows] == [f"{i}.jpg".encode() for i in VOC_SIZES]
    for row, (image_id, (w, h)) in zip(rows, VOC_SIZES.items()):
        objects = VOC_OBJECTS[image_id]
        assert row["image/encoded"] == sources[image_id]["image"]
        assert row["image/format"] == b"jpeg"
        assert (row["image/height"], row["image/width"], row["image/channels"]) == (h, w, 3)
        assert row["image/shape"] == [h, w, 3]
        assert row["image/object/bbox/xmin"] == f32([o[1] / w for o in objects])
        assert row["image/object/bbox/ymin"] == f32([o[2] / h for o in objects])
        assert row["image/object/bbox/xmax"] == f32([o[3] / w for o in objects])
        assert row["image/object/bbox/ymax"] == f32([o[4] / h for o in objects])
        assert row["image/object/bbox/label"] == [VOC_LABELS.index(o[0]) for o in objects]
        assert row["image/object/bbox/label_text"] == [o[0].encode() for o in objects]
        assert row["image/object/bbox/difficult"] == [o[5] or 0 for o in objects]
        assert row["image/object/bbox/truncated"] == [o[6] or 0 for o in objects]
        mask = sources[image_id]["mask"]
        # no mask: deeplab's defaults
        assert row["image/segmentation/class/encoded"] == (mask or b"")
        assert row["image/segmentation/class/format"] == b"png"
    assert rows[0]["image/object/bbox/difficult"] == [1]
    assert rows[0]["image/object/bbox/label"] == [12]  # SSD numbering: dog is 12, none is 0
    assert len(rows[1]["image/object/bbox/label"]) == 3
    assert (tmp_path / "out" / "train.labels.txt").read_text().split() == list(VOC_LABELS)


def test_mask_features_only_where_a_mask_exists(voc, tmp_path):
    root, _ = voc
    summary = convert_voc(root, tmp_path / "out")
    for record, image_id in zip(tfr.read_records(summary.shards), VOC_SIZES):
        features = tfr.parse_example(record)
        assert ("image/segmentation/class/encoded" in features) == (image_id in VOC_MASKS)
        assert len(features) == (17 if image_id in VOC_MASKS else 15)


def test_no_masks_no_mask_features(voc, tmp_path):
    root, _ = voc
    shutil.rmtree(root / "SegmentationClass")
    summary = convert_voc(root, tmp_path / "out")
    spec = read_manifest(summary.manifest)["spec"]
    assert not any(k.startswith("image/segmentation") for k in spec)
    assert isinstance(spec["image/object/bbox/xmin"], tfr.VarLen)
    assert spec["image/shape"].shape == (3,)
    assert len(read_rows(summary.manifest)) == 3


def test_segmentation_list_when_there_is_no_main_list(tmp_path):
    root = tmp_path / "VOC2012"
    make_voc(root, split="val", list_kind="Segmentation")
    summary = convert_voc(root, tmp_path / "out", split="val")
    assert summary.shards == [str(tmp_path / "out" / "val-00000-of-00001.tfrecord")]
    assert summary.records == 3
    with pytest.raises(FileNotFoundError, match="trainval"):
        convert_voc(root, tmp_path / "out2", split="trainval")


def test_labels_file(voc, tmp_path):
    root, _ = voc
    labels = tmp_path / "labels.txt"
    labels.write_text("dog\nperson\ncar\ncat\n")  # no tvmonitor: 000003 is a bad input
    summary = convert_voc(root, tmp_path / "out", labels=labels)
    assert summary.skipped == [
        (str(root / "Annotations" / "000003.xml"), "class 'tvmonitor' is not in the label list")
    ]
    rows = read_rows(summary.manifest)
    assert [r["image/object/bbox/label"] for r in rows] == [[0], [1, 2, 3]]
    assert (tmp_path / "out" / "train.labels.txt").read_text() == "dog\nperson\ncar\ncat\n"


def break_tree(root):
    """Four more ids in the train list, each bad in its own way."""
    ok = image_bytes("JPEG", (10, 10))
    (root / "JPEGImages" / "nosize.jpg").write_bytes(ok)
    (root / "Annotations" / "nosize.xml").write_text(
        voc_xml("nosize", (10, 10), [], with_size=False)
    )
    (root / "JPEGImages" / "noxml.jpg").write_bytes(ok)
    (root / "Annotations" / "noimage.xml").write_text(voc_xml("noimage", (10, 10), []))
    (root / "JPEGImages" / "wrongsize.jpg").write_bytes(ok)
    (root / "Annotations" / "wrongsize.xml").write_text(voc_xml("wrongsize", (12, 10), []))
    with open(root / "ImageSets" / "Main" / "train.txt", "a") as f:
        f.write("nosize\nnoxml\nnoimage\nwrongsize\n")


def test_bad_inputs_are_skipped_with_reasons(voc, tmp_path):
    root, _ = voc
    break_tree(root)
    summary = convert_voc(root, tmp_path / "out")
    assert summary.records == 3
    ann, img = root / "Annotations", root / "JPEGImages"
    assert summary.skipped == [
        (str(ann / "nosize.xml"), "no <size> in the annotation"),
        (str(ann / "noxml.xml"), "missing annotation"),
        (str(img / "noimage.jpg"), "missing image"),
        (str(ann / "wrongsize.xml"), "<size> 12x10 differs from the image's 10x10"),
    ]


def test_strict_leaves_nothing(voc, tmp_path):
    root, _ = voc
    break_tree(root)
    with pytest.raises(BadInputError, match="nosize.xml: no <size>"):
        convert_voc(root, tmp_path / "out", strict=True)
    assert final_files(tmp_path / "out") == []


def test_workers_and_shuffle(voc, tmp_path):
    root, _ = voc
    one = convert_voc(root, tmp_path / "a", shuffle=True, seed=3, records_per_shard=2)
    two = convert_voc(root, tmp_path / "b", shuffle=True, seed=3, records_per_shard=2, workers=2)
    assert len(one.shards) == 2
    assert shard_bytes(one.shards) == shard_bytes(two.shards)
    names = [r["image/filename"] for r in read_rows(one.manifest)]
    assert sorted(names) == [f"{i}.jpg".encode() for i in VOC_SIZES]


def test_depth_checked_against_the_image(voc, tmp_path):
    root, _ = voc
    (root / "Annotations" / "000003.xml").write_text(
        voc_xml("000003", VOC_SIZES["000003"], VOC_OBJECTS["000003"], depth=1)
    )
    summary = convert_voc(root, tmp_path / "out")
    assert summary.skipped == [
        (str(root / "Annotations" / "000003.xml"), "<depth> 1 differs from the image's 3 channels")
    ]
    assert os.path.basename(summary.shards[0]) == "train-00000-of-00001.tfrecord"
