"""A torch map-style Dataset over a TFDS split (torch is imported only here)."""

from __future__ import annotations

import torch.utils.data


class TFDSTorchDataset(torch.utils.data.Dataset):
    """``ds[i]`` is example ``i`` of the split (numpy values, as tfds.as_numpy gives; the
    default collate turns them into tensors), after ``transform`` if given. Each DataLoader
    worker opens its own shard readers: the split holds no open file until first used."""

    def __init__(self, split, transform=None):
        self.split = split
        self.transform = transform

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, i):
        example = self.split[i]
        return self.transform(example) if self.transform is not None else example

    def __getitems__(self, indices):
        examples = self.split.get_batch(indices)
        if self.transform is not None:
            examples = [self.transform(e) for e in examples]
        return examples
