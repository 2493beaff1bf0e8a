-- 0008_webhooks: merchant webhooks (ADR 0024). The merchant's endpoints, each with its own
-- signing secret and the notification types it wants; and one delivery per endpoint and
-- decision, written by the ledger writer in the transaction that mirrors the decision (engine/
-- webhooks.py says which decisions notify), sent at least once by the webhook sender.

create table webhook_endpoints (
  endpoint_id     text primary key,
  url             text not null,
  description     text not null default '',
  event_types     text[] not null check (cardinality(event_types) > 0),
  secret          text not null check (secret like 'whsec\_%'),
  -- The secret a rotation replaced still signs beside the new one until previous_until.
  previous_secret text not null default '',
  previous_until  timestamptz,
  enabled         boolean not null default true,
  disabled_reason text not null default '',
  created_at      timestamptz not null default now(),
  updated_at      timestamptz not null default now(),
  deleted_at      timestamptz  -- deleted endpoints keep their delivery log; nothing is sent
);

create table webhook_deliveries (
  delivery_id     bigserial primary key,
  endpoint_id     text not null references webhook_endpoints (endpoint_id),
  event_id        text not null,
  decision_id     text not null,
  message_id      text not null,  -- the webhook-id: the same on every attempt and replay
  event_type      text not null,
  body            text not null,  -- the exact bytes every attempt sends and signs
  status          text not null default 'pending'
    check (status in ('pending', 'delivered', 'failed')),
  attempts        integer not null default 0 check (attempts >= 0),
  created_at      timestamptz not null default now(),
  -- The maximum age is counted from here: the creation, or the last replay.
  window_from     timestamptz not null default now(),
  -- A pending delivery is due from here; a claimed one is leased until here (an attempt that
  -- never reports back, its sender killed, is due again once the lease passed).
  next_attempt_at timestamptz not null default now(),
  last_attempt_at timestamptz,
  last_status     integer,  -- the HTTP status of the last attempt; null: no answer
  last_error      text not null default '',
  delivered_at    timestamptz,
  -- One delivery per endpoint and decision, whatever the writer replays.
  unique (endpoint_id, event_id, decision_id)
);
create index webhook_deliveries_due on webhook_deliveries (next_attempt_at)
  where status = 'pending';
create index webhook_deliveries_log on webhook_deliveries (endpoint_id, delivery_id);
create index webhook_deliveries_failed on webhook_deliveries (endpoint_id, created_at)
  where status = 'failed';
