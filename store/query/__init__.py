"""The search language and its filters: parsed and validated alike whatever the backend."""
