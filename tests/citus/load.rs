//! A transfer load for tests that change the cluster under it (grow.rs, node_loss.rs):
//! clients transfer between funded wallets until stopped, each create recorded with its first
//! answer; afterwards every create not answered 201 is retried under its id until its answer
//! is final, and the ledger must hold each exactly once, balances and `verify` as the creates
//! say.

use super::common::{TestApp, poll_until};
use axum::http::StatusCode;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::task::JoinHandle;
use uuid::Uuid;

/// Twice Citus's default shard count, so that nearly every shard holds wallets.
const WALLETS: usize = 64;
const FUNDING: i64 = 1_000_000;
const CLIENTS: usize = 8;

/// One create the load made: what it asked, and its first answer (the immediate retry's, for
/// one of every five whose first answer was not 201).
#[derive(Debug, Clone)]
struct Sent {
    id: Uuid,
    from: usize,
    to: usize,
    amount: i64,
    first: StatusCode,
}

/// The load's clients while they run.
pub struct Load {
    app: Arc<TestApp>,
    pub wallets: Vec<String>,
    stop: Arc<AtomicBool>,
    clients: Vec<JoinHandle<Vec<Sent>>>,
}

impl Load {
    /// Creates and funds the wallets (`{prefix}{i}`), then starts the clients.
    pub async fn start(app: Arc<TestApp>, prefix: &str) -> Load {
        let wallets: Vec<String> = (0..WALLETS).map(|i| format!("{prefix}{i}")).collect();
        for w in &wallets {
            app.create_wallet(w).await;
            app.fund(w, FUNDING).await;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let clients = (0..CLIENTS)
            .map(|c| tokio::spawn(client(app.clone(), wallets.clone(), c, stop.clone())))
            .collect();
        Load {
            app,
            wallets,
            stop,
            clients,
        }
    }

    /// Stops the clients, settles every create and checks the ledger; returns how many creates
    /// got each first answer (by status code). `allowed` are the first answers accepted
    /// besides 201 and a replay.
    pub async fn stop_and_check(self, allowed: &[StatusCode]) -> BTreeMap<u16, usize> {
        self.stop.store(true, Ordering::Relaxed);
        let mut sent = Vec::new();
        for c in self.clients {
            sent.extend(c.await.unwrap());
        }
        let (app, wallets) = (&self.app, &self.wallets);
        let mut first: BTreeMap<u16, usize> = BTreeMap::new();
        for s in &sent {
            *first.entry(s.first.as_u16()).or_default() += 1;
            // An unanswered create may have committed or not: its retry says which, once.
            if s.first != StatusCode::CREATED {
                settle(app, wallets, s).await;
            }
        }
        let accepted =
            |code: &u16| [200, 201].contains(code) || allowed.iter().any(|a| a.as_u16() == *code);
        assert!(
            first.keys().all(accepted),
            "unexpected first answers: {first:?}"
        );
        assert!(
            first.get(&201).copied().unwrap_or(0) > 50,
            "the load ran: {first:?}"
        );
        let ids: Vec<Uuid> = sent.iter().map(|s| s.id).collect();
        let stored: i64 =
            sqlx::query_scalar("select count(*) from transactions where id = any($1)")
                .bind(&ids)
                .fetch_one(&app.pool)
                .await
                .unwrap();
        assert_eq!(stored as usize, ids.len(), "every create stored once");
        assert_eq!(
            app.posted_balances(wallets).await,
            expected_balances(wallets, &sent),
            "balances as the creates say"
        );
        let findings = super::cluster::verify(app).await;
        assert!(findings.is_empty(), "{findings:?}");
        first
    }
}

/// One client: transfers between pseudo-random wallets until told to stop, every fifth one
/// sent twice (a retry must replay it, never make a second).
async fn client(
    app: Arc<TestApp>,
    wallets: Vec<String>,
    client: usize,
    stop: Arc<AtomicBool>,
) -> Vec<Sent> {
    let mut sent = Vec::new();
    let mut n = client;
    while !stop.load(Ordering::Relaxed) {
        n += CLIENTS;
        let (from, to) = (n % WALLETS, (n * 7 + 3) % WALLETS);
        if from == to {
            continue;
        }
        let (id, amount) = (Uuid::new_v4(), 1 + (n % 97) as i64);
        let mut first = app
            .transfer(id, &wallets[from], &wallets[to], amount)
            .await
            .status;
        if n.is_multiple_of(5) {
            let again = app.transfer(id, &wallets[from], &wallets[to], amount).await;
            if first != StatusCode::CREATED {
                first = again.status;
            } else {
                assert!(
                    again.status == StatusCode::SERVICE_UNAVAILABLE || again.replayed(),
                    "a retry of a created transfer replays it: {} {}",
                    again.status,
                    again.text
                );
            }
        }
        sent.push(Sent {
            id,
            from,
            to,
            amount,
            first,
        });
    }
    sent
}

/// Retries `s` under its id until the answer is final: created now, or replayed.
async fn settle(app: &TestApp, wallets: &[String], s: &Sent) {
    let what = format!("a final answer to {} after the cluster changed", s.id);
    poll_until(Duration::from_secs(10), what, || async move {
        let r = app
            .transfer(s.id, &wallets[s.from], &wallets[s.to], s.amount)
            .await;
        match r.status {
            StatusCode::CREATED => Some(()),
            StatusCode::OK if r.replayed() => Some(()),
            StatusCode::SERVICE_UNAVAILABLE => None,
            other => panic!("retry of {}: {other} {}", s.id, r.text),
        }
    })
    .await;
}

fn expected_balances(wallets: &[String], sent: &[Sent]) -> BTreeMap<String, i64> {
    let mut balances: BTreeMap<String, i64> =
        wallets.iter().map(|w| (w.clone(), FUNDING)).collect();
    for s in sent {
        *balances.get_mut(&wallets[s.from]).unwrap() -= s.amount;
        *balances.get_mut(&wallets[s.to]).unwrap() += s.amount;
    }
    balances
}
