"""The process's pool of batch buffers, shared by the readers of read_examples and the torch
datasets, and by the large fixed-size columns parse_examples decodes (1 MiB or more: decoding
into memory already touched avoids its page faults).

The buffers of batches you have let go of hold the next ones, in this call and the next calls
(one per shard or epoch is common): a batch of 1024 large records is then not fresh memory, whose
page faults cost more than reading it (bench/bench_example.py measures it). A loop holds the batch it has while
the next is read (two ~135 MB buffers for 110 KB records), more with threads. Bounded: at most
SHARED_BUFFER_BYTES kept (the newest: a full pool lets go of its oldest buffers first); past
SHARED_HOT_BUFFER_BYTES only where the OS can take the pages back when it needs them (Linux,
macOS: MADV_FREE). A forked child starts afresh.
"""

from __future__ import annotations

from typing import Optional

from . import _core
from ._platform import after_fork_in_child

SHARED_BUFFER_BYTES = 1 << 30
SHARED_HOT_BUFFER_BYTES = 256 << 20
_POOL: Optional[_core.BufferPool] = None


def shared_pool() -> _core.BufferPool:
    global _POOL
    if _POOL is None:
        _POOL = _core.BufferPool(1024, SHARED_BUFFER_BYTES, SHARED_HOT_BUFFER_BYTES)
    return _POOL


def _forget() -> None:
    global _POOL
    _POOL = None


after_fork_in_child(_forget)
