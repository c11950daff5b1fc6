"""A map-style PyTorch dataset over a TFDS split (needs torch).

    from torch.utils.data import DataLoader
    from tfrec_fast.tfds.torch import SplitDataset
    ds = SplitDataset(tfrec_fast.tfds.open(path, decode_images=True)["train"])
    loader = DataLoader(ds, batch_size=64, shuffle=True, num_workers=4)

Items are the split's examples (numpy values, as tfds.as_numpy gives them), passed through
``transform``; torch's default collate turns numbers and arrays into tensors. A DataLoader
batch is read with one ``Split.get_batch`` (``__getitems__``): one indexed read and one parse
per shard. Works with any sampler (RandomSampler: an exact shuffle; DistributedSampler).
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence

import torch.utils.data

from .dataset import Split

__all__ = ["SplitDataset"]


class SplitDataset(torch.utils.data.Dataset):
    """Example ``i`` of a :class:`~tfrec_fast.tfds.Split` (TFDS's order), transformed."""

    def __init__(self, split: Split, transform: Optional[Callable[[Any], Any]] = None):
        if not isinstance(split, Split):
            raise TypeError(f"SplitDataset takes a tfrec_fast.tfds Split, not "
                            f"{type(split).__name__}")
        self.split = split
        self.transform = transform

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, i: int) -> Any:
        return self.__getitems__([i])[0]

    def __getitems__(self, indices: Sequence[int]) -> List[Any]:
        examples = self.split.get_batch(indices)
        if self.transform is not None:
            examples = [self.transform(example) for example in examples]
        return examples

    def __repr__(self) -> str:
        return f"SplitDataset({self.split!r})"
