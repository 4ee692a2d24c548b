-- Run by `migrate` on a Citus coordinator after the numbered migrations, once: src/db/citus.rs
-- looks at pg_dist_partition first and runs this file only while `entries` is not yet
-- distributed, in one transaction (all of it or nothing). A plain PostgreSQL never runs it and
-- keeps the schema of docs/schema.sql exactly.
--
-- Distributed by the natural keys, so that every statement's columns stay as they are:
-- `accounts` by id, with `entries`, `open_holds` and `account_checkpoints` co-located by
-- account_id (a wallet's chain, its row lock, its holds and checkpoints live on one shard), and
-- `transactions` by id in a co-location group of its own (its primary key stays `(id)`: a
-- retry under the same id reaches the same shard and the same key, whatever wallets it names).
-- Every other table stays a plain table on the coordinator. docs/scaling.md ("Built: the
-- service on Citus") says which journal rule is enforced where.

-- Citus distributes a table with triggers only behind this setting; it then creates each
-- trigger on every shard, where it runs as on one node (the journal trigger's function was
-- replaced just before, in the same transaction, with migrations/citus/journal.sql's, which
-- reads its own shard).
set local citus.enable_unsafe_triggers = on;

-- Keys must include the distribution column. entries' id stays unique (identity), the
-- primary key gains account_id in front; transactions' seq (the list cursor) keeps an index.
alter table entries drop constraint entries_pkey, add constraint entries_pkey primary key (account_id, id);
alter table transactions drop constraint transactions_seq_key;
create index transactions_seq on transactions (seq);

-- Foreign keys between tables that are not co-located are refused. Both are enforced by the
-- write path instead: a hold's transaction row is inserted in the same transaction before its
-- open holds, and a reversal's original is locked and read before the reversal is decided;
-- `verify` reports both: a hold of a missing transaction as stale_open_hold, reversals of a
-- missing original as over_reversed (it moved nothing).
alter table open_holds drop constraint open_holds_transaction_id_fkey;
alter table transactions drop constraint transactions_reverses_fkey;

-- The journal trigger runs on each shard of entries, with a function of its own:
-- migrations/citus/journal.sql, applied just before this file (and by every later `migrate`).

-- How the write path refuses a breach of those rules (src/ledger/posting/cross_shard.rs): with
-- the trigger's own SQLSTATE and message, so that callers cannot tell the two apart.
create function wallet_ledger_refuse(message text) returns void language plpgsql as $fn$
begin
    raise exception '%', message using errcode = 'check_violation';
end $fn$;

select create_distributed_table('accounts', 'id');
select create_distributed_table('entries', 'account_id', colocate_with => 'accounts');
select create_distributed_table('open_holds', 'account_id', colocate_with => 'accounts');
select create_distributed_table('account_checkpoints', 'account_id', colocate_with => 'accounts');
select create_distributed_table('transactions', 'id', colocate_with => 'none');
