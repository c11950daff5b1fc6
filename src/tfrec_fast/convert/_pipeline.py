"""Jobs -> encoded Examples -> shards: workers build, the main process writes in job order.

A job is whatever one call of ``build`` turns into records (an image path, a chunk of array rows).
``build(job)`` returns one serialized Example (bytes) or a RecordBatch of several, or raises
:class:`BadInputError`. Workers may finish out of order, but results are consumed in job order,
so the output is the same bytes for any worker count.

With worker processes and an ``inspect`` function, the work is split: ``inspect(job)`` runs in
the workers and returns something small (an image's header, a parsed annotation), and
``build(job, inspected)`` runs in the main process, which reads the big bytes itself. Sending
every image's bytes back through a pipe cost the main process more than the whole conversion
in one process.
"""

from __future__ import annotations

import collections
import contextlib
import sys
import threading
import time
from typing import Any, Callable, Generator, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .._core import RecordBatch
from .._progress import Progress
from ._common import BadInputError, ConvertSummary, WriteOptions

__all__ = ["permutation", "shuffled", "write_jobs"]

# Jobs per task sent to a worker process: amortises pickling and IPC over several small images.
_JOBS_PER_TASK = 16
# Tasks in flight per worker: keeps workers busy while bounding the memory of results waiting to
# be written (Pool.imap would queue the whole dataset if the writer were the slower side).
_TASKS_AHEAD_PER_WORKER = 4


class _Skipped(tuple):
    """(path, reason) of a bad input, returned instead of raised so a worker's batch goes on."""


def permutation(n: int, seed: int) -> np.ndarray:
    """A random order of 0..n-1, the same for the same seed (numpy's PCG64 generator)."""
    return np.random.default_rng(seed).permutation(n)


def shuffled(jobs: Sequence[Any], options: WriteOptions) -> List[Any]:
    """The jobs in writing order: as given, or permuted reproducibly from ``options.seed``."""
    if not options.shuffle:
        return list(jobs)
    return [jobs[i] for i in permutation(len(jobs), options.seed).tolist()]


def _build_all(build: Callable[..., Any], jobs: Sequence[Any], inspected=None) -> list:
    """Runs build on each job of one task (with what inspect found, if given); bad inputs come
    back as _Skipped."""
    out = []
    for k, job in enumerate(jobs):
        try:
            if inspected is None:
                out.append(build(job))
            elif isinstance(inspected[k], _Skipped):
                out.append(inspected[k])
            else:
                out.append(build(job, inspected[k]))
        except BadInputError as error:
            out.append(_Skipped((error.path, error.reason)))
    return out


def _inspect_all(inspect: Callable[[Any], Any], jobs: Sequence[Any]) -> list:
    return _build_all(inspect, jobs)


def _executor(workers: int, threads: bool):
    """A pool of threads, or of processes that never inherit the parent's threads (fork would,
    unsafely): forkserver where the platform has it, spawn elsewhere. Imported here, when
    needed, to keep ``tfrec-fast`` quick to start."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

    if threads:
        return ThreadPoolExecutor(workers, thread_name_prefix="tfrec-convert")
    methods = multiprocessing.get_all_start_methods()
    if sys.platform.startswith("linux") and threading.active_count() == 1:
        method = "fork"  # no thread to inherit: safe, and workers start at once, imports done
    else:
        method = "forkserver" if "forkserver" in methods else "spawn"
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method))


def _outcomes(
    build,
    jobs: Sequence[Any],
    workers: int,
    threads: bool,
    inspect: Optional[Callable[[Any], Any]] = None,
) -> Generator[Any, None, None]:
    """build(job) for each job, in job order; with workers > 1 run ahead in a pool (only
    inspect(job) there, when given and the workers are processes)."""
    if workers <= 1:
        yield from _build_all(build, jobs)
        return
    split = inspect is not None and not threads
    per_task = 1 if threads else _JOBS_PER_TASK
    tasks = (jobs[i : i + per_task] for i in range(0, len(jobs), per_task))
    pending: collections.deque = collections.deque()

    def finish(task, future):
        if split:
            return _build_all(build, task, future.result())
        return future.result()

    executor = _executor(workers, threads)
    try:
        for task in tasks:
            future = (
                executor.submit(_inspect_all, inspect, task)
                if split
                else executor.submit(_build_all, build, task)
            )
            pending.append((task, future))
            if len(pending) >= workers * _TASKS_AHEAD_PER_WORKER:
                yield from finish(*pending.popleft())
        while pending:
            yield from finish(*pending.popleft())
    finally:
        executor.shutdown(wait=True, cancel_futures=True)


def write_jobs(
    jobs: Sequence[Any],
    build: Callable[[Any], Any],
    out_dir: str,
    prefix: str,
    spec: Mapping[str, Any],
    options: WriteOptions,
    *,
    total: Optional[int] = None,
    threads: bool = False,
    desc: str = "convert",
    unit: str = "rec",
    started: Optional[float] = None,
    inspect: Optional[Callable[[Any], Any]] = None,
    inputs: Sequence[str] = (),
) -> ConvertSummary:
    """Builds every job (in ``options.worker_count`` processes, or threads) and writes the
    records in job order to shards ``{out_dir}/{prefix}-*`` with a manifest describing ``spec``.

    ``build`` must be picklable for processes (a module-level function or a partial of one);
    so must ``inspect``, which then runs in the processes instead (see the module docstring).
    ``total`` is the number of records expected, for the progress bar (default: one per job).
    ``inputs``: files read whole, which the output must not replace (see ShardedWriter's
    ``protect``).
    With ``options.strict`` the first bad input raises :class:`BadInputError` and no shard is
    left under a final name; otherwise bad inputs are listed in the summary.
    """
    from ..sharded import ShardedWriter

    started = time.perf_counter() if started is None else started
    skipped: List[Tuple[str, str]] = []
    writer = ShardedWriter(
        out_dir, prefix, spec=dict(spec), protect=inputs, **options.writer_kwargs()
    )
    progress = Progress(len(jobs) if total is None else total, desc, unit, options.progress)
    try:
        # closing(): a failure stops the workers at once (pending tasks cancelled).
        with (
            writer,
            contextlib.closing(
                _outcomes(build, jobs, options.worker_count, threads, inspect)
            ) as outcomes,
        ):
            for outcome in outcomes:
                if isinstance(outcome, _Skipped):
                    if options.strict:
                        raise BadInputError(*outcome)
                    skipped.append(tuple(outcome))
                    progress.advance(1)
                elif isinstance(outcome, RecordBatch):
                    writer.write_batch(outcome)
                    progress.advance(len(outcome))
                else:
                    writer.write(outcome)
                    progress.advance(1)
    except BaseException:
        # The writer left the records so far under hidden temporary names; a conversion that
        # failed is run again, not resumed, so they are only litter.
        writer.remove_partial()
        raise
    finally:
        progress.close()
    shards = writer.shards
    return ConvertSummary(
        records=writer.records_written,
        skipped=skipped,
        shards=shards,
        manifest=writer.manifest_path,
        bytes=sum(writer.shard_bytes),
        seconds=time.perf_counter() - started,
    )
