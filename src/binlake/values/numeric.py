"""Integers of every width, FLOAT/DOUBLE, DECIMAL, BIT and YEAR."""

from __future__ import annotations

import struct
from collections.abc import Callable
from decimal import Context, Decimal
from typing import Any

from binlake.values.types import ColumnType

Decoder = Callable[[bytes, int], tuple[Any, int]]

# type -> (width, signed struct, unsigned struct); INT24 has no struct format.
_INT_FORMATS: dict[int, tuple[int, str, str]] = {
    ColumnType.TINY: (1, "<b", "<B"),
    ColumnType.SHORT: (2, "<h", "<H"),
    ColumnType.LONG: (4, "<i", "<I"),
    ColumnType.LONGLONG: (8, "<q", "<Q"),
}


def int_decoder(type_code: int, unsigned: bool) -> Decoder:
    if type_code == ColumnType.INT24:
        if unsigned:

            def dec_u24(buf: bytes, pos: int) -> tuple[int, int]:
                return int.from_bytes(buf[pos : pos + 3], "little"), pos + 3

            return dec_u24

        def dec_i24(buf: bytes, pos: int) -> tuple[int, int]:
            return int.from_bytes(buf[pos : pos + 3], "little", signed=True), pos + 3

        return dec_i24
    width, sfmt, ufmt = _INT_FORMATS[type_code]
    unpack = struct.Struct(ufmt if unsigned else sfmt).unpack_from

    def dec_int(buf: bytes, pos: int) -> tuple[int, int]:
        return unpack(buf, pos)[0], pos + width

    return dec_int


def int_width(type_code: int) -> int:
    return 3 if type_code == ColumnType.INT24 else _INT_FORMATS[type_code][0]


def float_decoder(type_code: int) -> Decoder:
    st = struct.Struct("<f" if type_code == ColumnType.FLOAT else "<d")
    unpack, size = st.unpack_from, st.size

    def dec_float(buf: bytes, pos: int) -> tuple[float, int]:
        return unpack(buf, pos)[0], pos + size

    return dec_float


def year_decoder() -> Decoder:
    def dec_year(buf: bytes, pos: int) -> tuple[int, int]:
        b = buf[pos]
        return (1900 + b if b else 0), pos + 1

    return dec_year


def bit_decoder(meta: int) -> Decoder:
    nbits = (meta >> 8) * 8 + (meta & 0xFF)
    size = (nbits + 7) // 8

    def dec_bit(buf: bytes, pos: int) -> tuple[int, int]:
        return int.from_bytes(buf[pos : pos + size], "big"), pos + size

    return dec_bit


def bit_length(meta: int) -> int:
    return (meta >> 8) * 8 + (meta & 0xFF)


_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
# Exact for every DECIMAL MySQL allows (65 digits): scaling never rounds under this context.
DECIMAL_CONTEXT = Context(prec=100)


def decimal_size(precision: int, scale: int) -> int:
    intg = precision - scale
    return (intg // 9) * 4 + _DIG2BYTES[intg % 9] + (scale // 9) * 4 + _DIG2BYTES[scale % 9]


def decimal_segments(precision: int, scale: int) -> list[tuple[int, int]]:
    """(bytes, digits) of each stored group, most significant first."""
    intg = precision - scale
    intg0, intg0x = divmod(intg, 9)
    frac0, frac0x = divmod(scale, 9)
    segs = [(_DIG2BYTES[intg0x], intg0x)] if intg0x else []
    segs += [(4, 9)] * (intg0 + frac0)
    if frac0x:
        segs.append((_DIG2BYTES[frac0x], frac0x))
    return segs


def decode_decimal(buf: bytes, pos: int, precision: int, scale: int) -> tuple[Decimal, int]:
    """MySQL's binary DECIMAL: sign bit flipped, negatives bitwise inverted, 9 digits per 4 bytes."""
    return decimal_decoder((precision << 8) | scale)(buf, pos)


def decimal_decoder(meta: int) -> Decoder:
    """One read of the whole value as an integer, then its base-10^9 groups by shifts."""
    precision, scale = meta >> 8, meta & 0xFF
    segs = decimal_segments(precision, scale)
    size = sum(n for n, _ in segs)
    if size == 0 or scale > precision:
        raise ValueError(f"DECIMAL({precision},{scale}) is not a valid column type")
    bits = size * 8
    top = 1 << (bits - 1)
    flip_negative = top ^ ((1 << bits) - 1)
    # from the least significant group up: (shift, mask, power of ten above it)
    plan = []
    shift = 0
    for nbytes, digits in reversed(segs):
        plan.append((shift, (1 << (nbytes * 8)) - 1, 10**digits))
        shift += nbytes * 8
    from_bytes = int.from_bytes

    def dec_decimal(buf: bytes, pos: int) -> tuple[Decimal, int]:
        end = pos + size
        if end > len(buf):
            raise ValueError(f"DECIMAL({precision},{scale}) needs {size} bytes")
        v = from_bytes(buf[pos:end], "big")
        negative = not v & top
        v ^= flip_negative if negative else top
        total, scale10 = 0, 1
        for sh, mask, p10 in plan:
            total += ((v >> sh) & mask) * scale10
            scale10 *= p10
        return Decimal(-total if negative else total).scaleb(-scale, DECIMAL_CONTEXT), end

    return dec_decimal


# ---- encoders: the exact inverse of each decoder above -------------------------------------------

Encoder = Callable[[Any], bytes]


def int_encoder(type_code: int, unsigned: bool) -> Encoder:
    width = int_width(type_code)

    def enc_int(v: int) -> bytes:
        return (v if unsigned or v >= 0 else v + (1 << width * 8)).to_bytes(width, "little")

    return enc_int


def float_encoder(type_code: int) -> Encoder:
    st = struct.Struct("<f" if type_code == ColumnType.FLOAT else "<d")
    return st.pack


def year_encoder() -> Encoder:
    return lambda v: bytes([v - 1900 if v else 0])


def bit_encoder(meta: int) -> Encoder:
    size = (bit_length(meta) + 7) // 8
    return lambda v: v.to_bytes(size, "big")


def encode_decimal(value: Decimal, precision: int, scale: int) -> bytes:
    segs = decimal_segments(precision, scale)
    size = sum(n for n, _ in segs)
    sign, digits, exp = value.as_tuple()
    if not isinstance(exp, int) or scale + exp < 0:
        raise ValueError(f"{value} is not a number with at most {scale} decimals")
    unscaled = int("".join(map(str, digits)) or "0") * 10 ** (scale + exp)
    v, shift = 0, 0
    rest = unscaled
    for nbytes, ndigits in reversed(segs):
        rest, group = divmod(rest, 10**ndigits)
        v |= group << shift
        shift += nbytes * 8
    if rest:
        raise ValueError(f"{value} does not fit DECIMAL({precision},{scale})")
    top = 1 << (size * 8 - 1)
    v = v ^ top if not sign or not unscaled else v ^ (top ^ ((1 << size * 8) - 1))  # MySQL has no -0
    return v.to_bytes(size, "big")


def decimal_encoder(meta: int) -> Encoder:
    precision, scale = meta >> 8, meta & 0xFF
    return lambda v: encode_decimal(v, precision, scale)
