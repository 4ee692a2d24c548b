-- check_new_entries (migrations/20261130000006) re-expressed for Citus, as tried in
-- docs/scaling.md#measured-on-citus-1322: the trigger fires on each shard of entries
-- (tg_table_name = entries_<shardid>), and every query in it reads that shard and the
-- co-located shards of accounts and transactions (found in pg_dist_shard by the same hash
-- range), since on a worker the plain table names are the distributed tables, which Citus
-- refuses to query this way. On a table that is not distributed it reads the tables by name.
create or replace function public.check_new_entries() returns trigger
    language plpgsql
    set enable_seqscan to 'off' set enable_hashjoin to 'off' set enable_mergejoin to 'off'
as $fn$
declare
    e text := quote_ident(tg_table_schema) || '.' || quote_ident(tg_table_name);
    a text := 'public.accounts';
    t text := 'public.transactions';
    sid bigint := substring(tg_table_name from '_([0-9]+)$')::bigint;
    bad boolean;
begin
    if sid is not null then
        select 'public.' || quote_ident('accounts_' || ac.shardid),
               'public.' || quote_ident('transactions_' || tr.shardid)
          into strict a, t
          from pg_dist_shard me
          join pg_dist_shard ac on ac.logicalrelid = 'public.accounts'::regclass
                               and ac.shardminvalue = me.shardminvalue
          join pg_dist_shard tr on tr.logicalrelid = 'public.transactions'::regclass
                               and tr.shardminvalue = me.shardminvalue
         where me.shardid = sid;
    end if;
    if exists (select 1 from new_entries
               group by transaction_id, currency having sum(amount) <> 0) then
        raise exception 'unbalanced transaction: entries must sum to zero per currency'
            using errcode = 'check_violation';
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
               from %s ac where ac.id = n.account_id) is not true
           or (select tr.currency = n.currency and tr.status = 'posted'
               from %s tr where tr.id = n.transaction_id) is not true)$q$, a, t)
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
