"""TRANSACTION_PAYLOAD (MySQL 8.0.20+): a zstd-compressed run of whole events of one transaction.

The body decoder only unpacks the envelope; the stream decoder re-enters itself on the uncompressed
bytes so inner events come out in order, each with the payload's position and its own index.
"""

from __future__ import annotations

from dataclasses import dataclass

from binlake.errors import SizeLimitError
from binlake.events.base import DecodeState, EventHeader
from binlake.sizes import DEFAULT_MAX_PAYLOAD, MAX_PAYLOAD_ENV
from binlake.wire import Cursor

COMPRESSION_ZSTD = 0
COMPRESSION_NONE = 255
CHUNK = 1 << 20  # inflate step: the most a bomb can overshoot the ceiling by


@dataclass(slots=True)
class TransactionPayload:
    compression_type: int
    payload_size: int
    uncompressed_size: int
    payload: bytes  # the compressed bytes, as written
    event_count: int = 0  # set once the inner events are decoded

    def uncompressed(self, limit: int = DEFAULT_MAX_PAYLOAD) -> bytearray:
        """The inner events' bytes, inflated chunk by chunk: neither the header's size nor the zstd
        frame's is trusted, so a bomb stops at ``limit`` (``SizeLimitError``) having held about that
        much. A bytearray, not bytes: copying it would double the peak."""
        if self.compression_type == COMPRESSION_NONE:
            return bytearray(self.payload)
        if self.compression_type != COMPRESSION_ZSTD:
            raise ValueError(f"unknown payload compression type {self.compression_type}")
        if self.uncompressed_size > limit:
            raise SizeLimitError(
                f"TRANSACTION_PAYLOAD claims {self.uncompressed_size} uncompressed bytes, "
                f"over the {limit}-byte ceiling ({MAX_PAYLOAD_ENV})",
                size=self.uncompressed_size,
                limit=limit,
            )
        # Read at most the announced size (+1 chunk to notice more) when it is announced.
        expected = self.uncompressed_size or limit
        import zstandard  # here: only compressed transactions need it (8 ms of every start-up)

        out = bytearray()
        try:
            with zstandard.ZstdDecompressor().stream_reader(self.payload) as reader:
                while chunk := reader.read(CHUNK):
                    out += chunk
                    if len(out) > expected:
                        break
        except zstandard.ZstdError as e:
            raise ValueError(f"zstd: {e}") from None
        if not self.uncompressed_size and len(out) > limit:
            raise SizeLimitError(
                f"TRANSACTION_PAYLOAD inflates past the {limit}-byte ceiling ({MAX_PAYLOAD_ENV})",
                size=len(out),
                limit=limit,
            )
        if self.uncompressed_size and len(out) != self.uncompressed_size:
            got = f"more than {expected}" if len(out) > expected else str(len(out))
            raise ValueError(f"payload inflates to {got} bytes, header says {self.uncompressed_size}")
        return out


def decode_transaction_payload(buf: bytes, state: DecodeState, header: EventHeader) -> TransactionPayload:
    c = Cursor(buf)
    fields = {1: 0, 2: COMPRESSION_NONE, 3: 0}
    while c.remaining:
        kind = c.lenenc() or 0
        if kind == 0:  # end of the header fields
            break
        value = c.take(c.lenenc() or 0)
        fields[kind] = Cursor(value).lenenc() or 0 if value else 0
    payload = c.rest()
    size = fields[1] or len(payload)
    if size != len(payload):
        raise ValueError(f"payload size field {size} but {len(payload)} bytes follow")
    return TransactionPayload(fields[2], size, fields[3], payload)


def encode_transaction_payload(b: TransactionPayload) -> bytes:
    """Fields in the order MySQL writes them: compression type, uncompressed size, payload size."""
    from binlake.wire import encode_lenenc

    out = bytearray()
    for kind, value in ((2, b.compression_type), (3, b.uncompressed_size), (1, b.payload_size)):
        v = encode_lenenc(value)
        out += encode_lenenc(kind) + encode_lenenc(len(v)) + v
    return bytes(out) + b"\x00" + b.payload


def compress_payload(events: bytes, level: int = 3) -> TransactionPayload:
    import zstandard

    data = zstandard.ZstdCompressor(level=level).compress(events)
    return TransactionPayload(COMPRESSION_ZSTD, len(data), len(events), data)
