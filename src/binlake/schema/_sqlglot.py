"""sqlglot, imported when a DDL statement is first parsed, not with the schema tracker.

Importing the DDL parser costs about 80 ms of CPU, a third of a command's start-up; a binlog
without DDL (most of a DML-heavy series) never needs it. The modules here write ``sqlglot.x`` and
``exp.X`` as usual (type checkers see the real modules); at run time these names are stand-ins that
import the module on their first attribute access and then hold its attributes themselves.
"""

from __future__ import annotations

import importlib
from typing import Any


class _OnFirstUse:
    """A module's stand-in: its first attribute access imports it (``load``) and copies its names."""

    def __init__(self, module: str, attribute: str | None = None) -> None:
        self._module = module
        self._attribute = attribute

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # copy, pickle, inspection: not a use of the parser
            raise AttributeError(name)
        module = importlib.import_module(self._module)
        import logging  # imported by sqlglot anyway; not by a command that never parses DDL

        logging.getLogger("sqlglot").setLevel(logging.ERROR)  # its "falling back to Command"
        # warnings are ours to report
        real = getattr(module, self._attribute) if self._attribute else module
        self.__dict__.update(vars(real))  # later accesses: plain instance attributes
        return getattr(real, name)

    def __repr__(self) -> str:
        return f"<{self._module} imported on first use>"


sqlglot: Any = _OnFirstUse("sqlglot")
exp: Any = _OnFirstUse("sqlglot", "exp")
