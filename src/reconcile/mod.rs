//! Reconciliation and verification: checks of the ledger's own books (`verify`), and later
//! the comparison with providers' settlement files.

pub mod invariants;
pub mod verify;
