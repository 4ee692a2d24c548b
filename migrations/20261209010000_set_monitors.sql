-- Balance monitors on account sets (docs/api.md, Balance monitors): the same rows as a
-- wallet's monitors, owned by a set instead, evaluated on the set's balances (the sums over
-- its wallets). A posting, capture or void of a wallet in a monitored set locks the set's row
-- after the wallets' (src/ledger/posting/load.rs), reads the set's balances under that lock
-- and follows them through every change it makes.
alter table account_monitors
    alter column account_id drop not null,
    add column set_id text references account_sets (id),
    add constraint account_monitors_owner_check check ((account_id is null) <> (set_id is null));
create index account_monitors_set on account_monitors (set_id) where deleted_at is null;

-- Whether a set has monitors, read by the changes of its wallets: a set without monitors (or
-- limits) is never locked by them. Set and cleared under the set's row lock.
alter table account_sets add column has_monitors boolean not null default false;
