"""What the model costs: the price table, metering each call into the ledger, spending caps."""
