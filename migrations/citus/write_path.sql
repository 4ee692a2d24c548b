-- Functions the write path calls on Citus, applied by `migrate` on a coordinator on every run
-- after migrations/citus/journal.sql and the distribution (src/db/citus.rs), in the
-- distribution's transaction (two of them are distributed with the tables they write).
-- Citus propagates a function created on the coordinator to every node, and to a node added
-- later; `create or replace` replaces the body everywhere. docs/scaling.md, "Locks taken at
-- once", says why they exist and what they cost.

-- The first build's per-account functions, replaced by the per-shard one below.
drop function if exists account_locked_now(text, text, boolean);
drop function if exists wallet_state_under_lock(text, text);

-- accounts_locked_in_shard: the accounts of a posting that live on one shard, locked (wallets
-- FOR UPDATE; system accounts FOR SHARE, or FOR UPDATE when the pass takes them exclusively),
-- then read, each wallet with its state, as one jsonb array. The write path sends it in one
-- of two statements (src/ledger/store/locks.rs):
--   select accounts_locked_in_shard(a.id, $1, $2, $3, $4) from accounts a where a.id = any($1)
-- - in order, waiting (`wait`): once per shard, shards ascending, `$1` that shard's ids. This
--   is the global order every locker follows, so waiting cannot deadlock.
-- - at once (`not wait`, a small group): one statement over every shard of the group, which
--   Citus runs in parallel, so the shards are locked in no global order. That is safe only
--   because no lock is waited for: a row held elsewhere fails the statement at once with
--   lock_not_available (55P03), and the write path rolls back and locks in order instead.
-- The first call on a shard does the shard's work for all of `accounts` (a shard's relation
-- holds only its own rows, so `id = any(accounts)` there is this shard's share) and returns
-- the array; the statement's later calls on the shard return null. `statement` (a new uuid
-- per statement) tells them apart: the first call records it in a transaction-local setting
-- named after the shard.
--
-- The read comes after the lock, in a statement of its own: a read in the locking statement's
-- snapshot could miss what the lock's previous holder committed. A VOLATILE function takes a
-- fresh snapshot for each statement it runs, so the read sees everything committed before the
-- lock was taken. It is the per-shard wallet-state read of `wallet_states`
-- (src/ledger/store/reads.rs) with open_hold_totals' definition (migrations/
-- 20261202000012_balance_range.sql) written out on the shard: a rule changed there is
-- changed here too.
--
-- It runs on the worker that holds the shard, inside the shard's query, and reads the shard's
-- relations by name (accounts_<shardid>, and the co-located shards of entries and open_holds),
-- as the journal trigger does: plain PostgreSQL statements, which Citus does not plan. They
-- are prepared once per worker session (Citus keeps its connections to the workers), named
-- after the shard and a hash of their text, so that a changed text is prepared afresh.
-- They are planned once too: left to choose, PostgreSQL planned them anew on every call (its
-- generic estimate of `id = any($1)` exceeds the custom plan of a group's few ids), a fifth
-- of the function's time. A generic plan is made on the session's first calls and kept, so
-- the function also turns sequential scans off: a plan made while the shard was nearly empty
-- would otherwise scan it whole for the session's life (docs/performance.md, "A sequential
-- scan in the first statement of every group"; tests/citus/cluster.rs checks the plans).
create or replace function accounts_locked_in_shard(account text, accounts text[],
                                                    exclusive_systems boolean, wait boolean,
                                                    statement uuid)
    returns jsonb
    language plpgsql volatile
    set plan_cache_mode to 'force_generic_plan' set enable_seqscan to 'off'
as $fn$
declare
    shard bigint := get_shard_id_for_distribution_column('accounts', account);
    guard text := 'wallet_ledger.locked_in_shard_' || shard;
    locks text;
    read text;
    prepared text;
    locked jsonb;
begin
    if current_setting(guard, true) = statement::text then
        return null;
    end if;
    perform set_config(guard, statement::text, true);
    -- Wallets, then system accounts, each sorted, as one PostgreSQL's lock statement takes
    -- them (the Append of a UNION ALL runs its branches in order): the order a waiting
    -- locker needs.
    locks := format(
        'with wallets as (
             select 1 from %1$s where id = any($1) and type = ''wallet''
             order by id for update %2$s),
         shared as (
             select 1 from %1$s where id = any($1) and type = ''system'' and not $2
             order by id for share %2$s),
         exclusive as (
             select 1 from %1$s where id = any($1) and type = ''system'' and $2
             order by id for update %2$s)
         select count(*) from (select 1 from wallets union all select 1 from shared
                               union all select 1 from exclusive) locked',
        'public.accounts_' || shard, case when wait then '' else 'nowait' end);
    read := format(
        'select coalesce(jsonb_agg(jsonb_build_object(
                    ''id'', a.id, ''currency'', a.currency, ''kind'', a.type,
                    ''status'', a.status, ''overdraft_limit'', a.overdraft_limit,
                    ''has_limits'', a.has_limits, ''has_monitors'', a.has_monitors,
                    ''in_sets'', a.in_sets)
                || case when a.type = ''wallet'' then jsonb_build_object(
                    ''head_sequence'', h.sequence, ''head_balance'', h.balance_after,
                    ''head_ledger_time'', h.ledger_time, ''head_chain_hash'', h.chain_hash,
                    ''pending_out'', coalesce(p.pending_out, 0),
                    ''pending_in'', coalesce(p.pending_in, 0)) else ''{}'' end), ''[]'')
         from %s a
         left join lateral (
             select sequence, balance_after, ledger_time, chain_hash from %s
             where account_id = a.id and sequence is not null
             order by sequence desc limit 1) h on a.type = ''wallet''
         left join lateral (
             select least(coalesce(sum(-amount) filter (where amount < 0), 0),
                          9007199254740992)::bigint as pending_out,
                    least(coalesce(sum(amount) filter (where amount > 0), 0),
                          9007199254740992)::bigint as pending_in
             from %s where account_id = a.id and expires_at > now()) p on a.type = ''wallet''
         where a.id = any($1)',
        'public.accounts_' || shard,
        'public.entries_' || get_shard_id_for_distribution_column('entries', account),
        'public.open_holds_' || get_shard_id_for_distribution_column('open_holds', account));
    prepared := 'wallet_ledger_locks_' || shard || '_' || left(md5(locks), 12);
    if not exists (select 1 from pg_prepared_statements p where p.name = prepared) then
        execute format('prepare %s(text[], boolean) as %s', prepared, locks);
    end if;
    execute format('execute %s(%L, %L)', prepared, accounts, exclusive_systems);
    prepared := 'wallet_ledger_read_' || shard || '_' || left(md5(read), 12);
    if not exists (select 1 from pg_prepared_statements p where p.name = prepared) then
        execute format('prepare %s(text[]) as %s', prepared, read);
    end if;
    execute format('execute %s(%L)', prepared, accounts) into locked;
    return locked;
end $fn$;

-- Rows written one call per shard: what the write path sends instead of one multi-row
-- `insert ... values` when a statement's rows are many per shard (a consumer batch, a large
-- batch of creates; src/ledger/store/per_shard.rs decides). Citus writes each row of a
-- multi-row insert out again as SQL text for its shard, on the coordinator: a consumer
-- batch's largest cost there (docs/performance.md, "Rows written one call per shard"). A
-- call of these functions carries its shard's rows as arrays, and Citus delegates it whole
-- to the shard's worker (`create_distributed_function` with the first argument as the
-- distribution argument and `force_delegation`, so it is delegated inside a transaction
-- block too, as a write of the coordinated transaction: two-phase commit when it spans
-- workers, and a worker's error raised with its own SQLSTATE).
--
-- On the worker they insert into the shard's relation by name, as accounts_locked_in_shard
-- reads it, so what Citus would do for a write of the distributed table they do themselves:
-- - Values Citus evaluates on the coordinator come as arguments: the identities (`entries.id`,
--   `transactions.seq`, from the coordinator's sequences, whose order they keep; a worker's
--   own sequence hands out another range) and the entries' `xid` (the coordinator's, which
--   the checkpoints order by). A shard has no column defaults.
-- - shard_written_here: every row must belong to the called shard (the caller grouped them by
--   shard in an earlier statement), and the shard must still be placed on this node, checked
--   under the shard's metadata lock that a Citus writer takes (share) and a shard move takes
--   (exclusive) before it switches placements: a call that arrives after a move finished is
--   refused rather than written into the placement left behind. Citus lets only a table's owner take that lock,
--   and the service runs as another role (docs/operations.md, "Database roles"), so this
--   check runs with its owner's rights (`security definer`); it takes nothing but the lock.
create or replace function shard_written_here(tbl regclass, anchor anyelement, keys anyarray)
    returns bigint
    language plpgsql volatile security definer
    set search_path = pg_catalog, public
as $fn$
declare
    shard bigint := get_shard_id_for_distribution_column(tbl, anchor);
begin
    perform lock_shard_metadata(5, array[shard]); -- ShareLock
    if exists (select 1 from unnest(keys) k
               where get_shard_id_for_distribution_column(tbl, k) <> shard) then
        raise exception 'rows sent to shard % belong to another shard', shard
            using errcode = 'XX000';
    end if;
    if not exists (select 1 from pg_dist_placement p, pg_dist_local_group g
                   where p.shardid = shard and p.groupid = g.groupid) then
        raise exception 'shard % is no longer placed on this node', shard
            using errcode = '40001', hint = 'a shard move finished; write again';
    end if;
    return shard;
end $fn$;

-- entries_written_in_shard: the entries of `account`'s shard of entries, inserted in the
-- given order, in one statement (the shard's journal trigger checks them as a set). Returns
-- the number of rows written.
create or replace function entries_written_in_shard(
    account text, xid text, ids bigint[], transaction_ids uuid[], accounts text[],
    currencies text[], amounts bigint[], sequences bigint[], balances bigint[],
    ledger_times timestamptz[], effective_ats timestamptz[], chain_hashes bytea[])
    returns integer
    language plpgsql volatile
as $fn$
declare
    shard bigint := shard_written_here('entries', account, accounts);
    written integer;
begin
    execute format(
        'insert into public.entries_%s (id, transaction_id, account_id, currency, amount,
                                        sequence, balance_after, ledger_time, xid,
                                        effective_at, chain_hash)
         overriding system value
         select id, transaction_id, account, currency, amount, sequence, balance_after,
                ledger_time, $1::xid8, effective_at, chain_hash
         from unnest($2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
              with ordinality as e(id, transaction_id, account, currency, amount, sequence,
                                   balance_after, ledger_time, effective_at, chain_hash, n)
         order by n', shard)
        using xid, ids, transaction_ids, accounts, currencies, amounts, sequences, balances,
              ledger_times, effective_ats, chain_hashes;
    get diagnostics written = row_count;
    return written;
end $fn$;
select create_distributed_function(
    'entries_written_in_shard(text, text, bigint[], uuid[], text[], text[], bigint[], bigint[],
                              bigint[], timestamptz[], timestamptz[], bytea[])',
    'account', colocate_with := 'entries', force_delegation := true);

-- transactions_written_in_shard: the transactions of `id`'s shard, inserted in id order with
-- `on conflict (id) do nothing`, as the multi-row insert does. Returns the rows inserted as
-- a jsonb array of {id, currency, counter_currency, status}: what the cross-shard check
-- judges.
create or replace function transactions_written_in_shard(
    id uuid, seqs bigint[], ids uuid[], kinds text[], statuses text[], currencies text[],
    legs text[], account_ids text[], external_refs text[], metadata text[],
    refusal_codes text[], refusal_details text[], requests text[], creation_outcomes text[],
    bodies text[], created timestamptz[], posted timestamptz[], expires timestamptz[],
    reverses uuid[], reversed bigint[], effective_ats timestamptz[],
    counter_currencies text[], exchange_rates text[])
    returns jsonb
    language plpgsql volatile
as $fn$
declare
    shard bigint := shard_written_here('transactions', id, ids);
    inserted jsonb;
begin
    execute format(
        'with inserted as (
             insert into public.transactions_%s (
                 seq, id, kind, status, currency, legs, account_ids, external_ref, metadata,
                 refusal_code, refusal_detail, creation_request, creation_outcome,
                 creation_response, created_at, posted_at, updated_at, expires_at, reverses,
                 reversed_amount, effective_at, counter_currency, exchange_rate, metadata_salt)
             overriding system value
             select seq, id, kind, status, currency, legs::jsonb,
                    string_to_array(account_ids, '',''), external_ref, metadata::jsonb,
                    refusal_code, refusal_detail, request::jsonb, creation_outcome, body,
                    created_at, posted_at, created_at, expires_at, reverses, reversed_amount,
                    effective_at, counter_currency, exchange_rate::numeric,
                    uuid_send(gen_random_uuid())
             from unnest($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15,
                         $16, $17, $18, $19, $20, $21, $22)
                  as r(seq, id, kind, status, currency, legs, account_ids, external_ref,
                       metadata, refusal_code, refusal_detail, request, creation_outcome,
                       body, created_at, posted_at, expires_at, reverses, reversed_amount,
                       effective_at, counter_currency, exchange_rate)
             order by id
             on conflict (id) do nothing
             returning id, currency, counter_currency, status)
         select coalesce(jsonb_agg(to_jsonb(inserted)), ''[]'') from inserted', shard)
        into inserted
        using seqs, ids, kinds, statuses, currencies, legs, account_ids, external_refs,
              metadata, refusal_codes, refusal_details, requests, creation_outcomes, bodies,
              created, posted, expires, reverses, reversed, effective_ats, counter_currencies,
              exchange_rates;
    return inserted;
end $fn$;
select create_distributed_function(
    'transactions_written_in_shard(uuid, bigint[], uuid[], text[], text[], text[], text[],
                                   text[], text[], text[], text[], text[], text[], text[],
                                   text[], timestamptz[], timestamptz[], timestamptz[], uuid[],
                                   bigint[], timestamptz[], text[], text[])',
    'id', colocate_with := 'transactions', force_delegation := true);
