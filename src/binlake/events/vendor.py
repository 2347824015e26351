"""Vendor events: PolarDB-X sequence (80) and GCN (105), AliSQL consensus (101), Aurora padding (100),
and the encryption markers of MariaDB (164) and Percona (159) after which the file is unreadable."""

from __future__ import annotations

from dataclasses import dataclass

from binlake.events.base import DecodeState, EventHeader
from binlake.wire import Cursor

SEQUENCE_TYPES = {0: "INVALID", 1: "SNAPSHOT", 2: "COMMIT", 3: "HEARTBEAT"}
GCN_HAS_COMMIT_TSO = 0x04


@dataclass(slots=True)
class PolarxSequence:
    sequence_type: int
    sequence: int

    @property
    def is_commit(self) -> bool:
        return self.sequence_type == 2


def decode_polarx_sequence(buf: bytes, state: DecodeState, header: EventHeader) -> PolarxSequence:
    c = Cursor(buf)
    return PolarxSequence(c.u8(), c.u64())


@dataclass(slots=True)
class PolarxGcn:
    flag: int
    gcn: int

    @property
    def has_commit_tso(self) -> bool:
        return bool(self.flag & GCN_HAS_COMMIT_TSO)


def decode_polarx_gcn(buf: bytes, state: DecodeState, header: EventHeader) -> PolarxGcn:
    c = Cursor(buf)
    return PolarxGcn(c.u8(), c.u64())


@dataclass(slots=True)
class Opaque:
    """A vendor event whose body we carry as bytes (its meaning does not affect decoding)."""

    data: bytes


def decode_opaque(buf: bytes, state: DecodeState, header: EventHeader) -> Opaque:
    return Opaque(buf)


@dataclass(slots=True)
class StartEncryption:
    scheme: int
    key_version: int
    nonce: bytes


def decode_start_encryption(buf: bytes, state: DecodeState, header: EventHeader) -> StartEncryption:
    c = Cursor(buf)
    scheme = c.u8()
    key_version = c.u32()
    return StartEncryption(scheme, key_version, c.rest())


def encode_polarx_sequence(b: PolarxSequence) -> bytes:
    return bytes([b.sequence_type]) + b.sequence.to_bytes(8, "little")


def encode_polarx_gcn(b: PolarxGcn) -> bytes:
    return bytes([b.flag]) + b.gcn.to_bytes(8, "little")


def encode_opaque(b: Opaque) -> bytes:
    return b.data


def encode_start_encryption(b: StartEncryption) -> bytes:
    return bytes([b.scheme]) + b.key_version.to_bytes(4, "little") + b.nonce
