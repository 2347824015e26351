"""The reading commands print today what they printed when ``pinned_digests.json`` was recorded
(before their renderers were rewritten for speed): every corpus file and two generated series, byte
for byte (see ``tests/render/pinned.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.render.pinned import COMMANDS, DIGESTS, corpus_digests, generated_digests

PINNED = json.loads(DIGESTS.read_text())


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_corpus_output_is_as_pinned(corpus: Path, command: str) -> None:
    got, want = corpus_digests(command), PINNED[command]["corpus"]
    assert got.keys() == want.keys()
    changed = [p for p in want if got[p] != want[p]]
    assert not changed, f"{len(changed)} file(s) print differently, first {changed[0]}"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_generated_output_is_as_pinned(tmp_path_factory: pytest.TempPathFactory, command: str) -> None:
    root = tmp_path_factory.getbasetemp() / "pinned-series"
    assert generated_digests(command, root) == PINNED[command]["generated"]
