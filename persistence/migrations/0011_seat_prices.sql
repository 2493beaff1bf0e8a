-- 0011_seat_prices: a seat's own price, its level's when the event was created with price
-- levels (ADR 0038); null: the event's price_minor. A rebuild writes it back to Redis.

alter table seats add column price_minor bigint;
