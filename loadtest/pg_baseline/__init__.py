"""The PostgreSQL-only baseline: the claim endpoint a team would build without Redis, behind the
same HTTP layer (server), its claim and its SQL."""
