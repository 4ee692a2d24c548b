//! Whether the caller of a write still waits for its answer, decided together with the
//! write's COMMIT, so that a request answered "not done" (503 after `REQUEST_TIMEOUT_MS`)
//! is never written afterwards.
//!
//! Why: a write can outlive its request. A group commit's job waits in a queue or on a row
//! lock on its own task, and a request future dropped by the timeout cannot take back a
//! COMMIT already on the wire. Checking "does the caller still wait?" before the wait, or
//! before the COMMIT, still leaves a gap in which the caller gives up and the write lands.
//!
//! How: each request has one [`Caller`], a small state machine shared by the request's
//! timeout and every writer working for it. A writer *claims* it just before sending COMMIT
//! (`Waiting` -> `Committing`); the timeout *expires* it (`Waiting` -> `Abandoned`). Both are
//! one atomic step on the same value, so exactly one wins: a claimed caller is not answered
//! 503 at its deadline but waits for the COMMIT's own answer (bounded by the connection's
//! own deadlines), and an abandoned one is never committed (the writer rolls back). A COMMIT
//! whose answer was lost (the connection broke after sending it) leaves the outcome unknown;
//! the caller remembers that, so its deadline answers "outcome unknown, retry with the same
//! id" and the service's own retry that finds the row knows it is this request's creation.

use super::Created;
use crate::db::StoreError;
use std::future::Future;
use std::sync::Arc;
use tokio::sync::watch;

/// Where a request's write stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Nothing committed; the caller still waits.
    Waiting,
    /// A writer is sending COMMIT for it: the deadline waits for the COMMIT's answer.
    Committing,
    /// Committed (the answer is on its way).
    Written,
    /// The caller was answered 503 at its deadline: nothing of it may be committed.
    Abandoned,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallerState {
    pub phase: Phase,
    /// An earlier COMMIT for this request was sent and its answer lost: the row may exist.
    pub commit_unknown: bool,
}

impl CallerState {
    pub const START: CallerState = CallerState {
        phase: Phase::Waiting,
        commit_unknown: false,
    };
}

/// What a writer learned of its COMMIT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitOutcome {
    Written,
    /// The server answered with an error: rolled back, nothing written.
    NotWritten,
    /// No answer (the connection broke after COMMIT was sent): written or not.
    Unknown,
}

/// What a request's deadline answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtDeadline {
    /// 503: nothing of the request was or will be written.
    NotWritten,
    /// 503: a COMMIT of it was sent and its answer lost; a retry with the same id tells.
    Unknown,
    /// A COMMIT is in flight or done: the request's own answer is awaited, not a 503.
    AwaitAnswer,
}

/// A writer about to send COMMIT: the new state, or `None` if the caller gave up (roll back).
pub fn claim(state: CallerState) -> Option<CallerState> {
    match state.phase {
        Phase::Abandoned => None,
        _ => Some(CallerState {
            phase: Phase::Committing,
            ..state
        }),
    }
}

/// The COMMIT answered (or did not).
pub fn settle(state: CallerState, outcome: CommitOutcome) -> CallerState {
    match outcome {
        CommitOutcome::Written => CallerState {
            phase: Phase::Written,
            ..state
        },
        CommitOutcome::NotWritten => CallerState {
            phase: Phase::Waiting,
            ..state
        },
        CommitOutcome::Unknown => CallerState {
            phase: Phase::Waiting,
            commit_unknown: true,
        },
    }
}

/// The request's deadline passed.
pub fn expire(state: CallerState) -> (CallerState, AtDeadline) {
    match state.phase {
        Phase::Committing | Phase::Written => (state, AtDeadline::AwaitAnswer),
        Phase::Waiting | Phase::Abandoned => {
            let abandoned = CallerState {
                phase: Phase::Abandoned,
                ..state
            };
            let answer = if state.commit_unknown {
                AtDeadline::Unknown
            } else {
                AtDeadline::NotWritten
            };
            (abandoned, answer)
        }
    }
}

/// How a COMMIT's error is to be read: a server's answer means rolled back; anything else
/// (the connection broke, the protocol failed) leaves the outcome unknown.
pub fn commit_outcome(error: &sqlx::Error) -> CommitOutcome {
    match error {
        sqlx::Error::Database(_) => CommitOutcome::NotWritten,
        _ => CommitOutcome::Unknown,
    }
}

/// One request's state, shared by its timeout and its writers. Cloning shares it.
#[derive(Debug, Clone)]
pub struct Caller {
    state: Arc<watch::Sender<CallerState>>,
    /// Test hook: a fail point armed for this label loses this request's COMMIT answer.
    label: Arc<str>,
}

impl Caller {
    pub fn new(label: &str) -> Caller {
        Caller {
            state: Arc::new(watch::Sender::new(CallerState::START)),
            label: label.into(),
        }
    }

    pub fn state(&self) -> CallerState {
        *self.state.borrow()
    }

    /// Claims the caller for a COMMIT; `false` if it was abandoned.
    pub fn claim(&self) -> bool {
        let mut claimed = false;
        self.state.send_if_modified(|state| match claim(*state) {
            Some(next) => {
                claimed = true;
                let changed = next != *state;
                *state = next;
                changed
            }
            None => false,
        });
        claimed
    }

    pub fn settle(&self, outcome: CommitOutcome) {
        self.state
            .send_modify(|state| *state = settle(*state, outcome));
    }

    pub fn expire(&self) -> AtDeadline {
        // Only a change notifies: a deadline that waits for a COMMIT wakes on its outcome.
        let mut answer = AtDeadline::NotWritten;
        self.state.send_if_modified(|state| {
            let (next, at_deadline) = expire(*state);
            answer = at_deadline;
            let changed = next != *state;
            *state = next;
            changed
        });
        answer
    }

    pub fn is_abandoned(&self) -> bool {
        self.state().phase == Phase::Abandoned
    }

    /// A receiver that sees every change made after this call.
    pub fn watch(&self) -> watch::Receiver<CallerState> {
        self.state.subscribe()
    }
}

tokio::task_local! {
    static CALLER: Caller;
}

/// Runs `work` (a request) with `caller` as the caller of its writes.
pub async fn scope<F: Future>(caller: Caller, work: F) -> F::Output {
    CALLER.scope(caller, work).await
}

/// The caller of the current task: none outside a request (the consumer, the CLI), whose
/// writes have no deadline that answers for them.
pub fn current() -> Option<Caller> {
    CALLER.try_with(Caller::clone).ok()
}

/// A create's answer as the current request should give it: a replay of a row that this very
/// request's lost COMMIT may have written (the service's own retry found it) is its first
/// answer (its creation, or its refusal), not a client's retry.
pub fn recognise(created: Created) -> Created {
    let commit_unknown = current().is_some_and(|c| c.state().commit_unknown);
    own_creation(created, commit_unknown)
}

/// [`recognise`], given whether a COMMIT of this request was sent and its answer lost. The
/// stored request equals this one (a mismatch is not a replay): the row is the one that
/// COMMIT wrote, unless a concurrent request with the same id and body wrote it first, which
/// is answered as a creation too (both asked for exactly this).
pub fn own_creation(created: Created, commit_unknown: bool) -> Created {
    match created {
        Created::Replayed(outcome) if commit_unknown => Created::First(outcome),
        other => other,
    }
}

/// The fail point that loses a COMMIT's answer (the COMMIT itself succeeds).
pub const LOSE_COMMIT_ANSWER: &str = "ledger.lose_commit_answer";

/// Commits `tx` only if every one of `callers` still waits, as one step with their claims;
/// otherwise rolls back and answers [`Gate::Abandoned`]. Each caller learns the COMMIT's
/// outcome, an unknown one included.
pub async fn commit(
    tx: sqlx::Transaction<'_, sqlx::Postgres>,
    callers: &[Caller],
) -> Result<Gate, StoreError> {
    Ok(gated_commit(tx, callers).await?)
}

/// [`commit`] for a write that runs in the request's own task (a hold's capture, an account
/// write). Its caller cannot be found abandoned: the deadline that abandons it drops the
/// request's future, this write included, before any of it runs again. What the gate gives
/// it is the rest: a deadline reached during its COMMIT waits for the COMMIT's answer, and a
/// lost answer is known as such.
pub async fn commit_in_request(
    tx: sqlx::Transaction<'_, sqlx::Postgres>,
) -> Result<(), sqlx::Error> {
    let callers: Vec<Caller> = current().into_iter().collect();
    match gated_commit(tx, &callers).await? {
        Gate::Committed => Ok(()),
        Gate::Abandoned => Err(sqlx::Error::Io(std::io::Error::other(
            "the request was given up before its commit; rolled back",
        ))),
    }
}

async fn gated_commit(
    tx: sqlx::Transaction<'_, sqlx::Postgres>,
    callers: &[Caller],
) -> Result<Gate, sqlx::Error> {
    let claimed: Vec<&Caller> = callers.iter().take_while(|c| c.claim()).collect();
    if claimed.len() < callers.len() {
        for caller in claimed {
            caller.settle(CommitOutcome::NotWritten);
        }
        tx.rollback().await?;
        return Ok(Gate::Abandoned);
    }
    let result = tx.commit().await.and_then(|()| lose_answer(callers));
    let outcome = match &result {
        Ok(()) => CommitOutcome::Written,
        Err(e) => commit_outcome(e),
    };
    for caller in callers {
        caller.settle(outcome);
    }
    result.map(|()| Gate::Committed)
}

/// Whether [`commit`] wrote, or found a caller gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    Committed,
    Abandoned,
}

fn lose_answer(callers: &[Caller]) -> Result<(), sqlx::Error> {
    let lost = callers
        .iter()
        .any(|c| crate::failpoint::hit_for(LOSE_COMMIT_ANSWER, &c.label));
    if lost {
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        return Err(sqlx::Error::Io(reset));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::transactions::RefusalCode;
    use crate::ledger::{Outcome, Refusal};

    const WAITING: CallerState = CallerState::START;

    fn with(phase: Phase, commit_unknown: bool) -> CallerState {
        CallerState {
            phase,
            commit_unknown,
        }
    }

    #[test]
    fn a_caller_that_gave_up_is_never_claimed_for_a_commit() {
        assert_eq!(claim(WAITING), Some(with(Phase::Committing, false)));
        assert_eq!(claim(with(Phase::Abandoned, false)), None);
        assert_eq!(claim(with(Phase::Abandoned, true)), None);
        // The service's retry after a lost COMMIT answer may commit (the first did not land).
        assert_eq!(
            claim(with(Phase::Waiting, true)),
            Some(with(Phase::Committing, true))
        );
    }

    #[test]
    fn the_deadline_answers_503_only_while_no_commit_is_in_flight() {
        assert_eq!(
            expire(WAITING),
            (with(Phase::Abandoned, false), AtDeadline::NotWritten)
        );
        assert_eq!(
            expire(with(Phase::Committing, false)),
            (with(Phase::Committing, false), AtDeadline::AwaitAnswer)
        );
        assert_eq!(
            expire(with(Phase::Written, false)),
            (with(Phase::Written, false), AtDeadline::AwaitAnswer)
        );
        assert_eq!(
            expire(with(Phase::Waiting, true)),
            (with(Phase::Abandoned, true), AtDeadline::Unknown)
        );
    }

    #[test]
    fn a_commit_settles_written_rolled_back_or_unknown() {
        let committing = with(Phase::Committing, false);
        assert_eq!(
            settle(committing, CommitOutcome::Written).phase,
            Phase::Written
        );
        assert_eq!(settle(committing, CommitOutcome::NotWritten), WAITING);
        assert_eq!(
            settle(committing, CommitOutcome::Unknown),
            with(Phase::Waiting, true)
        );
        // A later definite failure does not forget that an earlier COMMIT may have landed.
        assert_eq!(
            settle(with(Phase::Committing, true), CommitOutcome::NotWritten),
            with(Phase::Waiting, true)
        );
    }

    #[test]
    fn only_a_server_error_on_commit_means_rolled_back() {
        let reset = sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert_eq!(commit_outcome(&reset), CommitOutcome::Unknown);
        assert_eq!(
            commit_outcome(&sqlx::Error::WorkerCrashed),
            CommitOutcome::Unknown
        );
    }

    #[test]
    fn after_a_lost_commit_answer_a_found_row_is_the_request_own_creation() {
        let created = Outcome::Created { body: "b".into() };
        let refused = Outcome::Refused(Refusal {
            transaction: uuid::Uuid::nil(),
            code: RefusalCode::InsufficientFunds,
            detail: "d".into(),
            recorded_answer: None,
        });
        for outcome in [created.clone(), refused] {
            let replay = Created::Replayed(outcome.clone());
            assert_eq!(own_creation(replay.clone(), true), Created::First(outcome));
            assert_eq!(own_creation(replay.clone(), false), replay);
        }
        let first = Created::First(created);
        assert_eq!(own_creation(first.clone(), true), first);
        let mismatch = Created::Mismatch {
            differing_fields: vec!["amount".into()],
        };
        assert_eq!(own_creation(mismatch.clone(), true), mismatch);
    }

    #[test]
    fn claim_and_expiry_race_to_one_winner() {
        let caller = Caller::new("");
        assert!(caller.claim());
        assert_eq!(caller.expire(), AtDeadline::AwaitAnswer);
        caller.settle(CommitOutcome::NotWritten);
        assert_eq!(caller.expire(), AtDeadline::NotWritten);
        assert!(!caller.claim(), "abandoned: never committed");
    }
}
