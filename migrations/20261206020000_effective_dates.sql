-- Effective dates: when a transaction counts for the business (an imported payment's date),
-- beside its ledger time (when the ledger wrote it). Null in both tables means "the same as the
-- ledger time", which is every transaction that was not backdated: writers that do not
-- backdate store and index nothing more (docs/api.md, Effective dates).
--
-- A backdated transaction's `effective_at` is earlier than its ledger time (`posted_at`,
-- each entry's `ledger_time`), never later, and only a posted transaction has one.
alter table transactions add column effective_at timestamptz;
alter table transactions add constraint transactions_effective_at_check
    check (effective_at is null or (posted_at is not null and effective_at < posted_at));
alter table entries add column effective_at timestamptz;
alter table entries add constraint entries_effective_at_check
    check (effective_at is null or effective_at < ledger_time);

-- Balances by effective time read the backdated entries of an account apart from the rest
-- (src/ledger/effective.rs): few rows, and none for an account never backdated.
create index if not exists entries_backdated on entries (account_id, effective_at)
    where effective_at is not null;

-- The effective date is part of the creation record: as immutable as the rest of it. Citus
-- replaces the function on every node over connections this transaction has used, which it
-- allows only one shard at a time (see 20261205140000_creation_outcome.sql).
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
       or new.effective_at is distinct from old.effective_at then
        raise exception 'the creation record of % is immutable', old.id
            using errcode = 'integrity_constraint_violation';
    end if;
    return new;
end $$;
