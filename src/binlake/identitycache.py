"""Values computed once per object, found by the object's identity: the decoder reuses a table map
whose bytes did not change, and the change model one layout per table map, so identity is the
cheapest correct key (no hashing of a map's columns per event)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class IdentityCache(Generic[K, V]):
    """``make(key)`` once per key object. Bounded (``limit`` entries, then it starts over): a long
    stream meets ever new objects. Each key is kept alive with its value, so its id is not reused
    by another object while the entry lives."""

    def __init__(self, make: Callable[[K], V], limit: int = 4096) -> None:
        self.make, self.limit = make, limit
        self._by_id: dict[int, tuple[K, V]] = {}

    def __call__(self, key: K) -> V:
        hit = self._by_id.get(id(key))
        if hit is not None and hit[0] is key:
            return hit[1]
        if len(self._by_id) >= self.limit:
            self._by_id.clear()
        value = self.make(key)
        self._by_id[id(key)] = (key, value)
        return value
