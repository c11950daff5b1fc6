"""Moved: remote data is handled by :mod:`tfrec_fast.storage` (stores, locations, streaming,
versions, retries). This module keeps the two helpers earlier releases exported under this
name, for code that imports them from here."""

from .storage.paths import is_url, redact

__all__ = ["is_url", "redact"]
