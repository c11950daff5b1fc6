"""Converted output read by TensorFlow (tf.data + tf.io.parse_single_example), with the specs
SSD's, deeplab's and slim's readers use. Skipped when TensorFlow is not installed."""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
pytest.importorskip("PIL")

from _images import VOC_OBJECTS, VOC_SIZES, make_image_folder, make_voc  # noqa: E402

from tfrec_fast.convert import VOC_LABELS, convert_imagefolder, convert_numpy, convert_voc  # noqa: E402


def tf_records(summary, spec, compression=""):
    dataset = tf.data.TFRecordDataset(summary.shards, compression_type=compression)
    return [
        {
            k: v.numpy() if not isinstance(v, tf.SparseTensor) else v.values.numpy()
            for k, v in tf.io.parse_single_example(r, spec).items()
        }
        for r in dataset
    ]


def test_imagefolder_through_tensorflow(tmp_path):
    expected = make_image_folder(tmp_path / "src")
    summary = convert_imagefolder(tmp_path / "src", tmp_path / "out", compression="gzip")
    spec = {
        "image/encoded": tf.io.FixedLenFeature((), tf.string),
        "image/format": tf.io.FixedLenFeature((), tf.string),
        "image/class/label": tf.io.FixedLenFeature([1], tf.int64),
        "image/class/text": tf.io.FixedLenFeature((), tf.string),
        "image/height": tf.io.FixedLenFeature((), tf.int64),
        "image/width": tf.io.FixedLenFeature((), tf.int64),
        "image/filename": tf.io.FixedLenFeature((), tf.string),
    }
    rows = tf_records(summary, spec, "GZIP")
    assert len(rows) == len(expected)
    for row in rows:
        want = expected[row["image/filename"].decode()]
        assert row["image/encoded"] == want["image/encoded"]
        assert row["image/format"] == want["image/format"]
        assert row["image/class/label"].tolist() == [want["image/class/label"]]
        assert row["image/class/text"] == want["image/class/text"]
        image = tf.io.decode_image(row["image/encoded"], expand_animations=False)
        assert (
            image.shape[:2]
            == (row["image/height"], row["image/width"])
            == (want["image/height"], want["image/width"])
        )


def test_voc_through_tensorflow(tmp_path):
    sources = make_voc(tmp_path / "voc")
    summary = convert_voc(tmp_path / "voc", tmp_path / "out", num_shards=2)
    # SSD-Tensorflow's keys_to_features plus deeplab's segmentation keys
    spec = {
        "image/encoded": tf.io.FixedLenFeature((), tf.string, default_value=""),
        "image/format": tf.io.FixedLenFeature((), tf.string, default_value="jpeg"),
        "image/height": tf.io.FixedLenFeature([1], tf.int64),
        "image/width": tf.io.FixedLenFeature([1], tf.int64),
        "image/channels": tf.io.FixedLenFeature([1], tf.int64),
        "image/shape": tf.io.FixedLenFeature([3], tf.int64),
        "image/filename": tf.io.FixedLenFeature((), tf.string, default_value=""),
        "image/segmentation/class/encoded": tf.io.FixedLenFeature((), tf.string, default_value=""),
        "image/segmentation/class/format": tf.io.FixedLenFeature(
            (), tf.string, default_value="png"
        ),
    }
    for key in ("xmin", "ymin", "xmax", "ymax"):
        spec[f"image/object/bbox/{key}"] = tf.io.VarLenFeature(tf.float32)
    for key in ("label", "difficult", "truncated"):
        spec[f"image/object/bbox/{key}"] = tf.io.VarLenFeature(tf.int64)
    spec["image/object/bbox/label_text"] = tf.io.VarLenFeature(tf.string)
    rows = {r["image/filename"].decode()[:-4]: r for r in tf_records(summary, spec)}
    assert sorted(rows) == sorted(VOC_SIZES)
    for image_id, (w, h) in VOC_SIZES.items():
        row, objects = rows[image_id], VOC_OBJECTS[image_id]
        assert row["image/encoded"] == sources[image_id]["image"]
        assert row["image/shape"].tolist() == [h, w, 3]
        assert tf.io.decode_jpeg(row["image/encoded"]).shape == (h, w, 3)
        np.testing.assert_array_equal(
            row["image/object/bbox/xmin"], np.float32([o[1] / w for o in objects])
        )
        np.testing.assert_array_equal(
            row["image/object/bbox/ymax"], np.float32([o[4] / h for o in objects])
        )
        assert row["image/object/bbox/label"].tolist() == [VOC_LABELS.index(o[0]) for o in objects]
        assert row["image/object/bbox/label_text"].tolist() == [o[0].encode() for o in objects]
        assert row["image/segmentation/class/encoded"] == (sources[image_id]["mask"] or b"")
        if sources[image_id]["mask"]:
            mask = tf.io.decode_png(row["image/segmentation/class/encoded"])
            assert mask.shape[:2] == (h, w)


def test_numpy_through_tensorflow(tmp_path):
    images = np.random.default_rng(1).integers(0, 256, (10, 28, 28), dtype=np.uint8)
    labels = np.arange(10)
    summary = convert_numpy(
        {"image": images, "label": labels, "score": labels / 3}, tmp_path / "out"
    )
    spec = {
        "image": tf.io.FixedLenFeature((), tf.string),
        "image/shape": tf.io.FixedLenFeature([2], tf.int64),
        "image/dtype": tf.io.FixedLenFeature((), tf.string),
        "label": tf.io.FixedLenFeature((), tf.int64),
        "score": tf.io.FixedLenFeature((), tf.float32),
    }
    rows = tf_records(summary, spec)
    for i, row in enumerate(rows):
        decoded = tf.io.decode_raw(row["image"], tf.uint8).numpy().reshape(row["image/shape"])
        np.testing.assert_array_equal(decoded, images[i])
        assert row["image/dtype"] == b"uint8" and row["label"] == i
        assert row["score"] == np.float32(i / 3)
