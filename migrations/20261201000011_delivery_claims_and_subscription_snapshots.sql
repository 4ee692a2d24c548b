-- Each claim of a delivery gets its own id, and a result is recorded only under the claim that
-- sent it. The attempt count could not tell claims apart: a redelivery resets it, so a late
-- recorder of an earlier claim matched the newer one and overwrote its state.
alter table webhook_deliveries add column claim_id uuid;

-- Which events a subscription gets is decided by commit order, not by clocks: an event goes to
-- every subscription whose creation did not see the event's transaction (it had not committed
-- yet). Comparing the subscription's application-clock created_at with the event's
-- transaction-start now() skipped the events of a transaction that began before the
-- subscription was made and committed after it, and any event a skewed clock put "before".
alter table outbox_events add column xid xid8 not null default pg_current_xact_id();
alter table webhook_subscriptions add column created_snapshot pg_snapshot default pg_current_snapshot();
-- Subscriptions made before this migration keep the comparison of times they were made with.
update webhook_subscriptions set created_snapshot = null;
