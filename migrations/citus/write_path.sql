-- Functions the write path calls on Citus, applied by `migrate` on a coordinator on every run
-- after migrations/citus/journal.sql (src/db/citus.rs), in the distribution's transaction.
-- Citus propagates a function created on the coordinator to every node, and to a node added
-- later; `create or replace` replaces the body everywhere. docs/scaling.md, "Locks taken at
-- once", says why they exist and what they cost.
--
-- account_locked_now: an account locked without waiting (wallets FOR UPDATE; system accounts
-- FOR SHARE, or FOR UPDATE when the pass takes them exclusively), and for a wallet its state
-- read after the lock, as one jsonb. Called per row of one statement that reaches every shard
-- of a small group's accounts at once (src/ledger/store/locks.rs, `lock_accounts_at_once`):
-- the shards are locked in parallel, in no global order, which is safe only because no lock
-- is waited for. A row held elsewhere fails the statement at once with lock_not_available
-- (55P03), and the write path rolls back and locks again in the global order, waiting.
--
-- It runs on the worker that holds the row, inside the shard's query; its statements name the
-- distributed tables, which Citus plans there and runs on the local shard in the same
-- transaction. Citus refuses a distributed statement inside a shard's query unless
-- citus.allow_nested_distributed_execution is on: safe here, since every row read is
-- co-located with the row locked.
create or replace function account_locked_now(account text, kind text, exclusive_systems boolean)
    returns jsonb
    language plpgsql volatile
    set citus.allow_nested_distributed_execution to 'on'
as $fn$
declare
    locked record;
    state jsonb;
begin
    if kind = 'wallet' or exclusive_systems then
        select a.id, a.currency, a.type as kind, a.status, a.overdraft_limit, a.has_limits,
               a.has_monitors, a.in_sets
          into locked from accounts a where a.id = account for update nowait;
    else
        select a.id, a.currency, a.type as kind, a.status, a.overdraft_limit, a.has_limits,
               a.has_monitors, a.in_sets
          into locked from accounts a where a.id = account for share nowait;
    end if;
    select to_jsonb(s) into state from wallet_state_under_lock(account, kind) s;
    return to_jsonb(locked) || coalesce(state, '{}'::jsonb);
end $fn$;

-- wallet_state_under_lock: a wallet's last entry and its open holds' reservations, for
-- account_locked_now. The read must come after the lock: a read in the locking statement's
-- own snapshot could miss what the lock's previous holder committed. A VOLATILE function
-- takes a fresh snapshot for each statement it runs, so this read, a statement of its own,
-- sees everything committed before the lock was taken. It is the statement `wallet_states`
-- runs per shard (src/ledger/store/reads.rs), for one wallet, through EXECUTE: Citus cannot
-- plan the view's aggregate with a PL/pgSQL parameter left unbound, and EXECUTE binds it
-- before planning.
create or replace function wallet_state_under_lock(wallet text, kind text)
    returns table (head_sequence bigint, head_balance bigint, head_ledger_time timestamptz,
                   head_chain_hash bytea, pending_out bigint, pending_in bigint)
    language plpgsql volatile
    set citus.allow_nested_distributed_execution to 'on'
as $fn$
begin
    if kind <> 'wallet' then
        return;
    end if;
    return query execute
        'select h.sequence, h.balance_after, h.ledger_time, h.chain_hash,
                coalesce(p.pending_out, 0)::bigint, coalesce(p.pending_in, 0)::bigint
         from accounts w
         left join lateral (
             select sequence, balance_after, ledger_time, chain_hash from entries
             where account_id = w.id and account_id = $1 and sequence is not null
             order by sequence desc limit 1) h on true
         left join lateral (
             select pending_out, pending_in from open_hold_totals
             where account_id = w.id and account_id = $1 offset 0) p on true
         where w.id = $1'
        using wallet;
end $fn$;
