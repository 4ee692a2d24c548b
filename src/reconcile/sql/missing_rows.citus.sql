-- The posted payments of the window (by effective date: the business date a provider
-- settles by) that no line of the run names, oldest first:
-- reconcile/matching.rs `missing_rows`, on Citus.
with candidates as materialized (
    -- The plain form's steps, each its own statement on the distributed tables
    -- (Citus runs no correlated subquery across them), joined on the coordinator.
    select x.external_ref, x.id, x.seq from transactions x
    where x.external_ref in (select external_ref from settlement_lines
                             where run_id = $1 and payment_id is null)
      and x.kind = 'payment' and coalesce(x.account_ids && $2::text[], false)),
named as materialized (
    select payment_id as id from settlement_lines
    where run_id = $1 and payment_id is not null
    union
    select id from (select distinct on (external_ref) id from candidates
                    order by external_ref, seq) r),
w as materialized (
    select t.id, t.external_ref, t.currency, coalesce(t.effective_at, t.posted_at) as posted_at
    from transactions t
    where t.kind = 'payment' and t.status = 'posted' and t.account_ids && $2::text[]
      and coalesce(t.effective_at, t.posted_at) between $3 and $4),
gross as materialized (
    select transaction_id, sum(amount) as gross from entries
    where transaction_id in (select id from w) and amount > 0
    group by transaction_id)
select w.id, w.external_ref, w.currency, w.posted_at as "posted_at!",
       coalesce(g.gross, 0)::bigint as "gross!"
from w left join gross g on g.transaction_id = w.id
where not exists (select 1 from named n where n.id = w.id)
order by w.posted_at
