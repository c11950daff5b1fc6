"""Reading input files and image headers (format, size, channels) without decoding pixels."""

from __future__ import annotations

import io
from typing import NamedTuple

from ._common import BadInputError

__all__ = ["ImageHeader", "read_file", "read_image_header"]

# Pillow names a JPEG with an MPO (multi-picture, many cameras) extension block "MPO"; its first
# picture is a plain JPEG that every JPEG decoder (TensorFlow's too) reads.
_FORMAT_ALIASES = {"mpo": "jpeg"}


class ImageHeader(NamedTuple):
    format: str  # lower case: "jpeg", "png", "gif", "bmp", "webp", "tiff", ...
    width: int
    height: int
    channels: int  # bands of Pillow's mode: L and P -> 1, RGB -> 3, RGBA and CMYK -> 4


def read_file(path: str, what: str = "file") -> bytes:
    """The file's bytes; a missing or unreadable file is a BadInputError naming it."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise BadInputError(path, f"missing {what}") from None
    except OSError as error:
        raise BadInputError(path, f"unreadable {what} ({error.strerror or error})") from None


def _pillow():
    try:
        from PIL import Image
    except ImportError:
        raise ImportError("converting images needs Pillow: pip install 'tfrec_fast[convert]'") \
            from None
    return Image


def read_image_header(data: bytes, path: str) -> ImageHeader:
    """Format, size and channels from the image's header. Pillow's open() parses only the header;
    pixels are never decoded (no load()), so a file damaged past its header is not noticed."""
    Image = _pillow()
    from PIL import UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            name = (image.format or "").lower()
            return ImageHeader(_FORMAT_ALIASES.get(name, name), image.width, image.height,
                               len(image.getbands()))
    except UnidentifiedImageError:  # an unknown format or a corrupt header
        raise BadInputError(path, "not an image (Pillow cannot identify it)") from None
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as error:
        raise BadInputError(path, f"unreadable image header ({error})") from None
