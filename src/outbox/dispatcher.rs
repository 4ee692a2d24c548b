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
use crate::config::{OutboxArgs, OutboxConfig, WebhookPolicy};
use crate::failpoint;
use chrono::Utc;
use serde_json::json;
use sqlx::PgPool;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

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
    pub events_stream: Option<(String, String)>,
}

impl Settings {
    pub fn new(config: &OutboxConfig, policy: &WebhookPolicy) -> Settings {
        Settings {
            interval: Duration::from_millis(config.outbox_interval_ms),
            batch: config.outbox_batch,
            timeout: Duration::from_millis(config.webhook_timeout_ms),
            max_attempts: config.webhook_max_attempts,
            backoff: Duration::from_millis(config.webhook_backoff_ms),
            backoff_max: Duration::from_millis(config.webhook_backoff_max_ms),
            policy: policy.url_policy(),
            concurrency: usize::try_from(config.webhook_concurrency).unwrap_or(usize::MAX),
            events_stream: config
                .events_stream
                .clone()
                .map(|s| (config.redis.url.clone(), s)),
        }
    }

    /// How long a claim lasts before another dispatcher may take the delivery again: twice the
    /// request timeout, so a live dispatcher always records before its lease runs out.
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
        let stream = match &settings.events_stream {
            Some((url, name)) => Some(super::stream::EventStream::connect(url, name).await?),
            None => None,
        };
        Ok(Dispatcher {
            pool,
            client,
            settings,
            stream,
        })
    }

    /// Fans out, then sends what is due, then (when configured) publishes to the stream.
    pub async fn step(&mut self) -> Result<StepReport, sqlx::Error> {
        let mut report = StepReport::default();
        let mut conn = self.pool.acquire().await?;
        report.fanned_out = deliveries::fan_out(&mut conn, self.settings.batch).await?;
        let claimed =
            deliveries::claim(&mut conn, self.settings.batch, self.settings.lease()).await?;
        drop(conn);
        report.claimed = claimed.len();
        let mut sends = tokio::task::JoinSet::new();
        let mut waiting = claimed.into_iter();
        loop {
            // At most `concurrency` requests in flight; each finished one lets the next go.
            while sends.len() < self.settings.concurrency.max(1) {
                let Some(delivery) = waiting.next() else {
                    break;
                };
                let client = self.client.clone();
                let settings = self.settings.clone();
                sends.spawn(async move {
                    let started_at = Utc::now();
                    let clock = Instant::now();
                    let attempt = send(&client, &settings, &delivery).await;
                    (delivery, started_at, clock.elapsed(), attempt)
                });
            }
            let Some(done) = sends.join_next().await else {
                break;
            };
            let Ok((delivery, started_at, took, attempt)) = done else {
                continue; // a send task panicked: its lease runs out and it is sent again
            };
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
        }
        if let Some(stream) = &mut self.stream {
            report.streamed = stream
                .publish_pending(&self.pool, self.settings.batch)
                .await?;
        }
        Ok(report)
    }

    /// Steps until `stop` turns true; sleeps `interval` only when a step found nothing to do.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) {
        loop {
            let busy = match self.step().await {
                Ok(r) => r.claimed > 0 || r.fanned_out > 0 || r.streamed > 0,
                Err(e) => {
                    tracing::warn!(error = %e, "outbox step failed; will retry");
                    false
                }
            };
            if *stop.borrow() {
                return;
            }
            if !busy {
                tokio::select! {
                    _ = tokio::time::sleep(self.settings.interval) => {}
                    _ = stop.changed() => return,
                }
            }
        }
    }
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
    if let Err(refused) = settings.policy.check(&delivery.url) {
        return Attempt::Dead {
            status: None,
            error: format!("the URL is refused: {}", refused.message),
        };
    }
    let body = body(delivery);
    let id = delivery.event_id.to_string();
    let timestamp = Utc::now().timestamp();
    let signature = signing::signature_header(&delivery.secrets, &id, timestamp, &body);
    let request = client
        .post(&delivery.url)
        .header("content-type", "application/json")
        .header("webhook-id", &id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature)
        .header("idempotency-key", &id)
        .body(body);
    // Checked: a receiver's `Retry-After` or a configured backoff past the calendar's end
    // retries at the latest time that can be stored, never panics.
    let retry_at = |after: Duration| {
        let now = Utc::now();
        chrono::TimeDelta::from_std(after)
            .ok()
            .and_then(|after| now.checked_add_signed(after))
            .unwrap_or(chrono::DateTime::<Utc>::MAX_UTC)
    };
    let give_up = delivery.attempts >= settings.max_attempts;
    match request.send().await {
        Ok(response) => {
            let status = response.status();
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
            if give_up {
                return budget_spent(Some(code), error, settings);
            }
            let asked = response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(|s| Duration::from_secs(s).min(settings.backoff_max));
            let delay = asked.unwrap_or_else(|| settings.delay_after(delivery.attempts));
            Attempt::Retry {
                status: Some(code),
                error,
                at: retry_at(delay),
            }
        }
        Err(e) => {
            let error = if e.is_timeout() {
                format!("no answer within {:?}", settings.timeout)
            } else if let Some(refused) = not_public(&e) {
                format!("refused: {refused}")
            } else if e.is_connect() {
                "the receiver could not be reached".to_owned()
            } else {
                format!("the request failed: {}", e.without_url())
            };
            if give_up {
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

fn budget_spent(status: Option<u16>, error: String, settings: &Settings) -> Attempt {
    Attempt::Dead {
        status,
        error: format!(
            "{error}; the retry budget ({} attempts) is spent",
            settings.max_attempts
        ),
    }
}

/// `wallet-ledger outbox`: the dispatcher alone, until SIGTERM/SIGINT.
pub async fn run_standalone(args: OutboxArgs) -> anyhow::Result<()> {
    let pool = crate::db::connect_and_migrate(&args.database).await?;
    let dispatcher =
        Dispatcher::new(pool.clone(), Settings::new(&args.outbox, &args.webhooks)).await?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let worker = tokio::spawn(dispatcher.run(stop_rx));
    tracing::info!("outbox dispatcher running");
    crate::shutdown_signal().await;
    let _ = stop_tx.send(true);
    let _ = worker.await;
    pool.close().await;
    tracing::info!("outbox dispatcher stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
            events_stream: None,
        }
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
