-- A transaction's outbox events (`GET /v1/transactions/{id}/events`, the console's transaction
-- page; src/outbox/events.rs), in the order they were written, read through this index instead
-- of the whole outbox. Partial: account events (frozen, closed) name no transaction. The
-- deliveries of those events are found through `webhook_deliveries`' unique
-- (event_id, subscription_id) index. On Citus the outbox stays a plain table on the coordinator
-- (migrations/citus/distribute.sql does not name it), and so does this index.
--
-- `if not exists`: on a large outbox, create it first with `create index concurrently` under
-- the same name and definition (docs/operations.md, "migrate"); this migration then takes no
-- lock that waits on writers.
create index if not exists outbox_events_by_transaction on outbox_events (transaction_id, seq)
    where transaction_id is not null;
