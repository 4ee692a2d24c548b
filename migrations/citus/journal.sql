-- The journal trigger's function on Citus, applied by `migrate` on a coordinator after
-- migrations/citus/distribute.sql on every run (src/db/citus.rs), in the distribution's
-- transaction: `create or replace` keeps the function the shards' triggers call and Citus
-- propagates the new body to every worker. The numbered migrations define the one-node
-- function and leave Citus's alone, so a rule added to the journal is added here as well.
--
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
               or (p.id is null and n.sequence <> 1)
               or n.chain_hash is distinct from entry_chain_hash(
                      p.chain_hash, n.transaction_id, n.account_id, n.currency, n.amount,
                      n.sequence, n.balance_after, n.ledger_time, n.effective_at)))$q$, e)
        into bad;
    if bad then
        raise exception 'broken wallet chain: sequence, running balance or link does not follow'
            using errcode = 'check_violation';
    end if;
    return null;
end $fn$;

