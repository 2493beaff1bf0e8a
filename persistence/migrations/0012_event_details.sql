-- 0012_event_details: what people recognise an event by (ADR 0041), copied with its
-- configuration when it leaves DRAFT and written back by a rebuild. '' / 0: not given.

alter table event_configs add column name text not null default '';
alter table event_configs add column venue text not null default '';
alter table event_configs add column description text not null default '';
alter table event_configs add column image_url text not null default '';
alter table event_configs add column starts_at_ms bigint not null default 0;
alter table event_configs add column time_zone text not null default '';
