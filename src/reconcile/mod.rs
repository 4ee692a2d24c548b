//! Reconciliation and verification: the ledger's own books checked (`verify`), and the
//! ledger compared with a provider's settlement file (`reconcile`).

pub mod exceptions;
pub mod invariants;
pub mod matching;
pub mod model;
pub mod report;
pub mod run;
pub mod sealed_windows;
pub mod seals;
pub mod set_totals;
pub mod settlement;
pub mod stored;
pub mod verify;
