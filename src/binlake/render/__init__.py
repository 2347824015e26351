"""Output for people and tools: mysqlbinlog-style text and JSON lines."""
