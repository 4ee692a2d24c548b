//! Webhook subscriptions: where events go, which types, signed with which secrets. Created like
//! every resource (the caller's id is the primary key; a retry replays the stored response;
//! the same id with another request is a mismatch). A webhook makes the server send requests
//! to a URL a caller chose, so URLs are checked (scheme, no credentials) and the operator can
//! restrict the hosts they may name.

use super::{address, signing};
use crate::db::StoreError;
use crate::ledger::events::EventType;
use crate::ledger::now_micros;
use crate::ledger::{Created, Outcome, audit};
use crate::problem::FieldError;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sqlx::PgConnection;
use utoipa::ToSchema;
use uuid::Uuid;

/// The longest webhook URL.
pub const MAX_URL_LEN: usize = 2048;

/// Which hosts webhook URLs may name: any public one (an empty list), or only these. An entry
/// is a host (`hooks.example.com`), a host and port (`127.0.0.1:9000`), or a suffix
/// (`*.example.com`). A listed host may be private (an in-house receiver); an unlisted one
/// must be public (see `address`).
#[derive(Debug, Clone, Default)]
pub struct UrlPolicy {
    pub allowed_hosts: Vec<String>,
}

/// Which hosts webhook URLs may name (`WEBHOOK_ALLOWED_HOSTS`) as given: checked when a
/// subscription is created and again before every send.
#[derive(Debug, Clone, Default)]
pub struct WebhookPolicy {
    pub allowed_hosts: Vec<String>,
}

impl WebhookPolicy {
    pub fn url_policy(&self) -> UrlPolicy {
        UrlPolicy {
            allowed_hosts: self
                .allowed_hosts
                .iter()
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
                .collect(),
        }
    }
}

impl UrlPolicy {
    /// The URL, or the field error that refuses it.
    pub fn check(&self, raw: &str) -> Result<url::Url, FieldError> {
        let refuse = |code: &str, message: &str| FieldError::new("/url", code, message);
        if raw.chars().any(char::is_control) {
            return Err(refuse("url", "must not contain control characters"));
        }
        if raw.len() > MAX_URL_LEN {
            return Err(refuse(
                "length",
                &format!("must be at most {MAX_URL_LEN} bytes"),
            ));
        }
        let url = url::Url::parse(raw).map_err(|_| refuse("url", "must be an absolute URL"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(refuse("url_scheme", "must be http or https"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(refuse(
                "url_credentials",
                "must not carry credentials; use the signature",
            ));
        }
        let Some(host) = url.host_str() else {
            return Err(refuse("url", "must name a host"));
        };
        let port = url.port_or_known_default();
        if !self.allowed_hosts.is_empty() && !self.matches(host, port) {
            return Err(refuse(
                "url_not_allowed",
                &format!("host {host} is not on the operator's allow-list (WEBHOOK_ALLOWED_HOSTS)"),
            ));
        }
        // Not public: refused unless the operator listed it. A name is checked again on the
        // address it resolves to, at every connection (`address::GuardedResolver`).
        let literal = match url.host() {
            Some(url::Host::Ipv4(ip)) => Some(std::net::IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => Some(std::net::IpAddr::V6(ip)),
            _ => None,
        };
        let local =
            literal.is_some_and(|ip| !address::is_public(ip)) || address::is_local_name(host);
        if local && !self.matches(host, port) {
            return Err(refuse(
                "url_not_public",
                &format!(
                    "host {host} is not a public address (loopback, private, link-local and \
                     the like are refused); list it in WEBHOOK_ALLOWED_HOSTS to allow it"
                ),
            ));
        }
        Ok(url)
    }

    /// Whether an entry of the allow-list names `host` (and `port`, when the entry has one).
    fn matches(&self, host: &str, port: Option<u16>) -> bool {
        self.entries_for(host)
            .any(|entry_port| entry_port.is_none() || entry_port == port)
    }

    /// Whether the operator listed `host` (on any port): such a host may resolve to a private
    /// address.
    pub fn lists_host(&self, host: &str) -> bool {
        self.entries_for(host).next().is_some()
    }

    /// The ports (`None`: any) of the allow-list's entries that name `host`.
    fn entries_for<'a>(&'a self, host: &str) -> impl Iterator<Item = Option<u16>> + 'a {
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .trim_end_matches('.')
            .to_ascii_lowercase();
        self.allowed_hosts.iter().filter_map(move |entry| {
            let entry = entry.to_ascii_lowercase();
            if let Some(suffix) = entry.strip_prefix("*.") {
                host.ends_with(&format!(".{suffix}")).then_some(None)
            } else if let Some((h, p)) = entry
                .rsplit_once(':')
                .and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
            {
                (h.trim_start_matches('[').trim_end_matches(']') == host).then_some(Some(p))
            } else {
                (entry.trim_start_matches('[').trim_end_matches(']') == host).then_some(None)
            }
        })
    }
}

/// `sha256:<hex>` of a secret: equal for equal secrets, and telling nothing of the secret
/// (it is 32 random bytes or more, so the digest cannot be searched for it).
pub fn secret_digest(secret: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(secret.as_bytes());
    format!("sha256:{}", crate::hex::encode(&digest))
}

/// A validated create request. `request` is its canonical form (without the id, and with the
/// digest of the secret only if the caller chose it), compared when the id comes again: the
/// stored request never holds a secret, so erasing a deleted subscription's secrets erases
/// them all.
#[derive(Debug, Clone)]
pub struct NewSubscription {
    pub id: Uuid,
    pub url: String,
    /// Empty: every event type.
    pub event_types: Vec<EventType>,
    pub secret: String,
    pub request: Value,
}

impl NewSubscription {
    pub fn new(
        id: Uuid,
        url: String,
        mut event_types: Vec<EventType>,
        secret: Option<String>,
    ) -> NewSubscription {
        event_types.sort();
        event_types.dedup();
        let types: Vec<&str> = event_types.iter().map(|t| t.as_str()).collect();
        let request = json!({"url": url, "event_types": types,
            "secret": secret.as_deref().map(secret_digest)});
        NewSubscription {
            id,
            url,
            event_types,
            secret: secret.unwrap_or_else(signing::generate_secret),
            request,
        }
    }
}

/// `active` until deleted; a deleted subscription is kept (its deliveries name it) but sent
/// nothing more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubscriptionStatus {
    Active,
    Deleted,
}

impl SubscriptionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SubscriptionStatus::Active => "active",
            SubscriptionStatus::Deleted => "deleted",
        }
    }

    /// The stored `webhook_subscriptions.status`; `None` for anything the schema would refuse.
    pub fn parse(stored: &str) -> Option<SubscriptionStatus> {
        [SubscriptionStatus::Active, SubscriptionStatus::Deleted]
            .into_iter()
            .find(|s| s.as_str() == stored)
    }
}

/// A subscription as the API shows it. `secret` appears only in the answers that create or
/// rotate it: it is the caller's one chance to read it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SubscriptionView {
    pub id: Uuid,
    pub url: String,
    /// Empty: every event type.
    pub event_types: Vec<String>,
    /// `active` or `deleted`.
    #[schema(value_type = String)]
    pub status: SubscriptionStatus,
    /// How many secrets sign each delivery: 2 during a rotation.
    pub active_secrets: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A subscription as stored.
#[derive(Debug, Clone)]
pub struct Subscription {
    pub seq: i64,
    pub id: Uuid,
    pub url: String,
    pub event_types: Vec<String>,
    pub secrets: Vec<String>,
    pub status: SubscriptionStatus,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A subscription row as the SQL reads it, before its status is parsed.
struct SubscriptionRow {
    seq: i64,
    id: Uuid,
    url: String,
    event_types: Vec<String>,
    secrets: Vec<String>,
    status: String,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl SubscriptionRow {
    fn parse(self) -> Result<Subscription, StoreError> {
        let status = SubscriptionStatus::parse(&self.status).ok_or_else(|| {
            crate::db::corrupt(
                "webhook_subscriptions",
                self.id,
                format!("status {:?}", self.status),
            )
        })?;
        Ok(Subscription {
            seq: self.seq,
            id: self.id,
            url: self.url,
            event_types: self.event_types,
            secrets: self.secrets,
            status,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

impl Subscription {
    pub fn view(&self) -> SubscriptionView {
        SubscriptionView {
            id: self.id,
            url: self.url.clone(),
            event_types: self.event_types.clone(),
            status: self.status,
            active_secrets: self.secrets.len(),
            secret: None,
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

pub async fn create(
    conn: &mut PgConnection,
    new: &NewSubscription,
) -> Result<Created, sqlx::Error> {
    let now = now_micros();
    let types: Vec<String> = new
        .event_types
        .iter()
        .map(|t| t.as_str().to_owned())
        .collect();
    let view = SubscriptionView {
        id: new.id,
        url: new.url.clone(),
        event_types: types.clone(),
        status: SubscriptionStatus::Active,
        active_secrets: 1,
        secret: Some(new.secret.clone()),
        created_at: now,
        updated_at: now,
    };
    let body = serde_json::to_string(&view).expect("a subscription view always serializes");
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let inserted = sqlx::query!(
        r#"insert into webhook_subscriptions (id, url, event_types, secrets, creation_request,
                                              creation_response, created_at, updated_at)
           values ($1, $2, $3, array[$4], $5, $6, $7, $7)
           on conflict (id) do nothing"#,
        new.id,
        new.url,
        &types,
        new.secret,
        new.request,
        body,
        now
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if inserted == 1 {
        audit::record(&mut tx, "webhook.create", &[new.id.to_string()]).await?;
        crate::ledger::caller::commit_in_request(tx).await?;
        return Ok(Created::First(Outcome::Created { body }));
    }
    tx.commit().await?;
    // A replay shows the secret it made only while that secret still signs: once rotated
    // away or deleted, the caller could not read it now, so neither can a replay.
    let stored = sqlx::query!(
        r#"select creation_request,
                  case when creation_response::jsonb ->> 'secret' = any(secrets)
                       then creation_response
                       else regexp_replace(creation_response, '"secret":"[^"]*"', '"secret":null')
                  end as "creation_response!"
           from webhook_subscriptions where id = $1"#,
        new.id
    )
    .fetch_one(conn)
    .await?;
    Ok(Created::replay_or_mismatch(
        &stored.creation_request,
        &new.request,
        Outcome::Created {
            body: stored.creation_response,
        },
    ))
}

pub async fn find(conn: &mut PgConnection, id: Uuid) -> Result<Option<Subscription>, StoreError> {
    sqlx::query_as!(
        SubscriptionRow,
        r#"select seq, id, url, event_types, secrets, status, created_at, updated_at
           from webhook_subscriptions where id = $1"#,
        id
    )
    .fetch_optional(conn)
    .await?
    .map(SubscriptionRow::parse)
    .transpose()
}

/// Newest first, `limit` of them after the cursor `before_seq`.
pub async fn list(
    conn: &mut PgConnection,
    before_seq: Option<i64>,
    limit: i64,
) -> Result<(Vec<SubscriptionView>, Option<i64>), StoreError> {
    let rows = sqlx::query_as!(
        SubscriptionRow,
        r#"select seq, id, url, event_types, secrets, status, created_at, updated_at
           from webhook_subscriptions where ($1::bigint is null or seq < $1)
           order by seq desc limit $2"#,
        before_seq,
        limit + 1
    )
    .fetch_all(conn)
    .await?;
    let (views, next) = crate::ledger::transactions::paginate(
        rows,
        limit,
        |s| s.seq,
        |s| s.parse().map(|s| s.view()),
    );
    Ok((views.into_iter().collect::<Result<_, _>>()?, next))
}

/// `active → deleted` (a repeat finds it deleted and answers the same). Its pending deliveries
/// are cancelled in the same transaction: nothing more is sent to it. Its secrets are erased,
/// from the row and from the stored creation answer: nothing is signed for it again, and
/// nobody (a replayed create included) can read them any more.
pub async fn delete(conn: &mut PgConnection, id: Uuid) -> Result<Option<Subscription>, StoreError> {
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let changed = sqlx::query!(
        r#"update webhook_subscriptions
           set status = 'deleted', updated_at = now(), secrets = '{}',
               creation_response = regexp_replace(creation_response, '"secret":"[^"]*"',
                                                  '"secret":null')
           where id = $1 and status = 'active'"#,
        id
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if changed == 1 {
        sqlx::query!(
            "update webhook_deliveries set status = 'cancelled', updated_at = now(),
                    last_error = 'the subscription was deleted'
             where subscription_id = $1 and status = 'pending'",
            id
        )
        .execute(&mut *tx)
        .await?;
        audit::record(&mut tx, "webhook.delete", &[id.to_string()]).await?;
    }
    let subscription = find(&mut tx, id).await?;
    crate::ledger::caller::commit_in_request(tx).await?;
    Ok(subscription)
}

/// What a rotation request does: a retry (the same Idempotency-Key as the last rotation, or
/// the secret already first) changes nothing and answers what is there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rotation {
    Replay,
    Rotate,
}

impl Rotation {
    pub fn decide(
        current_first: Option<&str>,
        current_key: Option<Uuid>,
        secret: &str,
        key: Option<Uuid>,
    ) -> Rotation {
        let same_key = key.is_some() && key == current_key;
        if same_key || current_first == Some(secret) {
            Rotation::Replay
        } else {
            Rotation::Rotate
        }
    }
}

/// Makes `secret` the first of the subscription's two secrets (the previous first stays second,
/// the older one goes), so deliveries carry both signatures until the receiver has switched.
/// Retries apply once: the same `secret` again, or a rotation under a `key` (an
/// `Idempotency-Key`) already applied, writes nothing and answers the current first secret.
/// `None` when there is no active subscription `id`.
pub async fn rotate_secret(
    conn: &mut PgConnection,
    id: Uuid,
    secret: &str,
    key: Option<Uuid>,
) -> Result<Option<(SubscriptionView, Rotation)>, StoreError> {
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let current = sqlx::query!(
        "select secrets, rotation_key from webhook_subscriptions
         where id = $1 and status = 'active' for update",
        id
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(current) = current else {
        return Ok(None);
    };
    let first = current.secrets.first().map(String::as_str);
    let rotation = Rotation::decide(first, current.rotation_key, secret, key);
    if rotation == Rotation::Rotate {
        sqlx::query!(
            "update webhook_subscriptions
             set secrets = array[$2, secrets[1]], rotation_key = coalesce($3, rotation_key),
                 updated_at = now()
             where id = $1",
            id,
            secret,
            key
        )
        .execute(&mut *tx)
        .await?;
        audit::record(&mut tx, "webhook.rotate_secret", &[id.to_string()]).await?;
    }
    let subscription = find(&mut tx, id).await?.ok_or(sqlx::Error::RowNotFound)?;
    crate::ledger::caller::commit_in_request(tx).await?;
    let view = SubscriptionView {
        secret: subscription.secrets.first().cloned(),
        ..subscription.view()
    };
    Ok(Some((view, rotation)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rotation_is_a_replay_under_the_last_key_or_with_the_current_secret() {
        let (k1, k2) = (Uuid::new_v4(), Uuid::new_v4());
        let decide = Rotation::decide;
        assert_eq!(decide(Some("a"), Some(k1), "b", Some(k1)), Rotation::Replay);
        assert_eq!(decide(Some("a"), Some(k1), "a", None), Rotation::Replay);
        assert_eq!(decide(Some("a"), Some(k1), "b", Some(k2)), Rotation::Rotate);
        assert_eq!(decide(Some("a"), None, "b", None), Rotation::Rotate);
        assert_eq!(decide(Some("a"), None, "b", Some(k1)), Rotation::Rotate);
    }

    #[test]
    fn a_secret_digest_is_stable_and_hides_the_secret() {
        let digest = secret_digest("whsec_abc");
        assert_eq!(digest, secret_digest("whsec_abc"));
        assert_ne!(digest, secret_digest("whsec_abd"));
        assert!(digest.starts_with("sha256:") && !digest.contains("abc"));
    }

    #[test]
    fn urls_are_checked_and_the_allow_list_applies() {
        let open = UrlPolicy::default();
        assert!(open.check("https://hooks.example.com/in").is_ok());
        assert_eq!(
            open.check("ftp://x.example.com").unwrap_err().code,
            "url_scheme"
        );
        assert_eq!(
            open.check("https://user:pw@x.example.com")
                .unwrap_err()
                .code,
            "url_credentials"
        );
        assert_eq!(open.check("not a url").unwrap_err().code, "url");
        let strict = UrlPolicy {
            allowed_hosts: vec![
                "*.example.com".into(),
                "127.0.0.1:9000".into(),
                "hooks.test".into(),
            ],
        };
        assert!(strict.check("https://a.example.com/x").is_ok());
        assert!(strict.check("http://127.0.0.1:9000/x").is_ok());
        assert!(strict.check("http://hooks.test/x").is_ok());
        for refused in [
            "http://127.0.0.1:9001/x",
            "http://example.com/x",
            "http://169.254.169.254/latest",
            "http://localhost/x",
        ] {
            assert_eq!(
                strict.check(refused).unwrap_err().code,
                "url_not_allowed",
                "{refused}"
            );
        }
    }

    #[test]
    fn by_default_only_public_hosts_are_allowed_and_listed_ones_whatever_they_are() {
        let open = UrlPolicy::default();
        for refused in [
            "http://169.254.169.254/latest/meta-data",
            "http://10.1.2.3/x",
            "http://localhost:5432/",
            "http://LOCALHOST./x",
            "http://api.localhost/x",
            "http://[::1]/x",
            "http://0.0.0.0/x",
            "http://[::ffff:10.0.0.1]/x",
            "http://[::ffff:7f00:1]/x",
            "http://[fd00::1]/x",
            "http://[fe80::1]/x",
            "http://100.64.0.1/x",
            "http://224.0.0.1/x",
            "http://2130706433/x",
            "http://0x7f.1/x",
            "http://127.1/x",
        ] {
            assert_eq!(
                open.check(refused).map_err(|e| e.code),
                Err("url_not_public".to_owned()),
                "{refused}"
            );
        }
        assert!(open.check("https://93.184.216.34/x").is_ok());
        assert!(open.check("https://[2606:4700::1111]/x").is_ok());
        let listed = UrlPolicy {
            allowed_hosts: vec!["127.0.0.1:9000".into(), "localhost".into(), "[::1]".into()],
        };
        assert!(listed.check("http://127.0.0.1:9000/x").is_ok());
        assert!(listed.check("http://localhost:1234/x").is_ok());
        assert!(listed.check("http://[::1]:8080/x").is_ok());
        assert!(listed.lists_host("127.0.0.1") && listed.lists_host("LocalHost"));
        assert!(!listed.lists_host("10.0.0.1"));
    }
}
