"""Optional compiled modules: a stale or missing build is never used, and one switch chooses them all."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from types import ModuleType

import pytest

from binlake import decoder, native
from binlake.render import joined, rowtext
from binlake.values import plan


def _unregistered(name: str, interface: int) -> native.OptionalModule:
    optional = native.OptionalModule(name, interface)
    native._REGISTRY.remove(optional)
    return optional


def test_a_build_with_another_interface_is_not_used() -> None:
    """A .so left from an older .pyx declares an older INTERFACE: it counts as not built."""
    if decoder.ENVELOPE.built is None:
        pytest.skip("the compiled envelope is not built (./dev setup)")
    stale = _unregistered("binlake.events._fastenv", decoder.ENVELOPE.interface + 1000)
    assert stale.built is None and stale.module is None and not stale.chosen


def test_a_module_that_does_not_import_is_not_built() -> None:
    missing = _unregistered("binlake.values._no_such_module", 1)
    assert missing.built is None
    missing.choose(True)
    assert not missing.chosen


@pytest.mark.parametrize("error", [ValueError("size changed"), TypeError("wrong signature")])
def test_a_build_cimporting_another_build_of_a_module_is_stale(
    error: Exception, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cython refuses a module built against another build of one it cimports: the pure path."""

    def refuses(name: str) -> ModuleType:
        raise error

    monkeypatch.setattr(native.importlib, "import_module", refuses)
    with pytest.warns(UserWarning, match="stale build"):
        optional = _unregistered("binlake.globalbinlog._fastnodes", 3)
    assert optional.built is None


@pytest.fixture
def fake() -> Iterator[ModuleType]:
    """A module standing in for a compiled one (importable, INTERFACE 7)."""
    module = ModuleType("binlake_fake_compiled")
    module.INTERFACE = 7  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    yield module
    del sys.modules[module.__name__]


def test_use_compiled_switches_every_module_and_their_hooks(fake: ModuleType) -> None:
    seen: list[ModuleType | None] = []
    probe = native.OptionalModule(fake.__name__, 7, seen.append)
    assert probe.built is fake and seen == [None if native.PURE_FORCED else fake]
    try:
        native.use_compiled(False)
        assert not probe.chosen and seen[-1] is None
        assert plan.compile_rows_decoder is plan.compile_pure_rows_decoder and plan.rows_header is None
        assert not decoder.ENVELOPE.chosen and decoder._FAST is None
        assert not rowtext.FORMATTER.chosen and not joined.FORMATTER.chosen
        native.use_compiled(True)
        assert probe.chosen and seen[-1] is fake
        for optional in (plan.ROWS, decoder.ENVELOPE, rowtext.FORMATTER, joined.FORMATTER):
            assert optional.chosen == (optional.built is not None)
        assert (decoder._FAST is not None) == (decoder.ENVELOPE.built is not None)
    finally:
        native._REGISTRY.remove(probe)
        native.use_compiled(not native.PURE_FORCED)


def test_a_module_imported_after_the_switch_follows_it(fake: ModuleType) -> None:
    native.use_compiled(False)
    try:
        follower = native.OptionalModule(fake.__name__, 7)
        native._REGISTRY.remove(follower)
        assert follower.built is fake and follower.module is None  # the last switch chose pure
    finally:
        native.use_compiled(not native.PURE_FORCED)


def test_binlake_pure_chooses_the_pure_path_in_a_fresh_process() -> None:
    if decoder.ENVELOPE.built is None or plan.ROWS.built is None:
        pytest.skip("the compiled modules are not built (./dev setup): nothing to choose against")
    code = (
        "from binlake import decoder, native; from binlake.values import plan;"
        "print(native.PURE_FORCED, decoder.ENVELOPE.built is not None, plan.ROWS.built is not None,"
        " decoder.ENVELOPE.chosen, plan.ROWS.chosen, decoder._FAST is None)"
    )
    env = {"BINLAKE_PURE": "1", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    # built, and not chosen
    assert out.stdout.split() == ["True", "True", "True", "False", "False", "True"]
