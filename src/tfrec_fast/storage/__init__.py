"""The storage layer: every path, glob and URL of tfrec_fast goes through here.

Design note (for code that builds on it: readers, writers, torch, Ray, TFDS)
---------------------------------------------------------------------------
**Stores and locations.** A *store* (:class:`Store`) is one kind of storage behind a small
interface: ``stat`` (size and version), ``exists`` / ``isdir`` / ``listdir`` / ``glob``,
``read`` (whole or a range), ``read_ranges`` (many, concurrently), ``fetch`` (one range as a
future), ``open_input`` (a stream with read-ahead), ``open_output`` (``close()`` publishes the
object whole, ``discard()`` abandons it), ``write_bytes`` (atomic), ``rename``, ``remove``,
``makedirs``, ``fsync``. Two implementations: :class:`LocalStore` (the local file system) and
:class:`FsspecStore` (any fsspec filesystem; pyarrow.fs filesystems through fsspec's wrapper).
A :class:`Location` is a store and a path in it, with the URL the user gave and a ``name``
with credentials masked; :func:`resolve` makes one from a path, URL or ``filesystem=``, and
:func:`expand` makes them from a glob, keeping the sizes and versions of its listing. Nothing
outside this package asks whether a file is remote: it asks a Location, and only
``Location.os_path`` (a path native code may open itself, or None) tells local files apart.

**Versions.** ``Location.stat()`` is taken once (or comes from the listing) and every range read
afterwards asks for that version: S3 by VersionId or If-Match on the ETag, GCS by generation,
HTTP by If-Match on a strong ETag. A store that refuses (the object was rewritten) makes the read
raise :class:`~tfrec_fast.errors.ObjectChangedError` naming the URL; no reader ever mixes
records of two versions. Where a store gives no version to ask for, readers that meet damage
ask for the stat again and raise ObjectChangedError if size or modification time moved.

**Memory of read-ahead.** :class:`ReadAhead` streams a list of objects read in order (or one):
it requests ranges of ``range_size`` bytes of the current and the next objects, at most
``concurrency`` ranges and ``read_ahead`` bytes held at once (requested, arrived or being read);
a reader that needs a range the window has not reached fetches that one range itself, so the
bound is ``read_ahead + readers * range_size``. Defaults: 4 MiB ranges, 64 MiB, 32 requests.
(While a range arrives, the HTTP client may hold its chunks and their join: up to one more copy
of the ranges in flight, briefly.)

**Settings and retries.** :class:`Settings` (``retries``, ``retry_delay``, ``range_size``,
``read_ahead``, ``concurrency``, ``index_cache``) ride in ``storage_options`` (taken out before
fsspec sees them), so every entry point takes them per call. Errors: credentials missing or
refused are ``PermissionError`` at once; transient failures are retried with jittered
exponential back-off, never on top of a backend's own retries; the original exception is the
``__cause__``. See :mod:`tfrec_fast.storage.retry`.

**Planning without downloads.** :func:`describe` gives sizes, versions and the ``URL.idx``
indexes beside objects (one listing per directory, no data read): what Ray read tasks or ranks
are planned from. Counts and indexes that must be computed are kept in the index cache
(:mod:`tfrec_fast.storage.cache`), keyed by object version, so a machine computes each once.
"""

from .cache import cached_array
from .locate import expand, options_for, resolve, resolve_beside
from .paths import Location, display, is_url, redact
from .plan import ObjectInfo, describe, find_indexes, load_index
from .settings import DEFAULTS, Settings, split_options
from .sniff import Replay, read_head, sniff_compression
from .stores import LOCAL, LocalStore, Stat, Store
from .streaming import ReadAhead

__all__ = [
    "Location",
    "Store",
    "LocalStore",
    "FsspecStore",
    "Stat",
    "Settings",
    "DEFAULTS",
    "ReadAhead",
    "ObjectInfo",
    "LOCAL",
    "resolve",
    "expand",
    "display",
    "is_url",
    "redact",
    "resolve_beside",
    "options_for",
    "describe",
    "find_indexes",
    "load_index",
    "cached_array",
    "split_options",
    "sniff_compression",
    "read_head",
    "Replay",
]


def __getattr__(name):
    if name == "FsspecStore":  # without importing fsspec-related code where it is not used
        from .remote import FsspecStore

        return FsspecStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
