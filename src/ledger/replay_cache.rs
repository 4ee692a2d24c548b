//! Stored creation answers held in memory, so that a retried create is answered without a
//! database round trip and without joining a group commit.
//!
//! Why this is exact, not a guess: a transaction's creation record (`creation_request`,
//! `creation_outcome`, `creation_response` and the refusal's code and detail) never changes once committed (the schema's immutability trigger refuses
//! it), so a copy read from a committed row stays true for as long as the row exists. The
//! cache only ever holds what `posting` read back from such rows (never what a write was about
//! to store), so a cached answer is byte for byte the answer the database path gives.
//!
//! One change is allowed to a creation record: the erasure of its metadata (`ledger::erasure`),
//! which may happen in another process. So a creation with metadata is never held: an erased
//! answer must not be replayed from any process's memory, and only the database knows whether
//! it was erased. A creation without metadata is what an erasure leaves it, so it stays exact.
//!
//! It is filled on a replay, not on a create: a retry storm of one id (a client or a proxy
//! retrying in a loop) reads the row once, and memory is spent only on ids that were retried.
//! Bounded in bytes, not entries: a client chooses how large its requests are (legs and
//! references up to the body limit), so a count of entries would let one write key fill
//! gigabytes. A weighed cache (`quick_cache`, which evicts by recency and frequency) keeps the
//! sum of the entries' estimated sizes under the bound.

use super::posting::StoredCreation;
use super::{Created, Outcome};
use quick_cache::Weighter;
use std::sync::Arc;
use uuid::Uuid;

/// The default bound of the replay cache: 64 MiB per process.
pub const DEFAULT_REPLAY_CACHE_BYTES: u64 = 64 * 1024 * 1024;

/// What an entry costs beyond its texts: the key, the map's slot, the `Arc`, the parsed
/// request's nodes (a parsed JSON value takes about twice its text).
const ENTRY_OVERHEAD_BYTES: u64 = 128;

/// A held answer with its size, computed once (the weigher runs during eviction).
#[derive(Clone)]
struct Entry {
    stored: Arc<StoredCreation>,
    bytes: u64,
}

impl Entry {
    fn new(stored: StoredCreation) -> Entry {
        let request_text = serde_json::to_string(&stored.request).map_or(0, |t| t.len());
        let answer = match &stored.outcome {
            Outcome::Created { body } => body.len(),
            Outcome::Refused(r) => {
                r.detail.len() + r.recorded_answer.as_ref().map_or(0, String::len)
            }
        };
        let bytes = ENTRY_OVERHEAD_BYTES + 2 * request_text as u64 + answer as u64;
        Entry {
            stored: Arc::new(stored),
            bytes,
        }
    }
}

/// Whether an erasure could change this creation record: its request holds metadata.
fn erasable(stored: &StoredCreation) -> bool {
    stored
        .request
        .get("metadata")
        .and_then(serde_json::Value::as_object)
        .is_some_and(|m| !m.is_empty())
}

#[derive(Clone)]
struct BySize;

impl Weighter<Uuid, Entry> for BySize {
    fn weight(&self, _id: &Uuid, entry: &Entry) -> u64 {
        entry.bytes
    }
}

/// The smallest share of the bound one shard of the cache holds: an answer heavier than its
/// shard is not kept, and the crate's default (4 shards a core) would leave a many-core
/// machine shards too small for a large answer. Retries are rare enough that fewer locks cost
/// nothing.
const MIN_SHARD_BYTES: u64 = 8 * 1024 * 1024;

/// A power of two from 1 to 8, so that each shard holds at least MIN_SHARD_BYTES when the
/// bound allows it.
fn shards(max_bytes: u64) -> usize {
    let fits = (max_bytes / MIN_SHARD_BYTES).clamp(1, 8);
    1 << fits.ilog2()
}

pub struct ReplayCache {
    /// `None` when the bound is 0 (off).
    cache: Option<quick_cache::sync::Cache<Uuid, Entry, BySize>>,
}

impl ReplayCache {
    /// A cache of answers whose estimated sizes sum to at most `max_bytes`; 0 turns it off.
    pub fn new(max_bytes: u64) -> ReplayCache {
        let cache = (max_bytes > 0).then(|| {
            let options = quick_cache::OptionsBuilder::new()
                .shards(shards(max_bytes))
                // Only sizes the first allocation: 4 KiB an answer.
                .estimated_items_capacity(usize::try_from(max_bytes / 4096).unwrap_or(1).max(16))
                .weight_capacity(max_bytes)
                .build()
                .expect("every option is set");
            quick_cache::sync::Cache::with_options(
                options,
                BySize,
                Default::default(),
                Default::default(),
            )
        });
        ReplayCache { cache }
    }

    /// The answer to `request` with id `id` if its stored creation is held: the replay, or the
    /// mismatch, that the database path would give.
    pub fn answer(&self, id: Uuid, request: &serde_json::Value) -> Option<Created> {
        let entry = self.cache.as_ref()?.get(&id)?;
        let stored = &entry.stored;
        Some(Created::replay_or_mismatch(
            &stored.request,
            request,
            stored.outcome.clone(),
        ))
    }

    /// Keeps creations read back from committed rows, but none with metadata, which an
    /// erasure may change under it (see the module's doc).
    pub fn remember(&self, stored: impl IntoIterator<Item = (Uuid, StoredCreation)>) {
        let Some(cache) = &self.cache else {
            return;
        };
        for (id, creation) in stored {
            if !erasable(&creation) {
                cache.insert(id, Entry::new(creation));
            }
        }
    }

    pub fn len(&self) -> usize {
        self.cache.as_ref().map_or(0, |c| c.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The estimated bytes held: never above the bound given to [`ReplayCache::new`].
    pub fn weight(&self) -> u64 {
        self.cache.as_ref().map_or(0, |c| c.weight())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stored(amount: i64) -> StoredCreation {
        StoredCreation {
            request: json!({"amount": amount}),
            outcome: Outcome::Created {
                body: format!("{{\"amount\":{amount}}}"),
            },
        }
    }

    /// A creation whose request carries `bytes` of a field the client chose (the legs' account
    /// names, say; metadata would not be held at all).
    fn large(bytes: usize) -> StoredCreation {
        let note = "x".repeat(bytes);
        StoredCreation {
            request: json!({"amount": 1, "note": note}),
            outcome: Outcome::Created {
                body: format!("{{\"amount\":1,\"note\":\"{note}\"}}"),
            },
        }
    }

    #[test]
    fn a_creation_with_metadata_is_never_held() {
        let cache = ReplayCache::new(1 << 20);
        let (with, empty) = (Uuid::new_v4(), Uuid::new_v4());
        let creation = |metadata: serde_json::Value| StoredCreation {
            request: json!({"amount": 1, "metadata": metadata}),
            outcome: Outcome::Created { body: "{}".into() },
        };
        cache.remember([
            (with, creation(json!({"customer": "Noura"}))),
            (empty, creation(json!({}))),
        ]);
        assert_eq!(cache.len(), 1);
        let asked = json!({"amount": 1, "metadata": {"customer": "Noura"}});
        assert_eq!(cache.answer(with, &asked), None, "the database answers it");
        assert!(
            cache
                .answer(empty, &json!({"amount": 1, "metadata": {}}))
                .is_some()
        );
    }

    #[test]
    fn answers_as_the_stored_row_would() {
        let cache = ReplayCache::new(1 << 20);
        let id = Uuid::new_v4();
        assert_eq!(cache.answer(id, &json!({"amount": 5})), None);
        cache.remember([(id, stored(5))]);
        assert_eq!(
            cache.answer(id, &json!({"amount": 5})),
            Some(Created::Replayed(Outcome::Created {
                body: "{\"amount\":5}".into()
            }))
        );
        assert_eq!(
            cache.answer(id, &json!({"amount": 6})),
            Some(Created::Mismatch {
                differing_fields: vec!["/amount".into()]
            })
        );
    }

    /// 300 retried creates with 200 KB of metadata each (60 MB of requests and as much of
    /// answers) stay within a 4 MiB bound, and the most recent answers are still held.
    #[test]
    fn holds_at_most_its_bound_in_bytes_whatever_the_entries_weigh() {
        const BOUND: u64 = 4 * 1024 * 1024;
        let cache = ReplayCache::new(BOUND);
        let mut last = Uuid::nil();
        for _ in 0..300 {
            last = Uuid::new_v4();
            cache.remember([(last, large(200 * 1024))]);
            assert!(cache.weight() <= BOUND, "{} bytes held", cache.weight());
        }
        assert!(
            cache.len() < 300 && !cache.is_empty(),
            "{} entries",
            cache.len()
        );
        // Each entry is weighed at least as large as its texts.
        assert!(cache.weight() >= cache.len() as u64 * 3 * 200 * 1024);
        let again = large(200 * 1024).request;
        assert!(
            cache.answer(last, &again).is_some(),
            "the newest answer is held"
        );
    }

    #[test]
    fn small_answers_are_kept_by_the_thousand() {
        let cache = ReplayCache::new(1 << 20);
        let ids: Vec<Uuid> = (0..1000).map(|_| Uuid::new_v4()).collect();
        for (i, id) in ids.iter().enumerate() {
            cache.remember([(*id, stored(i as i64))]);
        }
        assert_eq!(cache.len(), 1000);
        assert!(cache.answer(ids[0], &json!({"amount": 0})).is_some());
    }

    #[test]
    fn shards_hold_at_least_eight_mib_when_the_bound_allows() {
        assert_eq!(shards(1), 1);
        assert_eq!(shards(16 << 20), 2);
        assert_eq!(shards(24 << 20), 2);
        assert_eq!(shards(DEFAULT_REPLAY_CACHE_BYTES), 8);
        assert_eq!(shards(1 << 40), 8);
    }

    #[test]
    fn a_zero_bound_holds_nothing() {
        let cache = ReplayCache::new(0);
        let id = Uuid::new_v4();
        cache.remember([(id, stored(1))]);
        assert!(cache.is_empty());
        assert_eq!(cache.answer(id, &json!({"amount": 1})), None);
    }
}
