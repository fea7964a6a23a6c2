"""Pure decisions as functions of a cluster snapshot and a clock. No I/O here."""
