"""The merge's node reader (``globalbinlog/nodes.py``) gives what the general reader and grouper give,
in everything the merge reads of a transaction, on the simulator's nodes (every TSO carrier, several
files, restarts at transaction ends), on a last file cut at any byte (it hands over) and on every
file of the real corpus (other flavours and damage hand over, errors included) — with the compiled
loop (``_fastnodes``, the envelope's XA statements) and with the pure one, the reference."""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from binlake import decoder as decoder_module
from binlake import native
from binlake.errors import BinlogError
from binlake.events.control import XaPrepare
from binlake.events.query import Query
from binlake.events.vendor import PolarxGcn, PolarxSequence
from binlake.globalbinlog import nodes as nodes_module
from binlake.globalbinlog.nodes import general_transactions, node_transactions
from binlake.globalbinlog.sorter import _body
from binlake.globalbinlog.spill import is_body
from binlake.series import BinlogSeries
from binlake.shardsim import CARRIERS, simulate
from binlake.txn import DDL, Transaction
from tests.conftest import corpus_index

FIELDS = (
    "file_seq", "source", "start", "end", "end_source", "kind", "server_id", "xid", "xa_id",
    "first_header_ts", "commit_header_ts", "commit_exec_time", "tables", "began", "standalone",
)  # fmt: skip
_SORTER_READS = (XaPrepare, PolarxGcn, PolarxSequence)


def _tso_query(b: Any) -> bool:
    return isinstance(b, Query) and any(
        b.status.get(k) is not None for k in ("lizard_commit_gcn", "lizard_prepare_gcn")
    )


def _view(t: Transaction, general: bool) -> tuple[Any, ...]:
    """What the merge reads of a transaction: its fields, the events the sorter looks at, the body."""
    control = [
        (e.offset, e.body) for e in t.events if isinstance(e.body, _SORTER_READS) or _tso_query(e.body)
    ]
    body = [e for e in t.events if is_body(e, t.kind == DDL)] if general else list(_body(t))
    return tuple(getattr(t, f) for f in FIELDS), control, [(e.offset, e.body) for e in body]


def _outcome(read: Any) -> tuple[list[Any], str | None]:
    got: list[Any] = []
    try:
        for t in read:
            got.append(t)
    except BinlogError as e:
        return got, f"{type(e).__name__}: {e}"
    return got, None


@pytest.fixture(autouse=True, params=["compiled", "pure"])
def path(request: pytest.FixtureRequest) -> Any:
    """Each test with the compiled node loop and envelope, then with the pure path."""
    on = request.param == "compiled"
    if on and (decoder_module.ENVELOPE.built is None or nodes_module.NODE_LOOP.built is None):
        pytest.skip("the compiled node loop is not built (./dev setup)")
    native.use_compiled(on)
    try:
        yield request.param
    finally:
        native.use_compiled(True)


def test_the_compiled_loop_is_current() -> None:
    """A build older than its .pyx is not used: the tests would then check the pure path twice."""
    if nodes_module.NODE_LOOP.built is None:
        pytest.skip("not built")
    assert nodes_module.NODE_LOOP.built.INTERFACE == nodes_module.NODE_LOOP.interface


def _same(files: list[Path], start: tuple[int, int] | None = None, require_fde: bool = True) -> int:
    fast, fast_err = _outcome(node_transactions(files, require_fde=require_fde, start=start))
    if files[-1].stat().st_size < 4:  # just created: both wait for it
        files = files[:-1]
    series = BinlogSeries.open(*files)
    general, general_err = _outcome(general_transactions(series, require_fde, start))
    assert fast_err == general_err
    assert [_view(t, False) for t in fast] == [_view(t, True) for t in general]
    return len(fast)


@pytest.fixture(scope="module", params=CARRIERS)
def nodes(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> list[list[Path]]:
    root = tmp_path_factory.mktemp(request.param)
    return simulate(
        root, seed=5, nodes=3, transactions=150, carrier=request.param, max_file_size=12_000
    ).node_files


def test_simulated_nodes_from_the_start_and_from_transaction_ends(nodes: list[list[Path]]) -> None:
    for files in nodes:
        assert len(files) > 1 and _same(files) > 50
        txns = list(node_transactions(files))
        for t in random.Random(3).sample(txns, 4):
            _same(files, start=(t.file_seq, t.end))


def test_a_last_file_cut_anywhere_hands_over(nodes: list[list[Path]], tmp_path: Path) -> None:
    files = nodes[0]
    data = files[-1].read_bytes()
    rng = random.Random(7)
    for cut in [0, 3, 4, 30, *rng.sample(range(5, len(data)), 12)]:
        d = tmp_path / str(cut)
        d.mkdir()
        copies = [Path(shutil.copy(f, d / f.name)) for f in files]
        copies[-1].write_bytes(data[:cut])
        _same(copies)


def test_every_corpus_file(corpus: Path) -> None:
    for record in corpus_index()["records"]:
        path = corpus / record["path"]
        if path.exists():
            _same([path], require_fde=record.get("first_event_type") == 15)
