"""The global binlog: N data nodes' binlogs merged into one stream ordered by commit timestamp
(PolarDB-X style; design/global-binlog.md). vtso: virtual TSOs; extract: pieces of transactions per
node; sorter: the per-node first-level sorter; merge: the global merge and transaction merge."""
