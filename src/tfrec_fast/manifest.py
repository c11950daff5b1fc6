"""The shard manifest: a small JSON file that says which shards make a data set.

Format (``{prefix}.manifest.json`` next to the shards by default)::

    {"format": "tfrec_fast.shards", "version": 1, "created_by": "tfrec_fast 0.1.0",
     "compression": "" | "GZIP" | "ZLIB", "total_records": 1200, "total_bytes": 123456,
     "spec": {"label": {"kind": "FixedLen", ...}} or null,
     "shards": [{"file": "train-00000-of-00002.tfrecord", "records": 600, "bytes": 61728,
                 "index": "train-00000-of-00002.tfrecord.idx" or null}, ...]}

``bytes`` are on-disk sizes; ``file`` and ``index`` are relative to the manifest's directory.
Written last (atomically: a temporary file renamed, one PUT remotely), it is the commit marker
of an output: a data set without one is incomplete.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Union

from ._version import __version__
from .spec import spec_from_json
from .storage import Store, resolve

__all__ = [
    "MANIFEST_FORMAT",
    "MANIFEST_VERSION",
    "manifest_data",
    "read_manifest",
    "write_manifest",
]

MANIFEST_FORMAT = "tfrec_fast.shards"
MANIFEST_VERSION = 1

_TF_COMPRESSION = {"": "", "gzip": "GZIP", "zlib": "ZLIB"}

PathLike = Union[str, "os.PathLike[str]"]


def manifest_data(
    store, manifest: str, shards, compression: str, spec, index: bool
) -> Dict[str, Any]:
    """A manifest's fields: ``shards`` is [(final path, records, bytes)] in order (paths of
    ``store``), ``spec`` as :func:`~tfrec_fast.example.spec_to_json` gives it. Shard paths are
    stored relative to the manifest.

    Parameters
    ----------
    store : Store
        The store the shards and the manifest are in.
    manifest : str
        The manifest's path in ``store``.
    shards : sequence of (str, int, int)
        Each shard's final path, records and stored bytes, in order.
    compression : {"", "gzip", "zlib"}
        The shards' compression.
    spec : dict or None
        The feature spec, in its JSON form.
    index : bool
        Each shard has ``{shard}.idx`` beside it.

    Returns
    -------
    dict
        The manifest's fields, ready for :func:`write_manifest`.
    """

    base = store.dirname(manifest)
    rows = [
        {
            "file": store.relative(final, base),
            "records": records,
            "bytes": size,
            "index": store.relative(final + ".idx", base) if index else None,
        }
        for final, records, size in shards
    ]
    return {
        "format": MANIFEST_FORMAT,
        "version": MANIFEST_VERSION,
        "created_by": f"tfrec_fast {__version__}",
        "compression": _TF_COMPRESSION[compression],
        "total_records": sum(records for _, records, _ in shards),
        "total_bytes": sum(r["bytes"] for r in rows),
        "spec": spec,
        "shards": rows,
    }


def write_manifest(store: Store, path: str, data: Dict[str, Any], sync: bool) -> None:
    """Writes a manifest atomically: readers see the old file or the whole new one.

    Parameters
    ----------
    store : Store
        Where to write it.
    path : str
        The manifest's path in ``store``.
    data : dict
        Its fields, as :func:`manifest_data` gives them.
    sync : bool
        fsync it (and its directory) before returning.

    Raises
    ------
    OSError
        It could not be written (the old file, if any, is left as it was).
    """
    store.makedirs(store.dirname(path))
    store.write_bytes(path, (json.dumps(data, indent=2) + "\n").encode("utf-8"), sync)


def read_manifest(path: PathLike, *, storage_options=None, filesystem=None) -> Dict[str, Any]:
    """Reads a manifest written by :class:`~tfrec_fast.ShardedWriter`.

    Parameters
    ----------
    path : str, os.PathLike or URL
        The manifest (``storage_options`` / ``filesystem`` as for readers).

    Returns
    -------
    dict
        Its fields (see the module docstring) with ``"spec"`` rebuilt into spec objects (or
        ``None``) and ``"paths"``: the absolute path (or URL) of each shard, in order.

    Raises
    ------
    ValueError
        Anything else than a manifest of a version this release knows.
    """
    location = resolve(path, storage_options, filesystem)
    text, name = location.read(), location.name
    try:
        data = json.loads(text)
    except ValueError:
        raise ValueError(f"{name} is not a tfrec_fast shard manifest (not JSON)") from None
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        raise ValueError(f"{name} is not a tfrec_fast shard manifest")
    if not isinstance(data.get("version"), int) or data["version"] > MANIFEST_VERSION:
        raise ValueError(
            f"{name}: manifest version {data.get('version')!r} is not supported "
            f"(this tfrec_fast reads up to version {MANIFEST_VERSION})"
        )
    data["spec"] = spec_from_json(data.get("spec"))
    store = location.store
    base = store.dirname(store.abspath(location.path))
    data["paths"] = [store.url(store.normpath(store.join(base, s["file"]))) for s in data["shards"]]
    return data
