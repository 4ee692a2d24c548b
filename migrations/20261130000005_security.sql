-- API keys: every /v1 request names one (`Authorization: Bearer <token>`). Only a SHA-256 of
-- the token is stored: a 256-bit random token cannot be guessed from its hash, so it needs no
-- slow password hash, and a stolen table reveals no usable key. A key is revoked, never
-- deleted, so the audit log's references stay meaningful.
create table api_keys (
    id           uuid primary key,
    owner        text not null check (owner ~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$'),
    scope        text not null check (scope in ('read', 'write', 'admin')),
    token_sha256 bytea not null unique check (length(token_sha256) = 32),
    created_at   timestamptz not null default now(),
    revoked_at   timestamptz
);

-- Who made each write: one row per resource written, inserted by the same database transaction
-- as the write (a rolled-back write leaves no audit row; a committed one always has its row).
-- `key_id` is null for writers without a key (the stream consumer, named by `owner`).
create table audit_log (
    seq        bigint generated always as identity primary key,
    at         timestamptz not null default now(),
    key_id     uuid references api_keys (id),
    owner      text not null,
    request_id text,
    action     text not null,
    resource   text not null
);
create index audit_log_resource on audit_log (resource);
create index audit_log_at on audit_log (at);
