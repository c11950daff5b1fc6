"""TFDS split strings ("train[:10%]+test", "train[1000:2000]", "train[2shard]") and the order
in which TFDS reads the examples they select.

Parsing and rounding follow tensorflow_datasets/core/splits.py (4.9): percent boundaries are
rounded to the closest example with Python's round() (halves to even), absolute ones taken
as they are, negative ones counted from the end; a boundary beyond the split is an error.

Order: TFDS reads the selected part of each shard (a *file instruction*) with
``tf.data.Dataset.interleave(cycle_length=16, block_length=16)`` over the file instructions in
order, even with shuffle_files=False (cycle_length 1, i.e. shard after shard, when the dataset
was built with disable_shuffling=True). :func:`interleave_runs` reproduces that order from the
record counts alone.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, List, Mapping, NamedTuple, Optional, Sequence, Union

import numpy as np

from ..storage import resolve
from .metadata import SplitInfo

__all__ = [
    "ReadInstruction",
    "FileInstruction",
    "parse_split",
    "file_instructions",
    "interleave_runs",
]

_SUB_SPEC = re.compile(r"^(?P<split_name>[\w-]+)(\[(?P<split_selector>[\d\w%:.-]+)\])?$")
_SLICE = re.compile(r"^((?P<val>-?[\d_.]+)(?P<unit>(?:%|shard))?)?$")
_ADDITION = re.compile(r"\s*\+\s*")

# TFDS's default ReadConfig.interleave_block_length, and interleave_cycle_length unless the
# dataset disables shuffling.
BLOCK_LENGTH = 16
CYCLE_LENGTH = 16


@dataclass(frozen=True)
class ReadInstruction:
    """A slice of one split, as TFDS's ``tfds.core.ReadInstruction``: ``unit`` is "abs", "%"
    or "shard"; ``rounding`` ("closest" or "pct1_dropremainder") applies to percents."""

    split_name: str
    from_: Optional[Union[int, float]] = None
    to: Optional[Union[int, float]] = None
    unit: str = "abs"
    rounding: str = "closest"

    def __post_init__(self):
        if self.unit not in ("%", "abs", "shard"):
            raise ValueError(f"Unit should be one of ['%', 'abs', 'shard']. Got {self.unit!r}")
        if self.rounding not in ("closest", "pct1_dropremainder"):
            raise ValueError(
                "Rounding should be one of ['closest', 'pct1_dropremainder']. "
                f"Got: {self.rounding!r}"
            )
        if self.unit == "%" and (abs(self.from_ or 0) > 100 or abs(self.to or 0) > 100):
            raise ValueError(
                f"When unit=%, percent slice boundaries should be in [-100, 100]. Got: {self}"
            )


class FileInstruction(NamedTuple):
    """Records ``skip`` .. ``skip + take`` of shard ``shard_index`` of ``split``: the file
    ``location``, named ``path`` in messages."""

    split: str
    shard_index: int
    path: str
    skip: int
    take: int
    shard_length: int
    location: Any = None

    @property
    def to_end(self) -> bool:
        """Whether it reads up to the end of the shard (so the shard's length can be checked)."""
        return self.skip + self.take == self.shard_length


def _instruction(spec: str) -> List[ReadInstruction]:
    """One "name[selector]" -> ReadInstructions ("all" is every split, in the info's order:
    resolved by the caller, returned here as an instruction named "all")."""
    error = (
        f"Unrecognized split format: {spec!r}. See format at "
        "https://www.tensorflow.org/datasets/splits"
    )
    match = _SUB_SPEC.match(spec)
    if not match:
        raise ValueError(error)
    name, selector = match.group("split_name"), match.group("split_selector")
    if name == "all":
        if selector:
            raise NotImplementedError(f"{name!r} does not support slice.")
        return [ReadInstruction("all")]
    if selector is None:
        return [ReadInstruction(name)]
    slices: List[Any] = [_SLICE.match(x) for x in selector.split(":")]
    if not all(slices) or not any(x.group(0) for x in slices if x is not None):
        raise ValueError(error)
    if len(slices) == 1:
        from_: Any = slices[0]["val"]
        to: Any = int(slices[0]["val"]) + 1
        unit = slices[0]["unit"] or "abs"
        if unit != "shard":
            raise ValueError("Absolute or percent only support slice syntax.")
    elif len(slices) == 2:
        from_, to = slices[0]["val"], slices[1]["val"]
        unit = slices[0]["unit"] or slices[1]["unit"] or "abs"
    else:
        raise ValueError(error)
    number = float if unit == "%" else int
    return [
        ReadInstruction(
            name, None if from_ is None else number(from_), None if to is None else number(to), unit
        )
    ]


def parse_split(split) -> List[ReadInstruction]:
    """A split string, a ReadInstruction (ours or TFDS's, read by its attributes) or a list
    of them -> ReadInstructions."""
    if isinstance(split, ReadInstruction):
        return [split]
    if isinstance(split, str):
        parts = _ADDITION.split(str(split))
        out: List[ReadInstruction] = []
        for part in parts:
            try:
                out.extend(_instruction(part))
            except ValueError as error:
                raise ValueError(
                    f"Error parsing split {split!r}. See format at: "
                    f"https://www.tensorflow.org/datasets/splits\n{error}"
                ) from None
        return out
    if hasattr(split, "split_name") and hasattr(split, "unit"):  # tfds.core.ReadInstruction
        return [
            ReadInstruction(
                split.split_name,
                split.from_,
                split.to,
                split.unit,
                getattr(split, "rounding", "closest"),
            )
        ]
    if hasattr(split, "left") and hasattr(split, "right"):  # tfds's sum of two splits
        return parse_split(split.left) + parse_split(split.right)
    raise TypeError(
        f"a split is a string such as 'train[:10%]' or a ReadInstruction, not "
        f"{type(split).__name__}"
    )


def _absolute(instruction: ReadInstruction, splits: Mapping[str, SplitInfo]):
    """(split, from, to) with from/to None meaning the start/end, as TFDS's _rel_to_abs_instr."""
    name = instruction.split_name
    if name not in splits:
        raise ValueError(f"Unknown split {name!r}. Should be one of {list(splits)}.")
    num_examples = splits[name].num_examples
    from_: Any = instruction.from_
    to: Any = instruction.to
    unit = instruction.unit
    if unit == "%":
        if instruction.rounding == "closest":

            def pct(boundary):
                return int(round(boundary * num_examples / 100.0))
        else:
            if num_examples < 100:
                raise ValueError(
                    'Using "pct1_dropremainder" rounding on a split with less '
                    "than 100 elements is forbidden: it always results in an "
                    "empty dataset."
                )

            def pct(boundary):
                return boundary * math.trunc(num_examples / 100.0)

        from_ = 0 if from_ is None else pct(from_)
        to = num_examples if to is None else pct(to)
    elif unit == "shard":
        lengths = splits[name].shard_lengths
        from_ = 0 if from_ is None else sum(lengths[:from_])
        if to is not None and to <= 0:
            to = len(lengths) + to
        to = num_examples if to is None else sum(lengths[:to])
    else:
        from_ = 0 if from_ is None else from_
        to = num_examples if to is None else to
    if abs(from_) > num_examples or abs(to) > num_examples:
        raise ValueError(
            f"Requested slice [{from_ or ''}:{to or ''}] incompatible with {num_examples} examples."
        )
    if from_ < 0:
        from_ = num_examples + from_
    if to < 0:
        to = num_examples + to
    return name, int(from_), int(to)


def file_instructions(split, splits: Mapping[str, SplitInfo]) -> List[FileInstruction]:
    """The parts of shards a split string selects, in TFDS's order (as shard_utils'
    get_file_instructions: empty shards and empty parts left out)."""
    out: List[FileInstruction] = []
    for instruction in parse_split(split):
        if instruction.split_name == "all":
            parts = [ReadInstruction(name) for name in splits]
        else:
            parts = [instruction]
        for part in parts:
            name, from_, to = _absolute(part, splits)
            out.extend(_shard_parts(splits[name], from_, to))
    return out


def _shard_parts(info: SplitInfo, from_: int, to: int) -> List[FileInstruction]:
    out = []
    start = 0
    locations = info.locations or [resolve(path) for path in info.filenames]
    for index, (location, length) in enumerate(zip(locations, info.shard_lengths)):
        end = start + length
        if length and from_ < end and to > start:
            skip = max(from_ - start, 0)
            take = min(to, end) - start - skip
            if take > 0:
                out.append(
                    FileInstruction(info.name, index, location.name, skip, take, length, location)
                )
        start = end
    return out


def interleave_runs(
    lengths: Sequence[int], cycle_length: int = CYCLE_LENGTH, block_length: int = BLOCK_LENGTH
) -> np.ndarray:
    """The order of ``tf.data.Dataset.interleave`` over inputs of these lengths, as runs
    ``[input, first element, count]`` (int64 array of shape [runs, 3]).

    A transcription of TensorFlow's InterleaveDatasetOp iterator (the deterministic parallel
    interleave TFDS uses gives the same order): a cycle of ``cycle_length`` slots, each filled
    with the next input when its turn comes while it is empty; ``block_length`` elements are
    taken from a slot before moving to the next; an input found exhausted frees its slot.
    """
    lengths = [int(n) for n in lengths]
    runs: List[List[int]] = []
    slots: List[Optional[List[int]]] = [None] * max(1, cycle_length)  # [input, next, end]
    index = block = opened = next_input = 0
    inputs_done = False
    while not inputs_done or opened:
        slot = slots[index]
        if slot is not None:
            k, position, end = slot
            if position < end:
                count = min(block_length - block, end - position)
                if runs and runs[-1][0] == k and runs[-1][1] + runs[-1][2] == position:
                    runs[-1][2] += count  # cycle_length 1: one long run per input
                else:
                    runs.append([k, position, count])
                slot[1] += count
                block += count
                if block == block_length:
                    index, block = (index + 1) % len(slots), 0
                continue
            slots[index] = None  # exhausted: found when its turn comes again
            opened -= 1
            index, block = (index + 1) % len(slots), 0
        elif not inputs_done:
            if next_input < len(lengths):
                slots[index] = [next_input, 0, lengths[next_input]]
                opened += 1
                next_input += 1
            else:
                inputs_done = True
        else:
            index, block = (index + 1) % len(slots), 0
    return np.array(runs, dtype=np.int64).reshape(-1, 3)
