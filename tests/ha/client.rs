//! The API as a client sees it over HTTP: the real `serve` binary, one admin key, and the
//! client's side of a failover (retry the same id after a 503 or a lost connection).

use crate::stream_support::{Server, bin, serve};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use uuid::Uuid;

pub struct Api {
    pub server: Server,
    base: String,
    token: String,
    http: reqwest::Client,
}

/// What the service finally answered a request, after the client's retries.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
    /// 503s and lost connections before it.
    pub retries: u32,
    /// Any answer of 500 or above other than 503, with its body: never expected.
    pub other_5xx: Vec<String>,
    pub at: Instant,
}

/// How long a client keeps retrying one request: longer than any failover here takes.
const GIVE_UP_AFTER: Duration = Duration::from_secs(120);

/// Runs the binary to its end; its stdout. A failure fails the test with its stderr.
fn run(args: &[&str]) -> String {
    let output = std::process::Command::new(bin())
        .args(args)
        .output()
        .expect("the binary runs");
    assert!(
        output.status.success(),
        "wallet-ledger {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

impl Api {
    /// `serve` on `database_url`, migrated, with a fresh admin key and no rate limit in the
    /// way of 16 clients.
    pub async fn start(database_url: &str) -> Api {
        run(&["migrate", "--database-url", database_url]);
        let created = run(&[
            "api-key",
            "create",
            "--owner",
            "ha",
            "--scope",
            "admin",
            "--database-url",
            database_url,
        ]);
        let token = created.trim().to_owned();
        let server = serve(
            database_url,
            &[("RUST_LOG", "info,sqlx=warn")],
            &[
                "--application-name",
                "wallet-ledger-ha",
                "--rate-limit-per-second",
                "100000",
                "--rate-limit-burst",
                "100000",
            ],
        )
        .await;
        let base = format!("http://{}", server.addr);
        wallet_ledger::install_crypto_provider();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        Api {
            server,
            base,
            token,
            http,
        }
    }

    /// Sends until the service gives a final answer (anything but a 503 or a lost
    /// connection), always with the same body: the id in it makes a retry safe.
    pub async fn send(&self, method: reqwest::Method, path: &str, body: Option<&Value>) -> Answer {
        let started = Instant::now();
        let mut retries = 0;
        let mut other_5xx = Vec::new();
        loop {
            let mut request = self
                .http
                .request(method.clone(), format!("{}{path}", self.base))
                .bearer_auth(&self.token);
            if let Some(body) = body {
                request = request.json(body);
            }
            match request.send().await {
                Ok(response) => {
                    let status = response.status().as_u16();
                    let text = response.text().await.unwrap_or_default();
                    if status >= 500 && status != 503 {
                        other_5xx.push(format!("{status} {text}"));
                    }
                    if status < 500 {
                        return Answer {
                            status,
                            body: serde_json::from_str(&text).unwrap_or(Value::Null),
                            retries,
                            other_5xx,
                            at: Instant::now(),
                        };
                    }
                }
                Err(e) => assert!(!e.is_builder(), "{method} {path} could not be built: {e}"),
            }
            retries += 1;
            assert!(
                started.elapsed() < GIVE_UP_AFTER,
                "{method} {path} got no final answer in {GIVE_UP_AFTER:?} ({retries} tries)"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// One `GET /readyz`, no retry: its status, or `None` when nothing answered in 5 s.
    pub async fn readiness(&self) -> Option<u16> {
        let request = self.http.get(format!("{}/readyz", self.base));
        let response = request.timeout(Duration::from_secs(5)).send().await.ok()?;
        Some(response.status().as_u16())
    }

    pub async fn post(&self, path: &str, body: &Value) -> Answer {
        self.send(reqwest::Method::POST, path, Some(body)).await
    }

    pub async fn get(&self, path: &str) -> Answer {
        self.send(reqwest::Method::GET, path, None).await
    }

    pub async fn create_wallet(&self, id: &str) {
        let r = self
            .post(
                "/v1/accounts",
                &json!({"id": id, "currency": "SAR", "type": "wallet"}),
            )
            .await;
        assert_eq!(r.status, 201, "create {id}: {}", r.body);
    }

    /// Tops a wallet up through the provider `test`.
    pub async fn fund(&self, wallet: &str, amount: i64) {
        let r = self
            .post(
                "/v1/payments",
                &json!({"id": Uuid::new_v4(), "account": wallet, "amount": amount,
                        "currency": "SAR", "provider": "test"}),
            )
            .await;
        assert_eq!(r.status, 201, "fund {wallet}: {}", r.body);
    }

    pub async fn posted_balance(&self, wallet: &str) -> i64 {
        let r = self.get(&format!("/v1/accounts/{wallet}")).await;
        assert_eq!(r.status, 200, "{wallet}: {}", r.body);
        r.body["balances"]["posted"].as_i64().unwrap()
    }

    /// The posted balance of each of `wallets`, by id (as `TestApp::posted_balances`).
    pub async fn posted_balances(
        &self,
        wallets: &[String],
    ) -> std::collections::BTreeMap<String, i64> {
        let mut balances = std::collections::BTreeMap::new();
        for wallet in wallets {
            balances.insert(wallet.clone(), self.posted_balance(wallet).await);
        }
        balances
    }
}
