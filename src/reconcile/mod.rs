//! Reconciliation and verification: checks of the ledger's own books (`verify`), and later
//! the comparison with providers' settlement files.

pub mod invariants;
pub mod matching;
pub mod model;
pub mod report;
pub mod run;
pub mod settlement;
pub mod verify;
