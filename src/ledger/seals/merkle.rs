//! The Merkle tree hash of RFC 6962 (Certificate Transparency), section 2.1: a leaf is
//! `SHA-256(0x00 ‖ data)`, a node `SHA-256(0x01 ‖ left ‖ right)`, and a list of n > 1 leaves
//! splits at the largest power of two below n. Written here rather than taken from a crate:
//! it is the few lines of the RFC, and the crates found build other trees (duplicated odd
//! leaves, sorted pairs) that a verifier following the RFC would not reproduce.

use sha2::{Digest, Sha256};

pub type Hash = [u8; 32];

pub fn leaf_hash(data: &[u8]) -> Hash {
    Sha256::new()
        .chain_update([0u8])
        .chain_update(data)
        .finalize()
        .into()
}

fn node_hash(left: &Hash, right: &Hash) -> Hash {
    Sha256::new()
        .chain_update([1u8])
        .chain_update(left)
        .chain_update(right)
        .finalize()
        .into()
}

/// The largest power of two strictly below `n` (n ≥ 2).
fn split(n: usize) -> usize {
    let mut k = 1;
    while k * 2 < n {
        k *= 2;
    }
    k
}

/// The tree hash of `leaves` (already leaf hashes); the hash of no data for none.
pub fn root(leaves: &[Hash]) -> Hash {
    match leaves {
        [] => Sha256::digest([]).into(),
        [one] => *one,
        _ => {
            let k = split(leaves.len());
            node_hash(&root(&leaves[..k]), &root(&leaves[k..]))
        }
    }
}

/// The audit path of leaf `index` (RFC 6962, 2.1.1 PATH): the sibling hashes from the leaf up.
/// Empty for a tree of one leaf; `index` must be below `leaves.len()`.
pub fn path(index: usize, leaves: &[Hash]) -> Vec<Hash> {
    if leaves.len() <= 1 {
        return Vec::new();
    }
    let k = split(leaves.len());
    let (mut below, sibling) = if index < k {
        (path(index, &leaves[..k]), root(&leaves[k..]))
    } else {
        (path(index - k, &leaves[k..]), root(&leaves[..k]))
    };
    below.push(sibling);
    below
}

/// The root that `leaf` at `index` of a tree of `size` leaves and its audit path `path`
/// imply (RFC 9162, 2.1.3.2); `None` when the path cannot belong to such a tree.
pub fn root_from_path(leaf: Hash, index: u64, size: u64, path: &[Hash]) -> Option<Hash> {
    if index >= size {
        return None;
    }
    let (mut f, mut s, mut r) = (index, size - 1, leaf);
    for p in path {
        if s == 0 {
            return None;
        }
        if f & 1 == 1 || f == s {
            r = node_hash(p, &r);
            while f & 1 == 0 && f != 0 {
                f >>= 1;
                s >>= 1;
            }
        } else {
            r = node_hash(&r, p);
        }
        f >>= 1;
        s >>= 1;
    }
    (s == 0).then_some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaves(n: usize) -> Vec<Hash> {
        (0..n)
            .map(|i| leaf_hash(format!("leaf {i}").as_bytes()))
            .collect()
    }

    #[test]
    fn small_trees_follow_the_rfc_by_hand() {
        let l = leaves(3);
        assert_eq!(root(&l[..1]), l[0]);
        assert_eq!(root(&l[..2]), node_hash(&l[0], &l[1]));
        // Three leaves split 2 + 1.
        assert_eq!(root(&l), node_hash(&node_hash(&l[0], &l[1]), &l[2]));
        let empty: Hash = Sha256::digest([]).into();
        assert_eq!(root(&[]), empty);
    }

    #[test]
    fn any_leaf_changed_moved_or_dropped_changes_the_root() {
        let l = leaves(7);
        let original = root(&l);
        let mut changed = l.clone();
        changed[4] = leaf_hash(b"other");
        let mut swapped = l.clone();
        swapped.swap(2, 3);
        assert_ne!(root(&changed), original);
        assert_ne!(root(&swapped), original);
        assert_ne!(root(&l[..6]), original);
    }

    #[test]
    fn every_leaf_of_every_small_tree_proves_against_its_root_and_nothing_else_does() {
        for size in 1..=17 {
            let l = leaves(size);
            let r = root(&l);
            for (i, leaf) in l.iter().enumerate() {
                let p = path(i, &l);
                let (i, n) = (i as u64, size as u64);
                assert_eq!(root_from_path(*leaf, i, n, &p), Some(r), "{i} of {size}");
                assert_ne!(root_from_path(leaf_hash(b"x"), i, n, &p), Some(r));
                if size > 1 {
                    assert_ne!(root_from_path(*leaf, (i + 1) % n, n, &p), Some(r));
                    let mut bent = p.clone();
                    bent[0][0] ^= 1;
                    assert_ne!(root_from_path(*leaf, i, n, &bent), Some(r));
                }
                assert_eq!(root_from_path(*leaf, n, n, &p), None, "index past the tree");
            }
        }
    }
}
