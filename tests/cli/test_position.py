"""``binlake index`` on a live directory (cli/position.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from binlake.cli import main

FIRST, SECOND = (f"mysql-server-8.0.39/std_data/replicated-bin.00000{n}" for n in (1, 2))


@pytest.mark.parametrize("cut", [672, 690], ids=["between-events", "inside-an-event"])
def test_index_of_a_directory_whose_last_file_is_being_written(
    corpus: Path, tmp_path: Path, capsys: Any, cut: int
) -> None:
    """Newcomer: `binlake index DIR` where DIR is a copy of replicated-bin.00000{1,2} with the second
    file cut as a live server's active file is. Cut between two events of a transaction it lists both
    files; cut inside an event (18 bytes of a header, at 690) it printed no table at all, only
    `binlake: error: …replicated-bin.000002, offset 672: incomplete tail …` and exit 2 — though
    `find-position` on the same directory answers, with a note, and the README's header-only scan is
    the same for both (`find-position`, `index`). A directory of a running server is what index is
    for: it should list every file, the active one up to its complete part."""
    live = tmp_path / "live"
    live.mkdir()
    (live / "replicated-bin.000001").write_bytes((corpus / FIRST).read_bytes())
    (live / "replicated-bin.000002").write_bytes((corpus / SECOND).read_bytes()[:cut])
    assert main(["find-position", "--datetime", "2030-01-01 00:00:00", str(live)]) == 0
    capsys.readouterr()
    rc = main(["index", str(live)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "replicated-bin.000001" in out and "replicated-bin.000002" in out
    if cut == 690:  # and says where the active file was cut
        assert "ends in an event cut short at offset 672" in err
