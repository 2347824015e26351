"""binlake's optional compiled (Cython) modules: which are built, which are used, and one switch for all.

Each hot path has a pure Python reference beside it and a compiled module ``./dev setup`` builds when a
compiler is present. A module is used only when it imports AND declares the interface version the
source beside it expects (a build left from an older ``.pyx`` is ignored, not trusted), and only while
chosen: ``BINLAKE_PURE=1`` chooses the pure path at start-up and ``use_compiled`` switches every module
at once (tests and benchmarks hold the two paths equal with it). What a module does that changes no
result may use the built module whatever the choice (``globalbinlog.nodes.leave_out``: objects kept
out of the cycle collector; ``values.rowops``: the JSON reader the compiled row decoder calls).
"""

from __future__ import annotations

import importlib
import os
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

PURE_FORCED = os.environ.get("BINLAKE_PURE", "") not in ("", "0")

_wanted = not PURE_FORCED  # what ``use_compiled`` last chose; a module imported later follows it
_REGISTRY: list[OptionalModule] = []


def _load(name: str, interface: int) -> ModuleType | None:
    try:
        module = importlib.import_module(name)
    except ImportError:  # not built (no compiler at install time): the pure path
        return None
    except (ValueError, TypeError) as e:
        # built against another build of a module it cimports (Cython checks the layouts it shares:
        # "size changed", "wrong signature"): stale, as a wrong INTERFACE is
        warnings.warn(f"{name} is a stale build ({e}): the pure path is used; ./dev setup rebuilds it", stacklevel=3)
        return None
    return module if getattr(module, "INTERFACE", None) == interface else None


class OptionalModule:
    """One optional compiled module: ``built`` when it imports with the expected ``interface``,
    ``module`` when it is also chosen (else None: the caller takes its pure path).

    ``on_choose`` runs with ``module`` whenever the choice changes, for callers that keep what they
    take from it in a global of their own (a hot loop reads one global, not an attribute chain)."""

    def __init__(
        self, name: str, interface: int, on_choose: Callable[[ModuleType | None], Any] | None = None
    ) -> None:
        self.name = name
        self.interface = interface
        self.built = _load(name, interface)
        self.module: ModuleType | None = None
        self._on_choose = on_choose
        self.choose(_wanted)
        _REGISTRY.append(self)

    @property
    def chosen(self) -> bool:
        return self.module is not None

    def choose(self, on: bool) -> None:
        """Use the compiled module (when built) or the pure path, for work started from now on."""
        self.module = self.built if on else None
        if self._on_choose is not None:
            self._on_choose(self.module)


def use_compiled(on: bool) -> None:
    """Choose the compiled modules (those built) or the pure path everywhere, for what starts from now."""
    global _wanted
    _wanted = on
    for optional in _REGISTRY:
        optional.choose(on)
