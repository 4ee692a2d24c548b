-- The whole current schema of wallet-ledger: `pg_dump --schema-only --no-owner --no-privileges`
-- of a database migrated from migrations/, without the lines that name pg_dump's version.
-- Generated, never edited: tests/api/schema.rs fails when it differs from what the migrations
-- make, and writes the new dump to target/schema.sql.new to copy here.
--
-- PostgreSQL database dump
--



SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: check_new_entries(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.check_new_entries() RETURNS trigger
    LANGUAGE plpgsql
    SET enable_seqscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    AS $$
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


--
-- Name: entry_chain_hash(bytea, uuid, text, text, bigint, bigint, bigint, timestamp with time zone, timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.entry_chain_hash(previous bytea, transaction_id uuid, account_id text, currency text, amount bigint, sequence bigint, balance_after bigint, ledger_time timestamp with time zone, effective_at timestamp with time zone) RETURNS bytea
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    select sha256(coalesce(previous, '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea)
                  || convert_to(concat_ws(E'\n', 'wallet-ledger/entry/v1', transaction_id::text,
                                          account_id, currency, amount::text, sequence::text,
                                          balance_after::text,
                                          (extract(epoch from ledger_time) * 1000000)::bigint::text,
                                          coalesce((extract(epoch from effective_at) * 1000000)::bigint::text, '-')),
                                'UTF8'))
$$;


--
-- Name: hold_status_at(text, timestamp with time zone, timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.hold_status_at(status text, expires_at timestamp with time zone, at timestamp with time zone) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    select case when status = 'pending' and expires_at <= at then 'expired' else status end
$$;


--
-- Name: refuse_account_creation_change(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.refuse_account_creation_change() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
    if new.id <> old.id or new.currency <> old.currency or new.type <> old.type
       or new.creation_request <> old.creation_request
       or new.creation_response <> old.creation_response then
        raise exception 'the identity and creation record of account % are immutable', old.id
            using errcode = 'integrity_constraint_violation';
    end if;
    return new;
end $$;


--
-- Name: refuse_creation_change(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.refuse_creation_change() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: refuse_entry_change(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.refuse_entry_change() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
    raise exception 'entries are immutable: % refused', tg_op
        using errcode = 'integrity_constraint_violation';
end $$;


--
-- Name: refuse_ledger_row_delete(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.refuse_ledger_row_delete() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
begin
    raise exception '% rows are immutable history, never deleted: % refused', tg_table_name, tg_op
        using errcode = 'integrity_constraint_violation';
end $$;


--
-- Name: refuse_resolution_change(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.refuse_resolution_change() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: without_metadata(jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.without_metadata(stored jsonb) RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    select case when jsonb_typeof(stored) = 'object' and stored ? 'metadata'
                then jsonb_set(stored, '{metadata}', '{}') else stored end
$$;


SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: _sqlx_migrations; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public._sqlx_migrations (
    version bigint NOT NULL,
    description text NOT NULL,
    installed_on timestamp with time zone DEFAULT now() NOT NULL,
    success boolean NOT NULL,
    checksum bytea NOT NULL,
    execution_time bigint NOT NULL
);


--
-- Name: account_checkpoints; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.account_checkpoints (
    account_id text NOT NULL,
    below_xid xid8 NOT NULL,
    posted bigint NOT NULL,
    entry_count bigint NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT account_checkpoints_entry_count_check CHECK ((entry_count >= 0))
);


--
-- Name: account_limits; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.account_limits (
    id uuid NOT NULL,
    account_id text,
    currency text NOT NULL,
    direction text NOT NULL,
    measure text NOT NULL,
    maximum bigint NOT NULL,
    window_seconds integer NOT NULL,
    creation_request jsonb NOT NULL,
    creation_response text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    deleted_at timestamp with time zone,
    set_id text,
    CONSTRAINT account_limits_currency_check CHECK ((currency ~ '^[A-Z]{3}$'::text)),
    CONSTRAINT account_limits_direction_check CHECK ((direction = ANY (ARRAY['debit'::text, 'credit'::text, 'both'::text]))),
    CONSTRAINT account_limits_maximum_check CHECK (((maximum >= 1) AND (maximum <= '9007199254740991'::bigint))),
    CONSTRAINT account_limits_measure_check CHECK ((measure = ANY (ARRAY['amount'::text, 'count'::text]))),
    CONSTRAINT account_limits_owner_check CHECK (((account_id IS NULL) <> (set_id IS NULL))),
    CONSTRAINT account_limits_window_seconds_check CHECK (((window_seconds >= 60) AND (window_seconds <= 2678400)))
);


--
-- Name: account_monitors; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.account_monitors (
    id uuid NOT NULL,
    account_id text,
    currency text NOT NULL,
    field text NOT NULL,
    operator text NOT NULL,
    value bigint NOT NULL,
    creation_request jsonb NOT NULL,
    creation_response text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    deleted_at timestamp with time zone,
    trigger_count bigint DEFAULT 0 NOT NULL,
    last_triggered_at timestamp with time zone,
    last_transaction_id uuid,
    last_before jsonb,
    last_after jsonb,
    set_id text,
    CONSTRAINT account_monitors_currency_check CHECK ((currency ~ '^[A-Z]{3}$'::text)),
    CONSTRAINT account_monitors_field_check CHECK ((field = ANY (ARRAY['posted'::text, 'available'::text, 'pending_out'::text]))),
    CONSTRAINT account_monitors_operator_check CHECK ((operator = ANY (ARRAY['lt'::text, 'lte'::text, 'gt'::text, 'gte'::text]))),
    CONSTRAINT account_monitors_owner_check CHECK (((account_id IS NULL) <> (set_id IS NULL))),
    CONSTRAINT account_monitors_value_check CHECK (((value >= '-9007199254740991'::bigint) AND (value <= '9007199254740991'::bigint)))
);


--
-- Name: account_set_accounts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.account_set_accounts (
    set_id text NOT NULL,
    account_id text NOT NULL,
    added_at timestamp with time zone NOT NULL
);


--
-- Name: account_set_checkpoints; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.account_set_checkpoints (
    set_id text NOT NULL,
    below_xid xid8 NOT NULL,
    posted numeric NOT NULL,
    movement_count bigint NOT NULL
);


--
-- Name: account_set_children; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.account_set_children (
    set_id text NOT NULL,
    child_id text NOT NULL,
    added_at timestamp with time zone NOT NULL,
    CONSTRAINT account_set_children_check CHECK ((child_id <> set_id))
);


--
-- Name: account_set_closure; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.account_set_closure (
    account_id text NOT NULL,
    set_id text NOT NULL
);


--
-- Name: account_set_movements; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.account_set_movements (
    id bigint NOT NULL,
    set_id text NOT NULL,
    account_id text NOT NULL,
    kind text NOT NULL,
    transaction_id uuid,
    amount bigint NOT NULL,
    ledger_time timestamp with time zone NOT NULL,
    effective_at timestamp with time zone,
    xid xid8 DEFAULT pg_current_xact_id() NOT NULL,
    CONSTRAINT account_set_movements_amount_check CHECK (((amount >= '-9007199254740991'::bigint) AND (amount <= '9007199254740991'::bigint))),
    CONSTRAINT account_set_movements_check CHECK (((kind = 'entry'::text) = (transaction_id IS NOT NULL))),
    CONSTRAINT account_set_movements_kind_check CHECK ((kind = ANY (ARRAY['entry'::text, 'join'::text, 'leave'::text])))
);


--
-- Name: account_set_movements_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.account_set_movements ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.account_set_movements_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: account_set_open_holds; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.account_set_open_holds (
    set_id text NOT NULL,
    transaction_id uuid NOT NULL,
    account_id text NOT NULL,
    amount bigint NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT account_set_open_holds_amount_check CHECK (((amount <> 0) AND ((amount >= '-9007199254740991'::bigint) AND (amount <= '9007199254740991'::bigint))))
);


--
-- Name: account_sets; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.account_sets (
    id text NOT NULL,
    currency text NOT NULL,
    metadata jsonb DEFAULT '{}'::jsonb NOT NULL,
    creation_request jsonb NOT NULL,
    creation_response text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    has_limits boolean DEFAULT false NOT NULL,
    has_monitors boolean DEFAULT false NOT NULL,
    CONSTRAINT account_sets_currency_check CHECK ((currency ~ '^[A-Z]{3}$'::text)),
    CONSTRAINT account_sets_id_check CHECK ((id ~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$'::text)),
    CONSTRAINT account_sets_metadata_check CHECK ((jsonb_typeof(metadata) = 'object'::text))
);


--
-- Name: accounts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.accounts (
    id text NOT NULL,
    currency text NOT NULL,
    type text NOT NULL,
    status text DEFAULT 'active'::text NOT NULL,
    overdraft_limit bigint DEFAULT 0 NOT NULL,
    metadata jsonb DEFAULT '{}'::jsonb NOT NULL,
    version bigint DEFAULT 0 NOT NULL,
    creation_request jsonb NOT NULL,
    creation_response text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    has_limits boolean DEFAULT false NOT NULL,
    has_monitors boolean DEFAULT false NOT NULL,
    in_sets boolean DEFAULT false NOT NULL,
    CONSTRAINT accounts_check CHECK (((type = 'wallet'::text) OR (overdraft_limit = 0))),
    CONSTRAINT accounts_currency_check CHECK ((currency ~ '^[A-Z]{3}$'::text)),
    CONSTRAINT accounts_id_check CHECK ((id ~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$'::text)),
    CONSTRAINT accounts_metadata_check CHECK ((jsonb_typeof(metadata) = 'object'::text)),
    CONSTRAINT accounts_overdraft_limit_check CHECK (((overdraft_limit >= 0) AND (overdraft_limit <= '9007199254740991'::bigint))),
    CONSTRAINT accounts_status_check CHECK ((status = ANY (ARRAY['active'::text, 'frozen'::text, 'closed'::text]))),
    CONSTRAINT accounts_type_check CHECK ((type = ANY (ARRAY['wallet'::text, 'system'::text]))),
    CONSTRAINT accounts_version_check CHECK ((version >= 0))
);


--
-- Name: api_keys; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.api_keys (
    id uuid NOT NULL,
    owner text NOT NULL,
    scope text NOT NULL,
    token_sha256 bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    revoked_at timestamp with time zone,
    CONSTRAINT api_keys_owner_check CHECK ((owner ~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$'::text)),
    CONSTRAINT api_keys_scope_check CHECK ((scope = ANY (ARRAY['read'::text, 'write'::text, 'admin'::text]))),
    CONSTRAINT api_keys_token_sha256_check CHECK ((length(token_sha256) = 32))
);


--
-- Name: audit_log; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.audit_log (
    seq bigint NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    key_id uuid,
    owner text NOT NULL,
    request_id text,
    action text NOT NULL,
    resource text NOT NULL,
    reason text,
    CONSTRAINT audit_log_reason_check CHECK (((length(reason) >= 1) AND (length(reason) <= 500)))
);


--
-- Name: audit_log_seq_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.audit_log ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.audit_log_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: delivery_attempts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.delivery_attempts (
    id bigint NOT NULL,
    delivery_id uuid NOT NULL,
    started_at timestamp with time zone NOT NULL,
    duration_ms integer NOT NULL,
    status integer,
    error text,
    CONSTRAINT delivery_attempts_duration_ms_check CHECK ((duration_ms >= 0))
);


--
-- Name: delivery_attempts_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.delivery_attempts ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.delivery_attempts_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: entries; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.entries (
    id bigint NOT NULL,
    transaction_id uuid NOT NULL,
    account_id text NOT NULL,
    currency text NOT NULL,
    amount bigint NOT NULL,
    sequence bigint,
    balance_after bigint,
    ledger_time timestamp with time zone NOT NULL,
    xid xid8 DEFAULT pg_current_xact_id() NOT NULL,
    effective_at timestamp with time zone,
    chain_hash bytea,
    CONSTRAINT entries_amount_check CHECK (((amount <> 0) AND ((amount >= '-9007199254740991'::bigint) AND (amount <= '9007199254740991'::bigint)))),
    CONSTRAINT entries_balance_after_check CHECK (((balance_after >= '-9007199254740991'::bigint) AND (balance_after <= '9007199254740991'::bigint))),
    CONSTRAINT entries_chain_hash_check CHECK (((chain_hash IS NULL) OR ((sequence IS NOT NULL) AND (octet_length(chain_hash) = 32)))),
    CONSTRAINT entries_check CHECK (((sequence IS NULL) = (balance_after IS NULL))),
    CONSTRAINT entries_effective_at_check CHECK (((effective_at IS NULL) OR (effective_at < ledger_time))),
    CONSTRAINT entries_sequence_check CHECK ((sequence >= 1))
);


--
-- Name: entries_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.entries ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.entries_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: journal_checkpoint_heads; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.journal_checkpoint_heads (
    checkpoint bigint NOT NULL,
    account_id text NOT NULL,
    sequence bigint NOT NULL,
    link bytea NOT NULL,
    CONSTRAINT journal_checkpoint_heads_link_check CHECK ((octet_length(link) = 32)),
    CONSTRAINT journal_checkpoint_heads_sequence_check CHECK ((sequence >= 1))
);


--
-- Name: journal_checkpoint_transactions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.journal_checkpoint_transactions (
    checkpoint bigint NOT NULL,
    leaf_index bigint NOT NULL,
    transaction_id uuid NOT NULL,
    leaf bytea NOT NULL,
    CONSTRAINT journal_checkpoint_transactions_leaf_check CHECK ((octet_length(leaf) = 32)),
    CONSTRAINT journal_checkpoint_transactions_leaf_index_check CHECK ((leaf_index >= 0))
);


--
-- Name: journal_checkpoints; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.journal_checkpoints (
    n bigint NOT NULL,
    sealed_at timestamp with time zone NOT NULL,
    previous_root bytea,
    head_count bigint NOT NULL,
    heads_root bytea NOT NULL,
    root bytea NOT NULL,
    public_key bytea NOT NULL,
    signature bytea NOT NULL,
    transactions_horizon xid8,
    transaction_count bigint,
    transactions_root bytea,
    CONSTRAINT journal_checkpoints_check CHECK (((n = 1) = (previous_root IS NULL))),
    CONSTRAINT journal_checkpoints_head_count_check CHECK ((head_count >= 0)),
    CONSTRAINT journal_checkpoints_heads_root_check CHECK ((octet_length(heads_root) = 32)),
    CONSTRAINT journal_checkpoints_n_check CHECK ((n >= 1)),
    CONSTRAINT journal_checkpoints_previous_root_check CHECK ((octet_length(previous_root) = 32)),
    CONSTRAINT journal_checkpoints_public_key_check CHECK ((octet_length(public_key) = 32)),
    CONSTRAINT journal_checkpoints_root_check CHECK ((octet_length(root) = 32)),
    CONSTRAINT journal_checkpoints_signature_check CHECK ((octet_length(signature) = 64)),
    CONSTRAINT journal_checkpoints_transaction_count_check CHECK ((transaction_count >= 0)),
    CONSTRAINT journal_checkpoints_transactions_root_check CHECK ((octet_length(transactions_root) = 32)),
    CONSTRAINT journal_checkpoints_version_check CHECK ((((transactions_horizon IS NULL) = (transaction_count IS NULL)) AND ((transaction_count IS NULL) = (transactions_root IS NULL))))
);


--
-- Name: open_holds; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.open_holds (
    transaction_id uuid NOT NULL,
    account_id text NOT NULL,
    amount bigint NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT open_holds_amount_check CHECK (((amount <> 0) AND ((amount >= '-9007199254740991'::bigint) AND (amount <= '9007199254740991'::bigint))))
);


--
-- Name: open_hold_totals; Type: VIEW; Schema: public; Owner: -
--

CREATE VIEW public.open_hold_totals AS
 SELECT open_holds.account_id,
    (LEAST(COALESCE(sum((- open_holds.amount)) FILTER (WHERE (open_holds.amount < 0)), (0)::numeric), ('9007199254740992'::bigint)::numeric))::bigint AS pending_out,
    (LEAST(COALESCE(sum(open_holds.amount) FILTER (WHERE (open_holds.amount > 0)), (0)::numeric), ('9007199254740992'::bigint)::numeric))::bigint AS pending_in
   FROM public.open_holds
  WHERE (open_holds.expires_at > now())
  GROUP BY open_holds.account_id;


--
-- Name: outbox_events; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.outbox_events (
    seq bigint NOT NULL,
    id uuid NOT NULL,
    type text NOT NULL,
    transaction_id uuid,
    account_id text,
    data jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    fanned_out_at timestamp with time zone,
    streamed_at timestamp with time zone,
    xid xid8 DEFAULT pg_current_xact_id() NOT NULL,
    CONSTRAINT outbox_events_data_check CHECK ((jsonb_typeof(data) = 'object'::text)),
    CONSTRAINT outbox_events_type_check CHECK ((type = ANY (ARRAY['transaction.posted'::text, 'transaction.rejected'::text, 'transaction.voided'::text, 'transaction.expired'::text, 'transaction.reversed'::text, 'hold.created'::text, 'account.frozen'::text, 'account.closed'::text, 'account.negative_balance'::text, 'balance.monitor_triggered'::text, 'ledger.checkpoint'::text, 'transaction.metadata_erased'::text])))
);


--
-- Name: outbox_events_seq_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.outbox_events ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.outbox_events_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: reconciliation_runs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.reconciliation_runs (
    id uuid NOT NULL,
    seq bigint NOT NULL,
    key text NOT NULL,
    provider text NOT NULL,
    options jsonb NOT NULL,
    clean boolean NOT NULL,
    report jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT reconciliation_runs_key_check CHECK ((key ~ '^[0-9a-f]{64}$'::text))
);


--
-- Name: reconciliation_runs_seq_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.reconciliation_runs ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.reconciliation_runs_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: settlement_lines; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.settlement_lines (
    run_id uuid NOT NULL,
    line bigint NOT NULL,
    payment_id uuid,
    external_ref text,
    currency text NOT NULL,
    status text NOT NULL,
    amount bigint NOT NULL,
    fee bigint NOT NULL,
    settled_at timestamp with time zone NOT NULL,
    payout_ref text,
    CONSTRAINT settlement_lines_amount_check CHECK ((amount >= 0)),
    CONSTRAINT settlement_lines_check CHECK (((payment_id IS NOT NULL) OR (external_ref IS NOT NULL))),
    CONSTRAINT settlement_lines_fee_check CHECK ((fee >= 0)),
    CONSTRAINT settlement_lines_status_check CHECK ((status = ANY (ARRAY['settled'::text, 'refunded'::text, 'failed'::text])))
);


--
-- Name: transactions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.transactions (
    id uuid NOT NULL,
    seq bigint NOT NULL,
    kind text NOT NULL,
    status text NOT NULL,
    currency text NOT NULL,
    legs jsonb NOT NULL,
    account_ids text[] NOT NULL,
    external_ref text,
    metadata jsonb DEFAULT '{}'::jsonb NOT NULL,
    refusal_code text,
    refusal_detail text,
    creation_request jsonb NOT NULL,
    creation_response text,
    created_at timestamp with time zone NOT NULL,
    posted_at timestamp with time zone,
    updated_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone,
    reverses uuid,
    reversed_amount bigint,
    captured_amount bigint,
    resolution_request jsonb,
    resolution_response text,
    creation_outcome text NOT NULL,
    effective_at timestamp with time zone,
    counter_currency text,
    exchange_rate numeric,
    metadata_salt bytea DEFAULT uuid_send(gen_random_uuid()),
    metadata_erased_at timestamp with time zone,
    metadata_erased_digest bytea,
    CONSTRAINT transactions_captured_amount_check CHECK (((captured_amount >= 1) AND (captured_amount <= '9007199254740991'::bigint))),
    CONSTRAINT transactions_check CHECK (((status = 'rejected'::text) = (refusal_code IS NOT NULL))),
    CONSTRAINT transactions_check2 CHECK (((status = 'posted'::text) = (posted_at IS NOT NULL))),
    CONSTRAINT transactions_created_has_answer CHECK (((creation_outcome = 'refused'::text) OR (creation_response IS NOT NULL))),
    CONSTRAINT transactions_creation_outcome_check CHECK ((creation_outcome = ANY (ARRAY['created'::text, 'refused'::text]))),
    CONSTRAINT transactions_currency_check CHECK ((currency ~ '^[A-Z]{3}$'::text)),
    CONSTRAINT transactions_effective_at_check CHECK (((effective_at IS NULL) OR ((posted_at IS NOT NULL) AND (effective_at < posted_at)))),
    CONSTRAINT transactions_exchange_check CHECK ((((counter_currency IS NULL) = (exchange_rate IS NULL)) AND ((counter_currency IS NULL) OR ((counter_currency ~ '^[A-Z]{3}$'::text) AND (counter_currency <> currency) AND (exchange_rate > (0)::numeric) AND (kind = ANY (ARRAY['exchange'::text, 'reversal'::text])))) AND ((kind <> 'exchange'::text) OR (counter_currency IS NOT NULL)))),
    CONSTRAINT transactions_external_ref_check CHECK (((length(external_ref) >= 1) AND (length(external_ref) <= 255))),
    CONSTRAINT transactions_hold_expiry CHECK (((status = 'pending'::text) <= (expires_at IS NOT NULL))),
    CONSTRAINT transactions_kind_check CHECK ((kind = ANY (ARRAY['transaction'::text, 'transfer'::text, 'payment'::text, 'reversal'::text, 'exchange'::text]))),
    CONSTRAINT transactions_legs_check CHECK ((jsonb_typeof(legs) = 'array'::text)),
    CONSTRAINT transactions_metadata_check CHECK ((jsonb_typeof(metadata) = 'object'::text)),
    CONSTRAINT transactions_metadata_erased_digest_check CHECK ((octet_length(metadata_erased_digest) = 32)),
    CONSTRAINT transactions_metadata_erasure_check CHECK (((metadata_erased_at IS NULL) = (metadata_erased_digest IS NULL))),
    CONSTRAINT transactions_metadata_salt_check CHECK ((octet_length(metadata_salt) = 16)),
    CONSTRAINT transactions_refusal_code_check CHECK ((refusal_code = ANY (ARRAY['insufficient_funds'::text, 'account_frozen'::text, 'account_closed'::text, 'reversal_exceeds_original'::text, 'velocity_limit_exceeded'::text]))),
    CONSTRAINT transactions_refused_is_rejected CHECK (((status = 'rejected'::text) = (creation_outcome = 'refused'::text))),
    CONSTRAINT transactions_reversal_link CHECK (((kind = 'reversal'::text) = ((reverses IS NOT NULL) AND (reversed_amount IS NOT NULL)))),
    CONSTRAINT transactions_reversed_amount_check CHECK (((reversed_amount >= 1) AND (reversed_amount <= '9007199254740991'::bigint))),
    CONSTRAINT transactions_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'posted'::text, 'rejected'::text, 'voided'::text, 'expired'::text])))
);


--
-- Name: transactions_seq_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.transactions ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.transactions_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: volume_minutes; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.volume_minutes (
    minute timestamp with time zone NOT NULL,
    currency text NOT NULL,
    posted_count bigint NOT NULL,
    posted_amount bigint NOT NULL,
    refused_count bigint NOT NULL,
    CONSTRAINT volume_minutes_currency_check CHECK ((currency ~ '^[A-Z]{3}$'::text)),
    CONSTRAINT volume_minutes_minute_check CHECK ((minute = date_trunc('minute'::text, minute))),
    CONSTRAINT volume_minutes_posted_amount_check CHECK ((posted_amount >= 0)),
    CONSTRAINT volume_minutes_posted_count_check CHECK ((posted_count >= 0)),
    CONSTRAINT volume_minutes_refused_count_check CHECK ((refused_count >= 0))
);


--
-- Name: volume_rollup; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.volume_rollup (
    only_row boolean DEFAULT true NOT NULL,
    rolled_from timestamp with time zone NOT NULL,
    rolled_until timestamp with time zone NOT NULL,
    CONSTRAINT volume_rollup_check CHECK ((rolled_until >= rolled_from)),
    CONSTRAINT volume_rollup_only_row_check CHECK (only_row)
);


--
-- Name: webhook_deliveries; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.webhook_deliveries (
    seq bigint NOT NULL,
    id uuid NOT NULL,
    event_id uuid NOT NULL,
    subscription_id uuid NOT NULL,
    status text DEFAULT 'pending'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone NOT NULL,
    last_status integer,
    last_error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    delivered_at timestamp with time zone,
    claim_id uuid,
    CONSTRAINT webhook_deliveries_attempts_check CHECK ((attempts >= 0)),
    CONSTRAINT webhook_deliveries_check CHECK (((status = 'delivered'::text) = (delivered_at IS NOT NULL))),
    CONSTRAINT webhook_deliveries_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'delivered'::text, 'dead'::text, 'cancelled'::text])))
);


--
-- Name: webhook_deliveries_seq_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.webhook_deliveries ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.webhook_deliveries_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: webhook_subscriptions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.webhook_subscriptions (
    seq bigint NOT NULL,
    id uuid NOT NULL,
    url text NOT NULL,
    event_types text[] NOT NULL,
    secrets text[] NOT NULL,
    status text DEFAULT 'active'::text NOT NULL,
    creation_request jsonb NOT NULL,
    creation_response text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    rotation_key uuid,
    created_snapshot pg_snapshot DEFAULT pg_current_snapshot(),
    CONSTRAINT webhook_subscriptions_secrets_check CHECK ((((cardinality(secrets) >= 1) AND (cardinality(secrets) <= 2)) OR ((status = 'deleted'::text) AND (cardinality(secrets) = 0)))),
    CONSTRAINT webhook_subscriptions_status_check CHECK ((status = ANY (ARRAY['active'::text, 'deleted'::text]))),
    CONSTRAINT webhook_subscriptions_url_check CHECK (((length(url) >= 1) AND (length(url) <= 2048)))
);


--
-- Name: webhook_subscriptions_seq_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.webhook_subscriptions ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.webhook_subscriptions_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: _sqlx_migrations _sqlx_migrations_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public._sqlx_migrations
    ADD CONSTRAINT _sqlx_migrations_pkey PRIMARY KEY (version);


--
-- Name: account_checkpoints account_checkpoints_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.account_checkpoints
    ADD CONSTRAINT account_checkpoints_pkey PRIMARY KEY (account_id, below_xid);


--
-- Name: account_checkpoints account_checkpoints_posted_range; Type: CHECK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE public.account_checkpoints
    ADD CONSTRAINT account_checkpoints_posted_range CHECK (((posted >= '-9007199254740991'::bigint) AND (posted <= '9007199254740991'::bigint))) NOT VALID;


--
-- Name: account_limits account_limits_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.account_limits
    ADD CONSTRAINT account_limits_pkey PRIMARY KEY (id);


--
-- Name: account_monitors account_monitors_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.account_monitors
    ADD CONSTRAINT account_monitors_pkey PRIMARY KEY (id);


--
-- Name: account_set_accounts account_set_accounts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.account_set_accounts
    ADD CONSTRAINT account_set_accounts_pkey PRIMARY KEY (set_id, account_id);


--
-- Name: account_set_checkpoints account_set_checkpoints_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.account_set_checkpoints
    ADD CONSTRAINT account_set_checkpoints_pkey PRIMARY KEY (set_id, below_xid);


--
-- Name: account_set_children account_set_children_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.account_set_children
    ADD CONSTRAINT account_set_children_pkey PRIMARY KEY (set_id, child_id);


--
-- Name: account_set_closure account_set_closure_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.account_set_closure
    ADD CONSTRAINT account_set_closure_pkey PRIMARY KEY (account_id, set_id);


--
-- Name: account_set_movements account_set_movements_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.account_set_movements
    ADD CONSTRAINT account_set_movements_pkey PRIMARY KEY (id);


--
-- Name: account_set_open_holds account_set_open_holds_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.account_set_open_holds
    ADD CONSTRAINT account_set_open_holds_pkey PRIMARY KEY (set_id, transaction_id, account_id);


--
-- Name: account_sets account_sets_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.account_sets
    ADD CONSTRAINT account_sets_pkey PRIMARY KEY (id);


--
-- Name: accounts accounts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.accounts
    ADD CONSTRAINT accounts_pkey PRIMARY KEY (id);


--
-- Name: api_keys api_keys_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_pkey PRIMARY KEY (id);


--
-- Name: api_keys api_keys_token_sha256_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_token_sha256_key UNIQUE (token_sha256);


--
-- Name: audit_log audit_log_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.audit_log
    ADD CONSTRAINT audit_log_pkey PRIMARY KEY (seq);


--
-- Name: delivery_attempts delivery_attempts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.delivery_attempts
    ADD CONSTRAINT delivery_attempts_pkey PRIMARY KEY (id);


--
-- Name: entries entries_account_id_sequence_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.entries
    ADD CONSTRAINT entries_account_id_sequence_key UNIQUE (account_id, sequence);


--
-- Name: entries entries_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.entries
    ADD CONSTRAINT entries_pkey PRIMARY KEY (id);


--
-- Name: journal_checkpoint_heads journal_checkpoint_heads_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.journal_checkpoint_heads
    ADD CONSTRAINT journal_checkpoint_heads_pkey PRIMARY KEY (account_id, checkpoint);


--
-- Name: journal_checkpoint_transactions journal_checkpoint_transactions_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.journal_checkpoint_transactions
    ADD CONSTRAINT journal_checkpoint_transactions_pkey PRIMARY KEY (checkpoint, leaf_index);


--
-- Name: journal_checkpoint_transactions journal_checkpoint_transactions_transaction_id_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.journal_checkpoint_transactions
    ADD CONSTRAINT journal_checkpoint_transactions_transaction_id_key UNIQUE (transaction_id);


--
-- Name: journal_checkpoints journal_checkpoints_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.journal_checkpoints
    ADD CONSTRAINT journal_checkpoints_pkey PRIMARY KEY (n);


--
-- Name: open_holds open_holds_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.open_holds
    ADD CONSTRAINT open_holds_pkey PRIMARY KEY (transaction_id, account_id);


--
-- Name: outbox_events outbox_events_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.outbox_events
    ADD CONSTRAINT outbox_events_pkey PRIMARY KEY (id);


--
-- Name: outbox_events outbox_events_seq_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.outbox_events
    ADD CONSTRAINT outbox_events_seq_key UNIQUE (seq);


--
-- Name: reconciliation_runs reconciliation_runs_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.reconciliation_runs
    ADD CONSTRAINT reconciliation_runs_pkey PRIMARY KEY (id);


--
-- Name: reconciliation_runs reconciliation_runs_seq_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.reconciliation_runs
    ADD CONSTRAINT reconciliation_runs_seq_key UNIQUE (seq);


--
-- Name: settlement_lines settlement_lines_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.settlement_lines
    ADD CONSTRAINT settlement_lines_pkey PRIMARY KEY (run_id, line);


--
-- Name: transactions transactions_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.transactions
    ADD CONSTRAINT transactions_pkey PRIMARY KEY (id);


--
-- Name: transactions transactions_seq_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.transactions
    ADD CONSTRAINT transactions_seq_key UNIQUE (seq);


--
-- Name: volume_minutes volume_minutes_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.volume_minutes
    ADD CONSTRAINT volume_minutes_pkey PRIMARY KEY (minute, currency);


--
-- Name: volume_rollup volume_rollup_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.volume_rollup
    ADD CONSTRAINT volume_rollup_pkey PRIMARY KEY (only_row);


--
-- Name: webhook_deliveries webhook_deliveries_event_id_subscription_id_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_event_id_subscription_id_key UNIQUE (event_id, subscription_id);


--
-- Name: webhook_deliveries webhook_deliveries_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (id);


--
-- Name: webhook_deliveries webhook_deliveries_seq_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_seq_key UNIQUE (seq);


--
-- Name: webhook_subscriptions webhook_subscriptions_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_subscriptions
    ADD CONSTRAINT webhook_subscriptions_pkey PRIMARY KEY (id);


--
-- Name: webhook_subscriptions webhook_subscriptions_seq_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_subscriptions
    ADD CONSTRAINT webhook_subscriptions_seq_key UNIQUE (seq);


--
-- Name: account_limits_account; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX account_limits_account ON public.account_limits USING btree (account_id) WHERE (deleted_at IS NULL);


--
-- Name: account_limits_set; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX account_limits_set ON public.account_limits USING btree (set_id) WHERE (deleted_at IS NULL);


--
-- Name: account_monitors_account; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX account_monitors_account ON public.account_monitors USING btree (account_id) WHERE (deleted_at IS NULL);


--
-- Name: account_monitors_set; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX account_monitors_set ON public.account_monitors USING btree (set_id) WHERE (deleted_at IS NULL);


--
-- Name: account_set_children_child; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX account_set_children_child ON public.account_set_children USING btree (child_id);


--
-- Name: account_set_closure_set; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX account_set_closure_set ON public.account_set_closure USING btree (set_id);


--
-- Name: account_set_movements_since; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX account_set_movements_since ON public.account_set_movements USING btree (set_id, xid) INCLUDE (amount);


--
-- Name: account_set_movements_time; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX account_set_movements_time ON public.account_set_movements USING btree (set_id, ledger_time);


--
-- Name: account_set_open_holds_expiry; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX account_set_open_holds_expiry ON public.account_set_open_holds USING btree (expires_at);


--
-- Name: account_set_open_holds_transaction; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX account_set_open_holds_transaction ON public.account_set_open_holds USING btree (transaction_id);


--
-- Name: accounts_id_bytewise; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX accounts_id_bytewise ON public.accounts USING btree (id COLLATE "C");


--
-- Name: accounts_metadata; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX accounts_metadata ON public.accounts USING gin (metadata jsonb_path_ops) WHERE (metadata <> '{}'::jsonb);


--
-- Name: audit_log_at; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX audit_log_at ON public.audit_log USING btree (at);


--
-- Name: audit_log_resource; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX audit_log_resource ON public.audit_log USING btree (resource);


--
-- Name: delivery_attempts_by_delivery; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX delivery_attempts_by_delivery ON public.delivery_attempts USING btree (delivery_id, id);


--
-- Name: delivery_attempts_started; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX delivery_attempts_started ON public.delivery_attempts USING btree (started_at);


--
-- Name: entries_account_id; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX entries_account_id ON public.entries USING btree (account_id, id);


--
-- Name: entries_account_xid; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX entries_account_xid ON public.entries USING btree (account_id, xid) WHERE (sequence IS NULL);


--
-- Name: entries_backdated; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX entries_backdated ON public.entries USING btree (account_id, effective_at) WHERE (effective_at IS NOT NULL);


--
-- Name: entries_transaction_id; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX entries_transaction_id ON public.entries USING btree (transaction_id);


--
-- Name: entries_xid_window; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX entries_xid_window ON public.entries USING brin ((((xid)::text)::bigint));


--
-- Name: journal_checkpoint_heads_checkpoint; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX journal_checkpoint_heads_checkpoint ON public.journal_checkpoint_heads USING btree (checkpoint);


--
-- Name: open_holds_account; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX open_holds_account ON public.open_holds USING btree (account_id, expires_at);


--
-- Name: outbox_events_by_transaction; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX outbox_events_by_transaction ON public.outbox_events USING btree (transaction_id, seq) WHERE (transaction_id IS NOT NULL);


--
-- Name: outbox_events_created; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX outbox_events_created ON public.outbox_events USING btree (created_at);


--
-- Name: outbox_events_to_fan_out; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX outbox_events_to_fan_out ON public.outbox_events USING btree (seq) WHERE (fanned_out_at IS NULL);


--
-- Name: outbox_events_to_stream; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX outbox_events_to_stream ON public.outbox_events USING btree (seq) WHERE (streamed_at IS NULL);


--
-- Name: reconciliation_runs_key; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX reconciliation_runs_key ON public.reconciliation_runs USING btree (key, created_at DESC);


--
-- Name: transactions_account_ids; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX transactions_account_ids ON public.transactions USING gin (account_ids);


--
-- Name: transactions_external_ref; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX transactions_external_ref ON public.transactions USING btree (external_ref) WHERE (external_ref IS NOT NULL);


--
-- Name: transactions_metadata; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX transactions_metadata ON public.transactions USING gin (metadata jsonb_path_ops) WHERE (metadata <> '{}'::jsonb);


--
-- Name: transactions_pending_expiry; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX transactions_pending_expiry ON public.transactions USING btree (expires_at) WHERE (status = 'pending'::text);


--
-- Name: transactions_posted_at; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX transactions_posted_at ON public.transactions USING btree (posted_at) WHERE (status = 'posted'::text);


--
-- Name: transactions_refused_at; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX transactions_refused_at ON public.transactions USING btree (created_at) WHERE (status = 'rejected'::text);


--
-- Name: transactions_reverses; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX transactions_reverses ON public.transactions USING btree (reverses) WHERE (reverses IS NOT NULL);


--
-- Name: transactions_status_seq; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX transactions_status_seq ON public.transactions USING btree (status, seq);


--
-- Name: webhook_deliveries_by_status; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX webhook_deliveries_by_status ON public.webhook_deliveries USING btree (status, created_at);


--
-- Name: webhook_deliveries_due; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX webhook_deliveries_due ON public.webhook_deliveries USING btree (next_attempt_at) WHERE (status = 'pending'::text);


--
-- Name: accounts accounts_creation_immutable; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER accounts_creation_immutable BEFORE UPDATE ON public.accounts FOR EACH ROW EXECUTE FUNCTION public.refuse_account_creation_change();


--
-- Name: accounts accounts_never_deleted; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER accounts_never_deleted BEFORE DELETE ON public.accounts FOR EACH ROW EXECUTE FUNCTION public.refuse_ledger_row_delete();


--
-- Name: accounts accounts_no_truncate; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER accounts_no_truncate BEFORE TRUNCATE ON public.accounts FOR EACH STATEMENT EXECUTE FUNCTION public.refuse_ledger_row_delete();


--
-- Name: account_checkpoints checkpoints_immutable; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER checkpoints_immutable BEFORE DELETE OR UPDATE ON public.account_checkpoints FOR EACH ROW EXECUTE FUNCTION public.refuse_entry_change();


--
-- Name: entries entries_immutable; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER entries_immutable BEFORE DELETE OR UPDATE ON public.entries FOR EACH ROW EXECUTE FUNCTION public.refuse_entry_change();


--
-- Name: entries entries_journal_rules; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER entries_journal_rules AFTER INSERT ON public.entries REFERENCING NEW TABLE AS new_entries FOR EACH STATEMENT EXECUTE FUNCTION public.check_new_entries();


--
-- Name: entries entries_no_truncate; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER entries_no_truncate BEFORE TRUNCATE ON public.entries FOR EACH STATEMENT EXECUTE FUNCTION public.refuse_entry_change();


--
-- Name: journal_checkpoint_heads journal_checkpoint_heads_immutable; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER journal_checkpoint_heads_immutable BEFORE DELETE OR UPDATE ON public.journal_checkpoint_heads FOR EACH ROW EXECUTE FUNCTION public.refuse_entry_change();


--
-- Name: journal_checkpoint_heads journal_checkpoint_heads_no_truncate; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER journal_checkpoint_heads_no_truncate BEFORE TRUNCATE ON public.journal_checkpoint_heads FOR EACH STATEMENT EXECUTE FUNCTION public.refuse_entry_change();


--
-- Name: journal_checkpoint_transactions journal_checkpoint_transactions_immutable; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER journal_checkpoint_transactions_immutable BEFORE DELETE OR UPDATE ON public.journal_checkpoint_transactions FOR EACH ROW EXECUTE FUNCTION public.refuse_entry_change();


--
-- Name: journal_checkpoint_transactions journal_checkpoint_transactions_no_truncate; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER journal_checkpoint_transactions_no_truncate BEFORE TRUNCATE ON public.journal_checkpoint_transactions FOR EACH STATEMENT EXECUTE FUNCTION public.refuse_entry_change();


--
-- Name: journal_checkpoints journal_checkpoints_immutable; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER journal_checkpoints_immutable BEFORE DELETE OR UPDATE ON public.journal_checkpoints FOR EACH ROW EXECUTE FUNCTION public.refuse_entry_change();


--
-- Name: journal_checkpoints journal_checkpoints_no_truncate; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER journal_checkpoints_no_truncate BEFORE TRUNCATE ON public.journal_checkpoints FOR EACH STATEMENT EXECUTE FUNCTION public.refuse_entry_change();


--
-- Name: transactions transactions_creation_immutable; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER transactions_creation_immutable BEFORE UPDATE ON public.transactions FOR EACH ROW EXECUTE FUNCTION public.refuse_creation_change();


--
-- Name: transactions transactions_never_deleted; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER transactions_never_deleted BEFORE DELETE ON public.transactions FOR EACH ROW EXECUTE FUNCTION public.refuse_ledger_row_delete();


--
-- Name: transactions transactions_no_truncate; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER transactions_no_truncate BEFORE TRUNCATE ON public.transactions FOR EACH STATEMENT EXECUTE FUNCTION public.refuse_ledger_row_delete();


--
-- Name: transactions transactions_resolution_immutable; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER transactions_resolution_immutable BEFORE UPDATE ON public.transactions FOR EACH ROW EXECUTE FUNCTION public.refuse_resolution_change();


--
-- Name: account_checkpoints account_checkpoints_account_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.account_checkpoints
    ADD CONSTRAINT account_checkpoints_account_id_fkey FOREIGN KEY (account_id) REFERENCES public.accounts(id);


--
-- Name: account_limits account_limits_account_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.account_limits
    ADD CONSTRAINT account_limits_account_id_fkey FOREIGN KEY (account_id) REFERENCES public.accounts(id);


--
-- Name: account_limits account_limits_set_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.account_limits
    ADD CONSTRAINT account_limits_set_id_fkey FOREIGN KEY (set_id) REFERENCES public.account_sets(id);


--
-- Name: account_monitors account_monitors_account_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.account_monitors
    ADD CONSTRAINT account_monitors_account_id_fkey FOREIGN KEY (account_id) REFERENCES public.accounts(id);


--
-- Name: account_monitors account_monitors_set_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.account_monitors
    ADD CONSTRAINT account_monitors_set_id_fkey FOREIGN KEY (set_id) REFERENCES public.account_sets(id);


--
-- Name: account_set_accounts account_set_accounts_account_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.account_set_accounts
    ADD CONSTRAINT account_set_accounts_account_id_fkey FOREIGN KEY (account_id) REFERENCES public.accounts(id);


--
-- Name: account_set_accounts account_set_accounts_set_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.account_set_accounts
    ADD CONSTRAINT account_set_accounts_set_id_fkey FOREIGN KEY (set_id) REFERENCES public.account_sets(id);


--
-- Name: account_set_checkpoints account_set_checkpoints_set_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.account_set_checkpoints
    ADD CONSTRAINT account_set_checkpoints_set_id_fkey FOREIGN KEY (set_id) REFERENCES public.account_sets(id);


--
-- Name: account_set_children account_set_children_child_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.account_set_children
    ADD CONSTRAINT account_set_children_child_id_fkey FOREIGN KEY (child_id) REFERENCES public.account_sets(id);


--
-- Name: account_set_children account_set_children_set_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.account_set_children
    ADD CONSTRAINT account_set_children_set_id_fkey FOREIGN KEY (set_id) REFERENCES public.account_sets(id);


--
-- Name: account_set_closure account_set_closure_set_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.account_set_closure
    ADD CONSTRAINT account_set_closure_set_id_fkey FOREIGN KEY (set_id) REFERENCES public.account_sets(id);


--
-- Name: account_set_movements account_set_movements_set_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.account_set_movements
    ADD CONSTRAINT account_set_movements_set_id_fkey FOREIGN KEY (set_id) REFERENCES public.account_sets(id);


--
-- Name: account_set_open_holds account_set_open_holds_set_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.account_set_open_holds
    ADD CONSTRAINT account_set_open_holds_set_id_fkey FOREIGN KEY (set_id) REFERENCES public.account_sets(id);


--
-- Name: audit_log audit_log_key_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.audit_log
    ADD CONSTRAINT audit_log_key_id_fkey FOREIGN KEY (key_id) REFERENCES public.api_keys(id);


--
-- Name: delivery_attempts delivery_attempts_delivery_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.delivery_attempts
    ADD CONSTRAINT delivery_attempts_delivery_id_fkey FOREIGN KEY (delivery_id) REFERENCES public.webhook_deliveries(id);


--
-- Name: journal_checkpoint_heads journal_checkpoint_heads_checkpoint_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.journal_checkpoint_heads
    ADD CONSTRAINT journal_checkpoint_heads_checkpoint_fkey FOREIGN KEY (checkpoint) REFERENCES public.journal_checkpoints(n);


--
-- Name: journal_checkpoint_transactions journal_checkpoint_transactions_checkpoint_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.journal_checkpoint_transactions
    ADD CONSTRAINT journal_checkpoint_transactions_checkpoint_fkey FOREIGN KEY (checkpoint) REFERENCES public.journal_checkpoints(n);


--
-- Name: open_holds open_holds_account_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.open_holds
    ADD CONSTRAINT open_holds_account_id_fkey FOREIGN KEY (account_id) REFERENCES public.accounts(id);


--
-- Name: open_holds open_holds_transaction_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.open_holds
    ADD CONSTRAINT open_holds_transaction_id_fkey FOREIGN KEY (transaction_id) REFERENCES public.transactions(id);


--
-- Name: transactions transactions_reverses_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.transactions
    ADD CONSTRAINT transactions_reverses_fkey FOREIGN KEY (reverses) REFERENCES public.transactions(id);


--
-- Name: webhook_deliveries webhook_deliveries_event_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_event_id_fkey FOREIGN KEY (event_id) REFERENCES public.outbox_events(id);


--
-- Name: webhook_deliveries webhook_deliveries_subscription_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_subscription_id_fkey FOREIGN KEY (subscription_id) REFERENCES public.webhook_subscriptions(id);


--
-- PostgreSQL database dump complete
--


