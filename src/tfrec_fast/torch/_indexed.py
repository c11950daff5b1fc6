"""IndexedTFRecordDataset: map-style random access to records through their indexes."""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import torch.utils.data

from .. import _loader
from ..example import parse_examples
from ..spec import normalize_spec
from . import _state, _tensors
from ._tensors import Rows

__all__ = ["IndexedTFRecordDataset"]


class IndexedTFRecordDataset(torch.utils.data.Dataset):
    """Random access to the records of TFRecord files through their indexes (map-style).

    ``dataset[i]`` is record i of the files concatenated (in the order given; globs sorted),
    parsed with ``spec`` into a dict of tensors as :class:`TFRecordDataset` yields them (raw
    ``bytes`` when ``spec`` is None), then passed to ``transform``. ``__getitems__`` (used by
    DataLoader for each batch) reads all of a batch's records with one
    ``IndexedTFRecordReader.get_batch`` per file and parses them in one call; with
    ``collate_fn=tfrec_fast.torch.collate`` those parsed columns are the batch (no per-record
    dicts, no stacking) when they are all dense and there is no ``transform``. Use with any
    sampler: ``RandomSampler`` (an exact shuffle), ``DistributedSampler`` (call its set_epoch).

    ``index``, ``storage_options`` and ``filesystem`` as in :class:`TFRecordDataset`; indexes not
    found beside the files are built when the dataset is created (so ``len()`` is known), in the
    process that makes it: a remote object is scanned once per version per machine (the index
    cache), several of them through one read-ahead stream. Files are opened in the process
    that reads them (safe with DataLoader workers); remote records are fetched by coalesced
    range requests at the version the dataset planned with. Compressed files cannot be indexed.

    ``copy_bytes=False`` gives bytes features as memoryviews of the batch read for them, under
    the conditions said in :class:`TFRecordDataset` (the collation of these records keeps them
    as a list; they do not pickle out of a DataLoader worker).
    """

    def __init__(
        self,
        paths,
        spec=None,
        index=None,
        *,
        transform: Optional[Callable] = None,
        verify: bool = True,
        copy_bytes: bool = True,
        storage_options=None,
        filesystem=None,
    ):
        from ..index import indexes_of
        from ..storage import load_index

        self._locations = _loader.expand_locations(paths, storage_options, filesystem)
        self.files = [loc.url for loc in self._locations]
        self._files_print = _state.fingerprint(self.files)  # (a state's, after every batch)
        self.spec = spec
        self._spec = None if spec is None else normalize_spec(spec)
        self.transform = transform
        self.verify = verify
        self.copy_bytes = bool(copy_bytes)
        # Counted here, in the process that makes the dataset (before DataLoader workers start):
        # from the index files, or by one scan per object version per machine (index cache).
        index_files = _loader.index_paths(self._locations, index, storage_options, filesystem)
        missing = [loc for loc, ix in zip(self._locations, index_files) if ix is None]
        scanned = iter(indexes_of(missing))
        self._indexes: List[Tuple[np.ndarray, np.ndarray]] = [
            load_index(ix) if ix is not None else next(scanned) for ix in index_files
        ]
        lengths = [len(offsets) for offsets, _ in self._indexes]
        self._starts = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
        self._readers: Dict[int, Any] = {}
        self._pid = os.getpid()

    def __len__(self) -> int:
        return int(self._starts[-1])

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_readers"] = {}
        return state

    def _reader(self, k: int):
        if self._pid != os.getpid():
            self._readers, self._pid = {}, os.getpid()
        reader = self._readers.get(k)
        if reader is None:
            from ..index import IndexedTFRecordReader

            reader = IndexedTFRecordReader(self._locations[k], self._indexes[k], verify=self.verify)
            self._readers[k] = reader
        return reader

    def __getitem__(self, i: int):
        return self.__getitems__([i])[0]

    def __getitems__(self, indices: Sequence[int]) -> Sequence[dict]:
        n = len(self)
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        idx = np.where(idx < 0, idx + n, idx)
        if len(idx) and (idx.min() < 0 or idx.max() >= n):
            raise IndexError(f"record index out of range for {n} records")
        files = np.searchsorted(self._starts, idx, side="right") - 1
        out: list = [None] * len(idx)
        single = len(idx) > 0 and files[0] == files[-1] and (files == files[0]).all()
        for k in np.unique(files).tolist():
            where = np.flatnonzero(files == k)
            batch = self._reader(k).get_batch(idx[where] - self._starts[k])
            rows: Iterable[Any]
            if self._spec is None:
                rows = batch.to_list()
            else:
                columns = parse_examples(batch, self._spec, name=self._locations[k].name)
                if (
                    single
                    and self.transform is None
                    and all(isinstance(c, np.ndarray) for c in columns.values())
                ):
                    # The whole batch is these columns, in this order: collate() takes them
                    # as they are instead of stacking rows.
                    return Rows(columns, len(batch))
                rows = _tensors.rows(columns, len(batch), views=not self.copy_bytes)
            for j, row in zip(where.tolist(), rows):
                out[j] = row
        if self.transform is not None:
            out = [self.transform(row) for row in out]
        if not self.copy_bytes and torch.utils.data.get_worker_info() is not None:
            _tensors.sendable(out, "a record")
        return out

    def state_dict(self) -> dict:
        """What a resume checks (for torchdata's ``StatefulDataLoader``, whose sampler state
        says where an epoch stands): the files and their number of records.

        Returns
        -------
        dict
            ``format``, ``dataset``, ``files`` (count and names' CRC) and ``records``.
        """
        return {
            "format": _state.FORMAT,
            "dataset": "IndexedTFRecordDataset",
            "files": self._files_print,
            "records": len(self),
        }

    def load_state_dict(self, state: dict) -> None:
        """Checks that a state was saved over the same files and records, so that the
        sampler's indices mean the same records.

        Parameters
        ----------
        state : dict
            What :meth:`state_dict` returned.

        Raises
        ------
        ValueError
            A state of another dataset, other files or another number of records.
        """
        _state.check_same(dict(state), self.state_dict(), ["format", "dataset", "files", "records"])

    def close(self) -> None:
        for reader in self._readers.values():
            reader.close()
        self._readers = {}

    def __repr__(self):
        return f"IndexedTFRecordDataset({len(self.files)} files, {len(self)} records)"
