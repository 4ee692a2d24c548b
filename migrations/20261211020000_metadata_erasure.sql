-- Erasable transaction metadata (crypto-shredding, docs/verification.md "Erasable metadata"):
-- `POST /v1/transactions/{id}/metadata-erasure` empties a transaction's metadata, destroys its
-- salt and keeps the digest the seals took of it (20261211010000_transaction_seals.sql), in
-- one database transaction with every other stored copy emptied (the creation request and
-- answer, a capture's answer, the transaction's outbox events), an audit row naming who and
-- why, and a `transaction.metadata_erased` event.

-- Citus replaces the functions below on every node over connections this transaction uses,
-- which it allows one shard at a time (see 20261205140000_creation_outcome.sql); one PostgreSQL
-- has no such setting and skips it.
select set_config('citus.multi_shard_modify_mode', 'sequential', true)
where exists (select 1 from pg_extension where extname = 'citus');

-- The erasure's event. Its data is the transaction as it reads after the erasure.
alter table outbox_events
    drop constraint outbox_events_type_check,
    add constraint outbox_events_type_check check (type in (
        'transaction.posted', 'transaction.rejected', 'transaction.voided',
        'transaction.expired', 'transaction.reversed', 'hold.created',
        'account.frozen', 'account.closed', 'account.negative_balance',
        'balance.monitor_triggered', 'ledger.checkpoint', 'transaction.metadata_erased'));

-- Why a write was made, when the writer has to say (an erasure's reason); null for the writes
-- that need none. Bounded as the API bounds it.
alter table audit_log add column reason text check (length(reason) between 1 and 500);

-- A stored JSON answer or request with its `metadata` emptied: what an erasure leaves of it.
-- Anything else (a refusal's problem body, an answer without metadata) stays as it is.
create function without_metadata(stored jsonb) returns jsonb language sql immutable parallel safe as $$
    select case when jsonb_typeof(stored) = 'object' and stored ? 'metadata'
                then jsonb_set(stored, '{metadata}', '{}') else stored end
$$;

-- The creation record stays immutable, and now covers the metadata, its salt and the erasure
-- columns, with one exception: the erasure, once (erased columns set from null), which must
-- empty the metadata, drop the salt, keep exactly SHA-256(old salt ‖ old metadata::text)
-- (src/ledger/seals/metadata.rs, `digest`; every seal over the transaction checks against
-- it), and change the stored request and answer by their metadata only. The answer is text
-- (the bytes replayed), compared as JSON: the erasure writes it back without the metadata.
create or replace function refuse_creation_change() returns trigger language plpgsql as $$
declare
    erasing boolean := old.metadata_erased_at is null and new.metadata_erased_at is not null;
begin
    if new.id <> old.id or new.kind <> old.kind or new.currency <> old.currency
       or new.legs <> old.legs or new.account_ids <> old.account_ids
       or new.created_at <> old.created_at
       or new.creation_outcome <> old.creation_outcome
       or new.refusal_code is distinct from old.refusal_code
       or new.refusal_detail is distinct from old.refusal_detail
       or new.effective_at is distinct from old.effective_at
       or new.counter_currency is distinct from old.counter_currency
       or new.exchange_rate is distinct from old.exchange_rate
       or (not erasing
           and (new.creation_request <> old.creation_request
                or new.creation_response is distinct from old.creation_response
                or new.metadata <> old.metadata
                or new.metadata_salt is distinct from old.metadata_salt
                or new.metadata_erased_at is distinct from old.metadata_erased_at
                or new.metadata_erased_digest is distinct from old.metadata_erased_digest)) then
        raise exception 'the creation record of % is immutable', old.id
            using errcode = 'integrity_constraint_violation';
    end if;
    if erasing and not (
           new.metadata = '{}'::jsonb and new.metadata_salt is null
           and new.metadata_erased_digest is not distinct from
               sha256(coalesce(old.metadata_salt, ''::bytea) || convert_to(old.metadata::text, 'UTF8'))
           and new.creation_request = without_metadata(old.creation_request)
           and new.creation_response::jsonb is not distinct from
               without_metadata(old.creation_response::jsonb)) then
        raise exception 'an erasure of the metadata of % must empty it, drop its salt, keep the digest of what it was and change nothing else', old.id
            using errcode = 'integrity_constraint_violation';
    end if;
    return new;
end $$;

-- A capture's answer is erased with the rest; once erased, a later capture's answer carries
-- no metadata either (it is rendered from the erased row, under the row's lock).
create or replace function refuse_resolution_change() returns trigger language plpgsql as $$
declare
    erasing boolean := old.metadata_erased_at is null and new.metadata_erased_at is not null;
begin
    if old.resolution_request is not null
       and (new.resolution_request is distinct from old.resolution_request
            or (new.resolution_response is distinct from old.resolution_response
                and not (erasing and new.resolution_response::jsonb is not distinct from
                                     without_metadata(old.resolution_response::jsonb)))
            or new.captured_amount is distinct from old.captured_amount) then
        raise exception 'the resolution of % is immutable', old.id
            using errcode = 'integrity_constraint_violation';
    end if;
    if new.metadata_erased_at is not null
       and new.resolution_response is distinct from old.resolution_response
       and new.resolution_response::jsonb is distinct from without_metadata(new.resolution_response::jsonb) then
        raise exception 'the metadata of % is erased: its resolution cannot carry any', old.id
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
