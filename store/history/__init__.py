"""A conversation's history as stored: identity and ingest, replies, revisions, rows already read."""
