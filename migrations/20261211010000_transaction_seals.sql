-- Checkpoints also seal transactions (docs/verification.md, issue 40): checkpoint n commits to
-- a Merkle root over every transaction whose entries were written between checkpoint n − 1's
-- horizon and its own (entries' xid), each leaf a digest of its entries and of its metadata.
-- System accounts, which keep no chain on the write path, get theirs at the same time: the
-- sealer chains each one's entries of the window and seals its head beside the wallets'.

-- A transaction's metadata is sealed as a salted digest, SHA-256(salt ‖ metadata as
-- PostgreSQL prints it), so that erasing personal data (the metadata and its salt replaced,
-- the digest kept in metadata_erased_digest) leaves every seal checkable and the kept digest
-- says nothing about what was erased. Rows written before this migration have no salt.
--
-- On a database Citus distributed already, three things are refused that a fresh one takes
-- (tests/citus/upgrade.rs): an ALTER TABLE of several subcommands with a constraint among
-- them, a column added with its constraint, and an ADD CONSTRAINT in a query string of several
-- statements (Citus sends the whole string to the shards, as one prepared statement, and
-- this file is one string; a column's default too). So the columns come one statement each,
-- and the constraints, the default and the entries' index through EXECUTE, whose string is the
-- one statement alone.
alter table transactions add column metadata_salt bytea;
alter table transactions add column metadata_erased_at timestamptz;
alter table transactions add column metadata_erased_digest bytea;
do $$
begin
    execute 'alter table transactions add constraint transactions_metadata_salt_check
                 check (octet_length(metadata_salt) = 16)';
    execute 'alter table transactions add constraint transactions_metadata_erased_digest_check
                 check (octet_length(metadata_erased_digest) = 32)';
    execute 'alter table transactions add constraint transactions_metadata_erasure_check
                 check ((metadata_erased_at is null) = (metadata_erased_digest is null))';
    execute 'alter table transactions alter column metadata_salt
                 set default uuid_send(gen_random_uuid())';
end $$;

-- Version 2 checkpoints name their transaction window's end and the transactions' root; the
-- checkpoints sealed before (version 1) have neither.
alter table journal_checkpoints
    add column transactions_horizon xid8,
    add column transaction_count bigint check (transaction_count >= 0),
    add column transactions_root bytea check (octet_length(transactions_root) = 32),
    add constraint journal_checkpoints_version_check
        check ((transactions_horizon is null) = (transaction_count is null)
               and (transaction_count is null) = (transactions_root is null));

-- Each sealed transaction's leaf, at its place in its checkpoint's tree (by transaction id's
-- bytes): a proof reads its checkpoint's leaves, `verify` recomputes them. On Citus a plain
-- table on the coordinator, where `seal` runs, as the other checkpoint tables.
create table journal_checkpoint_transactions (
    checkpoint     bigint not null references journal_checkpoints (n),
    leaf_index     bigint not null check (leaf_index >= 0),
    transaction_id uuid not null unique,
    leaf           bytea not null check (octet_length(leaf) = 32),
    primary key (checkpoint, leaf_index)
);

create trigger journal_checkpoint_transactions_immutable
    before update or delete on journal_checkpoint_transactions
    for each row execute function refuse_entry_change();
create trigger journal_checkpoint_transactions_no_truncate
    before truncate on journal_checkpoint_transactions
    for each statement execute function refuse_entry_change();

-- The sealer reads the entries of a window of xids. Entries are appended in roughly xid order,
-- so a block-range index finds a recent window for almost nothing on the write path (a btree
-- would be one more index insert per entry). PostgreSQL 15 has no BRIN class for xid8, so the
-- index is on the xid as a number; the sealer's reads name the same expression.
do $$
begin
    execute 'create index entries_xid_window on entries using brin (((xid::text)::bigint))';
end $$;
