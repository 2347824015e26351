"""``binlake serve``: a directory of binlog files served over the MySQL replication protocol, so
replicas (``mariadb-binlog --read-from-remote-server``, ``binlake tail``, python-mysql-replication)
read it as if it were one server.

- ``events``: the events a dump thread makes up (fake ROTATE, heartbeat, the re-sent format event)
- ``directory``: the served files: listing, format events, complete ends, PREVIOUS_GTIDS
- ``dump``: one binlog dump, sans-I/O: file events as the protocol sends them, following growth
- ``queries``: the answers to what replicas ask before a dump (a table of statements)
- ``session``: one connection's protocol state machine, bytes in and bytes out
- ``server``: the sockets (one thread per connection)
"""
