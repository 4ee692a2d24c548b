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
    let firings = watch.change("w", tx, posted(60), posted(40));
    assert_eq!(firings.len(), 1);
    assert_eq!(
        (firings[0].monitor, firings[0].transaction_id),
        (Uuid::from_u128(1), tx)
    );
    assert_eq!(
        (firings[0].before, firings[0].after),
        (posted(60), posted(40))
    );
    assert!(watch.change("w", tx, posted(40), posted(30)).is_empty());
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
