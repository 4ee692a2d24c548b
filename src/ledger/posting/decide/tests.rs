//! `decide` without a database: the locked state is built by hand, as `load` would read it.

use super::*;
use crate::ledger::journal::Journal;
use crate::ledger::limits::{Bound, Direction, VelocityLimit};
use crate::ledger::money::Amount;
use crate::ledger::monitors::{Condition, Field, Monitor, Operator, SetWatch, Watch};
use crate::ledger::owner::Owner;
use crate::ledger::posting::chain::ChainHead;
use crate::ledger::transactions::{Kind, Reversal};
use chrono::TimeDelta;
use proptest::prelude::*;
use serde_json::{Map, json};

fn account(id: &str, kind: AccountType, status: AccountStatus, overdraft: i64) -> LockedAccount {
    LockedAccount {
        id: id.to_owned(),
        currency: "EUR".to_owned(),
        kind,
        status,
        overdraft_limit: a(overdraft),
        has_limits: false,
        has_monitors: false,
        in_sets: false,
    }
}

/// An amount of a test's literal, in range.
fn a(minor_units: i64) -> Amount {
    Amount::new(minor_units).expect("an amount in range")
}

fn wallet(id: &str, overdraft: i64) -> LockedAccount {
    account(id, AccountType::Wallet, AccountStatus::Active, overdraft)
}

fn system(id: &str) -> LockedAccount {
    account(id, AccountType::System, AccountStatus::Active, 0)
}

/// The state `load` would hand over for these accounts, every wallet's chain empty.
fn ledger(accounts: Vec<LockedAccount>) -> LockedLedger {
    let wallets = accounts
        .iter()
        .filter(|a| a.kind == AccountType::Wallet)
        .map(|a| (a.id.clone(), WalletState::default()))
        .collect();
    LockedLedger {
        accounts: accounts.into_iter().map(|a| (a.id.clone(), a)).collect(),
        virtual_accounts: BTreeMap::new(),
        wallets,
        systems: HashMap::new(),
        needs_exclusive: false,
        reversed: HashMap::new(),
        histories: HashMap::new(),
        activities: HashMap::new(),
        set_activities: HashMap::new(),
        limited_sets: HashMap::new(),
        watches: Default::default(),
        firings: Vec::new(),
    }
}

impl LockedLedger {
    fn fund(mut self, id: &str, balance: i64, sequence: i64) -> LockedLedger {
        let chain = &mut self.wallets.get_mut(id).expect("a wallet").chain;
        chain.balance = a(balance);
        chain.sequence = sequence;
        self
    }

    fn head(&self, id: &str) -> ChainHead {
        self.wallets[id].chain
    }
}

fn legs(legs: &[(&str, i64)]) -> Journal {
    let legs = legs
        .iter()
        .enumerate()
        .map(|(i, (account, amount))| Leg {
            account: AccountId::parse(account).expect("an account id"),
            amount: Amount::new(*amount).expect("an amount"),
            account_field: format!("/entries/{i}/account"),
            amount_field: format!("/entries/{i}/amount"),
            must_be_wallet: false,
            currency: None,
        })
        .collect();
    Journal::new(legs).expect("a journal")
}

fn transaction(journal: &[(&str, i64)], status: Requested) -> NewTransaction {
    NewTransaction {
        id: Uuid::new_v4(),
        kind: Kind::Transaction,
        status,
        journal: legs(journal),
        currency: None,
        external_ref: None,
        metadata: Map::new(),
        request: json!({}),
        created_on_use: Vec::new(),
        exchange: None,
        reversal: None,
        effective_at: None,
        provider_initiated: false,
    }
}

fn transfer(from: &str, to: &str, amount: i64) -> NewTransaction {
    transaction(&[(from, -amount), (to, amount)], Requested::Posted)
}

fn hold(from: &str, to: &str, amount: i64, expires_at: DateTime<Utc>) -> NewTransaction {
    transaction(
        &[(from, -amount), (to, amount)],
        Requested::Pending { expires_at },
    )
}

fn refund(from: &str, to: &str, amount: i64) -> NewTransaction {
    NewTransaction {
        effective_at: None,
        provider_initiated: true,
        ..transfer(from, to, amount)
    }
}

fn refusal(decision: Result<Decision, ItemError>) -> RefusalCode {
    match decision {
        Ok(Decision::Refuse { code, .. }) => code,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn posted(decision: Result<Decision, ItemError>) -> (Vec<NewEntry>, DateTime<Utc>) {
    match decision {
        Ok(Decision::Post {
            entries,
            ledger_time,
            ..
        }) => (entries, ledger_time),
        other => panic!("expected a posting, got {other:?}"),
    }
}

fn invalid_codes(decision: Result<Decision, ItemError>) -> Vec<String> {
    match decision {
        Err(ItemError::Invalid(errors)) => errors.into_iter().map(|e| e.code).collect(),
        other => panic!("expected an invalid request, got {other:?}"),
    }
}

#[test]
fn refusals_come_in_their_fixed_order() {
    let now = Utc::now();
    let original = Uuid::new_v4();
    // Every refusal applies at first; lifting them one by one shows the next in order.
    let steps = [
        (
            AccountStatus::Closed,
            AccountStatus::Frozen,
            60,
            RefusalCode::AccountClosed,
        ),
        (
            AccountStatus::Active,
            AccountStatus::Frozen,
            60,
            RefusalCode::AccountFrozen,
        ),
        (
            AccountStatus::Active,
            AccountStatus::Active,
            60,
            RefusalCode::ReversalExceedsOriginal,
        ),
        (
            AccountStatus::Active,
            AccountStatus::Active,
            50,
            RefusalCode::InsufficientFunds,
        ),
    ];
    for (credited, debited, already, expected) in steps {
        let mut ledger = ledger(vec![
            account("from", AccountType::Wallet, debited, 0),
            account("to", AccountType::Wallet, credited, 0),
        ])
        .fund("from", 10, 1);
        ledger.reversed.insert(original, a(already));
        let item = NewTransaction {
            kind: Kind::Reversal,
            reversal: Some(Reversal {
                original,
                amount: a(50),
                original_amount: a(100),
            }),
            ..transfer("from", "to", 50)
        };
        assert_eq!(refusal(ledger.decide(&item, now)), expected);
        assert_eq!(
            ledger.head("from"),
            ChainHead {
                sequence: 1,
                balance: a(10),
                ledger_time: None,
                ..ChainHead::default()
            }
        );
    }
}

#[test]
fn a_frozen_account_may_still_be_credited() {
    let mut ledger = ledger(vec![
        wallet("from", 0),
        account("to", AccountType::Wallet, AccountStatus::Frozen, 0),
    ])
    .fund("from", 10, 1);
    let (entries, _) = posted(ledger.decide(&transfer("from", "to", 10), Utc::now()));
    assert_eq!(entries[1].balance_after, Some(a(10)));
}

#[test]
fn funds_are_checked_against_the_overdraft_limit() {
    let now = Utc::now();
    let mut plain = ledger(vec![wallet("from", 0), wallet("to", 0)]).fund("from", 100, 1);
    let code = refusal(plain.decide(&transfer("from", "to", 101), now));
    assert_eq!(code, RefusalCode::InsufficientFunds);
    let (entries, _) = posted(plain.decide(&transfer("from", "to", 100), now));
    assert_eq!(entries[0].balance_after, Some(a(0)));

    let mut overdraft = ledger(vec![wallet("from", 50), wallet("to", 0)]).fund("from", 100, 1);
    let code = refusal(overdraft.decide(&transfer("from", "to", 151), now));
    assert_eq!(code, RefusalCode::InsufficientFunds);
    let (entries, _) = posted(overdraft.decide(&transfer("from", "to", 150), now));
    assert_eq!(entries[0].balance_after, Some(a(-50)));
}

#[test]
fn a_provider_refund_bypasses_frozen_and_funds_but_not_closed() {
    let now = Utc::now();
    let frozen = account("w", AccountType::Wallet, AccountStatus::Frozen, 0);
    let mut ledger_ = ledger(vec![frozen, system("psp")]).fund("w", 5, 3);
    let (entries, _) = posted(ledger_.decide(&refund("w", "psp", 500), now));
    assert_eq!(entries[0].balance_after, Some(a(-495)));
    assert_eq!(entries[0].sequence, Some(4));
    assert_eq!(
        (entries[1].sequence, entries[1].balance_after),
        (None, None)
    );

    let closed = account("w", AccountType::Wallet, AccountStatus::Closed, 0);
    let mut ledger_ = ledger(vec![closed, system("psp")]);
    let codes = invalid_codes(ledger_.decide(&refund("w", "psp", 500), now));
    assert_eq!(codes, ["account_closed"]);
}

#[test]
fn a_provider_refund_may_not_take_available_past_the_range() {
    let now = Utc::now();
    let later = now + TimeDelta::hours(1);
    let m = crate::ledger::money::MAX_AMOUNT;
    let mut ledger =
        ledger(vec![wallet("w", m), wallet("to", 0), system("psp")]).fund("w", -m + 20, 2);
    // Held out to the overdraft limit: available −M, posted −M + 20.
    assert!(matches!(
        ledger.decide(&hold("w", "to", 20, later), now),
        Ok(Decision::Hold { .. })
    ));
    // Posted would stay inside (−M + 10); available would not (−M − 10).
    let codes = invalid_codes(ledger.decide(&refund("w", "psp", 10), now));
    assert_eq!(codes, ["balance_overflow"]);
    // A debit the funds check covers is still insufficient_funds, not an overflow.
    let code = refusal(ledger.decide(&transfer("w", "to", 10), now));
    assert_eq!(code, RefusalCode::InsufficientFunds);
}

#[test]
fn a_wallets_credit_holds_count_against_its_range_as_if_posted() {
    let now = Utc::now();
    let later = now + TimeDelta::hours(1);
    let m = crate::ledger::money::MAX_AMOUNT;
    let mut ledger = ledger(vec![wallet("rich", 0), system("sys")]).fund("rich", m - 5, 1);
    let codes = invalid_codes(ledger.decide(&hold("sys", "rich", 6, later), now));
    assert_eq!(codes, ["balance_overflow"]);
    assert!(matches!(
        ledger.decide(&hold("sys", "rich", 3, later), now),
        Ok(Decision::Hold { .. })
    ));
    // Either would fit posted alone; neither fits with the 3 held in.
    let codes = invalid_codes(ledger.decide(&hold("sys", "rich", 3, later), now));
    assert_eq!(codes, ["balance_overflow"]);
    let codes = invalid_codes(ledger.decide(&transfer("sys", "rich", 3), now));
    assert_eq!(codes, ["balance_overflow"]);
    posted(ledger.decide(&transfer("sys", "rich", 2), now));
}

#[test]
fn holds_reduce_what_is_available() {
    let now = Utc::now();
    let later = now + TimeDelta::hours(1);
    let mut ledger = ledger(vec![wallet("from", 0), wallet("to", 0)]).fund("from", 100, 1);
    match ledger.decide(&hold("from", "to", 80, later), now) {
        Ok(Decision::Hold { holds, .. }) => {
            let amounts: Vec<i64> = holds.iter().map(|h| h.amount.minor_units()).collect();
            assert_eq!(amounts, [-80, 80]);
        }
        other => panic!("expected a hold, got {other:?}"),
    }
    // Held, not posted: the chain did not move.
    assert_eq!(ledger.head("from").sequence, 1);
    assert_eq!(ledger.wallets["from"].pending_out, a(80));
    assert_eq!(ledger.wallets["to"].pending_in, a(80));
    let code = refusal(ledger.decide(&transfer("from", "to", 21), now));
    assert_eq!(code, RefusalCode::InsufficientFunds);
    let code = refusal(ledger.decide(&hold("from", "to", 21, later), now));
    assert_eq!(code, RefusalCode::InsufficientFunds);
    posted(ledger.decide(&transfer("from", "to", 20), now));
}

/// The boundary is the one `hold_status_at` reads by (`expires_at <= at` is expired): a hold
/// expiring at `now` would already read as expired, one expiring a microsecond later is held.
#[test]
fn a_hold_that_expires_in_the_past_is_invalid() {
    let now = Utc::now();
    let mut ledger = ledger(vec![wallet("from", 0), wallet("to", 0)]).fund("from", 100, 1);
    for expires_at in [now, now - TimeDelta::seconds(1)] {
        let codes = invalid_codes(ledger.decide(&hold("from", "to", 10, expires_at), now));
        assert_eq!(codes, ["range"]);
    }
    assert_eq!(ledger.wallets["from"].pending_out, a(0));
    let just_after = now + TimeDelta::microseconds(1);
    let decision = ledger.decide(&hold("from", "to", 10, just_after), now);
    assert!(
        matches!(decision, Ok(Decision::Hold { .. })),
        "{decision:?}"
    );
}

#[test]
fn a_voided_record_moves_nothing_and_is_not_refused() {
    let now = Utc::now();
    let frozen = account("from", AccountType::Wallet, AccountStatus::Frozen, 0);
    let mut ledger = ledger(vec![frozen, wallet("to", 0)]);
    let item = transaction(&[("from", -10), ("to", 10)], Requested::Voided);
    assert!(matches!(
        ledger.decide(&item, now),
        Ok(Decision::Record { .. })
    ));
    assert_eq!(ledger.head("from"), ChainHead::default());
    assert_eq!(ledger.wallets["from"].pending_out, a(0));
}

#[test]
fn unknown_accounts_are_named() {
    let mut ledger = ledger(vec![wallet("from", 0)]);
    let decision = ledger.decide(&transfer("from", "nobody", 1), Utc::now());
    assert_eq!(
        decision.map(|_| ()),
        Err(ItemError::UnknownAccounts(vec!["nobody".to_owned()]))
    );
}

#[test]
fn legs_in_another_currency_are_invalid() {
    let mut usd = wallet("to", 0);
    usd.currency = "USD".to_owned();
    let mut ledger = ledger(vec![wallet("from", 0), usd]).fund("from", 100, 1);
    let codes = invalid_codes(ledger.decide(&transfer("from", "to", 1), Utc::now()));
    assert_eq!(codes, ["currency_mismatch"]);
    assert_eq!(ledger.head("from").sequence, 1);
}

#[test]
fn each_item_sees_the_items_before_it() {
    let now = Utc::now();
    let mut ledger = ledger(vec![wallet("a", 0), wallet("b", 0)]).fund("a", 100, 41);
    let (first, _) = posted(ledger.decide(&transfer("a", "b", 70), now));
    let code = refusal(ledger.decide(&transfer("a", "b", 31), now));
    assert_eq!(code, RefusalCode::InsufficientFunds);
    let (second, _) = posted(ledger.decide(&transfer("a", "b", 30), now));
    let (third, _) = posted(ledger.decide(&transfer("b", "a", 5), now));
    // Sequences continue gap-free, the refusal took none.
    let chain = |entries: [&NewEntry; 3]| entries.map(|e| (e.sequence, e.balance_after));
    let chain_a = chain([&first[0], &second[0], &third[1]]);
    assert_eq!(
        chain_a,
        [
            (Some(42), Some(a(30))),
            (Some(43), Some(a(0))),
            (Some(44), Some(a(5)))
        ]
    );
    let chain_b = chain([&first[1], &second[1], &third[0]]);
    assert_eq!(
        chain_b,
        [
            (Some(1), Some(a(70))),
            (Some(2), Some(a(100))),
            (Some(3), Some(a(95)))
        ]
    );
}

#[test]
fn ledger_time_never_decreases_along_a_chain() {
    let now = Utc::now();
    let ahead = now + TimeDelta::seconds(30);
    let mut ledger = ledger(vec![wallet("a", 0), wallet("b", 0)]).fund("a", 100, 1);
    ledger.wallets.get_mut("a").unwrap().chain.ledger_time = Some(ahead);
    let (_, first) = posted(ledger.decide(&transfer("a", "b", 1), now));
    assert_eq!(first, ahead);
    // `b` now carries that time too, though its own chain was empty.
    assert_eq!(ledger.head("b").ledger_time, Some(ahead));
    let (_, second) = posted(ledger.decide(&transfer("b", "a", 1), now - TimeDelta::hours(1)));
    assert_eq!(second, ahead);
    let (_, third) = posted(ledger.decide(&transfer("a", "b", 1), ahead + TimeDelta::seconds(1)));
    assert_eq!(third, ahead + TimeDelta::seconds(1));
}

// ---------------------------------------------------------------------------------------------
// Property: random transfers, holds, fundings and provider refunds over a few wallets
// ---------------------------------------------------------------------------------------------

const WALLETS: [&str; 3] = ["w0", "w1", "w2"];

#[derive(Debug, Clone)]
enum Op {
    /// From one wallet to another, posted or held.
    Transfer {
        from: usize,
        to: usize,
        amount: i64,
        held: bool,
    },
    /// From the system account into a wallet.
    Fund { to: usize, amount: i64 },
    /// A provider's refund out of a wallet, checked by nothing but the range.
    Refund { from: usize, amount: i64 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..3usize, 1..3usize, 1..200i64, any::<bool>()).prop_map(|(from, step, amount, held)| {
            Op::Transfer { from, to: (from + step) % 3, amount, held }
        }),
        2 => (0..3usize, 1..150i64).prop_map(|(to, amount)| Op::Fund { to, amount }),
        1 => (0..3usize, 1..100i64).prop_map(|(from, amount)| Op::Refund { from, amount }),
    ]
}

/// What the wallets should read, kept from the entries alone.
#[derive(Debug, Default, Clone, Copy)]
struct Model {
    posted: i64,
    sequence: i64,
    pending_out: i64,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn decisions_keep_the_ledger_invariants(
        overdrafts in prop::array::uniform3(prop_oneof![Just(0i64), 0..100i64]),
        ops in prop::collection::vec(op(), 1..60),
    ) {
        let now = Utc::now();
        let mut accounts: Vec<LockedAccount> =
            WALLETS.iter().zip(overdrafts).map(|(id, o)| wallet(id, o)).collect();
        accounts.push(system("sys"));
        let mut ledger = ledger(accounts);
        let mut model = [Model::default(); 3];
        let later = now + TimeDelta::hours(1);
        for op in &ops {
            let item = match *op {
                Op::Transfer { from, to, amount, held: false } => {
                    transfer(WALLETS[from], WALLETS[to], amount)
                }
                Op::Transfer { from, to, amount, held: true } => {
                    hold(WALLETS[from], WALLETS[to], amount, later)
                }
                Op::Fund { to, amount } => transfer("sys", WALLETS[to], amount),
                Op::Refund { from, amount } => refund(WALLETS[from], "sys", amount),
            };
            match ledger.decide(&item, now) {
                Ok(Decision::Post { entries, .. }) => {
                    prop_assert_eq!(entries.iter().map(|e| e.amount.minor_units()).sum::<i64>(), 0);
                    for entry in &entries {
                        let Some(w) = WALLETS.iter().position(|w| *w == entry.account) else {
                            prop_assert_eq!((entry.sequence, entry.balance_after), (None, None));
                            continue;
                        };
                        let m = &mut model[w];
                        prop_assert_eq!(entry.sequence, Some(m.sequence + 1));
                        m.sequence += 1;
                        m.posted += entry.amount.minor_units();
                        prop_assert_eq!(entry.balance_after, Some(a(m.posted)));
                        if entry.amount.is_negative() && !item.provider_initiated {
                            prop_assert!(
                                m.posted - m.pending_out >= -overdrafts[w],
                                "{} overdrawn: {:?}", entry.account, m
                            );
                        }
                    }
                }
                Ok(Decision::Hold { holds, .. }) => {
                    prop_assert_eq!(holds.iter().map(|h| h.amount.minor_units()).sum::<i64>(), 0);
                    for h in holds.iter().filter(|h| h.amount.is_negative()) {
                        let w = WALLETS.iter().position(|w| *w == h.account).unwrap();
                        model[w].pending_out -= h.amount.minor_units();
                        prop_assert!(model[w].posted - model[w].pending_out >= -overdrafts[w]);
                    }
                }
                Ok(Decision::Refuse { code, .. }) => {
                    prop_assert_eq!(code, RefusalCode::InsufficientFunds);
                    prop_assert!(!item.provider_initiated);
                }
                other => prop_assert!(false, "unexpected {:?}", other),
            }
        }
        for (w, id) in WALLETS.iter().enumerate() {
            let head = ledger.head(id);
            prop_assert_eq!(head.balance, a(model[w].posted));
            prop_assert_eq!(head.sequence, model[w].sequence);
            prop_assert_eq!(ledger.wallets[*id].pending_out, a(model[w].pending_out));
        }
    }
}

/// `id` with one velocity limit and no activity yet, as `load` hands a limited wallet over.
fn limited(mut ledger: LockedLedger, id: &str, direction: Direction, bound: Bound) -> LockedLedger {
    let limit = VelocityLimit {
        id: uuid::Uuid::from_u128(1),
        direction,
        bound,
        window_seconds: 3600,
    };
    let activity = Activity::new(vec![limit], Vec::new(), Vec::new());
    ledger.activities.insert(id.to_owned(), activity);
    ledger
}

#[test]
fn velocity_limits_hold_across_the_items_of_one_pass() {
    let now = Utc::now();
    let later = now + TimeDelta::hours(1);
    let funded = ledger(vec![wallet("from", 0), wallet("to", 0)]).fund("from", 1_000, 1);
    let mut ledger = limited(funded, "from", Direction::Debit, Bound::Amount(a(100)));
    posted(ledger.decide(&transfer("from", "to", 60), now));
    // A hold counts as it is placed.
    assert!(matches!(
        ledger.decide(&hold("from", "to", 30, later), now),
        Ok(Decision::Hold { .. })
    ));
    let code = refusal(ledger.decide(&transfer("from", "to", 11), now));
    assert_eq!(code, RefusalCode::VelocityLimitExceeded);
    posted(ledger.decide(&transfer("from", "to", 10), now));
    // Credits to the limited wallet and a provider's refund are not held to a debit limit.
    posted(ledger.decide(&transfer("to", "from", 5), now));
    posted(ledger.decide(&refund("from", "to", 50), now));
}

#[test]
fn funds_are_refused_before_velocity_and_refusals_use_no_room() {
    let now = Utc::now();
    let funded = ledger(vec![wallet("from", 0), wallet("to", 0)]).fund("from", 10, 1);
    let mut ledger = limited(funded, "from", Direction::Debit, Bound::Count(1));
    let code = refusal(ledger.decide(&transfer("from", "to", 11), now));
    assert_eq!(code, RefusalCode::InsufficientFunds);
    posted(ledger.decide(&transfer("from", "to", 1), now));
    let code = refusal(ledger.decide(&transfer("from", "to", 1), now));
    assert_eq!(code, RefusalCode::VelocityLimitExceeded);
}

/// `id` watched by one monitor, as `load` hands a monitored wallet over.
fn monitored(mut ledger: LockedLedger, id: &str, condition: Condition) -> LockedLedger {
    let watch = Watch {
        currency: "SAR".into(),
        monitors: vec![Monitor {
            id: uuid::Uuid::from_u128(7),
            condition,
        }],
    };
    ledger.watches.wallets.insert(id.to_owned(), watch);
    ledger
}

#[test]
fn monitors_fire_on_the_item_that_crosses_within_one_pass() {
    let now = Utc::now();
    let later = now + TimeDelta::hours(1);
    let funded = ledger(vec![wallet("from", 0), wallet("to", 0)]).fund("from", 1_000, 1);
    let below = |field, value| Condition {
        field,
        operator: Operator::Lt,
        value,
    };
    let mut ledger = monitored(funded, "from", below(Field::Available, 950));
    let first = transfer("from", "to", 30);
    posted(ledger.decide(&first, now));
    assert!(ledger.firings.is_empty());
    let crossing = transfer("from", "to", 30);
    posted(ledger.decide(&crossing, now));
    posted(ledger.decide(&transfer("from", "to", 30), now));
    assert_eq!(ledger.firings.len(), 1);
    let f = &ledger.firings[0];
    assert_eq!(
        (f.transaction_id, f.before.posted, f.after.posted),
        (crossing.id, 970, 940)
    );
    // A refusal changes nothing and fires nothing; a credit back re-arms it, silently.
    refusal(ledger.decide(&transfer("from", "to", 5_000), now));
    posted(ledger.decide(&transfer("to", "from", 90), now));
    assert_eq!(ledger.firings.len(), 1);
    // A hold moves `available`: it fires again, with pending_out in its balances.
    let held = hold("from", "to", 100, later);
    assert!(matches!(
        ledger.decide(&held, now),
        Ok(Decision::Hold { .. })
    ));
    assert_eq!(ledger.firings.len(), 2);
    let f = &ledger.firings[1];
    assert_eq!(
        (f.transaction_id, f.after.pending_out, f.after.available()),
        (held.id, 100, 900)
    );
}

/// `wallets` counted in the set `family`, watched by one monitor, which held `posted` when
/// locked, as `load` hands a monitored set over.
fn in_monitored_set(
    mut ledger: LockedLedger,
    wallets: &[&str],
    posted: i64,
    condition: Condition,
) -> LockedLedger {
    let watch = Watch {
        currency: "SAR".into(),
        monitors: vec![Monitor {
            id: uuid::Uuid::from_u128(8),
            condition,
        }],
    };
    let balances = Balances {
        posted,
        ..Balances::default()
    };
    (ledger.watches.sets).insert("family".into(), SetWatch { watch, balances });
    for w in wallets {
        (ledger.watches.sets_of).insert(w.to_string(), vec!["family".into()]);
    }
    ledger
}

#[test]
fn a_set_monitor_fires_on_the_item_that_takes_the_sets_sum_across() {
    let now = Utc::now();
    let wallets = vec![wallet("a", 0), wallet("b", 0), wallet("out", 0)];
    let funded = ledger(wallets).fund("a", 500, 1).fund("b", 500, 1);
    let below = Condition {
        field: Field::Posted,
        operator: Operator::Lt,
        value: 900,
    };
    let mut ledger = in_monitored_set(funded, &["a", "b"], 1_000, below);
    posted(ledger.decide(&transfer("a", "b", 300), now)); // within the set: 1,000
    posted(ledger.decide(&transfer("a", "out", 60), now)); // 940
    let crossing = transfer("b", "out", 60); // 880: crosses
    posted(ledger.decide(&crossing, now));
    posted(ledger.decide(&transfer("b", "out", 10), now)); // stays below
    assert_eq!(ledger.firings.len(), 1);
    let f = &ledger.firings[0];
    assert_eq!(f.owner, Owner::Set("family".into()));
    assert_eq!(
        (f.transaction_id, f.before.posted, f.after.posted),
        (crossing.id, 940, 880)
    );
}

/// On Citus a pass first locks at once when its group names at most `AT_ONCE_MAX_ACCOUNTS`
/// accounts (each counted once) and takes its system accounts shared; one PostgreSQL never
/// does.
#[test]
fn only_a_small_group_on_citus_with_shared_system_locks_is_locked_at_once() {
    use crate::db::Engine;
    use crate::ledger::posting::SystemLocks;
    let max = crate::ledger::posting::load::AT_ONCE_MAX_ACCOUNTS;
    let group: Vec<NewTransaction> = (0..max / 2)
        .map(|i| transfer(&format!("a{i}"), &format!("b{i}"), 1))
        .collect();
    let mut items: Vec<&NewTransaction> = group.iter().collect();
    let tries = |items: &[&NewTransaction], engine, locks| {
        let ids = crate::ledger::posting::load::account_ids(items);
        LockedLedger::tries_at_once(engine, &ids, locks)
    };
    assert!(tries(&items, Engine::Citus, SystemLocks::Shared));
    assert!(!tries(&items, Engine::Plain, SystemLocks::Shared));
    assert!(!tries(&items, Engine::Citus, SystemLocks::Exclusive));
    let again = transfer("a0", "b1", 1);
    items.push(&again);
    assert!(
        tries(&items, Engine::Citus, SystemLocks::Shared),
        "an account named twice counts once"
    );
    let one_more = transfer("a0", "c", 1);
    items.push(&one_more);
    assert!(!tries(&items, Engine::Citus, SystemLocks::Shared));
}
