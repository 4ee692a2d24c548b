-- Currency exchange: one transaction that debits a wallet in one currency and credits a wallet
-- in another, through the exchange's system accounts `fx:{currency}` (docs/api.md, Currency
-- exchange). Its entries balance per currency, which the journal rule already demands; what is
-- new is that a transaction may hold entries in two currencies: its own (`currency`, the debited
-- side) and `counter_currency`, at the `exchange_rate` (units of the counter currency per unit
-- of its own) the caller gave or the two amounts imply. A reversal of an exchange is one too.
alter table transactions
    drop constraint transactions_kind_check,
    add constraint transactions_kind_check
        check (kind in ('transaction', 'transfer', 'payment', 'reversal', 'exchange'));
alter table transactions add column counter_currency text;
alter table transactions add column exchange_rate numeric;
alter table transactions add constraint transactions_exchange_check check (
    (counter_currency is null) = (exchange_rate is null)
    and (counter_currency is null
         or (counter_currency ~ '^[A-Z]{3}$' and counter_currency <> currency
             and exchange_rate > 0 and kind in ('exchange', 'reversal')))
    and (kind <> 'exchange' or counter_currency is not null));

-- The journal rule "each entry is in its transaction's currency" becomes "in one of its
-- transaction's currencies". On Citus the shard trigger checks no transaction (it cannot see
-- that table) and migrations/citus/distribute.sql replaces this function anyway; the rule is
-- checked there by src/ledger/posting/cross_shard.rs, so this file leaves Citus's own alone.
do $migration$
begin
    if exists (select 1 from pg_extension where extname = 'citus') then
        return;
    end if;
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
        if exists (select 1 from (select transaction_id, count(*) as written from new_entries
                                  group by transaction_id) t
                   where (select count(*) from entries e
                          where e.transaction_id = t.transaction_id) <> t.written) then
            raise exception 'entries of a transaction must all be written in one statement'
                using errcode = 'check_violation';
        end if;
        if exists (select 1 from new_entries n
                   where (select a.currency = n.currency
                                 and (a.type = 'wallet') = (n.sequence is not null)
                          from accounts a where a.id = n.account_id) is not true
                      or (select (t.currency = n.currency or t.counter_currency = n.currency)
                                 and t.status = 'posted'
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
end $migration$;

-- The exchange's terms are part of the creation record, as immutable as the rest of it (see
-- 20261206020000_effective_dates.sql for the Citus setting).
select set_config('citus.multi_shard_modify_mode', 'sequential', true)
where exists (select 1 from pg_extension where extname = 'citus');
create or replace function refuse_creation_change() returns trigger language plpgsql as $$
begin
    if new.id <> old.id or new.kind <> old.kind or new.currency <> old.currency
       or new.legs <> old.legs or new.account_ids <> old.account_ids
       or new.created_at <> old.created_at
       or new.creation_request <> old.creation_request
       or new.creation_outcome <> old.creation_outcome
       or new.creation_response is distinct from old.creation_response
       or new.refusal_code is distinct from old.refusal_code
       or new.refusal_detail is distinct from old.refusal_detail
       or new.effective_at is distinct from old.effective_at
       or new.counter_currency is distinct from old.counter_currency
       or new.exchange_rate is distinct from old.exchange_rate then
        raise exception 'the creation record of % is immutable', old.id
            using errcode = 'integrity_constraint_violation';
    end if;
    return new;
end $$;
