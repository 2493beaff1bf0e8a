-- 0004_raw_callbacks_mirrored: the ledger writer now copies each event's verified raw callbacks
-- from Redis (first delivery of each provider event id, byte for byte), with the time Redis
-- received it; the stock corrections table, which nothing wrote, goes (quantity stock brings
-- its own, with the shape it needs).

drop table stock_corrections;

alter table raw_callbacks add column received_at_ms bigint not null default 0;
alter table raw_callbacks drop column received_at;
create index raw_callbacks_event on raw_callbacks (event_id, received_at_ms);
