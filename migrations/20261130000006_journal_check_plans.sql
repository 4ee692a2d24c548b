-- The journal trigger, the same four rules as in 20261130000001_ledger.sql, written so that
-- its cost follows the statement's new entries, never the size of the journal.
--
-- Why: PL/pgSQL caches each query's plan for the session, and the planner knows nothing of a
-- transition table's size. Plans made while the tables were small (or their statistics stale)
-- drove the joins from `entries`: the benchmark saw every 2-entry insert scan all 36,000
-- entries, so each write cost O(journal); another walked every posted transaction through the
-- status index. Here every lookup is driven by the new rows (a correlated subquery on a key,
-- or a left join whose outer side is `new_entries`), and the function runs with sequential
-- scans, hash joins and merge joins off, so each lookup is an index probe.
create or replace function check_new_entries() returns trigger language plpgsql
    set enable_seqscan = off
    set enable_hashjoin = off
    set enable_mergejoin = off
as $$
begin
    if exists (select 1 from new_entries
               group by transaction_id, currency having sum(amount) <> 0) then
        raise exception 'unbalanced transaction: entries must sum to zero per currency'
            using errcode = 'check_violation';
    end if;
    -- Every entry of a transaction arrives in this statement: the journal holds exactly as
    -- many entries of each of its transactions as the statement wrote.
    if exists (select 1 from (select transaction_id, count(*) as written from new_entries
                              group by transaction_id) t
               where (select count(*) from entries e
                      where e.transaction_id = t.transaction_id) <> t.written) then
        raise exception 'entries of a transaction must all be written in one statement'
            using errcode = 'check_violation';
    end if;
    -- One primary-key probe per new entry into accounts and one into transactions: the only
    -- condition on each is its key, so no cached plan can pick another index (a join here
    -- once walked every posted transaction through transactions_status_seq).
    if exists (select 1 from new_entries n
               where (select a.currency = n.currency
                             and (a.type = 'wallet') = (n.sequence is not null)
                      from accounts a where a.id = n.account_id) is not true
                  or (select t.currency = n.currency and t.status = 'posted'
                      from transactions t where t.id = n.transaction_id) is not true) then
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
