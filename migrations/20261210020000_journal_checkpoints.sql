-- Signed checkpoints of the journal (docs/verification.md): `wallet-ledger seal` commits, as
-- checkpoint n, a Merkle root over every wallet's chain head (its last entry's sequence and
-- link) and the root of checkpoint n - 1, signed with an Ed25519 key. An auditor who keeps
-- the roots can later check that no entry at or before a sealed head was changed, removed or
-- moved, even by someone who recomputed every link after it. Plain tables on Citus too, on
-- the coordinator, where `seal` runs.
create table journal_checkpoints (
    n             bigint primary key check (n >= 1),
    sealed_at     timestamptz not null,
    -- Null for the first checkpoint only: each later one names the root before it.
    previous_root bytea check (octet_length(previous_root) = 32),
    head_count    bigint not null check (head_count >= 0),
    heads_root    bytea not null check (octet_length(heads_root) = 32),
    -- SHA-256 of the checkpoint's text (src/ledger/seals/mod.rs, Checkpoint::text).
    root          bytea not null check (octet_length(root) = 32),
    public_key    bytea not null check (octet_length(public_key) = 32),
    signature     bytea not null check (octet_length(signature) = 64),
    check ((n = 1) = (previous_root is null))
);

-- The heads each checkpoint sealed that the one before it had not (new or moved on): a
-- wallet's head at checkpoint n is its row with the greatest checkpoint <= n.
create table journal_checkpoint_heads (
    checkpoint bigint not null references journal_checkpoints (n),
    account_id text not null,
    sequence   bigint not null check (sequence >= 1),
    link       bytea not null check (octet_length(link) = 32),
    primary key (account_id, checkpoint)
);
create index journal_checkpoint_heads_checkpoint on journal_checkpoint_heads (checkpoint);

create trigger journal_checkpoints_immutable before update or delete on journal_checkpoints
    for each row execute function refuse_entry_change();
create trigger journal_checkpoints_no_truncate before truncate on journal_checkpoints
    for each statement execute function refuse_entry_change();
create trigger journal_checkpoint_heads_immutable before update or delete on journal_checkpoint_heads
    for each row execute function refuse_entry_change();
create trigger journal_checkpoint_heads_no_truncate before truncate on journal_checkpoint_heads
    for each statement execute function refuse_entry_change();

-- Each checkpoint is published as an outbox event in the transaction that commits it, so that
-- auditors' webhooks collect the roots as they are sealed (docs/outbox.md).
alter table outbox_events
    drop constraint outbox_events_type_check,
    add constraint outbox_events_type_check check (type in (
        'transaction.posted', 'transaction.rejected', 'transaction.voided',
        'transaction.expired', 'transaction.reversed', 'hold.created',
        'account.frozen', 'account.closed', 'account.negative_balance',
        'balance.monitor_triggered', 'ledger.checkpoint'));
