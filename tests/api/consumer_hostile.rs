//! The consumer against what an attacker or a careless operator sends it: undecodable bytes,
//! a dead-letter stream or failure hash overwritten with a string, a ledger row edited behind
//! the service's back, a payment the database refuses for good, timings out of range, a batch slower than its deadline while a wallet
//! is locked, incomplete dead-letter ids, and terminal escapes in the printed events. The real binary, the real PostgreSQL and Redis.

use super::common::{Gate, TestApp};
use super::stream_support::{
    GROUP, consume, dead_letters, describe, dlq, event, eventually, forget, free_port, http_get,
    metric, payment, pending, redis_at, run_to_end, shared_redis_url, spawn, stop, text,
    unique_stream, xadd,
};
use redis::AsyncCommands;
use std::collections::BTreeMap;
use std::time::Duration;
use uuid::Uuid;

/// The longest any one process of these tests may run.
const LIMIT: Duration = Duration::from_secs(30);

/// Drains `stream` as `name`, reclaiming what failed after a second and dead-lettering a
/// message at its first failure (a budget of one).
async fn drain_failing_once(app: &TestApp, stream: &str, name: &str) -> std::process::Output {
    let budget = ["--drain", "--claim-idle-ms", "1000", "--max-failures", "1"];
    run_to_end(consume(app, stream, name, &budget), LIMIT).await
}

/// Adds an entry whose fields are raw bytes (names included), as any producer may.
async fn xadd_bytes(
    redis: &mut redis::aio::MultiplexedConnection,
    stream: &str,
    fields: &[(&[u8], &[u8])],
) -> String {
    let mut command = redis::cmd("XADD");
    command.arg(stream).arg("*");
    for (name, value) in fields {
        command.arg(*name).arg(*value);
    }
    command.query_async(redis).await.unwrap()
}

/// The dead letters of `stream` as raw (name, value) pairs.
async fn raw_dead_letters(
    redis: &mut redis::aio::MultiplexedConnection,
    stream: &str,
) -> Vec<Vec<(Vec<u8>, Vec<u8>)>> {
    let entries: Vec<(String, Vec<Vec<u8>>)> = redis::cmd("XRANGE")
        .arg(format!("{stream}.dlq"))
        .arg("-")
        .arg("+")
        .query_async(redis)
        .await
        .unwrap();
    entries
        .into_iter()
        .map(|(_, flat)| {
            flat.chunks(2)
                .map(|pair| (pair[0].clone(), pair[1].clone()))
                .collect()
        })
        .collect()
}

// 4. Bytes that are not UTF-8 -----------------------------------------------------------------

#[tokio::test]
async fn a_field_name_that_is_not_utf8_is_a_dead_letter_and_the_rest_of_the_batch_applies() {
    let app = TestApp::new().await;
    app.create_wallet("w").await;
    let stream = unique_stream("bytes");
    let mut redis = redis_at(&shared_redis_url()).await;
    let bad_id = Uuid::new_v4().to_string();
    let bad = xadd_bytes(
        &mut redis,
        &stream,
        &[
            (b"event_id", bad_id.as_bytes()),
            (b"wallet", b"w"),
            (b"amount", b"1000"),
            (b"\xff", b"x\xfe"),
        ],
    )
    .await;
    for amount in ["100", "200"] {
        xadd(&mut redis, &stream, &payment(Uuid::new_v4(), "w", amount)).await;
    }
    let output = run_to_end(consume(&app, &stream, "c1", &["--drain"]), LIMIT).await;
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    assert_eq!(
        app.posted_balance("w").await,
        300,
        "the valid payments applied"
    );
    assert_eq!(pending(&mut redis, &stream).await, 0);
    // The dead letter keeps the original bytes, the bad field name included.
    let dead = raw_dead_letters(&mut redis, &stream).await;
    assert_eq!(dead.len(), 1, "{dead:?}");
    let field = |name: &[u8]| {
        dead[0]
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
    };
    assert_eq!(field(b"dlq_reason").as_deref(), Some("malformed_event"));
    assert_eq!(field(b"dlq_original_id"), Some(bad));
    assert!(field(b"dlq_detail").unwrap().contains("\\xff"), "{dead:?}");
    assert!(
        dead[0].contains(&(b"\xff".to_vec(), b"x\xfe".to_vec())),
        "the original field, byte for byte: {dead:?}"
    );
    forget(&mut redis, &stream, GROUP).await;
    app.finish().await;
}

// 2. A dead-letter stream or failure hash that is not what it should be -----------------------

/// The broker refuses a settling write: the worker stops, says why, and acknowledges nothing
/// it could not settle; once the key is mended a new consumer settles everything, once.
async fn a_broken_key_stops_the_worker(break_key: impl Fn(&str) -> String, wallet_exists: bool) {
    let app = TestApp::new().await;
    app.create_wallet("w").await;
    let stream = unique_stream("broken");
    let mut redis = redis_at(&shared_redis_url()).await;
    let key = break_key(&stream);
    let _: () = redis.set(&key, "x").await.unwrap();
    let valid = Uuid::new_v4();
    xadd(&mut redis, &stream, &payment(valid, "w", "500")).await;
    // Something that needs the broken key: a malformed event (a dead letter) or an unknown
    // wallet (a failure count).
    let wallet = if wallet_exists { "w" } else { "nobody" };
    let amount = if wallet_exists { "5.00" } else { "100" };
    xadd(
        &mut redis,
        &stream,
        &payment(Uuid::new_v4(), wallet, amount),
    )
    .await;

    let output = run_to_end(consume(&app, &stream, "c1", &["--drain"]), LIMIT).await;
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert!(
        stderr.contains("the broker refused a command; this worker stops")
            && stderr.contains("WRONGTYPE"),
        "{stderr}"
    );
    assert_eq!(
        pending(&mut redis, &stream).await,
        2,
        "nothing was acknowledged"
    );
    assert_eq!(
        app.posted_balance("w").await,
        500,
        "the valid payment was committed once"
    );

    let _: () = redis.del(&key).await.unwrap();
    let output = drain_failing_once(&app, &stream, "c2").await;
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    assert_eq!(pending(&mut redis, &stream).await, 0);
    assert_eq!(
        app.posted_balance("w").await,
        500,
        "redelivered as a duplicate"
    );
    let dead = dead_letters(&mut redis, &stream).await;
    assert_eq!(dead.len(), 1, "the dead letter was written once: {dead:?}");
    forget(&mut redis, &stream, GROUP).await;
    app.finish().await;
}

// 3. A ledger row edited behind the service's back --------------------------------------------

/// A payment whose stored legs were edited by hand: its refund cannot be planned. The refund is
/// dead-lettered `corrupt_row` naming the row, at once, and the events after it apply; the
/// consumer does not take the corruption for a database outage and retry it forever.
#[tokio::test]
async fn a_hand_edited_payment_row_dead_letters_its_refund_and_the_rest_applies() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w2").await;
    let stream = unique_stream("corrupt");
    let mut redis = redis_at(&shared_redis_url()).await;
    let paid = Uuid::new_v4();
    xadd(&mut redis, &stream, &payment(paid, "w1", "5000")).await;
    let output = run_to_end(consume(&app, &stream, "c1", &["--drain"]), LIMIT).await;
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    assert_eq!(app.posted_balance("w1").await, 5_000);

    // An operator "fixes" the row by hand, past the immutability trigger.
    let mut conn = app.pool.acquire().await.unwrap();
    sqlx::query("set session_replication_role = replica")
        .execute(&mut *conn)
        .await
        .unwrap();
    sqlx::query(
        "update transactions set legs = jsonb_set(legs, '{1,account}', '\"\"') where id = $1",
    )
    .bind(paid)
    .execute(&mut *conn)
    .await
    .unwrap();
    sqlx::query("reset session_replication_role")
        .execute(&mut *conn)
        .await
        .unwrap();
    drop(conn);

    let refund = Uuid::new_v4();
    xadd(
        &mut redis,
        &stream,
        &event(&[
            ("event_id", &Uuid::new_v4().to_string()),
            ("type", "payment.refunded"),
            ("payment_id", &paid.to_string()),
            ("refund_id", &refund.to_string()),
            ("wallet", "w1"),
            ("amount", "1000"),
        ]),
    )
    .await;
    xadd(&mut redis, &stream, &payment(Uuid::new_v4(), "w2", "700")).await;
    let metrics_addr = format!("127.0.0.1:{}", free_port());
    let output = run_to_end(
        consume(
            &app,
            &stream,
            "c2",
            &["--drain", "--metrics-addr", &metrics_addr],
        ),
        LIMIT,
    )
    .await;
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    assert!(
        !stderr.contains("database seems unreachable"),
        "a corrupt row is not an outage: {stderr}"
    );
    assert_eq!(
        app.posted_balances(&["w1", "w2"]).await,
        BTreeMap::from([("w1".to_owned(), 5_000), ("w2".to_owned(), 700)]),
        "nothing of the refund on w1, the event after it applied on w2"
    );
    assert_eq!(pending(&mut redis, &stream).await, 0);
    let dead = dead_letters(&mut redis, &stream).await;
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0]["dlq_reason"], "corrupt_row", "{:?}", dead[0]);
    assert!(
        dead[0]["dlq_detail"].contains(&format!("the transactions row {paid} is corrupt")),
        "the detail names the row: {:?}",
        dead[0]["dlq_detail"]
    );
    assert_eq!(dead[0]["refund_id"], refund.to_string());
    forget(&mut redis, &stream, GROUP).await;
    app.finish().await;
}

/// A payment the database refuses for good (a rule of its own the ledger cannot foresee, not a
/// corrupt row): charged to its message's retry budget and dead-lettered with the refusal, while
/// the payment beside it applies; never taken for an outage and retried forever.
#[tokio::test]
async fn a_payment_the_database_refuses_is_dead_lettered_at_its_budget() {
    let app = TestApp::new().await;
    app.create_wallet("w1").await;
    app.create_wallet("w2").await;
    let refused = Uuid::new_v4();
    for statement in [
        "create function refuse() returns trigger language plpgsql as $$
         begin raise exception 'refused row %', new.id; end $$",
        &format!(
            "create trigger refuse before insert on transactions for each row
             when (new.id = '{refused}') execute function refuse()"
        ),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(statement.to_owned()))
            .execute(&app.pool)
            .await
            .unwrap();
    }
    let stream = unique_stream("refused");
    let mut redis = redis_at(&shared_redis_url()).await;
    xadd(&mut redis, &stream, &payment(refused, "w1", "5000")).await;
    xadd(&mut redis, &stream, &payment(Uuid::new_v4(), "w2", "700")).await;

    let output = drain_failing_once(&app, &stream, "c1").await;
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    assert!(
        !stderr.contains("database seems unreachable"),
        "a refusal is not an outage: {stderr}"
    );
    assert_eq!(
        app.posted_balance("w2").await,
        700,
        "the payment beside it applied"
    );
    assert_eq!(
        app.posted_balance("w1").await,
        0,
        "nothing of the refused one"
    );
    assert_eq!(pending(&mut redis, &stream).await, 0);
    let dead = dead_letters(&mut redis, &stream).await;
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0]["event_id"], refused.to_string());
    assert!(
        dead[0]["dlq_detail"].contains(&format!("refused row {refused}")),
        "the detail says why: {:?}",
        dead[0]["dlq_detail"]
    );
    forget(&mut redis, &stream, GROUP).await;
    app.finish().await;
}

#[tokio::test]
async fn a_dead_letter_stream_overwritten_with_a_string_acknowledges_nothing() {
    a_broken_key_stops_the_worker(|stream| format!("{stream}.dlq"), true).await;
}

#[tokio::test]
async fn a_failure_hash_overwritten_with_a_string_acknowledges_nothing() {
    a_broken_key_stops_the_worker(|stream| format!("{stream}.failures.{GROUP}"), false).await;
}

#[tokio::test]
async fn a_stopped_worker_fails_readyz_and_is_counted_until_sigterm() {
    let app = TestApp::new().await;
    app.create_wallet("w").await;
    let stream = unique_stream("stopped");
    let mut redis = redis_at(&shared_redis_url()).await;
    let _: () = redis.set(format!("{stream}.dlq"), "x").await.unwrap();
    xadd(&mut redis, &stream, &payment(Uuid::new_v4(), "w", "1.5")).await;
    let addr = format!("127.0.0.1:{}", free_port());
    let child = spawn(consume(&app, &stream, "c1", &["--metrics-addr", &addr]));
    let stopped = eventually(LIMIT, || async {
        matches!(http_get(&addr, "/metrics").await, Some((200, body))
            if metric(&body, "wallet_ledger_consumer_workers_stopped_total") == Some(1.0))
    })
    .await;
    assert!(stopped, "the metric counts the stopped worker");
    for _ in 0..5 {
        let ready = http_get(&addr, "/readyz").await.map(|(status, _)| status);
        assert_eq!(ready, Some(503), "a stopped worker is never ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (output, _) = stop(child, Duration::from_secs(5)).await;
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert_eq!(pending(&mut redis, &stream).await, 1);
    forget(&mut redis, &stream, GROUP).await;
    app.finish().await;
}

// 5. Timings out of range ---------------------------------------------------------------------

#[tokio::test]
async fn every_timing_out_of_its_range_is_refused_at_start_with_the_reason() {
    let app = TestApp::new().await;
    let stream = unique_stream("ranges");
    for (flag, value) in [
        ("--hold-expiry-ms", "10000000000000000"),
        ("--hold-expiry-ms", "1"),
        ("--claim-idle-ms", "9223372036854775808"),
        ("--block-ms", "86400001"),
        ("--outage-backoff-max-ms", "18446744073709551615"),
        ("--trim-interval-ms", "86400001"),
    ] {
        let output = run_to_end(consume(&app, &stream, "c1", &[flag, value]), LIMIT).await;
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{flag} {value}: {stderr}");
        assert!(
            stderr.contains(flag) && !stderr.contains("panicked"),
            "{stderr}"
        );
    }
    app.finish().await;
}

// 6. A batch slower than its deadline ----------------------------------------------------------

/// A wallet locked by an operator's session makes every batch that touches it slower than
/// `--max-batch-ms`: the batches are split until the other wallets' payments apply, the locked
/// wallet's wait and apply once the lock goes, and with two consumers nothing is both applied
/// and dead-lettered.
#[tokio::test]
async fn a_batch_slower_than_its_deadline_is_split_and_the_rest_applies_meanwhile() {
    let app = TestApp::new().await;
    app.create_wallet("locked").await;
    app.create_wallet("free").await;
    let stream = unique_stream("slow");
    let mut redis = redis_at(&shared_redis_url()).await;
    for i in 0..40 {
        let wallet = if i % 2 == 0 { "locked" } else { "free" };
        xadd(&mut redis, &stream, &payment(Uuid::new_v4(), wallet, "100")).await;
    }
    let gate = Gate::shut(&app, "locked").await;
    let flags = [
        "--batch-size",
        "40",
        "--max-batch-ms",
        "300",
        "--claim-idle-ms",
        "1000",
        "--max-failures",
        "1000",
    ];
    let c1 = spawn(consume(&app, &stream, "c1", &flags));
    let c2 = spawn(consume(&app, &stream, "c2", &flags));
    let free_applied = eventually(Duration::from_secs(15), || async {
        app.posted_balance("free").await == 2_000
    })
    .await;
    assert!(
        free_applied,
        "the free wallet's payments applied while the other was locked"
    );
    assert_eq!(app.posted_balance("locked").await, 0);
    gate.open().await;
    let locked_applied = eventually(Duration::from_secs(15), || async {
        app.posted_balance("locked").await == 2_000
    })
    .await;
    assert!(
        locked_applied,
        "the locked wallet's payments applied once the lock went"
    );
    let drained = eventually(Duration::from_secs(10), || {
        let mut redis = redis.clone();
        let stream = stream.clone();
        async move { pending(&mut redis, &stream).await == 0 }
    })
    .await;
    let (out1, _) = stop(c1, Duration::from_secs(10)).await;
    let (out2, _) = stop(c2, Duration::from_secs(10)).await;
    assert!(drained, "{}\n{}", describe(&out1), describe(&out2));
    let logs = format!("{}{}", text(&out1.stderr), text(&out2.stderr));
    assert!(
        logs.contains("applying each wallet's events apart"),
        "{logs}"
    );
    assert!(logs.contains("leaving its events pending"), "{logs}");
    assert!(
        !logs.contains("database seems unreachable"),
        "a slow batch is no outage: {logs}"
    );
    assert_eq!(dead_letters(&mut redis, &stream).await.len(), 0);
    assert_eq!(
        app.posted_balances(&["free", "locked"]).await,
        BTreeMap::from([("free".to_owned(), 2_000), ("locked".to_owned(), 2_000)]),
        "nothing applied twice"
    );
    forget(&mut redis, &stream, GROUP).await;
    app.finish().await;
}

/// A batch that is simply too big for `--max-batch-ms` (no lock anywhere) is halved until its
/// parts fit, instead of being retried whole forever as an outage.
#[tokio::test]
async fn a_batch_too_big_for_its_deadline_is_halved_until_it_applies() {
    let app = TestApp::new().await;
    app.create_wallet("big").await;
    let stream = unique_stream("big");
    let mut redis = redis_at(&shared_redis_url()).await;
    let payments: Vec<Uuid> = (0..600).map(|_| Uuid::new_v4()).collect();
    let mut pipe = redis::pipe();
    for (kind, amount) in [("payment.authorized", "100"), ("payment.captured", "60")] {
        for id in &payments {
            let mut fields = payment(*id, "big", amount);
            fields.push(("type".into(), kind.into()));
            pipe.xadd(&stream, "*", &fields).ignore();
        }
    }
    let _: () = pipe.query_async(&mut redis).await.unwrap();
    let flags = [
        "--drain",
        "--batch-size",
        "1000",
        // A batch of 1,000 takes from 200 ms to over a second in a debug build (at 300 ms a
        // quiet machine applied it whole, three runs in four, and nothing was halved); a part
        // of 60 a few tens of milliseconds, one payment a few; a loaded machine halves
        // further.
        "--max-batch-ms",
        "50",
        "--claim-idle-ms",
        "1000",
        "--max-failures",
        "1000",
    ];
    let output = run_to_end(
        consume(&app, &stream, "c1", &flags),
        Duration::from_secs(120),
    )
    .await;
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("applying it in two halves"),
        "{}",
        describe(&output)
    );
    assert!(
        !stderr.contains("database seems unreachable"),
        "{}",
        describe(&output)
    );
    // Nobody else locks the wallet: a part must never wait on the locks of an earlier
    // attempt that ran out of time.
    assert!(
        !stderr.contains("locked by another session"),
        "{}",
        describe(&output)
    );
    assert_eq!(
        app.posted_balance("big").await,
        600 * 60,
        "every capture posted once"
    );
    assert_eq!(dead_letters(&mut redis, &stream).await.len(), 0);
    forget(&mut redis, &stream, GROUP).await;
    app.finish().await;
}

// 7. Dead-letter ids --------------------------------------------------------------------------

#[tokio::test]
async fn the_dlq_tools_take_exact_full_ids_only_and_each_once() {
    let app = TestApp::new().await;
    let stream = unique_stream("dlqids");
    let mut redis = redis_at(&shared_redis_url()).await;
    // Three dead letters written together share their millisecond.
    for _ in 0..3 {
        xadd(&mut redis, &stream, &payment(Uuid::new_v4(), "w", "x")).await;
    }
    let output = run_to_end(consume(&app, &stream, "c1", &["--drain"]), LIMIT).await;
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let ids: Vec<String> = {
        let reply: redis::streams::StreamRangeReply =
            redis.xrange_all(format!("{stream}.dlq")).await.unwrap();
        reply.ids.into_iter().map(|e| e.id).collect()
    };
    assert_eq!(ids.len(), 3);
    let millisecond = ids[0].split_once('-').unwrap().0.to_owned();
    for incomplete in [millisecond.as_str(), "-", "+", "0-", "-1", "1-x"] {
        for action in ["drop", "replay"] {
            let output = run_to_end(dlq(&stream, &[action, incomplete]), LIMIT).await;
            assert_eq!(
                output.status.code(),
                Some(2),
                "{action} {incomplete}: {}",
                describe(&output)
            );
        }
    }
    assert_eq!(
        dead_letters(&mut redis, &stream).await.len(),
        3,
        "nothing was dropped"
    );
    // The same id twice replays it once.
    let output = run_to_end(dlq(&stream, &["replay", &ids[0], &ids[0]]), LIMIT).await;
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    assert!(
        text(&output.stdout).contains("replayed 1 dead letters"),
        "{}",
        describe(&output)
    );
    let length: usize = redis.xlen(&stream).await.unwrap();
    assert_eq!(length, 4, "three originals and one replay");
    assert_eq!(dead_letters(&mut redis, &stream).await.len(), 2);
    forget(&mut redis, &stream, GROUP).await;
    app.finish().await;
}

// 8. What --print-events prints ----------------------------------------------------------------

#[tokio::test]
async fn printed_events_escape_what_the_producer_wrote() {
    let app = TestApp::new().await;
    app.create_wallet("w").await;
    let stream = unique_stream("print");
    let mut redis = redis_at(&shared_redis_url()).await;
    let mut fields = payment(Uuid::new_v4(), "w", "100");
    fields.push((
        "n".into(),
        "7\n  c9: forged -> applied\u{1b}[2J\u{202e}".into(),
    ));
    xadd(&mut redis, &stream, &fields).await;
    let output = run_to_end(
        consume(&app, &stream, "c1", &["--drain", "--print-events"]),
        LIMIT,
    )
    .await;
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let stdout = String::from_utf8(output.stdout.clone()).unwrap();
    assert!(
        !stdout.contains('\u{1b}') && !stdout.contains('\u{202e}'),
        "{stdout:?}"
    );
    assert!(!stdout.lines().any(|l| l.starts_with("  c9:")), "{stdout}");
    assert!(stdout.contains("\\u{a}  c9: forged"), "{stdout}");
    forget(&mut redis, &stream, GROUP).await;
    app.finish().await;
}

// 9. The producer's own flags ----------------------------------------------------------------

#[tokio::test]
async fn publish_refuses_a_zero_amount_and_an_empty_or_invalid_wallet() {
    let stream = unique_stream("publish");
    for args in [
        ["--amount", "0"],
        ["--amount", "9007199254740992"],
        ["--wallets", ""],
        ["--wallets", "w1,,w2"],
        ["--wallets", "w 1"],
    ] {
        let output = run_to_end(super::stream_support::publish(&stream, &args), LIMIT).await;
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            describe(&output)
        );
        assert!(
            text(&output.stderr).contains(args[0]),
            "{}",
            describe(&output)
        );
    }
    let mut redis = redis_at(&shared_redis_url()).await;
    let exists: bool = redis.exists(&stream).await.unwrap();
    assert!(!exists, "nothing was published");
}
