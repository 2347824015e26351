"""The cli package's boundary: every command parses into frozen options (no Namespace past it), and
the commands that only read files import no Spark."""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from binlake.cli import build_parser, parse

# One valid command line per command (and per offsets action): a command added without one fails.
ARGV = {
    "dump": ["dump", "f1", "f2", "--database", "shop", "--schema", "s.sql", "--start-position", "4"],
    "sql": ["sql", "f1", "--flashback", "--type", "insert"],
    "stats": ["stats", "f1", "--top", "3"],
    "changes": ["changes", "dir", "--follow", "--poll", "1", "--table", "shop.orders", "--type", "delete"],
    "index": ["index", "dir"],
    "generate": ["generate", "out", "--size", "1MB"],
    "simulate-shards": ["simulate-shards", "out", "--nodes", "2"],
    "sync": ["sync", "dir", "--to", "delta:lake", "--table", "shop.*", "--stream"],
    "offsets show": ["offsets", "show", "--to", "delta:lake"],
    "offsets reset": ["offsets", "reset", "--to", "jdbc:postgresql://h/db", "--source", "dir"],
    "export": ["export", "--from", "delta:lake", "--to", "parquet:out"],
    "schema": ["schema", "dir", "--at", "binlog.000001:4", "--database", "shop"],
    "find-position": ["find-position", "dir", "--gtid-set", "0-1-5"],
    "mirror": ["mirror", "--to", "m", "--host", "db", "-P", "3307", "--no-ssl"],
    "tail": ["tail", "--gtid", "0-1-5", "--format", "json", "--non-blocking"],
    "merge": ["merge", "--node", "a", "--node", "b", "-o", "out", "--max-file-size", "1MB"],
    "demo": ["demo", "--workdir", "w"],
    "serve": ["serve", "out", "-P", "3310", "--password-file", "pw", "--max-connections", "4"],
}


def command_names() -> set[str]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    names = set(sub.choices) - {"offsets"}
    return names | {"offsets show", "offsets reset"}


def frozen_all_the_way(value: Any, path: str) -> None:
    """Options are frozen dataclasses, and so are the options they hold; no Namespace anywhere."""
    assert not isinstance(value, argparse.Namespace | list), path
    if dataclasses.is_dataclass(value) and type(value).__module__.startswith("binlake.cli"):
        assert type(value).__dataclass_params__.frozen, path  # type: ignore[attr-defined]
        for f in dataclasses.fields(value):
            frozen_all_the_way(getattr(value, f.name), f"{path}.{f.name}")


def test_every_command_has_an_example() -> None:
    assert set(ARGV) == command_names()


@pytest.mark.parametrize("name", sorted(ARGV))
def test_each_command_parses_into_frozen_options(name: str) -> None:
    command, options = parse(ARGV[name])
    assert dataclasses.is_dataclass(options)
    frozen_all_the_way(options, name)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(options, dataclasses.fields(options)[0].name, None)
    assert command.run.__module__.startswith("binlake.cli.")


def test_options_carry_what_was_given() -> None:
    _, dump = parse(ARGV["dump"])
    assert dump.read.files == ("f1", "f2") and dump.read.start_position == 4
    assert dump.read.selection.databases == ["shop"] and dump.read.schema.seed == "s.sql"
    _, mirror = parse(ARGV["mirror"])
    assert (mirror.to, mirror.server.host, mirror.server.port, mirror.server.no_ssl) == (
        "m",
        "db",
        3307,
        True,
    )
    assert mirror.server.command == "mirror"
    _, tail = parse(ARGV["tail"])
    assert (tail.server.gtid, tail.server.blocking, tail.format) == ("0-1-5", False, "json")
    _, merge = parse(ARGV["merge"])
    assert (merge.node, merge.max_file_size) == (("a", "b"), 10**6)
    _, reset = parse(ARGV["offsets reset"])
    assert (reset.action, reset.source, reset.target.to) == ("reset", "dir", "jdbc:postgresql://h/db")
    _, show = parse(ARGV["offsets show"])
    assert (show.action, show.source, show.empty_change_tables) == ("show", None, False)


def _modules_after(script: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def test_dump_imports_no_spark(corpus: Path) -> None:
    """``binlake dump`` (and the package's import) never loads Spark, Arrow or the sinks; it loads
    only its own command module (start-up time), and every command module together loads none
    of them either."""
    path = corpus / "mysql-server-8.0.39/std_data/replicated-bin.000001"
    loaded = _modules_after(
        "import json, sys, io, contextlib\nfrom binlake.cli import main\n"
        f"with contextlib.redirect_stdout(io.StringIO()):\n    assert main(['dump', {str(path)!r}]) == 0\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    assert "binlake.cli.reading" in loaded and "binlake.cli.sync" not in loaded
    every = _modules_after(
        "import json, sys\nfrom binlake.cli import build_parser\nbuild_parser()\nprint(json.dumps(sorted(sys.modules)))"
    )
    assert "binlake.cli.sync" in every and "binlake.cli.replication" in every
    for modules in (loaded, every):
        assert not [m for m in modules if m.split(".")[0] in ("pyspark", "py4j", "pyarrow", "deltalake")]
        assert not [m for m in modules if m.startswith("binlake.spark")]


@pytest.mark.parametrize("name", sorted(ARGV))
def test_a_command_line_parses_alike_with_only_its_command(name: str) -> None:
    """``main`` builds only the parser of the command its line names: the same options and help."""
    argv = ARGV[name]
    only, every = build_parser(argv), build_parser()
    assert vars(only.parse_args(argv)) == vars(every.parse_args(argv))

    def helps(p: argparse.ArgumentParser) -> str:
        sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
        return sub.choices[argv[0]].format_help()  # type: ignore[no-any-return]

    assert helps(only) == helps(every)
