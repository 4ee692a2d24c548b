-- A rotation of a webhook's secret asked for with an Idempotency-Key is kept under that key, so
-- a retried POST answers the secret it made instead of replacing it with another (which would
-- drop the previous secret, still used by the receivers, one rotation early).
alter table webhook_subscriptions add column rotation_key uuid;
