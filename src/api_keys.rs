//! API keys: a random 256-bit token shown once, stored as its SHA-256, with an owner and a
//! scope (`read` < `write` < `admin`). `wallet-ledger api-key create | list | revoke`.

use crate::ledger::audit;
use crate::ledger::ids::AccountId;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use serde::Serialize;
use sha2::{Digest, Sha256};
use sqlx::PgConnection;
use uuid::Uuid;

/// What a key may do; each scope includes the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// GETs of accounts, balances, entries, holds and transactions.
    Read,
    /// Money-moving POSTs (and everything `read` may do).
    Write,
    /// Accounts' lifecycle, webhooks, deliveries, reconciliations (and everything `write` may do).
    Admin,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Write => "write",
            Scope::Admin => "admin",
        }
    }

    pub fn parse(value: &str) -> Option<Scope> {
        [Scope::Read, Scope::Write, Scope::Admin]
            .into_iter()
            .find(|s| s.as_str() == value)
    }
}

/// Every token starts with this, so a leaked one is recognisable (for secret scanners too).
pub const TOKEN_PREFIX: &str = "wl_";
const TOKEN_BYTES: usize = 32;

/// Who is calling: what the authentication middleware puts in the request's extensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub key_id: Uuid,
    pub owner: String,
    pub scope: Scope,
}

/// A key as listed: never its token.
#[derive(Debug, Clone, Serialize)]
pub struct KeyView {
    pub id: Uuid,
    pub owner: String,
    pub scope: String,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

/// What the database stores of a token, and looks it up by.
pub fn hash(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

/// Makes a key; returns its id and its token (the only time the token exists outside the
/// caller's hands).
pub async fn create(
    conn: &mut PgConnection,
    owner: &str,
    scope: Scope,
) -> anyhow::Result<(Uuid, String)> {
    anyhow::ensure!(
        AccountId::parse(owner).is_some(),
        "--owner must match [A-Za-z0-9][A-Za-z0-9._:@-]{{0,127}}"
    );
    let mut secret = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut secret).map_err(|e| anyhow::anyhow!("no randomness available: {e}"))?;
    let token = format!("{TOKEN_PREFIX}{}", URL_SAFE_NO_PAD.encode(secret));
    let id = Uuid::new_v4();
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    sqlx::query!(
        "insert into api_keys (id, owner, scope, token_sha256) values ($1, $2, $3, $4)",
        id,
        owner,
        scope.as_str(),
        hash(&token)
    )
    .execute(&mut *tx)
    .await?;
    audit::record(&mut tx, "api_key.create", &[id.to_string()]).await?;
    tx.commit().await?;
    Ok((id, token))
}

/// The keys that exist and are not revoked among those with these token hashes, by hash
/// (one statement for the requests of a moment: `http::key_lookups`).
pub async fn authenticate_many(
    conn: &mut PgConnection,
    token_hashes: &[Vec<u8>],
) -> Result<Vec<(Vec<u8>, Principal)>, sqlx::Error> {
    let rows = sqlx::query!(
        "select token_sha256, id, owner, scope from api_keys
         where token_sha256 = any($1) and revoked_at is null",
        token_hashes
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| {
            let principal = Principal {
                key_id: r.id,
                owner: r.owner,
                scope: Scope::parse(&r.scope)?,
            };
            Some((r.token_sha256, principal))
        })
        .collect())
}

pub async fn list(conn: &mut PgConnection) -> Result<Vec<KeyView>, sqlx::Error> {
    sqlx::query_as!(
        KeyView,
        "select id, owner, scope, created_at, revoked_at from api_keys order by created_at, id"
    )
    .fetch_all(conn)
    .await
}

/// Revokes a key (a repeat is a no-op); false when there is no such key.
pub async fn revoke(conn: &mut PgConnection, id: Uuid) -> Result<bool, sqlx::Error> {
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let found = sqlx::query!(
        "update api_keys set revoked_at = coalesce(revoked_at, now()) where id = $1",
        id
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if found == 1 {
        audit::record(&mut tx, "api_key.revoke", &[id.to_string()]).await?;
    }
    tx.commit().await?;
    Ok(found == 1)
}
