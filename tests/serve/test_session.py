"""The protocol state machine without sockets: logins (right, wrong, switched plugin, TLS asked),
hostile bytes (oversized headers, garbage handshakes, malformed commands: an error, never an
exception or a buffer that grows with what the client claims), and the dump's start errors."""

from __future__ import annotations

import struct
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from binlake.replication.packets import (
    COM_BINLOG_DUMP,
    COM_BINLOG_DUMP_GTID,
    COM_QUERY,
    COM_QUIT,
    PacketReader,
    binlog_dump,
    frame,
    parse_err,
)
from binlake.serve import auth
from binlake.serve.directory import BinlogDirectory
from binlake.serve.session import ServeConfig, Session

PASSWORD = "pw"
SCRAMBLE = bytes(range(1, 21))


def response(user: str, token: bytes, plugin: str | None = auth.NATIVE, caps: int | None = None) -> bytes:
    """A HandshakeResponse41 as clients write it."""
    caps = caps if caps is not None else auth.SERVER_CAPABILITIES & ~auth.CLIENT_CONNECT_WITH_DB
    out = struct.pack("<IIB", caps, 1 << 24, 45) + b"\0" * 23 + user.encode() + b"\0"
    out += bytes([len(token)]) + token
    if plugin is not None:
        out += plugin.encode() + b"\0"
    return out


def session(tmp_path: Path, **config: object) -> Session:
    return Session(
        ServeConfig("repl", PASSWORD, **config),  # type: ignore[arg-type]
        BinlogDirectory(str(tmp_path)),
        scramble=SCRAMBLE,
    )


def replies(s: Session) -> list[bytes]:
    reader = PacketReader()
    reader.feed(s.data_to_send())
    return reader.payloads()


def logged_in(tmp_path: Path, **config: object) -> Session:
    s = session(tmp_path, **config)
    s.data_to_send()
    s.receive(frame(response("repl", auth.native_token(PASSWORD, SCRAMBLE)), 1))
    assert replies(s)[0][0] == 0 and s.authenticated
    return s


def test_greeting_offers_native_password_and_a_right_login_gets_ok(tmp_path: Path) -> None:
    s = session(tmp_path, version="5.7.44-binlake")
    (greet,) = replies(s)
    assert greet[0] == 10 and greet[1:].startswith(b"5.7.44-binlake\0")
    assert greet.endswith(b"mysql_native_password\0") and SCRAMBLE[:8] in greet and SCRAMBLE[8:] in greet
    s.receive(frame(response("repl", auth.native_token(PASSWORD, SCRAMBLE)), 1))
    (ok,) = replies(s)
    assert ok[0] == 0 and s.authenticated


def test_wrong_password_wrong_user_and_no_password_are_refused(tmp_path: Path) -> None:
    for user, token in (
        ("repl", auth.native_token("other", SCRAMBLE)),
        ("root", auth.native_token(PASSWORD, SCRAMBLE)),
        ("repl", b""),
        ("repl", b"x" * 19),
    ):
        s = session(tmp_path)
        s.data_to_send()
        s.receive(frame(response(user, token), 1))
        (err,) = replies(s)
        e = parse_err(err)
        assert e.code == 1045 and e.state == "28000" and f"'{user}'" in e.message and s.closed


def test_another_plugin_is_switched_to_native_password(tmp_path: Path) -> None:
    s = session(tmp_path)
    s.data_to_send()
    s.receive(frame(response("repl", b"\x01" * 32, plugin="caching_sha2_password"), 1))
    (switch,) = replies(s)
    assert switch == b"\xfemysql_native_password\0" + SCRAMBLE + b"\0"
    s.receive(frame(auth.native_token(PASSWORD, SCRAMBLE), 3))
    (ok,) = replies(s)
    assert ok[0] == 0 and s.authenticated
    # a client that cannot switch answers with a switch of its own: refused cleanly
    s = session(tmp_path)
    s.data_to_send()
    s.receive(frame(response("repl", b"", plugin="sha256_password"), 1))
    replies(s)
    s.receive(frame(b"\xfesha256_password\0", 3))
    assert parse_err(replies(s)[0]).code == 1251 and s.closed


def test_tls_request_and_old_protocols_are_refused(tmp_path: Path) -> None:
    s = session(tmp_path)
    s.data_to_send()
    s.receive(
        frame(struct.pack("<IIB", auth.CLIENT_PROTOCOL_41 | auth.CLIENT_SSL, 1 << 24, 45) + b"\0" * 23, 1)
    )
    err = parse_err(replies(s)[0])
    assert err.code == 1043 and "TLS" in err.message and s.closed
    s = session(tmp_path)
    s.data_to_send()
    s.receive(frame(response("repl", b"", caps=auth.CLIENT_SECURE_CONNECTION), 1))
    assert parse_err(replies(s)[0]).code == 1043 and s.closed


def test_an_oversized_packet_is_refused_from_its_header(tmp_path: Path) -> None:
    for s in (session(tmp_path), logged_in(tmp_path)):
        s.data_to_send()
        s.receive(b"\xff\xff\xff\x01" + b"A" * 1000)  # announces 16 MiB
        err = parse_err(replies(s)[0])
        assert err.code == 1153 and s.closed
        assert s._reader.buffered < 2000  # nothing waits for the announced 16 MiB
        s.receive(b"B" * 100_000)  # a closed session takes nothing more
        assert s._reader.buffered < 2000 and s.data_to_send() == b""


def test_a_payload_over_the_limit_in_several_packets_is_refused(tmp_path: Path) -> None:
    s = logged_in(tmp_path, max_packet=100)
    s.receive(frame(bytes([COM_QUERY]) + b"SELECT 1" + b" " * 200, 0))
    assert parse_err(replies(s)[0]).code == 1153 and s.closed


@given(st.lists(st.binary(min_size=0, max_size=200), max_size=6))
@settings(max_examples=300, deadline=None)
def test_garbage_before_login_is_an_error_never_an_exception(chunks: list[bytes]) -> None:
    s = Session(
        ServeConfig("repl", PASSWORD), BinlogDirectory("/nonexistent-binlake-serve"), scramble=SCRAMBLE
    )
    s.data_to_send()
    for chunk in chunks:
        s.receive(chunk)
    for payload in replies(s):
        assert payload[0] == 0xFF or payload[:1] == b"\xfe"  # an error, or an auth switch
    assert not s.authenticated


@given(st.binary(min_size=1, max_size=300))
@settings(max_examples=300, deadline=None)
def test_any_command_payload_gets_an_answer(payload: bytes) -> None:
    s = Session(
        ServeConfig("repl", PASSWORD), BinlogDirectory("/nonexistent-binlake-serve"), scramble=SCRAMBLE
    )
    s.data_to_send()
    s.receive(frame(response("repl", auth.native_token(PASSWORD, SCRAMBLE)), 1))
    s.data_to_send()
    s.receive(frame(payload, 0))
    out = replies(s)
    if payload[0] == COM_QUIT:
        assert out == [] and s.closed
    else:
        assert out  # OK, a result set or an ERR; a dump of a missing directory is an ERR too
        assert out[0][0] in (0x00, 0xFF) or payload[0] == COM_QUERY


def test_malformed_dump_commands_are_errors_and_the_connection_goes_on(tmp_path: Path) -> None:
    s = logged_in(tmp_path)
    for bad in (
        bytes([COM_BINLOG_DUMP]) + b"\x04\0",
        bytes([COM_BINLOG_DUMP_GTID]) + struct.pack("<HII", 0, 1, 1 << 30) + b"x",
        bytes([COM_BINLOG_DUMP_GTID]) + struct.pack("<HII", 0, 1, 0) + struct.pack("<QI", 4, 1 << 30),
        bytes([COM_BINLOG_DUMP_GTID]) + struct.pack("<HII", 0, 1, 0) + struct.pack("<QI", 4, 8) + b"\xff" * 8,
    ):
        s.receive(frame(bad, 0))
        assert parse_err(replies(s)[0]).code == 1835 and not s.closed
    s.receive(frame(bytes([COM_QUERY]) + b"SELECT @@version_comment LIMIT 1", 0))
    assert replies(s)[-1][0] == 0xFE  # a result set's closing EOF


def test_a_dump_of_a_missing_file_is_error_1236(global_binlog: Path) -> None:
    s = logged_in(global_binlog)
    s.receive(frame(binlog_dump(7, "binlog.000042", 4), 0))
    err = parse_err(replies(s)[0])
    assert err.code == 1236 and "Could not find first log file" in err.message and s.closed


def test_a_checksum_unaware_replica_is_refused_crc32_files(global_binlog: Path) -> None:
    s = logged_in(global_binlog)
    s.receive(frame(binlog_dump(7, "binlog.000001", 4, flags=1), 0))
    assert s.dumping
    s.pump(0.0)
    err = parse_err(replies(s)[-1])
    assert err.code == 1236 and "checksum" in err.message and s.closed
