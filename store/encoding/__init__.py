"""How a message is encoded, read and hashed: exact JSON, its text, the hash chain, the forwarded log."""
