-- Every balance stays within ±(2^53 − 1), system accounts included (issue 18, item 1).
--
-- A system account's entries are bounded one by one, but nothing bounded their sum: two
-- postings of 2^53 − 1 took a clearing account to 2^54 − 2, and past 2^63 every sum of its
-- entries failed with `bigint out of range` (the account's reads, and the checkpoint statement
-- for every system account). The write path now refuses such a posting (`balance_overflow`,
-- src/ledger/posting.rs); here the schema holds the line where it can without serializing the
-- writers of a system account:
--
-- * a checkpoint is a balance, so it is kept in the range (NOT VALID: a row written before
--   this rule is left as it is, and `verify` reports the account as `balance_range`);
alter table account_checkpoints
    add constraint account_checkpoints_posted_range
        check (posted between -9007199254740991 and 9007199254740991) not valid;

-- * the open-hold totals saturate one past the range instead of failing: a read of an account
--   whose holds were taken out of range before this rule answers a clear refusal (409
--   `balance_out_of_range`), not a 500, and the write path, which reads this view for its
--   wallets, sees a total beyond the range and refuses to add to it.
create or replace view open_hold_totals as
select account_id,
       least(coalesce(sum(-amount) filter (where amount < 0), 0), 9007199254740992)::bigint
           as pending_out,
       least(coalesce(sum(amount) filter (where amount > 0), 0), 9007199254740992)::bigint
           as pending_in
from open_holds
where expires_at > now()
group by account_id;
