-- 0014_order_parts: a part of an order given back (ADR 0043) is a charge of its own that
-- refunds some of its order's money, on its order's provider attempt. The ledger names the
-- charge it is a part of; an attempt still belongs to one charge, its order's, so the parts
-- (like orphan records) are not claims of ownership of the attempt.
alter table charges add column part_of text not null default '';

drop index charges_attempt;
create unique index charges_attempt on charges (attempt_id)
  where attempt_id <> '' and charge_id not like 'orphan/%' and part_of = '';

-- An order's parts, found from its winning charge (a buyer's orders say what they returned).
create index charges_parts on charges (event_id, part_of) where part_of <> '';
