-- 0018_presale_codes: presale access codes in the ledger (ADR 0049), so a rebuilt event sells
-- its presale with every code as it was and each code's uses those of the sales it holds.
-- Each code with its window and terms, as its batch added it (a code is never redefined);
-- and each hold that ended having spent a code, with how it ended (a sale keeps its use).
create table presale_codes (
  event_id text not null references events (event_id),
  code text not null,
  presale text not null,
  opens_at_ms bigint not null,
  closes_at_ms bigint not null check (closes_at_ms > opens_at_ms),
  uses integer not null check (uses >= 1),
  per_login integer not null check (per_login >= 0),
  expires_ms bigint not null,
  decision_id text not null,
  primary key (event_id, code)
);

create table presale_code_uses (
  event_id text not null references events (event_id),
  hold_id text not null,
  code text not null,
  login text not null,
  to_state text not null,
  decided_at_ms bigint not null,
  primary key (event_id, hold_id)
);
create index presale_code_uses_by_code on presale_code_uses (event_id, code);

-- A batch of codes is a decision of the event like any other (numbered, fenced, ADR 0017).
alter table decisions drop constraint decisions_kind_check;
alter table decisions add constraint decisions_kind_check
  check (kind in ('hold', 'charge', 'alert', 'policy', 'correction', 'event', 'queue',
                  'presale'));
