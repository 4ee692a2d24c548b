-- Velocity limits (docs/api.md, Velocity limits): at most `maximum` minor units (or movements)
-- through an account per rolling window of `window_seconds`, counting debits, credits or both.
-- Checked by the posting transaction under the wallet's lock (src/ledger/limits.rs); a create
-- past a limit is a stored refusal, `velocity_limit_exceeded`.
create table account_limits (
    id uuid primary key,
    account_id text not null,
    -- The account's, copied: `amount` is in its minor units, and an account's currency never
    -- changes.
    currency text not null check (currency ~ '^[A-Z]{3}$'),
    direction text not null check (direction in ('debit', 'credit', 'both')),
    measure text not null check (measure in ('amount', 'count')),
    maximum bigint not null check (maximum between 1 and 9007199254740991),
    window_seconds integer not null check (window_seconds between 60 and 2678400),
    creation_request jsonb not null,
    creation_response text not null,
    created_at timestamptz not null,
    -- A deleted limit no longer counts; its row stays, so that a repeated DELETE answers the
    -- same and a create retried with its id still replays.
    deleted_at timestamptz
);
create index account_limits_account on account_limits (account_id) where deleted_at is null;

-- Whether an account has a limit, read by the statement that locks it: a wallet without one
-- costs the write path nothing more (no read of account_limits). Set and cleared under the
-- account's row lock, by the statement that adds or deletes a limit.
alter table accounts add column has_limits boolean not null default false;

alter table transactions
    drop constraint transactions_refusal_code_check,
    add constraint transactions_refusal_code_check
        check (refusal_code in ('insufficient_funds', 'account_frozen', 'account_closed',
                                'reversal_exceeds_original', 'velocity_limit_exceeded'));

-- The limit's account must exist. On Citus `accounts` is distributed and `account_limits` a
-- table of the coordinator, which cannot refer to it: there the statement that adds a limit
-- updates the account's row first (no row, no limit), and accounts are never deleted.
do $migration$
begin
    if not exists (select 1 from pg_extension where extname = 'citus') then
        alter table account_limits
            add constraint account_limits_account_id_fkey
            foreign key (account_id) references accounts (id);
    end if;
end
$migration$;
