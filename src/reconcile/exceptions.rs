//! Where a run's exceptions go as they are found, so that a run's memory does not grow with
//! its file: every exception is counted per code, the first few of each code are kept for the
//! stored run and the HTML and JSON reports, and, when exceptions.csv is asked for, every one
//! is written to it as it comes (through a temporary name, renamed when the run succeeds).

use super::model::{Exception, ExceptionCode};
use super::report;
use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

pub struct ExceptionSink {
    per_code_limit: usize,
    counts: BTreeMap<ExceptionCode, i64>,
    listed: Vec<Exception>,
    listed_per_code: BTreeMap<ExceptionCode, usize>,
    csv: Option<FullCsv>,
}

/// exceptions.csv being written: `partial` until `finish` renames it to `path`.
struct FullCsv {
    partial: PathBuf,
    path: PathBuf,
    out: BufWriter<std::fs::File>,
}

impl Drop for FullCsv {
    fn drop(&mut self) {
        // Still there only when the run did not finish: a half list must not pass for a report.
        let _ = std::fs::remove_file(&self.partial);
    }
}

/// What a sink kept, once the run is over.
#[derive(Debug, Default)]
pub struct Collected {
    /// Every code (zeros included) with its exact count.
    pub counts: BTreeMap<ExceptionCode, i64>,
    /// The first `per_code_limit` of each code, in the order they were found.
    pub listed: Vec<Exception>,
}

/// The full exceptions.csv, written but not yet under its name: `publish` it once the run
/// is stored; dropped, it is removed.
pub struct PendingCsv(Option<FullCsv>);

impl PendingCsv {
    pub fn publish(mut self) -> std::io::Result<Option<PathBuf>> {
        match self.0.take() {
            None => Ok(None),
            Some(csv) => {
                std::fs::rename(&csv.partial, &csv.path)?;
                Ok(Some(csv.path.clone()))
            }
        }
    }
}

impl ExceptionSink {
    /// Keeps `per_code_limit` exceptions of each code; with `full_csv`, writes every exception
    /// to that file.
    pub fn new(per_code_limit: usize, full_csv: Option<&Path>) -> std::io::Result<ExceptionSink> {
        let csv = match full_csv {
            None => None,
            Some(path) => {
                let partial = path.with_extension(format!("csv.partial-{}", std::process::id()));
                let mut out = BufWriter::new(std::fs::File::create(&partial)?);
                out.write_all(report::CSV_HEADER.as_bytes())?;
                Some(FullCsv {
                    partial,
                    path: path.to_owned(),
                    out,
                })
            }
        };
        Ok(ExceptionSink {
            per_code_limit,
            counts: ExceptionCode::ALL.into_iter().map(|c| (c, 0)).collect(),
            listed: Vec::new(),
            listed_per_code: BTreeMap::new(),
            csv,
        })
    }

    pub fn push(&mut self, exception: Exception) -> std::io::Result<()> {
        *self.counts.entry(exception.code).or_default() += 1;
        if let Some(csv) = &mut self.csv {
            csv.out
                .write_all(report::exception_csv_row(&exception).as_bytes())?;
        }
        let listed = self.listed_per_code.entry(exception.code).or_default();
        if *listed < self.per_code_limit {
            *listed += 1;
            self.listed.push(exception);
        }
        Ok(())
    }

    pub fn total(&self) -> i64 {
        self.counts.values().sum()
    }

    /// Ends the run's list; the full exceptions.csv (if any) is flushed, still unnamed.
    pub fn finish(mut self) -> std::io::Result<(Collected, PendingCsv)> {
        let mut csv = self.csv.take();
        if let Some(csv) = &mut csv {
            csv.out.flush()?;
        }
        Ok((
            Collected {
                counts: std::mem::take(&mut self.counts),
                listed: std::mem::take(&mut self.listed),
            },
            PendingCsv(csv),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exception(code: ExceptionCode, line: i64) -> Exception {
        Exception {
            code,
            payment_id: None,
            external_ref: Some(format!("ref_{line}")),
            line: Some(line),
            reasons: vec![format!("reason {line}")],
        }
    }

    #[test]
    fn every_exception_is_counted_and_written_and_a_few_of_each_code_kept() {
        let dir = std::env::temp_dir().join(format!("wl-sink-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("exceptions.csv");
        let mut sink = ExceptionSink::new(2, Some(&path)).unwrap();
        for line in 0..5 {
            sink.push(exception(ExceptionCode::UnparsableRow, line))
                .unwrap();
        }
        sink.push(exception(ExceptionCode::AmountMismatch, 9))
            .unwrap();
        assert_eq!(sink.total(), 6);
        assert!(
            !path.exists(),
            "written under a temporary name until finished"
        );
        let (collected, pending) = sink.finish().unwrap();
        assert!(!path.exists(), "named only when published");
        let published = pending.publish().unwrap();
        assert_eq!(collected.counts[&ExceptionCode::UnparsableRow], 5);
        assert_eq!(collected.counts[&ExceptionCode::AmountMismatch], 1);
        assert_eq!(collected.counts[&ExceptionCode::MissingInLedger], 0);
        let lines: Vec<Option<i64>> = collected.listed.iter().map(|e| e.line).collect();
        assert_eq!(lines, [Some(0), Some(1), Some(9)]);
        let csv = std::fs::read_to_string(&path).unwrap();
        assert_eq!(csv.lines().count(), 1 + 6, "{csv}");
        assert_eq!(published, Some(path));
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "no partial file left"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn an_unfinished_or_unpublished_run_leaves_no_partial_list() {
        let dir = std::env::temp_dir().join(format!("wl-sink-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut sink = ExceptionSink::new(2, Some(&dir.join("exceptions.csv"))).unwrap();
        sink.push(exception(ExceptionCode::UnparsableRow, 1))
            .unwrap();
        drop(sink);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        let mut sink = ExceptionSink::new(2, Some(&dir.join("exceptions.csv"))).unwrap();
        sink.push(exception(ExceptionCode::UnparsableRow, 1))
            .unwrap();
        let (_, pending) = sink.finish().unwrap();
        drop(pending);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
