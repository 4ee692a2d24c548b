//! `decide` and `entries` without a database: the hold is built by hand, as `load` would
//! decode it.

use super::*;
use crate::ledger::holds::load::StoredResolution;
use crate::ledger::money::{Currency, MAX_AMOUNT};
use crate::ledger::posting::{ChainHead, WalletState};
use chrono::TimeDelta;
use proptest::prelude::*;
use std::collections::HashMap;

/// An amount of a test's literal, in range.
fn a(minor_units: i64) -> Amount {
    Amount::new(minor_units).expect("an amount in range")
}

fn leg(account: &str, amount: i64) -> HeldLeg {
    HeldLeg {
        account: account.to_owned(),
        amount: a(amount),
        currency: None,
    }
}

/// A pending, unexpired hold of these legs, in EUR.
fn pending(legs: Vec<HeldLeg>) -> LoadedHold {
    let held = legs
        .iter()
        .filter(|l| !l.amount.is_negative())
        .fold(Amount::ZERO, |sum, l| sum.saturating_add(l.amount));
    LoadedHold {
        status: TransactionStatus::Pending,
        past_expiry: false,
        currency: Currency::parse("EUR").expect("EUR"),
        legs,
        held,
        resolution: None,
    }
}

/// `from` reserves `amount` for `to`.
fn two_leg(amount: i64) -> LoadedHold {
    pending(vec![leg("from", -amount), leg("to", amount)])
}

fn three_leg() -> LoadedHold {
    pending(vec![leg("from", -100), leg("to", 60), leg("fee", 40)])
}

/// The hold once `decision` was applied, as `apply` would leave its row.
fn applied(mut hold: LoadedHold, decision: &Decision) -> LoadedHold {
    let (status, resolution) = match decision {
        Decision::Expire => (TransactionStatus::Expired, None),
        Decision::Void { request } => {
            let stored = StoredResolution {
                request: request.clone(),
                body: "voided".to_owned(),
            };
            (TransactionStatus::Voided, Some(stored))
        }
        Decision::Capture(capture) => {
            let stored = StoredResolution {
                request: capture.request.clone(),
                body: format!("posted {:?}", capture.captured),
            };
            (TransactionStatus::Posted, Some(stored))
        }
        _ => return hold,
    };
    hold.status = status;
    hold.resolution = resolution;
    hold
}

fn invalid_code(decision: Decision) -> String {
    match decision {
        Decision::Invalid(error) => error.code.clone(),
        other => panic!("expected a field error, got {other:?}"),
    }
}

fn captured(decision: Decision) -> Capture {
    match decision {
        Decision::Capture(capture) => capture,
        other => panic!("expected a capture, got {other:?}"),
    }
}

#[test]
fn a_void_of_a_pending_hold_releases_it() {
    let decision = decide(&two_leg(100), Action::Void, None);
    let request = json!({"action": "void"});
    assert_eq!(decision, Decision::Void { request });
}

#[test]
fn a_whole_capture_of_a_two_leg_hold_records_its_amount() {
    let hold = two_leg(100);
    let capture = captured(decide(&hold, Action::Post, None));
    assert_eq!(capture.request, json!({"action": "post", "amount": 100}));
    assert_eq!(capture.captured, Some(a(100)));
    assert_eq!(capture.legs, hold.legs);
    // `{}` and `{"amount": held}` are the same request.
    assert_eq!(captured(decide(&hold, Action::Post, Some(a(100)))), capture);
}

#[test]
fn a_partial_capture_keeps_each_legs_direction() {
    let capture = captured(decide(&two_leg(100), Action::Post, Some(a(30))));
    assert_eq!(capture.request, json!({"action": "post", "amount": 30}));
    assert_eq!(capture.captured, Some(a(30)));
    assert_eq!(capture.legs, [leg("from", -30), leg("to", 30)]);
}

#[test]
fn a_capture_beyond_the_held_amount_is_out_of_range() {
    let hold = two_leg(100);
    captured(decide(&hold, Action::Post, Some(a(100))));
    match decide(&hold, Action::Post, Some(a(101))) {
        Decision::Invalid(error) => {
            assert_eq!(
                (error.code.as_str(), error.message.as_str()),
                ("range", "exceeds the held 1.00")
            );
        }
        other => panic!("expected a field error, got {other:?}"),
    }
}

#[test]
fn a_multi_leg_hold_is_captured_whole_only() {
    let hold = three_leg();
    let code = invalid_code(decide(&hold, Action::Post, Some(a(10))));
    assert_eq!(code, "not_applicable");
    let capture = captured(decide(&hold, Action::Post, None));
    assert_eq!(capture.request, json!({"action": "post", "amount": null}));
    assert_eq!((capture.captured, capture.legs), (None, hold.legs));
}

#[test]
fn a_pending_hold_past_its_expiry_is_expired_before_anything_else() {
    let mut hold = two_leg(100);
    hold.past_expiry = true;
    for (action, amount) in [
        (Action::Void, None),
        (Action::Post, None),
        (Action::Post, Some(a(1_000))),
    ] {
        assert_eq!(decide(&hold, action, amount), Decision::Expire);
    }
}

#[test]
fn the_same_request_replays_and_another_amount_is_a_mismatch() {
    let hold = two_leg(100);
    let posted = applied(hold.clone(), &decide(&hold, Action::Post, Some(a(30))));
    let replay = decide(&posted, Action::Post, Some(a(30)));
    let body = "posted Some(Amount(30))".to_owned();
    assert_eq!(replay, Decision::Replay { body });
    let differing_fields = vec!["/amount".to_owned()];
    let mismatch = Decision::Mismatch { differing_fields };
    assert_eq!(decide(&posted, Action::Post, None), mismatch);
    let current = TransactionStatus::Posted;
    let posted_void = decide(&posted, Action::Void, None);
    assert_eq!(posted_void, Decision::InvalidTransition { current });
}

#[test]
fn an_ended_hold_answers_with_its_status() {
    for current in [
        TransactionStatus::Voided,
        TransactionStatus::Expired,
        TransactionStatus::Rejected,
    ] {
        let mut hold = two_leg(100);
        hold.status = current;
        // Stored expired reads as expired too: `past_expiry` does not matter once ended.
        hold.past_expiry = current == TransactionStatus::Expired;
        let expected = Decision::InvalidTransition { current };
        assert_eq!(decide(&hold, Action::Post, None), expected);
    }
}

/// The hold a capture's entries belong to.
fn terms() -> HoldTerms {
    HoldTerms {
        id: Uuid::nil(),
        currency: Currency::parse("SAR").unwrap(),
    }
}

fn wallet(sequence: i64, balance: i64, at: Option<DateTime<Utc>>) -> WalletState {
    let chain = ChainHead {
        sequence,
        balance: a(balance),
        ledger_time: at,
        ..ChainHead::default()
    };
    WalletState {
        chain,
        ..WalletState::default()
    }
}

#[test]
fn a_capture_continues_its_wallets_chains_at_the_latest_time() {
    let now = Utc::now();
    let ahead = now + TimeDelta::seconds(2);
    let states = HashMap::from([
        ("from".to_owned(), wallet(4, 500, Some(ahead))),
        ("to".to_owned(), wallet(0, 0, None)),
    ]);
    let legs = [leg("from", -30), leg("to", 20), leg("sys", 10)];
    let Entries::Ready {
        entries,
        ledger_time,
    } = entries(LockedWallets::Ready(states), terms(), &legs, now)
    else {
        panic!("expected entries");
    };
    assert_eq!(
        ledger_time, ahead,
        "ledger time never decreases along a chain"
    );
    let chained: Vec<_> = entries
        .iter()
        .map(|e| (e.account.as_str(), e.sequence, e.balance_after))
        .collect();
    let expected = [
        ("from", Some(5), Some(a(470))),
        ("to", Some(1), Some(a(20))),
        ("sys", None, None),
    ];
    assert_eq!(chained, expected);
}

#[test]
fn a_capture_whose_wallets_were_locked_after_its_expiry_is_expired() {
    let legs = [leg("from", -30), leg("to", 30)];
    let outcome = entries(LockedWallets::Expired, terms(), &legs, Utc::now());
    assert!(matches!(outcome, Entries::Expired), "{outcome:?}");
}

#[test]
fn a_capture_past_the_balance_range_is_refused() {
    let states = HashMap::from([("to".to_owned(), wallet(1, MAX_AMOUNT, None))]);
    let legs = [leg("from", -1), leg("to", 1)];
    match entries(LockedWallets::Ready(states), terms(), &legs, Utc::now()) {
        Entries::Invalid(error) => assert_eq!(error.code, "balance_overflow"),
        other => panic!("expected a field error, got {other:?}"),
    }
}

/// One step of a hold's life.
#[derive(Debug, Clone)]
enum Op {
    Post(Option<i64>),
    Void,
    /// Its expiry passes (the clock reaches `expires_at`).
    Pass,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        proptest::option::of(1..=150i64).prop_map(Op::Post),
        Just(Op::Void),
        Just(Op::Pass),
    ]
}

/// What a step should come to, by a model that knows nothing of requests or JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Done,
    Replay,
    Mismatch,
    Invalid,
    Transition(TransactionStatus),
}

/// A hold's life: pending (until its expiry passes), then ended once, by a post (recording
/// the amount asked for, the whole by default on two legs), a void, or its expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Life {
    Pending { past: bool },
    Posted { asked: Option<i64> },
    Voided,
    Expired,
}

/// The model's answer to `op`, and the life after it; `held` is the hold's amount, `two_leg`
/// whether a partial capture applies.
fn model(life: Life, op: &Op, held: i64, two_leg: bool) -> (Option<Answer>, Life) {
    use TransactionStatus as S;
    let asked = |amount: Option<i64>| amount.or(two_leg.then_some(held));
    match (life, op) {
        (Life::Pending { .. }, Op::Pass) => (None, Life::Pending { past: true }),
        (_, Op::Pass) => (None, life),
        (Life::Pending { past: true }, _) => (Some(Answer::Transition(S::Expired)), Life::Expired),
        (Life::Pending { .. }, Op::Void) => (Some(Answer::Done), Life::Voided),
        (Life::Pending { .. }, Op::Post(Some(_))) if !two_leg => (Some(Answer::Invalid), life),
        (Life::Pending { .. }, Op::Post(Some(x))) if *x > held => (Some(Answer::Invalid), life),
        (Life::Pending { .. }, Op::Post(x)) => {
            let asked = asked(*x);
            (Some(Answer::Done), Life::Posted { asked })
        }
        (Life::Posted { asked: before }, Op::Post(x)) if asked(*x) == before => {
            (Some(Answer::Replay), life)
        }
        (Life::Posted { .. }, Op::Post(_)) => (Some(Answer::Mismatch), life),
        (Life::Posted { .. }, Op::Void) => (Some(Answer::Transition(S::Posted)), life),
        (Life::Voided, Op::Void) => (Some(Answer::Replay), life),
        (Life::Voided, Op::Post(_)) => (Some(Answer::Transition(S::Voided)), life),
        (Life::Expired, _) => (Some(Answer::Transition(S::Expired)), life),
    }
}

fn answer(decision: &Decision) -> Answer {
    match decision {
        Decision::Void { .. } | Decision::Capture(_) => Answer::Done,
        Decision::Replay { .. } => Answer::Replay,
        Decision::Mismatch { .. } => Answer::Mismatch,
        Decision::Invalid(_) => Answer::Invalid,
        Decision::Expire => Answer::Transition(TransactionStatus::Expired),
        Decision::InvalidTransition { current } => Answer::Transition(*current),
    }
}

/// What every capture must keep: its legs balance, keep their hold leg's direction and
/// never move more than the hold reserved on that leg.
fn check_capture(hold: &LoadedHold, capture: &Capture) -> Result<(), TestCaseError> {
    let sum = capture
        .legs
        .iter()
        .map(|l| l.amount.minor_units())
        .sum::<i64>();
    prop_assert_eq!(sum, 0);
    for (captured, held) in capture.legs.iter().zip(&hold.legs) {
        prop_assert_eq!(&captured.account, &held.account);
        prop_assert_eq!(captured.amount.is_negative(), held.amount.is_negative());
        prop_assert!(captured.amount.abs() <= held.amount.abs());
    }
    prop_assert!(capture.captured.is_none_or(|c| c <= hold.held));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn decisions_follow_the_model_of_a_holds_life(
        held in 1..=120i64,
        two_leg in any::<bool>(),
        ops in prop::collection::vec(op(), 1..12),
    ) {
        let mut hold = if two_leg {
            self::two_leg(held)
        } else {
            pending(vec![leg("from", -held), leg("to", held - held / 2), leg("fee", held / 2)])
        };
        let mut life = Life::Pending { past: false };
        for op in &ops {
            let (expected, next) = model(life, op, held, two_leg);
            life = next;
            let (action, amount) = match op {
                Op::Pass => {
                    // `load` reads a pending hold past its expiry, or an expired one, as expired.
                    hold.past_expiry |= hold.status == TransactionStatus::Pending;
                    continue;
                }
                Op::Post(x) => (Action::Post, x.map(a)),
                Op::Void => (Action::Void, None),
            };
            let decision = decide(&hold, action, amount);
            prop_assert_eq!(Some(answer(&decision)), expected, "{:?} of {:?}", op, hold);
            if let Decision::Capture(capture) = &decision {
                check_capture(&hold, capture)?;
            }
            hold = applied(hold, &decision);
        }
    }
}

#[test]
fn a_capture_fires_on_its_entry_with_the_whole_hold_released() {
    use crate::ledger::monitors::{Condition, Field, Monitor, Operator, Watch, Watches};
    let now = Utc::now();
    let hold_legs = [leg("from", -60), leg("to", 60)];
    let from = WalletState {
        pending_out: a(60),
        ..wallet(1, 100, None)
    };
    let states = HashMap::from([("from".to_owned(), from)]);
    let watch = |field, operator, value| Watch {
        currency: "EUR".into(),
        monitors: vec![Monitor {
            id: uuid::Uuid::from_u128(1),
            condition: Condition {
                field,
                operator,
                value,
            },
        }],
    };
    // A partial capture of 20: posted 100 → 80, pending_out 60 → 0, available 40 → 80.
    let legs = [leg("from", -20), leg("to", 20)];
    let Entries::Ready {
        entries: posted, ..
    } = entries(LockedWallets::Ready(states.clone()), terms(), &legs, now)
    else {
        panic!("expected entries");
    };
    let id = uuid::Uuid::from_u128(9);
    let of_from = |watch| Watches {
        wallets: HashMap::from([("from".to_owned(), watch)]),
        ..Watches::default()
    };
    let mut watches = of_from(watch(Field::Posted, Operator::Lt, 90));
    let fired = capture_firings(id, &hold_legs, &states, &posted, &mut watches);
    assert_eq!(fired.len(), 1);
    assert_eq!((fired[0].before.posted, fired[0].after.posted), (100, 80));
    assert_eq!(
        (fired[0].after.pending_out, fired[0].after.available()),
        (0, 80)
    );
    // `available` rose from 40 to 80: a monitor of it below 50 re-arms, firing nothing.
    let mut watches = of_from(watch(Field::Available, Operator::Lt, 50));
    assert!(capture_firings(id, &hold_legs, &states, &posted, &mut watches).is_empty());
    // Released whole, a void gives the reservation back to both sides.
    let b = released(
        crate::ledger::monitors::Balances {
            posted: 100,
            pending_in: 0,
            pending_out: 60,
        },
        &hold_legs,
        "from",
    );
    assert_eq!((b.pending_out, b.available()), (0, 100));
}
