-- The posted payments of the window (by effective date: the business date a provider
-- settles by) that no line of the run names, oldest first:
-- reconcile/matching.rs `missing_rows`, plain PostgreSQL.
with by_ref as materialized (
    -- The payments that lines without a payment_id name: per reference, this
    -- provider's oldest payment with it, exactly as key_rows.plain.sql takes it.
    -- A second payment with the same reference is not named by that line.
    select p.id
    from (select distinct external_ref from settlement_lines
          where run_id = $1 and payment_id is null) s
    cross join lateral (select x.id from transactions x
                        where x.external_ref = s.external_ref and x.kind = 'payment'
                          and coalesce(x.account_ids && $2::text[], false)
                        order by x.seq limit 1) p)
select t.id, t.external_ref, t.currency, coalesce(t.effective_at, t.posted_at) as "posted_at!",
       (select coalesce(sum(e.amount), 0) from entries e
        where e.transaction_id = t.id and e.amount > 0)::bigint as "gross!"
from transactions t
where t.kind = 'payment' and t.status = 'posted' and t.account_ids && $2::text[]
  and coalesce(t.effective_at, t.posted_at) between $3 and $4
  and not exists (select 1 from settlement_lines s where s.run_id = $1 and s.payment_id = t.id)
  and not exists (select 1 from by_ref r where r.id = t.id)
order by coalesce(t.effective_at, t.posted_at)
