"""binlake.credentials: option files as MySQL reads them, the password precedence, secrets from the
environment or a file, and redaction of URLs and messages."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from binlake.credentials import (
    ASK,
    CredentialsError,
    client_options,
    prompt_password,
    read_option_file,
    redact,
    redacted_url,
    resolve_password,
    secret_from,
)


def write(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def test_option_file_syntax(tmp_path: Path) -> None:
    cnf = write(
        tmp_path / "my.cnf",
        """
# a comment
; another
[mysqld]
password = server-side, not ours
[client]
user = repl
password = "p#ss w'rd"
host=db.example   # trailing comment
port = 3307
ssl_ca = /etc/ca.pem
loose-ssl-mode = verify_identity
socket = '/run/my sock'
skip-ssl
escaped = a\\sb\\\\c
[mysql]
user = not-read
""",
    )
    opts = read_option_file(cnf)
    assert opts == {
        "user": "repl",
        "password": "p#ss w'rd",
        "host": "db.example",
        "port": "3307",
        "ssl-ca": "/etc/ca.pem",
        "ssl-mode": "verify_identity",
        "socket": "/run/my sock",
        "skip-ssl": None,
        "escaped": "a b\\c",
    }


def test_later_groups_and_lines_win_and_includes_are_followed(tmp_path: Path) -> None:
    (tmp_path / "conf.d").mkdir()
    write(tmp_path / "conf.d" / "a.cnf", "[client]\nport=1\n")
    write(tmp_path / "conf.d" / "b.cnf", "[client]\nport=2\n")
    write(tmp_path / "conf.d" / "ignored.txt", "[client]\nport=9\n")
    write(tmp_path / "extra.cnf", "[binlake]\nuser=from-include\n")
    cnf = write(
        tmp_path / "my.cnf",
        "[binlake]\nuser=binlake-group\n[client]\nuser=client-group\nhost=h1\nhost=h2\n"
        "!includedir conf.d\n!include extra.cnf\n",
    )
    opts = read_option_file(cnf)
    assert opts["user"] == "from-include"  # [binlake] beats [client] wherever it stands
    assert opts["host"] == "h2" and opts["port"] == "2"
    assert read_option_file(cnf, groups=("client",))["user"] == "client-group"


def test_option_file_errors_and_world_writable_files(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(CredentialsError, match="cannot read the option file .*missing.cnf"):
        read_option_file(tmp_path / "missing.cnf")
    with pytest.raises(CredentialsError, match="line 2"):
        read_option_file(write(tmp_path / "bad.cnf", "[client]\n[oops\n"))
    open_to_all = write(tmp_path / "open.cnf", "[client]\nhost=attacker\n", mode=0o666)
    with caplog.at_level(logging.WARNING):
        assert read_option_file(open_to_all) == {}
    assert "world-writable" in caplog.text


def test_client_options_picks_the_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    assert client_options(home=home) == {}  # no ~/.my.cnf: no options, no error
    write(home / ".my.cnf", "[client]\nuser=homeuser\n")
    assert client_options(home=home) == {"user": "homeuser"}
    other = write(tmp_path / "other.cnf", "[client]\npassword=x\n")
    assert client_options(other, home=home) == {"password": "x"}  # --defaults-file replaces ~/.my.cnf
    assert client_options(other, no_defaults=True, home=home) == {}
    with pytest.raises(CredentialsError):
        client_options(tmp_path / "nope.cnf", home=home)


def test_password_precedence() -> None:
    env = {"MYSQL_PWD": "from-env"}
    asked: list[str] = []

    def prompt() -> str:
        asked.append("asked")
        return "typed"

    assert resolve_password("cli", options={"password": "file"}, environ=env, prompt=prompt) == "cli"
    assert resolve_password(ASK, options={"password": "file"}, environ=env, prompt=prompt) == "typed"
    assert resolve_password(None, options={"password": "file"}, environ=env, prompt=prompt) == "file"
    assert resolve_password(None, options={"password": ""}, environ=env, prompt=prompt) == ""
    assert resolve_password(None, options={"password": None}, environ=env, prompt=prompt) == "typed"
    assert resolve_password(None, options={"user": "u"}, environ=env, prompt=prompt) == "from-env"
    assert resolve_password(None, environ={}, prompt=prompt) == ""
    assert asked == ["asked", "asked"]


def test_prompt_needs_a_terminal() -> None:
    with pytest.raises(CredentialsError, match="stdin is not a terminal") as e:
        prompt_password(interactive=lambda: False, ask=lambda _: pytest.fail("asked without a tty"))
    assert "\n" not in str(e.value)
    assert prompt_password(interactive=lambda: True, ask=lambda what: f"answer to {what}") == (
        "answer to Enter password: "
    )


def test_secret_from_env_or_file(tmp_path: Path) -> None:
    env = {"DB_PW": "s3cret", "EMPTY": ""}
    assert secret_from(env="DB_PW", environ=env) == "s3cret"
    assert secret_from(env="EMPTY", environ=env) == ""
    assert secret_from(environ=env) is None
    with pytest.raises(CredentialsError, match="DB_PASS is not set"):
        secret_from(env="DB_PASS", environ=env)
    f = write(tmp_path / "pw", "line one\n")
    assert secret_from(file=f) == "line one"
    assert secret_from(file=write(tmp_path / "crlf", "x\r\n")) == "x"
    assert secret_from(file=write(tmp_path / "keep", " two \n\n")) == " two \n"  # only one newline goes
    with pytest.raises(CredentialsError, match="not both"):
        secret_from(env="DB_PW", file=f, environ=env)
    with pytest.raises(CredentialsError, match="cannot read the secret file") as e:
        secret_from(file=tmp_path / "absent")
    assert "s3cret" not in str(e.value)


def test_secret_from_reads_the_real_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BINLAKE_TEST_SECRET", "v")
    assert secret_from(env="BINLAKE_TEST_SECRET") == "v" and os.environ["BINLAKE_TEST_SECRET"] == "v"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("jdbc:postgresql://u:pw@h:5432/db?ssl=true", "jdbc:postgresql://u:***@h:5432/db?ssl=true"),
        ("mysql://u:p@ss@h/db", "mysql://u:***@h/db"),  # an unencoded @ in the password
        (
            "jdbc:mysql://h/db?user=u&password=pw&useSSL=true",
            "jdbc:mysql://h/db?user=u&password=***&useSSL=true",
        ),
        ("jdbc:postgresql://h/db?password=pw", "jdbc:postgresql://h/db?password=***"),
        (
            "jdbc:sqlserver://h:1433;databaseName=d;user=u;password=pw;encrypt=true",
            "jdbc:sqlserver://h:1433;databaseName=d;user=u;password=***;encrypt=true",
        ),
        ("jdbc:oracle:thin:scott/tiger@//h:1521/svc", "jdbc:oracle:thin:scott/***@//h:1521/svc"),
        ("?trustStorePassword=a&sslpassword=b&PWD=c", "?trustStorePassword=***&sslpassword=***&PWD=***"),
        ("{'user': 'u', 'password': 'p w'}", "{'user': 'u', 'password': '***'}"),
        ('{"password": "x\\"y", "n": 1}', '{"password": "***", "n": 1}'),
        ("connect failed (password=hunter2)", "connect failed (password=***)"),
        ("jdbc:postgresql://h/db?user=u", "jdbc:postgresql://h/db?user=u"),  # nothing secret: unchanged
        ("https://example.org/a:b@c", "https://example.org/a:b@c"),  # a path, not userinfo
    ],
)
def test_redact(text: str, expected: str) -> None:
    assert redact(text) == expected
    assert redacted_url(text) == expected
