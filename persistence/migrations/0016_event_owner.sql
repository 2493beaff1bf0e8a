-- 0016_event_owner: the deployment (its Redis key prefix) whose writer mirrored an event into
-- the ledger. Only that deployment's ledger process notices the event lost or fenced and
-- rebuilds it; another one writing into the same database leaves it alone (ADR 0037). Rows
-- from before this column have '' (no owner known): every deployment may act on them, as
-- before.
alter table event_configs add column redis_prefix text not null default '';
