"""Threads for the GIL-free C++ calls: read-ahead of the next batch and a small pool that
parses consecutive batches, results in input order by default.

Reading and decoding release the GIL, so threads overlap them on several cores. Errors come out
where their item would have: the items before an error first. A consumer that stops early (or
raises) stops the producer and the pool: no thread outlives the generator.
"""

from __future__ import annotations

import collections
import concurrent.futures
import os
import queue
import threading
from typing import Any, Callable, Deque, Iterable, Iterator, Optional

_END = object()


def default_threads() -> int:
    """Threads for parsing: the cores this process may use, at most 8 (beyond that the reading
    thread, not parsing, is the limit)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(8, cores))


def resolve_threads(num_threads: Optional[int]) -> int:
    if num_threads is None:
        return default_threads()
    if int(num_threads) < 1:
        raise ValueError(f"num_threads must be >= 1 (or None for a default), not {num_threads}")
    return int(num_threads)


def read_ahead(items: Iterable[Any], depth: int = 2) -> Iterator[Any]:
    """Yields ``items``, produced on a thread of its own up to ``depth`` ahead of the consumer."""
    slots: "queue.Queue[Any]" = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                if not _put(slots, (True, item), stop):
                    return
        except BaseException as error:  # handed to the consumer, in order
            _put(slots, (False, error), stop)
            return
        _put(slots, (True, _END), stop)

    thread = threading.Thread(target=produce, name="tfrec_fast-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            ok, item = slots.get()
            if not ok:
                raise item
            if item is _END:
                return
            yield item
    finally:
        stop.set()
        while thread.is_alive():  # unblock a producer waiting for a free slot
            try:
                slots.get(timeout=0.05)
            except queue.Empty:
                pass
        thread.join()
        close = getattr(items, "close", None)
        if close is not None:
            close()


def _put(slots: "queue.Queue[Any]", item: Any, stop: threading.Event) -> bool:
    while not stop.is_set():
        try:
            slots.put(item, timeout=0.05)
            return True
        except queue.Full:
            continue
    return False


def parallel_map(fn: Callable[[Any], Any], items: Iterable[Any], num_threads: int,
                 deterministic: bool = True) -> Iterator[Any]:
    """``map(fn, items)`` on ``num_threads`` threads, at most 2 x num_threads items in flight;
    in input order, or as they finish with ``deterministic=False``. 1 thread: plain map."""
    if num_threads <= 1:
        yield from map(fn, items)
        return
    pool = concurrent.futures.ThreadPoolExecutor(num_threads, thread_name_prefix="tfrec_fast")
    pending: Deque[concurrent.futures.Future] = collections.deque()
    source = iter(items)
    try:
        while True:
            try:
                item = next(source)
            except StopIteration:
                break
            except Exception:  # the input failed: what came before it comes out first
                while pending:
                    yield _next_done(pending, deterministic)
                raise
            pending.append(pool.submit(fn, item))
            if len(pending) >= 2 * num_threads:
                yield _next_done(pending, deterministic)
        while pending:
            yield _next_done(pending, deterministic)
    finally:
        for future in pending:
            future.cancel()
        pool.shutdown(wait=True)
        close = getattr(items, "close", None)
        if close is not None:
            close()


def _next_done(pending: Deque[concurrent.futures.Future], deterministic: bool) -> Any:
    if deterministic:
        return pending.popleft().result()
    done, _ = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
    future = next(f for f in pending if f in done)
    pending.remove(future)
    return future.result()
