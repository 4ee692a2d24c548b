//! The dispatcher: fans events out into deliveries, claims due deliveries, POSTs them with the
//! Standard Webhooks headers and `Idempotency-Key` = the event id, and records each attempt.
//! It runs inside `serve` and standalone as `wallet-ledger outbox`; several may run at once.
//!
//! A 2xx is delivered; a 408, 429, 5xx, timeout or connection failure is retried with
//! exponential backoff and jitter (a `Retry-After` is honoured up to the longest backoff); any
//! other 4xx and any redirect are final; after the retry budget the delivery is `dead`.
//! Redirects are never followed: the allow-list names where requests may go.

use super::address::GuardedResolver;
use super::deliveries::{self, Attempt, Claimed};
use super::signing;
use super::subscriptions::UrlPolicy;
use crate::db::StoreError;
use crate::failpoint;
use chrono::Utc;
use serde_json::json;
use sqlx::PgPool;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone)]
pub struct Settings {
    pub interval: Duration,
    pub batch: i64,
    pub timeout: Duration,
    pub max_attempts: i32,
    pub backoff: Duration,
    pub backoff_max: Duration,
    pub policy: UrlPolicy,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// Requests in flight at once to one subscription.
    pub per_subscription: usize,
    pub events_stream: Option<(String, String)>,
}

impl Settings {
    /// How long a claim lasts before another dispatcher may take the delivery again: twice the
    /// request timeout. A delivery is claimed only when it can be sent at once, and its request
    /// ends within the timeout, so a live dispatcher always records before its lease runs out.
    fn lease(&self) -> Duration {
        self.timeout * 2
    }

    /// The delay before attempt `attempts + 1`: the backoff doubled per attempt, capped, then
    /// drawn at random between half and all of it (so receivers coming back are not hit by
    /// every delivery at the same instant).
    fn delay_after(&self, attempts: i32) -> Duration {
        let exponent = u32::try_from(attempts.saturating_sub(1))
            .unwrap_or(0)
            .min(30);
        let full = self
            .backoff
            .saturating_mul(1 << exponent)
            .min(self.backoff_max);
        // Half the delay, plus a random share (0..=u16::MAX / u16::MAX) of the other half, in
        // whole nanoseconds.
        let mut bytes = [0u8; 2];
        let _ = getrandom::fill(&mut bytes);
        let share = u128::from(u16::from_le_bytes(bytes));
        let half = full.as_nanos() / 2;
        let nanos = half + half * share / u128::from(u16::MAX);
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }
}

/// What one step did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StepReport {
    pub fanned_out: i64,
    pub claimed: usize,
    pub delivered: usize,
    pub retried: usize,
    pub dead: usize,
    pub streamed: usize,
}

pub struct Dispatcher {
    pool: PgPool,
    client: reqwest::Client,
    settings: Settings,
    stream: Option<super::stream::EventStream>,
}

impl Dispatcher {
    pub async fn new(pool: PgPool, settings: Settings) -> anyhow::Result<Dispatcher> {
        let resolver = GuardedResolver::new(settings.policy.clone());
        Dispatcher::build(pool, settings, resolver).await
    }

    /// A dispatcher that resolves names with `resolver` (still guarded: only public addresses
    /// unless listed). Tests give names their own answers this way.
    pub async fn with_resolver(
        pool: PgPool,
        settings: Settings,
        resolver: Arc<dyn reqwest::dns::Resolve>,
    ) -> anyhow::Result<Dispatcher> {
        let resolver = GuardedResolver::over(settings.policy.clone(), resolver);
        Dispatcher::build(pool, settings, resolver).await
    }

    async fn build(
        pool: PgPool,
        settings: Settings,
        resolver: GuardedResolver,
    ) -> anyhow::Result<Dispatcher> {
        crate::install_crypto_provider();
        let client = reqwest::Client::builder()
            .dns_resolver(Arc::new(resolver))
            .timeout(settings.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("wallet-ledger/", env!("CARGO_PKG_VERSION")))
            .build()?;
        // Never connected here: a Redis down at start must not keep the API from starting.
        let stream = settings
            .events_stream
            .as_ref()
            .map(|(url, name)| super::stream::EventStream::new(url, name));
        Ok(Dispatcher {
            pool,
            client,
            settings,
            stream,
        })
    }

    /// The outbound feed's health (`Off` without `--events-stream`), for `/readyz`.
    pub fn feed_health(&self) -> super::stream::FeedHealth {
        self.stream
            .as_ref()
            .map(super::stream::EventStream::health)
            .unwrap_or_default()
    }

    /// One round, for tests and tools: fans out, claims what can be sent now (at most
    /// `concurrency`, `per_subscription` each), sends it all and records each answer, then
    /// (when configured) publishes to the stream. `run` does the same continuously.
    pub async fn step(&mut self) -> Result<StepReport, sqlx::Error> {
        let mut report = StepReport::default();
        let mut flight = InFlight::default();
        report.fanned_out = self.fan_out().await?;
        report.claimed = self.fill(&mut flight).await?;
        while let Some(done) = flight.sends.join_next().await {
            self.finish(done, &mut flight, &mut report).await?;
        }
        report.streamed = self.publish().await?;
        Ok(report)
    }

    /// Sends continuously until `shutdown` is cancelled: whenever a request ends, the next due
    /// delivery takes its place, so a slow receiver holds only its own requests (at most
    /// `per_subscription`) and every other receiver's deliveries go out on time. Sleeps
    /// `interval` only when nothing was due. On shutdown no new round starts; the requests in
    /// flight finish (each within the timeout) and are recorded.
    pub async fn run(mut self, shutdown: CancellationToken) {
        let mut flight = InFlight::default();
        let mut report = StepReport::default();
        // Checked before each round as well: a cancel that came while a round or a record was
        // running starts no further round.
        while !shutdown.is_cancelled() {
            let busy = match self.round(&mut flight).await {
                Ok(busy) => busy,
                Err(e) => {
                    failed("outbox step failed; will retry", e);
                    false
                }
            };
            let pause = if busy {
                Duration::ZERO
            } else {
                self.settings.interval
            };
            tokio::select! {
                Some(done) = flight.sends.join_next(), if !flight.sends.is_empty() => {
                    if let Err(e) = self.finish(done, &mut flight, &mut report).await {
                        failed(UNRECORDED, e);
                    }
                }
                _ = tokio::time::sleep(pause) => {}
                () = shutdown.cancelled() => {}
            }
        }
        while let Some(done) = flight.sends.join_next().await {
            if let Err(e) = self.finish(done, &mut flight, &mut report).await {
                failed(UNRECORDED, e);
            }
        }
    }

    /// Fan-out, new sends for the free slots, the stream: whether anything was done.
    async fn round(&mut self, flight: &mut InFlight) -> Result<bool, sqlx::Error> {
        let fanned_out = self.fan_out().await?;
        let claimed = self.fill(flight).await?;
        let streamed = self.publish().await?;
        Ok(fanned_out > 0 || streamed > 0 || (claimed > 0 && flight.sends.len() < self.slots()))
    }

    fn slots(&self) -> usize {
        self.settings.concurrency.max(1)
    }

    async fn fan_out(&self) -> Result<i64, sqlx::Error> {
        let mut conn = self.pool.acquire().await?;
        deliveries::fan_out(&mut conn, self.settings.batch).await
    }

    /// Claims as many due deliveries as there are free slots and starts sending each.
    async fn fill(&self, flight: &mut InFlight) -> Result<usize, sqlx::Error> {
        let free = self.slots().saturating_sub(flight.sends.len());
        if free == 0 {
            return Ok(0);
        }
        let per_subscription = self.settings.per_subscription.max(1);
        let full: Vec<uuid::Uuid> = flight
            .per_subscription
            .iter()
            .filter(|(_, n)| **n >= per_subscription)
            .map(|(id, _)| *id)
            .collect();
        let limit = i64::try_from(free)
            .unwrap_or(i64::MAX)
            .min(self.settings.batch);
        let mut conn = self.pool.acquire().await?;
        let claimed = deliveries::claim(
            &mut conn,
            limit,
            i64::try_from(per_subscription).unwrap_or(i64::MAX),
            &full,
            self.settings.lease(),
        )
        .await?;
        drop(conn);
        let count = claimed.len();
        for delivery in claimed {
            *flight
                .per_subscription
                .entry(delivery.subscription_id)
                .or_default() += 1;
            let client = self.client.clone();
            let settings = self.settings.clone();
            flight.sends.spawn(async move {
                let started_at = Utc::now();
                let clock = Instant::now();
                let attempt = send(&client, &settings, &delivery).await;
                (delivery, started_at, clock.elapsed(), attempt)
            });
        }
        Ok(count)
    }

    /// Records one finished send.
    async fn finish(
        &self,
        done: Result<Sent, tokio::task::JoinError>,
        flight: &mut InFlight,
        report: &mut StepReport,
    ) -> Result<(), sqlx::Error> {
        let Ok((delivery, started_at, took, attempt)) = done else {
            // A send task panicked: its lease runs out and it is sent again. Its slot count
            // cannot be told apart, so the counts are rebuilt from what is still in flight.
            flight.per_subscription.retain(|_, n| *n > 0);
            return Ok(());
        };
        if let Some(n) = flight.per_subscription.get_mut(&delivery.subscription_id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                flight.per_subscription.remove(&delivery.subscription_id);
            }
        }
        failpoint::hit(failpoint::OUTBOX_AFTER_SEND);
        let mut conn = self.pool.acquire().await?;
        let ms = i32::try_from(took.as_millis()).unwrap_or(i32::MAX);
        deliveries::record(&mut conn, &delivery, started_at, ms, &attempt).await?;
        match &attempt {
            Attempt::Delivered { .. } => report.delivered += 1,
            Attempt::Retry { .. } => report.retried += 1,
            Attempt::Dead { status, error } => {
                report.dead += 1;
                tracing::warn!(delivery = %delivery.id, event = %delivery.event_id, ?status, %error, "webhook delivery is dead");
            }
        }
        count(&attempt);
        Ok(())
    }

    async fn publish(&mut self) -> Result<usize, sqlx::Error> {
        match &mut self.stream {
            Some(stream) => {
                stream
                    .publish_pending(&self.pool, self.settings.batch)
                    .await
            }
            None => Ok(0),
        }
    }
}

const UNRECORDED: &str =
    "cannot record a webhook attempt; its lease will run out and it is sent again";

/// A round or a record that failed. Either way the next round tries again (the database
/// decides every step's effect), but only a transient failure (an outage, a lock) can mend by
/// itself: a permanent one (a corrupt row, a refused statement) fails every round until someone
/// repairs it, so it is logged at error level and counted for an alert.
fn failed(what: &str, error: sqlx::Error) {
    let error = StoreError::from(error);
    if error.is_transient() {
        tracing::warn!(%error, "{what}");
    } else {
        metrics::counter!("wallet_ledger_outbox_permanent_errors_total").increment(1);
        tracing::error!(%error, "{what}, but retrying will not mend it");
    }
}

/// What a send task hands back: the delivery, when it started, how long it took, and how it
/// ended.
type Sent = (Claimed, chrono::DateTime<Utc>, Duration, Attempt);

/// The requests a dispatcher has in flight, and how many of them each subscription has.
#[derive(Default)]
struct InFlight {
    sends: tokio::task::JoinSet<Sent>,
    per_subscription: std::collections::HashMap<uuid::Uuid, usize>,
}

/// The resolver's refusal inside a request error, if that is why it failed.
fn not_public(error: &reqwest::Error) -> Option<&super::address::NotPublic> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(error);
    while let Some(e) = source {
        if let Some(refused) = e.downcast_ref::<super::address::NotPublic>() {
            return Some(refused);
        }
        source = e.source();
    }
    None
}

fn count(attempt: &Attempt) {
    let outcome = match attempt {
        Attempt::Delivered { .. } => "delivered",
        Attempt::Retry { .. } => "retried",
        Attempt::Dead { .. } => "dead",
    };
    metrics::counter!("wallet_ledger_webhook_attempts_total", "outcome" => outcome).increment(1);
}

/// The JSON a receiver gets: the event, as the Standard Webhooks convention shapes it.
pub fn body(delivery: &Claimed) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "id": delivery.event_id,
        "type": delivery.event_type,
        "timestamp": delivery.event_created_at,
        "data": delivery.data,
    }))
    .expect("an event always serializes")
}

async fn send(client: &reqwest::Client, settings: &Settings, delivery: &Claimed) -> Attempt {
    // Checked at each send: the allow-list may have changed since the subscription was made.
    if let Err(refused) = settings.policy.check(&delivery.url) {
        return Attempt::Dead {
            status: None,
            error: format!("the URL is refused: {}", refused.message),
        };
    }
    match signed_request(client, delivery).send().await {
        Ok(response) => {
            let retry_after = response.headers().get("retry-after");
            let retry_after = retry_after.and_then(|v| v.to_str().ok());
            answered(response.status(), retry_after, settings, delivery.attempts)
        }
        Err(e) => {
            let error = request_error(e, settings);
            if delivery.attempts >= settings.max_attempts {
                return budget_spent(None, error, settings);
            }
            Attempt::Retry {
                status: None,
                error,
                at: retry_at(settings.delay_after(delivery.attempts)),
            }
        }
    }
}

/// The POST of one delivery with the Standard Webhooks headers, signed now with every secret
/// of its subscription (a rotation signs with the old and the new), and the event id as
/// `Idempotency-Key` so a receiver can drop a delivery it has already taken.
fn signed_request(client: &reqwest::Client, delivery: &Claimed) -> reqwest::RequestBuilder {
    let body = body(delivery);
    let id = delivery.event_id.to_string();
    let timestamp = Utc::now().timestamp();
    let signature = signing::signature_header(&delivery.secrets, &id, timestamp, &body);
    client
        .post(&delivery.url)
        .header("content-type", "application/json")
        .header("webhook-id", &id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature)
        .header("idempotency-key", &id)
        .body(body)
}

/// How a receiver's answer ends attempt number `attempts`: a 2xx is delivered; a 5xx, 408 or
/// 429 is retried (after the receiver's `Retry-After` in seconds, capped at the longest
/// backoff, else after the backoff) until the budget is spent; anything else is final.
fn answered(
    status: reqwest::StatusCode,
    retry_after: Option<&str>,
    settings: &Settings,
    attempts: i32,
) -> Attempt {
    let code = status.as_u16();
    if status.is_success() {
        return Attempt::Delivered { status: code };
    }
    let retryable = status.is_server_error() || code == 408 || code == 429;
    let error = format!("the receiver answered {status}");
    if !retryable {
        let why = if status.is_redirection() {
            " (redirects are not followed)"
        } else {
            " (final)"
        };
        return Attempt::Dead {
            status: Some(code),
            error: format!("{error}{why}"),
        };
    }
    if attempts >= settings.max_attempts {
        return budget_spent(Some(code), error, settings);
    }
    let asked = retry_after
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|s| Duration::from_secs(s).min(settings.backoff_max));
    let delay = asked.unwrap_or_else(|| settings.delay_after(attempts));
    Attempt::Retry {
        status: Some(code),
        error,
        at: retry_at(delay),
    }
}

/// Why a request got no answer, as the delivery's last error says it.
fn request_error(e: reqwest::Error, settings: &Settings) -> String {
    if e.is_timeout() {
        format!("no answer within {:?}", settings.timeout)
    } else if let Some(refused) = not_public(&e) {
        format!("refused: {refused}")
    } else if e.is_connect() {
        "the receiver could not be reached".to_owned()
    } else {
        format!("the request failed: {}", e.without_url())
    }
}

/// `after` from now. Checked: a receiver's `Retry-After` or a configured backoff past the
/// calendar's end retries at the latest time that can be stored, never panics.
fn retry_at(after: Duration) -> chrono::DateTime<Utc> {
    let now = Utc::now();
    chrono::TimeDelta::from_std(after)
        .ok()
        .and_then(|after| now.checked_add_signed(after))
        .unwrap_or(chrono::DateTime::<Utc>::MAX_UTC)
}

fn budget_spent(status: Option<u16>, error: String, settings: &Settings) -> Attempt {
    Attempt::Dead {
        status,
        error: format!(
            "{error}; the retry budget ({} attempts) is spent",
            settings.max_attempts
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::StatusCode;

    fn settings() -> Settings {
        Settings {
            interval: Duration::from_millis(10),
            batch: 10,
            timeout: Duration::from_secs(1),
            max_attempts: 5,
            backoff: Duration::from_millis(100),
            backoff_max: Duration::from_millis(1_000),
            policy: UrlPolicy::default(),
            concurrency: 4,
            per_subscription: 2,
            events_stream: None,
        }
    }

    #[test]
    fn a_2xx_is_delivered_and_other_answers_outside_408_429_and_5xx_are_final() {
        let s = settings();
        let answer = |code: u16| answered(StatusCode::from_u16(code).unwrap(), None, &s, 1);
        assert_eq!(answer(204), Attempt::Delivered { status: 204 });
        assert_eq!(
            answer(404),
            Attempt::Dead {
                status: Some(404),
                error: "the receiver answered 404 Not Found (final)".into()
            }
        );
        assert_eq!(
            answer(301),
            Attempt::Dead {
                status: Some(301),
                error: "the receiver answered 301 Moved Permanently (redirects are not followed)"
                    .into()
            }
        );
    }

    #[test]
    fn a_retryable_answer_waits_as_asked_within_the_longest_backoff_until_the_budget() {
        let s = settings();
        for (code, retry_after, at_most) in [
            (503, Some("0"), 0),
            (429, Some(" 3600 "), 1_000),
            (408, Some("soon"), 100),
            (500, None, 100),
        ] {
            let before = Utc::now();
            let attempt = answered(StatusCode::from_u16(code).unwrap(), retry_after, &s, 1);
            let Attempt::Retry { status, error, at } = attempt else {
                panic!("{code} {retry_after:?}: {attempt:?}");
            };
            assert_eq!(status, Some(code));
            assert!(error.starts_with(&format!("the receiver answered {code} ")));
            let waits = (at - before).num_milliseconds();
            assert!((0..=at_most + 50).contains(&waits), "{code}: {waits} ms");
        }
        assert_eq!(
            answered(StatusCode::BAD_GATEWAY, None, &s, s.max_attempts),
            Attempt::Dead {
                status: Some(502),
                error: "the receiver answered 502 Bad Gateway; the retry budget (5 attempts) \
                        is spent"
                    .into()
            }
        );
    }

    #[test]
    fn a_delay_past_the_calendar_retries_at_the_latest_storable_time() {
        assert_eq!(retry_at(Duration::MAX), chrono::DateTime::<Utc>::MAX_UTC);
    }

    #[test]
    fn the_backoff_doubles_within_its_cap_with_jitter() {
        let s = settings();
        for (attempts, full) in [
            (1, 100),
            (2, 200),
            (3, 400),
            (4, 800),
            (5, 1_000),
            (40, 1_000),
        ] {
            for _ in 0..20 {
                let d = s.delay_after(attempts).as_millis() as u64;
                assert!((full / 2..=full).contains(&d), "attempt {attempts}: {d} ms");
            }
        }
    }
}
