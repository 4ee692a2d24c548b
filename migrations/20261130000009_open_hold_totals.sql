-- What the open, unexpired holds of each account reserve, defined once. The write path decides
-- against it (a wallet's pending_out, read with the chain head after the wallet's lock) and the
-- balance reads show it; two copies of the sum could drift (an expiry compared one way here and
-- another way there) and let a debit spend what a balance read says is reserved.
create view open_hold_totals as
select account_id,
       coalesce(sum(-amount) filter (where amount < 0), 0)::bigint as pending_out,
       coalesce(sum(amount) filter (where amount > 0), 0)::bigint as pending_in
from open_holds
where expires_at > now()
group by account_id;
