"""Exceptions of tfrec_fast.tfds (damaged shards raise tfrec_fast.DataLossError, as elsewhere)."""

from __future__ import annotations

from typing import Optional

__all__ = ["DatasetInfoError", "UnknownFeatureError"]


class DatasetInfoError(ValueError):
    """dataset_info.json or features.json is malformed, or describes something this reader does
    not read (another file format than TFRecord, an unknown Tensor encoding, ...).

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
    """A feature tfrec_fast.tfds cannot decode was asked for: refused when the split is opened,
    before anything is read.

    Attributes: ``feature`` (its path, "a/b"), ``type_name`` (the TFDS class named in
    features.json), ``reason`` (why, for a known type; "" for a type not known) and ``remedy``
    (what reads it instead). Unless the remedy says otherwise, its raw values stay readable:
    pass ``decoders={feature: SkipDecoding()}``, or read whole serialized Examples with
    ``dataset.records(split)``.
    """

    def __init__(
        self, feature: str, type_name: str, reason: str = "", remedy: Optional[str] = None
    ):
        self.feature = feature
        self.type_name = type_name
        self.reason = reason
        self.remedy = remedy
        why = f" ({reason})" if reason else ""
        article = "an" if type_name[:1].lower() in "aeiou" else "a"
        if remedy is None:
            remedy = (
                f"its raw Example values are read with decoders={{{feature!r}: "
                "SkipDecoding()} (tfrec_fast.tfds.SkipDecoding), and whole serialized "
                "Examples with dataset.records(split)"
            )
        super().__init__(
            f"feature {feature!r} is {article} {type_name}, which tfrec_fast.tfds "
            f"cannot decode{why}; {remedy}"
        )

    def __reduce__(self):
        return type(self), (self.feature, self.type_name, self.reason, self.remedy)
