"""Small datasets the converter tests make themselves: an image folder, a PASCAL VOC tree, an .npz.

Each maker returns what a test needs to check the converted records against the sources.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
from PIL import Image


def image_bytes(fmt, size, mode="RGB", seed=0):
    """An encoded image of random pixels: fmt is a Pillow format name ("JPEG", "PNG", ...)."""
    rng = np.random.default_rng(seed)
    w, h = size
    bands = {"RGB": 3, "RGBA": 4, "L": 1, "P": 1}[mode]
    pixels = rng.integers(0, 256 if mode != "P" else 21, (h, w, bands), dtype=np.uint8)
    image = Image.fromarray(pixels[..., 0] if bands == 1 else pixels)  # L, RGB or RGBA
    if mode == "P":  # a palette image, as VOC's class masks are
        image = image.convert("P")
    out = io.BytesIO()
    image.save(out, fmt)
    return out.getvalue()


# (class, relative path, Pillow format, (width, height), mode, expected image/format)
FOLDER_IMAGES = [
    ("bird", "bird/e.bmp", "BMP", (9, 4), "RGB", b"bmp"),
    ("cat", "cat/a.jpg", "JPEG", (20, 10), "RGB", b"jpeg"),
    ("cat", "cat/sub/b.PNG", "PNG", (7, 5), "RGBA", b"png"),
    ("dog", "dog/c.jpeg", "JPEG", (16, 16), "L", b"jpeg"),
    ("dog", "dog/d.gif", "GIF", (8, 8), "P", b"gif"),
]
FOLDER_CLASSES = ["bird", "cat", "dog"]
CORRUPT_IMAGE = "dog/broken.jpg"


def make_image_folder(root: Path) -> dict:
    """Five images in three class folders (one nested), a corrupt .jpg, two non-image files and a
    hidden directory. Returns {relative path: expected features} of the good images."""
    expected = {}
    for i, (cls, rel, fmt, size, mode, fmt_name) in enumerate(FOLDER_IMAGES):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        data = image_bytes(fmt, size, mode, seed=i)
        path.write_bytes(data)
        expected[rel] = {
            "image/encoded": data,
            "image/format": fmt_name,
            "image/class/label": FOLDER_CLASSES.index(cls),
            "image/class/text": cls.encode(),
            "image/width": size[0],
            "image/height": size[1],
            "image/filename": rel.encode(),
        }
    (root / CORRUPT_IMAGE).write_bytes(b"\x00not a jpeg at all" * 10)
    (root / "dog" / "notes.txt").write_text("not an image")
    (root / "README.md").write_text("top-level files belong to no class")
    (root / ".cache").mkdir()
    (root / ".cache" / "x.jpg").write_bytes(image_bytes("JPEG", (4, 4)))
    return expected


VOC_SIZES = {"000001": (40, 30), "000002": (50, 20), "000003": (32, 32)}
# id -> objects: (name, xmin, ymin, xmax, ymax, difficult or None, truncated or None)
VOC_OBJECTS = {
    "000001": [("dog", 4, 3, 36, 27, 1, 0)],
    "000002": [
        ("person", 1, 2, 25, 19, 0, 1),
        ("car", 10, 5, 50, 20, None, None),
        ("cat", 0, 0, 5, 5, 0, 0),
    ],
    "000003": [("tvmonitor", 8, 8, 24, 24, 0, 0)],
}
VOC_MASKS = ("000001", "000003")


def voc_xml(image_id, size, objects, *, with_size=True, depth=3):
    parts = [f"<annotation><folder>VOC2007</folder><filename>{image_id}.jpg</filename>"]
    if with_size:
        parts.append(
            f"<size><width>{size[0]}</width><height>{size[1]}</height><depth>{depth}</depth></size>"
        )
    for name, xmin, ymin, xmax, ymax, difficult, truncated in objects:
        parts.append(f"<object><name>{name}</name><pose>Left</pose>")
        if truncated is not None:
            parts.append(f"<truncated>{truncated}</truncated>")
        if difficult is not None:
            parts.append(f"<difficult>{difficult}</difficult>")
        parts.append(
            f"<bndbox><xmin>{xmin}</xmin><ymin>{ymin}</ymin><xmax>{xmax}</xmax>"
            f"<ymax>{ymax}</ymax></bndbox></object>"
        )
    parts.append("</annotation>")
    return "\n".join(parts)


def make_voc(root: Path, split="train", list_kind="Main") -> dict:
    """A three-image VOC tree (JPEGs, XML, a split list, masks for two images).
    Returns {id: {"image": bytes, "mask": bytes or None}}."""
    for sub in ("JPEGImages", "Annotations", f"ImageSets/{list_kind}", "SegmentationClass"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    out = {}
    for i, (image_id, size) in enumerate(VOC_SIZES.items()):
        image = image_bytes("JPEG", size, seed=10 + i)
        (root / "JPEGImages" / f"{image_id}.jpg").write_bytes(image)
        (root / "Annotations" / f"{image_id}.xml").write_text(
            voc_xml(image_id, size, VOC_OBJECTS[image_id])
        )
        mask = None
        if image_id in VOC_MASKS:
            mask = image_bytes("PNG", size, "P", seed=20 + i)
            (root / "SegmentationClass" / f"{image_id}.png").write_bytes(mask)
        out[image_id] = {"image": image, "mask": mask}
    (root / "ImageSets" / list_kind / f"{split}.txt").write_text("\n".join(VOC_SIZES) + "\n")
    return out


def final_files(directory) -> list:
    """Every file in directory (hidden ones too), sorted."""
    return sorted(os.listdir(directory)) if os.path.isdir(directory) else []


def _value(column, i):
    import tfrec_fast as tfr

    if isinstance(column, tfr.BytesColumn):
        row = column[i]
        return [bytes(v) for v in row] if isinstance(row, list) else bytes(row)
    row = column[i]
    return row.tolist() if isinstance(row, np.ndarray) else row


def read_rows(manifest_path) -> list:
    """Every record of a converted output, as {feature: Python value}, in shard order, parsed
    with the spec the manifest records."""
    import tfrec_fast as tfr
    from tfrec_fast.sharded import read_manifest

    manifest = read_manifest(manifest_path)
    rows = []
    for columns in tfr.read_examples(
        manifest["paths"], manifest["spec"], compression=manifest["compression"] or None
    ):
        n = len(next(iter(columns.values())))
        rows.extend({k: _value(c, i) for k, c in columns.items()} for i in range(n))
    return rows


def shard_bytes(paths) -> list:
    return [Path(p).read_bytes() for p in paths]
