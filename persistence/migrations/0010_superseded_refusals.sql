-- 0010_superseded_refusals: a decision the ledger refused is settled once a rebuild from the
-- ledger replaced the Redis that made it (the ledger won, ADR 0017): the rebuild stamps it, and
-- reconciliation lists it as superseded instead of leaving it for a person forever.

alter table ledger_alerts add column superseded_at_ms bigint;
