"""CHAR/VARCHAR/BINARY/VARBINARY, TEXT/BLOB, ENUM/SET, GEOMETRY, VECTOR and JSON columns."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from binlake.values.charsets import decode_text
from binlake.values.json_binary import Json, decode_json_column
from binlake.values.types import string_max_length

Decoder = Callable[[bytes, int], tuple[Any, int]]


def _length_reader(width: int) -> Callable[[bytes, int], int]:
    if width == 1:
        return lambda buf, pos: buf[pos]
    if width == 2:
        return lambda buf, pos: buf[pos] | buf[pos + 1] << 8
    return lambda buf, pos: int.from_bytes(buf[pos : pos + width], "little")


def _check(buf: bytes, end: int) -> None:
    if end > len(buf):
        raise ValueError(f"value needs {end} bytes, row image has {len(buf)}")


def varchar_decoder(max_bytes: int, codec: str | None, pad_to: int | None = None) -> Decoder:
    """Length-prefixed bytes (1-byte length below 256 bytes of capacity, else 2), then text."""
    width = 1 if max_bytes < 256 else 2
    read_len = _length_reader(width)

    def dec_varchar(buf: bytes, pos: int) -> tuple[Any, int]:
        n = read_len(buf, pos)
        start = pos + width
        end = start + n
        _check(buf, end)
        raw = buf[start:end]
        if pad_to is not None and n < pad_to:
            raw += b"\0" * (pad_to - n)  # BINARY(n): the server strips trailing zeros
        return decode_text(raw, codec), end

    return dec_varchar


def string_decoder(meta: int, codec: str | None) -> Decoder:
    max_len = string_max_length(meta)
    return varchar_decoder(max_len, codec, pad_to=max_len if codec is None else None)


def blob_decoder(width: int, codec: str | None) -> Decoder:
    read_len = _length_reader(width)

    def dec_blob(buf: bytes, pos: int) -> tuple[Any, int]:
        n = read_len(buf, pos)
        end = pos + width + n
        _check(buf, end)
        return decode_text(buf[pos + width : end], codec), end

    return dec_blob


def json_decoder(width: int) -> Decoder:
    read_len = _length_reader(width)

    def dec_json(buf: bytes, pos: int) -> tuple[Json, int]:
        n = read_len(buf, pos)
        end = pos + width + n
        _check(buf, end)
        return decode_json_column(buf[pos + width : end]), end

    return dec_json


def vector_decoder(width: int) -> Decoder:
    """MySQL 9 VECTOR: length-prefixed little-endian float32 values."""
    read_len = _length_reader(width)

    def dec_vector(buf: bytes, pos: int) -> tuple[tuple[float, ...], int]:
        n = read_len(buf, pos)
        end = pos + width + n
        _check(buf, end)
        if n % 4:
            raise ValueError(f"VECTOR of {n} bytes is not a float32 array")
        return struct.unpack_from(f"<{n // 4}f", buf, pos + width), end

    return dec_vector


def enum_decoder(size: int, names: list[str] | None) -> Decoder:
    def dec_enum(buf: bytes, pos: int) -> tuple[Any, int]:
        i = int.from_bytes(buf[pos : pos + size], "little")
        if names is None:
            return i, pos + size
        # index 0 is the empty string MySQL stores for an invalid value
        return (names[i - 1] if 0 < i <= len(names) else "" if i == 0 else i), pos + size

    return dec_enum


def set_decoder(size: int, names: list[str] | None) -> Decoder:
    def dec_set(buf: bytes, pos: int) -> tuple[Any, int]:
        bits = int.from_bytes(buf[pos : pos + size], "little")
        if names is None:
            return bits, pos + size
        if bits >> len(names):
            return bits, pos + size  # bits beyond the known members: keep the mask
        return tuple(n for i, n in enumerate(names) if bits >> i & 1), pos + size

    return dec_set


def enum_table(names: list[str]) -> list[Any]:
    """A one-byte ENUM's value for every byte: index 0 is '', unknown indexes stay ints (as
    ``enum_decoder``)."""
    known = ["", *names]
    return [known[i] if i < len(known) else i for i in range(256)]


def set_table(names: list[str]) -> list[Any]:
    """A one-byte SET's value for every byte: its members, or the mask when it has bits beyond
    the known members (as ``set_decoder``)."""
    return [m if m >> len(names) else tuple(n for k, n in enumerate(names) if m >> k & 1) for m in range(256)]


# ---- encoders: the exact inverse of each decoder above -------------------------------------------

Encoder = Callable[[Any], bytes]


def _to_bytes(v: str | bytes, codec: str | None) -> bytes:
    if isinstance(v, bytes):
        return v
    return v.encode(
        "utf-8" if codec in (None, "?") else codec,
        "surrogateescape" if codec in (None, "?", "utf-8") else "strict",
    )


def varchar_encoder(max_bytes: int, codec: str | None, strip_zeros: bool = False) -> Encoder:
    width = 1 if max_bytes < 256 else 2

    def enc_varchar(v: Any) -> bytes:
        raw = _to_bytes(v, codec)
        if strip_zeros:
            raw = raw.rstrip(b"\0")  # the server stores BINARY(n) without its trailing zeros
        return len(raw).to_bytes(width, "little") + raw

    return enc_varchar


def string_encoder(meta: int, codec: str | None) -> Encoder:
    return varchar_encoder(string_max_length(meta), codec, strip_zeros=codec is None)


def blob_encoder(width: int, codec: str | None) -> Encoder:
    def enc_blob(v: Any) -> bytes:
        raw = _to_bytes(v, codec)
        return len(raw).to_bytes(width, "little") + raw

    return enc_blob


def json_encoder(width: int) -> Encoder:
    from binlake.values.json_binary import encode_json_binary

    def enc_json(v: Json) -> bytes:
        raw = b"" if v.empty else encode_json_binary(v.value)
        return len(raw).to_bytes(width, "little") + raw

    return enc_json


def vector_encoder(width: int) -> Encoder:
    def enc_vector(v: tuple[float, ...]) -> bytes:
        raw = struct.pack(f"<{len(v)}f", *v)
        return len(raw).to_bytes(width, "little") + raw

    return enc_vector


def enum_encoder(size: int, names: list[str] | None) -> Encoder:
    def enc_enum(v: Any) -> bytes:
        i = v if isinstance(v, int) else (names.index(v) + 1 if names and v in names else 0)
        return i.to_bytes(size, "little")

    return enc_enum


def set_encoder(size: int, names: list[str] | None) -> Encoder:
    def enc_set(v: Any) -> bytes:
        mask = v if isinstance(v, int) else sum(1 << (names or []).index(x) for x in v)
        return mask.to_bytes(size, "little")

    return enc_set
