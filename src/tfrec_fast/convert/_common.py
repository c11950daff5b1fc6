"""What every converter shares: the options, the summary, the bad-input error, size parsing."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, List, Mapping, Optional, Tuple, Union

from ..storage import resolve

__all__ = ["BadInputError", "ConvertSummary", "WriteOptions", "parse_size", "write_text_file"]


class BadInputError(ValueError):
    """One input file the converter cannot use (missing, unreadable, inconsistent).

    Skipped and listed in :attr:`ConvertSummary.skipped` by default; raised with ``strict=True``.
    """

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason

    def __reduce__(self):  # so that it crosses process boundaries with its two fields
        return type(self), (self.path, self.reason)


@dataclass
class ConvertSummary:
    """What a conversion wrote.

    ``skipped`` lists ``(path, reason)`` of each bad input left out; ``shards`` the final shard
    paths; ``manifest`` the manifest path; ``bytes`` the shards' size on disk; ``ignored`` the
    number of files passed over as not being inputs (e.g. non-image extensions) and
    ``ignored_files`` their paths (relative to the input directory); ``label_map`` the label map
    file written beside the shards, if any.
    """

    records: int
    skipped: List[Tuple[str, str]]
    shards: List[str]
    manifest: Optional[str]
    bytes: int
    seconds: float
    ignored: int = 0
    label_map: Optional[str] = None
    ignored_files: List[str] = field(default_factory=list)

    @property
    def records_per_second(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    def __str__(self) -> str:
        parts = [
            f"{self.records} records written to {len(self.shards)} shard"
            f"{'' if len(self.shards) == 1 else 's'} ({_human_bytes(self.bytes)}) in "
            f"{self.seconds:.2f} s, {self.records_per_second:.1f} records/s",
            f"{len(self.skipped)} skipped",
        ]
        if self.ignored:
            parts.append(f"{self.ignored} ignored")
        lines = ["; ".join(parts)]
        if self.ignored_files:
            lines.append("ignored files: " + _some(self.ignored_files))
        if self.manifest:
            lines.append(f"manifest: {self.manifest}")
        if self.label_map:
            lines.append(f"label map: {self.label_map}")
        return "\n".join(lines)


def _some(names: List[str], shown: int = 10) -> str:
    """The first names, and how many more there are."""
    text = ", ".join(names[:shown])
    return text + (f" and {len(names) - shown} more" if len(names) > shown else "")


def _human_bytes(n: float) -> str:
    if n < 1024:
        return f"{n} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024 or unit == "TiB":
            break
    return f"{n:.1f} {unit}"


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*$", re.IGNORECASE)


def parse_size(value: Union[int, str]) -> int:
    """``"128MB"`` -> bytes. K/M/G/T suffixes are binary (x1024), with or without ``B``/``iB``."""
    if isinstance(value, int):
        size = value
    else:
        match = _SIZE.match(value)
        if not match:
            raise ValueError(f"not a size: {value!r} (use e.g. 500000, 64K, 128MB, 1G)")
        number, unit = match.groups()
        size = int(float(number) * 1024 ** "_KMGT".index(unit.upper() or "_"))
    if size <= 0:
        raise ValueError(f"a shard size must be positive, not {value!r}")
    return size


@dataclass(frozen=True)
class WriteOptions:
    """The options every converter takes, as keyword arguments of the same names."""

    num_shards: Optional[int] = None
    shard_size: Union[int, str, None] = None
    records_per_shard: Optional[int] = None
    compression: Optional[str] = None
    index: bool = False
    shuffle: bool = False
    seed: int = 0
    workers: int = 1
    progress: Optional[bool] = None
    strict: bool = False
    overwrite: bool = False
    storage_options: Optional[Mapping[str, Any]] = None  # for an output URL (fsspec)
    filesystem: Any = None  # an fsspec or pyarrow filesystem the output is on

    def __post_init__(self):
        limits = [
            n
            for n in ("num_shards", "shard_size", "records_per_shard")
            if getattr(self, n) is not None
        ]
        if len(limits) > 1:
            raise ValueError(
                f"give at most one of num_shards, shard_size, records_per_shard "
                f"(got {', '.join(limits)})"
            )
        if self.workers < 0:
            raise ValueError(f"workers must be 0 (one per CPU) or more, not {self.workers}")

    @property
    def worker_count(self) -> int:
        return self.workers or os.cpu_count() or 1

    def writer_kwargs(self) -> dict:
        """The ShardedWriter keyword arguments these options stand for."""
        return {
            "num_shards": self.num_shards,
            "max_bytes_per_shard": None if self.shard_size is None else parse_size(self.shard_size),
            "records_per_shard": self.records_per_shard,
            "compression": None if self.compression in (None, "none") else self.compression,
            "index": self.index,
            "overwrite": self.overwrite,
            "storage_options": self.storage_options,
            "filesystem": self.filesystem,
        }


def output_path(out_dir: str, name: str, options: Optional[WriteOptions] = None) -> str:
    """The path (or URL) of a file beside the shards."""
    location = _resolve(out_dir, options)
    store = location.store
    return store.url(store.abspath(store.join(location.path, name)))


def write_text_file(path: str, text: str, options: Optional[WriteOptions] = None) -> None:
    """Writes text whole or not at all: a hidden temporary file renamed into place (a URL: one
    PUT, atomic on object stores)."""
    _resolve(path, options).write_bytes(text.encode("utf-8", "surrogateescape"))


def _resolve(path: str, options: Optional[WriteOptions]):
    if options is None:
        return resolve(path)
    return resolve(path, options.storage_options, options.filesystem)
