"""Evaluation, replay and benchmarks for ctxproxy (not shipped in the wheel's runtime path)."""
