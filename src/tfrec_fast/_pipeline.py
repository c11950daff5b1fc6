"""Threads for the readers: read-ahead on an I/O thread, a small pool for the heavy per-batch work,
and several files read at once, with the results in file order.

The work on these threads is C++ that releases the GIL (reading, checksums, parsing), so plain
Python threads scale with the cores. Everything is bounded: a reader reserves a place before it
reads, so at most ``capacity`` items are read, worked on or waiting at any time. Threads start on
the first ``next()``, stop when the consumer closes the iterator (or drops it, or it raises), and
are never inherited: an iterator started in one process refuses to go on in a forked child.
Errors come out in order: every item before the one that failed is delivered first.

Items travel between threads in bundles of up to 1 MiB (``size_of``): handing one item over
costs several thread wake-ups, as much as parsing a 1024-record batch of small records, so small
items go in groups; an item larger than the bundle size travels alone.
"""

from __future__ import annotations

import collections
import os
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Callable, Iterable, Iterator, Optional

__all__ = ["default_threads", "check_threads", "ordered", "read_ahead", "files_in_parallel"]

# Items are bundled up to this many bytes (by size_of) or BUNDLE_ITEMS items.
_BUNDLE_BYTES = 1 << 20
BUNDLE_ITEMS = 64

# More threads than this gain nothing on the per-batch work of one reader: the I/O thread and the
# consumer are serial.
_MAX_DEFAULT_THREADS = 4


def default_threads() -> int:
    """The default ``num_threads``: half the cores this process may run on, at most 4.

    The consumer (Python) and the I/O thread take about a core between them, so the parse pool
    gains only where cores are left over (bench/bench_threads.py measures it).
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores // 2, _MAX_DEFAULT_THREADS))


def check_threads(num_threads: Optional[int]) -> int:
    """None -> default_threads(); else a positive int."""
    if type(num_threads) is int and num_threads > 0:  # the usual case first: called every batch
        return num_threads
    if num_threads is None:
        return default_threads()
    if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
        raise ValueError(f"num_threads must be a positive int or None, not {num_threads!r}")
    return num_threads


class _End:
    """Put by a reader thread after its last item."""


class _Failed:
    """Put by a reader thread whose source raised: the error, after the items before it."""

    def __init__(self, error: BaseException):
        self.error = error


_END = _End()
_EMPTY = object()


class _Channel:
    """A bounded hand-over from one reader thread to the consumer that either side can close.

    The reader acquire()s a place before it reads an item and put()s it; the consumer get()s it
    and release()s the place once it has handed the item on, so at most ``capacity`` items are
    being read, worked on or waiting.
    """

    def __init__(self, capacity: int):
        self._capacity = capacity
        self._items: collections.deque = collections.deque()
        self._taken = 0
        self._cond = threading.Condition()
        self.closed = False

    def acquire(self) -> bool:
        """Waits for a free place; False once the channel is closed (stop reading)."""
        with self._cond:
            while self._taken >= self._capacity and not self.closed:
                self._cond.wait()
            if self.closed:
                return False
            self._taken += 1
            return True

    def put(self, item) -> None:
        with self._cond:
            self._items.append(item)
            self._cond.notify_all()

    def get(self, block: bool = True):
        with self._cond:
            while not self._items:
                if not block:
                    return _EMPTY
                self._cond.wait()
            return self._items.popleft()

    def release(self) -> None:
        with self._cond:
            self._taken -= 1
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self.closed = True
            self._cond.notify_all()


def _close(items) -> None:
    close = getattr(items, "close", None)
    if close is not None:
        close()


def _check_process(pid: int) -> None:
    if os.getpid() != pid:
        raise RuntimeError(
            "this reader's threads were started in another process (before a "
            "fork): start a new iteration in this process"
        )


class _Partial(Exception):
    """A bundle's work failed part-way: the results before the failing item, then its error."""

    def __init__(self, results: list, error: BaseException):
        super().__init__(error)
        self.results = results
        self.error = error


def _alone(item) -> int:
    """The default size_of: every item fills a bundle by itself."""
    return _BUNDLE_BYTES


def nbytes(item) -> int:
    """size_of for RecordBatches."""
    return item.nbytes


def _bundles(items: Iterable, size_of: Callable[[object], int]) -> Iterator[list]:
    """Lists of consecutive items of up to _BUNDLE_BYTES (or one larger item). An error of
    `items` comes after a last bundle holding the items before it."""
    iterator = iter(items)
    bundle: list = []
    total = 0
    try:
        for item in iterator:
            bundle.append(item)
            total += size_of(item)
            if total >= _BUNDLE_BYTES or len(bundle) >= BUNDLE_ITEMS:
                yield bundle
                bundle, total = [], 0
    except GeneratorExit:
        raise
    except BaseException:
        if bundle:
            yield bundle
        raise
    finally:
        _close(iterator)
    if bundle:
        yield bundle


def _work_bundle(work: Callable, bundle: list) -> list:
    results = []
    for item in bundle:
        try:
            results.append(work(item))
        except BaseException as error:
            raise _Partial(results, error) from None
    return results


def _unpack(future: Future, channel: _Channel, pid: int) -> Iterator:
    """A bundle's results (its place in the channel freed first), then its error if it had one."""
    error = None
    try:
        results = future.result()
    except _Partial as partial:
        results, error = partial.results, partial.error
    finally:
        channel.release()
    for result in results:
        _check_process(pid)
        yield result
    if error is not None:
        raise error


def _feed(items: Iterable, channel: _Channel, submit: Callable[[list], Future]) -> None:
    """A reader thread: takes items from `items` and puts `submit(item)` in the channel."""
    iterator = iter(items)
    try:
        while channel.acquire():
            try:
                item = next(iterator)
            except StopIteration:
                channel.release()
                channel.put(_END)
                return
            channel.put(submit(item))
    except BaseException as error:  # delivered to the consumer, after the items before it
        channel.put(_Failed(error))
    finally:
        _close(iterator)


def _done(value) -> Future:
    future: Future = Future()
    future.set_result(value)
    return future


def _submitter(pool: ThreadPoolExecutor, work: Callable) -> Callable[[list], Future]:
    """submit(bundle): the future of work over the bundle, on the pool."""
    return lambda bundle: pool.submit(_work_bundle, work, bundle)


def ordered(
    work: Optional[Callable],
    items: Iterable,
    num_threads: int,
    *,
    deterministic: bool = True,
    size_of: Callable[[object], int] = _alone,
    name: str = "tfrec_fast",
) -> Iterator:
    """Yields ``work(item)`` for each item (``item`` itself when ``work`` is None).

    With ``num_threads`` 1 everything runs in the calling thread, as a plain loop. Otherwise
    `items` is advanced on one reader thread (so reads stay sequential) and ``work`` runs on a
    pool of ``num_threads`` threads, at most ``num_threads + 1`` bundles of items (see the module
    docstring; ``size_of(item)``: its bytes) being read, worked on or waiting. Results come in
    the order of the items, or bundle by bundle as they are ready with ``deterministic=False``;
    either way an error is raised only after every result before it.
    """
    if num_threads <= 1:
        try:
            for item in items:
                yield item if work is None else work(item)
        finally:
            _close(items)
        return
    pool: Optional[ThreadPoolExecutor] = None
    submit: Callable[[list], Future] = _done
    if work is not None:
        pool = ThreadPoolExecutor(num_threads, thread_name_prefix=f"{name}-work")
        submit = _submitter(pool, work)
    try:
        yield from _threaded(_bundles(items, size_of), submit, num_threads + 1, deterministic, name)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def read_ahead(
    items: Iterable,
    depth: int = 2,
    *,
    size_of: Callable[[object], int] = _alone,
    name: str = "tfrec_fast",
) -> Iterator:
    """Yields the items of `items`, advanced on an I/O thread up to ``depth`` bundles ahead of
    the consumer (counting the one being read)."""
    return _threaded(_bundles(items, size_of), _done, depth, True, name)


def _threaded(items: Iterable, submit, capacity: int, deterministic: bool, name: str) -> Iterator:
    pid = os.getpid()
    channel = _Channel(capacity)
    reader = threading.Thread(
        target=_feed, args=(items, channel, submit), daemon=True, name=f"{name}-read"
    )
    reader.start()
    try:
        yield from (_in_order if deterministic else _as_ready)(channel, pid)
    finally:
        if os.getpid() == pid:  # a forked child has none of these threads
            channel.close()
            reader.join()


def _in_order(channel: _Channel, pid: int) -> Iterator:
    """The items one reader thread puts on `channel`, in order, then its error if it failed."""
    while True:
        _check_process(pid)
        got = channel.get()
        if got is _END:
            return
        if isinstance(got, _Failed):
            raise got.error
        yield from _unpack(got, channel, pid)


def _as_ready(channel: _Channel, pid: int) -> Iterator:
    pending: list = []  # futures in the order of their items
    ended = None
    while True:
        _check_process(pid)
        while ended is None:  # take what has arrived (wait only when nothing is pending)
            got = channel.get(block=not pending)
            if got is _EMPTY:
                break
            if got is _END or isinstance(got, _Failed):
                ended = got
            else:
                pending.append(got)
        if not pending:
            if isinstance(ended, _Failed):
                raise ended.error
            return
        done, _ = wait(pending, return_when=FIRST_COMPLETED)
        first_failed = next((f for f in pending if f in done and f.exception() is not None), None)
        if first_failed is not None:  # the results before it first, then its error
            while pending:
                yield from _unpack(pending.pop(0), channel, pid)
        for future in [f for f in pending if f in done]:
            pending.remove(future)
            yield from _unpack(future, channel, pid)


def _drain(read: Callable[[object], Iterable], source, channel: _Channel, size_of) -> None:
    _feed(_bundles(read(source), size_of), channel, _done)


def files_in_parallel(
    read: Callable[[object], Iterable],
    sources: Iterable,
    readers: int,
    *,
    size_of: Callable[[object], int] = _alone,
    name: str = "tfrec_fast",
) -> Iterator:
    """Yields the items of ``read(source)`` for each source, source after source, with up to
    ``readers`` sources being read at once, each on a thread of its own and at most two
    bundles ahead (TensorFlow's ``num_parallel_reads``, in file order). With ``readers`` 1 it is a plain
    loop in the calling thread."""
    if readers <= 1:
        for source in sources:
            stream = read(source)
            try:
                yield from stream
            finally:
                _close(stream)
        return
    pid = os.getpid()
    sources = iter(sources)
    started: collections.deque = collections.deque()  # (channel, thread), in source order

    def start_next() -> None:
        for source in sources:
            channel = _Channel(2)
            thread = threading.Thread(
                target=_drain,
                args=(read, source, channel, size_of),
                daemon=True,
                name=f"{name}-file",
            )
            thread.start()
            started.append((channel, thread))
            return

    try:
        for _ in range(readers):
            start_next()
        while started:
            channel, thread = started[0]
            yield from _in_order(channel, pid)
            started.popleft()
            thread.join()
            start_next()
    finally:
        if os.getpid() == pid:
            for channel, _ in started:
                channel.close()
            for _, thread in started:
                thread.join()
