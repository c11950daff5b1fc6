"""TFDS's ``tfds.decode``, as far as it applies without TensorFlow: :class:`SkipDecoding`."""

from __future__ import annotations

from typing import Any

__all__ = ["SkipDecoding"]


class SkipDecoding:
    """As ``tfds.decode.SkipDecoding``: in ``decoders={"image": SkipDecoding()}`` the feature
    keeps its stored form (encoded image bytes, a Tensor's raw bytes, an unknown feature's raw
    Example values). TFDS's own SkipDecoding objects are accepted too."""

    def __repr__(self) -> str:
        return "SkipDecoding()"


def is_skip(value: Any) -> bool:
    return isinstance(value, SkipDecoding) or type(value).__name__ == "SkipDecoding"
