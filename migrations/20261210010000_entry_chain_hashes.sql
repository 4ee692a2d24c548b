-- A wallet's entries form a hash chain: each entry's chain_hash is SHA-256 over its
-- predecessor's chain_hash and its own content (entry_chain_hash below; the write path computes
-- the same in src/ledger/posting/chain.rs, ChainHash::of). An entry changed, removed or moved
-- after it was written then breaks its own link or its successor's, which `verify` finds by
-- recomputing every chain (docs/verification.md).
--
-- Entries written before this migration keep no link (null): the chain starts at the first
-- linked entry, whose predecessor counts as 32 zero bytes, as before a wallet's first entry.
-- System accounts keep no chain, and no link (docs/verification.md says what covers them).
alter table entries add column chain_hash bytea;
alter table entries add constraint entries_chain_hash_check
    check (chain_hash is null or (sequence is not null and octet_length(chain_hash) = 32));

-- The link of a wallet entry, from its predecessor's (null: none, or one without a link) and
-- its columns: the text hashed is the tag and the values one per line, amounts in minor units,
-- times in microseconds since 1970 UTC, `-` for no effective date. Declared `stable`, as
-- concat_ws and convert_to are, so that PostgreSQL inlines it into the trigger's query: an
-- `immutable` declaration over stable calls is not inlined and cost four times as much (8 µs
-- against 2 µs an entry, 100,000 links hashed in psql).
create function entry_chain_hash(previous bytea, transaction_id uuid, account_id text,
                                 currency text, amount bigint, sequence bigint,
                                 balance_after bigint, ledger_time timestamptz,
                                 effective_at timestamptz)
    returns bytea language sql stable parallel safe
as $$
    select sha256(coalesce(previous, '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea)
                  || convert_to(concat_ws(E'\n', 'wallet-ledger/entry/v1', transaction_id::text,
                                          account_id, currency, amount::text, sequence::text,
                                          balance_after::text,
                                          (extract(epoch from ledger_time) * 1000000)::bigint::text,
                                          coalesce((extract(epoch from effective_at) * 1000000)::bigint::text, '-')),
                                'UTF8'))
$$;

-- The journal rule "a wallet chain follows" gains the link. On Citus the shard trigger is
-- migrations/citus/journal.sql, which `migrate` applies after this file on every run, so this
-- file leaves Citus's own alone.
do $migration$
begin
    if exists (select 1 from pg_extension where extname = 'citus') then
        return;
    end if;
    create or replace function check_new_entries() returns trigger language plpgsql
        set enable_seqscan = off
        set enable_hashjoin = off
        set enable_mergejoin = off
    as $$
    begin
        if exists (select 1 from new_entries
                   group by transaction_id, currency having sum(amount) <> 0) then
            raise exception 'unbalanced transaction: entries must sum to zero per currency'
                using errcode = 'check_violation';
        end if;
        if exists (select 1 from (select transaction_id, count(*) as written from new_entries
                                  group by transaction_id) t
                   where (select count(*) from entries e
                          where e.transaction_id = t.transaction_id) <> t.written) then
            raise exception 'entries of a transaction must all be written in one statement'
                using errcode = 'check_violation';
        end if;
        if exists (select 1 from new_entries n
                   where (select a.currency = n.currency
                                 and (a.type = 'wallet') = (n.sequence is not null)
                          from accounts a where a.id = n.account_id) is not true
                      or (select (t.currency = n.currency or t.counter_currency = n.currency)
                                 and t.status = 'posted'
                          from transactions t where t.id = n.transaction_id) is not true) then
            raise exception 'entry does not fit its account or transaction (currency, status, wallet chain)'
                using errcode = 'check_violation';
        end if;
        if exists (select 1 from new_entries n
                   left join entries p on p.account_id = n.account_id and p.sequence = n.sequence - 1
                   where n.sequence is not null
                     and (coalesce(p.balance_after, 0) + n.amount <> n.balance_after
                          or n.ledger_time < p.ledger_time
                          or (p.id is null and n.sequence <> 1)
                          or n.chain_hash is distinct from entry_chain_hash(
                                 p.chain_hash, n.transaction_id, n.account_id, n.currency,
                                 n.amount, n.sequence, n.balance_after, n.ledger_time,
                                 n.effective_at))) then
            raise exception 'broken wallet chain: sequence, running balance or link does not follow'
                using errcode = 'check_violation';
        end if;
        return null;
    end $$;
end $migration$;
