-- Balance monitors (docs/api.md, Balance monitors): a condition on a wallet's `posted`,
-- `available` or `pending_out` balance. Edge-triggered: the posting, capture or void that makes
-- the condition true writes a `balance.monitor_triggered` event in its own transaction, under
-- the wallet's lock (src/ledger/monitors.rs), and records its firing on the row.
create table account_monitors (
    id uuid primary key,
    account_id text not null,
    -- The account's, copied: `value` is in its minor units, and an account's currency never
    -- changes.
    currency text not null check (currency ~ '^[A-Z]{3}$'),
    field text not null check (field in ('posted', 'available', 'pending_out')),
    operator text not null check (operator in ('lt', 'lte', 'gt', 'gte')),
    value bigint not null check (value between -9007199254740991 and 9007199254740991),
    creation_request jsonb not null,
    creation_response text not null,
    created_at timestamptz not null,
    -- A deleted monitor no longer fires; its row stays, so that a repeated DELETE answers the
    -- same and a create retried with its id still replays.
    deleted_at timestamptz,
    -- Its firings: how many, and the last one (when, which transaction, the balances before
    -- and after it), written by the change that fired it.
    trigger_count bigint not null default 0,
    last_triggered_at timestamptz,
    last_transaction_id uuid,
    last_before jsonb,
    last_after jsonb
);
create index account_monitors_account on account_monitors (account_id) where deleted_at is null;

-- Whether an account has a monitor, read by the statement that locks it: a wallet without one
-- costs the write path nothing more. Set and cleared under the account's row lock.
alter table accounts add column has_monitors boolean not null default false;

alter table outbox_events
    drop constraint outbox_events_type_check,
    add constraint outbox_events_type_check check (type in (
        'transaction.posted', 'transaction.rejected', 'transaction.voided',
        'transaction.expired', 'transaction.reversed', 'hold.created',
        'account.frozen', 'account.closed', 'account.negative_balance',
        'balance.monitor_triggered'));

-- The monitor's account must exist; on Citus (where `accounts` is distributed and
-- `account_monitors` a table of the coordinator) the statement that adds a monitor updates the
-- account's row first, as for limits.
do $migration$
begin
    if not exists (select 1 from pg_extension where extname = 'citus') then
        alter table account_monitors
            add constraint account_monitors_account_id_fkey
            foreign key (account_id) references accounts (id);
    end if;
end
$migration$;
