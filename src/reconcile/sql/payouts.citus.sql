-- The run's payouts (lines sharing a payout_ref) with the ledger's gross of their payments,
-- the disagreeing ones first: reconcile/matching.rs `payouts`, on Citus.
with s as materialized (
    select payout_ref, currency, status, amount, fee, payment_id, external_ref
    from settlement_lines where run_id = $1 and payout_ref is not null),
-- The plain form's lateral join as statements by id on the distributed tables,
-- joined on the coordinator (see key_rows.citus.sql).
candidates as materialized (
    select x.external_ref, x.id, x.seq from transactions x
    where x.external_ref in (select external_ref from s where payment_id is null)
      and x.kind = 'payment' and coalesce(x.account_ids && $2::text[], false)),
by_ref as materialized (
    select distinct on (external_ref) external_ref, id from candidates
    order by external_ref, seq),
t as materialized (
    select t.id from transactions t
    where t.id in (select payment_id from s where payment_id is not null
                   union all select id from by_ref)
      and t.kind = 'payment' and coalesce(t.account_ids && $2::text[], false)),
gross as materialized (
    select transaction_id, sum(amount) as gross from entries
    where transaction_id in (select id from t) and amount > 0
    group by transaction_id)
select s.payout_ref as "payout_ref!", min(s.currency) as "currency!", count(*) as "lines!",
       count(*) over () as "total!",
       (coalesce(sum(s.amount) filter (where s.status = 'settled'), 0)
        = coalesce(sum(l.gross) filter (where s.status = 'settled'), 0)) as "agrees!",
       coalesce(sum(s.amount) filter (where s.status = 'settled'), 0)::text as "gross!",
       coalesce(sum(s.amount) filter (where s.status = 'refunded'), 0)::text as "refunded!",
       sum(s.fee)::text as "fee!",
       coalesce(sum(l.gross) filter (where s.status = 'settled'), 0)::text as "ledger_gross!"
from s
left join by_ref b on s.payment_id is null and b.external_ref = s.external_ref
left join (select t.id, coalesce(g.gross, 0) as gross
           from t left join gross g on g.transaction_id = t.id) l
  on l.id = coalesce(s.payment_id, b.id)
group by s.payout_ref order by 5, s.payout_ref limit $3
