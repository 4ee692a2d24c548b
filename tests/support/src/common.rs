//! Test harness: a fresh database per test (created by the test binary's [`Backend`], migrated
//! with the app's own migrations, dropped by `finish`), the real router driven in-process with
//! `tower::ServiceExt::oneshot`, and typed helpers.

use crate::backend::Backend;
use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use sqlx::postgres::{PgPool, PgPoolOptions};
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};
use tower::ServiceExt;
use uuid::Uuid;
use wallet_ledger::api_keys::Scope;
use wallet_ledger::http::HttpSettings;
use wallet_ledger::http::{AppState, app};
use wallet_ledger::ledger::group_commit::GroupCommit;

/// The server that hosts test databases; any database on it to connect to first.
pub fn server_url() -> String {
    std::env::var("TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// One test's database and the service's router over it, on the engine of `B`: each test
/// binary names its backend once (`type TestApp = test_support::TestApp<Plain>`).
pub struct TestApp<B: Backend> {
    pub router: Router,
    /// The router's single-create writer, for tests that wait on its queue.
    pub writer: GroupCommit,
    pub pool: PgPool,
    pub database: String,
    /// The test database's URL, for tests that run the binary against it.
    pub database_url: String,
    /// An admin API key of the owner `default`, sent with every request that names none.
    pub token: String,
    /// Whether `finish` drops the database: not one [`TestApp::attach`] was given.
    owned: bool,
    backend: PhantomData<B>,
}

pub struct TestResponse {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub text: String,
    pub body: Value,
}

impl TestResponse {
    /// A router's answer read whole: its status, headers, text and (when it is JSON) body.
    pub async fn read(response: axum::response::Response) -> TestResponse {
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let text = String::from_utf8(bytes.to_vec()).unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        TestResponse {
            status,
            headers,
            text,
            body,
        }
    }

    pub fn code(&self) -> &str {
        self.body["code"].as_str().unwrap_or("")
    }

    pub fn replayed(&self) -> bool {
        self.headers
            .get("idempotent-replayed")
            .is_some_and(|v| v == "true")
    }

    pub fn content_type(&self) -> &str {
        self.headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

/// The default settings with a per-key rate limit no test client can reach.
pub fn unlimited_settings() -> HttpSettings {
    HttpSettings {
        rate_limit_per_second: 1_000_000,
        rate_limit_burst: 1_000_000,
        ..HttpSettings::default()
    }
}

impl<B: Backend> TestApp<B> {
    pub async fn new() -> TestApp<B> {
        TestApp::with_config(HttpSettings::default()).await
    }

    /// A TestApp whose per-key rate limit no test client can reach: for tests whose clients
    /// run as fast as the machine lets them (a quiet machine once got 429 where a test
    /// expected 200).
    pub async fn unlimited() -> TestApp<B> {
        TestApp::with_config(unlimited_settings()).await
    }

    pub async fn with_config(config: HttpSettings) -> TestApp<B> {
        sweep_abandoned_databases::<B>().await;
        let database = format!(
            "wl_test_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let database_url = B::create_database(&database).await;
        let pool = PgPoolOptions::new()
            .max_connections(20)
            .acquire_timeout(Duration::from_secs(30))
            .connect(&database_url)
            .await
            .unwrap();
        B::migrate(&pool).await;
        TestApp::adopt(pool, database, database_url, config).await
    }

    /// The helpers over a database the test created and migrated itself (e.g. from an older
    /// schema): it is the test's own, so `finish` checks and drops it like any other.
    pub async fn adopt(
        pool: PgPool,
        database: String,
        database_url: String,
        config: HttpSettings,
    ) -> TestApp<B> {
        let token = api_key(&pool, "default", Scope::Admin).await;
        let state = AppState::new(B::store(&pool), config);
        TestApp {
            writer: state.writer.clone(),
            router: app(state),
            pool,
            database,
            database_url,
            token,
            owned: true,
            backend: PhantomData,
        }
    }

    /// The same helpers over a migrated database that is not the test's own (a private
    /// PostgreSQL a test starts and stops): a small pool, the default settings, and `finish`
    /// only closes the pool.
    pub async fn attach(database_url: &str) -> TestApp<B> {
        TestApp::attach_with_config(database_url, HttpSettings::default()).await
    }

    /// [`TestApp::attach`] with settings of the test's own (e.g. a rate limit no client
    /// reaches, as [`TestApp::unlimited`] has).
    pub async fn attach_with_config(database_url: &str, config: HttpSettings) -> TestApp<B> {
        let pool = PgPoolOptions::new()
            .max_connections(2)
            .acquire_timeout(Duration::from_secs(10))
            .connect(database_url)
            .await
            .expect("the database to attach to is reachable");
        let token = api_key(&pool, "default", Scope::Admin).await;
        let state = AppState::new(B::store(&pool), config);
        TestApp {
            writer: state.writer.clone(),
            router: app(state),
            pool,
            database: String::new(),
            database_url: database_url.to_owned(),
            token,
            owned: false,
            backend: PhantomData,
        }
    }

    /// Lets the backend check the finished database (tests/citus: that its accounts sit on
    /// both workers), then drops it (a failed test leaves its database for inspection; the
    /// next run sweeps it).
    pub async fn finish(self) {
        if !self.owned {
            self.pool.close().await;
            return;
        }
        B::finished(&self.pool).await;
        self.pool.close().await;
        B::drop_database(&self.database).await;
    }

    /// Sends a request as the test's admin key, unless it names a key of its own.
    pub async fn send(&self, mut request: Request<Body>) -> TestResponse {
        if !request.headers().contains_key("authorization") {
            let bearer = format!("Bearer {}", self.token);
            request
                .headers_mut()
                .insert("authorization", bearer.parse().unwrap());
        }
        self.send_as_is(request).await
    }

    /// Sends a request exactly as built: without an `Authorization` header unless it has one.
    pub async fn send_as_is(&self, request: Request<Body>) -> TestResponse {
        let response = self.router.clone().oneshot(request).await.unwrap();
        TestResponse::read(response).await
    }

    /// A raw request: any method, headers and body bytes.
    pub async fn raw(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Body>,
    ) -> TestResponse {
        let mut builder = Request::builder().method(method).uri(path);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        self.send(builder.body(body.into()).unwrap()).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> TestResponse {
        self.raw(
            Method::POST,
            path,
            &[("content-type", "application/json")],
            body.to_string(),
        )
        .await
    }

    pub async fn post_with_key(&self, path: &str, key: &str, body: &Value) -> TestResponse {
        let headers = [
            ("content-type", "application/json"),
            ("idempotency-key", key),
        ];
        self.raw(Method::POST, path, &headers, body.to_string())
            .await
    }

    /// A POST without a body (the lifecycle actions take none).
    pub async fn post_empty(&self, path: &str) -> TestResponse {
        self.raw(Method::POST, path, &[], Body::empty()).await
    }

    /// `GET path`, an `as_of` read, asked again until its answer describes `needed` or later
    /// (its `as_of` at or past it), for up to a minute; then the last answer. An instant past
    /// the finality horizon is answered at the horizon, and any open writer of the database
    /// holds the horizon back: on the Citus cluster the tests share, another test's
    /// transaction has held it from a third of a second to 13 s behind an instant a test asked.
    pub async fn get_final(
        &self,
        path: &str,
        needed: chrono::DateTime<chrono::Utc>,
    ) -> TestResponse {
        let described = |r: &TestResponse| {
            let at = r.body["as_of"].as_str();
            let at = at.and_then(|t| t.parse::<chrono::DateTime<chrono::Utc>>().ok());
            r.status != StatusCode::OK || at.is_some_and(|at| at >= needed)
        };
        let within = Duration::from_secs(60);
        let settled = poll(within, || async {
            Some(self.get(path).await).filter(|r| described(r))
        });
        match settled.await {
            Some(r) => r,
            None => self.get(path).await,
        }
    }

    pub async fn get(&self, path: &str) -> TestResponse {
        self.raw(Method::GET, path, &[], Body::empty()).await
    }

    pub async fn create_account(&self, id: &str, currency: &str, kind: &str) -> TestResponse {
        let r = self
            .post(
                "/v1/accounts",
                &json!({"id": id, "currency": currency, "type": kind}),
            )
            .await;
        assert_eq!(
            r.status,
            StatusCode::CREATED,
            "create account {id}: {}",
            r.text
        );
        r
    }

    pub async fn create_wallet(&self, id: &str) {
        self.create_account(id, "SAR", "wallet").await;
    }

    /// Tops a wallet up through the provider `test` and returns the payment's response.
    pub async fn fund(&self, wallet: &str, amount: i64) -> TestResponse {
        let r = self
            .post(
                "/v1/payments",
                &json!({"id": Uuid::new_v4(), "account": wallet, "amount": amount, "currency": "SAR", "provider": "test"}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "fund {wallet}: {}", r.text);
        r
    }

    pub async fn transfer(&self, id: Uuid, from: &str, to: &str, amount: i64) -> TestResponse {
        self.post(
            "/v1/transfers",
            &json!({"id": id, "from": from, "to": to, "amount": amount}),
        )
        .await
    }

    pub async fn posted_balance(&self, account: &str) -> i64 {
        let r = self.get(&format!("/v1/accounts/{account}")).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        r.body["balances"]["posted"].as_i64().unwrap()
    }

    /// The four balances of `account` as `GET /v1/accounts/{id}` shows them.
    pub async fn balances(&self, account: &str) -> Balances {
        let r = self.get(&format!("/v1/accounts/{account}")).await;
        assert_eq!(
            r.status,
            StatusCode::OK,
            "GET account {account}: {}",
            r.text
        );
        let field = |name: &str| {
            r.body["balances"][name]
                .as_i64()
                .unwrap_or_else(|| panic!("balances.{name} of {account}: {}", r.text))
        };
        Balances {
            posted: field("posted"),
            pending_in: field("pending_in"),
            pending_out: field("pending_out"),
            available: field("available"),
        }
    }

    /// The posted balance of each of `accounts`, by account id.
    pub async fn posted_balances<S: AsRef<str>>(&self, accounts: &[S]) -> BTreeMap<String, i64> {
        let mut balances = BTreeMap::new();
        for account in accounts {
            let account = account.as_ref();
            balances.insert(account.to_owned(), self.posted_balance(account).await);
        }
        balances
    }

    /// How many entries transaction `id` wrote (0 for a hold, a refusal or a void).
    pub async fn entries_of(&self, id: Uuid) -> i64 {
        sqlx::query_scalar("select count(*) from entries where transaction_id = $1")
            .bind(id)
            .fetch_one(&self.pool)
            .await
            .unwrap()
    }

    /// Row counts of every ledger table: what a refused or invalid request must leave alone.
    pub async fn row_counts(&self) -> (i64, i64, i64) {
        let row: (i64, i64, i64) = sqlx::query_as(
            "select (select count(*) from accounts), (select count(*) from transactions), (select count(*) from entries)",
        )
        .fetch_one(&self.pool)
        .await
        .unwrap();
        row
    }
}

/// An account's balances as the API reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Balances {
    pub posted: i64,
    pub pending_in: i64,
    pub pending_out: i64,
    pub available: i64,
}

/// How often [`poll`] asks again: often enough that a test waits little past the event, rarely
/// enough that the asking does not load the machine it waits on.
pub const POLL_EVERY: Duration = Duration::from_millis(20);

/// The one way these tests wait for something to have happened: asks `probe` every
/// [`POLL_EVERY`] until it answers `Some` (returned) or `within` has passed (`None`), so a
/// slow machine only makes a test slower, never wrong, and a fast one never waits a fixed time.
pub async fn poll<T, F, Fut>(within: Duration, mut probe: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(value) = probe().await {
            return Some(value);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// [`poll`] for an event the test cannot go on without: panics naming `what` at the deadline.
#[track_caller]
pub fn poll_until<T, F, Fut>(
    within: Duration,
    what: impl std::fmt::Display,
    probe: F,
) -> impl std::future::Future<Output = T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let caller = std::panic::Location::caller();
    async move {
        match poll(within, probe).await {
            Some(value) => value,
            None => panic!("{caller}: {what} did not happen within {within:?}"),
        }
    }
}

/// [`poll`] for a condition whose failure the caller reports itself (with the state it then
/// reads): whether `check` held before `within` passed.
pub async fn eventually<F, Fut>(within: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    poll(within, || {
        let held = check();
        async move { held.await.then_some(()) }
    })
    .await
    .is_some()
}

/// Drops test databases left by earlier runs whose process is gone (a failed test keeps its
/// database until then, for inspection).
async fn sweep_abandoned_databases<B: Backend>() {
    static SWEPT: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    SWEPT
        .get_or_init(|| async {
            for name in B::test_databases().await {
                let pid: Option<i32> = name.split('_').nth(2).and_then(|p| p.parse().ok());
                let alive =
                    pid.is_some_and(|p| std::path::Path::new(&format!("/proc/{p}")).exists());
                if !alive {
                    B::drop_database(&name).await;
                }
            }
        })
        .await;
}

/// splitmix64: a seeded generator for randomized tests, so a failure reproduces.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    pub fn two_distinct<'a>(&mut self, items: &'a [String]) -> (&'a str, &'a str) {
        let a = self.below(items.len() as u64) as usize;
        let b = (a + 1 + self.below(items.len() as u64 - 1) as usize) % items.len();
        (&items[a], &items[b])
    }
}

/// A new API key of `owner` with `scope` in the database behind `pool`; returns its token.
pub async fn api_key(pool: &PgPool, owner: &str, scope: Scope) -> String {
    let mut conn = pool.acquire().await.unwrap();
    wallet_ledger::api_keys::create(&mut conn, owner, scope)
        .await
        .unwrap()
        .1
}

/// A problem+json answer with this status and code (in the header and the body).
#[track_caller]
pub fn assert_problem(r: &TestResponse, status: u16, code: &str, context: &str) {
    assert_eq!(
        (r.status.as_u16(), r.code(), r.content_type()),
        (status, code, "application/problem+json"),
        "{context}: {}",
        r.text
    );
    assert_eq!(r.body["status"], json!(status), "{context}: {}", r.text);
}

/// A row lock held by a separate session, in an open transaction, until [`Gate::open`]: an
/// operator's `SELECT ... FOR UPDATE` on an account.
pub struct Gate(sqlx::Transaction<'static, sqlx::Postgres>);

impl Gate {
    pub async fn shut<B: Backend>(app: &TestApp<B>, account: &str) -> Gate {
        let mut tx = app.pool.begin().await.unwrap();
        sqlx::query("select id from accounts where id = $1 for update")
            .bind(account)
            .fetch_one(&mut *tx)
            .await
            .unwrap();
        Gate(tx)
    }

    pub async fn open(self) {
        self.0.commit().await.unwrap();
    }
}

/// Sessions of the test's database waiting for a lock.
/// On Citus a distributed table's row is locked on the worker that holds its shard, where the
/// coordinator's session has its own backend: those backends' lock waits count too (the
/// coordinator's session meanwhile only waits for the worker's answer, which any remote
/// statement does, so that is no sign of a lock).
pub async fn lock_waiters<B: Backend>(app: &TestApp<B>) -> i64 {
    let citus: bool =
        sqlx::query_scalar("select exists (select 1 from pg_extension where extname = 'citus')")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    let here: i64 = sqlx::query_scalar(
        "select count(*) from pg_stat_activity
         where datname = current_database() and wait_event_type = 'Lock'",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap();
    if !citus {
        return here;
    }
    let on_workers: i64 = sqlx::query_scalar(
        "select coalesce(sum(result::bigint), 0)::bigint from run_command_on_workers(
             $$select count(*) from pg_stat_activity
               where datname = current_database() and wait_event_type = 'Lock'$$)
         where success",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap();
    here + on_workers
}

/// Waits until at least `n` sessions of the test's database wait for a lock (see
/// [`lock_waiters`]): the event a test that shuts a [`Gate`] waits on before going on.
pub async fn wait_for_lock_waiters<B: Backend>(app: &TestApp<B>, n: i64) {
    let what = format!("{n} session(s) waiting for a lock");
    poll_until(Duration::from_secs(10), what, || async {
        (lock_waiters(app).await >= n).then_some(())
    })
    .await
}

/// Runs `statements` in one transaction with every trigger off, as an intruder with the
/// superuser's rights would (`session_replication_role = replica`), to corrupt the ledger on
/// purpose. Citus passes the setting on to the workers' shards when told to propagate `set
/// local` (a setting one PostgreSQL ignores); `alter table ... disable trigger`, the other way,
/// is refused on a distributed table.
pub async fn behind_the_guards(pool: &PgPool, statements: &[String]) {
    let mut conn = pool.acquire().await.unwrap();
    sqlx::query("set citus.propagate_set_commands = 'local'")
        .execute(&mut *conn)
        .await
        .unwrap();
    let mut tx = sqlx::Connection::begin(&mut *conn).await.unwrap();
    sqlx::query("set local session_replication_role = replica")
        .execute(&mut *tx)
        .await
        .unwrap();
    for statement in statements {
        sqlx::query(sqlx::AssertSqlSafe(statement.clone()))
            .execute(&mut *tx)
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
    }
    tx.commit().await.unwrap();
    sqlx::query("reset citus.propagate_set_commands")
        .execute(&mut *conn)
        .await
        .unwrap();
}
