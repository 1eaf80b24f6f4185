"""Turning a chunk into a verified summary: summarisers, prompts, the fallback chain, verification."""
