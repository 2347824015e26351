"""Output lines through one large buffered binary write per batch, not one write per line.

Lines are ``str`` whose undecodable stored bytes are surrogate escapes (``quote_bytes``): encoding
with ``surrogateescape`` gives back the bytes as stored.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import BinaryIO, TextIO

BATCH_BYTES = 1 << 20

BATCH_LINES = 8192
BATCH_CHARS = 1 << 20


def write_lines(
    lines: Iterable[str], out: BinaryIO, batch: int = BATCH_LINES, batch_chars: int = BATCH_CHARS
) -> None:
    """Each line followed by a newline, encoded as UTF-8 with surrogate escapes, in batches of at
    most ``batch`` items or about ``batch_chars`` characters (an item may be many lines: a whole
    event's); the lines before an error are written too (a damaged file prints up to where it fails).

    Each item is encoded on its own (ASCII text is copied as it is): one non-ASCII character in a
    joined batch made the whole batch a wide string, and its encoding cost more than the rest of
    the writing."""
    pending: list[bytes] = []
    append = pending.append
    chars = 0
    try:
        for line in lines:
            append(line.encode("utf-8", "surrogateescape"))
            chars += len(line)
            if chars >= batch_chars or len(pending) >= batch:
                append(b"")
                out.write(b"\n".join(pending))
                pending.clear()
                chars = 0
    finally:
        if pending:
            append(b"")
            out.write(b"\n".join(pending))
        out.flush()


def write_lines_to(lines: Iterable[str], stream: TextIO | None = None) -> None:
    """To a text stream's binary buffer when it has one (flushing its text first), else as text."""
    stream = stream if stream is not None else sys.stdout
    buffer = getattr(stream, "buffer", None)
    if buffer is None:
        for line in lines:
            stream.write(line + "\n")
        return
    stream.flush()
    write_lines(lines, buffer)


def write_blocks(blocks: Iterable[bytes | bytearray], out: BinaryIO, batch_bytes: int = BATCH_BYTES) -> None:
    """Encoded text as it comes (lines with their newlines), in writes of about ``batch_bytes``; what
    came before an error is written too."""
    pending: list[bytes | bytearray] = []
    size = 0
    try:
        for block in blocks:
            pending.append(block)
            size += len(block)
            if size >= batch_bytes:
                out.write(b"".join(pending))
                pending.clear()
                size = 0
    finally:
        if pending:
            out.write(b"".join(pending))
        out.flush()


def write_blocks_to(blocks: Iterable[bytes | bytearray], stream: TextIO | None = None) -> None:
    """To a text stream's binary buffer (flushing its text first), else decoded as written."""
    stream = stream if stream is not None else sys.stdout
    buffer = getattr(stream, "buffer", None)
    if buffer is None:
        for block in blocks:
            stream.write(bytes(block).decode("utf-8", "surrogateescape"))
        return
    stream.flush()
    write_blocks(blocks, buffer)
