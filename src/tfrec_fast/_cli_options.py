"""Command-line options that the tfrec-fast commands and the converters' commands share."""

from __future__ import annotations

import argparse
import json
from typing import Any, Tuple

__all__ = ["storage_option", "add_storage_option"]


def storage_option(text: str) -> Tuple[str, Any]:
    """--storage-option KEY=VALUE: VALUE is read as JSON when it is JSON (true, 3, {"a": 1}),
    else taken as a string."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(
            "expected KEY=VALUE, e.g. endpoint_url=http://127.0.0.1:9000"
        )
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


def add_storage_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--storage-option",
        dest="storage_options",
        type=storage_option,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an fsspec option for URLs (repeatable), e.g. "
        "endpoint_url=http://127.0.0.1:9000 or anon=true; fsspec's "
        "environment variables (FSSPEC_S3_ENDPOINT_URL, ...) apply too",
    )
