"""TFDS split strings: "train", "train[:10%]", "train[1000:2000]", "train[-5%:]",
"train[2shard]", "train[:2shard]", "train+test", "all" -> record ranges, with TFDS's
rounding (percent boundaries to the closest record)."""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

from ._info import SplitInfo

_PART = re.compile(r"^(?P<name>[\w-]+)(\[(?P<selector>[\d\w%:._-]+)\])?$")
_BOUND = re.compile(r"^((?P<value>-?[\d_.]+)(?P<unit>%|shard)?)?$")

Range = Tuple[str, int, int]  # (split name, first record, end record)


def _error(spec: str) -> ValueError:
    return ValueError(f"unrecognized split {spec!r}: use 'train', 'train[:10%]', "
                      "'train[1000:2000]', 'train[2shard]', 'train+test' or 'all' (TFDS syntax)")


def resolve(spec: str, splits: Dict[str, SplitInfo]) -> List[Range]:
    """The record ranges a split string selects, in order."""
    out: List[Range] = []
    for part in re.split(r"\s*\+\s*", spec.strip()):
        out.extend(_one(part, spec, splits))
    return out


def _one(part: str, spec: str, splits: Dict[str, SplitInfo]) -> List[Range]:
    match = _PART.match(part)
    if not match:
        raise _error(spec)
    name, selector = match["name"], match["selector"]
    if name == "all":
        if selector:
            raise ValueError("'all' takes no slice (as in TFDS)")
        return [(s, 0, info.num_examples) for s, info in splits.items()]
    if name not in splits:
        raise ValueError(f"unknown split {name!r}; the dataset has {sorted(splits)}")
    info = splits[name]
    n = info.num_examples
    if selector is None:
        return [(name, 0, n)]
    matches = [_BOUND.match(b) for b in selector.split(":")]
    bounds = [m for m in matches if m is not None]
    if len(bounds) != len(matches) or not any(b.group(0) for b in bounds) or len(bounds) > 2:
        raise _error(spec)
    start: Optional[str]
    end: Optional[str]
    if len(bounds) == 1:  # train[3shard]: one shard
        value, unit = bounds[0]["value"], bounds[0]["unit"]
        if unit != "shard":
            raise ValueError(f"{part!r}: a single index needs the shard unit (train[3shard]); "
                             "records and percents take a slice (train[3:4])")
        start, end = value, str(int(value) + 1)
    else:
        unit = bounds[0]["unit"] or bounds[1]["unit"] or "abs"
        start, end = bounds[0]["value"], bounds[1]["value"]
    first, last = _absolute(start, end, unit, info, part)
    return [(name, first, last)]


def _absolute(start: Optional[str], end: Optional[str], unit: str, info: SplitInfo,
              part: str) -> Tuple[int, int]:
    n = info.num_examples
    if unit == "%":
        first = 0 if start is None else int(round(float(start) * n / 100.0))
        last = n if end is None else int(round(float(end) * n / 100.0))
    elif unit == "shard":
        lengths = info.shard_lengths
        first = 0 if start is None else sum(lengths[:int(start)])
        stop = None if end is None else int(end)
        if stop is not None and stop <= 0:
            stop += len(lengths)
        last = n if stop is None else sum(lengths[:stop])
    else:
        first = 0 if start is None else int(start)
        last = n if end is None else int(end)
    if abs(first) > n or abs(last) > n:
        raise ValueError(f"{part!r}: the slice does not fit the split's {n} records")
    if first < 0:
        first += n
    if last < 0:
        last += n
    return first, max(first, last)
