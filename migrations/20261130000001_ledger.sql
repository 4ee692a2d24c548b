-- The ledger's core tables. Migrations are append-only: change the schema with a new file.
--
-- Amounts are bigint minor units within ±(2^53 − 1), the range JavaScript reads exactly.

-- Accounts: wallets (balance-checked, one entry chain each) and system accounts (provider
-- clearing, fees, settlement: never balance-checked, never serialized). The caller's id is the
-- primary key, so a duplicate create is a rejected insert, not a lookup race.
create table accounts (
    id                text primary key
                      check (id ~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$'),
    currency          text not null check (currency ~ '^[A-Z]{3}$'),
    type              text not null check (type in ('wallet', 'system')),
    status            text not null default 'active'
                      check (status in ('active', 'frozen', 'closed')),
    overdraft_limit   bigint not null default 0
                      check (overdraft_limit between 0 and 9007199254740991),
    metadata          jsonb not null default '{}' check (jsonb_typeof(metadata) = 'object'),
    -- Caller-supplied version for PATCH: metadata changes apply only when newer.
    version           bigint not null default 0 check (version >= 0),
    -- The canonical create request (defaults applied), compared field by field on a replay,
    -- and the exact body of the 201 answer, returned again on every replay.
    creation_request  jsonb not null,
    creation_response text not null,
    created_at        timestamptz not null,
    updated_at        timestamptz not null,
    check (type = 'wallet' or overdraft_limit = 0)
);

-- Transactions: one row per payment id. The UUID primary key is the idempotency key: a retry,
-- a redelivery or a concurrent duplicate all meet the same key and the database decides.
-- Refusals (insufficient funds, frozen or closed account) are stored too, so a retry gets the
-- same refusal and never a late success.
create table transactions (
    id                uuid primary key,
    -- Insertion order, for stable newest-first cursors (UUIDs carry no order).
    seq               bigint generated always as identity unique,
    kind              text not null check (kind in ('transaction', 'transfer', 'payment')),
    status            text not null
                      check (status in ('pending', 'posted', 'rejected', 'voided', 'expired')),
    currency          text not null check (currency ~ '^[A-Z]{3}$'),
    -- The legs as requested ([{account, amount}]); for a posted transaction they equal its
    -- entries, for a rejected one they are what was refused.
    legs              jsonb not null check (jsonb_typeof(legs) = 'array'),
    account_ids       text[] not null,
    external_ref      text check (length(external_ref) between 1 and 255),
    metadata          jsonb not null default '{}' check (jsonb_typeof(metadata) = 'object'),
    refusal_code      text check (refusal_code in ('insufficient_funds', 'account_frozen', 'account_closed')),
    refusal_detail    text,
    creation_request  jsonb not null,
    creation_status   smallint not null check (creation_status in (201, 422)),
    creation_response text not null,
    created_at        timestamptz not null,
    -- Ledger time: when the entries took effect. Never decreases along an account's sequence.
    posted_at         timestamptz,
    updated_at        timestamptz not null,
    check ((status = 'rejected') = (refusal_code is not null)),
    check ((status = 'rejected') = (creation_status = 422)),
    check ((status = 'posted') = (posted_at is not null))
);
create index transactions_account_ids on transactions using gin (account_ids);
create index transactions_external_ref on transactions (external_ref) where external_ref is not null;
create index transactions_status_seq on transactions (status, seq);

-- Entries: the immutable journal. A balance is derived from entries, never stored and
-- incremented. Wallet entries carry a gap-free per-account sequence and the posted balance
-- after the entry, so the current balance is one index lookup (the last entry), and the
-- unique (account_id, sequence) makes a lost update impossible even if a lock were missed.
-- System-account entries carry neither: they are summed from a checkpoint instead (below),
-- so a busy clearing account never serializes its writers.
create table entries (
    id             bigint generated always as identity primary key,
    transaction_id uuid not null references transactions (id),
    account_id     text not null references accounts (id),
    currency       text not null,
    amount         bigint not null
                   check (amount <> 0 and amount between -9007199254740991 and 9007199254740991),
    sequence       bigint check (sequence >= 1),
    balance_after  bigint check (balance_after between -9007199254740991 and 9007199254740991),
    ledger_time    timestamptz not null,
    -- The writing transaction's id: system-account checkpoints cover exactly the entries of
    -- transactions finished before the checkpoint's snapshot (see account_checkpoints).
    xid            xid8 not null default pg_current_xact_id(),
    check ((sequence is null) = (balance_after is null)),
    unique (account_id, sequence)
);
create index entries_account_id on entries (account_id, id);
create index entries_account_xid on entries (account_id, xid) where sequence is null;
create index entries_transaction_id on entries (transaction_id);

-- Checkpoints of system-account balances: `posted` is the sum of every entry of the account
-- written by a transaction with xid < `below_xid`, the xmin of the checkpoint's snapshot (the
-- oldest transaction still running then). Every such transaction had finished, so no later
-- commit can add an entry below the line, and balance = posted + entries with xid >= below_xid.
-- Append-only, like entries.
create table account_checkpoints (
    account_id  text not null references accounts (id),
    below_xid   xid8 not null,
    posted      bigint not null,
    entry_count bigint not null check (entry_count >= 0),
    created_at  timestamptz not null default now(),
    primary key (account_id, below_xid)
);

-- Entries are immutable: corrections are new transactions, never edits.
create function refuse_entry_change() returns trigger language plpgsql as $$
begin
    raise exception 'entries are immutable: % refused', tg_op
        using errcode = 'integrity_constraint_violation';
end $$;
create trigger entries_immutable before update or delete on entries
    for each row execute function refuse_entry_change();
create trigger entries_no_truncate before truncate on entries
    for each statement execute function refuse_entry_change();
create trigger checkpoints_immutable before update or delete on account_checkpoints
    for each row execute function refuse_entry_change();

-- The journal rules, checked once per INSERT statement over the rows it added, so that even
-- a bug in the application cannot post an unbalanced or a broken chain:
--   * every transaction's entries sum to zero per currency, and all of them arrive in this
--     one statement (nothing is appended to an existing transaction later);
--   * entries belong to a posted transaction and are in its currency and their account's;
--     wallet entries have a sequence, system ones not;
--   * a wallet entry continues its chain: sequence = previous + 1,
--     balance_after = previous balance_after + amount, and ledger time does not go back.
create function check_new_entries() returns trigger language plpgsql as $$
begin
    if exists (select 1 from new_entries
               group by transaction_id, currency having sum(amount) <> 0) then
        raise exception 'unbalanced transaction: entries must sum to zero per currency'
            using errcode = 'check_violation';
    end if;
    -- (An anti-join, not NOT IN: it stays linear however many rows one statement adds.)
    if exists (select 1 from entries e
               join (select distinct transaction_id from new_entries) t using (transaction_id)
               where not exists (select 1 from new_entries n where n.id = e.id)) then
        raise exception 'entries of a transaction must all be written in one statement'
            using errcode = 'check_violation';
    end if;
    if exists (select 1 from new_entries n
               join accounts a on a.id = n.account_id
               join transactions t on t.id = n.transaction_id
               where a.currency <> n.currency or t.currency <> n.currency
                  or t.status <> 'posted'
                  or (a.type = 'wallet') <> (n.sequence is not null)) then
        raise exception 'entry does not fit its account or transaction (currency, status, wallet chain)'
            using errcode = 'check_violation';
    end if;
    if exists (select 1 from new_entries n
               left join entries p on p.account_id = n.account_id and p.sequence = n.sequence - 1
               where n.sequence is not null
                 and (coalesce(p.balance_after, 0) + n.amount <> n.balance_after
                      or n.ledger_time < p.ledger_time
                      or (p.id is null and n.sequence <> 1))) then
        raise exception 'broken wallet chain: sequence or running balance does not follow'
            using errcode = 'check_violation';
    end if;
    return null;
end $$;
create trigger entries_journal_rules after insert on entries
    referencing new table as new_entries
    for each statement execute function check_new_entries();

-- What a transaction was created from, what it moves, and the answer it got never change:
-- replays compare against the request and return the answer; only its status moves on.
create function refuse_creation_change() returns trigger language plpgsql as $$
begin
    if new.id <> old.id or new.kind <> old.kind or new.currency <> old.currency
       or new.legs <> old.legs or new.account_ids <> old.account_ids
       or new.created_at <> old.created_at
       or new.creation_request <> old.creation_request
       or new.creation_response <> old.creation_response
       or new.creation_status <> old.creation_status then
        raise exception 'the creation record of % is immutable', old.id
            using errcode = 'integrity_constraint_violation';
    end if;
    return new;
end $$;
create trigger transactions_creation_immutable before update on transactions
    for each row execute function refuse_creation_change();
create function refuse_account_creation_change() returns trigger language plpgsql as $$
begin
    if new.id <> old.id or new.currency <> old.currency or new.type <> old.type
       or new.creation_request <> old.creation_request
       or new.creation_response <> old.creation_response then
        raise exception 'the identity and creation record of account % are immutable', old.id
            using errcode = 'integrity_constraint_violation';
    end if;
    return new;
end $$;
create trigger accounts_creation_immutable before update on accounts
    for each row execute function refuse_account_creation_change();
