"""Durable ledger in PostgreSQL (asyncpg): migrations, write-behind worker, reconciliation."""
