"""Schema history: column names and types as of every position (DDL replayed with sqlglot)."""

from binlake.schema.history import SchemaHistory
from binlake.schema.tracker import SchemaMismatchError, SchemaTracker

__all__ = ["SchemaHistory", "SchemaMismatchError", "SchemaTracker"]
