//! Stored creation answers held in memory, so that a retried create is answered without a
//! database round trip and without joining a group commit.
//!
//! Why this is exact, not a guess: a transaction's `creation_request`, `creation_status` and
//! `creation_response` never change once committed (the schema's immutability trigger refuses
//! it), so a copy read from a committed row stays true for as long as the row exists. The
//! cache only ever holds what `posting` read back from such rows (never what a write was about
//! to store), so a cached answer is byte for byte the answer the database path gives.
//!
//! It is filled on a replay, not on a create: a retry storm of one id (a client or a proxy
//! retrying in a loop) reads the row once, and memory is spent only on ids that were retried.
//! Bounded by two generations of at most `capacity / 2` entries each: when the young one is
//! full the old one is dropped (an approximate least-recently-used eviction without a list).

use super::Created;
use super::posting::StoredCreation;
use std::collections::HashMap;
use std::sync::Mutex;
use uuid::Uuid;

pub struct ReplayCache {
    generation_size: usize,
    inner: Mutex<Generations>,
}

#[derive(Default)]
struct Generations {
    young: HashMap<Uuid, StoredCreation>,
    old: HashMap<Uuid, StoredCreation>,
}

impl ReplayCache {
    /// A cache of at most `capacity` answers; 0 turns it off.
    pub fn new(capacity: usize) -> ReplayCache {
        ReplayCache {
            generation_size: capacity / 2,
            inner: Mutex::new(Generations::default()),
        }
    }

    /// The answer to `request` with id `id` if its stored creation is held: the replay, or the
    /// mismatch, that the database path would give.
    pub fn answer(&self, id: Uuid, request: &serde_json::Value) -> Option<Created> {
        if self.generation_size == 0 {
            return None;
        }
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let stored = match inner.young.get(&id) {
            Some(stored) => stored.clone(),
            None => {
                // Used again: it moves to the young generation, so it outlives the old one.
                let stored = inner.old.remove(&id)?;
                inner.insert(id, stored.clone(), self.generation_size);
                stored
            }
        };
        drop(inner);
        Some(Created::replay_or_mismatch(
            &stored.request,
            request,
            stored.status,
            stored.body,
        ))
    }

    /// Keeps creations read back from committed rows.
    pub fn remember(&self, stored: impl IntoIterator<Item = (Uuid, StoredCreation)>) {
        if self.generation_size == 0 {
            return;
        }
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        for (id, creation) in stored {
            inner.insert(id, creation, self.generation_size);
        }
    }

    pub fn len(&self) -> usize {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.young.len() + inner.old.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Generations {
    fn insert(&mut self, id: Uuid, stored: StoredCreation, generation_size: usize) {
        if self.young.len() >= generation_size && !self.young.contains_key(&id) {
            self.old = std::mem::take(&mut self.young);
        }
        self.old.remove(&id);
        self.young.insert(id, stored);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stored(amount: i64) -> StoredCreation {
        StoredCreation {
            request: json!({"amount": amount}),
            status: 201,
            body: format!("{{\"amount\":{amount}}}"),
        }
    }

    #[test]
    fn answers_as_the_stored_row_would() {
        let cache = ReplayCache::new(4);
        let id = Uuid::new_v4();
        assert_eq!(cache.answer(id, &json!({"amount": 5})), None);
        cache.remember([(id, stored(5))]);
        assert_eq!(
            cache.answer(id, &json!({"amount": 5})),
            Some(Created::Replayed {
                status: 200,
                body: "{\"amount\":5}".into()
            })
        );
        assert_eq!(
            cache.answer(id, &json!({"amount": 6})),
            Some(Created::Mismatch {
                differing_fields: vec!["/amount".into()]
            })
        );
    }

    #[test]
    fn holds_at_most_its_capacity_and_keeps_what_is_used() {
        let cache = ReplayCache::new(4);
        let ids: Vec<Uuid> = (0..7).map(|_| Uuid::new_v4()).collect();
        cache.remember([(ids[0], stored(0))]);
        for (i, id) in ids.iter().enumerate().skip(1) {
            // ids[0] is used before each new one, so it is never the oldest.
            assert!(cache.answer(ids[0], &json!({"amount": 0})).is_some());
            cache.remember([(*id, stored(i as i64))]);
            assert!(cache.len() <= 4, "{} entries", cache.len());
        }
        assert!(cache.answer(ids[0], &json!({"amount": 0})).is_some());
        assert!(cache.answer(ids[1], &json!({"amount": 1})).is_none());
        assert!(cache.answer(ids[6], &json!({"amount": 6})).is_some());
    }

    #[test]
    fn capacity_zero_holds_nothing() {
        let cache = ReplayCache::new(0);
        let id = Uuid::new_v4();
        cache.remember([(id, stored(1))]);
        assert!(cache.is_empty());
        assert_eq!(cache.answer(id, &json!({"amount": 1})), None);
    }
}
