-- Each key of a run's settlement lines (a payment id, else a reference) with what the
-- ledger has for it, in the file's order: reconcile/matching.rs `key_rows`, on Citus.
with per_key as materialized (
    -- The key sorts bytewise ("C"): a UUID or a reference needs no language rules,
    -- and grouping a million lines under the locale's collation costs seconds.
    select coalesce(payment_id::text, 'ref:' || external_ref) collate "C" as k,
           (array_agg(payment_id) filter (where payment_id is not null))[1] as payment_id,
           (array_agg(external_ref) filter (where external_ref is not null))[1] as external_ref,
           array_agg(currency) as currencies,
           -- A payment's amount per status is its first line's (the smallest
           -- [line, amount] pair); further lines with the same status are
           -- duplicates, reported as such, not added up. No ordered aggregate: in
           -- PostgreSQL 15 each one (and each `distinct`) sorts per group, a
           -- million small sorts; Rust sorts the few lines of a key instead.
           coalesce((min(array[line, amount]) filter (where status = 'settled'))[2], 0)
               as settled,
           coalesce((min(array[line, amount]) filter (where status = 'refunded'))[2], 0)
               as refunded,
           array_agg(line) filter (where status = 'settled') as settled_lines,
           array_agg(line) filter (where status = 'refunded') as refunded_lines,
           array_agg(line) filter (where status = 'failed') as failed_lines,
           min(line) as first_line
    from settlement_lines where run_id = $1
    group by 1),
-- Citus cannot run the lateral join of the plain form (entries and
-- transactions are distributed by different columns): each step is its own
-- statement on the distributed tables, by id, its result joined on the
-- coordinator.
candidates as materialized (
    select x.external_ref, x.id, x.seq from transactions x
    where x.external_ref in (select external_ref from per_key where payment_id is null)
      and x.kind = 'payment' and coalesce(x.account_ids && $2::text[], false)),
by_ref as materialized (
    select distinct on (external_ref) external_ref, id from candidates
    order by external_ref, seq),
t as materialized (
    select t.id, t.currency, t.status, t.legs from transactions t
    where t.id in (select payment_id from per_key where payment_id is not null
                   union all select id from by_ref)
      and t.kind = 'payment' and coalesce(t.account_ids && $2::text[], false)),
gross as materialized (
    select transaction_id, sum(amount) as gross from entries
    where transaction_id in (select id from t where status = 'posted') and amount > 0
    group by transaction_id),
reversals as materialized (
    select r.id, r.reverses from transactions r
    where r.reverses in (select id from t) and r.status = 'posted'),
reversal_credits as materialized (
    select transaction_id, sum(amount) as credited from entries
    where transaction_id in (select id from reversals) and amount > 0
    group by transaction_id)
select f.payment_id, f.external_ref, f.currencies as "currencies!", f.settled as "settled!",
       f.refunded as "refunded!", f.settled_lines, f.refunded_lines, f.failed_lines,
       f.first_line as "first_line!",
       t.id as "ledger_id?", t.currency as "ledger_currency?", t.status as "ledger_status?",
       (case when t.status = 'posted' then coalesce(g.gross, 0)
             else (select coalesce(sum((leg ->> 'amount')::bigint), 0)
                   from jsonb_array_elements(t.legs) leg
                   where (leg ->> 'amount')::bigint > 0)
        end)::bigint as "ledger_gross?",
       (select coalesce(sum(c.credited), 0) from reversals v
        join reversal_credits c on c.transaction_id = v.id
        where v.reverses = t.id)::bigint as "ledger_refunded?"
from per_key f
left join by_ref b on f.payment_id is null and b.external_ref = f.external_ref
left join t on t.id = coalesce(f.payment_id, b.id)
left join gross g on g.transaction_id = t.id
order by f.first_line
