"""A served directory that grows while replicas follow it, heartbeats while it is idle, and what
the socket layer does with hostile or idle clients and too many connections."""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pymysql
import pytest

from binlake.events.types import EventType
from binlake.replication.client import FilePosition, ReplicaClient, ServerAddress
from binlake.replication.packets import PacketReader, parse_err
from binlake.replication.stream import StreamEvent
from binlake.serve.server import Limits

from .conftest import PASSWORD, USER, needs_mariadb_binlog, serving
from .test_clients import _key, file_transactions


def _write_index(directory: Path, names: list[str]) -> None:
    tmp = directory / "binlog.index.tmp"
    tmp.write_text("".join(f"./{n}\n" for n in names))
    tmp.rename(directory / "binlog.index")


def _grow(source: Path, target: Path, pause: float) -> None:
    """Copy the series into ``target`` as a writer would: each file appended in pieces cut anywhere
    (inside headers and events), a new file named in the index once its first bytes exist."""
    files = sorted(source.glob("binlog.0*"))
    names: list[str] = []
    for f in files:
        data = f.read_bytes()
        cuts = [0, 3, 30, 200, 5_000, 5_011, 17_777, len(data) // 2, len(data) - 7, len(data)]
        cuts = sorted({min(c, len(data)) for c in cuts})
        have = (target / f.name).stat().st_size if (target / f.name).exists() else 0
        cuts = [have] + [c for c in cuts if c > have]
        with open(target / f.name, "ab") as out:
            for a, b in zip(cuts, cuts[1:], strict=False):
                out.write(data[a:b])
                out.flush()
                if not names or names[-1] != f.name:
                    names.append(f.name)
                    _write_index(target, names)
                time.sleep(pause)


def test_a_replica_follows_the_directory_as_it_grows(global_binlog: Path, tmp_path: Path) -> None:
    expected = file_transactions(global_binlog)
    live = tmp_path / "live"
    live.mkdir()
    first = sorted(global_binlog.glob("binlog.0*"))[0]
    (live / first.name).write_bytes(first.read_bytes()[:2_000])  # a file being written
    _write_index(live, [first.name])
    got: list[tuple[object, ...]] = []
    heartbeats = 0
    errors: list[BaseException] = []
    with serving(live) as port:
        client = ReplicaClient(
            ServerAddress("127.0.0.1", port, USER, PASSWORD, ssl_disabled=True),
            FilePosition(first.name),
            heartbeat=0.2,
            reconnect=False,
        )

        def follow() -> None:
            nonlocal heartbeats
            try:
                for item in client.events():
                    if isinstance(item, StreamEvent) and item.event.header.type_code == EventType.HEARTBEAT:
                        heartbeats += 1
                    if client.stream is not None:
                        got.extend(_key(t) for t in client.stream.take_transactions())
            except Exception as e:  # the connection closed at the end of the test
                errors.append(e)

        reader = threading.Thread(target=follow, daemon=True)
        reader.start()
        time.sleep(1.0)  # idle: heartbeats come
        assert heartbeats >= 2
        _grow(global_binlog, live, pause=0.05)
        deadline = time.monotonic() + 30
        while len(got) < len(expected) and time.monotonic() < deadline:
            time.sleep(0.1)
        client.close()
        reader.join(10)
    assert got == expected


@needs_mariadb_binlog
def test_mariadb_binlog_stop_never_sees_a_new_file(global_binlog: Path, tmp_path: Path) -> None:
    files = sorted(global_binlog.glob("binlog.0*"))
    live = tmp_path / "live"
    live.mkdir()
    shutil.copy(files[0], live / files[0].name)
    _write_index(live, [files[0].name])
    out_file = tmp_path / "out.txt"
    with serving(live) as port, open(out_file, "w") as sink:
        proc = subprocess.Popen(
            ["mariadb-binlog", "-R", "--host", "127.0.0.1", "--port", str(port), "--user", USER,
             f"--password={PASSWORD}", "--stop-never", "--to-last-log", "-vv", files[0].name],
            stdout=sink, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            time.sleep(1.0)
            shutil.copy(files[1], live / files[1].name)
            _write_index(live, [files[0].name, files[1].name])
            time.sleep(1.5)
        finally:
            proc.terminate()
            proc.communicate(timeout=10)
    out = out_file.read_text()
    local = subprocess.run(
        ["mariadb-binlog", "-vv", *map(str, files[:2])], capture_output=True, text=True, check=True
    )
    assert [x for x in out.splitlines() if x.startswith("###")] == [
        x for x in local.stdout.splitlines() if x.startswith("###")
    ]


def _read_reply(sock: socket.socket) -> list[bytes]:
    reader = PacketReader()
    sock.settimeout(5)
    while True:
        data = sock.recv(1 << 16)
        if not data:
            return reader.payloads()
        reader.feed(data)
        got = reader.payloads()
        if got:
            return got


def test_an_oversized_packet_gets_an_error_and_the_server_goes_on(global_binlog: Path) -> None:
    with serving(global_binlog) as port:
        with socket.create_connection(("127.0.0.1", port)) as s:
            assert _read_reply(s)[0][0] == 10  # the greeting
            s.sendall(b"\xff\xff\xff\x01" + b"\0" * 4096)
            err = parse_err(_read_reply(s)[0])
            assert err.code == 1153
            s.settimeout(5)
            assert s.recv(10) == b""  # closed
        pymysql.connect(host="127.0.0.1", port=port, user=USER, password=PASSWORD).close()


def test_a_silent_client_is_dropped_and_extra_connections_are_refused(global_binlog: Path) -> None:
    limits = Limits(handshake_timeout=0.5, poll_interval=0.05, max_connections=1)
    with serving(global_binlog, limits) as port:
        with socket.create_connection(("127.0.0.1", port)) as s:
            assert _read_reply(s)[0][0] == 10
            with socket.create_connection(("127.0.0.1", port)) as second:
                assert parse_err(_read_reply(second)[0]).code == 1040
            start = time.monotonic()
            s.settimeout(5)
            assert s.recv(10) == b""  # said nothing: dropped after the handshake timeout
            assert time.monotonic() - start < 3
        time.sleep(0.2)
        with pytest.raises(pymysql.err.OperationalError) as err:
            pymysql.connect(host="127.0.0.1", port=port, user=USER, password="bad")
        assert err.value.args[0] == 1045
