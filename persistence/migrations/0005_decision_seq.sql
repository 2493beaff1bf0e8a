-- 0005_decision_seq: every outbox record carries its event's decision number (1, 2, 3, ...).
-- Two different decisions with one number mean Redis went back in time (restarted from an older
-- snapshot) and numbered a new decision with a number the ledger already holds: refused here,
-- and the writer fences the event (ADR 0017). Records written before the number existed keep 0.

alter table decisions add column seq bigint not null default 0 check (seq >= 0);
create unique index decisions_seq on decisions (event_id, seq) where seq > 0;
