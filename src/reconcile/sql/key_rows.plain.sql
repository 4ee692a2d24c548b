-- Each key of a run's settlement lines (a payment id, else a reference) with what the
-- ledger has for it, in the file's order: reconcile/matching.rs `key_rows`, plain PostgreSQL.
with per_key as (
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
    group by 1)
select f.payment_id, f.external_ref, f.currencies as "currencies!", f.settled as "settled!",
       f.refunded as "refunded!", f.settled_lines, f.refunded_lines, f.failed_lines,
       f.first_line as "first_line!",
       l.id as "ledger_id?", l.currency as "ledger_currency?", l.status as "ledger_status?",
       l.gross as "ledger_gross?", l.reversed as "ledger_refunded?"
from per_key f
left join lateral (
    -- What was posted, not what was asked: a posted payment's gross is the sum of
    -- its credit entries (a partial capture posted less than it authorized); one
    -- not posted has no entries, so its requested legs stand in. Refunds are the
    -- credit entries of its posted reversals.
    select t.id, t.currency, t.status,
           (case when t.status = 'posted'
                 then (select coalesce(sum(e.amount), 0) from entries e
                       where e.transaction_id = t.id and e.amount > 0)
                 else (select coalesce(sum((leg ->> 'amount')::bigint), 0)
                       from jsonb_array_elements(t.legs) leg
                       where (leg ->> 'amount')::bigint > 0)
            end)::bigint as gross,
           coalesce((select sum(e.amount) from transactions r
                     join entries e on e.transaction_id = r.id
                     where r.reverses = t.id and r.status = 'posted' and e.amount > 0),
                    0)::bigint as reversed
    from transactions t
    -- One primary-key lookup per payment (its id, else the id its external_ref
    -- names among this provider's payments: another provider may use the same
    -- reference); the provider check is a filter on the rows of that reference,
    -- kept out of the GIN index on purpose (through coalesce), which would match
    -- every payment.
    where t.id = coalesce(f.payment_id,
                          (select x.id from transactions x
                           where x.external_ref = f.external_ref and x.kind = 'payment'
                             and coalesce(x.account_ids && $2::text[], false)
                           order by x.seq limit 1))
      and t.kind = 'payment' and coalesce(t.account_ids && $2::text[], false)) l on true
order by f.first_line
