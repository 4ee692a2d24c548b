-- Indexes for searching accounts and transactions (`GET /v1/accounts`, the `metadata[...]`
-- filters of both lists; src/ledger/search.rs).
--
-- Metadata: a GIN index with `jsonb_path_ops`, which serves `metadata @@ <path predicate>`
-- for any key, nested or not, and any number of ANDed filters. Partial: rows without
-- metadata (most transfers) add nothing to it, so writers that send no metadata pay nothing;
-- the searches say `metadata <> '{}'`, which every filter implies.
--
-- Account ids: a bytewise btree, so that a prefix is a key range and the list's order (and its
-- cursor) is the same whatever collation the database was created with.
--
-- `if not exists`: on a large ledger, create these first with `create index concurrently` under
-- the same names and definitions (docs/operations.md, "migrate"); this migration then
-- takes no lock that waits on writers.
create index if not exists accounts_metadata on accounts using gin (metadata jsonb_path_ops)
    where metadata <> '{}';
create index if not exists transactions_metadata on transactions using gin (metadata jsonb_path_ops)
    where metadata <> '{}';
create index if not exists accounts_id_bytewise on accounts (id collate "C");
