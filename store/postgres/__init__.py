"""The PostgreSQL backend, shared by replicas: one connection, its migrations and tsvector search."""
