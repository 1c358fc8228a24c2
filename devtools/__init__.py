"""Development tooling: the embedded PostgreSQL and Redis, and the `make run` server. Never imported in production."""
