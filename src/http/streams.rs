//! The consumer's streams as the admin API reaches them: where Redis is, the base stream, the
//! group and the partition count, the same flags `consume` and `dlq` take (`serve`'s
//! `--redis-url`, `--stream`, `--group`, `--partitions`).

use super::error::{ApiError, Result};
use crate::broker::{self, Connection};
use crate::consumer::partition::Partitions;
use crate::consumer::stream::StreamSettings;
use std::time::Duration;

/// How long one admin request may spend on the broker, connecting included: a broker that does
/// not answer is an outage (503), not a request left hanging until the request timeout.
const BROKER_DEADLINE: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
pub struct StreamsSettings {
    pub redis_url: String,
    /// The base stream and the consumers' group.
    pub base: StreamSettings,
    pub partitions: Partitions,
}

impl Default for StreamsSettings {
    fn default() -> StreamsSettings {
        StreamsSettings {
            redis_url: broker::DEFAULT_REDIS_URL.to_owned(),
            base: StreamSettings::default(),
            partitions: Partitions::ONE,
        }
    }
}

impl StreamsSettings {
    /// Partition `p`'s stream and group, or `None` past the partition count.
    pub fn partition(&self, p: u16) -> Option<StreamSettings> {
        (p < self.partitions.count()).then(|| StreamSettings {
            stream: self.partitions.stream(&self.base.stream, p),
            group: self.base.group.clone(),
        })
    }

    /// Every partition from `first` on, in partition order.
    pub fn from_partition(&self, first: u16) -> impl Iterator<Item = (u16, StreamSettings)> {
        (first..self.partitions.count()).filter_map(|p| self.partition(p).map(|s| (p, s)))
    }

    /// Runs `work` on a new connection to the broker, within [`BROKER_DEADLINE`]. A connection
    /// per request: these are operators' requests, and a fresh one never carries a broken
    /// socket (or a moved master) over from an earlier request.
    pub async fn with_broker<T>(
        &self,
        work: impl AsyncFnOnce(&mut Connection) -> Result<T>,
    ) -> Result<T> {
        let run = async {
            let mut conn = broker::connect(&self.redis_url)
                .await
                .map_err(|e| ApiError::Unavailable(e.to_string()))?;
            work(&mut conn).await
        };
        tokio::time::timeout(BROKER_DEADLINE, run)
            .await
            .unwrap_or_else(|_| Err(ApiError::Unavailable("the broker did not answer".into())))
    }
}
