use super::*;
use chrono::TimeZone;

fn amount(minor_units: i64) -> Amount {
    Amount::new(minor_units).unwrap()
}

fn at(seconds: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_800_000_000 + seconds, 0).unwrap()
}

fn limit(n: u128, direction: Direction, bound: Bound, window_seconds: i32) -> VelocityLimit {
    VelocityLimit {
        id: Uuid::from_u128(n),
        direction,
        bound,
        window_seconds,
    }
}

fn activity(limits: Vec<VelocityLimit>) -> Activity {
    Activity::new(limits, Vec::new(), Vec::new())
}

#[test]
fn an_amount_limit_lets_through_exactly_up_to_its_maximum() {
    let mut a = activity(vec![limit(
        1,
        Direction::Debit,
        Bound::Amount(amount(100)),
        3600,
    )]);
    a.record_posted(at(0), amount(-60));
    assert_eq!(a.refusal(amount(-40), at(10)), None, "60 + 40 = 100 fits");
    let refused = a.refusal(amount(-41), at(10)).expect("60 + 41 > 100");
    assert_eq!(refused.remaining, 40);
    assert_eq!(refused.limit.id, Uuid::from_u128(1));
}

#[test]
fn the_window_rolls_legs_at_or_before_its_start_no_longer_count() {
    let mut a = activity(vec![limit(
        1,
        Direction::Debit,
        Bound::Amount(amount(100)),
        60,
    )]);
    a.record_posted(at(0), amount(-100));
    assert!(
        a.refusal(amount(-1), at(59)).is_some(),
        "59 s later it still counts"
    );
    assert_eq!(
        a.refusal(amount(-1), at(60)),
        None,
        "60 s later it left the window"
    );
}

#[test]
fn a_debit_limit_ignores_credits_and_a_credit_limit_debits() {
    let debit = limit(1, Direction::Debit, Bound::Amount(amount(10)), 60);
    let credit = limit(2, Direction::Credit, Bound::Amount(amount(10)), 60);
    let mut a = activity(vec![debit, credit]);
    a.record_posted(at(0), amount(50));
    assert_eq!(
        a.refusal(amount(-10), at(1)),
        None,
        "credits do not use the debit limit"
    );
    assert_eq!(
        a.refusal(amount(1), at(1)).map(|e| e.limit.id),
        Some(Uuid::from_u128(2))
    );
}

#[test]
fn a_gross_limit_counts_both_directions() {
    let mut a = activity(vec![limit(
        1,
        Direction::Both,
        Bound::Amount(amount(10)),
        60,
    )]);
    a.record_posted(at(0), amount(5));
    a.record_posted(at(0), amount(-4));
    assert_eq!(a.refusal(amount(1), at(1)), None);
    assert_eq!(a.refusal(amount(-2), at(1)).map(|e| e.remaining), Some(1));
}

#[test]
fn a_count_limit_counts_movements_whatever_their_size() {
    let mut a = activity(vec![limit(1, Direction::Debit, Bound::Count(2), 60)]);
    a.record_posted(at(0), amount(-1));
    assert_eq!(a.refusal(amount(-9_000_000), at(1)), None);
    a.record_held(amount(-1));
    let refused = a.refusal(amount(-1), at(1)).expect("a third debit");
    assert_eq!(refused.remaining, 0);
}

#[test]
fn open_holds_count_whatever_the_window() {
    let mut a = activity(vec![limit(
        1,
        Direction::Debit,
        Bound::Amount(amount(10)),
        60,
    )]);
    a.record_held(amount(-10));
    assert!(a.refusal(amount(-1), at(100_000)).is_some());
}

#[test]
fn the_first_limit_in_id_order_is_the_one_named() {
    let a = activity(vec![
        limit(9, Direction::Debit, Bound::Count(0), 60),
        limit(3, Direction::Debit, Bound::Amount(amount(1)), 60),
    ]);
    let refused = a.refusal(amount(-5), at(0)).unwrap();
    assert_eq!(refused.limit.id, Uuid::from_u128(3));
    assert_eq!(
        refused.detail("account w1", Currency::parse("SAR").unwrap()),
        "velocity limit 00000000-0000-0000-0000-000000000003 of account w1: at most 0.01 SAR (debit) per 60 s; 0.01 SAR left in the window"
    );
}

#[test]
fn sums_past_the_amount_range_do_not_overflow() {
    let max = amount(9_007_199_254_740_991);
    let mut a = activity(vec![limit(1, Direction::Both, Bound::Amount(max), 60)]);
    for _ in 0..3 {
        a.record_posted(at(0), max);
    }
    assert_eq!(a.refusal(amount(1), at(1)).map(|e| e.remaining), Some(0));
}

#[test]
fn the_longest_window_is_how_far_back_to_read() {
    let limits = [
        limit(1, Direction::Debit, Bound::Count(1), 60),
        limit(2, Direction::Debit, Bound::Count(1), 86_400),
    ];
    assert_eq!(Activity::longest_window(&limits), Some(TimeDelta::days(1)));
    assert_eq!(Activity::longest_window(&[]), None);
}
