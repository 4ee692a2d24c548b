//! Erasing a transaction's metadata (crypto-shredding; docs/verification.md, "Erasable
//! metadata"): the metadata, which may hold personal data, is emptied and its salt destroyed,
//! and the digest the seals took of it is kept, so every seal over the transaction still
//! checks while nothing is left to match the kept digest against.
//!
//! An erasure is a lie if a copy survives, so one database transaction empties every stored
//! copy: the row's `metadata`, its canonical create request (`creation_request`) and the answer
//! replayed to retries (`creation_response`), a capture's answer (`resolution_response`), and
//! the data of the transaction's outbox events, which webhooks and the events stream send from
//! (deliveries store no payload of their own). The replay cache never holds a creation with
//! metadata (`replay_cache`), so no process keeps a copy in memory. The same transaction writes
//! the `transaction.metadata_erased` event and the audit row naming who erased and why.
//!
//! The schema holds it to that (`refuse_creation_change`, migration 20261211020000): nothing
//! else may change the metadata, and an erasure must keep exactly the digest of what it erased.

use super::audit;
use super::events::{self, EventType, TransactionEvent};
use super::seals::merkle::Hash;
use super::seals::metadata;
use super::store::Store;
use super::transactions;
use super::views::TransactionView;
use crate::db::StoreError;
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use sqlx::PgConnection;
use uuid::Uuid;

/// The audit log's action for an erasure.
pub const AUDIT_ACTION: &str = "transaction.erase_metadata";

/// The longest reason an erasure may give, in characters (the audit log's check says the same).
pub const MAX_REASON_CHARS: usize = 500;

/// What an erasure request found and did.
#[derive(Debug)]
pub enum Erasure {
    /// Erased now; the transaction as it reads after.
    Erased(TransactionView),
    /// Erased before; the transaction as it reads, nothing written.
    AlreadyErased(TransactionView),
    NotFound,
}

/// The stored copies of a transaction's metadata, read under the row's lock.
#[derive(Debug, Clone)]
struct Stored {
    /// `metadata::text`, the text the seals' digest is taken of.
    metadata_text: String,
    metadata_salt: Option<Vec<u8>>,
    erased: bool,
    creation_request: Value,
    creation_response: Option<String>,
    resolution_response: Option<String>,
}

/// What an erasure writes: the kept digest and every stored copy without its metadata.
#[derive(Debug, Clone, PartialEq)]
struct Scrubbed {
    digest: Hash,
    creation_request: Value,
    creation_response: Option<String>,
    resolution_response: Option<String>,
}

/// The erasure of a row not yet erased (pure): the digest is the seals' own
/// ([`metadata::digest`]), which the schema's trigger recomputes in SQL and compares.
fn scrub(stored: &Stored) -> Scrubbed {
    Scrubbed {
        digest: metadata::digest(stored.metadata_salt.as_deref(), &stored.metadata_text),
        creation_request: request_without_metadata(&stored.creation_request),
        creation_response: stored
            .creation_response
            .as_deref()
            .map(answer_without_metadata),
        resolution_response: stored
            .resolution_response
            .as_deref()
            .map(answer_without_metadata),
    }
}

/// A canonical request with its `metadata` emptied (the SQL function `without_metadata`).
fn request_without_metadata(request: &Value) -> Value {
    let mut request = request.clone();
    if let Some(metadata) = request.get_mut("metadata") {
        *metadata = Value::Object(Map::new());
    }
    request
}

/// A stored answer (JSON text) with its `metadata` emptied and every other byte kept, so that
/// a replay after the erasure differs from the one before by the metadata only. Text that is
/// not a JSON object, or has no `metadata`, is kept as it is (a refusal's problem body).
pub fn answer_without_metadata(answer: &str) -> String {
    let Ok(Members(members)) = serde_json::from_str::<Members>(answer) else {
        return answer.to_owned();
    };
    if !members.iter().any(|(key, _)| key == "metadata") {
        return answer.to_owned();
    }
    let fields: Vec<String> = members
        .iter()
        .map(|(key, value)| {
            let value = if key == "metadata" { "{}" } else { value.get() };
            let key = serde_json::to_string(key).expect("a string always serializes");
            format!("{key}:{value}")
        })
        .collect();
    format!("{{{}}}", fields.join(","))
}

/// A JSON object's members in their order, each value as its text.
struct Members(Vec<(String, Box<RawValue>)>);

impl<'de> Deserialize<'de> for Members {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Members, D::Error> {
        struct InOrder;
        impl<'de> Visitor<'de> for InOrder {
            type Value = Members;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry()? {
                    members.push(member);
                }
                Ok(Members(members))
            }
        }
        d.deserialize_map(InOrder)
    }
}

/// Erases the metadata of transaction `id`, recording `reason` (validated by the caller) in
/// the audit log. A second erasure finds the row erased and writes nothing.
pub async fn erase(store: &Store, id: Uuid, reason: &str) -> Result<Erasure, StoreError> {
    let mut conn = store.pool().acquire().await?;
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let Some(stored) = lock(&mut tx, id).await? else {
        return Ok(Erasure::NotFound);
    };
    if stored.erased {
        let view = read(store, &mut tx, id).await?;
        return Ok(Erasure::AlreadyErased(view));
    }
    write(&mut tx, id, &scrub(&stored)).await?;
    scrub_events(&mut tx, id).await?;
    let view = read(store, &mut tx, id).await?;
    let event = TransactionEvent::new(EventType::TransactionMetadataErased, &view, &[]);
    events::record_transactions(&mut tx, &[event]).await?;
    audit::record_with_reason(&mut tx, AUDIT_ACTION, &id.to_string(), reason).await?;
    super::caller::commit_in_request(tx).await?;
    Ok(Erasure::Erased(view))
}

/// The row's copies of the metadata, `FOR UPDATE`: a capture, which renders its answer from
/// the row under the same lock, comes wholly before or wholly after the erasure. One row by
/// its id, a statement both engines route alike.
async fn lock(conn: &mut PgConnection, id: Uuid) -> Result<Option<Stored>, StoreError> {
    let row = sqlx::query!(
        r#"select metadata::text as "metadata_text!", metadata_salt,
                  metadata_erased_at is not null as "erased!", creation_request,
                  creation_response, resolution_response
           from transactions where id = $1 for update"#,
        id
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| Stored {
        metadata_text: r.metadata_text,
        metadata_salt: r.metadata_salt,
        erased: r.erased,
        creation_request: r.creation_request,
        creation_response: r.creation_response,
        resolution_response: r.resolution_response,
    }))
}

/// The erasure itself; `metadata_erased_at is null` again, though the lock already ensures it,
/// so that no path could erase twice.
async fn write(conn: &mut PgConnection, id: Uuid, s: &Scrubbed) -> Result<(), StoreError> {
    let written = sqlx::query!(
        r#"update transactions
           set metadata = '{}', metadata_salt = null, metadata_erased_at = now(),
               metadata_erased_digest = $2, creation_request = $3, creation_response = $4,
               resolution_response = $5
           where id = $1 and metadata_erased_at is null"#,
        id,
        &s.digest[..],
        s.creation_request,
        s.creation_response,
        s.resolution_response,
    )
    .execute(conn)
    .await?;
    assert_eq!(
        written.rows_affected(),
        1,
        "the row is locked and not erased"
    );
    Ok(())
}

/// The transaction's outbox events without its metadata: the dispatcher and the events stream
/// send an event's stored data, so an event not sent yet goes out erased. (`outbox_events` is
/// a plain table on Citus, on the coordinator.)
async fn scrub_events(conn: &mut PgConnection, id: Uuid) -> Result<(), StoreError> {
    sqlx::query!(
        r#"update outbox_events set data = jsonb_set(data, '{transaction,metadata}', '{}')
           where transaction_id = $1 and data->'transaction' ? 'metadata'
             and data->'transaction'->'metadata' <> '{}'"#,
        id
    )
    .execute(conn)
    .await?;
    Ok(())
}

async fn read(
    store: &Store,
    conn: &mut PgConnection,
    id: Uuid,
) -> Result<TransactionView, StoreError> {
    transactions::find(&mut store.on(conn), id)
        .await?
        .ok_or_else(|| crate::db::corrupt("transactions", id, "locked, then not found"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_answer_loses_its_metadata_and_keeps_every_other_byte() {
        let answer = r#"{"id":"x","metadata":{"customer":"Noura","kyc":[1,{"a":null}]},"entries":[{"amount":-5}],"z":"é"}"#;
        assert_eq!(
            answer_without_metadata(answer),
            r#"{"id":"x","metadata":{},"entries":[{"amount":-5}],"z":"é"}"#
        );
        for kept in [
            r#"{"type":"about:blank","code":"insufficient_funds"}"#,
            r#""metadata""#,
            "not json",
            r#"{"id":"x","metadata":{}}"#,
        ] {
            assert_eq!(answer_without_metadata(kept), kept);
        }
    }

    #[test]
    fn the_scrub_keeps_the_seals_digest_of_what_it_erased() {
        let stored = Stored {
            metadata_text: r#"{"customer": "Noura"}"#.into(),
            metadata_salt: Some(vec![9; 16]),
            erased: false,
            creation_request: json!({"amount": 5, "metadata": {"customer": "Noura"}}),
            creation_response: Some(r#"{"amount":5,"metadata":{"customer":"Noura"}}"#.into()),
            resolution_response: None,
        };
        let scrubbed = scrub(&stored);
        assert_eq!(
            scrubbed,
            Scrubbed {
                digest: metadata::digest(Some(&[9; 16]), r#"{"customer": "Noura"}"#),
                creation_request: json!({"amount": 5, "metadata": {}}),
                creation_response: Some(r#"{"amount":5,"metadata":{}}"#.into()),
                resolution_response: None,
            }
        );
        let unsalted = Stored {
            metadata_salt: None,
            ..stored
        };
        assert_eq!(
            scrub(&unsalted).digest,
            metadata::digest(None, r#"{"customer": "Noura"}"#),
            "a row older than salts: the digest of the text alone"
        );
    }

    #[test]
    fn a_request_without_metadata_is_kept() {
        let request = json!({"amount": 5});
        assert_eq!(request_without_metadata(&request), request);
    }
}
