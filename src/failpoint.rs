//! Fail points: named sites where a test can make the process die as if the machine lost power.
//!
//! `WALLET_LEDGER_FAILPOINT=consumer.after_commit` kills the process with SIGKILL the first time
//! it reaches that site; `consumer.after_commit@3` the third time. SIGKILL, not a panic or an
//! exit: no destructor, no flush, no acknowledgement runs, exactly like a crash. Unset (the
//! production case), a site costs one comparison.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

pub const ENV: &str = "WALLET_LEDGER_FAILPOINT";

/// The stream consumer's sites.
pub const CONSUMER_BEFORE_COMMIT: &str = "consumer.before_commit";
pub const CONSUMER_AFTER_COMMIT: &str = "consumer.after_commit";
pub const CONSUMER_MID_BATCH: &str = "consumer.mid_batch";
/// The webhook dispatcher's site: a delivery sent, its result not yet recorded.
pub const OUTBOX_AFTER_SEND: &str = "outbox.after_send";

struct Armed {
    site: String,
    on_hit: u64,
}

fn armed() -> Option<&'static Armed> {
    static ARMED: OnceLock<Option<Armed>> = OnceLock::new();
    ARMED
        .get_or_init(|| {
            let value = std::env::var(ENV).ok()?;
            let (site, on_hit) = match value.split_once('@') {
                Some((site, n)) => (site.to_owned(), n.parse().unwrap_or(1)),
                None => (value, 1),
            };
            Some(Armed { site, on_hit })
        })
        .as_ref()
}

/// Dies here if the fail point `site` is armed and this is the hit it waits for.
pub fn hit(site: &str) {
    let Some(armed) = armed() else { return };
    if armed.site != site {
        return;
    }
    static HITS: Mutex<Option<HashMap<String, u64>>> = Mutex::new(None);
    let count = {
        let mut hits = HITS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let count = hits
            .get_or_insert_with(HashMap::new)
            .entry(site.to_owned())
            .or_default();
        *count += 1;
        *count
    };
    if count == armed.on_hit {
        eprintln!("fail point {site} reached (hit {count}): SIGKILL");
        // SAFETY: kill(2) on our own pid has no memory-safety preconditions.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
    }
}

/// Fail points that do not kill but make one site fail once, for one label (a request id):
/// in-process tests arm them for their own request only, so tests running beside them in the
/// same process are not touched.
static LABELLED: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());
/// Unarmed (the production case), [`hit_for`] costs one load.
static ANY_LABELLED: AtomicBool = AtomicBool::new(false);

/// Arms `site` to fail once for `label`.
pub fn arm_for(site: &str, label: &str) {
    let mut armed = LABELLED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    armed.push((site.to_owned(), label.to_owned()));
    ANY_LABELLED.store(true, Ordering::Release);
}

/// Whether `site` is armed for `label`; disarms it (it fails once).
pub fn hit_for(site: &str, label: &str) -> bool {
    if !ANY_LABELLED.load(Ordering::Acquire) {
        return false;
    }
    let mut armed = LABELLED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    match armed.iter().position(|(s, l)| s == site && l == label) {
        Some(index) => {
            armed.swap_remove(index);
            true
        }
        None => false,
    }
}
