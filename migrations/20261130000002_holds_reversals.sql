-- Holds (pending transactions), their capture and release, and reversals.

-- A hold is a transaction in status 'pending' until it is posted (captured), voided or expired.
-- A reversal is a transaction of kind 'reversal' that points at the posted transaction it
-- reverses; the amount already reversed is the sum over those rows, never a stored counter.
alter table transactions
    drop constraint transactions_kind_check,
    add constraint transactions_kind_check
        check (kind in ('transaction', 'transfer', 'payment', 'reversal')),
    drop constraint transactions_refusal_code_check,
    add constraint transactions_refusal_code_check
        check (refusal_code in ('insufficient_funds', 'account_frozen', 'account_closed',
                                'reversal_exceeds_original')),
    add column expires_at timestamptz,
    add column reverses uuid references transactions (id),
    -- For a reversal: how much of the original it gives back (positive minor units).
    add column reversed_amount bigint check (reversed_amount between 1 and 9007199254740991),
    -- For a captured hold: how much was captured (the rest was released).
    add column captured_amount bigint check (captured_amount between 1 and 9007199254740991),
    -- The post or void that ended a hold, canonical, and the exact answer it got: a repeat of the
    -- same request replays the answer; another request meets the status it left behind.
    add column resolution_request jsonb,
    add column resolution_response text,
    add constraint transactions_hold_expiry check ((status = 'pending') <= (expires_at is not null)),
    add constraint transactions_reversal_link
        check ((kind = 'reversal') = (reverses is not null and reversed_amount is not null));

create index transactions_reverses on transactions (reverses) where reverses is not null;
create index transactions_pending_expiry on transactions (expires_at) where status = 'pending';

-- The open holds of each account: one row per hold leg while its hold is pending, removed in
-- the same database transaction that posts, voids or expires it. pending_out / pending_in are
-- summed from here (and only over rows not yet past expires_at), so a balance read never
-- scans the history of holds. The legs themselves stay on the transaction row, immutable.
create table open_holds (
    transaction_id uuid not null references transactions (id),
    account_id     text not null references accounts (id),
    -- Signed like an entry: negative = pending_out of the account, positive = pending_in.
    amount         bigint not null
                   check (amount <> 0 and amount between -9007199254740991 and 9007199254740991),
    expires_at     timestamptz not null,
    primary key (transaction_id, account_id)
);
create index open_holds_account on open_holds (account_id, expires_at);

-- A captured hold's resolution, like its creation, never changes afterwards; neither does
-- what a reversal reverses, nor a terminal status.
create function refuse_resolution_change() returns trigger language plpgsql as $$
begin
    if old.resolution_request is not null
       and (new.resolution_request is distinct from old.resolution_request
            or new.resolution_response is distinct from old.resolution_response
            or new.captured_amount is distinct from old.captured_amount) then
        raise exception 'the resolution of % is immutable', old.id
            using errcode = 'integrity_constraint_violation';
    end if;
    if new.reverses is distinct from old.reverses
       or new.reversed_amount is distinct from old.reversed_amount then
        raise exception 'what reversal % reverses is immutable', old.id
            using errcode = 'integrity_constraint_violation';
    end if;
    if old.status in ('posted', 'rejected', 'voided', 'expired') and new.status <> old.status then
        raise exception 'transaction % is %: a terminal status never changes', old.id, old.status
            using errcode = 'integrity_constraint_violation';
    end if;
    return new;
end $$;
create trigger transactions_resolution_immutable before update on transactions
    for each row execute function refuse_resolution_change();
