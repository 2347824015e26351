"""Sizes as people write them ("500MB", "1GiB", "4096"), for CLI flags and data-source options."""

from __future__ import annotations

import re

UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30}


def parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]?I?B?)\s*", str(text).upper())
    if not m:
        raise ValueError(f"{text!r} is not a size (e.g. 500MB, 1GB)")
    return int(float(m.group(1)) * UNITS[m.group(2)])
