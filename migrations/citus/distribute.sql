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
-- trigger on every shard, where it runs as on one node (the journal trigger is replaced below
-- with one that reads its own shard).
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

-- The journal trigger runs on each shard of entries (tg_table_name = entries_<shardid>), where
-- the plain table names are the distributed tables, which it may not query. It reads its own
-- shard and the co-located shard of accounts (same hash range in pg_dist_shard), and checks
-- what one shard can see: the wallet chain, that each entry fits its account, and that a
-- transaction's entries on this shard all arrive in one statement. What spans shards (the
-- entries of a transaction sum to zero; all of them in one statement; each fits its
-- transaction) is checked by the write path before COMMIT (src/ledger/posting/cross_shard.rs)
-- and by `verify`.
create or replace function check_new_entries() returns trigger
    language plpgsql
    set enable_seqscan to 'off' set enable_hashjoin to 'off' set enable_mergejoin to 'off'
as $fn$
declare
    e text := format('%I.%I', tg_table_schema, tg_table_name);
    a text := 'public.accounts';
    sid bigint := substring(tg_table_name from '_([0-9]+)$')::bigint;
    bad boolean;
begin
    if sid is not null then
        select format('%I.%I', 'public', 'accounts_' || ac.shardid)
          into strict a
          from pg_dist_shard me
          join pg_dist_shard ac on ac.logicalrelid = 'public.accounts'::regclass
                               and ac.shardminvalue = me.shardminvalue
         where me.shardid = sid;
    end if;
    execute format($q$select exists (
        select 1 from (select transaction_id, count(*) as written from new_entries
                       group by transaction_id) w
        where (select count(*) from %s x where x.transaction_id = w.transaction_id) <> w.written)$q$, e)
        into bad;
    if bad then
        raise exception 'entries of a transaction must all be written in one statement'
            using errcode = 'check_violation';
    end if;
    execute format($q$select exists (select 1 from new_entries n
        where (select ac.currency = n.currency and (ac.type = 'wallet') = (n.sequence is not null)
               from %s ac where ac.id = n.account_id) is not true)$q$, a)
        into bad;
    if bad then
        raise exception 'entry does not fit its account or transaction (currency, status, wallet chain)'
            using errcode = 'check_violation';
    end if;
    execute format($q$select exists (select 1 from new_entries n
        left join %s p on p.account_id = n.account_id and p.sequence = n.sequence - 1
        where n.sequence is not null
          and (coalesce(p.balance_after, 0) + n.amount <> n.balance_after
               or n.ledger_time < p.ledger_time
               or (p.id is null and n.sequence <> 1)))$q$, e)
        into bad;
    if bad then
        raise exception 'broken wallet chain: sequence or running balance does not follow'
            using errcode = 'check_violation';
    end if;
    return null;
end $fn$;

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
