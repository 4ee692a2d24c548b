//! docs/operations.md's configuration reference against the code: every subcommand (nested ones
//! included) has a `### <subcommand path>` section, every flag with a `--long` name has a row
//! `| `--flag` | `ENV` | default | meaning |` in its subcommand's table with the same
//! environment variable and default, and every row names a flag the code has. The code side
//! is `wallet_ledger::cli::Cli` itself (`clap::CommandFactory`), so a flag added, renamed or
//! given another default without the doc fails here.

use clap::CommandFactory;
use std::collections::BTreeMap;
use wallet_ledger::cli::Cli;

const DOC: &str = include_str!("../../docs/operations.md");
const SECTION: &str = "## Configuration reference";

/// One row of a doc table.
#[derive(Debug)]
struct Row {
    line: usize,
    env: Option<String>,
    default: String,
}

/// A subcommand's own flags, and the global flags it inherits from its parents.
type Flags = (BTreeMap<String, Flag>, BTreeMap<String, Flag>);

/// One flag in the code.
#[derive(Debug, Clone)]
struct Flag {
    env: Option<String>,
    defaults: Vec<String>,
    required: bool,
    takes_value: bool,
}

/// The reference's tables: subcommand path (`dlq list`) to its rows by flag.
fn doc_tables(doc: &str) -> BTreeMap<String, BTreeMap<String, Row>> {
    let start = doc
        .lines()
        .position(|l| l.trim() == SECTION)
        .unwrap_or_else(|| panic!("docs/operations.md has no `{SECTION}` section"));
    let mut tables: BTreeMap<String, BTreeMap<String, Row>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for (i, line) in doc.lines().enumerate().skip(start + 1) {
        let number = i + 1;
        if line.starts_with("## ") {
            break;
        }
        if let Some(heading) = line.strip_prefix("### ") {
            let path = heading.replace('`', "").trim().to_owned();
            assert!(
                !tables.contains_key(&path),
                "docs/operations.md line {number}: `### {path}` twice"
            );
            tables.insert(path.clone(), BTreeMap::new());
            current = Some(path);
            continue;
        }
        if !line.starts_with('|') {
            continue;
        }
        let cells: Vec<&str> = line
            .trim()
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        let flag = cells[0].replace('`', "");
        if !flag.starts_with("--") || flag.trim_start_matches('-').is_empty() {
            continue; // a header, a separator (`|---|`) or a row of another table
        }
        let path = current.clone().unwrap_or_else(|| {
            panic!("docs/operations.md line {number}: a flag row before any `### subcommand`")
        });
        assert!(
            cells.len() >= 4,
            "docs/operations.md line {number}: a row is | flag | environment | default | meaning |"
        );
        assert!(
            !flag.contains([' ', ',']),
            "docs/operations.md line {number}: one flag per row, without its value (`{flag}`)"
        );
        let env = cells[1].replace('`', "");
        let env = (!env.is_empty() && env != "—" && env != "-").then_some(env);
        let row = Row {
            line: number,
            env,
            default: cells[2].to_owned(),
        };
        let table = tables.get_mut(&path).unwrap();
        assert!(
            !table.contains_key(&flag),
            "docs/operations.md line {number}: `{flag}` twice under `### {path}`"
        );
        table.insert(flag, row);
    }
    tables
}

/// The code's subcommands, by path, each with its own flags and the global flags it inherits
/// from its parents (which the doc lists in the parent's table).
fn code_commands() -> BTreeMap<String, Flags> {
    fn walk(
        command: &clap::Command,
        path: &[String],
        inherited: &BTreeMap<String, Flag>,
        out: &mut BTreeMap<String, Flags>,
    ) {
        let mut own = BTreeMap::new();
        let mut globals = inherited.clone();
        for arg in command.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if matches!(long, "help" | "version") {
                continue;
            }
            let flag = Flag {
                env: arg.get_env().map(|e| e.to_string_lossy().into_owned()),
                defaults: arg
                    .get_default_values()
                    .iter()
                    .map(|v| v.to_string_lossy().into_owned())
                    .collect(),
                required: arg.is_required_set(),
                takes_value: arg.get_action().takes_values(),
            };
            if arg.is_global_set() {
                globals.insert(format!("--{long}"), flag.clone());
            }
            own.insert(format!("--{long}"), flag);
        }
        if !path.is_empty() {
            out.insert(path.join(" "), (own, inherited.clone()));
        }
        for sub in command.get_subcommands() {
            if sub.get_name() == "help" {
                continue;
            }
            let mut sub_path = path.to_vec();
            sub_path.push(sub.get_name().to_owned());
            walk(sub, &sub_path, &globals, out);
        }
    }
    let mut out = BTreeMap::new();
    walk(&Cli::command(), &[], &BTreeMap::new(), &mut out);
    out
}

/// The backticked spans of a cell: `` `a` (b) `c` `` gives `a`, `c`.
fn spans(cell: &str) -> Vec<&str> {
    cell.split('`').skip(1).step_by(2).collect()
}

fn compare(flag: &str, code: &Flag, row: &Row, path: &str, problems: &mut Vec<String>) {
    let at = format!(
        "docs/operations.md line {} (`### {path}`, `{flag}`)",
        row.line
    );
    if row.env != code.env {
        problems.push(format!(
            "{at}: environment {:?} in the doc, {:?} in the code",
            row.env, code.env
        ));
    }
    if code.required && !row.default.contains("required") {
        problems.push(format!(
            "{at}: the flag is required; say so in the default column"
        ));
    }
    if code.takes_value && !code.defaults.is_empty() {
        let shown = spans(&row.default);
        let joined = code.defaults.join(",");
        let all_shown = code.defaults.iter().all(|d| shown.contains(&d.as_str()));
        if !shown.contains(&joined.as_str()) && !all_shown {
            problems.push(format!(
                "{at}: the default column must show the code's default `{joined}` in \
                 backticks (it shows {:?})",
                row.default
            ));
        }
    }
}

#[test]
fn the_configuration_reference_matches_the_code() {
    let doc = doc_tables(DOC);
    let code = code_commands();
    assert!(
        code.contains_key("serve") && code.contains_key("dlq list"),
        "the walk found the subcommands: {:?}",
        code.keys().collect::<Vec<_>>()
    );
    let mut problems = Vec::new();
    for (path, (own, inherited)) in &code {
        let Some(table) = doc.get(path) else {
            problems.push(format!("docs/operations.md has no `### {path}` section"));
            continue;
        };
        for (flag, spec) in own {
            match table.get(flag) {
                Some(row) => compare(flag, spec, row, path, &mut problems),
                None => problems.push(format!(
                    "docs/operations.md: `{flag}` of `{path}` is missing from its table"
                )),
            }
        }
        for (flag, row) in table {
            if own.contains_key(flag) {
                continue;
            }
            match inherited.get(flag) {
                // A parent's global flag, repeated under the nested subcommand: allowed.
                Some(spec) => compare(flag, spec, row, path, &mut problems),
                None => problems.push(format!(
                    "docs/operations.md line {}: `{path}` has no flag `{flag}`",
                    row.line
                )),
            }
        }
    }
    for path in doc.keys() {
        if !code.contains_key(path) {
            problems.push(format!(
                "docs/operations.md: `### {path}` is not a subcommand of wallet-ledger"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "docs/operations.md's configuration reference disagrees with the flags in src/cli/:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn the_table_reader_reads_rows_and_defaults() {
    let doc = "# x\n\n## Configuration reference\n\n### dlq list\n\n\
               | flag | environment | default | meaning |\n|---|---|---|---|\n\
               | `--count` | | `100` | most |\n\n### serve\n\n\
               | `--listen-addr` | `LISTEN_ADDR` | `127.0.0.1:8080` (all: `0.0.0.0:8080`) | a |\n\n\
               ## Next\n\n### not-read\n| `--x` | | | |\n";
    let tables = doc_tables(doc);
    assert_eq!(tables.keys().collect::<Vec<_>>(), ["dlq list", "serve"]);
    let row = &tables["serve"]["--listen-addr"];
    assert_eq!(row.env.as_deref(), Some("LISTEN_ADDR"));
    assert_eq!(spans(&row.default), ["127.0.0.1:8080", "0.0.0.0:8080"]);
    assert_eq!(tables["dlq list"]["--count"].env, None);
}
