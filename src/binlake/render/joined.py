"""The compiled JSON and SQL row formatters (``render._fastjoin``): whether they are used, and the
slot of one value in their plan.

``jsonrow`` and ``sqlrow`` generate one Python function per layout writing a concatenation of
constants and value expressions; with the compiled module built, current and chosen
(``plan.use_compiled``; ``BINLAKE_PURE=1`` chooses the generated functions), they hand the same
concatenation to C as data (``Slot``s), with each column's generated expression as its ``slow``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from binlake.events.rows import ABSENT
from binlake.values import plan


class Slot(NamedTuple):
    """One value of the text: the constant before it, where it is (image, column), how C writes it
    (operation name, integer, object) and the generated expression of its column (``slow``)."""

    before: str
    image: int
    column: int
    op: str
    arg: int
    aux: Any
    slow: Callable[[Any], str]


def joined(
    slots: Sequence[Slot],
    tail: str,
    width: int,
    nimages: int,
    dialect: str,
    fallback: Callable[..., str],
    reject: type | None = None,
    reject_columns: Sequence[int] = (),
) -> Callable[..., str]:
    """The compiled formatter of this plan, which calls ``fallback`` (the generated function, same
    arguments) for the images it does not take; ``fallback`` itself when not compiled."""
    if not _COMPILED:
        return fallback
    assert _fastjoin is not None
    ops = _fastjoin.OPS
    return _fastjoin.Joined(  # type: ignore[no-any-return]
        [(s.before, s.image, s.column, ops[s.op], s.arg, s.aux, s.slow) for s in slots],
        tail,
        width,
        nimages,
        dialect,
        ABSENT,
        reject,
        tuple(reject_columns),
        fallback,
    )


try:  # optional: without a compiler at install time, the generated functions are the path
    from binlake.render import _fastjoin  # type: ignore[attr-defined]
except ImportError:
    _fastjoin = None
FAST_JOIN_INTERFACE = 2  # the compiled module's interface this source expects
if getattr(_fastjoin, "INTERFACE", None) != FAST_JOIN_INTERFACE:
    _fastjoin = None

_COMPILED = False


def _choose(compiled: bool) -> None:
    global _COMPILED
    _COMPILED = compiled and _fastjoin is not None


def compiled_joiner() -> bool:
    """Whether JSON and SQL row text made from now on is written by the compiled formatter."""
    return _COMPILED


_choose(not plan.PURE_FORCED)
plan.SWITCHES.append(_choose)
