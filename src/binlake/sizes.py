"""Sizes as people write them ("500MB", "1GiB", "4096"), for CLI flags and data-source options."""

from __future__ import annotations

import os
import re

UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30}


def parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]?I?B?)\s*", str(text).upper())
    if not m:
        raise ValueError(f"{text!r} is not a size (e.g. 500MB, 1GB)")
    return int(float(m.group(1)) * UNITS[m.group(2)])


# The ceiling on the bytes one event may make us hold: its size as read, or what it uncompresses to
# (TRANSACTION_PAYLOAD, MariaDB-compressed events). 1 GiB is MySQL's and MariaDB's own ceiling on
# max_allowed_packet / replica_max_allowed_packet, so a real event above it cannot be replicated either;
# a forged length or a decompression bomb stops here instead of exhausting the machine's memory.
MAX_PAYLOAD_ENV = "BINLAKE_MAX_PAYLOAD"
DEFAULT_MAX_PAYLOAD = 1 << 30
# no machine holds more: a ceiling above it is this one (the compiled paths take the ceiling as a
# C integer, which a larger Python int does not convert to: OverflowError on every read)
HIGHEST_MAX_PAYLOAD = (1 << 63) - 1


def max_payload(value: int | str | None = None) -> int:
    """``value`` when given, else ``$BINLAKE_MAX_PAYLOAD`` (e.g. "2GiB"), else 1 GiB."""
    if value is None:
        value = os.environ.get(MAX_PAYLOAD_ENV) or DEFAULT_MAX_PAYLOAD
    size = value if isinstance(value, int) else parse_size(value)
    if size <= 0:
        raise ValueError(f"the payload ceiling must be positive, not {value!r}")
    return min(size, HIGHEST_MAX_PAYLOAD)
