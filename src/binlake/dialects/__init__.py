"""One module per SQL dialect binlake writes: how identifiers are quoted, how long they may be,
how a string becomes a literal where a bound parameter is impossible (DDL, generated scripts).

Values that reach a database at run time always go as bound parameters; these modules are for the
identifiers around them, which no driver can bind. Names are first made safe and injective by
``binlake.targetnames``; ``ident`` here only fits them to the dialect's length limit.
"""
