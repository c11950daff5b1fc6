"""Exceptions of tfrec_fast.tfds (damaged shards raise tfrec_fast.DataLossError, as elsewhere)."""

from __future__ import annotations

from typing import Optional

__all__ = ["DatasetInfoError", "UnknownFeatureError"]


class DatasetInfoError(ValueError):
    """dataset_info.json or features.json is malformed, or describes something this reader does
    not read (another file format than TFRecord, a deprecated text encoder, ...).

    Attributes: ``where`` (the file, and the feature or key inside it), ``detail``.
    """

    def __init__(self, detail: str, *, where: Optional[str] = None):
        self.detail = detail
        self.where = where
        super().__init__(f"{where}: {detail}" if where else detail)

    def __reduce__(self):
        return _rebuild, (type(self), self.detail, self.where)


def _rebuild(cls, detail, where):
    return cls(detail, where=where)


class UnknownFeatureError(ValueError):
    """A feature of a type tfrec_fast.tfds cannot decode was asked for.

    Attributes: ``feature`` (its path, "a/b"), ``type_name`` (the TFDS class named in
    features.json). Its raw values stay readable: pass
    ``decoders={feature: SkipDecoding()}``, or read whole serialized Examples with
    ``split.records()``.
    """

    def __init__(self, feature: str, type_name: str):
        self.feature = feature
        self.type_name = type_name
        super().__init__(
            f"feature {feature!r} is a {type_name}, which tfrec_fast.tfds cannot decode; its "
            f"raw Example values are read with decoders={{{feature!r}: SkipDecoding()}} "
            "(tfrec_fast.tfds.SkipDecoding), and whole serialized Examples with "
            "split.records()")

    def __reduce__(self):
        return type(self), (self.feature, self.type_name)
