//! Partitioned streams: payment events spread over N streams by wallet, so that on Redis
//! Cluster (where one stream key lives on one node) the load spreads over the nodes while all
//! events of one wallet stay on one stream, in order.
//!
//! The function is part of the contract with providers' producers (docs/consumer.md,
//! "Partitioned streams"): the first 8 bytes of SHA-256 of the wallet id's UTF-8 bytes, read as
//! a big-endian unsigned 64-bit integer, modulo N. Partition `p` of base stream `payments` is
//! the key `payments:{p}`; the hash tag `{p}` puts the partition, its `.dlq` and its failure
//! counts (all named after the stream) in one cluster slot, so every command of one consumer
//! worker stays on one node. With N = 1 the one partition is the base stream itself.

use sha2::{Digest, Sha256};

/// Partitions when none are named: the single stream of old.
pub const DEFAULT_PARTITIONS: u16 = 1;
/// The most partitions: each one is a consumer loop per worker in every `consume` process,
/// and Redis Cluster has 16384 slots; far more than any deployment here needs.
pub const MAX_PARTITIONS: u16 = 1024;

/// Why a partition count is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the partition count must be from 1 to {MAX_PARTITIONS}, not {0}")]
pub struct BadPartitionCount(pub u32);

/// A partition count from 1 to `MAX_PARTITIONS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partitions(u16);

impl Partitions {
    pub const ONE: Partitions = Partitions(1);

    pub fn new(n: u32) -> Result<Partitions, BadPartitionCount> {
        match u16::try_from(n) {
            Ok(n) if (1..=MAX_PARTITIONS).contains(&n) => Ok(Partitions(n)),
            _ => Err(BadPartitionCount(n)),
        }
    }

    pub fn count(self) -> u16 {
        self.0
    }

    /// The partition of `wallet`: SHA-256 of its UTF-8 bytes, the first 8 bytes as a
    /// big-endian u64, modulo the count.
    pub fn of(self, wallet: &str) -> u16 {
        let digest = Sha256::digest(wallet.as_bytes());
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        let p = u64::from_be_bytes(first) % u64::from(self.0);
        u16::try_from(p).expect("below the count, which is a u16")
    }

    /// The stream key of partition `p` of `base`: `base` itself with one partition,
    /// `base:{p}` otherwise.
    pub fn stream(self, base: &str, p: u16) -> String {
        assert!(p < self.0, "partition {p} of {}", self.0);
        if self.0 == 1 {
            base.to_owned()
        } else {
            format!("{base}:{{{p}}}")
        }
    }

    /// The stream key `wallet`'s events go to.
    pub fn stream_for(self, base: &str, wallet: &str) -> String {
        self.stream(base, self.of(wallet))
    }

    /// Every partition's stream key, in partition order.
    pub fn streams(self, base: &str) -> Vec<String> {
        (0..self.0).map(|p| self.stream(base, p)).collect()
    }
}

impl Default for Partitions {
    fn default() -> Partitions {
        Partitions::ONE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check table of docs/consumer.md: a producer's own implementation must give these.
    const TABLE_N4: [(&str, u16); 8] = [
        ("w1", 2),
        ("w2", 2),
        ("w3", 1),
        ("w4", 0),
        ("alice", 3),
        ("bob", 2),
        ("merchant-42", 3),
        ("wallet.0001", 0),
    ];

    #[test]
    fn the_documented_table_holds_for_four_partitions() {
        let four = Partitions::new(4).unwrap();
        for (wallet, p) in TABLE_N4 {
            assert_eq!(four.of(wallet), p, "{wallet}");
            assert_eq!(
                four.stream_for("payments", wallet),
                format!("payments:{{{p}}}")
            );
        }
    }

    #[test]
    fn one_partition_is_the_base_stream() {
        let one = Partitions::ONE;
        assert_eq!(one.stream_for("payments", "w1"), "payments");
        assert_eq!(one.streams("payments"), vec!["payments".to_owned()]);
        assert_eq!(Partitions::default(), one);
    }

    #[test]
    fn every_partition_is_reachable() {
        for n in [2, 3, 4, 7, 16, 1024] {
            let parts = Partitions::new(n).unwrap();
            let mut seen = vec![false; n as usize];
            for i in 0..(n * 20) {
                seen[usize::from(parts.of(&format!("w{i}")))] = true;
            }
            assert!(
                seen.iter().all(|s| *s),
                "some of {n} partitions never chosen"
            );
        }
    }

    #[test]
    fn the_keys_of_a_partition_share_a_hash_tag() {
        let four = Partitions::new(4).unwrap();
        assert_eq!(
            four.streams("payments"),
            [
                "payments:{0}",
                "payments:{1}",
                "payments:{2}",
                "payments:{3}"
            ]
        );
        let settings = super::super::stream::StreamSettings {
            stream: four.stream("payments", 2),
            group: "wallet-ledger".to_owned(),
        };
        assert_eq!(settings.dead_letters(), "payments:{2}.dlq");
        assert_eq!(settings.failures(), "payments:{2}.failures.wallet-ledger");
    }

    #[test]
    fn on_a_cluster_only_streams_whose_keys_share_a_slot_are_taken() {
        let settings = |stream: String| super::super::stream::StreamSettings {
            stream,
            group: "wallet-ledger".to_owned(),
        };
        let eight = Partitions::new(8).unwrap();
        for stream in eight.streams("payments") {
            assert_eq!(settings(stream).fits_one_slot(), Ok(()));
        }
        assert_eq!(settings("{payments}".to_owned()).fits_one_slot(), Ok(()));
        let refused = settings("payments".to_owned()).fits_one_slot().unwrap_err();
        assert!(
            refused.contains("payments, payments.failures.wallet-ledger, payments.dlq do not"),
            "{refused}"
        );
    }

    #[test]
    fn counts_outside_1_to_1024_are_refused() {
        for bad in [0, 1025, 70_000] {
            assert_eq!(Partitions::new(bad), Err(BadPartitionCount(bad)));
        }
        assert_eq!(Partitions::new(1024).unwrap().count(), 1024);
    }
}
