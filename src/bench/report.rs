//! What a scenario measured, as one JSON line: throughput, latency percentiles, the CPU of this
//! process, of the child under test and of PostgreSQL, and the verdict of the scenario's own
//! check. Floats appear only here, for timing statistics; money stays in integers.

use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Request latencies in microseconds (a u32 holds over an hour).
#[derive(Debug, Default, Clone)]
pub struct Latencies(Vec<u32>);

impl Latencies {
    pub fn with_capacity(n: usize) -> Latencies {
        Latencies(Vec::with_capacity(n))
    }

    pub fn record(&mut self, elapsed: Duration) {
        self.0
            .push(u32::try_from(elapsed.as_micros()).unwrap_or(u32::MAX));
    }

    pub fn extend(&mut self, other: Latencies) {
        self.0.extend(other.0);
    }

    /// Milliseconds at percentile `p` (0-100), nearest rank; `None` without samples.
    pub fn percentile_ms(&mut self, p: f64) -> Option<f64> {
        if self.0.is_empty() {
            return None;
        }
        self.0.sort_unstable();
        let rank = ((p / 100.0) * self.0.len() as f64).ceil() as usize;
        let micros = self.0[rank.clamp(1, self.0.len()) - 1];
        Some(round(f64::from(micros) / 1_000.0, 3))
    }
}

/// CPU used over one measured phase, as a percentage of one core over its wall time (200 is
/// both cores of this machine busy).
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuUse {
    pub seconds: f64,
    pub client_pct: f64,
    pub server_pct: Option<f64>,
    pub db_pct: Option<f64>,
    /// Every process on the host: what the others do not explain was someone else's load,
    /// which makes the figures unfair.
    pub host_pct: Option<f64>,
}

/// Started when the measured phase starts; `stop` gives the phase's wall time and CPU.
pub struct CpuClock {
    wall: Instant,
    own: Duration,
    child: Option<(u32, u64)>,
    db: Option<u64>,
    host: Option<u64>,
}

impl CpuClock {
    /// `child`: the server or consumer process whose CPU the line reports.
    /// Also restarts the child's peak resident set, so that the peak a line reports is the
    /// timed phase's, not the set-up's (funding wallets through 1,000-item batches, say).
    pub fn start(child: Option<u32>) -> CpuClock {
        if let Some(pid) = child {
            reset_peak_rss(pid);
        }
        CpuClock {
            child: child.and_then(|pid| Some((pid, process_ticks(pid)?))),
            db: postgres_ticks(),
            host: host_busy_ticks(),
            own: own_cpu(),
            wall: Instant::now(),
        }
    }

    /// Follows a child started after the clock: all of its CPU falls in the phase.
    pub fn follow_new_child(&mut self, pid: u32) {
        self.child = Some((pid, 0));
    }

    pub fn stop(self) -> CpuUse {
        let wall = self.wall.elapsed();
        let own = own_cpu().saturating_sub(self.own);
        let seconds = wall.as_secs_f64().max(1e-9);
        let ticks_pct = |ticks: u64| round(ticks as f64 / clock_ticks() / seconds * 100.0, 1);
        CpuUse {
            seconds,
            client_pct: round(own.as_secs_f64() / seconds * 100.0, 1),
            server_pct: self.child.and_then(|(pid, before)| {
                Some(ticks_pct(process_ticks(pid)?.saturating_sub(before)))
            }),
            db_pct: self
                .db
                .and_then(|before| Some(ticks_pct(postgres_ticks()?.saturating_sub(before)))),
            host_pct: self
                .host
                .and_then(|before| Some(ticks_pct(host_busy_ticks()?.saturating_sub(before)))),
        }
    }
}

/// User + system CPU of this process (every thread), from getrusage(RUSAGE_SELF).
fn own_cpu() -> Duration {
    // SAFETY: getrusage only writes the struct it is given; a zeroed rusage is a valid value.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    timeval(usage.ru_utime) + timeval(usage.ru_stime)
}

pub fn timeval(t: libc::timeval) -> Duration {
    Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}

/// utime + stime of a live process, in clock ticks, from /proc/<pid>/stat.
fn process_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat_ticks(&stat).map(|(own, _)| own)
}

/// (utime + stime, cutime + cstime) from a stat line. The comm field may hold spaces and
/// parentheses: the fields that follow start after the last `)`. They are fields 14 to 17.
fn stat_ticks(stat: &str) -> Option<(u64, u64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    Some((field(11)? + field(12)?, field(13)? + field(14)?))
}

/// CPU of every process named `postgres` on this host (its backends, including other users'
/// sessions), plus what its exited children used (a backend that exits is reaped by the
/// postmaster, whose cutime and cstime then hold its CPU). A lower bound only where a process
/// both starts and ends between two /proc reads of its parent.
fn postgres_ticks() -> Option<u64> {
    let mut total = 0;
    let mut found = false;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if stat.contains("(postgres)")
            && let Some((own, children)) = stat_ticks(&stat)
        {
            total += own + children;
            found = true;
        }
    }
    found.then_some(total)
}

/// CPU of one PostgreSQL server on this host, in clock ticks: its postmaster with what its
/// exited children used, and every live child (backends, Citus's maintenance daemon). Unlike
/// `postgres_ticks`, it leaves out the host's other servers (the Citus nodes apart, and other
/// sessions' clusters). `None` when the postmaster is not a process of this host.
pub fn server_ticks(postmaster: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{postmaster}/stat")).ok()?;
    let (own, children) = stat_ticks(&stat)?;
    let mut total = own + children;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if stat_parent(&stat) == Some(postmaster)
            && let Some((own, _)) = stat_ticks(&stat)
        {
            total += own;
        }
    }
    Some(total)
}

/// The parent pid of a stat line (field 4, the second after the last `)`).
pub fn stat_parent(stat: &str) -> Option<u32> {
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Clock ticks over `seconds` of wall time, as a percentage of one core.
pub fn ticks_pct(ticks: u64, seconds: f64) -> f64 {
    round(ticks as f64 / clock_ticks() / seconds.max(1e-9) * 100.0, 1)
}

/// Busy time of every CPU of the host, in clock ticks: the first line of /proc/stat less its
/// idle and iowait columns.
fn host_busy_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal (guest time is already in user).
    let total: u64 = fields.iter().take(8).sum();
    Some(total - fields.get(3)? - fields.get(4)?)
}

/// Restarts VmHWM at the current resident set (`5` to `/proc/<pid>/clear_refs`, Linux 4.0+).
/// Where that cannot be done the peak covers the child's whole life, which overstates it.
fn reset_peak_rss(pid: u32) {
    if let Err(e) = std::fs::write(format!("/proc/{pid}/clear_refs"), "5") {
        tracing::warn!(pid, error = %e, "cannot restart the peak resident set; it covers the set-up too");
    }
}

/// The peak resident set (VmHWM) of a live process, in MiB.
pub fn peak_rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(round(kib as f64 / 1024.0, 1))
}

pub fn round(value: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (value * scale).round() / scale
}

/// A scenario's check: passed when it found nothing wrong.
#[derive(Debug, Default)]
pub struct Check(Vec<String>);

impl Check {
    /// Records `problem` unless `ok`.
    pub fn expect(&mut self, ok: bool, problem: impl FnOnce() -> String) {
        if !ok {
            self.0.push(problem());
        }
    }

    pub fn passed(&self) -> bool {
        self.0.is_empty()
    }

    pub fn verdict(&self) -> String {
        if self.0.is_empty() {
            "passed".to_owned()
        } else {
            self.0.join("; ")
        }
    }
}

/// What one scenario (or one half of api-replay) measured. The runner adds the time, the
/// commit and the ratio to the ceiling.
#[derive(Debug, Default)]
pub struct Measurement {
    pub scenario: String,
    /// The sizes and settings it ran with.
    pub params: BTreeMap<&'static str, Value>,
    pub ops: u64,
    pub errors: u64,
    pub cpu: CpuUse,
    pub latencies: Latencies,
    pub server_peak_rss_mib: Option<f64>,
    /// Figures of its own (payments/s, per-size p50s, ...).
    pub extra: BTreeMap<&'static str, Value>,
    pub check: Check,
}

/// The JSON line, fields in a fixed order (the scenario's own parameters and figures sorted
/// within their groups).
#[derive(Debug, Serialize)]
pub struct Line {
    pub scenario: String,
    pub at: String,
    pub git: Option<String>,
    #[serde(flatten)]
    pub params: BTreeMap<&'static str, Value>,
    pub ops: u64,
    pub errors: u64,
    pub seconds: f64,
    pub per_second: f64,
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub client_cpu_pct: f64,
    pub server_cpu_pct: Option<f64>,
    pub server_peak_rss_mib: Option<f64>,
    /// Every postgres process on the host (exited backends included), over the same phase.
    pub db_cpu_pct: Option<f64>,
    /// Every process on the host, 100 per core (`host_cores`).
    pub host_cpu_pct: Option<f64>,
    pub host_cores: usize,
    /// `per_second` over the ceiling's `per_second` (this run's, else the results file's).
    pub ratio: Option<f64>,
    pub ceiling_per_second: Option<f64>,
    #[serde(flatten)]
    pub extra: BTreeMap<&'static str, Value>,
    pub check: String,
}

impl Measurement {
    pub fn per_second(&self) -> f64 {
        round(self.ops as f64 / self.cpu.seconds.max(1e-9), 1)
    }

    pub fn into_line(mut self, git: Option<String>, ceiling: Option<f64>) -> Line {
        let per_second = self.per_second();
        Line {
            at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            git,
            ops: self.ops,
            errors: self.errors,
            seconds: round(self.cpu.seconds, 3),
            per_second,
            p50_ms: self.latencies.percentile_ms(50.0),
            p95_ms: self.latencies.percentile_ms(95.0),
            p99_ms: self.latencies.percentile_ms(99.0),
            client_cpu_pct: self.cpu.client_pct,
            server_cpu_pct: self.cpu.server_pct,
            server_peak_rss_mib: self.server_peak_rss_mib,
            db_cpu_pct: self.cpu.db_pct,
            host_cpu_pct: self.cpu.host_pct,
            host_cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            ratio: ceiling
                .filter(|c| *c > 0.0)
                .map(|c| round(per_second / c, 4)),
            ceiling_per_second: ceiling,
            check: self.check.verdict(),
            scenario: self.scenario,
            params: self.params,
            extra: self.extra,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let mut l = Latencies::default();
        assert_eq!(l.percentile_ms(50.0), None);
        for us in (1..=100).rev() {
            l.record(Duration::from_micros(us * 1_000));
        }
        assert_eq!(l.percentile_ms(50.0), Some(50.0));
        assert_eq!(l.percentile_ms(95.0), Some(95.0));
        assert_eq!(l.percentile_ms(99.0), Some(99.0));
        assert_eq!(l.percentile_ms(100.0), Some(100.0));
    }

    #[test]
    fn stat_lines_with_odd_process_names_parse() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194304 100 0 0 0 7 5 3 1 20 0 1 0 1 1 1";
        assert_eq!(stat_ticks(stat), Some((12, 4)));
        assert_eq!(stat_parent(stat), Some(1));
    }

    #[test]
    fn a_check_lists_every_problem() {
        let mut check = Check::default();
        check.expect(true, || "never".into());
        assert_eq!(check.verdict(), "passed");
        check.expect(false, || "a".into());
        check.expect(false, || "b".into());
        assert_eq!(check.verdict(), "a; b");
    }
}
