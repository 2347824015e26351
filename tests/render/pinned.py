"""Output of the reading commands pinned by digest: ``binlake dump --format json`` (and the other
formats) of every corpus file and of deterministic generated series, recorded before a renderer was
rewritten for speed, so a faster renderer is held byte for byte to what users got before.

    PYTHONPATH=src python -m tests.render.pinned --record   # only when a change of output is intended
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from binlake.cli import main
from binlake.generate import generate
from tests.conftest import CORPUS, corpus_index

DIGESTS = Path(__file__).with_name("pinned_digests.json")
COMMANDS = {
    "json": ["dump", "--format", "json"],
    "text": ["dump", "--format", "text"],
    "sql": ["sql"],
    "flashback": ["sql", "--flashback"],
}
GENERATED = {"mysql80": 1_200_000, "mariadb": 800_000}  # flavor: bytes (deterministic series)


def run_cli(argv: list[str]) -> tuple[int, bytes]:
    """(exit status, stdout bytes) of ``binlake ARGV`` in this process (stderr discarded)."""
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape", write_through=True)
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        status = main(argv)
        out.flush()
    return status, raw.getvalue()


@contextlib.contextmanager
def cwd(path: Path) -> Iterator[None]:
    """File names print as given: run from the series' directory so digests do not depend on it."""
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def digest(status: int, out: bytes) -> str:
    return f"{status}:{hashlib.sha256(out).hexdigest()}:{len(out)}"


def corpus_files() -> list[str]:
    return sorted(r["path"] for r in corpus_index()["records"] if r.get("events"))


def corpus_digests(command: str) -> dict[str, str]:
    with cwd(CORPUS):
        return {p: digest(*run_cli([*COMMANDS[command], p])) for p in corpus_files()}


def generated_series(flavor: str, root: Path) -> Path:
    out = root / flavor
    if not out.exists():
        generate(out, flavor=flavor, target_bytes=GENERATED[flavor], max_file_size=GENERATED[flavor] // 3)
    return out


def generated_digests(command: str, root: Path) -> dict[str, str]:
    got = {}
    for flavor in GENERATED:
        series = generated_series(flavor, root)
        files = sorted(p.name for p in series.glob("*.0*"))
        with cwd(series):
            got[flavor] = digest(*run_cli([*COMMANDS[command], *files]))
    return got


def record(root: Path) -> None:
    data = {
        command: {"corpus": corpus_digests(command), "generated": generated_digests(command, root)}
        for command in COMMANDS
    }
    DIGESTS.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    import tempfile

    if sys.argv[1:] != ["--record"]:
        sys.exit(__doc__)
    with tempfile.TemporaryDirectory() as tmp:
        record(Path(tmp))
