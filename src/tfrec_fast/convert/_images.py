"""Reading input files and image headers (format, size, channels) without decoding pixels."""

from __future__ import annotations

import contextlib
import io
from typing import BinaryIO, Iterator, NamedTuple, Union

from ._common import BadInputError

__all__ = ["ImageHeader", "open_input", "read_file", "read_image_header"]

# Pillow names a JPEG with an MPO (multi-picture, many cameras) extension block "MPO"; its first
# picture is a plain JPEG that every JPEG decoder (TensorFlow's too) reads.
_FORMAT_ALIASES = {"mpo": "jpeg"}


class ImageHeader(NamedTuple):
    format: str  # lower case: "jpeg", "png", "gif", "bmp", "webp", "tiff", ...
    width: int
    height: int
    channels: int  # bands of Pillow's mode: L and P -> 1, RGB -> 3, RGBA and CMYK -> 4


@contextlib.contextmanager
def open_input(path: str, what: str = "file") -> Iterator[BinaryIO]:
    """The file opened for reading; a missing or unreadable file is a BadInputError naming it."""
    try:
        with open(path, "rb") as f:
            yield f
    except FileNotFoundError:
        raise BadInputError(path, f"missing {what}") from None
    except OSError as error:
        raise BadInputError(path, f"unreadable {what} ({error.strerror or error})") from None


def read_file(path: str, what: str = "file") -> bytes:
    """The file's bytes; a missing or unreadable file is a BadInputError naming it."""
    with open_input(path, what) as f:
        return f.read()


def _pillow():
    try:
        from PIL import Image
    except ImportError:
        raise ImportError(
            "converting images needs Pillow: pip install 'tfrec_fast[convert]'"
        ) from None
    return Image


def read_image_header(data: Union[bytes, None], path: str, what: str = "image") -> ImageHeader:
    """Format, size and channels from the image's header: of ``data``, or with ``data=None`` of
    the file at ``path`` (only its first bytes are read). Pillow's open() parses only the
    header; pixels are never decoded (no load()), so a file damaged past its header is not
    noticed."""
    if data is None:
        with open_input(path, what) as f:
            return _header(f, path)
    return _header(io.BytesIO(data), path)


def _header(stream: BinaryIO, path: str) -> ImageHeader:
    Image = _pillow()
    from PIL import UnidentifiedImageError

    try:
        with Image.open(stream) as image:
            name = (image.format or "").lower()
            return ImageHeader(
                _FORMAT_ALIASES.get(name, name), image.width, image.height, len(image.getbands())
            )
    except UnidentifiedImageError:  # an unknown format or a corrupt header
        raise BadInputError(path, "not an image (Pillow cannot identify it)") from None
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as error:
        raise BadInputError(path, f"unreadable image header ({error})") from None
