-- Account sets (docs/api.md, Account sets; src/ledger/sets.rs): a named group of wallets and
-- of other sets, whose balances are the sums of its members'. Every table here stays a table
-- of the coordinator on Citus, like the outbox.
create table account_sets (
    id text primary key check (id ~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$'),
    currency text not null check (currency ~ '^[A-Z]{3}$'),
    metadata jsonb not null default '{}' check (jsonb_typeof(metadata) = 'object'),
    creation_request jsonb not null,
    creation_response text not null,
    created_at timestamptz not null
);

-- Direct members: wallets, and sets (never the set itself or one of its ancestors: the API
-- refuses a cycle under the topology lock, src/ledger/sets/store.rs).
create table account_set_accounts (
    set_id text not null references account_sets (id),
    account_id text not null,
    added_at timestamptz not null,
    primary key (set_id, account_id)
);
create table account_set_children (
    set_id text not null references account_sets (id),
    child_id text not null references account_sets (id),
    added_at timestamptz not null,
    primary key (set_id, child_id),
    check (child_id <> set_id)
);
create index account_set_children_child on account_set_children (child_id);

-- Every (set, wallet) pair where the wallet counts in the set, directly or through nested
-- sets: what a posting reads (by wallet) to know which sets it moves, kept by the membership
-- changes in their own transaction.
create table account_set_closure (
    account_id text not null,
    set_id text not null references account_sets (id),
    primary key (account_id, set_id)
);
create index account_set_closure_set on account_set_closure (set_id);

-- What moved each set's posted balance, insert-only: one row per entry of a wallet in the set
-- (written with the entry, in its transaction), and one per wallet joining or leaving it with
-- the wallet's posted balance at that moment (written under the wallet's lock). A set's posted
-- balance is its latest checkpoint plus the rows since, as for system accounts
-- (src/ledger/checkpoints.rs): no row is ever updated, so writers never wait for each other.
create table account_set_movements (
    id bigint generated always as identity primary key,
    set_id text not null references account_sets (id),
    account_id text not null,
    kind text not null check (kind in ('entry', 'join', 'leave')),
    -- The entry's transaction; null for a join or a leave.
    transaction_id uuid,
    amount bigint not null check (amount between -9007199254740991 and 9007199254740991),
    ledger_time timestamptz not null,
    effective_at timestamptz,
    xid xid8 not null default pg_current_xact_id(),
    check ((kind = 'entry') = (transaction_id is not null))
);
create index account_set_movements_since on account_set_movements (set_id, xid) include (amount);
create index account_set_movements_time on account_set_movements (set_id, ledger_time);

-- A set's posted balance summed over the movements of finished transactions (xid below its
-- snapshot's xmin), taken by the same job as system accounts' checkpoints.
create table account_set_checkpoints (
    set_id text not null references account_sets (id),
    below_xid xid8 not null,
    posted numeric not null,
    movement_count bigint not null,
    primary key (set_id, below_xid)
);

-- The open holds of the wallets in each set, copied: written with the hold, deleted when it
-- is captured or voided, and, for a wallet joining or leaving, copied or deleted under its
-- lock. Expired rows stop counting at their expiry (reads filter on it, as open_hold_totals
-- does) and are deleted by the checkpoint job.
create table account_set_open_holds (
    set_id text not null references account_sets (id),
    transaction_id uuid not null,
    account_id text not null,
    amount bigint not null check (amount <> 0 and amount between -9007199254740991 and 9007199254740991),
    expires_at timestamptz not null,
    primary key (set_id, transaction_id, account_id)
);
create index account_set_open_holds_transaction on account_set_open_holds (transaction_id);
create index account_set_open_holds_expiry on account_set_open_holds (expires_at);

-- Whether a wallet counts in any set, read by the statement that locks it: a wallet in no set
-- costs the write path nothing more. Set and cleared under the wallet's row lock.
alter table accounts add column in_sets boolean not null default false;

do $migration$
begin
    if not exists (select 1 from pg_extension where extname = 'citus') then
        alter table account_set_accounts
            add constraint account_set_accounts_account_id_fkey
            foreign key (account_id) references accounts (id);
    end if;
end
$migration$;
