"""The conversation store: the contract, the records, the tenant store both backends run, and the backends."""
