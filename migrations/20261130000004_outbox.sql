-- The outbox: effects outside the database (webhooks, an outbound stream) are written as rows in
-- the same transaction as the ledger change they tell of, then sent by a separate worker with
-- the event id as the receiver's idempotency key. A rolled-back change leaves no event; a
-- committed one is never lost; a resend after a crash carries the same id.

-- One row per ledger change worth telling. The id is derived from what happened (UUIDv5 of the
-- event type and the natural key of the change), so recording the same change twice is a
-- primary-key conflict, not a second event.
create table outbox_events (
    seq            bigint generated always as identity unique,
    id             uuid primary key,
    type           text not null check (type in (
                       'transaction.posted', 'transaction.rejected', 'transaction.voided',
                       'transaction.expired', 'transaction.reversed', 'hold.created',
                       'account.frozen', 'account.closed', 'account.negative_balance')),
    transaction_id uuid,
    account_id     text,
    -- The event's `data`: the transaction or account as it was, with every wallet's entry
    -- sequence and running balance, so receivers can order events per account.
    data           jsonb not null check (jsonb_typeof(data) = 'object'),
    created_at     timestamptz not null default now(),
    -- Set once the dispatcher has turned the event into one delivery per matching subscription.
    fanned_out_at  timestamptz,
    -- Set once the event is on the outbound stream (when one is configured).
    streamed_at    timestamptz
);
create index outbox_events_to_fan_out on outbox_events (seq) where fanned_out_at is null;
create index outbox_events_to_stream on outbox_events (seq) where streamed_at is null;
create index outbox_events_created on outbox_events (created_at);

-- Where events go. Created like every resource: the caller's id is the primary key and the
-- stored creation response is replayed. `secrets` holds one secret, or two during a rotation
-- (the newest first); every delivery is signed with each.
create table webhook_subscriptions (
    seq               bigint generated always as identity unique,
    id                uuid primary key,
    url               text not null check (length(url) between 1 and 2048),
    event_types       text[] not null,
    secrets           text[] not null check (cardinality(secrets) between 1 and 2),
    status            text not null default 'active' check (status in ('active', 'deleted')),
    creation_request  jsonb not null,
    creation_response text not null,
    created_at        timestamptz not null,
    updated_at        timestamptz not null
);

-- One delivery per event and subscription. `attempts` counts tries since the last (re)start
-- of the delivery and is checked against the retry budget; `next_attempt_at` is also the
-- lease of a claimed delivery: a dispatcher that dies mid-send leaves it due again later.
create table webhook_deliveries (
    seq             bigint generated always as identity unique,
    id              uuid primary key,
    event_id        uuid not null references outbox_events (id),
    subscription_id uuid not null references webhook_subscriptions (id),
    status          text not null default 'pending'
                    check (status in ('pending', 'delivered', 'dead', 'cancelled')),
    attempts        integer not null default 0 check (attempts >= 0),
    next_attempt_at timestamptz not null,
    last_status     integer,
    last_error      text,
    created_at      timestamptz not null default now(),
    updated_at      timestamptz not null default now(),
    delivered_at    timestamptz,
    unique (event_id, subscription_id),
    check ((status = 'delivered') = (delivered_at is not null))
);
create index webhook_deliveries_due on webhook_deliveries (next_attempt_at) where status = 'pending';
create index webhook_deliveries_by_status on webhook_deliveries (status, created_at);

-- Every try of every delivery, for the operator: when, what the receiver answered, how long.
create table delivery_attempts (
    id           bigint generated always as identity primary key,
    delivery_id  uuid not null references webhook_deliveries (id),
    started_at   timestamptz not null,
    duration_ms  integer not null check (duration_ms >= 0),
    status       integer,
    error        text
);
create index delivery_attempts_by_delivery on delivery_attempts (delivery_id, id);
create index delivery_attempts_started on delivery_attempts (started_at);
