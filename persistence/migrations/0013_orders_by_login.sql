-- 0013_orders_by_login: a buyer's orders, newest first (GET /v1/me/orders, ADR 0042): the
-- confirmed holds of one login, read by the API from the ledger.

create index holds_by_login on holds (login, decided_at_ms desc, hold_id desc);
