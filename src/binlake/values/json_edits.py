"""A JSON document after MySQL's partial-update edits (PARTIAL_JSON's REPLACE / INSERT / REMOVE at a
path), applied as a MySQL replica applies them (``apply_json_diffs``; docs/research/partial-json-
apply.md): in order on one document, each path walked over object members and array cells only,
``last`` and out-of-range indexes taken against the document as it stands at that edit, keys kept in
MySQL's order (length, then bytes). An edit MySQL would reject gives None: the caller keeps the edits,
which a sink refuses — never a guess."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable
from typing import Any, NamedTuple

from binlake.values.json_binary import Json

# a path as the server writes one (``Json_path::to_string``): ``$`` then ``.name`` (an identifier),
# ``."quoted"`` (JSON string escapes) or ``[N]`` / ``[last]`` / ``[last-N]``; nothing else
_IDENT = re.compile(r"[^.\[\]\"\s*]+")
_CELL = re.compile(r"\[(?:(\d+)|last(?:-(\d+))?)\]")
_STRING = json.JSONDecoder()


class Cell(NamedTuple):
    """An array leg: ``[n]``, or ``[last-n]`` (``from_end``; ``[last]`` is ``last-0``)."""

    n: int
    from_end: bool


Leg = str | Cell  # an object member's name, or an array cell


def parse_path(path: str) -> list[Leg] | None:
    """The legs of ``path``; None when it is not a path the server writes."""
    if not path.startswith("$"):
        return None
    legs: list[Leg] = []
    i, n = 1, len(path)
    while i < n:
        if path[i] == ".":
            if path.startswith('"', i + 1):
                try:
                    name, i = _STRING.raw_decode(path, i + 1)
                except ValueError:
                    return None
                legs.append(name)
                continue
            m = _IDENT.match(path, i + 1)
            if m is None:
                return None
            legs.append(m.group())
            i = m.end()
        elif path[i] == "[":
            m = _CELL.match(path, i)
            if m is None:
                return None
            index, back = m.groups()
            legs.append(Cell(int(index), False) if index is not None else Cell(int(back or 0), True))
            i = m.end()
        else:
            return None
    return legs


def _position(leg: Cell, length: int) -> tuple[int, bool]:
    """(position, within bounds) of a cell leg in an array of ``length`` (``Json_array_index``)."""
    n = leg.n
    if leg.from_end:
        return (length - 1 - n if n < length else 0), n < length
    return min(n, length), n < length


def _seek(doc: Any, legs: list[Leg]) -> tuple[bool, Any]:
    """(found, value) at ``legs``: members of objects, cells of arrays within bounds; no auto-wrap."""
    for leg in legs:
        if isinstance(leg, str):
            if not isinstance(doc, dict) or leg not in doc:
                return False, None
            doc = doc[leg]
        else:
            if not isinstance(doc, list):
                return False, None
            at, inside = _position(leg, len(doc))
            if not inside:
                return False, None
            doc = doc[at]
    return True, doc


def _ordered(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with its keys in MySQL's order: shorter first, then by their bytes."""
    return {k: obj[k] for k in sorted(obj, key=_key_bytes)}


def _key_bytes(key: str) -> tuple[int, bytes]:
    b = key.encode("utf-8", "surrogateescape")  # a key's bytes as stored, valid UTF-8 or not
    return len(b), b


def _apply(doc: Any, operation: str, legs: list[Leg], value: Any) -> Any | None:
    """``doc`` after one edit (changed in place where it can be; the root returned), None: rejected."""
    if not legs:  # the root is never an edit's path (a replaced root is logged whole)
        return None
    found, parent = _seek(doc, legs[:-1])
    if not found:
        return None
    leg = legs[-1]
    if isinstance(leg, str):
        if not isinstance(parent, dict):
            return None
        present = leg in parent
        if operation == "REPLACE" and present:
            parent[leg] = value
        elif operation == "INSERT" and not present:
            parent[leg] = value
            ordered = _ordered(parent)
            parent.clear()
            parent.update(ordered)
        elif operation == "REMOVE" and present:
            del parent[leg]
        else:
            return None
        return doc
    if not isinstance(parent, list):
        return None
    at, inside = _position(leg, len(parent))
    if operation == "REPLACE" and inside:
        parent[at] = value
    elif operation == "INSERT":
        parent.insert(at, value)
    elif operation == "REMOVE" and inside:
        del parent[at]
    else:
        return None
    return doc


def apply_edits(before: Json, edits: Iterable[tuple[str, str, Any]]) -> Json | None:
    """``before`` after ``edits`` ((operation, path, value) in the order logged); None when an edit
    cannot be applied as MySQL applies it (the document is then not known)."""
    doc = copy.deepcopy(before.value)
    for operation, path, value in edits:
        legs = parse_path(path)
        if legs is None:
            return None
        try:
            doc = _apply(doc, operation, legs, copy.deepcopy(value))
        except (TypeError, ValueError):  # a key that does not sort (not text): not a document MySQL wrote
            return None
        if doc is None:
            return None
    return Json(doc)
