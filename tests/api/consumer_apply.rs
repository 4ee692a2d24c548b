//! The stream consumer's batch applier (`consumer::apply::apply_batch`), driven in-process: every
//! cell of the contract's event × state table, events out of order (across batches and inside
//! one batch's waves), idempotency of resends, malformed and not-yet-applicable events,
//! provider refunds, the seed article's producer format, a large batch, and the ledger's
//! invariants afterwards. Each test checks both what the applier answers and what a user then
//! reads through the API.

use super::common::{Balances, Gate, TestApp, poll_until, wait_for_lock_waiters};
use axum::http::StatusCode;
use chrono::TimeDelta;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use uuid::Uuid;
use wallet_ledger::consumer::apply::{
    ApplySettings, Effect, Message, Outcome, Reason, apply_batch,
};
use wallet_ledger::ledger::transactions::RefusalCode;
use wallet_ledger::reconcile::invariants;

const BIN: &str = env!("CARGO_BIN_EXE_wallet-ledger");

const AUTHORIZED: &str = "payment.authorized";
const SUCCEEDED: &str = "payment.succeeded";
const CAPTURED: &str = "payment.captured";
const FAILED: &str = "payment.failed";
const REFUNDED: &str = "payment.refunded";

/// The amount of every payment in the table tests (50.00 SAR).
const AMOUNT: i64 = 5_000;

fn settings() -> ApplySettings {
    ApplySettings {
        hold_expiry: TimeDelta::days(7),
        statement_timeout: None,
    }
}

// ---------------------------------------------------------------------------------------------
// Building events

/// One payment event as a producer writes it: a flat map of string fields.
#[derive(Debug, Clone)]
struct Event {
    fields: BTreeMap<String, Vec<u8>>,
}

impl Event {
    /// An event with its own event id about `payment` (an explicit `payment_id`).
    fn new(kind: &str, payment: Uuid, wallet: &str, amount: i64) -> Event {
        Event::raw(&[
            ("event_id", &Uuid::new_v4().to_string()),
            ("type", kind),
            ("payment_id", &payment.to_string()),
            ("wallet", wallet),
            ("amount", &amount.to_string()),
        ])
    }

    /// A provider refund of `amount` of `payment`, under `refund_id`.
    fn refund(payment: Uuid, refund_id: Uuid, wallet: &str, amount: i64) -> Event {
        Event::new(REFUNDED, payment, wallet, amount).set("refund_id", &refund_id.to_string())
    }

    fn raw(pairs: &[(&str, &str)]) -> Event {
        Event {
            fields: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
                .collect(),
        }
    }

    fn set(mut self, field: &str, value: &str) -> Event {
        self.fields
            .insert(field.to_owned(), value.as_bytes().to_vec());
        self
    }

    fn set_bytes(mut self, field: &str, value: &[u8]) -> Event {
        self.fields.insert(field.to_owned(), value.to_vec());
        self
    }

    fn without(mut self, field: &str) -> Event {
        self.fields.remove(field);
        self
    }

    /// The event as the broker delivers it: every delivery (or producer resend) has its own
    /// stream id, never the event's identity.
    fn message(&self) -> Message {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Message {
            id: format!("{}-0", NEXT.fetch_add(1, Ordering::Relaxed)),
            fields: self.fields.clone().into(),
            redelivered: false,
        }
    }
}

async fn apply_with(app: &TestApp, events: &[&Event], settings: ApplySettings) -> Vec<Outcome> {
    let messages: Vec<Message> = events.iter().map(|e| e.message()).collect();
    let outcomes = apply_batch(&crate::backend::store(&app.pool), &messages, settings)
        .await
        .expect("the batch applies");
    assert_eq!(outcomes.len(), messages.len(), "one outcome per message");
    outcomes
}

async fn apply(app: &TestApp, events: &[&Event]) -> Vec<Outcome> {
    apply_with(app, events, settings()).await
}

async fn apply_one(app: &TestApp, event: &Event) -> Outcome {
    apply(app, &[event]).await.remove(0)
}

// ---------------------------------------------------------------------------------------------
// Expected outcomes

#[derive(Debug, Clone, PartialEq)]
enum Expect {
    Applied(Effect),
    Duplicate,
    Retry(Reason),
    Dead(Reason),
}

impl Expect {
    fn matches(&self, outcome: &Outcome) -> bool {
        match (self, outcome) {
            (Expect::Applied(want), Outcome::Applied(got)) => want == got,
            (Expect::Duplicate, Outcome::Duplicate) => true,
            (Expect::Retry(want), Outcome::Retry { reason, .. }) => want == reason,
            (Expect::Dead(want), Outcome::DeadLetter { reason, .. }) => want == reason,
            _ => false,
        }
    }
}

#[track_caller]
fn assert_outcome(outcome: &Outcome, expect: Expect) {
    assert!(
        expect.matches(outcome),
        "expected {expect:?}, got {outcome:?}"
    );
}

/// A dead letter for `reason` whose detail contains `detail`; returns its differing fields.
#[track_caller]
fn assert_dead(outcome: &Outcome, want: Reason, detail_has: &str) -> Vec<String> {
    match outcome {
        Outcome::DeadLetter {
            reason,
            detail,
            differing_fields,
        } if *reason == want => {
            assert!(
                detail.contains(detail_has),
                "the detail {detail:?} should contain {detail_has:?}"
            );
            differing_fields.clone()
        }
        other => panic!("expected a dead letter {want:?}, got {other:?}"),
    }
}

#[track_caller]
fn assert_retry(outcome: &Outcome, want: Reason, detail_has: &str) {
    match outcome {
        Outcome::Retry { reason, detail } if *reason == want => assert!(
            detail.contains(detail_has),
            "the detail {detail:?} should contain {detail_has:?}"
        ),
        other => panic!("expected a retry {want:?}, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// What a user reads through the API

/// The balances of a wallet that only ever received money: nothing pending out.
fn credited(posted: i64, pending_in: i64) -> Balances {
    Balances {
        posted,
        pending_in,
        pending_out: 0,
        available: posted,
    }
}

/// The transaction as `GET /v1/transactions/{id}` shows it; `None` when it does not exist.
async fn transaction(app: &TestApp, id: Uuid) -> Option<Value> {
    let r = app.get(&format!("/v1/transactions/{id}")).await;
    match r.status {
        StatusCode::OK => Some(r.body),
        StatusCode::NOT_FOUND => None,
        other => panic!("GET transaction {id}: {other} {}", r.text),
    }
}

async fn status_of(app: &TestApp, id: Uuid) -> Option<String> {
    transaction(app, id)
        .await
        .map(|t| t["status"].as_str().unwrap().to_owned())
}

async fn captured_amount_of(app: &TestApp, id: Uuid) -> Option<i64> {
    transaction(app, id)
        .await
        .and_then(|t| t["captured_amount"].as_i64())
}

/// Polls the API until the payment reads `status` (a hold expiring): no fixed sleep.
async fn wait_for_status(app: &TestApp, id: Uuid, status: &str) {
    poll_until(
        Duration::from_secs(20),
        format!("payment {id} reading {status}"),
        || async { (status_of(app, id).await.as_deref() == Some(status)).then_some(()) },
    )
    .await
}

async fn freeze(app: &TestApp, wallet: &str) {
    let r = app
        .post_empty(&format!("/v1/accounts/{wallet}/freeze"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "freeze {wallet}: {}", r.text);
}

async fn close(app: &TestApp, wallet: &str) {
    let r = app
        .post_empty(&format!("/v1/accounts/{wallet}/close"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "close {wallet}: {}", r.text);
}

/// Every invariant `wallet-ledger verify` checks holds (balanced transactions, trial balance,
/// wallet chains, no over-reversal, ...).
async fn assert_ledger_consistent(app: &TestApp) {
    let findings = invariants::check(
        &mut crate::backend::db(&mut app.pool.acquire().await.unwrap()),
        TimeDelta::seconds(60),
    )
    .await
    .unwrap();
    assert_eq!(findings, [], "the ledger's invariants");
}

/// Money is conserved: what the wallets hold came out of the provider's clearing account.
async fn assert_clearing_mirrors(app: &TestApp, clearing: &str, wallets: &[String]) {
    let mut total = 0;
    for w in wallets {
        total += app.balances(w).await.posted;
    }
    assert_eq!(app.balances(clearing).await.posted, -total, "{clearing}");
}

// ---------------------------------------------------------------------------------------------
// 1. The event × state table

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Absent,
    /// `payment.authorized` applied: a hold.
    Pending,
    /// `payment.succeeded` applied.
    Posted,
    /// Authorized, then `payment.failed`: the hold was voided.
    Voided,
    /// `payment.failed` arrived first: recorded as voided.
    RecordedFailed,
    /// Authorized with a short hold expiry, and the hold expired.
    Expired,
    /// Sent to a closed wallet: stored as a rejected payment.
    Rejected,
}

struct Cell {
    state: State,
    event: &'static str,
    amount: i64,
    expect: Expect,
    /// The payment's status afterwards through the API (`None`: not found).
    status: Option<&'static str>,
    posted: i64,
    pending_in: i64,
    captured_amount: Option<i64>,
}

fn cell(
    state: State,
    event: &'static str,
    amount: i64,
    expect: Expect,
    status: Option<&'static str>,
    (posted, pending_in): (i64, i64),
    captured_amount: Option<i64>,
) -> Cell {
    Cell {
        state,
        event,
        amount,
        expect,
        status,
        posted,
        pending_in,
        captured_amount,
    }
}

/// The contract's table, with the end state a user reads for each cell. A refund is 20.00
/// of the 50.00 payment; a partial capture takes 30.00 of it. Columns: state, event, the
/// event's amount, outcome, the payment's status after, (posted, pending_in) of its wallet,
/// captured_amount.
#[rustfmt::skip]
fn table() -> Vec<Cell> {
    use Expect::*;
    use State::*;
    let a = AMOUNT;
    let conflict = || Dead(Reason::ConflictingState);
    let mut cells = vec![
        // payment absent
        cell(Absent, AUTHORIZED, a, Applied(Effect::Held), Some("pending"), (0, a), None),
        cell(Absent, SUCCEEDED, a, Applied(Effect::Posted), Some("posted"), (a, 0), None),
        cell(Absent, CAPTURED, a, Applied(Effect::Posted), Some("posted"), (a, 0), None),
        cell(Absent, FAILED, a, Applied(Effect::RecordedFailed), Some("voided"), (0, 0), None),
        cell(Absent, REFUNDED, 2_000, Retry(Reason::UnknownPayment), None, (0, 0), None),
        // payment pending
        cell(Pending, AUTHORIZED, a, Duplicate, Some("pending"), (0, a), None),
        cell(Pending, SUCCEEDED, a, Applied(Effect::Captured), Some("posted"), (a, 0), Some(a)),
        cell(Pending, CAPTURED, a, Applied(Effect::Captured), Some("posted"), (a, 0), Some(a)),
        cell(Pending, CAPTURED, 3_000, Applied(Effect::Captured), Some("posted"), (3_000, 0), Some(3_000)),
        cell(Pending, FAILED, a, Applied(Effect::Voided), Some("voided"), (0, 0), None),
        cell(Pending, REFUNDED, 2_000, Retry(Reason::UnknownPayment), Some("pending"), (0, a), None),
        // payment posted
        cell(Posted, AUTHORIZED, a, Duplicate, Some("posted"), (a, 0), None),
        cell(Posted, SUCCEEDED, a, Duplicate, Some("posted"), (a, 0), None),
        cell(Posted, CAPTURED, a, Duplicate, Some("posted"), (a, 0), None),
        cell(Posted, FAILED, a, conflict(), Some("posted"), (a, 0), None),
        cell(Posted, REFUNDED, 2_000, Applied(Effect::Refunded { negative: false }), Some("posted"), (a - 2_000, 0), None),
    ];
    // payment voided, whichever way it got there, and expired holds: nothing moves again.
    for (state, status) in [(Voided, "voided"), (RecordedFailed, "voided"), (Expired, "expired")] {
        cells.extend([
            cell(state, AUTHORIZED, a, Duplicate, Some(status), (0, 0), None),
            cell(state, SUCCEEDED, a, conflict(), Some(status), (0, 0), None),
            cell(state, CAPTURED, a, conflict(), Some(status), (0, 0), None),
            cell(state, FAILED, a, Duplicate, Some(status), (0, 0), None),
            cell(state, REFUNDED, 2_000, conflict(), Some(status), (0, 0), None),
        ]);
    }
    // A payment the ledger refused (closed wallet) keeps its refusal: no late success.
    cells.extend([
        cell(Rejected, AUTHORIZED, a, Duplicate, Some("rejected"), (0, 0), None),
        cell(Rejected, SUCCEEDED, a, Duplicate, Some("rejected"), (0, 0), None),
        cell(Rejected, CAPTURED, a, Duplicate, Some("rejected"), (0, 0), None),
        cell(Rejected, FAILED, a, Duplicate, Some("rejected"), (0, 0), None),
        cell(Rejected, REFUNDED, 2_000, conflict(), Some("rejected"), (0, 0), None),
    ]);
    cells
}

struct Prepared {
    wallet: String,
    payment: Uuid,
    refund_id: Uuid,
}

/// Brings one payment per cell (each on its own wallet) into the cell's state, checking how
/// each setup event was answered.
async fn prepare(app: &TestApp, cells: &[Cell]) -> Vec<Prepared> {
    let mut prepared = Vec::new();
    for (i, c) in cells.iter().enumerate() {
        let wallet = format!("t{i}");
        app.create_wallet(&wallet).await;
        if c.state == State::Rejected {
            close(app, &wallet).await;
        }
        prepared.push(Prepared {
            wallet,
            payment: Uuid::new_v4(),
            refund_id: Uuid::new_v4(),
        });
    }
    let setup = |kind: &str, p: &Prepared| Event::new(kind, p.payment, &p.wallet, AMOUNT);

    // First events, one batch; then second events, one batch.
    let mut first: Vec<(Event, Expect)> = Vec::new();
    let mut second: Vec<(Event, Expect)> = Vec::new();
    let mut expiring: Vec<Uuid> = Vec::new();
    let mut short: Vec<Event> = Vec::new();
    for (c, p) in cells.iter().zip(&prepared) {
        match c.state {
            State::Absent => {}
            State::Pending => first.push((setup(AUTHORIZED, p), Expect::Applied(Effect::Held))),
            State::Posted => first.push((setup(SUCCEEDED, p), Expect::Applied(Effect::Posted))),
            State::Voided => {
                first.push((setup(AUTHORIZED, p), Expect::Applied(Effect::Held)));
                second.push((setup(FAILED, p), Expect::Applied(Effect::Voided)));
            }
            State::RecordedFailed => {
                first.push((setup(FAILED, p), Expect::Applied(Effect::RecordedFailed)))
            }
            State::Expired => {
                short.push(setup(AUTHORIZED, p));
                expiring.push(p.payment);
            }
            State::Rejected => first.push((
                setup(SUCCEEDED, p),
                Expect::Applied(Effect::Rejected {
                    code: RefusalCode::AccountClosed,
                }),
            )),
        }
    }
    for phase in [first, second] {
        let events: Vec<&Event> = phase.iter().map(|(e, _)| e).collect();
        let outcomes = apply(app, &events).await;
        for ((_, expect), outcome) in phase.iter().zip(&outcomes) {
            assert_outcome(outcome, expect.clone());
        }
    }
    if !short.is_empty() {
        let quick = ApplySettings {
            hold_expiry: TimeDelta::milliseconds(500),
            statement_timeout: None,
        };
        let events: Vec<&Event> = short.iter().collect();
        for outcome in apply_with(app, &events, quick).await {
            assert_outcome(&outcome, Expect::Applied(Effect::Held));
        }
        for id in expiring {
            wait_for_status(app, id, "expired").await;
        }
    }
    prepared
}

fn cell_event(c: &Cell, p: &Prepared) -> Event {
    if c.event == REFUNDED {
        Event::refund(p.payment, p.refund_id, &p.wallet, c.amount)
    } else {
        Event::new(c.event, p.payment, &p.wallet, c.amount)
    }
}

async fn check_cell(app: &TestApp, c: &Cell, p: &Prepared, outcome: &Outcome) {
    let name = format!("{:?} × {} {}", c.state, c.event, c.amount);
    assert!(
        c.expect.matches(outcome),
        "{name}: expected {:?}, got {outcome:?}",
        c.expect
    );
    assert_eq!(
        status_of(app, p.payment).await.as_deref(),
        c.status,
        "{name}: the payment's status"
    );
    assert_eq!(
        app.balances(&p.wallet).await,
        credited(c.posted, c.pending_in),
        "{name}: the wallet's balances"
    );
    assert_eq!(
        captured_amount_of(app, p.payment).await,
        c.captured_amount,
        "{name}: captured_amount"
    );
    if c.event == REFUNDED {
        let refund = transaction(app, p.refund_id).await;
        if matches!(c.expect, Expect::Applied(_)) {
            let refund = refund.unwrap_or_else(|| panic!("{name}: the refund is stored"));
            assert_eq!(refund["status"], "posted", "{name}");
            assert_eq!(refund["kind"], "reversal", "{name}");
            assert_eq!(refund["reverses"], json!(p.payment), "{name}");
        } else {
            assert_eq!(refund, None, "{name}: no refund is stored");
        }
    }
}

#[tokio::test]
async fn every_cell_of_the_event_state_table_one_event_per_batch() {
    let app = TestApp::new().await;
    let cells = table();
    let prepared = prepare(&app, &cells).await;
    for (c, p) in cells.iter().zip(&prepared) {
        let outcome = apply_one(&app, &cell_event(c, p)).await;
        check_cell(&app, c, p, &outcome).await;
    }
    let wallets: Vec<String> = prepared.iter().map(|p| p.wallet.clone()).collect();
    assert_clearing_mirrors(&app, "clearing:default:SAR", &wallets).await;
    assert_ledger_consistent(&app).await;
    app.finish().await;
}

#[tokio::test]
async fn every_cell_of_the_event_state_table_in_one_batch() {
    let app = TestApp::new().await;
    let cells = table();
    let prepared = prepare(&app, &cells).await;
    let events: Vec<Event> = cells
        .iter()
        .zip(&prepared)
        .map(|(c, p)| cell_event(c, p))
        .collect();
    let outcomes = apply(&app, &events.iter().collect::<Vec<_>>()).await;
    for ((c, p), outcome) in cells.iter().zip(&prepared).zip(&outcomes) {
        check_cell(&app, c, p, outcome).await;
    }
    // The whole batch again: nothing that applied applies twice.
    let again = apply(&app, &events.iter().collect::<Vec<_>>()).await;
    for ((c, p), outcome) in cells.iter().zip(&prepared).zip(&again) {
        if matches!(c.expect, Expect::Applied(_)) {
            assert_eq!(
                *outcome,
                Outcome::Duplicate,
                "{:?} × {} again",
                c.state,
                c.event
            );
        }
        assert_eq!(
            app.balances(&p.wallet).await,
            credited(c.posted, c.pending_in),
            "{:?} × {} again",
            c.state,
            c.event
        );
    }
    let wallets: Vec<String> = prepared.iter().map(|p| p.wallet.clone()).collect();
    assert_clearing_mirrors(&app, "clearing:default:SAR", &wallets).await;
    assert_ledger_consistent(&app).await;
    app.finish().await;
}

#[tokio::test]
async fn conflicting_state_dead_letters_say_which_event_met_which_state() {
    let app = TestApp::new().await;
    app.create_wallet("w6").await;
    let (posted, voided) = (Uuid::new_v4(), Uuid::new_v4());
    apply(
        &app,
        &[
            &Event::new(SUCCEEDED, posted, "w6", AMOUNT),
            &Event::new(FAILED, voided, "w6", AMOUNT),
        ],
    )
    .await;
    let outcome = apply_one(&app, &Event::new(FAILED, posted, "w6", AMOUNT)).await;
    let fields = assert_dead(
        &outcome,
        Reason::ConflictingState,
        "payment.failed cannot apply to a payment that is posted",
    );
    assert!(fields.is_empty(), "{fields:?}");
    let outcome = apply_one(&app, &Event::new(SUCCEEDED, voided, "w6", AMOUNT)).await;
    assert_dead(
        &outcome,
        Reason::ConflictingState,
        "payment.succeeded cannot apply to a payment that is voided",
    );
    assert_eq!(app.balances("w6").await, credited(AMOUNT, 0));
    app.finish().await;
}

#[tokio::test]
async fn a_partial_capture_posts_less_and_releases_the_rest() {
    let app = TestApp::new().await;
    app.create_wallet("w6").await;
    let payment = Uuid::new_v4();
    let authorized = Event::new(AUTHORIZED, payment, "w6", AMOUNT);
    assert_eq!(
        apply_one(&app, &authorized).await,
        Outcome::Applied(Effect::Held)
    );
    assert_eq!(app.balances("w6").await, credited(0, AMOUNT));

    // More than was authorized can never be captured.
    let too_much = Event::new(CAPTURED, payment, "w6", 6_000);
    let fields = assert_dead(
        &apply_one(&app, &too_much).await,
        Reason::IdempotencyMismatch,
        "amount: authorized at most 50.00, event has 60.00",
    );
    assert_eq!(fields, ["amount"]);
    assert_eq!(status_of(&app, payment).await.as_deref(), Some("pending"));
    assert_eq!(app.balances("w6").await, credited(0, AMOUNT));

    let captured = Event::new(CAPTURED, payment, "w6", 3_000);
    assert_eq!(
        apply_one(&app, &captured).await,
        Outcome::Applied(Effect::Captured)
    );
    let t = transaction(&app, payment).await.unwrap();
    assert_eq!(t["status"], "posted");
    assert_eq!(t["captured_amount"], 3_000);
    assert_eq!(t["captured_amount_decimal"], "30.00");
    assert_eq!(app.balances("w6").await, credited(3_000, 0));
    assert_eq!(app.balances("clearing:default:SAR").await.posted, -3_000);

    // The same capture resent, the late `succeeded` of the authorized amount: no-ops.
    assert_eq!(apply_one(&app, &captured).await, Outcome::Duplicate);
    assert_eq!(
        apply_one(&app, &Event::new(SUCCEEDED, payment, "w6", AMOUNT)).await,
        Outcome::Duplicate
    );
    // A capture of another amount after the fact cannot be what was captured.
    let fields = assert_dead(
        &apply_one(&app, &Event::new(CAPTURED, payment, "w6", 4_000)).await,
        Reason::IdempotencyMismatch,
        "amount: payment has 30.00, event has 40.00",
    );
    assert_eq!(fields, ["amount"]);
    assert_eq!(app.balances("w6").await, credited(3_000, 0));
    assert_ledger_consistent(&app).await;
    app.finish().await;
}

/// The contract's cell "payment.captured (amount ≤ authorized) × payment voided" is a dead
/// letter `conflicting_state`, for any amount up to what was authorized.
#[tokio::test]
async fn a_partial_capture_of_a_voided_payment_is_a_conflicting_state() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    let payment = Uuid::new_v4();
    apply(
        &app,
        &[
            &Event::new(AUTHORIZED, payment, "w1", AMOUNT),
            &Event::new(FAILED, payment, "w1", AMOUNT),
        ],
    )
    .await;
    assert_eq!(status_of(&app, payment).await.as_deref(), Some("voided"));
    let outcome = apply_one(&app, &Event::new(CAPTURED, payment, "w1", 3_000)).await;
    // A state the capture cannot apply to is the finding, whatever its amount (30.00 of the
    // 50.00 authorized would be a valid partial capture of a pending payment).
    assert_dead(
        &outcome,
        Reason::ConflictingState,
        "cannot apply to a payment that is voided",
    );
    assert_eq!(app.balances("w1").await, credited(0, 0));
    app.finish().await;
}

#[tokio::test]
async fn an_expired_authorization_cannot_be_captured_later() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    let payment = Uuid::new_v4();
    let quick = ApplySettings {
        hold_expiry: TimeDelta::milliseconds(500),
        statement_timeout: None,
    };
    let outcomes = apply_with(
        &app,
        &[&Event::new(AUTHORIZED, payment, "w1", AMOUNT)],
        quick,
    )
    .await;
    assert_eq!(outcomes, [Outcome::Applied(Effect::Held)]);
    assert_eq!(app.balances("w1").await, credited(0, AMOUNT));
    wait_for_status(&app, payment, "expired").await;
    // The expired hold no longer counts as money on its way in.
    assert_eq!(app.balances("w1").await, credited(0, 0));

    for kind in [SUCCEEDED, CAPTURED] {
        let outcome = apply_one(&app, &Event::new(kind, payment, "w1", AMOUNT)).await;
        assert_dead(
            &outcome,
            Reason::ConflictingState,
            "cannot apply to a payment that is expired",
        );
    }
    assert_eq!(
        apply_one(&app, &Event::new(AUTHORIZED, payment, "w1", AMOUNT)).await,
        Outcome::Duplicate
    );
    assert_eq!(
        apply_one(&app, &Event::new(FAILED, payment, "w1", AMOUNT)).await,
        Outcome::Duplicate
    );
    assert_eq!(status_of(&app, payment).await.as_deref(), Some("expired"));
    assert_eq!(app.balances("w1").await, credited(0, 0));
    assert_eq!(app.entries_of(payment).await, 0);
    app.finish().await;
}

#[tokio::test]
async fn a_payment_to_a_closed_wallet_is_rejected_and_stays_rejected() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    close(&app, "w1").await;
    let (paid, held, failed) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    let succeeded = Event::new(SUCCEEDED, paid, "w1", AMOUNT);
    let outcomes = apply(
        &app,
        &[
            &succeeded,
            &Event::new(AUTHORIZED, held, "w1", AMOUNT),
            &Event::new(FAILED, failed, "w1", AMOUNT),
        ],
    )
    .await;
    let rejected = Outcome::Applied(Effect::Rejected {
        code: RefusalCode::AccountClosed,
    });
    assert_eq!(
        outcomes,
        [
            rejected.clone(),
            rejected,
            // Nothing moves for a failed payment, so there is nothing to refuse.
            Outcome::Applied(Effect::RecordedFailed),
        ]
    );
    for id in [paid, held] {
        let t = transaction(&app, id).await.unwrap();
        assert_eq!(t["status"], "rejected", "{t}");
        assert_eq!(t["refusal"]["code"], "account_closed", "{t}");
        assert_eq!(app.entries_of(id).await, 0);
    }
    assert_eq!(status_of(&app, failed).await.as_deref(), Some("voided"));
    // The resend meets the stored refusal: never a late success.
    assert_eq!(apply_one(&app, &succeeded).await, Outcome::Duplicate);
    assert_eq!(status_of(&app, paid).await.as_deref(), Some("rejected"));
    assert_eq!(app.balances("w1").await, credited(0, 0));
    assert_ledger_consistent(&app).await;
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// 2. Out of order

/// The pairs of the contract's out-of-order rule, each applied in two batches and in one.
#[tokio::test]
async fn events_out_of_order_end_in_the_right_state_across_batches_and_within_one() {
    struct Pair {
        first: &'static str,
        then: &'static str,
        outcomes: [Outcome; 2],
        status: &'static str,
        balances: Balances,
    }
    let pairs = [
        Pair {
            first: FAILED,
            then: AUTHORIZED,
            outcomes: [Outcome::Applied(Effect::RecordedFailed), Outcome::Duplicate],
            status: "voided",
            balances: credited(0, 0),
        },
        Pair {
            first: SUCCEEDED,
            then: AUTHORIZED,
            outcomes: [Outcome::Applied(Effect::Posted), Outcome::Duplicate],
            status: "posted",
            balances: credited(AMOUNT, 0),
        },
        Pair {
            first: CAPTURED,
            then: SUCCEEDED,
            outcomes: [Outcome::Applied(Effect::Posted), Outcome::Duplicate],
            status: "posted",
            balances: credited(AMOUNT, 0),
        },
        // And in order, through the waves of one batch.
        Pair {
            first: AUTHORIZED,
            then: SUCCEEDED,
            outcomes: [
                Outcome::Applied(Effect::Held),
                Outcome::Applied(Effect::Captured),
            ],
            status: "posted",
            balances: credited(AMOUNT, 0),
        },
        Pair {
            first: AUTHORIZED,
            then: FAILED,
            outcomes: [
                Outcome::Applied(Effect::Held),
                Outcome::Applied(Effect::Voided),
            ],
            status: "voided",
            balances: credited(0, 0),
        },
    ];
    let app = TestApp::new().await;
    let mut wallets = Vec::new();
    for (i, pair) in pairs.iter().enumerate() {
        for one_batch in [false, true] {
            let wallet = format!("w{i}-{one_batch}");
            app.create_wallet(&wallet).await;
            wallets.push(wallet.clone());
            let payment = Uuid::new_v4();
            let first = Event::new(pair.first, payment, &wallet, AMOUNT);
            let then = Event::new(pair.then, payment, &wallet, AMOUNT);
            let outcomes = if one_batch {
                apply(&app, &[&first, &then]).await
            } else {
                vec![apply_one(&app, &first).await, apply_one(&app, &then).await]
            };
            let name = format!("{} then {} (one batch: {one_batch})", pair.first, pair.then);
            assert_eq!(outcomes, pair.outcomes, "{name}");
            assert_eq!(
                status_of(&app, payment).await.as_deref(),
                Some(pair.status),
                "{name}"
            );
            assert_eq!(app.balances(&wallet).await, pair.balances, "{name}");
        }
    }
    assert_clearing_mirrors(&app, "clearing:default:SAR", &wallets).await;
    assert_ledger_consistent(&app).await;
    app.finish().await;
}

#[tokio::test]
async fn a_refund_before_its_payment_is_retried_then_applies() {
    let app = TestApp::new().await;
    for one_batch in [false, true] {
        let wallet = format!("x-{one_batch}");
        app.create_wallet(&wallet).await;
        let payment = Uuid::new_v4();
        let refund_id = Uuid::new_v4();
        let refund = Event::refund(payment, refund_id, &wallet, 2_000);
        let succeeded = Event::new(SUCCEEDED, payment, &wallet, AMOUNT);
        let outcomes = if one_batch {
            apply(&app, &[&refund, &succeeded]).await
        } else {
            let before = app.row_counts().await;
            let o = apply_one(&app, &refund).await;
            assert_eq!(
                app.row_counts().await,
                before,
                "a retried refund writes nothing"
            );
            vec![o, apply_one(&app, &succeeded).await]
        };
        assert_retry(&outcomes[0], Reason::UnknownPayment, &payment.to_string());
        assert_eq!(outcomes[1], Outcome::Applied(Effect::Posted));
        assert_eq!(transaction(&app, refund_id).await, None);
        assert_eq!(app.balances(&wallet).await, credited(AMOUNT, 0));

        // The same refund message, redelivered after the payment: it applies, once.
        assert_eq!(
            apply_one(&app, &refund).await,
            Outcome::Applied(Effect::Refunded { negative: false })
        );
        assert_eq!(apply_one(&app, &refund).await, Outcome::Duplicate);
        assert_eq!(status_of(&app, refund_id).await.as_deref(), Some("posted"));
        assert_eq!(app.balances(&wallet).await, credited(AMOUNT - 2_000, 0));
    }
    assert_ledger_consistent(&app).await;
    app.finish().await;
}

/// A refund of an authorized payment not yet captured waits for the capture.
#[tokio::test]
async fn a_refund_of_an_uncaptured_payment_waits_for_the_capture() {
    let app = TestApp::new().await;
    app.create_wallet("w6").await;
    let payment = Uuid::new_v4();
    let refund_id = Uuid::new_v4();
    let refund = Event::refund(payment, refund_id, "w6", 1_000);
    apply_one(&app, &Event::new(AUTHORIZED, payment, "w6", AMOUNT)).await;
    assert_retry(
        &apply_one(&app, &refund).await,
        Reason::UnknownPayment,
        "not captured",
    );
    assert_eq!(transaction(&app, refund_id).await, None);
    assert_eq!(
        apply_one(&app, &Event::new(CAPTURED, payment, "w6", 4_000)).await,
        Outcome::Applied(Effect::Captured)
    );
    assert_eq!(
        apply_one(&app, &refund).await,
        Outcome::Applied(Effect::Refunded { negative: false })
    );
    assert_eq!(app.balances("w6").await, credited(3_000, 0));
    app.finish().await;
}

/// Several payments in one batch, each with a different history: the waves apply each
/// payment's events in order and leave the others alone.
#[tokio::test]
async fn one_batch_mixing_payments_applies_each_payments_events_in_order() {
    let app = TestApp::new().await;
    for w in ["wa", "wb", "wc", "wd"] {
        app.create_wallet(w).await;
    }
    let (a, b, c, d) = (
        Uuid::new_v4(),
        Uuid::new_v4(),
        Uuid::new_v4(),
        Uuid::new_v4(),
    );
    let (b_refund, c_refund) = (Uuid::new_v4(), Uuid::new_v4());
    let events = [
        Event::new(AUTHORIZED, a, "wa", AMOUNT),
        Event::new(SUCCEEDED, b, "wb", AMOUNT),
        Event::refund(c, c_refund, "wc", 500),
        Event::new(CAPTURED, a, "wa", 3_000),
        Event::refund(b, b_refund, "wb", 1_000),
        Event::new(SUCCEEDED, c, "wc", AMOUNT),
        Event::new(FAILED, d, "wd", AMOUNT),
        Event::new(AUTHORIZED, d, "wd", AMOUNT),
        Event::new(SUCCEEDED, d, "wd", AMOUNT),
    ];
    let outcomes = apply(&app, &events.iter().collect::<Vec<_>>()).await;
    assert_eq!(outcomes[0], Outcome::Applied(Effect::Held));
    assert_eq!(outcomes[1], Outcome::Applied(Effect::Posted));
    assert_retry(&outcomes[2], Reason::UnknownPayment, &c.to_string());
    assert_eq!(outcomes[3], Outcome::Applied(Effect::Captured));
    assert_eq!(
        outcomes[4],
        Outcome::Applied(Effect::Refunded { negative: false })
    );
    assert_eq!(outcomes[5], Outcome::Applied(Effect::Posted));
    assert_eq!(outcomes[6], Outcome::Applied(Effect::RecordedFailed));
    assert_eq!(outcomes[7], Outcome::Duplicate);
    assert_dead(
        &outcomes[8],
        Reason::ConflictingState,
        "payment.succeeded cannot apply to a payment that is voided",
    );

    assert_eq!(app.balances("wa").await, credited(3_000, 0));
    assert_eq!(captured_amount_of(&app, a).await, Some(3_000));
    assert_eq!(app.balances("wb").await, credited(4_000, 0));
    assert_eq!(app.balances("wc").await, credited(AMOUNT, 0));
    assert_eq!(transaction(&app, c_refund).await, None);
    assert_eq!(app.balances("wd").await, credited(0, 0));
    assert_eq!(status_of(&app, d).await.as_deref(), Some("voided"));
    assert_eq!(
        app.balances("clearing:default:SAR").await.posted,
        -(3_000 + 4_000 + AMOUNT)
    );
    assert_ledger_consistent(&app).await;
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// 3. Idempotency

#[tokio::test]
async fn the_same_event_twice_applies_once() {
    let app = TestApp::new().await;
    app.create_wallet("w6").await;
    let payment = Uuid::new_v4();
    let paid = Event::new(SUCCEEDED, payment, "w6", AMOUNT);
    let held = Event::new(AUTHORIZED, Uuid::new_v4(), "w6", 700);
    let refund_id = Uuid::new_v4();

    // Twice in one batch.
    assert_eq!(
        apply(&app, &[&paid, &held, &paid, &held]).await,
        [
            Outcome::Applied(Effect::Posted),
            Outcome::Applied(Effect::Held),
            Outcome::Duplicate,
            Outcome::Duplicate,
        ]
    );
    assert_eq!(app.balances("w6").await, credited(AMOUNT, 700));

    // Again in a later batch.
    assert_eq!(
        apply(&app, &[&held, &paid]).await,
        [Outcome::Duplicate, Outcome::Duplicate]
    );
    assert_eq!(app.balances("w6").await, credited(AMOUNT, 700));

    // A refund twice in one batch, then again later.
    let refund = Event::refund(payment, refund_id, "w6", 1_500);
    assert_eq!(
        apply(&app, &[&refund, &refund]).await,
        [
            Outcome::Applied(Effect::Refunded { negative: false }),
            Outcome::Duplicate
        ]
    );
    assert_eq!(apply_one(&app, &refund).await, Outcome::Duplicate);
    assert_eq!(app.balances("w6").await, credited(AMOUNT - 1_500, 700));
    assert_eq!(app.entries_of(refund_id).await, 2);
    assert_ledger_consistent(&app).await;
    app.finish().await;
}

#[tokio::test]
async fn a_resend_with_other_values_is_dead_lettered_with_the_differing_fields() {
    let app = TestApp::new().await;
    app.create_wallet("w6").await;
    app.create_wallet("w2").await;
    let payment = Uuid::new_v4();
    let original = Event::new(SUCCEEDED, payment, "w6", AMOUNT);
    assert_eq!(
        apply_one(&app, &original).await,
        Outcome::Applied(Effect::Posted)
    );

    let cases: [(Event, &[&str], &str); 4] = [
        (
            original.clone().set("amount", "4000"),
            &["amount"],
            "amount: payment has 50.00, event has 40.00",
        ),
        (
            original.clone().set("wallet", "w2"),
            &["wallet"],
            "wallet: payment has w6, event has w2",
        ),
        (
            original.clone().set("currency", "USD"),
            &["currency"],
            "currency: payment has SAR, event has USD",
        ),
        (
            original
                .clone()
                .set("amount", "4000")
                .set("wallet", "w2")
                .set("currency", "USD"),
            &["wallet", "currency", "amount"],
            "wallet: payment has w6, event has w2; currency: payment has SAR, event has USD; \
             amount: payment has 50.00, event has 40.00",
        ),
    ];
    for (resend, fields, detail) in &cases {
        let outcome = apply_one(&app, resend).await;
        assert_eq!(
            outcome,
            Outcome::DeadLetter {
                reason: Reason::IdempotencyMismatch,
                detail: detail.to_string(),
                differing_fields: fields.iter().map(|f| f.to_string()).collect(),
            }
        );
    }
    // The same currency spelled out is the same payment.
    assert_eq!(
        apply_one(&app, &original.clone().set("currency", "SAR")).await,
        Outcome::Duplicate
    );
    // Within one batch: the first one applies, the differing one is dead-lettered.
    let other = Uuid::new_v4();
    let first = Event::new(SUCCEEDED, other, "w6", 1_000);
    let outcomes = apply(&app, &[&first, &first.clone().set("amount", "999")]).await;
    assert_eq!(outcomes[0], Outcome::Applied(Effect::Posted));
    let fields = assert_dead(
        &outcomes[1],
        Reason::IdempotencyMismatch,
        "amount: payment has 10.00, event has 9.99",
    );
    assert_eq!(fields, ["amount"]);
    // A refund resent with another amount under the same refund id.
    let refund_id = Uuid::new_v4();
    let refund = Event::refund(payment, refund_id, "w6", 1_000);
    assert_eq!(
        apply_one(&app, &refund).await,
        Outcome::Applied(Effect::Refunded { negative: false })
    );
    let fields = assert_dead(
        &apply_one(&app, &refund.clone().set("amount", "1200")).await,
        Reason::IdempotencyMismatch,
        "amount",
    );
    assert_eq!(fields, ["amount"]);

    // Nothing of the mismatches moved money.
    assert_eq!(
        app.balances("w6").await,
        credited(AMOUNT + 1_000 - 1_000, 0)
    );
    assert_eq!(app.balances("w2").await, credited(0, 0));
    assert_eq!(app.entries_of(refund_id).await, 2);
    assert_ledger_consistent(&app).await;
    app.finish().await;
}

/// The stream and the API share one id space: a payment the API created is the stream's
/// payment too, and an id taken by something that is not a payment is a conflicting state.
#[tokio::test]
async fn the_stream_meets_what_the_api_created_under_the_same_id() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w6").await;
    let paid = Uuid::new_v4();
    let r = app
        .post(
            "/v1/payments",
            &json!({"id": paid, "account": "w1", "amount": AMOUNT, "currency": "SAR", "provider": "default"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(
        apply_one(&app, &Event::new(SUCCEEDED, paid, "w1", AMOUNT)).await,
        Outcome::Duplicate
    );
    assert_eq!(
        apply_one(&app, &Event::new(SUCCEEDED, paid, "w1", 4_000)).await,
        Outcome::DeadLetter {
            reason: Reason::IdempotencyMismatch,
            detail: "amount: payment has 50.00, event has 40.00".into(),
            differing_fields: vec!["amount".into()],
        }
    );
    let transfer = Uuid::new_v4();
    let r = app.transfer(transfer, "w1", "w6", 1_000).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let outcome = apply_one(&app, &Event::new(SUCCEEDED, transfer, "w6", 1_000)).await;
    assert_dead(&outcome, Reason::ConflictingState, "not a payment");
    assert_eq!(app.balances("w1").await, credited(4_000, 0));
    assert_eq!(app.balances("w6").await, credited(1_000, 0));
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// 4. Malformed events

#[tokio::test]
async fn malformed_events_are_dead_lettered_naming_the_field_and_do_not_stop_the_batch() {
    let app = TestApp::new().await;
    app.create_wallet("w6").await;
    let good = || Event::new(SUCCEEDED, Uuid::new_v4(), "w6", 1_000);
    let bad: Vec<(Event, &str)> = vec![
        (good().without("event_id"), "event_id"),
        (good().set("event_id", "not-a-uuid"), "event_id"),
        (good().set("payment_id", "p-1"), "payment_id"),
        (good().set("amount", "50.00"), "amount"),
        (good().set("amount", "0"), "amount"),
        (good().without("amount"), "amount"),
        (good().set("type", "payment.lost"), "type"),
        (good().without("wallet"), "wallet"),
        (good().set_bytes("wallet", &[0xff, 0xfe, b'w']), "wallet"),
        (good().set_bytes("amount", &[b'1', 0xc0]), "amount"),
        (good().set("currency", "XXX"), "currency"),
    ];
    let before = app.row_counts().await;

    // Malformed messages alone: nothing is written.
    let events: Vec<&Event> = bad.iter().map(|(e, _)| e).collect();
    let outcomes = apply(&app, &events).await;
    for ((_, field), outcome) in bad.iter().zip(&outcomes) {
        let fields = assert_dead(outcome, Reason::MalformedEvent, "");
        assert!(fields.is_empty());
        let Outcome::DeadLetter { detail, .. } = outcome else {
            unreachable!()
        };
        assert!(
            detail.starts_with(&format!("{field}: ")),
            "{detail:?} should name {field}"
        );
    }
    assert_eq!(app.row_counts().await, before);

    // Mixed with good ones: the good ones apply, each bad one is dead-lettered.
    let (first, last) = (good(), good());
    let mut mixed: Vec<&Event> = vec![&first];
    mixed.extend(bad.iter().map(|(e, _)| e));
    mixed.push(&last);
    let outcomes = apply(&app, &mixed).await;
    assert_eq!(outcomes[0], Outcome::Applied(Effect::Posted));
    assert_eq!(
        outcomes[outcomes.len() - 1],
        Outcome::Applied(Effect::Posted)
    );
    for outcome in &outcomes[1..outcomes.len() - 1] {
        assert_outcome(outcome, Expect::Dead(Reason::MalformedEvent));
    }
    assert_eq!(app.balances("w6").await, credited(2_000, 0));
    let after = app.row_counts().await;
    assert_eq!(after.1, before.1 + 2, "two payments stored");

    // Unknown fields are ignored, whatever their bytes.
    let odd = good().set_bytes("note", &[0xff, 0xfe]).set("n", "7");
    assert_eq!(
        apply_one(&app, &odd).await,
        Outcome::Applied(Effect::Posted)
    );
    assert_eq!(app.balances("w6").await, credited(3_000, 0));
    app.finish().await;
}

/// An event whose currency differs from its wallet's cannot move money: dead-lettered, with
/// nothing written (no clearing account in that currency either).
#[tokio::test]
async fn an_event_in_another_currency_than_its_wallet_is_dead_lettered() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    let before = app.row_counts().await;
    let event = Event::new(SUCCEEDED, Uuid::new_v4(), "w1", 1_000).set("currency", "USD");
    assert_dead(
        &apply_one(&app, &event).await,
        Reason::MalformedEvent,
        "currency",
    );
    assert_eq!(app.row_counts().await, before);
    assert_eq!(
        app.get("/v1/accounts/clearing:default:USD").await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(app.balances("w1").await, credited(0, 0));
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// 5. Not applicable yet

#[tokio::test]
async fn an_unknown_wallet_is_retried_with_nothing_written_until_it_exists() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    let payment = Uuid::new_v4();
    let to_missing = Event::new(SUCCEEDED, payment, "w-new", AMOUNT);
    let to_known = Event::new(SUCCEEDED, Uuid::new_v4(), "w1", 1_000);

    let before = app.row_counts().await;
    let outcome = apply_one(&app, &to_missing).await;
    assert_retry(&outcome, Reason::UnknownAccount, "w-new");
    assert_eq!(app.row_counts().await, before, "nothing written");
    assert_eq!(transaction(&app, payment).await, None);

    // In a batch with a known wallet: only the unknown one waits.
    let outcomes = apply(&app, &[&to_missing, &to_known]).await;
    assert_retry(&outcomes[0], Reason::UnknownAccount, "w-new");
    assert_eq!(outcomes[1], Outcome::Applied(Effect::Posted));
    assert_eq!(app.balances("w1").await, credited(1_000, 0));
    assert_eq!(transaction(&app, payment).await, None);

    // Authorized and failed events of an unknown wallet wait too.
    for kind in [AUTHORIZED, FAILED] {
        let before = app.row_counts().await;
        let outcome = apply_one(&app, &Event::new(kind, Uuid::new_v4(), "w-new", AMOUNT)).await;
        assert_retry(&outcome, Reason::UnknownAccount, "w-new");
        assert_eq!(app.row_counts().await, before, "{kind}: nothing written");
    }

    // Once the wallet exists, the same message applies.
    app.create_wallet("w-new").await;
    assert_eq!(
        apply_one(&app, &to_missing).await,
        Outcome::Applied(Effect::Posted)
    );
    assert_eq!(app.balances("w-new").await, credited(AMOUNT, 0));
    app.finish().await;
}

#[tokio::test]
async fn a_refund_of_an_unknown_payment_is_retried_with_nothing_written() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    let payment = Uuid::new_v4();
    let refund_id = Uuid::new_v4();
    let before = app.row_counts().await;
    let outcome = apply_one(&app, &Event::refund(payment, refund_id, "w1", 1_000)).await;
    assert_retry(&outcome, Reason::UnknownPayment, &payment.to_string());
    assert_eq!(app.row_counts().await, before);
    assert_eq!(transaction(&app, refund_id).await, None);
    assert_eq!(app.balances("w1").await, credited(0, 0));
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// 6. Provider refunds

#[tokio::test]
async fn a_refund_that_overdraws_the_wallet_is_applied_and_says_so() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w6").await;
    let payment = Uuid::new_v4();
    apply_one(&app, &Event::new(SUCCEEDED, payment, "w1", AMOUNT)).await;
    // The wallet spends most of it meanwhile.
    let r = app.transfer(Uuid::new_v4(), "w1", "w6", 4_000).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(app.balances("w1").await, credited(1_000, 0));

    let refund_id = Uuid::new_v4();
    let refund = Event::refund(payment, refund_id, "w1", AMOUNT);
    assert_eq!(
        apply_one(&app, &refund).await,
        Outcome::Applied(Effect::Refunded { negative: true })
    );
    assert_eq!(app.balances("w1").await, credited(-4_000, 0));
    let t = transaction(&app, refund_id).await.unwrap();
    assert_eq!(t["status"], "posted");
    assert_eq!(t["reverses"], json!(payment));
    assert_eq!(app.balances("clearing:default:SAR").await.posted, 0);
    // Redelivered: a duplicate, not a second debit.
    assert_eq!(apply_one(&app, &refund).await, Outcome::Duplicate);
    assert_eq!(app.balances("w1").await, credited(-4_000, 0));

    // A refund that leaves exactly zero does not overdraw.
    app.create_wallet("w3").await;
    let p3 = Uuid::new_v4();
    apply_one(&app, &Event::new(SUCCEEDED, p3, "w3", AMOUNT)).await;
    assert_eq!(
        apply_one(&app, &Event::refund(p3, Uuid::new_v4(), "w3", AMOUNT)).await,
        Outcome::Applied(Effect::Refunded { negative: false })
    );
    assert_eq!(app.balances("w3").await, credited(0, 0));
    assert_ledger_consistent(&app).await;
    app.finish().await;
}

#[tokio::test]
async fn a_refund_of_a_frozen_wallet_is_applied() {
    let app = TestApp::new().await;
    app.create_wallet("w6").await;
    app.create_wallet("w2").await;
    let payment = Uuid::new_v4();
    apply_one(&app, &Event::new(SUCCEEDED, payment, "w6", AMOUNT)).await;
    freeze(&app, "w6").await;
    // The API refuses to debit a frozen wallet...
    let r = app.transfer(Uuid::new_v4(), "w6", "w2", 100).await;
    assert_eq!(r.code(), "account_frozen", "{}", r.text);
    // ...but the provider already paid the refund out.
    let refund_id = Uuid::new_v4();
    assert_eq!(
        apply_one(&app, &Event::refund(payment, refund_id, "w6", 2_000)).await,
        Outcome::Applied(Effect::Refunded { negative: false })
    );
    assert_eq!(status_of(&app, refund_id).await.as_deref(), Some("posted"));
    assert_eq!(app.balances("w6").await, credited(3_000, 0));
    // A frozen wallet may still receive a payment (freezing stops debits only).
    assert_eq!(
        apply_one(&app, &Event::new(SUCCEEDED, Uuid::new_v4(), "w6", 500)).await,
        Outcome::Applied(Effect::Posted)
    );
    assert_eq!(app.balances("w6").await, credited(3_500, 0));
    // The rest of the payment, refunded while still frozen.
    assert_eq!(
        apply_one(&app, &Event::refund(payment, Uuid::new_v4(), "w6", 3_000)).await,
        Outcome::Applied(Effect::Refunded { negative: false })
    );
    assert_eq!(app.balances("w6").await, credited(500, 0));
    assert_ledger_consistent(&app).await;
    app.finish().await;
}

#[tokio::test]
async fn refunds_beyond_the_payment_are_refused() {
    let app = TestApp::new().await;
    app.create_wallet("w6").await;
    let payment = Uuid::new_v4();
    apply_one(&app, &Event::new(SUCCEEDED, payment, "w6", AMOUNT)).await;

    // One refund larger than the payment: dead-lettered, nothing stored.
    let too_big = Uuid::new_v4();
    let outcome = apply_one(&app, &Event::refund(payment, too_big, "w6", 6_000)).await;
    assert_dead(&outcome, Reason::ConflictingState, "exceeds the original");
    assert_eq!(transaction(&app, too_big).await, None);
    assert_eq!(app.balances("w6").await, credited(AMOUNT, 0));

    // Refunds adding up past the payment: the one that would exceed it is the provider
    // disagreeing with the ledger, dead-lettered (visible to an operator) with nothing stored,
    // so a replay after the disagreement is settled can still apply.
    let (r1, r2, r3) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    assert_eq!(
        apply_one(&app, &Event::refund(payment, r1, "w6", 3_000)).await,
        Outcome::Applied(Effect::Refunded { negative: false })
    );
    let second = Event::refund(payment, r2, "w6", 3_000);
    assert_dead(
        &apply_one(&app, &second).await,
        Reason::ConflictingState,
        "refunds would exceed the payment: 3000 of its 5000 minor units already refunded, 3000 more",
    );
    assert_eq!(transaction(&app, r2).await, None);
    // A resend of the refund that applied is still a duplicate.
    assert_eq!(
        apply_one(&app, &Event::refund(payment, r1, "w6", 3_000)).await,
        Outcome::Duplicate
    );
    // What is left can still be refunded.
    assert_eq!(
        apply_one(&app, &Event::refund(payment, r3, "w6", 2_000)).await,
        Outcome::Applied(Effect::Refunded { negative: false })
    );
    assert_eq!(app.balances("w6").await, credited(0, 0));

    // A partly captured payment can be refunded only up to what was captured.
    let held = Uuid::new_v4();
    apply(
        &app,
        &[
            &Event::new(AUTHORIZED, held, "w6", AMOUNT),
            &Event::new(CAPTURED, held, "w6", 2_000),
        ],
    )
    .await;
    assert_eq!(app.balances("w6").await, credited(2_000, 0));
    let over = Uuid::new_v4();
    assert_dead(
        &apply_one(&app, &Event::refund(held, over, "w6", 2_500)).await,
        Reason::ConflictingState,
        "exceeds the original",
    );
    assert_eq!(transaction(&app, over).await, None);
    assert_eq!(
        apply_one(&app, &Event::refund(held, Uuid::new_v4(), "w6", 2_000)).await,
        Outcome::Applied(Effect::Refunded { negative: false })
    );
    assert_eq!(app.balances("w6").await, credited(0, 0));
    assert_ledger_consistent(&app).await;
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// 7. The seed article's producer format

#[tokio::test]
async fn the_seed_articles_producer_format_credits_the_wallet_through_the_default_provider() {
    let app = TestApp::new().await;
    app.create_wallet("w6").await;
    // The lab: 5 payments of 50.00, payment 2 sent twice.
    let ids: Vec<Uuid> = (0..5).map(|_| Uuid::new_v4()).collect();
    let seed = |n: usize| {
        Event::raw(&[
            ("n", &(n + 1).to_string()),
            ("event_id", &ids[n].to_string()),
            ("wallet", "w6"),
            ("amount", "5000"),
        ])
    };
    let events: Vec<Event> = vec![seed(0), seed(1), seed(1), seed(2), seed(3), seed(4)];
    let outcomes = apply(&app, &events.iter().collect::<Vec<_>>()).await;
    assert_eq!(
        outcomes,
        [
            Outcome::Applied(Effect::Posted),
            Outcome::Applied(Effect::Posted),
            Outcome::Duplicate,
            Outcome::Applied(Effect::Posted),
            Outcome::Applied(Effect::Posted),
            Outcome::Applied(Effect::Posted),
        ]
    );
    let account = app.get("/v1/accounts/w6").await;
    assert_eq!(
        account.body["balances"]["posted"], 25_000,
        "{}",
        account.text
    );
    assert_eq!(account.body["balances"]["available"], 25_000);
    assert_eq!(account.body["balances"]["pending_in"], 0);
    // The payment id is the event id; the debit lands on clearing:default:SAR.
    let t = transaction(&app, ids[2]).await.unwrap();
    assert_eq!(t["kind"], "payment");
    assert_eq!(t["status"], "posted");
    assert_eq!(t["currency"], "SAR");
    let mut legs: Vec<(String, i64)> = t["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["account"].as_str().unwrap().to_owned(),
                l["amount"].as_i64().unwrap(),
            )
        })
        .collect();
    legs.sort();
    assert_eq!(
        legs,
        [
            ("clearing:default:SAR".to_owned(), -5_000),
            ("w6".to_owned(), 5_000)
        ]
    );
    let clearing = app.get("/v1/accounts/clearing:default:SAR").await;
    assert_eq!(clearing.status, StatusCode::OK, "{}", clearing.text);
    assert_eq!(clearing.body["balances"]["posted"], -25_000);
    // The whole lab redelivered: all duplicates.
    let again = apply(&app, &events.iter().collect::<Vec<_>>()).await;
    assert!(again.iter().all(|o| *o == Outcome::Duplicate), "{again:?}");
    assert_eq!(app.balances("w6").await, credited(25_000, 0));
    app.finish().await;
}

#[tokio::test]
async fn the_currency_defaults_to_the_wallets_and_the_provider_names_the_clearing_account() {
    let app = TestApp::new().await;
    app.create_account("wu", "USD", "wallet").await;
    app.create_wallet("ws").await;
    let usd = Uuid::new_v4();
    let event = Event::raw(&[
        ("event_id", &usd.to_string()),
        ("wallet", "wu"),
        ("amount", "1234"),
    ]);
    assert_eq!(
        apply_one(&app, &event).await,
        Outcome::Applied(Effect::Posted)
    );
    assert_eq!(transaction(&app, usd).await.unwrap()["currency"], "USD");
    assert_eq!(app.balances("wu").await, credited(1_234, 0));
    assert_eq!(app.balances("clearing:default:USD").await.posted, -1_234);

    let stripe = Uuid::new_v4();
    let event = Event::raw(&[
        ("event_id", &stripe.to_string()),
        ("wallet", "ws"),
        ("amount", "700"),
        ("provider", "stripe"),
        ("external_ref", "ch_123"),
    ]);
    assert_eq!(
        apply_one(&app, &event).await,
        Outcome::Applied(Effect::Posted)
    );
    assert_eq!(app.balances("clearing:stripe:SAR").await.posted, -700);
    assert_eq!(
        app.get("/v1/accounts/clearing:default:SAR").await.status,
        StatusCode::NOT_FOUND
    );
    let t = transaction(&app, stripe).await.unwrap();
    assert_eq!(t["external_ref"], "ch_123");
    let listed = app.get("/v1/transactions?external_ref=ch_123").await;
    assert_eq!(
        listed.body["data"][0]["id"],
        json!(stripe),
        "{}",
        listed.text
    );
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// 8. Volume and invariants

#[tokio::test]
async fn a_batch_of_500_payments_to_50_wallets_applies_with_exact_balances() {
    let app = TestApp::new().await;
    let wallets: Vec<String> = (0..50).map(|i| format!("v{i:02}")).collect();
    for w in &wallets {
        app.create_wallet(w).await;
    }
    let mut expected = vec![0i64; wallets.len()];
    let events: Vec<Event> = (0..500)
        .map(|i| {
            let w = (i * 7) % wallets.len();
            let amount = 100 + (i as i64 * 37) % 10_000;
            expected[w] += amount;
            Event::new(SUCCEEDED, Uuid::new_v4(), &wallets[w], amount)
        })
        .collect();
    let refs: Vec<&Event> = events.iter().collect();
    let outcomes = apply(&app, &refs).await;
    assert!(
        outcomes
            .iter()
            .all(|o| *o == Outcome::Applied(Effect::Posted)),
        "{:?}",
        outcomes
            .iter()
            .find(|o| **o != Outcome::Applied(Effect::Posted))
    );
    for (w, want) in wallets.iter().zip(&expected) {
        assert_eq!(app.balances(w).await, credited(*want, 0), "{w}");
    }
    let total: i64 = expected.iter().sum();
    assert_eq!(app.balances("clearing:default:SAR").await.posted, -total);
    // Redelivered whole: 500 duplicates, not a minor unit more.
    let again = apply(&app, &refs).await;
    assert!(again.iter().all(|o| *o == Outcome::Duplicate));
    for (w, want) in wallets.iter().zip(&expected) {
        assert_eq!(app.balances(w).await.posted, *want, "{w}");
    }
    assert_ledger_consistent(&app).await;
    app.finish().await;
}

/// Two consumers applying overlapping batches at once: every payment once, exact balances.
#[tokio::test]
async fn concurrent_batches_with_the_same_events_apply_each_once() {
    let app = TestApp::new().await;
    let wallets: Vec<String> = (0..5).map(|i| format!("c{i}")).collect();
    for w in &wallets {
        app.create_wallet(w).await;
    }
    let events: Vec<Event> = (0..40)
        .map(|i| Event::new(SUCCEEDED, Uuid::new_v4(), &wallets[i % 5], 100 + i as i64))
        .collect();
    let forward: Vec<Message> = events.iter().map(Event::message).collect();
    let backward: Vec<Message> = events.iter().rev().map(Event::message).collect();
    let run = |messages: Vec<Message>| {
        let pool = app.pool.clone();
        tokio::spawn(async move {
            // A batch the database refused as a whole is retried whole, as the worker does.
            for _ in 0..5 {
                if let Ok(outcomes) =
                    apply_batch(&crate::backend::store(&pool), &messages, settings()).await
                {
                    return outcomes;
                }
            }
            panic!("the batch never applied");
        })
    };
    let (a, b) = (run(forward), run(backward));
    let (a, mut b) = (a.await.unwrap(), b.await.unwrap());
    b.reverse();
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        let mut pair = [x.clone(), y.clone()];
        pair.sort_by_key(|o| *o == Outcome::Duplicate);
        assert_eq!(
            pair,
            [Outcome::Applied(Effect::Posted), Outcome::Duplicate],
            "event {i}"
        );
    }
    for (k, w) in wallets.iter().enumerate() {
        let want: i64 = (0..40).filter(|i| i % 5 == k).map(|i| 100 + i as i64).sum();
        assert_eq!(app.balances(w).await, credited(want, 0), "{w}");
    }
    assert_ledger_consistent(&app).await;
    app.finish().await;
}

/// A mixed run of everything the stream does, then `wallet-ledger verify` on it: exit 0.
#[tokio::test]
async fn after_a_mixed_run_the_verify_command_finds_the_ledger_consistent() {
    let app = TestApp::new().await;
    for w in ["m1", "m2", "m3"] {
        app.create_wallet(w).await;
    }
    let (p1, p2, p3, p4) = (
        Uuid::new_v4(),
        Uuid::new_v4(),
        Uuid::new_v4(),
        Uuid::new_v4(),
    );
    let events = [
        Event::new(SUCCEEDED, p1, "m1", 10_000),
        Event::new(AUTHORIZED, p2, "m2", 4_000),
        Event::new(CAPTURED, p2, "m2", 2_500),
        Event::new(AUTHORIZED, p3, "m3", 1_000),
        Event::new(FAILED, p3, "m3", 1_000),
        Event::new(AUTHORIZED, p4, "m3", 600),
        Event::refund(p1, Uuid::new_v4(), "m1", 1_000),
        Event::new(SUCCEEDED, p1, "m1", 10_000),
    ];
    let outcomes = apply(&app, &events.iter().collect::<Vec<_>>()).await;
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, Outcome::Applied(_) | Outcome::Duplicate)),
        "{outcomes:?}"
    );
    // The wallet spends, then a refund overdraws it.
    let r = app.transfer(Uuid::new_v4(), "m1", "m2", 8_500).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(
        apply_one(&app, &Event::refund(p1, Uuid::new_v4(), "m1", 1_000)).await,
        Outcome::Applied(Effect::Refunded { negative: true })
    );
    assert_eq!(app.balances("m1").await, credited(-500, 0));
    assert_eq!(app.balances("m2").await, credited(11_000, 0));
    assert_eq!(app.balances("m3").await, credited(0, 600));
    assert_ledger_consistent(&app).await;

    let out = tokio::process::Command::new(BIN)
        .args(["verify", "--database-url", &app.database_url])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("the ledger is consistent"), "{stdout}");
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// Parallel workers: two batches that both found a payment absent

/// Applies `first` and `second` in two batches at once, as two workers would, both having
/// found the payment absent: the wallet's row is locked (as an operator's session would) until
/// both wait on it, so `first` stores the payment and `second` meets it on insert.
async fn race(app: &TestApp, wallet: &str, first: &Event, second: &Event) -> (Outcome, Outcome) {
    let gate = Gate::shut(app, wallet).await;
    let spawn = |event: &Event| {
        let pool = app.pool.clone();
        let message = event.message();
        tokio::spawn(async move {
            apply_batch(&crate::backend::store(&pool), &[message], settings()).await
        })
    };
    let a = spawn(first);
    // The first batch waits for the wallet.
    wait_for_lock_waiters(app, 1).await;
    let b = spawn(second);
    // The second batch waits for the wallet.
    wait_for_lock_waiters(app, 2).await;
    gate.open().await;
    let a = a.await.unwrap().expect("the first batch applies").remove(0);
    let b = b
        .await
        .unwrap()
        .expect("the second batch applies")
        .remove(0);
    (a, b)
}

#[tokio::test]
async fn two_workers_that_both_found_a_payment_absent_still_follow_the_table() {
    let app = TestApp::new().await;
    app.create_wallet("race").await;
    // (first, second, what the second does, the payment's end, posted, pending_in)
    let cases: Vec<(&str, &str, i64, Expect, &str, i64, i64)> = vec![
        (
            AUTHORIZED,
            CAPTURED,
            3_000,
            Expect::Applied(Effect::Captured),
            "posted",
            3_000,
            0,
        ),
        (
            AUTHORIZED,
            SUCCEEDED,
            AMOUNT,
            Expect::Applied(Effect::Captured),
            "posted",
            AMOUNT,
            0,
        ),
        (
            AUTHORIZED,
            FAILED,
            AMOUNT,
            Expect::Applied(Effect::Voided),
            "voided",
            0,
            0,
        ),
        (
            SUCCEEDED,
            AUTHORIZED,
            AMOUNT,
            Expect::Duplicate,
            "posted",
            AMOUNT,
            0,
        ),
        (
            CAPTURED,
            SUCCEEDED,
            AMOUNT,
            Expect::Duplicate,
            "posted",
            AMOUNT,
            0,
        ),
        (
            FAILED,
            AUTHORIZED,
            AMOUNT,
            Expect::Duplicate,
            "voided",
            0,
            0,
        ),
        (
            SUCCEEDED,
            FAILED,
            AMOUNT,
            Expect::Dead(Reason::ConflictingState),
            "posted",
            AMOUNT,
            0,
        ),
        (
            AUTHORIZED,
            AUTHORIZED,
            AMOUNT,
            Expect::Duplicate,
            "pending",
            0,
            AMOUNT,
        ),
    ];
    let mut posted = 0;
    let mut pending = 0;
    for (first, second, second_amount, expect, status, gained, held) in cases {
        let payment = Uuid::new_v4();
        // Each event has its own event id: only wallet, currency and amount are compared.
        let a = Event::new(first, payment, "race", AMOUNT);
        let b = Event::new(second, payment, "race", second_amount);
        let (got_a, got_b) = race(&app, "race", &a, &b).await;
        let created = match first {
            AUTHORIZED => Effect::Held,
            FAILED => Effect::RecordedFailed,
            _ => Effect::Posted,
        };
        let what = format!("{first} then {second}");
        assert_eq!(got_a, Outcome::Applied(created), "{what}");
        assert!(
            expect.matches(&got_b),
            "{what}: {got_b:?}, wanted {expect:?}"
        );
        assert_eq!(
            status_of(&app, payment).await.as_deref(),
            Some(status),
            "{what}"
        );
        posted += gained;
        pending += held;
        assert_eq!(
            app.balances("race").await,
            credited(posted, pending),
            "{what}"
        );
    }
    // A partial capture that lands before its authorization: the authorization covers what
    // was captured, so it is a no-op, not a mismatch.
    let payment = Uuid::new_v4();
    let (captured, authorized) = race(
        &app,
        "race",
        &Event::new(CAPTURED, payment, "race", 3_000),
        &Event::new(AUTHORIZED, payment, "race", AMOUNT),
    )
    .await;
    assert_eq!(captured, Outcome::Applied(Effect::Posted));
    assert_eq!(authorized, Outcome::Duplicate);
    posted += 3_000;
    assert_eq!(app.balances("race").await, credited(posted, pending));
    // ...but one for less than was captured is not the same payment.
    let smaller = apply_one(&app, &Event::new(AUTHORIZED, payment, "race", 2_999)).await;
    assert_dead(&smaller, Reason::IdempotencyMismatch, "captured 30.00");
    // A resend that disagrees is still a mismatch, naming only the field that differs.
    let payment = Uuid::new_v4();
    let (_, got) = race(
        &app,
        "race",
        &Event::new(SUCCEEDED, payment, "race", AMOUNT),
        &Event::new(SUCCEEDED, payment, "race", AMOUNT - 1),
    )
    .await;
    let fields = assert_dead(&got, Reason::IdempotencyMismatch, "amount");
    assert_eq!(fields, ["amount"]);
    assert_ledger_consistent(&app).await;
    app.finish().await;
}

/// A refund is money the provider already paid out: against a closed wallet it can neither be
/// posted nor stored as a refusal nobody reads, so it is dead-lettered with its own reason and
/// nothing is written (a replay after an operator acted is decided afresh).
#[tokio::test]
async fn a_refund_to_a_closed_wallet_is_dead_lettered_with_nothing_stored() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w6").await;
    let payment = Uuid::new_v4();
    apply_one(&app, &Event::new(SUCCEEDED, payment, "w1", AMOUNT)).await;
    let r = app.transfer(Uuid::new_v4(), "w1", "w6", AMOUNT).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    close(&app, "w1").await;
    let clearing_before = app.balances("clearing:default:SAR").await;
    let refund_id = Uuid::new_v4();
    let refund = Event::refund(payment, refund_id, "w1", 1_000);
    for _ in 0..2 {
        let outcome = apply_one(&app, &refund).await;
        assert_dead(&outcome, Reason::AccountClosed, "account w1 is closed");
        assert_eq!(transaction(&app, refund_id).await, None, "nothing stored");
    }
    assert_eq!(app.balances("clearing:default:SAR").await, clearing_before);
    assert_eq!(app.balances("w1").await, credited(0, 0));
    assert_ledger_consistent(&app).await;
    app.finish().await;
}

/// A payment whose wallet is the provider's own clearing account would credit and debit one
/// account: refused as not a wallet, with that cause (it said "appears more than once").
#[tokio::test]
async fn a_clearing_account_named_as_the_wallet_is_malformed_with_that_cause() {
    let app = TestApp::new().await;
    app.create_wallet("w6").await;
    apply_one(&app, &Event::new(SUCCEEDED, Uuid::new_v4(), "w6", AMOUNT)).await;
    let clearing = "clearing:default:SAR";
    let payment = Uuid::new_v4();
    let outcome = apply_one(&app, &Event::new(SUCCEEDED, payment, clearing, AMOUNT)).await;
    assert_dead(
        &outcome,
        Reason::MalformedEvent,
        "clearing:default:SAR is the provider's clearing account, not a wallet",
    );
    assert_eq!(transaction(&app, payment).await, None);
    app.finish().await;
}

/// A provider refund has no funds check, so the range alone bounds it, and on all four
/// figures (issue 34, item 3): a refund that would take `available` (posted − pending_out)
/// below −(2^53 − 1) while `posted` stays inside is dead-lettered, nothing written.
#[tokio::test]
async fn a_refund_that_would_take_available_out_of_range_is_dead_lettered() {
    const M: i64 = 9_007_199_254_740_991;
    let app = TestApp::new().await;
    let r = app
        .post(
            "/v1/accounts",
            &json!({"id": "deep", "currency": "SAR", "type": "wallet", "overdraft_limit": M}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    app.create_account("out", "SAR", "system").await;
    // On Citus "deep" and "drain" sit on different workers (tests/citus checks the spread).
    app.create_wallet("drain").await;
    let payment = Uuid::new_v4();
    let paid = apply_one(&app, &Event::new(SUCCEEDED, payment, "deep", AMOUNT)).await;
    assert_eq!(paid, Outcome::Applied(Effect::Posted));
    // To the overdraft limit: posted AMOUNT + 10 − M, then AMOUNT + 10 held out: available −M.
    let r = app.transfer(Uuid::new_v4(), "deep", "out", M - 10).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let hold = json!({"id": Uuid::new_v4(), "status": "pending", "entries": [
        {"account": "deep", "amount": -(AMOUNT + 10)}, {"account": "drain", "amount": AMOUNT + 10}]});
    let r = app.post("/v1/transactions", &hold).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let before = app.balances("deep").await;
    assert_eq!(before.available, -M);
    assert_eq!(before.posted, AMOUNT + 10 - M);

    // Posted would stay inside (AMOUNT + 10 − M − 20 > −M); available would not.
    let refund_id = Uuid::new_v4();
    let outcome = apply_one(&app, &Event::refund(payment, refund_id, "deep", 20)).await;
    assert_dead(&outcome, Reason::MalformedEvent, "range");
    assert_eq!(transaction(&app, refund_id).await, None);
    assert_eq!(app.balances("deep").await, before);
    assert_ledger_consistent(&app).await;
    app.finish().await;
}
