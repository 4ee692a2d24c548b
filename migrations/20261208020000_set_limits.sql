-- Velocity limits on account sets (docs/api.md, Velocity limits): the same rows as a wallet's
-- limits, owned by a set instead. A posting of a wallet in a limited set locks the set's row
-- (after the wallets', src/ledger/posting/load.rs) and checks the set's limits against the
-- set's own movements and hold copies.
alter table account_limits
    alter column account_id drop not null,
    add column set_id text references account_sets (id),
    add constraint account_limits_owner_check check ((account_id is null) <> (set_id is null));
create index account_limits_set on account_limits (set_id) where deleted_at is null;

-- Whether a set has limits, read by the postings of its wallets: a set without limits is
-- never locked by them. Set and cleared under the set's row lock.
alter table account_sets add column has_limits boolean not null default false;
