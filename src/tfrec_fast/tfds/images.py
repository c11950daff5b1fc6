"""Encoded images (PNG, JPEG, ...) decoded to the pixels TensorFlow gives, without TensorFlow.

Pillow decodes; JPEGs go to simplejpeg where it is installed, which decodes them as TensorFlow
does (libjpeg-turbo's fast integer DCT, fancy upsampling): Pillow's accurate DCT differs by a
few levels. Channels are converted to the declared number as tf.image.decode_image(channels=)
does; float32 images are TFDS's 1-channel floats bit-cast into RGBA PNGs.
"""

from __future__ import annotations

import io
from typing import Optional, Sequence

import numpy as np

__all__ = ["decode_image", "unsupported_image"]


def unsupported_image(shape: Sequence[Optional[int]], dtype: np.dtype) -> Optional[str]:
    """Why images of this shape and dtype are not decoded here, or None when they are."""
    dtype = np.dtype(dtype)
    channels = shape[-1] if shape else None
    if dtype not in (np.uint8, np.uint16, np.float32):
        return f"images of dtype {dtype} are not decoded (TFDS stores uint8, uint16 and float32)"
    if dtype == np.uint16 and channels not in (1, None):
        return (
            "16-bit images with several channels are not decoded: Pillow reads 16-bit "
            "color PNGs as 8-bit"
        )
    return None


def _pillow():
    try:
        from PIL import Image as PILImage
    except ImportError:
        raise ImportError(
            "decode_images=True decodes images with Pillow: pip install pillow "
            "(or tfrec_fast[tfds])"
        ) from None
    return PILImage


def decode_image(data: bytes, shape: Sequence[Optional[int]], dtype: np.dtype) -> np.ndarray:
    """An encoded image (PNG, JPEG, BMP, GIF's first frame) -> an array of ``shape`` (None:
    any) and ``dtype`` (uint8, uint16, or float32 stored as RGBA PNG), converted to the
    declared number of channels as tf.image.decode_image(channels=...) does."""
    channels = shape[-1] if shape else None
    dtype = np.dtype(dtype)
    pixels = _jpeg(data, channels) if dtype == np.uint8 else None
    if pixels is None:
        pixels = _with_pillow(data, channels, dtype)
    if pixels.ndim == 2:
        pixels = pixels[..., None]
    if len(pixels.shape) != len(shape) or any(
        d is not None and d != p for d, p in zip(shape, pixels.shape)
    ):
        raise ValueError(
            f"decoded image of shape {pixels.shape} does not fit the declared shape {tuple(shape)}"
        )
    return pixels


def _jpeg(data: bytes, channels: Optional[int]) -> Optional[np.ndarray]:
    """A JPEG decoded as TensorFlow decodes it (libjpeg-turbo's fast integer DCT, fancy
    upsampling), with simplejpeg where it is installed; None where it is not (Pillow then
    decodes with the accurate DCT: pixels may differ from TensorFlow's by a few levels)."""
    if data[:3] != b"\xff\xd8\xff" or channels not in (1, 3, None):
        return None
    try:
        import simplejpeg
    except ImportError:
        return None
    try:
        if channels is None:
            channels = 1 if simplejpeg.decode_jpeg_header(data)[2] == "Gray" else 3
        return simplejpeg.decode_jpeg(
            data, colorspace="GRAY" if channels == 1 else "RGB", fastdct=True, fastupsample=False
        )
    except ValueError:  # CMYK and other JPEGs simplejpeg does not take: Pillow's turn
        return None


def _with_pillow(data: bytes, channels: Optional[int], dtype: np.dtype) -> np.ndarray:
    PILImage = _pillow()
    with PILImage.open(io.BytesIO(data)) as image:
        if dtype == np.float32:  # TFDS bit-casts 1-channel float32 into 4-channel uint8 PNGs
            pixels = np.array(image.convert("RGBA")).view("<f4").astype(np.float32)
        elif dtype == np.uint16:
            pixels = _uint16(image, channels)
        elif dtype == np.uint8:
            pixels = np.array(_with_channels(image, channels))
        else:
            raise ValueError(
                f"images of dtype {dtype} are not decoded (TFDS stores uint8, "
                "uint16 and float32 images)"
            )
    return pixels


_MODES = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}


def _with_channels(image, channels: Optional[int]):
    if channels in _MODES:
        return image if image.mode == _MODES[channels] else image.convert(_MODES[channels])
    if image.mode == "P":  # a palette is expanded, as TensorFlow does
        return image.convert("RGBA" if "transparency" in image.info else "RGB")
    if image.mode not in ("L", "LA", "RGB", "RGBA"):
        return image.convert("RGB")
    return image


def _uint16(image, channels: Optional[int]) -> np.ndarray:
    if channels not in (1, None):
        raise ValueError(
            "16-bit images with several channels are not decoded: Pillow reads "
            "16-bit color PNGs as 8-bit"
        )
    if image.mode in ("I;16", "I;16B", "I;16L", "I"):
        return np.array(image).astype(np.uint16)
    return np.array(image.convert("L")).astype(np.uint16) * np.uint16(257)  # 8-bit scaled
