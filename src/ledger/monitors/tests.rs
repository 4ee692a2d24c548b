use super::*;
use proptest::prelude::*;

fn posted(posted: i64) -> Balances {
    Balances {
        posted,
        ..Balances::default()
    }
}

fn below(value: i64) -> Condition {
    Condition {
        field: Field::Posted,
        operator: Operator::Lt,
        value,
    }
}

#[test]
fn each_operator_compares_as_named() {
    let at = |operator| Condition {
        field: Field::Posted,
        operator,
        value: 10,
    };
    let b = posted(10);
    assert!(!at(Operator::Lt).holds(&b));
    assert!(at(Operator::Lte).holds(&b));
    assert!(!at(Operator::Gt).holds(&b));
    assert!(at(Operator::Gte).holds(&b));
}

#[test]
fn available_is_posted_less_pending_out() {
    let b = Balances {
        posted: 100,
        pending_in: 50,
        pending_out: 30,
    };
    assert_eq!(b.available(), 70);
    assert_eq!(b.get(Field::Available), 70);
    assert_eq!(b.get(Field::PendingOut), 30);
    let c = Condition {
        field: Field::Available,
        operator: Operator::Lt,
        value: 80,
    };
    assert!(c.holds(&b));
    assert!(!c.holds(&posted(100)));
}

#[test]
fn fires_once_on_the_crossing_and_again_after_rearming() {
    let states: Vec<Balances> = [100, 60, 40, 30, 60, 45, 50].map(posted).to_vec();
    // 60 → 40 crosses below 50; 40 → 30 stays below; 30 → 60 re-arms; 60 → 45 fires again.
    assert_eq!(below(50).crossings(&states), vec![1, 4]);
}

#[test]
fn a_condition_true_from_the_start_does_not_fire_until_rearmed() {
    let states: Vec<Balances> = [10, 5, 60, 20].map(posted).to_vec();
    assert_eq!(below(50).crossings(&states), vec![2]);
}

#[test]
fn a_watch_names_the_change_and_its_balances() {
    let watch = Watch {
        currency: "SAR".into(),
        monitors: vec![
            Monitor {
                id: Uuid::from_u128(1),
                condition: below(50),
            },
            Monitor {
                id: Uuid::from_u128(2),
                condition: below(10),
            },
        ],
    };
    let tx = Uuid::from_u128(9);
    let w = Owner::Account("w".to_owned());
    let firings = watch.change(&w, tx, posted(60), posted(40));
    assert_eq!(firings.len(), 1);
    assert_eq!(
        (firings[0].monitor, firings[0].transaction_id),
        (Uuid::from_u128(1), tx)
    );
    assert_eq!(
        (firings[0].before, firings[0].after),
        (posted(60), posted(40))
    );
    assert!(watch.change(&w, tx, posted(40), posted(30)).is_empty());
}

proptest! {
    /// Firings alternate with re-arms: between two firings the condition was false at some
    /// state, and the number of firings is the number of false-to-true steps.
    #[test]
    fn crossings_are_exactly_the_false_to_true_steps(
        values in proptest::collection::vec(-100i64..100, 1..40),
        value in -100i64..100,
    ) {
        let c = below(value);
        let states: Vec<Balances> = values.iter().map(|v| posted(*v)).collect();
        let fired = c.crossings(&states);
        for &i in &fired {
            prop_assert!(!c.holds(&states[i]) && c.holds(&states[i + 1]));
        }
        for pair in fired.windows(2) {
            prop_assert!((pair[0] + 1..=pair[1]).any(|i| !c.holds(&states[i])));
        }
        let steps = states.windows(2).filter(|w| !c.holds(&w[0]) && c.holds(&w[1])).count();
        prop_assert_eq!(fired.len(), steps);
    }
}

/// A set of wallets `a` and `b` holding 100 in all, watched for `posted < 50`.
fn family() -> Watches {
    let watch = Watch {
        currency: "USD".to_owned(),
        monitors: vec![Monitor {
            id: Uuid::nil(),
            condition: below(50),
        }],
    };
    Watches {
        wallets: HashMap::new(),
        sets: BTreeMap::from([(
            "family".to_owned(),
            SetWatch {
                watch,
                balances: posted(100),
            },
        )]),
        sets_of: HashMap::from([
            ("a".to_owned(), vec!["family".to_owned()]),
            ("b".to_owned(), vec!["family".to_owned()]),
        ]),
    }
}

fn change(wallet: &str, from: i64, to: i64) -> WalletChange {
    WalletChange {
        wallet: wallet.to_owned(),
        before: posted(from),
        after: posted(to),
    }
}

#[test]
fn a_transfer_between_a_sets_wallets_leaves_its_balances_and_fires_nothing() {
    let mut watches = family();
    let fired = watches.change(Uuid::nil(), &[change("a", 60, 0), change("b", 40, 100)]);
    assert!(fired.is_empty());
    assert_eq!(watches.sets["family"].balances, posted(100));
}

#[test]
fn a_set_fires_once_on_the_debit_that_takes_its_sum_across_then_rearms() {
    let mut watches = family();
    let (first, second, third) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
    assert!(watches.change(first, &[change("a", 60, 30)]).is_empty()); // 100 -> 70
    let fired = watches.change(second, &[change("b", 40, 10)]); // 70 -> 40: crosses
    assert_eq!(fired.len(), 1);
    assert_eq!(fired[0].owner, Owner::Set("family".to_owned()));
    assert_eq!(fired[0].transaction_id, second);
    assert_eq!((fired[0].before, fired[0].after), (posted(70), posted(40)));
    assert!(watches.change(third, &[change("a", 30, 20)]).is_empty()); // stays below
    assert!(watches.change(third, &[change("a", 20, 80)]).is_empty()); // 90: re-armed
    assert_eq!(watches.change(third, &[change("a", 80, 20)]).len(), 1); // 90 -> 30 crosses
}

#[test]
fn a_transaction_moving_two_wallets_of_a_set_is_one_change_of_it() {
    let mut watches = family();
    // 100 -> 45 only after both legs: one firing, with the balances around the whole change.
    let fired = watches.change(Uuid::nil(), &[change("a", 60, 30), change("b", 40, 15)]);
    assert_eq!(fired.len(), 1);
    assert_eq!((fired[0].before, fired[0].after), (posted(100), posted(45)));
}

#[test]
fn a_wallet_and_its_set_are_evaluated_each_on_its_own_balances() {
    let mut watches = family();
    let own = Monitor {
        id: Uuid::from_u128(9),
        condition: below(35),
    };
    watches.wallets.insert(
        "a".to_owned(),
        Watch {
            currency: "USD".to_owned(),
            monitors: vec![own],
        },
    );
    let fired = watches.change(Uuid::nil(), &[change("a", 60, 30)]);
    // a: 60 -> 30 crosses its own line; the set: 100 -> 70 does not.
    assert_eq!(fired.len(), 1);
    assert_eq!(fired[0].owner, Owner::Account("a".to_owned()));
}
