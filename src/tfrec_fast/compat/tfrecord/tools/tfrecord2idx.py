"""``python -m tfrec_fast.compat.tfrecord.tools.tfrecord2idx <file> <index>``: the ``tfrecord``
package's index tool (the same text format: ``offset size`` per record), reading only record
headers in C++ and checking their length checksums."""

from __future__ import annotations

import glob
import os
import sys

from ....index import create_index as _create_index

__all__ = ["create_index", "create_indices"]


def create_index(tfrecord_file: str, index_file: str) -> None:
    """Writes the index of ``tfrecord_file`` to ``index_file``."""
    _create_index(tfrecord_file, index_file)


def create_indices(tfrecord_dir: str) -> None:
    """Writes ``NAME.tfindex`` beside every ``*.tfrecord`` file of the directory."""
    for path in sorted(glob.glob(os.path.join(tfrecord_dir, "*.tfrecord"))):
        create_index(path, os.path.splitext(path)[0] + ".tfindex")


def main() -> None:
    if len(sys.argv) not in (2, 3):
        print(
            "Usage: tfrecord2idx <tfrecord path> <index path>\n"
            "       tfrecord2idx <tfrecord dir>   (NAME.tfindex for every NAME.tfrecord)"
        )
        sys.exit()
    if os.path.isdir(sys.argv[1]):
        create_indices(sys.argv[1])
    else:
        create_index(sys.argv[1], sys.argv[2])


if __name__ == "__main__":
    main()
