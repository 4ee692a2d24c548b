-- A transaction's creation record says what the create decided, not which HTTP status answered
-- it: `creation_outcome` ('created' or 'refused') replaces `creation_status` (201 or 422), so
-- the ledger stores its own terms and the API alone turns them into statuses and bodies.
--
-- A refusal is stored as its `refusal_code` and `refusal_detail` (columns it always had) and no
-- answer: the API renders its problem from them. A refusal stored before this migration keeps
-- the exact answer it got in `creation_response`, and a replay sends those bytes as they are,
-- so every stored refusal replays byte for byte whatever later changes how a problem renders.
-- A creation keeps its answer (the resource's view, serialized once) as before.
--
-- One change a statement: Citus applies each of these to a distributed `transactions` as it
-- is (a constant default makes the new column without rewriting the table; only the refused
-- rows are updated). On Citus, the function below is replaced on every node over the
-- connections this transaction's other statements used, which Citus allows only when they
-- ran one shard at a time: sequential mode, for this transaction only (plain PostgreSQL has
-- no such setting and skips it).
select set_config('citus.multi_shard_modify_mode', 'sequential', true)
where exists (select 1 from pg_extension where extname = 'citus');
alter table transactions add column creation_outcome text not null default 'created';
update transactions set creation_outcome = 'refused' where creation_status = 422;
-- Every insert says which outcome it stores.
alter table transactions alter column creation_outcome drop default;
alter table transactions add constraint transactions_creation_outcome_check
    check (creation_outcome in ('created', 'refused'));
alter table transactions add constraint transactions_refused_is_rejected
    check ((status = 'rejected') = (creation_outcome = 'refused'));
alter table transactions alter column creation_response drop not null;
alter table transactions add constraint transactions_created_has_answer
    check (creation_outcome = 'refused' or creation_response is not null);

-- What a transaction was created from, what it moves, and the outcome it got never change:
-- replays compare against the request and answer the outcome; only its status moves on. A
-- refusal's answer is rendered from its code and detail, so they are part of the record too.
create or replace function refuse_creation_change() returns trigger language plpgsql as $$
begin
    if new.id <> old.id or new.kind <> old.kind or new.currency <> old.currency
       or new.legs <> old.legs or new.account_ids <> old.account_ids
       or new.created_at <> old.created_at
       or new.creation_request <> old.creation_request
       or new.creation_outcome <> old.creation_outcome
       or new.creation_response is distinct from old.creation_response
       or new.refusal_code is distinct from old.refusal_code
       or new.refusal_detail is distinct from old.refusal_detail then
        raise exception 'the creation record of % is immutable', old.id
            using errcode = 'integrity_constraint_violation';
    end if;
    return new;
end $$;

-- Its checks (201 or 422; rejected exactly when 422) go with it.
alter table transactions drop column creation_status;
