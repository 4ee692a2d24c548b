-- The run's payouts (lines sharing a payout_ref) with the ledger's gross of their payments,
-- the disagreeing ones first: reconcile/matching.rs `payouts`, plain PostgreSQL.
select s.payout_ref as "payout_ref!", min(s.currency) as "currency!", count(*) as "lines!",
       count(*) over () as "total!",
       (coalesce(sum(s.amount) filter (where s.status = 'settled'), 0)
        = coalesce(sum(l.gross) filter (where s.status = 'settled'), 0)) as "agrees!",
       coalesce(sum(s.amount) filter (where s.status = 'settled'), 0)::text as "gross!",
       coalesce(sum(s.amount) filter (where s.status = 'refunded'), 0)::text as "refunded!",
       sum(s.fee)::text as "fee!",
       coalesce(sum(l.gross) filter (where s.status = 'settled'), 0)::text as "ledger_gross!"
from settlement_lines s
left join lateral (
    select (select coalesce(sum(e.amount), 0) from entries e
            where e.transaction_id = t.id and e.amount > 0) as gross
    from transactions t
    where t.id = coalesce(s.payment_id,
                          (select x.id from transactions x
                           where x.external_ref = s.external_ref and x.kind = 'payment'
                             and coalesce(x.account_ids && $2::text[], false)
                           order by x.seq limit 1))
      and t.kind = 'payment' and coalesce(t.account_ids && $2::text[], false)) l on true
where s.run_id = $1 and s.payout_ref is not null
group by s.payout_ref order by 5, s.payout_ref limit $3
