"""Reading objects front to back at the speed of the link: ranges of the current object and of
the next ones requested ahead of the reader, many at once, within a memory bound.

Object stores cap each connection (tens of MB/s) and charge a round trip per request, so the
throughput of a stream comes from many range requests in flight, not from one connection.
:class:`ReadAhead` serves a list of objects (the files of a glob, the shards of a job, or one
object) that are read in order: it cuts each into ranges of ``range_size`` bytes and keeps
requesting them, in list order and across object boundaries, while the readers consume them.

Memory bound: the ranges requested, arrived or being read are at most ``read_ahead`` bytes and
``concurrency`` ranges (Settings). A reader that needs a range the window has not reached yet
(files read out of order, or several at once) fetches it directly, one range at a time, so the
bound is ``read_ahead + readers * range_size``, and no reader ever waits for another.

Every range asks for the version the object had when it was planned (see remote.py); a reader
gets bytes of one version or an error. Not thread-safe per file object (one reader each), but
the files of one ReadAhead may be read from different threads.
"""

from __future__ import annotations

import collections
import io
import threading
from typing import Optional, Sequence, Tuple

from .paths import Location
from .settings import DEFAULTS, Settings

__all__ = ["ReadAhead"]

_WAITING, _OPEN, _DONE = "waiting", "open", "done"


class _Range:
    __slots__ = ("start", "end", "future")

    def __init__(self, start: int, end: int, future):
        self.start = start
        self.end = end
        self.future = future


class _Part:
    """One object of the list: its span, what is requested of it, whether someone reads it."""

    __slots__ = (
        "location",
        "start",
        "end",
        "given_end",
        "requested",
        "pending",
        "state",
        "error",
        "asked",
    )

    def __init__(self, location: Location, start: int, end: Optional[int]):
        self.location = location
        self.start = start
        self.given_end = end
        self.end: Optional[int] = None  # known once the size is
        self.requested = start  # the next byte to request
        self.pending: collections.deque = collections.deque()  # requested, not taken, in order
        self.state = _WAITING
        self.error: Optional[BaseException] = None
        self.asked = False  # its Stat was asked for
        stat = location.known_stat
        if stat is not None:
            self._know(stat.size)

    def _know(self, size: Optional[int]) -> None:
        end = size if self.given_end is None else self.given_end
        if end is not None and size is not None:
            end = min(end, size)
        self.end = end
        self.asked = True


class ReadAhead:
    """Streams of a list of objects read in order (see the module docstring).

    Parameters
    ----------
    locations : sequence of Location
        The objects, in the order they will be read.
    spans : sequence of (start, end or None), optional
        The byte range of each object to read (default: all of it). Nothing past ``end`` is
        ever requested: a reader's plan bounds what it fetches.
    settings : Settings, optional
        Default: the settings of the first object's store.
    """

    def __init__(
        self,
        locations: Sequence[Location],
        spans: Optional[Sequence[Tuple[int, Optional[int]]]] = None,
        settings: Optional[Settings] = None,
    ):
        spans = spans or [(0, None)] * len(locations)
        self._parts = [_Part(loc, int(a or 0), b) for loc, (a, b) in zip(locations, spans)]
        if settings is None:
            settings = getattr(locations[0].store, "settings", DEFAULTS) if locations else DEFAULTS
        self.settings = settings
        self._lock = threading.Lock()
        self._held_bytes = 0
        self._held_ranges = 0
        self._first = 0  # parts before it have nothing left to request
        self._closed = False

    def __len__(self) -> int:
        return len(self._parts)

    def open(self, k: int, owner: bool = False):
        """A binary file reading object ``k`` (its span). Object ``k`` is read through the
        window once; opened again, it gets a stream of its own.

        Parameters
        ----------
        k : int
            The object's position in the list.
        owner : bool, default False
            Closing the file closes this ReadAhead (a stream of one object).

        Returns
        -------
        binary file-like
            Reads the object's span.

        Raises
        ------
        ValueError
            The ReadAhead is closed.
        OSError
            The object's size could not be had (missing, refused).
        """
        part = self._parts[k]
        self._ask_sizes(k)
        if part.error is not None:
            raise part.error
        with self._lock:
            if self._closed:
                raise ValueError("I/O operation on a closed ReadAhead")
            again = part.state != _WAITING
            if not again:
                part.state = _OPEN
        if again:  # read once already: its own window
            return ReadAhead([part.location], [(part.start, part.given_end)], self.settings).open(
                0, owner=True
            )
        if part.end is None:  # the server does not tell the size: stream it as it comes
            with self._lock:
                part.state = _DONE
            return part.location.store.open_stream(part.location.path, part.start)
        with self._lock:
            self._fill()
        return _StreamFile(self, part, self if owner else None)

    def close(self) -> None:
        """Stops every request; what arrived is let go."""
        with self._lock:
            self._closed = True
            for part in self._parts:
                for r in part.pending:
                    r.future.cancel()
                part.pending.clear()
                part.state = _DONE
            self._held_bytes = self._held_ranges = 0

    # -- sizes --

    def _ask_sizes(self, k: int) -> None:
        """Makes the sizes (and versions) of objects k, k+1, ... known, ``concurrency`` of them
        at a time, so the window can go on into the next objects."""
        with self._lock:
            todo = [p for p in self._parts[k : k + self.settings.concurrency] if not p.asked]
            for p in todo:
                p.asked = True
        if not todo:
            return
        store = todo[0].location.store
        same = all(p.location.store is store for p in todo)
        stats = (
            store.stat_many([p.location.path for p in todo])
            if same
            else [p.location.store.stat_many([p.location.path])[0] for p in todo]
        )
        with self._lock:
            for part, stat in zip(todo, stats):
                if isinstance(stat, BaseException):
                    part.error = stat
                    continue
                part.location._stat = stat
                part._know(stat.size)

    # -- the window (called with the lock held) --

    def _issue(self, part: _Part) -> _Range:
        assert part.end is not None
        start = part.requested
        end = min(start + self.settings.range_size, part.end)
        loc = part.location
        r = _Range(start, end, loc.store.fetch(loc.path, start, end, loc.known_stat))
        part.pending.append(r)
        part.requested = end
        self._held_bytes += end - start
        self._held_ranges += 1
        return r

    def _fill(self) -> None:
        """Requests ranges in list order while the bound allows."""
        if self._closed:
            return
        settings = self.settings
        i = self._first
        while i < len(self._parts):
            part = self._parts[i]
            if (
                part.state == _DONE
                or part.error is not None
                or (part.end is not None and part.requested >= part.end)
            ):
                if i == self._first:
                    self._first += 1
                i += 1
                continue
            if part.end is None or self._held_ranges >= settings.concurrency:
                return
            size = min(settings.range_size, part.end - part.requested)
            if self._held_bytes + size > settings.read_ahead and self._held_ranges:
                return
            self._issue(part)

    def _release(self, r: Optional[_Range]) -> None:
        if r is not None and not self._closed:
            self._held_bytes -= r.end - r.start
            self._held_ranges -= 1

    # -- what the files call --

    def _take(self, part: _Part, pos: int) -> Tuple[_Range, bytes]:
        """The range of ``part`` holding byte ``pos``, and its bytes (waited for)."""
        with self._lock:
            if self._closed:
                raise ValueError("I/O operation on a closed ReadAhead")
            while part.pending and part.pending[0].end <= pos:  # passed by a seek
                dropped = part.pending.popleft()
                dropped.future.cancel()
                self._release(dropped)
            if part.pending and part.pending[0].start <= pos:
                r = part.pending.popleft()
            else:  # not requested yet: ask for it now (the window goes on from there)
                for dropped in part.pending:
                    dropped.future.cancel()
                    self._release(dropped)
                part.pending.clear()
                part.requested = pos
                r = self._issue(part)
                part.pending.pop()
            self._fill()
        try:
            return r, r.future.result()
        except BaseException:
            with self._lock:
                self._release(r)
                self._fill()
            raise

    def _done_with(self, part: _Part, current: Optional[_Range]) -> None:
        with self._lock:
            self._release(current)
            for r in part.pending:
                r.future.cancel()
                self._release(r)
            part.pending.clear()
            part.state = _DONE
            self._fill()

    def _moved_on(self, current: Optional[_Range]) -> None:
        with self._lock:
            self._release(current)
            self._fill()


class _StreamFile(io.RawIOBase):
    """One object of a ReadAhead, as a binary file: ``readinto`` copies from the range in
    hand and takes the next one when it is used up. Seekable within the object."""

    def __init__(self, group: ReadAhead, part: _Part, owner: Optional[ReadAhead]):
        super().__init__()
        self.name = part.location.name
        self._group = group
        self._part = part
        self._owner = owner
        self._end: int = part.end  # type: ignore[assignment]
        self._pos = part.start
        self._range: Optional[_Range] = None
        self._block = memoryview(b"")
        self._block_start = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._end}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self._pos = base + offset
        return self._pos

    def readinto(self, buffer) -> int:
        if self.closed:
            raise ValueError("I/O operation on a closed file")
        view = memoryview(buffer).cast("B")
        if self._pos >= self._end or not len(view):
            return 0
        at = self._pos - self._block_start
        if not 0 <= at < len(self._block):
            self._next_block()
            at = self._pos - self._block_start
        n = min(len(view), len(self._block) - at)
        view[:n] = self._block[at : at + n]
        self._pos += n
        return n

    def _next_block(self) -> None:
        previous, self._range = self._range, None
        self._block = memoryview(b"")  # let it go before waiting for the next
        self._group._moved_on(previous)
        r, data = self._group._take(self._part, self._pos)
        self._range, self._block, self._block_start = r, memoryview(data), r.start

    def close(self) -> None:
        if not self.closed:
            self._block = memoryview(b"")
            self._group._done_with(self._part, self._range)
            self._range = None
            if self._owner is not None:
                self._owner.close()
        super().close()
