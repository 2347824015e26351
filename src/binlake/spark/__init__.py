"""binlake on Apache Spark: the binlog data source, the change log, and the apply to sinks."""
