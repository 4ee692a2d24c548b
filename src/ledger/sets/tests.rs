use super::*;

fn pairs(list: &[(&str, &str)]) -> BTreeSet<Counted> {
    list.iter()
        .map(|(w, s)| (w.to_string(), s.to_string()))
        .collect()
}

#[test]
fn a_member_reference_names_its_kind_before_the_first_colon() {
    assert_eq!(
        Member::parse("account:alice"),
        Some(Member::Account("alice".into()))
    );
    assert_eq!(
        Member::parse("set:team:eu"),
        Some(Member::Set("team:eu".into()))
    );
    assert_eq!(
        Member::parse("account:provider:x").map(|m| m.reference()),
        Some("account:provider:x".into())
    );
    for bad in ["alice", "account:", "wallet:alice", ":alice", ""] {
        assert_eq!(Member::parse(bad), None, "{bad}");
    }
}

#[test]
fn a_change_joins_what_is_new_and_leaves_what_is_gone() {
    let before = pairs(&[("a", "eu"), ("a", "all"), ("b", "eu")]);
    let after = pairs(&[("a", "eu"), ("b", "eu"), ("b", "all"), ("c", "all")]);
    let change = ClosureChange::between(&before, &after);
    assert_eq!(
        change.joined,
        vec![("b".into(), "all".into()), ("c".into(), "all".into())]
    );
    assert_eq!(change.left, vec![("a".into(), "all".into())]);
    assert_eq!(change.wallets(), vec!["a", "b", "c"]);
    assert!(ClosureChange::between(&before, &before).is_empty());
}

#[test]
fn a_set_under_itself_is_a_cycle() {
    let under_child: BTreeSet<String> = ["eu", "eu-east"].map(String::from).into();
    assert!(makes_cycle("eu", &under_child));
    assert!(makes_cycle("eu-east", &under_child));
    assert!(!makes_cycle("all", &under_child));
}

#[test]
fn sums_past_a_single_balance_read_out_of_range() {
    let max = 9_007_199_254_740_991;
    assert!(balances("s", max, 0, 0).is_ok());
    assert!(balances("s", max + 1, 0, 0).is_err());
    assert!(balances("s", 0, max + 1, 0).is_err());
    // posted and pending_out each fit, available (their difference) does not.
    assert!(balances("s", -max, 0, max).is_err());
    let b = balances("s", 100, 5, 30).unwrap();
    assert_eq!(b.available().minor_units(), 70);
}

#[test]
fn a_set_expects_the_sum_of_the_wallets_counted_in_it_once_each() {
    let counted: Vec<Counted> = pairs(&[("a", "eu"), ("b", "eu"), ("a", "all"), ("b", "all")])
        .into_iter()
        .collect();
    let max = 9_007_199_254_740_991_i64;
    let wallets = [
        ("a".to_string(), (max, 5, 0)),
        ("b".to_string(), (max, 0, 7)),
    ]
    .into_iter()
    .collect();
    let totals = expected_totals(&counted, &wallets);
    assert_eq!(totals["eu"], (2 * i128::from(max), 5, 7));
    assert_eq!(totals["all"], totals["eu"]);
    assert!(!totals.contains_key("empty"));
}
