"""Steps of the numbered migrations that both backends run (data rewritten, not only schema)."""
