"""A prepared TFDS dataset and its splits: iteration in file order, random access through
record indexes, TFDS split slicing, a torch map-style dataset."""

from __future__ import annotations

import bisect
import hashlib
import os
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import ExampleParseError
from ..example import VarLen, parse_example, parse_examples
from ..index import IndexedTFRecordReader, create_index, load_index
from ..records import TFRecordReader
from . import _slicing
from ._info import DatasetInfo, SplitInfo, TFDSMetadataError, read_info

BATCH = 256  # records parsed at a time while iterating


def _cache_dir() -> str:
    return os.environ.get("TFREC_FAST_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "tfrec_fast")


class _Shard:
    """One shard file: its expected record count and, once needed, its record index."""

    def __init__(self, path: str, length: int):
        self.path = path
        self.length = length
        self._reader: Optional[IndexedTFRecordReader] = None

    def _index_path(self) -> str:
        beside = self.path + ".idx"
        if os.path.exists(beside) or os.access(os.path.dirname(self.path), os.W_OK):
            return beside
        key = hashlib.sha1(os.path.abspath(self.path).encode()).hexdigest()[:16]
        return os.path.join(_cache_dir(), "tfds", key, os.path.basename(self.path) + ".idx")

    def reader(self) -> IndexedTFRecordReader:
        if self._reader is None:
            index = self._index_path()
            if os.path.exists(index):
                offsets, sizes = load_index(index)
            else:
                os.makedirs(os.path.dirname(index), exist_ok=True)
                offsets, sizes = create_index(self.path, index)  # headers only
            if len(offsets) != self.length:
                raise TFDSMetadataError(
                    f"{self.path} holds {len(offsets)} records but dataset_info.json's "
                    f"shard_lengths says {self.length}: the shard or the metadata is wrong")
            self._reader = IndexedTFRecordReader(self.path, (offsets, sizes))
        return self._reader


class Split:
    """Records of one or more TFDS splits (a TFDS split string), in file order."""

    def __init__(self, dataset: "Dataset", spec: str, ranges: List[Tuple[str, int, int]],
                 decode_images: bool):
        self.dataset = dataset
        self.spec = spec
        self.decode_images = decode_images
        # (shard, first record in it, end record): what this split reads, in order
        self._pieces: List[Tuple[_Shard, int, int]] = []
        for split, first, end in ranges:
            start = 0
            for shard in dataset._shards[split]:
                a, b = max(first, start), min(end, start + shard.length)
                if a < b:
                    self._pieces.append((shard, a - start, b - start))
                start += shard.length
        self._starts = np.cumsum([0] + [b - a for _, a, b in self._pieces]).tolist()

    def __repr__(self) -> str:
        return f"Split({self.dataset.info.name}, {self.spec!r}, {len(self)} examples)"

    def __len__(self) -> int:
        return self._starts[-1]

    @property
    def info(self) -> DatasetInfo:
        return self.dataset.info

    # -- decoding --

    def _decode_batch(self, records, shard: _Shard, first: int) -> List[Any]:
        spec = self.dataset._spec
        try:
            columns = parse_examples(records, spec, name=shard.path)
        except ExampleParseError as error:
            raise ExampleParseError(error.detail, path=shard.path,
                                    record_index=first + (error.record_index or 0),
                                    feature=error.feature) from None
        tree = self.dataset.info.features
        out = []
        for i in range(len(records)):
            def row(name, i=i):
                return columns[name][i]
            try:
                out.append(tree.decode(row, self.decode_images))
            except ExampleParseError as error:
                raise ExampleParseError(error.detail, path=shard.path, record_index=first + i,
                                        feature=error.feature) from None
        return out

    # -- sequential --

    def __iter__(self) -> Iterator[Any]:
        for shard, first, end in self._pieces:
            yield from self._iter_piece(shard, first, end)

    def _iter_piece(self, shard: _Shard, first: int, end: int) -> Iterator[Any]:
        if first > 0:  # a slice starting inside the shard: read it through the index
            for a in range(first, end, BATCH):
                b = min(end, a + BATCH)
                batch = shard.reader().get_batch(np.arange(a, b, dtype=np.int64))
                yield from self._decode_batch(batch, shard, a)
            return
        seen = 0
        with TFRecordReader(shard.path) as reader:
            while seen < end:
                batch = reader.read_batch(max_records=min(BATCH, end - seen))
                if not len(batch):
                    break
                yield from self._decode_batch(batch, shard, seen)
                seen += len(batch)
            extra = reader.read_batch(max_records=1) if end == shard.length else None
        if seen < end or (extra is not None and len(extra)):
            held = seen if seen < end else f"more than {shard.length}"
            raise TFDSMetadataError(
                f"{shard.path} holds {held} records but dataset_info.json's shard_lengths "
                f"says {shard.length}: the shard or the metadata is wrong")

    # -- random access --

    def _locate(self, i: int) -> Tuple[_Shard, int]:
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"example {i} out of range for {self!r}")
        piece = bisect.bisect_right(self._starts, i) - 1
        shard, first, _ = self._pieces[piece]
        return shard, first + i - self._starts[piece]

    def __getitem__(self, i: int) -> Any:
        return self.get_batch([i])[0]

    def get_batch(self, indices: Sequence[int]) -> List[Any]:
        """The examples at ``indices`` (any order, repeats allowed), each shard read once
        through its record index (built by a header-only scan on first use, cached beside the
        shard or, when that directory is read-only, under ~/.cache/tfrec_fast)."""
        located = [self._locate(int(i)) for i in np.asarray(indices, dtype=np.int64).ravel()]
        out: List[Any] = [None] * len(located)
        by_shard: Dict[str, List[int]] = {}
        for k, (shard, _) in enumerate(located):
            by_shard.setdefault(shard.path, []).append(k)
        for ks in by_shard.values():
            shard = located[ks[0]][0]
            local = np.array([located[k][1] for k in ks], dtype=np.int64)
            batch = shard.reader().get_batch(local)
            for k, value in zip(ks, self._decode_rows(batch, shard, local)):
                out[k] = value
        return out

    def _decode_rows(self, batch, shard: _Shard, local: np.ndarray) -> List[Any]:
        try:
            return self._decode_batch(batch, shard, 0)
        except ExampleParseError as error:  # name the record by its index in the shard
            at = int(local[error.record_index]) if error.record_index is not None else None
            raise ExampleParseError(error.detail, path=shard.path, record_index=at,
                                    feature=error.feature) from None

    def raw(self, i: int) -> Dict[str, list]:
        """The example's Example features as lists, undecoded (for any feature type)."""
        shard, local = self._locate(i)
        return parse_example(bytes(shard.reader()[local]))

    # -- torch --

    def to_torch(self, transform=None):
        """A torch map-style Dataset over this split (``transform`` applied to each example);
        use it with a DataLoader and any sampler."""
        from ._torch import TFDSTorchDataset
        return TFDSTorchDataset(self, transform)


class Dataset:
    """A prepared TFDS dataset directory: ``.info``, ``.splits`` and ``ds[split string]``."""

    def __init__(self, directory: str, decode_images: bool = False):
        self.info = read_info(directory)
        self.decode_images = decode_images
        self._shards = {name: [_Shard(path, n) for path, n in zip(s.files, s.shard_lengths)]
                        for name, s in self.info.splits.items()}
        kinds = self.info.features.specs()
        self._spec = {name: VarLen(kind) for name, kind in kinds.items()}

    @property
    def splits(self) -> Dict[str, SplitInfo]:
        return self.info.splits

    def __getitem__(self, spec: str) -> Split:
        return Split(self, spec, _slicing.resolve(spec, self.info.splits), self.decode_images)

    def split(self, spec: str, *, decode_images: Optional[bool] = None) -> Split:
        decode = self.decode_images if decode_images is None else decode_images
        return Split(self, spec, _slicing.resolve(spec, self.info.splits), decode)

    def __repr__(self) -> str:
        return (f"Dataset({self.info.name} {self.info.version}, splits "
                f"{ {k: v.num_examples for k, v in self.splits.items()} })")
