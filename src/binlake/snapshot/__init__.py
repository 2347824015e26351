"""Snapshots of a live server's tables, as row changes that sit in the binlog's order.

A snapshot is read in chunks (primary-key ranges). Each chunk is one consistent read: ``START
TRANSACTION WITH CONSISTENT SNAPSHOT`` and, in the same transaction, the binlog position that
snapshot corresponds to (MariaDB's ``binlog_snapshot_file``/``binlog_snapshot_position``, exact
without any lock). A chunk's rows are therefore the table's state at that position, and they become
inserts whose ``OrderKey`` sits just before the first transaction that starts there. A sink that
keeps, per primary key, the change with the greatest order key (deletes as tombstones) then needs
nothing else: a binlog change after the chunk's position wins over the chunk's row, a change before
it loses to the row that already holds it — in whatever order chunks and binlog batches arrive, so
chunks may be read in parallel, at different times, and resumed after a kill.

Modules: ``catalog`` (the tables' layouts from ``information_schema``, equal to what the binlog's
full metadata says), ``textvalues`` (the text protocol's bytes -> the decoder's values),
``chunks`` (planning key ranges, reading one chunk at its position, its row changes).
"""
