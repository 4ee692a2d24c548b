//! The processes under test: the same binary as in production (`serve`, `consume`,
//! `reconcile`), each with its log in the run's directory. A child is killed when its handle
//! is dropped, and dies with the bench (`PR_SET_PDEATHSIG`), so neither an error nor a
//! killed bench leaves an orphan behind.

use super::report;
use anyhow::{Context, anyhow, bail};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long `serve` may take to answer `/readyz` (it migrates first).
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a child may take to stop after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(15);

pub struct Child {
    process: std::process::Child,
    name: String,
    pub log: PathBuf,
    reaped: bool,
}

/// What a child that ran to its end used, from wait4(2).
#[derive(Debug, Clone, Copy)]
pub struct Finished {
    pub code: Option<i32>,
    pub cpu: Duration,
    pub peak_rss_mib: f64,
}

impl Child {
    /// Starts `binary args` with `RUST_LOG=info`, stdout and stderr to `log`.
    pub fn spawn(
        binary: &Path,
        args: &[String],
        log: PathBuf,
        name: &str,
    ) -> anyhow::Result<Child> {
        let file = std::fs::File::create(&log)
            .with_context(|| format!("creating the log file {}", log.display()))?;
        let mut command = std::process::Command::new(binary);
        command
            .args(args)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .env_remove("WALLET_LEDGER_FAILPOINT")
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file);
        // SAFETY: the closure runs in the forked child before exec and only makes one
        // async-signal-safe system call.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let process = command
            .spawn()
            .with_context(|| format!("starting {} {name}", binary.display()))?;
        Ok(Child {
            process,
            name: name.to_owned(),
            log,
            reaped: false,
        })
    }

    pub fn pid(&self) -> u32 {
        self.process.id()
    }

    pub fn peak_rss_mib(&self) -> Option<f64> {
        report::peak_rss_mib(self.pid())
    }

    /// Its exit status if it has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        let status = self.process.try_wait().ok().flatten();
        if status.is_some() {
            self.reaped = true;
        }
        status
    }

    /// SIGTERM, then SIGKILL after a grace period; its exit status.
    pub async fn stop(mut self) -> anyhow::Result<ExitStatus> {
        // SAFETY: kill(2) on our own, not yet reaped child.
        unsafe {
            libc::kill(self.pid() as i32, libc::SIGTERM);
        }
        let until = Instant::now() + STOP_GRACE;
        while Instant::now() < until {
            if let Some(status) = self.exited() {
                return Ok(status);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let _ = self.process.kill();
        self.process.wait()?;
        self.reaped = true;
        bail!(
            "{} did not stop within {} s of SIGTERM and was killed (log: {})",
            self.name,
            STOP_GRACE.as_secs(),
            self.log.display()
        )
    }

    /// Waits for its end; its exit code and what it used (CPU, peak memory).
    pub async fn finish(mut self) -> anyhow::Result<Finished> {
        let pid = self.pid() as libc::pid_t;
        let waited = tokio::task::spawn_blocking(move || {
            let mut status = 0;
            // SAFETY: wait4 writes only to the two out-parameters; a zeroed rusage is valid.
            let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
            let got = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
            (got, status, usage)
        })
        .await?;
        let (got, status, usage) = waited;
        if got != pid {
            bail!(
                "waiting for {}: {}",
                self.name,
                std::io::Error::last_os_error()
            );
        }
        self.reaped = true;
        let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
        Ok(Finished {
            code,
            cpu: report::timeval(usage.ru_utime) + report::timeval(usage.ru_stime),
            // Linux reports ru_maxrss in KiB.
            peak_rss_mib: report::round(usage.ru_maxrss as f64 / 1024.0, 1),
        })
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = self.process.kill();
            let _ = self.process.wait();
        }
    }
}

/// A `serve` child on a free port of 127.0.0.1.
pub struct Server {
    pub child: Child,
    pub base_url: String,
}

/// A free TCP port on 127.0.0.1 (bound, then released for the child to bind).
fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Starts `serve` on `database_url` with authentication on and the rate limit out of the way,
/// plus `extra` flags, and waits until `/readyz` answers 200.
pub async fn start_server(
    binary: &Path,
    database_url: &str,
    extra: &[String],
    log: PathBuf,
) -> anyhow::Result<Server> {
    let addr = format!("127.0.0.1:{}", free_port()?);
    let limit = super::BENCH_RATE_LIMIT.to_string();
    let mut args: Vec<String> = [
        "serve",
        "--database-url",
        database_url,
        "--listen-addr",
        &addr,
        "--rate-limit-per-second",
        &limit,
        "--rate-limit-burst",
        &limit,
    ]
    .map(str::to_owned)
    .to_vec();
    args.extend(extra.iter().cloned());
    let mut child = Child::spawn(binary, &args, log, "serve")?;
    let base_url = format!("http://{addr}");
    let probe = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()?;
    let until = Instant::now() + READY_TIMEOUT;
    loop {
        if let Some(status) = child.exited() {
            return Err(anyhow!(
                "serve exited ({status}) before it was ready; its log: {}",
                child.log.display()
            ));
        }
        if let Ok(r) = probe.get(format!("{base_url}/readyz")).send().await
            && r.status().is_success()
        {
            return Ok(Server { child, base_url });
        }
        if Instant::now() > until {
            return Err(anyhow!(
                "serve did not answer /readyz within {} s; its log: {}",
                READY_TIMEOUT.as_secs(),
                child.log.display()
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
