//! Model-based property test: random sequences of 50 operations run against the real API and
//! an in-memory model of the ledger. The operations: wallets (some with an overdraft limit,
//! some in JPY) and system accounts; payments; transfers and three-leg transactions, posted or
//! held (some with an explicit `expires_at`); captures (whole or partial), releases and expiry
//! of holds; reversals (whole or partial); replays of earlier requests (as sent, or with their
//! defaults spelled out); mismatches (same id, another amount); transfers keyed by an
//! `Idempotency-Key`; atomic and independent batches (with repeated and stored ids); freeze,
//! unfreeze, close and PATCH of accounts; requests naming unknown accounts or transactions; the
//! checkpoint and hold-sweeper workers; snapshots of every balance.
//!
//! After every step the API's answer (status, problem `code`, replay header, body) must be
//! what the model predicts, and so must the balances of every account it touched (and the
//! transactions it touched). At the end of each case every account matches (balances, holds,
//! its entries' chain, its listed transactions, its balance `as_of` the start and the
//! snapshots) and the posted balances of the case sum to zero in each currency.
//!
//! One database serves the whole test: each case gets its own account-id prefix and its own
//! payment provider (so its own clearing accounts), so cases never see each other's money.
//! Expiry is simulated as the hold tests do it: the hold's `expires_at` is moved into the past
//! (time passing, without sleeping), which keeps every case deterministic.
//!
//! `PROPTEST_CASES` (default 256), `PROPTEST_MAX_SHRINK_ITERS` (default 2,000) and
//! `PROPTEST_MAX_SHRINK_TIME` (milliseconds, default 180,000) tune a run. On failure the
//! message carries the last steps of the shrunk case, each with the API's answer.

use super::common::{TestApp, TestResponse};
use axum::body::Body;
use axum::http::{Method, StatusCode};
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestCaseError, TestRunner};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use uuid::Uuid;
use wallet_ledger::ledger::{checkpoints, holds};

/// The documented namespace of ids derived from `Idempotency-Key` (docs/api.md).
const KEY_NAMESPACE: Uuid = uuid::uuid!("6f1d8a52-3c4e-4b7a-9e21-7d0c5b8e4a13");

// ---------------------------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------------------------

/// Picks one of what exists when the operation runs (`n % len`). A small number, unlike
/// `proptest::sample::Index`, so that shrinking a failing case takes few steps per pick.
#[derive(Debug, Clone, Copy)]
struct Index(u8);

impl Index {
    fn index(&self, len: usize) -> usize {
        self.0 as usize % len
    }

    /// An amount from 1 to `whole`, spread over the whole range.
    fn part_of(&self, whole: i64) -> i64 {
        1 + (whole.max(1) - 1) * i64::from(self.0) / 63
    }
}

impl Arbitrary for Index {
    type Parameters = ();
    type Strategy = proptest::strategy::Map<std::ops::Range<u8>, fn(u8) -> Index>;

    fn arbitrary_with(_: ()) -> Self::Strategy {
        (0u8..64).prop_map(Index)
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// Does nothing: what every other operation shrinks towards.
    Nothing,
    /// `jpy`: in JPY rather than SAR (transactions mixing them are invalid).
    CreateWallet {
        overdraft: Option<i64>,
        jpy: bool,
    },
    /// `bad`: with a non-zero overdraft limit, which a system account refuses.
    CreateSystem {
        bad: bool,
        jpy: bool,
    },
    /// A top-up in the wallet's currency (`wrong_currency`: in the other one).
    Payment {
        to: Index,
        amount: i64,
        wrong_currency: bool,
    },
    /// A transfer, posted or held (`expires`: with an explicit `expires_at`).
    Transfer {
        from: Index,
        to: Index,
        amount: i64,
        hold: bool,
        expires: bool,
    },
    /// A three-leg `POST /v1/transactions`, posted or held: one debit, two credits.
    Split {
        from: Index,
        to: (Index, Index),
        amounts: (i64, i64),
        hold: bool,
    },
    /// Capture: `any` picks among all transactions (not only holds); `amount` a partial
    /// capture (`over`: one more than held); `no_body` sends no body instead of `{}`.
    Post {
        target: Index,
        any: bool,
        amount: Option<Index>,
        over: bool,
        no_body: bool,
    },
    Void {
        target: Index,
        any: bool,
        no_body: bool,
    },
    /// Lets a pending hold reach its `expires_at`.
    Expire {
        target: Index,
    },
    Reverse {
        target: Index,
        amount: Option<Index>,
        over: bool,
    },
    /// The same request again (with `explicit`: with its defaults spelled out).
    Replay {
        request: Index,
        explicit: bool,
    },
    /// The same id with another amount (or overdraft limit, currency, metadata).
    Mismatch {
        request: Index,
        delta: i64,
    },
    Freeze {
        account: Index,
    },
    Unfreeze {
        account: Index,
    },
    Close {
        account: Index,
    },
    /// Something naming an account or transaction that does not exist.
    Unknown {
        kind: u8,
        known: Index,
        amount: i64,
    },
    /// A transfer without a body id: the id is derived from an `Idempotency-Key` header,
    /// sent bare or quoted.
    Keyed {
        from: Index,
        to: Index,
        amount: i64,
        hold: bool,
        quoted: bool,
    },
    /// `POST /v1/transactions/batch` of a few two-leg items.
    Batch {
        atomic: bool,
        items: Vec<BatchItem>,
    },
    /// The background worker that checkpoints system-account balances.
    Checkpoint,
    /// The background worker that marks overdue holds expired.
    Sweep,
    /// Remembers every balance now, to ask for them `as_of` this moment at the end.
    Snapshot,
    /// `PATCH /v1/accounts/{id}`: applied only when `version` is newer.
    Patch {
        account: Index,
        version: i64,
        note: u8,
    },
}

#[derive(Debug, Clone)]
enum BatchItem {
    Fresh {
        from: Index,
        to: Index,
        amount: i64,
        hold: bool,
    },
    /// The same id and payload as an earlier item of the batch.
    SameAs(Index),
    /// The id of an earlier item with another amount.
    OtherAmount(Index, i64),
    /// A request stored before (by `POST /v1/transactions` or a batch), sent again.
    Stored(Index),
}

fn batch_item() -> impl Strategy<Value = BatchItem> {
    prop_oneof![
        6 => (any::<Index>(), any::<Index>(), 1i64..=300, proptest::bool::weighted(0.3))
            .prop_map(|(from, to, amount, hold)| BatchItem::Fresh { from, to, amount, hold }),
        1 => any::<Index>().prop_map(BatchItem::SameAs),
        1 => (any::<Index>(), 1i64..=20).prop_map(|(i, d)| BatchItem::OtherAmount(i, d)),
        1 => any::<Index>().prop_map(BatchItem::Stored),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => Just(Op::Nothing),
        6 => (proptest::option::weighted(0.4, 1i64..=300), proptest::bool::weighted(0.15))
            .prop_map(|(overdraft, jpy)| Op::CreateWallet { overdraft, jpy }),
        2 => (proptest::bool::weighted(0.25), proptest::bool::weighted(0.15))
            .prop_map(|(bad, jpy)| Op::CreateSystem { bad, jpy }),
        10 => (any::<Index>(), 1i64..=1_000, proptest::bool::weighted(0.05))
            .prop_map(|(to, amount, wrong_currency)| Op::Payment { to, amount, wrong_currency }),
        14 => (any::<Index>(), any::<Index>(), 1i64..=400, proptest::bool::weighted(0.4), proptest::bool::weighted(0.3))
            .prop_map(|(from, to, amount, hold, expires)| Op::Transfer { from, to, amount, hold, expires }),
        4 => (any::<Index>(), any::<(Index, Index)>(), (1i64..=200, 1i64..=200), any::<bool>())
            .prop_map(|(from, to, amounts, hold)| Op::Split { from, to, amounts, hold }),
        9 => (
            any::<Index>(),
            proptest::bool::weighted(0.2),
            proptest::option::of(any::<Index>()),
            proptest::bool::weighted(0.1),
            any::<bool>(),
        )
            .prop_map(|(target, any, amount, over, no_body)| Op::Post {
                target,
                any,
                amount,
                over,
                no_body
            }),
        5 => (any::<Index>(), proptest::bool::weighted(0.2), any::<bool>())
            .prop_map(|(target, any, no_body)| Op::Void { target, any, no_body }),
        3 => any::<Index>().prop_map(|target| Op::Expire { target }),
        7 => (any::<Index>(), proptest::option::of(any::<Index>()), proptest::bool::weighted(0.1))
            .prop_map(|(target, amount, over)| Op::Reverse { target, amount, over }),
        6 => (any::<Index>(), any::<bool>())
            .prop_map(|(request, explicit)| Op::Replay { request, explicit }),
        4 => (any::<Index>(), 1i64..=50).prop_map(|(request, delta)| Op::Mismatch { request, delta }),
        3 => any::<Index>().prop_map(|account| Op::Freeze { account }),
        3 => any::<Index>().prop_map(|account| Op::Unfreeze { account }),
        2 => any::<Index>().prop_map(|account| Op::Close { account }),
        3 => (0u8..7, any::<Index>(), 1i64..=100)
            .prop_map(|(kind, known, amount)| Op::Unknown { kind, known, amount }),
        4 => (any::<Index>(), any::<Index>(), 1i64..=400, proptest::bool::weighted(0.3), any::<bool>())
            .prop_map(|(from, to, amount, hold, quoted)| Op::Keyed { from, to, amount, hold, quoted }),
        5 => (any::<bool>(), proptest::collection::vec(batch_item(), 1..=5))
            .prop_map(|(atomic, items)| Op::Batch { atomic, items }),
        1 => Just(Op::Checkpoint),
        1 => Just(Op::Sweep),
        1 => Just(Op::Snapshot),
        2 => (any::<Index>(), 0i64..6, any::<u8>())
            .prop_map(|(account, version, note)| Op::Patch { account, version, note }),
    ]
}

// ---------------------------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Account {
    id: String,
    currency: &'static str,
    wallet: bool,
    overdraft: i64,
    /// `active`, `frozen` or `closed`.
    status: &'static str,
    posted: i64,
    version: i64,
    metadata: Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Pending,
    Posted,
    Rejected,
    Voided,
    Expired,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Posted => "posted",
            Status::Rejected => "rejected",
            Status::Voided => "voided",
            Status::Expired => "expired",
        }
    }
}

/// The post or void that ended a hold: its canonical request and the answer it got.
#[derive(Debug, Clone)]
struct Resolution {
    post: bool,
    /// The capture's canonical amount: as sent, or the whole hold for a two-leg hold.
    amount: Option<i64>,
    body: String,
}

#[derive(Debug, Clone)]
struct Txn {
    id: Uuid,
    /// `transaction`, `transfer`, `payment` or `reversal`.
    kind: &'static str,
    /// The legs as requested (account index, signed amount).
    legs: Vec<(usize, i64)>,
    status: Status,
    was_hold: bool,
    captured: Option<i64>,
    resolution: Option<Resolution>,
    reverses: Option<usize>,
    /// What the posted reversals of this transaction gave back.
    reversed: i64,
    refusal: Option<&'static str>,
}

impl Txn {
    /// The legs as posted: a partly (or wholly) captured two-leg hold posted `captured`.
    fn posted_legs(&self) -> Vec<(usize, i64)> {
        match self.captured {
            Some(c) if self.legs.len() == 2 => self
                .legs
                .iter()
                .map(|&(a, x)| (a, c * x.signum()))
                .collect(),
            _ => self.legs.clone(),
        }
    }

    fn credited(legs: &[(usize, i64)]) -> i64 {
        legs.iter().map(|&(_, x)| x.max(0)).sum()
    }

    /// The amount a reversal is measured against.
    fn original_amount(&self) -> i64 {
        Txn::credited(&self.posted_legs())
    }

    fn held(&self) -> i64 {
        Txn::credited(&self.legs)
    }
}

#[derive(Debug, Clone, Copy)]
enum RequestKind {
    Account(usize),
    Txn(usize),
    Resolve(usize),
}

/// A request whose answer is stored under its id: replaying it must answer the same.
#[derive(Debug, Clone)]
struct StoredRequest {
    path: String,
    /// `None`: sent without a body.
    body: Option<Value>,
    status: StatusCode,
    text: String,
    /// Whether `text` is the exact answer (a single call) or only equal as JSON (an item of a
    /// batch).
    exact: bool,
    /// The `Idempotency-Key` header it was sent with, if it named no id in the body.
    key: Option<String>,
    kind: RequestKind,
}

/// What the model expects of a create.
enum Expect {
    Invalid,
    Decide,
}

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

struct Case<'a> {
    app: &'a TestApp,
    prefix: String,
    provider: String,
    accounts: Vec<Account>,
    /// The clearing account of each currency, once a payment created it.
    clearing: std::collections::BTreeMap<&'static str, usize>,
    /// Moments and every posted balance then, for `as_of` at the end.
    snapshots: Vec<(String, Vec<i64>)>,
    txns: Vec<Txn>,
    stored: Vec<StoredRequest>,
    ghosts: usize,
    keys: usize,
    started: chrono::DateTime<chrono::Utc>,
    log: Vec<String>,
}

static NEXT_CASE: AtomicU64 = AtomicU64::new(0);

/// How often each kind of outcome was checked over the run (printed at the end, so a run
/// shows what it exercised).
static TALLY: std::sync::Mutex<std::collections::BTreeMap<String, u64>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

static TIMES: std::sync::Mutex<std::collections::BTreeMap<String, (u32, std::time::Duration)>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

fn time_spent(what: &str, d: std::time::Duration) {
    let mut times = TIMES.lock().unwrap_or_else(|p| p.into_inner());
    let e = times.entry(what.to_owned()).or_default();
    e.0 += 1;
    e.1 += d;
}

fn tally(what: impl Into<String>) {
    *TALLY
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(what.into())
        .or_default() += 1;
}

/// Minor units as the contract formats them: `5000` at exponent 2 is `"50.00"`, `-5` is
/// `"-0.05"`.
fn decimal(minor: i64, exponent: u32) -> String {
    let sign = if minor < 0 { "-" } else { "" };
    let digits = minor.unsigned_abs().to_string();
    if exponent == 0 {
        return format!("{sign}{digits}");
    }
    let e = exponent as usize;
    let padded = format!("{digits:0>width$}", width = e + 1);
    let (whole, fraction) = padded.split_at(padded.len() - e);
    format!("{sign}{whole}.{fraction}")
}

fn describe(r: &TestResponse) -> String {
    format!(
        "{} replayed={} {}",
        r.status.as_u16(),
        r.replayed(),
        r.text.chars().take(600).collect::<String>()
    )
}

/// A moment as the case writes it (microseconds), back to an instant.
fn parse_moment(moment: &str) -> chrono::DateTime<chrono::Utc> {
    let parsed = chrono::DateTime::parse_from_rfc3339(moment);
    parsed.expect("an RFC 3339 moment").to_utc()
}

impl<'a> Case<'a> {
    /// `GET /v1/accounts/{id}?as_of={moment}` once the answer describes `needed` or later
    /// (`TestApp::get_final`).
    async fn final_balance_at(
        &self,
        account: &str,
        moment: &str,
        needed: chrono::DateTime<chrono::Utc>,
    ) -> TestResponse {
        let path = format!("/v1/accounts/{account}?as_of={moment}");
        self.app.get_final(&path, needed).await
    }

    fn new(app: &'a TestApp) -> Case<'a> {
        let n = NEXT_CASE.fetch_add(1, Ordering::Relaxed);
        Case {
            app,
            prefix: format!("m{}-{n}.", std::process::id()),
            provider: format!("p{}-{n}", std::process::id()),
            accounts: Vec::new(),
            clearing: Default::default(),
            snapshots: Vec::new(),
            txns: Vec::new(),
            stored: Vec::new(),
            ghosts: 0,
            keys: 0,
            started: chrono::Utc::now(),
            log: Vec::new(),
        }
    }

    fn note(&mut self, line: String) {
        self.log.push(line);
    }

    fn pending(&self, account: usize) -> (i64, i64) {
        let (mut pending_in, mut pending_out) = (0, 0);
        for t in self.txns.iter().filter(|t| t.status == Status::Pending) {
            for &(a, x) in &t.legs {
                if a == account {
                    if x > 0 {
                        pending_in += x;
                    } else {
                        pending_out -= x;
                    }
                }
            }
        }
        (pending_in, pending_out)
    }

    /// The refusal a new posting or hold with these legs gets, if any, in the documented
    /// order: closed (any leg), frozen (debits), the reversal's remainder, funds (wallets).
    fn refusal(
        &self,
        legs: &[(usize, i64)],
        reversal: Option<(usize, i64)>,
    ) -> Option<&'static str> {
        if legs
            .iter()
            .any(|&(a, _)| self.accounts[a].status == "closed")
        {
            return Some("account_closed");
        }
        if legs
            .iter()
            .any(|&(a, x)| x < 0 && self.accounts[a].status == "frozen")
        {
            return Some("account_frozen");
        }
        if let Some((original, amount)) = reversal {
            let o = &self.txns[original];
            if o.reversed + amount > o.original_amount() {
                return Some("reversal_exceeds_original");
            }
        }
        for &(a, x) in legs.iter().filter(|&&(_, x)| x < 0) {
            let account = &self.accounts[a];
            if account.wallet {
                let available = account.posted - self.pending(a).1;
                if available + x < -account.overdraft {
                    return Some("insufficient_funds");
                }
            }
        }
        None
    }

    /// A POST with a JSON body (or none) and optionally an `Idempotency-Key`.
    async fn send(&self, path: &str, key: Option<&str>, body: Option<&Value>) -> TestResponse {
        let mut headers = Vec::new();
        if body.is_some() {
            headers.push(("content-type", "application/json"));
        }
        if let Some(k) = key {
            headers.push(("idempotency-key", k));
        }
        match body {
            Some(b) => {
                self.app
                    .raw(Method::POST, path, &headers, b.to_string())
                    .await
            }
            None => {
                self.app
                    .raw(Method::POST, path, &headers, Body::empty())
                    .await
            }
        }
    }

    fn clearing_id(&self, currency: &str) -> String {
        format!("clearing:{}:{currency}", self.provider)
    }

    /// Whether legs on these (existing) accounts pass validation: distinct accounts, one
    /// currency (the first leg's), summing to zero.
    fn expect(&self, legs: &[(usize, i64)]) -> Expect {
        let distinct: BTreeSet<usize> = legs.iter().map(|l| l.0).collect();
        let currency = self.accounts[legs[0].0].currency;
        if distinct.len() == legs.len()
            && legs.iter().all(|l| self.accounts[l.0].currency == currency)
            && legs.iter().map(|l| l.1).sum::<i64>() == 0
        {
            Expect::Decide
        } else {
            Expect::Invalid
        }
    }

    fn path_of(&self, t: usize) -> String {
        format!("/v1/transactions/{}", self.txns[t].id)
    }

    // --- checks against the API -------------------------------------------------------------

    async fn verify_account(&self, a: usize) -> Result<(), String> {
        let account = &self.accounts[a];
        let r = self.app.get(&format!("/v1/accounts/{}", account.id)).await;
        ensure!(
            r.status == StatusCode::OK,
            "GET account {}: {}",
            account.id,
            describe(&r)
        );
        let (pending_in, pending_out) = self.pending(a);
        let b = &r.body["balances"];
        let got = (
            r.body["status"].as_str().unwrap_or(""),
            b["posted"].as_i64(),
            b["pending_in"].as_i64(),
            b["pending_out"].as_i64(),
            b["available"].as_i64(),
        );
        let want = (
            account.status,
            Some(account.posted),
            Some(pending_in),
            Some(pending_out),
            Some(account.posted - pending_out),
        );
        ensure!(
            got == want,
            "account {} (status, posted, pending_in, pending_out, available): API {got:?}, model {want:?}",
            account.id
        );
        ensure!(
            r.body["type"] == if account.wallet { "wallet" } else { "system" }
                && r.body["overdraft_limit"] == account.overdraft,
            "account {}: type/overdraft {} {}, model wallet={} overdraft={}",
            account.id,
            r.body["type"],
            r.body["overdraft_limit"],
            account.wallet,
            account.overdraft
        );
        let exponent = if account.currency == "JPY" { 0 } else { 2 };
        for field in ["posted", "pending_in", "pending_out", "available"] {
            let x = b[field].as_i64().unwrap_or(0);
            let want = decimal(x, exponent);
            ensure!(
                b[format!("{field}_decimal")] == want,
                "account {}: {field} {x} in {} is {}, want {want:?}",
                account.id,
                account.currency,
                b[format!("{field}_decimal")]
            );
        }
        ensure!(
            r.body["version"] == account.version && r.body["metadata"] == account.metadata,
            "account {}: version {} metadata {}, model {} {}",
            account.id,
            r.body["version"],
            r.body["metadata"],
            account.version,
            account.metadata
        );
        Ok(())
    }

    async fn verify_accounts(&self, touched: &[usize]) -> Result<(), String> {
        let unique: BTreeSet<usize> = touched.iter().copied().collect();
        for a in unique {
            self.verify_account(a).await?;
        }
        Ok(())
    }

    async fn verify_txn(&self, t: usize) -> Result<(), String> {
        let txn = &self.txns[t];
        let r = self.app.get(&self.path_of(t)).await;
        ensure!(
            r.status == StatusCode::OK,
            "GET transaction {}: {}",
            txn.id,
            describe(&r)
        );
        ensure!(
            r.body["status"] == txn.status.as_str(),
            "transaction {} ({}): API status {}, model {}",
            txn.id,
            txn.kind,
            r.body["status"],
            txn.status.as_str()
        );
        ensure!(
            r.body["kind"] == txn.kind,
            "transaction {}: kind {}, model {}",
            txn.id,
            r.body["kind"],
            txn.kind
        );
        ensure!(
            r.body["captured_amount"].as_i64() == txn.captured,
            "transaction {}: captured_amount {}, model {:?}",
            txn.id,
            r.body["captured_amount"],
            txn.captured
        );
        let refusal = r.body["refusal"]["code"].as_str();
        ensure!(
            refusal == txn.refusal,
            "transaction {}: refusal {refusal:?}, model {:?}",
            txn.id,
            txn.refusal
        );
        let reverses = r.body["reverses"].as_str().map(str::to_owned);
        let want = txn.reverses.map(|o| self.txns[o].id.to_string());
        ensure!(
            reverses == want,
            "transaction {}: reverses {reverses:?}, model {want:?}",
            txn.id
        );
        Ok(())
    }

    async fn verify_absent(&self, id: Uuid) -> Result<(), String> {
        let r = self.app.get(&format!("/v1/transactions/{id}")).await;
        ensure!(
            r.status == StatusCode::NOT_FOUND && r.code() == "not_found",
            "nothing may be stored under {id}, but GET answers {}",
            describe(&r)
        );
        Ok(())
    }

    fn legs_match(&self, body: &Value, legs: &[(usize, i64)]) -> bool {
        let Some(entries) = body["entries"].as_array() else {
            return false;
        };
        let mut got: Vec<(String, i64)> = entries
            .iter()
            .map(|e| {
                (
                    e["account"].as_str().unwrap_or("").to_owned(),
                    e["amount"].as_i64().unwrap_or(0),
                )
            })
            .collect();
        let mut want: Vec<(String, i64)> = legs
            .iter()
            .map(|&(a, x)| (self.accounts[a].id.clone(), x))
            .collect();
        got.sort();
        want.sort();
        got == want
    }

    // --- creates ------------------------------------------------------------------------------

    /// Sends a create of a transaction and checks it against the model; records what it
    /// stored. `legs` are the legs as requested; for a payment the clearing leg is `usize::MAX`
    /// until the clearing account exists.
    #[allow(clippy::too_many_arguments)]
    async fn create_txn(
        &mut self,
        path: &str,
        id: Uuid,
        key: Option<String>,
        body: Value,
        kind: &'static str,
        legs: Vec<(usize, i64)>,
        hold: bool,
        reversal: Option<(usize, i64)>,
        expect: Expect,
    ) -> Result<(), String> {
        let r = self.send(path, key.as_deref(), Some(&body)).await;
        let real_legs: Vec<(usize, i64)> =
            legs.iter().filter(|l| l.0 != usize::MAX).copied().collect();
        match expect {
            Expect::Invalid => {
                tally(format!("{kind} validation_failed"));
                self.note(format!("  -> {} (model: validation_failed)", describe(&r)));
                ensure!(
                    r.status == StatusCode::UNPROCESSABLE_ENTITY && r.code() == "validation_failed",
                    "POST {path} {body}: want 422 validation_failed, got {}",
                    describe(&r)
                );
                self.verify_absent(id).await?;
                let touched: Vec<usize> = real_legs.iter().map(|l| l.0).collect();
                return self.verify_accounts(&touched).await;
            }
            Expect::Decide => {}
        }
        let refusal = self.refusal(&real_legs, reversal);
        tally(format!(
            "{kind}{} {}",
            if hold { " hold" } else { "" },
            refusal.unwrap_or("created")
        ));
        self.note(format!(
            "  -> {} (model: {})",
            describe(&r),
            refusal.unwrap_or("created")
        ));
        let t = self.txns.len();
        match refusal {
            Some(code) => {
                ensure!(
                    r.status == StatusCode::UNPROCESSABLE_ENTITY
                        && r.code() == code
                        && !r.replayed(),
                    "POST {path} {body}: want 422 {code} (stored refusal), got {}",
                    describe(&r)
                );
                self.txns.push(Txn {
                    id,
                    kind,
                    legs: real_legs.clone(),
                    status: Status::Rejected,
                    was_hold: hold,
                    captured: None,
                    resolution: None,
                    reverses: reversal.map(|r| r.0),
                    reversed: 0,
                    refusal: Some(code),
                });
            }
            None => {
                ensure!(
                    r.status == StatusCode::CREATED && !r.replayed(),
                    "POST {path} {body}: want 201, got {}",
                    describe(&r)
                );
                let mut legs = legs;
                let currency = self.accounts[legs[0].0].currency;
                if kind == "payment" && !self.clearing.contains_key(currency) {
                    self.accounts.push(Account {
                        id: self.clearing_id(currency),
                        currency,
                        wallet: false,
                        overdraft: 0,
                        status: "active",
                        posted: 0,
                        version: 0,
                        metadata: json!({}),
                    });
                    self.clearing.insert(currency, self.accounts.len() - 1);
                }
                for leg in &mut legs {
                    if leg.0 == usize::MAX {
                        leg.0 = self.clearing[currency];
                    }
                }
                let want_status = if hold { "pending" } else { "posted" };
                ensure!(
                    r.body["status"] == want_status
                        && r.body["kind"] == kind
                        && r.body["id"] == id.to_string()
                        && self.legs_match(&r.body, &legs),
                    "POST {path} {body}: want a {kind} {want_status} with legs {legs:?}, got {}",
                    describe(&r)
                );
                if let Some(sent) = body["expires_at"].as_str() {
                    let parse = |v: &str| chrono::DateTime::parse_from_rfc3339(v).ok();
                    ensure!(
                        r.body["expires_at"].as_str().and_then(parse) == parse(sent),
                        "a hold created with expires_at {sent} answers {}",
                        r.body["expires_at"]
                    );
                }
                if let Some((original, amount)) = reversal {
                    ensure!(
                        r.body["reverses"] == self.txns[original].id.to_string(),
                        "reversal answer names reverses {}",
                        r.body["reverses"]
                    );
                    self.txns[original].reversed += amount;
                }
                if !hold {
                    for &(a, x) in &legs {
                        self.accounts[a].posted += x;
                    }
                }
                self.txns.push(Txn {
                    id,
                    kind,
                    legs,
                    status: if hold {
                        Status::Pending
                    } else {
                        Status::Posted
                    },
                    was_hold: hold,
                    captured: None,
                    resolution: None,
                    reverses: reversal.map(|r| r.0),
                    reversed: 0,
                    refusal: None,
                });
            }
        }
        self.stored.push(StoredRequest {
            path: path.to_owned(),
            body: Some(body),
            status: r.status,
            text: r.text.clone(),
            exact: true,
            key,
            kind: RequestKind::Txn(t),
        });
        self.verify_txn(t).await?;
        let touched: Vec<usize> = self.txns[t].legs.iter().map(|l| l.0).collect();
        self.verify_accounts(&touched).await
    }

    async fn create_account(
        &mut self,
        wallet: bool,
        currency: &'static str,
        overdraft: Option<i64>,
        bad: bool,
    ) -> Result<(), String> {
        let id = format!(
            "{}{}{}",
            self.prefix,
            if wallet { "w" } else { "s" },
            self.accounts.len()
        );
        let mut body = json!({"id": id, "currency": currency, "type": if wallet { "wallet" } else { "system" }});
        if let Some(o) = overdraft {
            body["overdraft_limit"] = json!(o);
        }
        if bad {
            body["overdraft_limit"] = json!(5);
        }
        let r = self.app.post("/v1/accounts", &body).await;
        self.note(format!("create account {body} -> {}", describe(&r)));
        if bad {
            ensure!(
                r.status == StatusCode::UNPROCESSABLE_ENTITY && r.code() == "validation_failed",
                "a system account with an overdraft limit: want 422 validation_failed, got {}",
                describe(&r)
            );
            let g = self.app.get(&format!("/v1/accounts/{id}")).await;
            ensure!(
                g.status == StatusCode::NOT_FOUND,
                "a refused account create stored {id}: {}",
                describe(&g)
            );
            return Ok(());
        }
        ensure!(
            r.status == StatusCode::CREATED
                && !r.replayed()
                && r.body["id"] == id
                && r.body["status"] == "active"
                && r.body["balances"]["posted"] == 0
                && r.body["currency"] == currency
                && r.body["overdraft_limit"] == overdraft.unwrap_or(0),
            "create account {body}: want 201 active, got {}",
            describe(&r)
        );
        self.accounts.push(Account {
            id,
            currency,
            wallet,
            overdraft: overdraft.unwrap_or(0),
            status: "active",
            posted: 0,
            version: 0,
            metadata: json!({}),
        });
        let a = self.accounts.len() - 1;
        self.stored.push(StoredRequest {
            path: "/v1/accounts".into(),
            body: Some(body),
            status: r.status,
            text: r.text,
            exact: true,
            key: None,
            kind: RequestKind::Account(a),
        });
        self.verify_account(a).await
    }

    fn pick(&self, i: &Index) -> usize {
        i.index(self.accounts.len())
    }

    async fn transfer(
        &mut self,
        from: usize,
        to: usize,
        amount: i64,
        hold: bool,
        expires: bool,
    ) -> Result<(), String> {
        let id = Uuid::new_v4();
        let mut body = json!({"id": id, "from": self.accounts[from].id, "to": self.accounts[to].id, "amount": amount});
        if hold {
            body["status"] = json!("pending");
        }
        if expires {
            let at = chrono::Utc::now() + chrono::TimeDelta::hours(1);
            body["expires_at"] = json!(at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true));
        }
        self.note(format!("transfer {body}"));
        // `expires_at` applies to holds only.
        let expect = match self.expect(&[(from, -amount), (to, amount)]) {
            Expect::Decide if expires && !hold => Expect::Invalid,
            other => other,
        };
        self.create_txn(
            "/v1/transfers",
            id,
            None,
            body,
            "transfer",
            vec![(from, -amount), (to, amount)],
            hold,
            None,
            expect,
        )
        .await
    }

    // --- hold transitions -----------------------------------------------------------------------

    fn pick_txn(&self, target: &Index, any: bool) -> Option<usize> {
        let candidates: Vec<usize> = (0..self.txns.len())
            .filter(|&t| any || self.txns[t].was_hold)
            .collect();
        if candidates.is_empty() {
            None
        } else {
            Some(candidates[target.index(candidates.len())])
        }
    }

    async fn resolve(
        &mut self,
        t: usize,
        post: bool,
        amount: Option<i64>,
        no_body: bool,
    ) -> Result<(), String> {
        let action = if post { "post" } else { "void" };
        let path = format!("{}/{action}", self.path_of(t));
        let body = match (no_body, amount) {
            (true, None) => None,
            (_, Some(a)) => Some(json!({ "amount": a })),
            (false, None) => Some(json!({})),
        };
        let r = match &body {
            Some(b) => self.app.post(&path, b).await,
            None => self.app.post_empty(&path).await,
        };
        let txn = self.txns[t].clone();
        let two_legs = txn.legs.len() == 2;
        let canonical = if post {
            amount.or(two_legs.then_some(txn.held()))
        } else {
            None
        };
        self.note(format!(
            "{action} {} ({} {}, legs {:?}) body {body:?} -> {}",
            txn.id,
            txn.kind,
            txn.status.as_str(),
            txn.legs,
            describe(&r)
        ));
        tally(format!(
            "{action} of {}{} -> {}{}",
            txn.status.as_str(),
            if amount.is_some() { " with amount" } else { "" },
            r.status.as_u16(),
            if r.replayed() { " replayed" } else { "" }
        ));
        let invalid_transition = |r: &TestResponse, current: &str| -> Result<(), String> {
            ensure!(
                r.status == StatusCode::CONFLICT
                    && r.code() == "invalid_transition"
                    && r.body["current_status"] == current,
                "{action} of a {current} transaction: want 409 invalid_transition naming {current}, got {}",
                describe(r)
            );
            Ok(())
        };
        match txn.status {
            Status::Pending => {
                if post && amount.is_some() && !two_legs {
                    ensure!(
                        r.status == StatusCode::UNPROCESSABLE_ENTITY
                            && r.code() == "validation_failed",
                        "a partial capture of a {}-leg hold: want 422 validation_failed (not_applicable), got {}",
                        txn.legs.len(),
                        describe(&r)
                    );
                } else if post && amount.is_some_and(|a| a > txn.held()) {
                    ensure!(
                        r.status == StatusCode::UNPROCESSABLE_ENTITY
                            && r.code() == "validation_failed",
                        "a capture above the held {}: want 422 validation_failed (range), got {}",
                        txn.held(),
                        describe(&r)
                    );
                } else {
                    let want = if post { "posted" } else { "voided" };
                    let captured = if post { canonical } else { None };
                    ensure!(
                        r.status == StatusCode::OK
                            && !r.replayed()
                            && r.body["status"] == want
                            && r.body["captured_amount"].as_i64() == captured,
                        "{action} of a pending hold: want 200 {want} captured {captured:?}, got {}",
                        describe(&r)
                    );
                    let m = &mut self.txns[t];
                    m.status = if post { Status::Posted } else { Status::Voided };
                    m.captured = captured;
                    m.resolution = Some(Resolution {
                        post,
                        amount: canonical,
                        body: r.text.clone(),
                    });
                    if post {
                        for (a, x) in self.txns[t].posted_legs() {
                            self.accounts[a].posted += x;
                        }
                    }
                    self.stored.push(StoredRequest {
                        path: path.clone(),
                        body,
                        status: r.status,
                        text: r.text.clone(),
                        exact: true,
                        key: None,
                        kind: RequestKind::Resolve(t),
                    });
                }
            }
            Status::Posted | Status::Voided => match &txn.resolution {
                Some(res) if res.post == post => {
                    if res.amount == canonical {
                        ensure!(
                            r.status == StatusCode::OK && r.replayed() && r.text == res.body,
                            "{action} repeated with the same request: want 200 replay of {}, got {}",
                            res.body,
                            describe(&r)
                        );
                    } else {
                        ensure!(
                            r.status == StatusCode::UNPROCESSABLE_ENTITY
                                && r.code() == "idempotency_mismatch"
                                && r.body["differing_fields"] == json!(["/amount"]),
                            "{action} repeated with amount {canonical:?} after {:?}: want 422 idempotency_mismatch [/amount], got {}",
                            res.amount,
                            describe(&r)
                        );
                    }
                }
                _ => invalid_transition(&r, txn.status.as_str())?,
            },
            Status::Rejected | Status::Expired => invalid_transition(&r, txn.status.as_str())?,
        }
        self.verify_txn(t).await?;
        let touched: Vec<usize> = txn.legs.iter().map(|l| l.0).collect();
        self.verify_accounts(&touched).await
    }

    async fn expire(&mut self, target: &Index) -> Result<(), String> {
        let pending: Vec<usize> = (0..self.txns.len())
            .filter(|&t| self.txns[t].status == Status::Pending)
            .collect();
        if pending.is_empty() {
            return Ok(());
        }
        let t = pending[target.index(pending.len())];
        let id = self.txns[t].id;
        self.note(format!("expire {id}"));
        for sql in [
            "update transactions set expires_at = now() - interval '1 second' where id = $1",
            "update open_holds set expires_at = now() - interval '1 second' where transaction_id = $1",
        ] {
            sqlx::query(sql)
                .bind(id)
                .execute(&self.app.pool)
                .await
                .map_err(|e| format!("moving the expiry of {id}: {e}"))?;
        }
        self.txns[t].status = Status::Expired;
        tally("expire");
        self.verify_txn(t).await?;
        let touched: Vec<usize> = self.txns[t].legs.iter().map(|l| l.0).collect();
        self.verify_accounts(&touched).await
    }

    // --- reversals --------------------------------------------------------------------------------

    async fn reverse(
        &mut self,
        target: &Index,
        amount: &Option<Index>,
        over: bool,
    ) -> Result<(), String> {
        if self.txns.is_empty() {
            return Ok(());
        }
        let o = target.index(self.txns.len());
        let original = self.txns[o].clone();
        let original_amount = original.original_amount();
        let amount = amount.as_ref().map(|i| {
            if over {
                original_amount + 1
            } else {
                i.part_of(original_amount)
            }
        });
        let id = Uuid::new_v4();
        let mut body = json!({ "id": id });
        if let Some(a) = amount {
            body["amount"] = json!(a);
        }
        let path = format!("{}/reverse", self.path_of(o));
        self.note(format!(
            "reverse {} ({} {}, legs {:?}, reversed {}) {body}",
            original.id,
            original.kind,
            original.status.as_str(),
            original.posted_legs(),
            original.reversed
        ));
        if original.status != Status::Posted {
            tally(format!("reverse of {}", original.status.as_str()));
            let r = self.app.post(&path, &body).await;
            self.note(format!("  -> {}", describe(&r)));
            let current = original.status.as_str();
            ensure!(
                r.status == StatusCode::CONFLICT
                    && r.code() == "invalid_transition"
                    && r.body["current_status"] == current,
                "reversal of a {current} transaction: want 409 invalid_transition naming {current}, got {}",
                describe(&r)
            );
            return self.verify_absent(id).await;
        }
        let posted = original.posted_legs();
        if amount.is_some() && posted.len() != 2 || amount.is_some_and(|a| a > original_amount) {
            tally("reverse validation_failed");
            let r = self.app.post(&path, &body).await;
            self.note(format!("  -> {} (model: validation_failed)", describe(&r)));
            ensure!(
                r.status == StatusCode::UNPROCESSABLE_ENTITY && r.code() == "validation_failed",
                "reversal amount {amount:?} of a {}-leg original of {original_amount}: want 422 validation_failed, got {}",
                posted.len(),
                describe(&r)
            );
            return self.verify_absent(id).await;
        }
        let reversed = amount.unwrap_or(original_amount);
        let legs: Vec<(usize, i64)> = posted
            .iter()
            .map(|&(a, x)| match amount {
                Some(n) => (a, -n * x.signum()),
                None => (a, -x),
            })
            .collect();
        self.create_txn(
            &path,
            id,
            None,
            body,
            "reversal",
            legs,
            false,
            Some((o, reversed)),
            Expect::Decide,
        )
        .await?;
        self.verify_txn(o).await
    }

    // --- replays and mismatches ---------------------------------------------------------------------

    /// The body with every default spelled out: the same request by the contract (`None`:
    /// no body at all).
    fn explicit(&self, s: &StoredRequest) -> Option<Value> {
        let mut body = s.body.clone();
        match s.kind {
            RequestKind::Account(_) => {
                let b = body.as_mut().expect("creates have bodies");
                if b.get("overdraft_limit").is_none() {
                    b["overdraft_limit"] = json!(0);
                }
                b["metadata"] = json!({});
                body
            }
            RequestKind::Txn(t) => {
                let b = body.as_mut().expect("creates have bodies");
                let txn = &self.txns[t];
                b["metadata"] = json!({});
                match txn.kind {
                    "reversal" => {
                        let o = &self.txns[txn.reverses.expect("a reversal")];
                        if b.get("amount").is_none() && o.posted_legs().len() == 2 {
                            b["amount"] = json!(o.original_amount());
                        }
                    }
                    "payment" => b["external_ref"] = Value::Null,
                    _ => {
                        if b.get("status").is_none() {
                            b["status"] = json!("posted");
                        }
                        b["external_ref"] = Value::Null;
                        // The same instant written with an offset is the same request.
                        b["expires_at"] = match b.get("expires_at").and_then(Value::as_str) {
                            Some(at) => json!(at.replace('Z', "+00:00")),
                            None => Value::Null,
                        };
                    }
                }
                body
            }
            RequestKind::Resolve(t) => {
                let txn = &self.txns[t];
                let res = txn.resolution.as_ref().expect("a resolved hold");
                let has_amount = body.as_ref().is_some_and(|b| b.get("amount").is_some());
                if !res.post {
                    // `{}` and no body are the same release.
                    return match body {
                        None => Some(json!({})),
                        Some(_) => None,
                    };
                }
                if txn.legs.len() == 2 && res.amount == Some(txn.held()) {
                    // A whole two-leg capture: `{}` is `{"amount": held}`.
                    return if has_amount {
                        Some(json!({}))
                    } else {
                        Some(json!({ "amount": txn.held() }))
                    };
                }
                match body {
                    None => Some(json!({})),
                    Some(_) if !has_amount => None,
                    other => other,
                }
            }
        }
    }

    async fn replay(&mut self, request: &Index, explicit: bool) -> Result<(), String> {
        if self.stored.is_empty() {
            return Ok(());
        }
        let s = self.stored[request.index(self.stored.len())].clone();
        let (mut body, mut key) = if explicit {
            (self.explicit(&s), s.key.clone())
        } else {
            (s.body.clone(), s.key.clone())
        };
        if explicit
            && key.is_some()
            && let (RequestKind::Txn(t), Some(b)) = (s.kind, body.as_mut())
        {
            // The derived id in the body is the same request: without the header, or with
            // another one (the body id wins).
            b["id"] = json!(self.txns[t].id);
            key = if request.0.is_multiple_of(2) {
                None
            } else {
                Some(format!("{}another key", self.prefix))
            };
        }
        let r = self.send(&s.path, key.as_deref(), body.as_ref()).await;
        self.note(format!(
            "replay POST {} key {key:?} {body:?} (first answered {}) -> {}",
            s.path,
            s.status.as_u16(),
            describe(&r)
        ));
        tally(format!(
            "replay{} of {}",
            if explicit { " (explicit defaults)" } else { "" },
            s.status.as_u16()
        ));
        let want = if s.status == StatusCode::CREATED {
            StatusCode::OK
        } else {
            s.status
        };
        let same_body = if s.exact {
            r.text == s.text
        } else {
            serde_json::from_str::<Value>(&s.text).ok().as_ref() == Some(&r.body)
        };
        ensure!(
            r.status == want && r.replayed() && same_body,
            "replay of POST {} {:?} (key {:?}) as {body:?} (key {key:?}): want {} with Idempotent-Replayed and the first body {}, got {}",
            s.path,
            s.body,
            s.key,
            want.as_u16(),
            s.text,
            describe(&r)
        );
        match s.kind {
            RequestKind::Account(a) => self.verify_account(a).await,
            RequestKind::Txn(t) | RequestKind::Resolve(t) => {
                self.verify_txn(t).await?;
                let touched: Vec<usize> = self.txns[t].legs.iter().map(|l| l.0).collect();
                self.verify_accounts(&touched).await
            }
        }
    }

    async fn mismatch(&mut self, request: &Index, delta: i64) -> Result<(), String> {
        let creates: Vec<StoredRequest> = self
            .stored
            .iter()
            .filter(|s| !matches!(s.kind, RequestKind::Resolve(_)))
            .cloned()
            .collect();
        if creates.is_empty() {
            return Ok(());
        }
        let s = &creates[request.index(creates.len())];
        let mut body = s.body.clone().expect("creates have bodies");
        let differing: Vec<&str> = match s.kind {
            RequestKind::Account(a) => {
                if self.accounts[a].wallet {
                    body["overdraft_limit"] = json!(self.accounts[a].overdraft + delta);
                    vec!["/overdraft_limit"]
                } else {
                    body["currency"] = json!("USD");
                    vec!["/currency"]
                }
            }
            RequestKind::Txn(t) => match self.txns[t].kind {
                "transfer" | "payment" => {
                    body["amount"] = json!(body["amount"].as_i64().unwrap() + delta);
                    vec!["/amount"]
                }
                "transaction" => {
                    let e0 = body["entries"][0]["amount"].as_i64().unwrap();
                    let e1 = body["entries"][1]["amount"].as_i64().unwrap();
                    body["entries"][0]["amount"] = json!(e0 - delta);
                    body["entries"][1]["amount"] = json!(e1 + delta);
                    vec!["/entries/0/amount", "/entries/1/amount"]
                }
                _ => {
                    let txn = &self.txns[t];
                    let o = &self.txns[txn.reverses.expect("a reversal")];
                    let canonical = Txn::credited(&txn.legs);
                    if o.posted_legs().len() == 2 && o.original_amount() >= 2 {
                        let other = if canonical > 1 { canonical - 1 } else { 2 };
                        body["amount"] = json!(other);
                        vec!["/amount"]
                    } else {
                        body["metadata"] = json!({"note": "another"});
                        vec!["/metadata/note"]
                    }
                }
            },
            RequestKind::Resolve(_) => unreachable!(),
        };
        tally(format!("mismatch {differing:?}"));
        let r = self.send(&s.path, s.key.as_deref(), Some(&body)).await;
        self.note(format!(
            "mismatch POST {} {body} -> {}",
            s.path,
            describe(&r)
        ));
        let got: BTreeSet<String> = r.body["differing_fields"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let want: BTreeSet<String> = differing.iter().map(|s| s.to_string()).collect();
        ensure!(
            r.status == StatusCode::UNPROCESSABLE_ENTITY
                && r.code() == "idempotency_mismatch"
                && got == want,
            "same id, other payload: POST {} {body} after {:?}: want 422 idempotency_mismatch {want:?}, got {}",
            s.path,
            s.body,
            describe(&r)
        );
        match s.kind {
            RequestKind::Account(a) => self.verify_account(a).await,
            RequestKind::Txn(t) | RequestKind::Resolve(t) => {
                self.verify_txn(t).await?;
                let touched: Vec<usize> = self.txns[t].legs.iter().map(|l| l.0).collect();
                self.verify_accounts(&touched).await
            }
        }
    }

    // --- account lifecycle --------------------------------------------------------------------------

    async fn lifecycle(&mut self, a: usize, action: &str) -> Result<(), String> {
        let account = self.accounts[a].clone();
        let r = self
            .app
            .post_empty(&format!("/v1/accounts/{}/{action}", account.id))
            .await;
        self.note(format!(
            "{action} {} ({}, posted {}, pending {:?}) -> {}",
            account.id,
            account.status,
            account.posted,
            self.pending(a),
            describe(&r)
        ));
        let (pending_in, pending_out) = self.pending(a);
        tally(format!(
            "{action} of {} -> {}",
            account.status,
            r.status.as_u16()
        ));
        let next: Result<&'static str, (StatusCode, &str)> = match (action, account.status) {
            (_, "closed") if action != "close" => Err((StatusCode::CONFLICT, "invalid_transition")),
            ("freeze", _) => Ok("frozen"),
            ("unfreeze", _) => Ok("active"),
            (_, "closed") => Ok("closed"),
            _ if account.posted != 0 || pending_in != 0 || pending_out != 0 => {
                Err((StatusCode::CONFLICT, "account_not_empty"))
            }
            _ => Ok("closed"),
        };
        match next {
            Ok(status) => {
                ensure!(
                    r.status == StatusCode::OK && r.body["status"] == status,
                    "{action} of a {} account: want 200 {status}, got {}",
                    account.status,
                    describe(&r)
                );
                self.accounts[a].status = status;
            }
            Err((code, problem)) => {
                ensure!(
                    r.status == code && r.code() == problem,
                    "{action} of a {} account (posted {}, pending in/out {pending_in}/{pending_out}): want {} {problem}, got {}",
                    account.status,
                    account.posted,
                    code.as_u16(),
                    describe(&r)
                );
            }
        }
        self.verify_account(a).await
    }

    // --- unknown accounts and transactions -------------------------------------------------------------

    fn ghost(&mut self) -> String {
        self.ghosts += 1;
        format!("{}ghost{}", self.prefix, self.ghosts)
    }

    async fn unknown(&mut self, kind: u8, known: &Index, amount: i64) -> Result<(), String> {
        tally(format!("unknown #{kind}"));
        let k = self.pick(known);
        let known_id = self.accounts[k].id.clone();
        let ghost = self.ghost();
        let id = Uuid::new_v4();
        let (path, body) = match kind {
            0 => (
                "/v1/transfers".to_owned(),
                json!({"id": id, "from": known_id, "to": ghost, "amount": amount}),
            ),
            1 => (
                "/v1/payments".to_owned(),
                json!({"id": id, "account": ghost, "amount": amount, "currency": "SAR", "provider": self.provider}),
            ),
            2 => {
                for action in ["freeze", "unfreeze", "close"] {
                    let r = self
                        .app
                        .post_empty(&format!("/v1/accounts/{ghost}/{action}"))
                        .await;
                    self.note(format!("{action} unknown {ghost} -> {}", describe(&r)));
                    ensure!(
                        r.status == StatusCode::NOT_FOUND && r.code() == "not_found",
                        "{action} of an unknown account: want 404 not_found, got {}",
                        describe(&r)
                    );
                }
                let r = self.app.get(&format!("/v1/accounts/{ghost}")).await;
                ensure!(
                    r.status == StatusCode::NOT_FOUND,
                    "GET unknown account: {}",
                    describe(&r)
                );
                return Ok(());
            }
            3 => {
                for (action, body) in [
                    ("post", json!({})),
                    ("void", json!({})),
                    ("reverse", json!({"id": Uuid::new_v4()})),
                ] {
                    let r = self
                        .app
                        .post(&format!("/v1/transactions/{id}/{action}"), &body)
                        .await;
                    self.note(format!(
                        "{action} unknown transaction {id} -> {}",
                        describe(&r)
                    ));
                    ensure!(
                        r.status == StatusCode::NOT_FOUND && r.code() == "not_found",
                        "{action} of an unknown transaction: want 404 not_found, got {}",
                        describe(&r)
                    );
                }
                return self.verify_absent(id).await;
            }
            4 => (
                "/v1/transactions".to_owned(),
                json!({"id": id, "entries": [
                    {"account": known_id, "amount": -2 * amount},
                    {"account": ghost, "amount": amount},
                    {"account": format!("{ghost}b"), "amount": amount}]}),
            ),
            5 => (
                "/v1/transfers".to_owned(),
                json!({"id": id, "from": ghost, "to": known_id, "amount": amount, "status": "pending"}),
            ),
            _ => (
                "/v1/transfers".to_owned(),
                json!({"id": id, "from": known_id, "to": ghost, "amount": amount}),
            ),
        };
        let r = self.app.post(&path, &body).await;
        self.note(format!(
            "unknown account: POST {path} {body} -> {}",
            describe(&r)
        ));
        ensure!(
            r.status == StatusCode::UNPROCESSABLE_ENTITY && r.code() == "unknown_account",
            "POST {path} {body}: want 422 unknown_account, got {}",
            describe(&r)
        );
        self.verify_absent(id).await?;
        if kind == 1 && !self.clearing.contains_key("SAR") {
            let clearing = self.clearing_id("SAR");
            let g = self.app.get(&format!("/v1/accounts/{clearing}")).await;
            ensure!(
                g.status == StatusCode::NOT_FOUND,
                "a payment to an unknown account created {clearing}: {}",
                describe(&g)
            );
        }
        self.verify_account(k).await?;
        if kind == 6 {
            // Nothing was stored: create the account, and the same id is decided afresh.
            let r = self
                .app
                .post(
                    "/v1/accounts",
                    &json!({"id": ghost, "currency": "SAR", "type": "wallet"}),
                )
                .await;
            ensure!(
                r.status == StatusCode::CREATED,
                "create {ghost}: {}",
                describe(&r)
            );
            self.accounts.push(Account {
                id: ghost,
                currency: "SAR",
                wallet: true,
                overdraft: 0,
                status: "active",
                posted: 0,
                version: 0,
                metadata: json!({}),
            });
            let g = self.accounts.len() - 1;
            self.note("  retry after creating the account".into());
            self.create_txn(
                &path,
                id,
                None,
                body,
                "transfer",
                vec![(k, -amount), (g, amount)],
                false,
                None,
                self.expect(&[(k, -amount), (g, amount)]),
            )
            .await?;
        }
        Ok(())
    }

    // --- keyed transfers, batches, PATCH and the background workers ------------------------------

    async fn keyed(
        &mut self,
        from: usize,
        to: usize,
        amount: i64,
        hold: bool,
        quoted: bool,
    ) -> Result<(), String> {
        self.keys += 1;
        let key = format!("{}key {}", self.prefix, self.keys);
        let header = if quoted {
            format!("\"{key}\"")
        } else {
            key.clone()
        };
        let id = Uuid::new_v5(&KEY_NAMESPACE, format!("default\n{key}").as_bytes());
        let mut body =
            json!({"from": self.accounts[from].id, "to": self.accounts[to].id, "amount": amount});
        if hold {
            body["status"] = json!("pending");
        }
        self.note(format!(
            "keyed transfer (Idempotency-Key {header}, id {id}) {body}"
        ));
        let expect = self.expect(&[(from, -amount), (to, amount)]);
        self.create_txn(
            "/v1/transfers",
            id,
            Some(header),
            body,
            "transfer",
            vec![(from, -amount), (to, amount)],
            hold,
            None,
            expect,
        )
        .await
    }

    async fn batch(&mut self, atomic: bool, items: &[BatchItem]) -> Result<(), String> {
        /// An item as sent, and what the model knows of it.
        #[derive(Clone)]
        struct Planned {
            id: Uuid,
            body: Value,
            legs: Vec<(usize, i64)>,
            hold: bool,
        }
        /// What an item's single call would answer.
        #[derive(Debug, Clone)]
        enum Want {
            Created,
            Refused(&'static str),
            Invalid,
            Mismatch,
            /// A replay of an earlier item of this batch.
            ReplayItem(usize, u16),
            /// A replay of a request stored before the batch.
            ReplayStored(usize),
        }
        let stored_items: Vec<usize> = (0..self.stored.len())
            .filter(|&i| {
                let s = &self.stored[i];
                s.path == "/v1/transactions" && s.key.is_none()
            })
            .collect();
        let mut planned: Vec<Planned> = Vec::new();
        // Which stored request each planned item replays, if it is one.
        let mut from_stored: Vec<Option<usize>> = Vec::new();
        for item in items {
            match item {
                BatchItem::Fresh {
                    from,
                    to,
                    amount,
                    hold,
                } => {
                    let (f, t) = (self.pick(from), self.pick(to));
                    let id = Uuid::new_v4();
                    let legs = vec![(f, -amount), (t, *amount)];
                    let mut body = json!({"id": id, "entries": legs.iter().map(|&(a, x)| json!({"account": self.accounts[a].id, "amount": x})).collect::<Vec<_>>()});
                    if *hold {
                        body["status"] = json!("pending");
                    }
                    planned.push(Planned {
                        id,
                        body,
                        legs,
                        hold: *hold,
                    });
                    from_stored.push(None);
                }
                BatchItem::SameAs(j) if !planned.is_empty() => {
                    let j = j.index(planned.len());
                    planned.push(planned[j].clone());
                    from_stored.push(from_stored[j]);
                }
                BatchItem::OtherAmount(j, delta) if !planned.is_empty() => {
                    let j = j.index(planned.len());
                    let mut p = planned[j].clone();
                    for (k, leg) in p.legs.iter_mut().enumerate() {
                        leg.1 += leg.1.signum() * delta;
                        p.body["entries"][k]["amount"] = json!(leg.1);
                    }
                    planned.push(p);
                    from_stored.push(from_stored[j]);
                }
                BatchItem::Stored(i) if !stored_items.is_empty() => {
                    let si = stored_items[i.index(stored_items.len())];
                    let s = &self.stored[si];
                    let RequestKind::Txn(t) = s.kind else {
                        continue;
                    };
                    let body = s.body.clone().expect("creates have bodies");
                    planned.push(Planned {
                        id: self.txns[t].id,
                        legs: self.txns[t].legs.clone(),
                        hold: self.txns[t].was_hold,
                        body,
                    });
                    from_stored.push(Some(si));
                }
                _ => {}
            }
        }
        if planned.is_empty() {
            return Ok(());
        }
        let saved = (self.accounts.clone(), self.txns.clone());
        // Which item stored each id first in this batch.
        let mut bound: Vec<(Uuid, usize)> = Vec::new();
        let mut wants: Vec<Want> = Vec::new();
        for (i, p) in planned.iter().enumerate() {
            let valid = matches!(self.expect(&p.legs), Expect::Decide);
            let want = if !valid {
                Want::Invalid
            } else if let Some(si) = self
                .stored
                .iter()
                .position(|s| matches!(s.kind, RequestKind::Txn(t) if self.txns[t].id == p.id))
            {
                if from_stored[i] == Some(si) && self.stored[si].body.as_ref() == Some(&p.body) {
                    Want::ReplayStored(si)
                } else {
                    Want::Mismatch
                }
            } else if let Some(&(_, j)) = bound.iter().find(|(id, _)| *id == p.id) {
                if planned[j].body == p.body {
                    let status = match wants[j] {
                        Want::Created => 200,
                        _ => 422,
                    };
                    Want::ReplayItem(j, status)
                } else {
                    Want::Mismatch
                }
            } else {
                bound.push((p.id, i));
                match self.refusal(&p.legs, None) {
                    Some(code) => {
                        self.txns.push(Txn {
                            id: p.id,
                            kind: "transaction",
                            legs: p.legs.clone(),
                            status: Status::Rejected,
                            was_hold: p.hold,
                            captured: None,
                            resolution: None,
                            reverses: None,
                            reversed: 0,
                            refusal: Some(code),
                        });
                        Want::Refused(code)
                    }
                    None => {
                        if !p.hold {
                            for &(a, x) in &p.legs {
                                self.accounts[a].posted += x;
                            }
                        }
                        self.txns.push(Txn {
                            id: p.id,
                            kind: "transaction",
                            legs: p.legs.clone(),
                            status: if p.hold {
                                Status::Pending
                            } else {
                                Status::Posted
                            },
                            was_hold: p.hold,
                            captured: None,
                            resolution: None,
                            reverses: None,
                            reversed: 0,
                            refusal: None,
                        });
                        Want::Created
                    }
                }
            };
            wants.push(want);
        }
        let body = json!({"mode": if atomic { "atomic" } else { "independent" },
            "items": planned.iter().map(|p| p.body.clone()).collect::<Vec<_>>()});
        let r = self.app.post("/v1/transactions/batch", &body).await;
        self.note(format!(
            "batch {body}\n  model {wants:?}\n  -> {}",
            describe(&r)
        ));
        let fails = |w: &Want| match w {
            Want::Created => false,
            Want::ReplayItem(_, status) => *status != 200,
            Want::ReplayStored(si) => self.stored[*si].status != StatusCode::CREATED,
            _ => true,
        };
        let failure = if atomic {
            wants.iter().position(fails)
        } else {
            None
        };
        tally(format!(
            "batch {} -> {}",
            if atomic { "atomic" } else { "independent" },
            if failure.is_some() {
                "batch_failed"
            } else {
                "200"
            }
        ));
        if let Some(index) = failure {
            // Nothing of it is stored; the model forgets what it decided.
            (self.accounts, self.txns) = saved;
            let code = match &wants[index] {
                Want::Refused(code) => *code,
                Want::Invalid => "validation_failed",
                Want::Mismatch => "idempotency_mismatch",
                Want::ReplayStored(si) => {
                    let t = self.stored[*si].text.clone();
                    let v: Value = serde_json::from_str(&t).unwrap_or(Value::Null);
                    return self
                        .batch_failed(
                            &r,
                            index,
                            v["code"].as_str().unwrap_or(""),
                            &planned.iter().map(|p| p.id).collect::<Vec<_>>(),
                        )
                        .await;
                }
                Want::ReplayItem(j, _) => match &wants[*j] {
                    Want::Refused(code) => *code,
                    _ => "",
                },
                Want::Created => unreachable!(),
            };
            return self
                .batch_failed(
                    &r,
                    index,
                    code,
                    &planned.iter().map(|p| p.id).collect::<Vec<_>>(),
                )
                .await;
        }
        ensure!(
            r.status == StatusCode::OK,
            "batch: want 200 with results, got {}",
            describe(&r)
        );
        let results = r.body["results"].as_array().cloned().unwrap_or_default();
        ensure!(
            results.len() == planned.len(),
            "batch of {} items answered {} results",
            planned.len(),
            results.len()
        );
        for (i, (want, got)) in wants.iter().zip(&results).enumerate() {
            let status = got["status"].as_u64().unwrap_or(0);
            let replayed = got["replayed"] == true;
            let code = got["body"]["code"].as_str().unwrap_or("");
            let ok = match want {
                Want::Created => {
                    status == 201
                        && !replayed
                        && got["body"]["status"]
                            == if planned[i].hold { "pending" } else { "posted" }
                        && got["body"]["id"] == planned[i].id.to_string()
                        && self.legs_match(&got["body"], &planned[i].legs)
                }
                Want::Refused(c) => status == 422 && !replayed && code == *c,
                Want::Invalid => status == 422 && !replayed && code == "validation_failed",
                Want::Mismatch => status == 422 && code == "idempotency_mismatch",
                Want::ReplayItem(j, s) => {
                    status == u64::from(*s) && replayed && got["body"] == results[*j]["body"]
                }
                Want::ReplayStored(si) => {
                    let s = &self.stored[*si];
                    let first: Value = serde_json::from_str(&s.text).unwrap_or(Value::Null);
                    let want_status = if s.status == StatusCode::CREATED {
                        200
                    } else {
                        s.status.as_u16()
                    };
                    status == u64::from(want_status) && replayed && got["body"] == first
                }
            };
            ensure!(
                ok,
                "batch item {i}: model {want:?}, API {}",
                got.to_string().chars().take(600).collect::<String>()
            );
            // What the item stored can be replayed later, by a single call too.
            if matches!(want, Want::Created | Want::Refused(_)) {
                let t = self
                    .txns
                    .iter()
                    .position(|t| t.id == planned[i].id)
                    .expect("decided above");
                self.stored.push(StoredRequest {
                    path: "/v1/transactions".into(),
                    body: Some(planned[i].body.clone()),
                    status: StatusCode::from_u16(status as u16).unwrap(),
                    text: got["body"].to_string(),
                    exact: false,
                    key: None,
                    kind: RequestKind::Txn(t),
                });
            }
        }
        let mut touched = Vec::new();
        for p in &planned {
            if let Some(t) = self.txns.iter().position(|t| t.id == p.id) {
                self.verify_txn(t).await?;
            } else {
                self.verify_absent(p.id).await?;
            }
            touched.extend(p.legs.iter().map(|l| l.0));
        }
        self.verify_accounts(&touched).await
    }

    async fn batch_failed(
        &mut self,
        r: &TestResponse,
        index: usize,
        code: &str,
        ids: &[Uuid],
    ) -> Result<(), String> {
        ensure!(
            r.status == StatusCode::UNPROCESSABLE_ENTITY
                && r.code() == "batch_failed"
                && r.body["index"] == index
                && r.body["problem"]["code"] == code,
            "atomic batch: want 422 batch_failed at index {index} with a {code} problem, got {}",
            describe(r)
        );
        for id in ids {
            match self.txns.iter().position(|t| t.id == *id) {
                Some(t) => self.verify_txn(t).await?,
                None => self.verify_absent(*id).await?,
            }
        }
        let all: Vec<usize> = (0..self.accounts.len()).collect();
        self.verify_accounts(&all).await
    }

    async fn patch(&mut self, a: usize, version: i64, note: u8) -> Result<(), String> {
        let body = json!({"version": version, "metadata": {"note": note}});
        let path = format!("/v1/accounts/{}", self.accounts[a].id);
        let r = self
            .app
            .raw(
                Method::PATCH,
                &path,
                &[("content-type", "application/json")],
                body.to_string(),
            )
            .await;
        self.note(format!(
            "PATCH {path} {body} (stored version {}) -> {}",
            self.accounts[a].version,
            describe(&r)
        ));
        let account = &mut self.accounts[a];
        tally(format!(
            "patch {}",
            if version > account.version {
                "newer"
            } else {
                "stale"
            }
        ));
        if version > account.version {
            account.version = version;
            account.metadata = json!({"note": note});
        }
        ensure!(
            r.status == StatusCode::OK
                && r.body["version"] == account.version
                && r.body["metadata"] == account.metadata,
            "PATCH {path} {body}: want 200 version {} metadata {}, got {}",
            account.version,
            account.metadata,
            describe(&r)
        );
        self.verify_account(a).await
    }

    async fn background(&mut self, checkpoint: bool) -> Result<(), String> {
        let mut conn = self
            .app
            .pool
            .acquire()
            .await
            .map_err(|e| format!("a connection: {e}"))?;
        let done = if checkpoint {
            checkpoints::advance(&mut crate::backend::db(&mut conn))
                .await
                .map(|n| n as i64)
                .map_err(|e| e.to_string())
        } else {
            holds::sweep(&mut crate::backend::db(&mut conn), 1_000)
                .await
                .map_err(|e| e.to_string())
        };
        drop(conn);
        let done = done.map_err(|e| format!("background step: {e}"))?;
        self.note(format!(
            "{} -> {done}",
            if checkpoint { "checkpoint" } else { "sweep" }
        ));
        tally(if checkpoint { "checkpoint" } else { "sweep" });
        let all: Vec<usize> = (0..self.accounts.len()).collect();
        self.verify_accounts(&all).await?;
        for t in 0..self.txns.len() {
            if self.txns[t].status == Status::Expired {
                self.verify_txn(t).await?;
            }
        }
        Ok(())
    }

    // --- the driver -----------------------------------------------------------------------------------

    async fn step(&mut self, op: &Op) -> Result<(), String> {
        match op {
            Op::Nothing => Ok(()),
            Op::CreateWallet { overdraft, jpy } => {
                let currency = if *jpy { "JPY" } else { "SAR" };
                self.create_account(true, currency, *overdraft, false).await
            }
            Op::CreateSystem { bad, jpy } => {
                let currency = if *jpy { "JPY" } else { "SAR" };
                self.create_account(false, currency, None, *bad).await
            }
            Op::Payment {
                to,
                amount,
                wrong_currency,
            } => {
                let a = self.pick(to);
                let id = Uuid::new_v4();
                let own = self.accounts[a].currency;
                let currency = match (*wrong_currency, own) {
                    (false, c) => c,
                    (true, "SAR") => "JPY",
                    (true, _) => "SAR",
                };
                let body = json!({"id": id, "account": self.accounts[a].id, "amount": amount,
                    "currency": currency, "provider": self.provider});
                self.note(format!("payment {body}"));
                let clearing = self.clearing.get(currency).copied().unwrap_or(usize::MAX);
                // A payment credits a wallet in its own currency; a system account (its own
                // clearing account included) or another currency is refused as invalid.
                let expect = if self.accounts[a].wallet && currency == own {
                    Expect::Decide
                } else {
                    Expect::Invalid
                };
                self.create_txn(
                    "/v1/payments",
                    id,
                    None,
                    body,
                    "payment",
                    vec![(a, *amount), (clearing, -amount)],
                    false,
                    None,
                    expect,
                )
                .await
            }
            Op::Transfer {
                from,
                to,
                amount,
                hold,
                expires,
            } => {
                let (f, t) = (self.pick(from), self.pick(to));
                self.transfer(f, t, *amount, *hold, *expires).await
            }
            Op::Split {
                from,
                to,
                amounts,
                hold,
            } => {
                let (f, t1, t2) = (self.pick(from), self.pick(&to.0), self.pick(&to.1));
                let id = Uuid::new_v4();
                let legs = vec![
                    (f, -(amounts.0 + amounts.1)),
                    (t1, amounts.0),
                    (t2, amounts.1),
                ];
                let mut body = json!({"id": id, "entries": legs.iter().map(|&(a, x)| json!({"account": self.accounts[a].id, "amount": x})).collect::<Vec<_>>()});
                if *hold {
                    body["status"] = json!("pending");
                }
                self.note(format!("transaction {body}"));
                let expect = self.expect(&legs);
                self.create_txn(
                    "/v1/transactions",
                    id,
                    None,
                    body,
                    "transaction",
                    legs,
                    *hold,
                    None,
                    expect,
                )
                .await
            }
            Op::Post {
                target,
                any,
                amount,
                over,
                no_body,
            } => {
                let Some(t) = self.pick_txn(target, *any) else {
                    return Ok(());
                };
                let held = self.txns[t].held();
                let amount = amount
                    .as_ref()
                    .map(|i| if *over { held + 1 } else { i.part_of(held) });
                self.resolve(t, true, amount, *no_body).await
            }
            Op::Void {
                target,
                any,
                no_body,
            } => {
                let Some(t) = self.pick_txn(target, *any) else {
                    return Ok(());
                };
                self.resolve(t, false, None, *no_body).await
            }
            Op::Expire { target } => self.expire(target).await,
            Op::Reverse {
                target,
                amount,
                over,
            } => self.reverse(target, amount, *over).await,
            Op::Replay { request, explicit } => self.replay(request, *explicit).await,
            Op::Mismatch { request, delta } => self.mismatch(request, *delta).await,
            Op::Freeze { account } => {
                let a = self.pick(account);
                self.lifecycle(a, "freeze").await
            }
            Op::Unfreeze { account } => {
                let a = self.pick(account);
                self.lifecycle(a, "unfreeze").await
            }
            Op::Close { account } => {
                let a = self.pick(account);
                self.lifecycle(a, "close").await
            }
            Op::Unknown {
                kind,
                known,
                amount,
            } => self.unknown(*kind, known, *amount).await,
            Op::Keyed {
                from,
                to,
                amount,
                hold,
                quoted,
            } => {
                let (f, t) = (self.pick(from), self.pick(to));
                self.keyed(f, t, *amount, *hold, *quoted).await
            }
            Op::Batch { atomic, items } => self.batch(*atomic, items).await,
            Op::Checkpoint => self.background(true).await,
            Op::Sweep => self.background(false).await,
            Op::Snapshot => {
                self.snapshot();
                Ok(())
            }
            Op::Patch {
                account,
                version,
                note,
            } => {
                let a = self.pick(account);
                self.patch(a, *version, *note).await
            }
        }
    }

    /// Every account as the model has it, its open holds, entries, listed transactions and
    /// past balances; the clearing accounts exist exactly for the currencies a payment went
    /// through; and the posted balances of the case sum to zero in each currency.
    async fn final_checks(&mut self) -> Result<(), String> {
        let mut sums: std::collections::BTreeMap<&str, i64> = Default::default();
        for a in 0..self.accounts.len() {
            self.verify_account(a).await?;
            let account = &self.accounts[a];
            *sums.entry(account.currency).or_default() += account.posted;
            let holds = self
                .app
                .get(&format!("/v1/accounts/{}/holds?limit=500", account.id))
                .await;
            let open = self
                .txns
                .iter()
                .filter(|t| t.status == Status::Pending && t.legs.iter().any(|l| l.0 == a))
                .count();
            let (pending_in, pending_out) = self.pending(a);
            let b = &holds.body["balances"];
            ensure!(
                holds.status == StatusCode::OK
                    && holds.body["data"].as_array().map(Vec::len) == Some(open)
                    && b["posted"] == account.posted
                    && b["pending_in"] == pending_in
                    && b["pending_out"] == pending_out,
                "holds of {}: the model has {open} open, posted {}, pending in/out {pending_in}/{pending_out}; the API {}",
                account.id,
                account.posted,
                describe(&holds)
            );
            self.check_entries(a).await?;
            self.check_listed(a).await?;
        }
        for (moment, posted) in &self.snapshots {
            for (a, want) in posted.iter().enumerate() {
                let account = &self.accounts[a];
                let needed = parse_moment(moment);
                let r = self.final_balance_at(&account.id, moment, needed).await;
                ensure!(
                    r.status == StatusCode::OK && r.body["balances"]["posted"] == *want,
                    "{} as_of {moment} (a snapshot): want posted {want}, got {}",
                    account.id,
                    describe(&r)
                );
            }
        }
        for currency in ["SAR", "JPY"] {
            let clearing = self.clearing_id(currency);
            let g = self.app.get(&format!("/v1/accounts/{clearing}")).await;
            let exists = self.clearing.contains_key(currency);
            ensure!(
                (g.status == StatusCode::OK) == exists,
                "{clearing}: the model says exists={exists}, GET answers {}",
                describe(&g)
            );
        }
        ensure!(
            sums.values().all(|s| *s == 0),
            "the posted balances of the case do not sum to zero per currency ({sums:?}): {:?}",
            self.accounts
                .iter()
                .map(|a| (&a.id, a.currency, a.posted))
                .collect::<Vec<_>>()
        );
        Ok(())
    }

    /// Remembers the moment and every posted balance (the last two snapshots are kept).
    fn snapshot(&mut self) {
        let moment = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
        let posted = self.accounts.iter().map(|a| a.posted).collect();
        self.note(format!("snapshot at {moment}"));
        tally("snapshot");
        self.snapshots.push((moment, posted));
        if self.snapshots.len() > 2 {
            self.snapshots.remove(0);
        }
    }

    /// The account's entries: they sum to its posted balance; a wallet's form a gap-free chain
    /// whose running balance ends at it and whose ledger time never decreases; and its balance
    /// `as_of` the start of the case is zero, `as_of` now its posted balance.
    async fn check_entries(&self, a: usize) -> Result<(), String> {
        let account = &self.accounts[a];
        let r = self
            .app
            .get(&format!("/v1/accounts/{}/entries?limit=500", account.id))
            .await;
        let entries = r.body["data"].as_array().cloned().unwrap_or_default();
        ensure!(
            r.status == StatusCode::OK && r.body["next_cursor"].is_null(),
            "entries of {}: {}",
            account.id,
            describe(&r)
        );
        let sum: i64 = entries
            .iter()
            .map(|e| e["amount"].as_i64().unwrap_or(0))
            .sum();
        ensure!(
            sum == account.posted,
            "the entries of {} sum to {sum}, the model's posted balance is {}",
            account.id,
            account.posted
        );
        if account.wallet {
            // Newest first: sequence n, n-1, ..., 1; each balance_after is the one before it
            // plus the entry.
            let n = entries.len() as i64;
            let mut below = 0;
            let mut time: Option<chrono::DateTime<chrono::FixedOffset>> = None;
            for (k, e) in entries.iter().rev().enumerate() {
                let (seq, amount, after) = (
                    e["sequence"].as_i64(),
                    e["amount"].as_i64().unwrap_or(0),
                    e["balance_after"].as_i64(),
                );
                // Compared as instants: RFC 3339 text leaves out a zero fraction
                // (`...:15Z` is before `...:15.057369Z`, though it sorts after it as text).
                let at =
                    chrono::DateTime::parse_from_rfc3339(e["ledger_time"].as_str().unwrap_or(""))
                        .ok();
                ensure!(
                    seq == Some(k as i64 + 1)
                        && after == Some(below + amount)
                        && at.is_some()
                        && at >= time,
                    "the chain of {} breaks at entry {k} of {n}: {e} (balance before {below}, previous ledger time {time:?})",
                    account.id
                );
                below += amount;
                time = at;
            }
        }
        let start = self
            .started
            .to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
        // Asked a second ahead, answered at the horizon: final once it passed the last write.
        let written = chrono::Utc::now();
        let later = (written + chrono::TimeDelta::seconds(1))
            .to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
        for (when, want, needed) in [
            (start.clone(), 0, parse_moment(&start)),
            (later, account.posted, written),
        ] {
            let r = self.final_balance_at(&account.id, &when, needed).await;
            ensure!(
                r.status == StatusCode::OK && r.body["balances"]["posted"] == want,
                "{} as_of {when}: want posted {want}, got {}",
                account.id,
                describe(&r)
            );
        }
        Ok(())
    }

    /// `GET /v1/transactions?account=` lists exactly the model's transactions with a leg on
    /// the account, each in the model's status.
    async fn check_listed(&self, a: usize) -> Result<(), String> {
        if self.clearing.values().any(|&c| c == a) {
            // Payments refused before the clearing account existed name it too.
            return Ok(());
        }
        let account = &self.accounts[a];
        let r = self
            .app
            .get(&format!(
                "/v1/transactions?account={}&limit=500",
                account.id
            ))
            .await;
        ensure!(
            r.status == StatusCode::OK && r.body["next_cursor"].is_null(),
            "transactions of {}: {}",
            account.id,
            describe(&r)
        );
        let got: BTreeSet<(String, String)> = r.body["data"]
            .as_array()
            .map(|d| {
                d.iter()
                    .map(|t| {
                        (
                            t["id"].as_str().unwrap_or("").to_owned(),
                            t["status"].as_str().unwrap_or("").to_owned(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let want: BTreeSet<(String, String)> = self
            .txns
            .iter()
            .filter(|t| t.legs.iter().any(|l| l.0 == a))
            .map(|t| (t.id.to_string(), t.status.as_str().to_owned()))
            .collect();
        ensure!(
            got == want,
            "transactions listed for {}: only in the API {:?}; only in the model {:?}",
            account.id,
            got.difference(&want).collect::<Vec<_>>(),
            want.difference(&got).collect::<Vec<_>>()
        );
        Ok(())
    }

    async fn run(&mut self, ops: &[Op]) -> Result<(), String> {
        // Two wallets (one with an overdraft limit) and a system account to start with.
        self.create_account(true, "SAR", None, false).await?;
        self.create_account(true, "SAR", Some(100), false).await?;
        self.create_account(false, "SAR", None, false).await?;
        for (i, op) in ops.iter().enumerate() {
            if !matches!(op, Op::Nothing) {
                self.note(format!("#{i} {op:?}"));
            }
            let t = Instant::now();
            self.step(op).await?;
            let name = format!("{op:?}");
            let name = name.split([' ', '{', '(']).next().unwrap_or("").to_owned();
            time_spent(&name, t.elapsed());
        }
        let t = Instant::now();
        let result = self.final_checks().await;
        time_spent("final checks", t.elapsed());
        result
    }
}

fn env_or(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Runs one sequence of operations as a fresh case against the app; the error carries the
/// whole step log.
fn run_case(rt: &tokio::runtime::Runtime, app: &TestApp, ops: &[Op]) -> Result<(), TestCaseError> {
    rt.block_on(async {
        let mut case = Case::new(app);
        let result = case.run(ops).await;
        result.map_err(|e| {
            let tail: Vec<&String> = case.log.iter().rev().take(60).collect();
            let log: Vec<&str> = tail.into_iter().rev().map(String::as_str).collect();
            TestCaseError::fail(format!(
                "{e}\n--- case {} (last steps) ---\n{}",
                case.prefix,
                log.join("\n")
            ))
        })
    })
}

#[test]
fn the_ledger_behaves_like_its_model() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let app = rt.block_on(TestApp::unlimited());
    let config = ProptestConfig {
        cases: env_or("PROPTEST_CASES", crate::backend::MODEL_CASES),
        max_shrink_iters: env_or("PROPTEST_MAX_SHRINK_ITERS", 2_000),
        // A failing case is shrunk for at most this long (each try runs a whole case).
        max_shrink_time: env_or("PROPTEST_MAX_SHRINK_TIME", 180_000),
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let mut runner = TestRunner::new(config);
    let started = Instant::now();
    let result = runner.run(&proptest::collection::vec(op(), 50), |ops| {
        run_case(&rt, &app, &ops)
    });
    eprintln!(
        "model: {:?} for the run; outcomes checked:",
        started.elapsed()
    );
    for (what, n) in TALLY.lock().unwrap_or_else(|p| p.into_inner()).iter() {
        eprintln!("  {n:6}  {what}");
    }
    eprintln!("time by operation:");
    for (what, (n, d)) in TIMES.lock().unwrap_or_else(|p| p.into_inner()).iter() {
        eprintln!("  {what:14} {n:6} x {:?} = {d:?}", *d / (*n).max(1));
    }
    if let Err(e) = result {
        panic!("{e}");
    }
    rt.block_on(app.finish());
}
