"""A server URL on the command line: what it names, and the mistakes refused in one line."""

from __future__ import annotations

import pytest

from binlake.cli.common import UsageError
from binlake.cli.serverurl import is_server_url, server_from_url


@pytest.fixture(autouse=True)
def no_option_files(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/nonexistent")
    monkeypatch.delenv("MYSQL_PWD", raising=False)


def test_what_a_url_names() -> None:
    server, dbs, extra = server_from_url(
        "mysql://cdc%40ops@db1.example:3307/shop,x%2Ay%23,%60q%60?socket=/run/my+sock&chunk-rows=10",
        frozenset({"chunk-rows"}),
    )
    assert (server.user, server.host, server.port) == ("cdc@ops", "db1.example", 3307)
    assert server.unix_socket == "/run/my+sock"  # a + is a +, not a space
    assert dbs == ["shop", "x*y#", "`q`"]
    assert extra == {"chunk-rows": "10"}
    assert is_server_url("mariadb://h/") and not is_server_url("/var/lib/mysql")


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("mysql://root:pw@h/db", "holds a password"),
        ("mysql://root@h/my#db", "'#' ends a URL's path"),
        ("mysql://root@h/db?ssl-mode=REQUIRED&ssl-mode=DISABLED", "given twice"),
        ("mysql://root@h/db?chunk-rows=5", "unknown URL parameter(s) chunk-rows"),
        ("mysql://root@h/db?ssl-mode", "has no value"),
        ("mysql://root@h/db?ssl-mode=SOMETIMES", "SOMETIMES"),
    ],
)
def test_mistakes_are_refused(url: str, said: str) -> None:
    with pytest.raises(UsageError, match=None) as e:
        server_from_url(url)
    assert said in str(e.value)
