"""Column value codecs: one module per type family, and the decoder table that picks them."""

from binlake.values.columns import ColumnDef, column_decoder
from binlake.values.json_binary import Json, JsonOpaque
from binlake.values.temporal import MysqlDate, MysqlDateTime
from binlake.values.types import ColumnType

__all__ = ["ColumnDef", "ColumnType", "Json", "JsonOpaque", "MysqlDate", "MysqlDateTime", "column_decoder"]
