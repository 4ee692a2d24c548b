-- Reconciliation runs against providers' settlement files.

-- One row per run: what was compared (provider, options), under which key (SHA-256 of the
-- provider, the file's content and the options: the same again returns this run unless
-- forced), and everything it found, so the API can serve a run long after its files are gone.
create table reconciliation_runs (
    id         uuid primary key,
    -- Insertion order, for newest-first cursors.
    seq        bigint generated always as identity unique,
    key        text not null check (key ~ '^[0-9a-f]{64}$'),
    provider   text not null,
    options    jsonb not null,
    clean      boolean not null,
    -- The whole report (summary, exceptions, matched, payouts, invariant findings).
    report     jsonb not null,
    created_at timestamptz not null default now()
);
create index reconciliation_runs_key on reconciliation_runs (key, created_at desc);

-- Staging for one run's parsed settlement lines: filled with COPY, joined with the ledger,
-- and emptied in the same database transaction. Unlogged: it never holds anything that is
-- not recomputable from the file.
create unlogged table settlement_lines (
    run_id      uuid not null,
    line        bigint not null,
    payment_id  uuid,
    external_ref text,
    currency    text not null,
    status      text not null check (status in ('settled', 'refunded', 'failed')),
    amount      bigint not null check (amount >= 0),
    fee         bigint not null check (fee >= 0),
    settled_at  timestamptz not null,
    payout_ref  text,
    primary key (run_id, line),
    check (payment_id is not null or external_ref is not null)
);
create index settlement_lines_payment on settlement_lines (run_id, payment_id);
create index settlement_lines_ref on settlement_lines (run_id, external_ref);
