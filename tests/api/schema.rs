//! The database enforces the ledger's rules by itself: these tests bypass the application and
//! write plain SQL through the pool, as a buggy release, a hand-written fix or a migration
//! script would. Each refused write is paired with the same write done right, so that a test
//! cannot pass merely because its SQL was wrong.

use super::common;
use sqlx::postgres::PgQueryResult;
use sqlx::{PgExecutor, PgPool};
use uuid::Uuid;

/// 2^53 − 1.
const MAX: i64 = 9_007_199_254_740_991;

/// SQLSTATEs the schema raises.
const INTEGRITY_CONSTRAINT_VIOLATION: &str = "23000";
const CHECK_VIOLATION: &str = "23514";
const UNIQUE_VIOLATION: &str = "23505";

/// One entry row to insert.
#[derive(Clone, Copy)]
struct Row<'a> {
    account: &'a str,
    currency: &'a str,
    amount: i64,
    sequence: Option<i64>,
    balance_after: Option<i64>,
}

/// A wallet entry in SAR continuing a chain.
fn wallet(account: &str, amount: i64, sequence: i64, balance_after: i64) -> Row<'_> {
    Row {
        account,
        currency: "SAR",
        amount,
        sequence: Some(sequence),
        balance_after: Some(balance_after),
    }
}

/// A system-account entry in SAR: no sequence, no running balance.
fn system(account: &str, amount: i64) -> Row<'_> {
    Row {
        account,
        currency: "SAR",
        amount,
        sequence: None,
        balance_after: None,
    }
}

async fn insert_account(
    pool: &PgPool,
    id: &str,
    currency: &str,
    kind: &str,
) -> Result<PgQueryResult, sqlx::Error> {
    sqlx::query(
        "insert into accounts (id, currency, type, creation_request, creation_response, created_at, updated_at)
         values ($1, $2, $3, '{}', '{}', now(), now())",
    )
    .bind(id)
    .bind(currency)
    .bind(kind)
    .execute(pool)
    .await
}

/// A posted SAR transaction row without entries; returns its id.
async fn insert_transaction<'e>(executor: impl PgExecutor<'e>) -> Uuid {
    let id = Uuid::new_v4();
    sqlx::query(
        "insert into transactions (id, kind, status, currency, legs, account_ids, creation_request,
                                   creation_outcome, creation_response, created_at, posted_at, updated_at)
         values ($1, 'transaction', 'posted', 'SAR', '[]', '{}', '{\"kind\": \"transaction\"}', 'created',
                 '{\"status\": \"posted\"}', now(), now(), now())",
    )
    .bind(id)
    .execute(executor)
    .await
    .expect("a well-formed transaction row is accepted");
    id
}

/// All `rows` of `transaction` in one INSERT statement (the unit the journal trigger checks),
/// each wallet entry linked to the stored entry before it, as the write path would.
async fn insert_entries<'e>(
    executor: impl PgExecutor<'e>,
    transaction: Uuid,
    rows: &[Row<'_>],
) -> Result<PgQueryResult, sqlx::Error> {
    let accounts: Vec<&str> = rows.iter().map(|r| r.account).collect();
    let currencies: Vec<&str> = rows.iter().map(|r| r.currency).collect();
    let amounts: Vec<i64> = rows.iter().map(|r| r.amount).collect();
    let sequences: Vec<Option<i64>> = rows.iter().map(|r| r.sequence).collect();
    let balances: Vec<Option<i64>> = rows.iter().map(|r| r.balance_after).collect();
    sqlx::query(
        "insert into entries (transaction_id, account_id, currency, amount, sequence, balance_after,
                              ledger_time, chain_hash)
         select $1, account, currency, amount, sequence, balance_after, now(),
                case when sequence is not null then entry_chain_hash(
                    (select p.chain_hash from entries p
                     where p.account_id = e.account and p.sequence = e.sequence - 1),
                    $1, account, currency, amount, sequence, balance_after, now(), null) end
         from unnest($2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[])
              with ordinality as e(account, currency, amount, sequence, balance_after, n)
         order by n",
    )
    .bind(transaction)
    .bind(&accounts)
    .bind(&currencies)
    .bind(&amounts)
    .bind(&sequences)
    .bind(&balances)
    .execute(executor)
    .await
}

/// A new transaction with `rows`, in one statement.
async fn post<'a>(pool: &PgPool, rows: &[Row<'a>]) -> Result<Uuid, sqlx::Error> {
    let id = insert_transaction(pool).await;
    insert_entries(pool, id, rows).await.map(|_| id)
}

/// Asserts that `result` is a database error with `sqlstate`, and (when given) that it names
/// `constraint` or has a message containing `message`.
#[track_caller]
fn assert_refused<T: std::fmt::Debug>(
    what: &str,
    result: Result<T, sqlx::Error>,
    sqlstate: &str,
    detail: &str,
) {
    let error = match result {
        Ok(ok) => panic!("{what}: accepted ({ok:?}), but the database must refuse it"),
        Err(e) => e,
    };
    let Some(db) = error.as_database_error() else {
        panic!("{what}: not a database error: {error:?}");
    };
    assert_eq!(
        db.code().as_deref(),
        Some(sqlstate),
        "{what}: {}",
        db.message()
    );
    let constraint = db.constraint().unwrap_or("");
    assert!(
        constraint == detail || db.message().contains(detail),
        "{what}: refused by {constraint:?} with {:?}, expected {detail:?}",
        db.message()
    );
}

async fn entry_count(pool: &PgPool) -> i64 {
    sqlx::query_scalar("select count(*) from entries")
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn entries_of(pool: &PgPool, transaction: Uuid) -> i64 {
    sqlx::query_scalar("select count(*) from entries where transaction_id = $1")
        .bind(transaction)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Accounts `w1`, `w2` (SAR wallets), `u1` (USD wallet), `sys`, `sys2` (SAR system accounts),
/// and a first transaction `sys` → `w1` of 10000: w1's chain is at sequence 1, balance 10000.
async fn seeded() -> (common::TestApp, Uuid) {
    let app = common::TestApp::new().await;
    for (id, currency, kind) in [
        ("w1", "SAR", "wallet"),
        ("w2", "SAR", "wallet"),
        ("u1", "USD", "wallet"),
        ("sys", "SAR", "system"),
        ("sys2", "SAR", "system"),
    ] {
        insert_account(&app.pool, id, currency, kind)
            .await
            .expect("a well-formed account is accepted");
    }
    let seed = post(
        &app.pool,
        &[system("sys", -10_000), wallet("w1", 10_000, 1, 10_000)],
    )
    .await
    .expect("a balanced transaction continuing every chain is accepted");
    (app, seed)
}

#[tokio::test]
async fn entries_cannot_be_updated() {
    let (app, seed) = seeded().await;
    for (what, sql) in [
        (
            "amount",
            "update entries set amount = amount * 2 where transaction_id = $1",
        ),
        (
            "balance_after",
            "update entries set balance_after = 1 where transaction_id = $1 and sequence is not null",
        ),
        (
            "account",
            "update entries set account_id = 'w2' where transaction_id = $1 and account_id = 'w1'",
        ),
        (
            "a no-op update",
            "update entries set amount = amount where transaction_id = $1",
        ),
    ] {
        let result = sqlx::query(sql).bind(seed).execute(&app.pool).await;
        assert_refused(
            &format!("UPDATE of {what}"),
            result,
            INTEGRITY_CONSTRAINT_VIOLATION,
            "immutable",
        );
    }
    let amounts: Vec<i64> = sqlx::query_scalar("select amount from entries order by id")
        .fetch_all(&app.pool)
        .await
        .unwrap();
    assert_eq!(amounts, [-10_000, 10_000]);
    app.finish().await;
}

#[tokio::test]
async fn entries_cannot_be_deleted() {
    let (app, seed) = seeded().await;
    let one = sqlx::query("delete from entries where transaction_id = $1 and account_id = 'w1'")
        .bind(seed)
        .execute(&app.pool)
        .await;
    assert_refused(
        "DELETE of one entry",
        one,
        INTEGRITY_CONSTRAINT_VIOLATION,
        "immutable",
    );
    let all = sqlx::query("delete from entries").execute(&app.pool).await;
    assert_refused(
        "DELETE of every entry",
        all,
        INTEGRITY_CONSTRAINT_VIOLATION,
        "immutable",
    );
    // Nor through its transaction or its accounts: neither is ever deleted.
    let parent = sqlx::query("delete from transactions where id = $1")
        .bind(seed)
        .execute(&app.pool)
        .await;
    assert_refused(
        "DELETE of a transaction",
        parent,
        INTEGRITY_CONSTRAINT_VIOLATION,
        "never deleted",
    );
    let account = sqlx::query("delete from accounts where id = 'w1'")
        .execute(&app.pool)
        .await;
    assert_refused(
        "DELETE of an account",
        account,
        INTEGRITY_CONSTRAINT_VIOLATION,
        "never deleted",
    );
    // Not even an account no entry refers to.
    let unused = sqlx::query("delete from accounts where id = 'sys2'")
        .execute(&app.pool)
        .await;
    assert_refused(
        "DELETE of an unused account",
        unused,
        INTEGRITY_CONSTRAINT_VIOLATION,
        "never deleted",
    );
    assert_eq!(entry_count(&app.pool).await, 2);
    let accounts: i64 = sqlx::query_scalar("select count(*) from accounts")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(accounts, 5);
    app.finish().await;
}

#[tokio::test]
async fn an_entry_needs_an_existing_account_and_transaction() {
    let (app, _) = seeded().await;
    let pool = &app.pool;
    let ghost_account = post(pool, &[system("sys", -100), system("nobody", 100)]).await;
    assert_refused(
        "an entry of an account that does not exist",
        ghost_account,
        CHECK_VIOLATION,
        "does not fit its account",
    );
    let ghost_transaction = insert_entries(
        pool,
        Uuid::new_v4(),
        &[system("sys", -100), system("sys2", 100)],
    )
    .await;
    assert_refused(
        "entries of a transaction that does not exist",
        ghost_transaction,
        CHECK_VIOLATION,
        "does not fit its account or transaction",
    );
    assert_eq!(entry_count(pool).await, 2);
    post(pool, &[system("sys", -100), system("sys2", 100)])
        .await
        .expect(
            "the same entries between existing accounts, in an existing transaction, are accepted",
        );
    app.finish().await;
}

#[tokio::test]
async fn entries_cannot_be_truncated() {
    let (app, _) = seeded().await;
    let direct = sqlx::query("truncate entries").execute(&app.pool).await;
    assert_refused(
        "TRUNCATE entries",
        direct,
        INTEGRITY_CONSTRAINT_VIOLATION,
        "immutable",
    );
    let cascaded = sqlx::query("truncate transactions cascade")
        .execute(&app.pool)
        .await;
    assert_refused(
        "TRUNCATE transactions CASCADE",
        cascaded,
        INTEGRITY_CONSTRAINT_VIOLATION,
        "immutable",
    );
    let accounts = sqlx::query("truncate accounts cascade")
        .execute(&app.pool)
        .await;
    assert_refused(
        "TRUNCATE accounts CASCADE",
        accounts,
        INTEGRITY_CONSTRAINT_VIOLATION,
        "immutable",
    );
    assert_eq!(entry_count(&app.pool).await, 2);
    app.finish().await;
}

#[tokio::test]
async fn an_unbalanced_transaction_is_refused() {
    let (app, _) = seeded().await;
    let short = post(
        &app.pool,
        &[wallet("w1", -100, 2, 9_900), wallet("w2", 99, 1, 99)],
    )
    .await;
    assert_refused(
        "entries summing to -1",
        short,
        CHECK_VIOLATION,
        "unbalanced",
    );
    let single = post(&app.pool, &[system("sys", 100)]).await;
    assert_refused("a single entry", single, CHECK_VIOLATION, "unbalanced");
    // Balanced in total but not per currency: -100 SAR against +100 USD.
    let usd = Row {
        currency: "USD",
        ..wallet("u1", 100, 1, 100)
    };
    let cross = post(&app.pool, &[wallet("w1", -100, 2, 9_900), usd]).await;
    assert_refused(
        "SAR debited, USD credited",
        cross,
        CHECK_VIOLATION,
        "unbalanced",
    );
    assert_eq!(
        entry_count(&app.pool).await,
        2,
        "nothing of the refused statements stays"
    );

    let balanced = post(
        &app.pool,
        &[wallet("w1", -100, 2, 9_900), wallet("w2", 100, 1, 100)],
    )
    .await;
    let balanced = balanced.expect("the same transfer, balanced, is accepted");
    assert_eq!(entries_of(&app.pool, balanced).await, 2);
    app.finish().await;
}

#[tokio::test]
async fn entries_cannot_be_appended_to_an_existing_transaction() {
    let (app, seed) = seeded().await;
    // Balanced on their own, but the seed transaction already has its entries.
    let later = insert_entries(
        &app.pool,
        seed,
        &[wallet("w1", -50, 2, 9_950), wallet("w2", 50, 1, 50)],
    )
    .await;
    assert_refused(
        "appending to a posted transaction",
        later,
        CHECK_VIOLATION,
        "one statement",
    );
    let system_only =
        insert_entries(&app.pool, seed, &[system("sys", -50), system("sys2", 50)]).await;
    assert_refused(
        "appending system entries",
        system_only,
        CHECK_VIOLATION,
        "one statement",
    );

    // Even inside the database transaction that wrote the first statement.
    let mut tx = app.pool.begin().await.unwrap();
    let id = insert_transaction(&mut *tx).await;
    insert_entries(&mut *tx, id, &[system("sys", -10), wallet("w2", 10, 1, 10)])
        .await
        .expect("the first statement of a new transaction is accepted");
    let second = insert_entries(&mut *tx, id, &[system("sys", -5), system("sys2", 5)]).await;
    assert_refused(
        "a second statement in the same database transaction",
        second,
        CHECK_VIOLATION,
        "one statement",
    );
    drop(tx);

    assert_eq!(entries_of(&app.pool, seed).await, 2);
    assert_eq!(entry_count(&app.pool).await, 2);
    app.finish().await;
}

#[tokio::test]
async fn a_wallet_entry_must_continue_its_chain() {
    let (app, _) = seeded().await;
    // w1 is at sequence 1, balance 10000; w2 has no entry yet.
    let cases = [
        ("wrong balance_after", wallet("w1", -50, 2, 9_999)),
        (
            "balance_after ignoring the amount",
            wallet("w1", -50, 2, 10_000),
        ),
        ("skipped sequence", wallet("w1", -50, 3, 9_950)),
        (
            "first entry of a wallet at sequence 2",
            wallet("w2", -50, 2, -50),
        ),
        (
            "first entry of a wallet with a wrong balance",
            wallet("w2", -50, 1, 50),
        ),
        ("a wallet entry without sequence", system("w1", -50)),
    ];
    for (what, row) in cases {
        let result = post(&app.pool, &[row, system("sys", 50)]).await;
        let detail = if row.sequence.is_none() {
            "does not fit its account"
        } else {
            "broken wallet chain"
        };
        assert_refused(what, result, CHECK_VIOLATION, detail);
    }
    let half = Row {
        sequence: Some(2),
        balance_after: None,
        ..wallet("w1", -50, 2, 0)
    };
    let result = post(&app.pool, &[half, system("sys", 50)]).await;
    assert_refused(
        "a sequence without balance_after",
        result,
        CHECK_VIOLATION,
        "entries_check",
    );
    let again = post(&app.pool, &[wallet("w1", -50, 1, 9_950), system("sys", 50)]).await;
    assert_refused(
        "a sequence already used",
        again,
        UNIQUE_VIOLATION,
        "entries_account_id_sequence_key",
    );
    // Two entries of one wallet in one transaction cannot both continue the chain.
    let twice = post(
        &app.pool,
        &[
            wallet("w1", -50, 2, 9_950),
            wallet("w1", -50, 2, 9_950),
            system("sys", 100),
        ],
    )
    .await;
    assert!(
        twice.is_err(),
        "two entries claiming one sequence must be refused"
    );
    assert_eq!(entry_count(&app.pool).await, 2);

    let next = post(
        &app.pool,
        &[wallet("w1", -50, 2, 9_950), wallet("w2", 50, 1, 50)],
    )
    .await;
    next.expect("entries that continue both chains are accepted");
    let after = post(
        &app.pool,
        &[wallet("w1", -9_950, 3, 0), system("sys", 9_950)],
    )
    .await;
    after.expect("the chain goes on from the new head");
    app.finish().await;
}

#[tokio::test]
async fn a_system_account_entry_has_no_sequence() {
    let (app, _) = seeded().await;
    let chained = Row {
        sequence: Some(1),
        balance_after: Some(-10_100),
        ..system("sys", -100)
    };
    let result = post(&app.pool, &[chained, wallet("w2", 100, 1, 100)]).await;
    assert_refused(
        "a system entry with a sequence",
        result,
        CHECK_VIOLATION,
        "does not fit its account",
    );
    assert_eq!(entry_count(&app.pool).await, 2);
    post(&app.pool, &[system("sys", -100), wallet("w2", 100, 1, 100)])
        .await
        .expect("the same entry without a sequence is accepted");
    app.finish().await;
}

#[tokio::test]
async fn an_entry_is_in_its_accounts_currency() {
    let (app, _) = seeded().await;
    // Balanced in SAR, but u1 holds USD.
    let result = post(
        &app.pool,
        &[wallet("w1", -100, 2, 9_900), wallet("u1", 100, 1, 100)],
    )
    .await;
    assert_refused(
        "a SAR entry on a USD wallet",
        result,
        CHECK_VIOLATION,
        "does not fit its account",
    );
    // Balanced in USD, but sys and sys2 hold SAR.
    let usd = |account, amount| Row {
        currency: "USD",
        ..system(account, amount)
    };
    let result = post(&app.pool, &[usd("sys", -100), usd("sys2", 100)]).await;
    assert_refused(
        "USD entries on SAR system accounts",
        result,
        CHECK_VIOLATION,
        "does not fit its account",
    );
    assert_eq!(entry_count(&app.pool).await, 2);
    post(&app.pool, &[system("sys", -100), system("sys2", 100)])
        .await
        .expect("SAR entries on SAR accounts are accepted");
    app.finish().await;
}

#[tokio::test]
async fn check_constraints_hold() {
    let (app, _) = seeded().await;
    let zero = post(&app.pool, &[system("sys", 0), system("sys2", 0)]).await;
    assert_refused(
        "an entry of zero",
        zero,
        CHECK_VIOLATION,
        "entries_amount_check",
    );
    let huge = post(
        &app.pool,
        &[system("sys", -(MAX + 1)), system("sys2", MAX + 1)],
    )
    .await;
    assert_refused(
        "an entry of 2^53",
        huge,
        CHECK_VIOLATION,
        "entries_amount_check",
    );
    let overflow = post(&app.pool, &[wallet("w2", 1, 1, MAX + 1), system("sys", -1)]).await;
    assert_refused(
        "a balance_after of 2^53",
        overflow,
        CHECK_VIOLATION,
        "entries_balance_after_check",
    );
    assert_eq!(entry_count(&app.pool).await, 2);
    post(&app.pool, &[system("sys", -MAX), system("sys2", MAX)])
        .await
        .expect("2^53 - 1 is accepted");

    let bad_ids = [
        ".".to_owned(),
        "-a".to_owned(),
        "a b".to_owned(),
        "a/b".to_owned(),
        "é".to_owned(),
        String::new(),
        "a".repeat(129),
    ];
    for id in &bad_ids {
        let result = insert_account(&app.pool, id, "SAR", "wallet").await;
        assert_refused(
            &format!("account id {id:?}"),
            result,
            CHECK_VIOLATION,
            "accounts_id_check",
        );
    }
    insert_account(&app.pool, &"a".repeat(128), "SAR", "wallet")
        .await
        .expect("an id of 128 characters is accepted");
    insert_account(&app.pool, "clearing:x@y.z_1-2", "SAR", "system")
        .await
        .expect("every allowed punctuation is accepted");
    for currency in ["sar", "SA", "SARX", "S4R"] {
        let result = insert_account(&app.pool, "x1", currency, "wallet").await;
        assert_refused(
            &format!("account currency {currency:?}"),
            result,
            CHECK_VIOLATION,
            "accounts_currency_check",
        );
    }
    let kind = insert_account(&app.pool, "x1", "SAR", "user").await;
    assert_refused(
        "account type user",
        kind,
        CHECK_VIOLATION,
        "accounts_type_check",
    );
    let overdraft = sqlx::query(
        "insert into accounts (id, currency, type, overdraft_limit, creation_request, creation_response, created_at, updated_at)
         values ('x1', 'SAR', 'system', 100, '{}', '{}', now(), now())",
    )
    .execute(&app.pool)
    .await;
    assert_refused(
        "an overdraft limit on a system account",
        overdraft,
        CHECK_VIOLATION,
        "accounts_check",
    );
    let negative = sqlx::query("update accounts set overdraft_limit = -1 where id = 'w1'")
        .execute(&app.pool)
        .await;
    assert_refused(
        "a negative overdraft limit",
        negative,
        CHECK_VIOLATION,
        "accounts_overdraft_limit_check",
    );
    insert_account(&app.pool, "x1", "SAR", "wallet")
        .await
        .expect("a valid account is accepted");
    app.finish().await;
}

#[tokio::test]
async fn a_transactions_creation_record_is_immutable() {
    let (app, seed) = seeded().await;
    for (what, sql) in [
        (
            "creation_request",
            "update transactions set creation_request = '{\"kind\": \"transfer\"}' where id = $1",
        ),
        (
            "creation_response",
            "update transactions set creation_response = '{\"status\": \"rejected\"}' where id = $1",
        ),
        (
            "creation_outcome",
            "update transactions set creation_outcome = 'refused', status = 'rejected', refusal_code = 'insufficient_funds', posted_at = null where id = $1",
        ),
        (
            // A refusal's answer is rendered from its code and detail: part of the record.
            "refusal_detail",
            "update transactions set refusal_detail = 'x' where id = $1",
        ),
        (
            "id",
            "update transactions set id = gen_random_uuid() where id = $1",
        ),
        (
            "metadata",
            "update transactions set metadata = '{\"a\": 1}' where id = $1",
        ),
    ] {
        let result = sqlx::query(sql).bind(seed).execute(&app.pool).await;
        assert_refused(
            &format!("UPDATE of {what}"),
            result,
            INTEGRITY_CONSTRAINT_VIOLATION,
            "immutable",
        );
    }
    let stored: (String, String) = sqlx::query_as(
        "select creation_request::text, creation_response from transactions where id = $1",
    )
    .bind(seed)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(
        stored,
        (
            r#"{"kind": "transaction"}"#.to_owned(),
            r#"{"status": "posted"}"#.to_owned()
        )
    );
    // Other columns may change (status transitions will): the trigger guards only the record
    // (and the metadata, which changes only by an erasure: tests/api/erasure.rs).
    sqlx::query("update transactions set updated_at = now() where id = $1")
        .bind(seed)
        .execute(&app.pool)
        .await
        .expect("columns outside the creation record can be updated");

    // The same holds for accounts: identity and creation record.
    for (what, sql) in [
        (
            "currency",
            "update accounts set currency = 'USD' where id = 'w1'",
        ),
        (
            "type",
            "update accounts set type = 'system' where id = 'w2'",
        ),
        (
            "creation_request",
            "update accounts set creation_request = '{\"a\": 1}' where id = 'w1'",
        ),
        (
            "creation_response",
            "update accounts set creation_response = 'x' where id = 'w1'",
        ),
    ] {
        let result = sqlx::query(sql).execute(&app.pool).await;
        assert_refused(
            &format!("UPDATE of an account's {what}"),
            result,
            INTEGRITY_CONSTRAINT_VIOLATION,
            "immutable",
        );
    }
    sqlx::query("update accounts set status = 'frozen' where id = 'w1'")
        .execute(&app.pool)
        .await
        .expect("an account's status can change");
    app.finish().await;
}

#[tokio::test]
async fn entries_fit_their_transaction_and_ledger_time_never_goes_back() {
    let (app, _) = seeded().await;
    let pool = &app.pool;
    let balanced = [system("sys", -5), wallet("w1", 5, 2, 10_005)];

    // Only a posted transaction has entries: not a rejected one.
    let rejected = Uuid::new_v4();
    sqlx::query(
        "insert into transactions (id, kind, status, currency, legs, account_ids, refusal_code,
                                   creation_request, creation_outcome, created_at, updated_at)
         values ($1, 'transfer', 'rejected', 'SAR', '[]', '{}', 'insufficient_funds', '{}', 'refused', now(), now())",
    )
    .bind(rejected)
    .execute(pool)
    .await
    .unwrap();
    assert_refused(
        "entries of a rejected transaction",
        insert_entries(pool, rejected, &balanced).await,
        CHECK_VIOLATION,
        "status",
    );

    // Entries are in their transaction's currency (the transaction row says SAR).
    let usd = [
        Row {
            account: "u1",
            currency: "USD",
            amount: 5,
            sequence: Some(1),
            balance_after: Some(5),
        },
        Row {
            account: "u1",
            currency: "USD",
            amount: -5,
            sequence: Some(2),
            balance_after: Some(0),
        },
    ];
    let sar_transaction = insert_transaction(pool).await;
    assert_refused(
        "USD entries in a SAR transaction",
        insert_entries(pool, sar_transaction, &usd).await,
        CHECK_VIOLATION,
        "currency",
    );

    // Ledger time never decreases along a wallet's chain.
    let earlier = insert_transaction(pool).await;
    let result = sqlx::query(
        "insert into entries (transaction_id, account_id, currency, amount, sequence, balance_after, ledger_time)
         values ($1, 'sys', 'SAR', -5, null, null, now() - interval '1 hour'),
                ($1, 'w1', 'SAR', 5, 2, 10005, now() - interval '1 hour')",
    )
    .bind(earlier)
    .execute(pool)
    .await;
    assert_refused(
        "a wallet entry earlier than the one before it",
        result,
        CHECK_VIOLATION,
        "broken wallet chain",
    );

    // The same entries, on time and in a posted SAR transaction, are accepted.
    insert_entries(pool, earlier, &balanced)
        .await
        .expect("a fitting continuation is accepted");
    app.finish().await;
}

/// `docs/schema.sql` is the whole schema the migrations make, so it can be read without
/// replaying them. On a difference the new dump is written to `target/schema.sql.new`.
#[tokio::test]
async fn docs_schema_sql_is_what_the_migrations_make() {
    let app = common::TestApp::new().await;
    let output = std::process::Command::new("pg_dump")
        .args(["--schema-only", "--no-owner", "--no-privileges", "--dbname"])
        .arg(&app.database_url)
        .output()
        .expect("pg_dump runs");
    assert!(
        output.status.success(),
        "pg_dump: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let dumped = without_version_lines(&String::from_utf8_lossy(&output.stdout));
    let committed = include_str!("../../docs/schema.sql");
    let header_end = committed
        .find("--\n-- PostgreSQL database dump")
        .unwrap_or(0);
    let (header, committed_dump) = committed.split_at(header_end);
    if committed_dump != dumped {
        let new = concat!(env!("CARGO_MANIFEST_DIR"), "/target/schema.sql.new");
        std::fs::write(new, format!("{header}{dumped}")).unwrap();
        panic!("docs/schema.sql is not what the migrations make: cp {new} docs/schema.sql");
    }
    app.finish().await;
}

/// pg_dump's output without what changes from one run or version to the next: the lines
/// naming its version, and the random key of its `\restrict` guard.
fn without_version_lines(dump: &str) -> String {
    dump.split('\n')
        .filter(|line| {
            ![
                "\\restrict",
                "\\unrestrict",
                "-- Dumped from",
                "-- Dumped by",
            ]
            .iter()
            .any(|prefix| line.starts_with(prefix))
        })
        .collect::<Vec<_>>()
        .join("\n")
}
