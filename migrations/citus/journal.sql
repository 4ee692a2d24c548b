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
--
-- Its checks are plain PostgreSQL on the shard's relations, whose names differ per shard, so
-- they cannot be static SQL (whose plan PL/pgSQL would keep): as dynamic statements over the
-- transition table they were parsed and planned anew by every insert, and that planning was
-- most of the trigger's cost and about a tenth of a transfer's database CPU on the cluster
-- (docs/performance.md, "The journal trigger's checks prepared per shard"). So the
-- statement's rows are read from the transition table by one static query (planned once),
-- and the checks are one statement over those rows as arrays, prepared once per worker
-- session and shard, named after the shard and a hash of its text, as write_path.sql's
-- accounts_locked_in_shard prepares its own. The checks are raised in the order they are
-- written.
create or replace function check_new_entries() returns trigger
    language plpgsql
    set enable_seqscan to 'off' set enable_hashjoin to 'off' set enable_mergejoin to 'off'
as $fn$
declare
    sid bigint := substring(tg_table_name from '_([0-9]+)$')::bigint;
    e text := format('%I.%I', tg_table_schema, tg_table_name);
    a text := 'public.accounts';
    checks text;
    prepared text;
    rows_ record;
    split boolean;
    misfit boolean;
    broken boolean;
begin
    -- %1$s is this shard of entries, %2$s its co-located shard of accounts; $1 to $9 are the
    -- statement's rows, column by column.
    checks := $q$with n as (
            select * from unnest($1::uuid[], $2::text[], $3::text[], $4::bigint[], $5::bigint[],
                                 $6::bigint[], $7::timestamptz[], $8::timestamptz[], $9::bytea[])
                as n(transaction_id, account_id, currency, amount, sequence, balance_after,
                     ledger_time, effective_at, chain_hash))
        select
        exists (select 1 from (select transaction_id, count(*) as written from n
                               group by transaction_id) w
                where (select count(*) from %1$s x where x.transaction_id = w.transaction_id)
                      <> w.written),
        exists (select 1 from n
                where (select ac.currency = n.currency
                              and (ac.type = 'wallet') = (n.sequence is not null)
                       from %2$s ac where ac.id = n.account_id) is not true),
        exists (select 1 from n
                left join %1$s p on p.account_id = n.account_id and p.sequence = n.sequence - 1
                where n.sequence is not null
                  and (coalesce(p.balance_after, 0) + n.amount <> n.balance_after
                       or n.ledger_time < p.ledger_time
                       or (p.id is null and n.sequence <> 1)
                       or n.chain_hash is distinct from entry_chain_hash(
                              p.chain_hash, n.transaction_id, n.account_id, n.currency, n.amount,
                              n.sequence, n.balance_after, n.ledger_time, n.effective_at)))$q$;
    prepared := 'wallet_ledger_journal_' || coalesce(sid::text, 'node') || '_'
                || left(md5(checks), 12);
    if not exists (select 1 from pg_prepared_statements p where p.name = prepared) then
        if sid is not null then
            select format('%I.%I', 'public', 'accounts_' || ac.shardid)
              into strict a
              from pg_dist_shard me
              join pg_dist_shard ac on ac.logicalrelid = 'public.accounts'::regclass
                                   and ac.shardminvalue = me.shardminvalue
             where me.shardid = sid;
        end if;
        execute format('prepare %s(uuid[], text[], text[], bigint[], bigint[], bigint[], '
                       'timestamptz[], timestamptz[], bytea[]) as ', prepared)
                || format(checks, e, a);
    end if;
    select array_agg(transaction_id) as transaction_ids, array_agg(account_id) as account_ids,
           array_agg(currency) as currencies, array_agg(amount) as amounts,
           array_agg(sequence) as sequences, array_agg(balance_after) as balances,
           array_agg(ledger_time) as ledger_times, array_agg(effective_at) as effective_ats,
           array_agg(chain_hash) as chain_hashes
      into rows_ from new_entries;
    execute format('execute %s(%L, %L, %L, %L, %L, %L, %L, %L, %L)', prepared,
                   rows_.transaction_ids, rows_.account_ids, rows_.currencies, rows_.amounts,
                   rows_.sequences, rows_.balances, rows_.ledger_times, rows_.effective_ats,
                   rows_.chain_hashes)
        into split, misfit, broken;
    if split then
        raise exception 'entries of a transaction must all be written in one statement'
            using errcode = 'check_violation';
    end if;
    if misfit then
        raise exception 'entry does not fit its account or transaction (currency, status, wallet chain)'
            using errcode = 'check_violation';
    end if;
    if broken then
        raise exception 'broken wallet chain: sequence, running balance or link does not follow'
            using errcode = 'check_violation';
    end if;
    return null;
end $fn$;
