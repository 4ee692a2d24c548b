//! Every `curl` example of README.md and docs/*.md, run against a real `serve`: an example that
//! a reader copies must not answer 401 (a missing `Authorization`), 404 (a resource the text
//! never made) or a 5xx, unless the text says so.
//!
//! Per file, a fresh database and a `serve` on a free port; the file's shell blocks that run
//! `curl` (```` ```sh ````, ```` ```bash ````) are run in order by one `bash`, so a later block
//! sees what an earlier one made and the variables it set. The environment is the README
//! walk-through's: its `TOKEN=$(cargo run -q -- api-key create ...)` line runs first. The
//! examples stay verbatim; only the shell around them is stubbed:
//!
//! - `curl` goes to the test's port (`--connect-to` for `localhost:8080` and
//!   `127.0.0.1:8080`) and reports each answer's status with the doc line that made it;
//! - `cargo run [-q] -- <subcommand>` and `wallet-ledger <subcommand>` run the built binary
//!   against the test's database (`serve` is already running, so it does nothing);
//! - `sleep` returns at once (the examples wait only for background work they do not check).
//!
//! What the text may predict: a `# NNN` comment right after a command (on its last line or
//! the next) is the status it answers, and the test holds it to that. A block preceded by the
//! line `<!-- doc-examples: skip (why) -->` is a template (placeholders such as `<id>`) and is
//! not run.

use super::common::TestApp;
use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;
use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_wallet-ledger");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const SKIP: &str = "<!-- doc-examples: skip";

/// One fenced shell block of a doc.
#[derive(Debug)]
struct Block {
    /// The doc line (1-based) of the block's first line of content.
    first_line: usize,
    lines: Vec<String>,
}

/// One `curl` command of a block: the doc lines it spans and the status its text predicts.
#[derive(Debug, PartialEq)]
struct Example {
    first_line: usize,
    last_line: usize,
    expected: Option<u16>,
}

/// The shell blocks of `doc` that run `curl`, minus those marked as templates.
fn curl_blocks(doc: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<(Block, bool)> = None;
    let mut previous = "";
    for (i, line) in doc.lines().enumerate() {
        let fence = line.trim_start().starts_with("```");
        match open.take() {
            Some((block, runs)) if fence => {
                let runs_curl = runs && block.lines.iter().any(|l| runs_curl(l));
                blocks.extend(runs_curl.then_some(block));
            }
            Some((mut block, runs)) => {
                block.lines.push(line.to_owned());
                open = Some((block, runs));
            }
            None if fence => {
                let language = line.trim_start().trim_start_matches('`').trim();
                let shell = matches!(language, "sh" | "bash" | "shell");
                let block = Block {
                    first_line: i + 2,
                    lines: Vec::new(),
                };
                open = Some((block, shell && !previous.trim().starts_with(SKIP)));
            }
            None => {}
        }
        if !line.trim().is_empty() {
            previous = line;
        }
    }
    blocks
}

/// Whether a shell line calls `curl` (as a command, not in a comment or a sentence).
fn runs_curl(line: &str) -> bool {
    let code = line.split(" #").next().unwrap_or("");
    !code.trim_start().starts_with('#')
        && code
            .split(|c: char| c.is_whitespace() || matches!(c, ';' | '{' | '(' | '|' | '&'))
            .any(|word| word == "curl")
}

/// The `curl` commands of a block, each with its continuation lines and its predicted status.
fn examples(block: &Block) -> Vec<Example> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < block.lines.len() {
        if !runs_curl(&block.lines[i]) {
            i += 1;
            continue;
        }
        let first = i;
        while block.lines[i].trim_end().ends_with('\\') && i + 1 < block.lines.len() {
            i += 1;
        }
        let trailing = block.lines[i].split(" #").nth(1).map(str::to_owned);
        let next = block.lines.get(i + 1).map(|l| l.trim());
        let comment = trailing.or(next
            .filter(|l| l.starts_with('#'))
            .map(|l| l.trim_start_matches('#').to_owned()));
        out.push(Example {
            first_line: block.first_line + first,
            last_line: block.first_line + i,
            expected: comment.as_deref().and_then(predicted_status),
        });
        i += 1;
    }
    out
}

/// `# 404 not_found until ...` predicts 404; a comment that does not start with a status
/// predicts nothing.
fn predicted_status(comment: &str) -> Option<u16> {
    let word = comment.trim().split(|c: char| !c.is_ascii_digit()).next()?;
    let status: u16 = word.parse().ok()?;
    (100..600).contains(&status).then_some(status)
}

/// Stubs for what surrounds the examples (see the module comment). `curl` reports
/// `@@doc-example <line of the curl> <line of the outermost call> <status>@@` on stderr,
/// where the script's line numbers are mapped back to the doc's.
const PRELUDE: &str = r#"curl() {
  local n=${#BASH_LINENO[@]}
  command curl --max-time 10 \
    --connect-to localhost:8080:127.0.0.1:$DOC_PORT --connect-to 127.0.0.1:8080:127.0.0.1:$DOC_PORT \
    "$@" -w "%{stderr}@@doc-example ${BASH_LINENO[0]} ${BASH_LINENO[$((n-2))]} %{http_code}@@\n"
}
cargo() {
  [ "$1" = run ] || { echo "doc example runs cargo $*" >&2; return 127; }
  shift
  while [ "$1" != -- ]; do shift; done
  shift
  wallet-ledger "$@"
}
wallet-ledger() {
  [ "$1" = serve ] && return 0
  "$DOC_BIN" "$@"
}
sleep() { :; }
"#;

/// The README walk-through's definition of `$TOKEN`.
fn token_line() -> String {
    let readme = std::fs::read_to_string(format!("{ROOT}/README.md")).unwrap();
    readme
        .lines()
        .find(|l| l.starts_with("TOKEN=$(cargo run"))
        .expect("the README walk-through defines TOKEN")
        .to_owned()
}

/// The script for one doc, and the doc line of each of its lines (0: the prelude's).
fn script(blocks: &[Block]) -> (String, Vec<usize>) {
    let mut text = format!("{PRELUDE}{}\n", token_line());
    let mut lines = vec![0; text.lines().count() + 1];
    for block in blocks {
        for (i, line) in block.lines.iter().enumerate() {
            text.push_str(line);
            text.push('\n');
            lines.push(block.first_line + i);
        }
    }
    (text, lines)
}

/// A `serve` of the built binary on a free port, over the test's database.
struct Server {
    child: tokio::process::Child,
    port: u16,
}

impl Server {
    async fn start(database_url: &str) -> Server {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(BIN)
            .args(["serve", "--database-url", database_url])
            .args(["--listen-addr", &format!("127.0.0.1:{port}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let url = format!("http://127.0.0.1:{port}/readyz");
        super::common::poll_until(Duration::from_secs(10), "serve ready", || async {
            let ready = Command::new("curl")
                .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", &url])
                .output()
                .await
                .unwrap();
            (ready.stdout == b"200").then_some(())
        })
        .await;
        Server { child, port }
    }
}

/// Runs one doc's examples; returns what went wrong, by doc line.
async fn run_doc(name: &str) -> Vec<String> {
    let doc = std::fs::read_to_string(format!("{ROOT}/{name}")).unwrap();
    let blocks = curl_blocks(&doc);
    if blocks.is_empty() {
        return Vec::new();
    }
    let app = TestApp::new().await;
    let mut server = Server::start(&app.database_url).await;
    let (text, doc_lines) = script(&blocks);
    let out = Command::new("bash")
        .args(["--noprofile", "--norc", "-c", &text, "doc-examples"])
        .env("DOC_PORT", server.port.to_string())
        .env("DOC_BIN", BIN)
        .env("DATABASE_URL", &app.database_url)
        .env("RUST_LOG", "warn")
        .env_remove("TOKEN")
        .output()
        .await
        .unwrap();
    server.child.kill().await.unwrap();
    app.finish().await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let answers = answers(&stderr, &doc_lines);
    let examples: Vec<Example> = blocks.iter().flat_map(examples).collect();
    let mut problems = judge(&examples, &answers);
    for problem in &mut problems {
        *problem = format!("{name} {problem}");
    }
    if !problems.is_empty() {
        problems.push(format!(
            "{name}: the script's stderr:\n{stderr}\nstdout:\n{}",
            String::from_utf8_lossy(&out.stdout)
        ));
    }
    problems
}

/// What each call answered: (doc line of the `curl`, doc line of the outermost call, status).
fn answers(stderr: &str, doc_lines: &[usize]) -> Vec<(usize, usize, u16)> {
    let line = |n: &str| {
        doc_lines
            .get(n.parse::<usize>().unwrap())
            .copied()
            .unwrap_or(0)
    };
    stderr
        .lines()
        .filter_map(|l| l.split("@@doc-example ").nth(1))
        .map(|l| {
            let fields: Vec<&str> = l.trim_end_matches("@@").split(' ').collect();
            (line(fields[0]), line(fields[1]), fields[2].parse().unwrap())
        })
        .collect()
}

/// Every `curl` ran, and each answer is the predicted one, or, unpredicted, none of 401, 404,
/// a 5xx or no answer at all.
fn judge(examples: &[Example], answers: &[(usize, usize, u16)]) -> Vec<String> {
    let mut problems = Vec::new();
    let containing = |line: usize| {
        examples
            .iter()
            .find(|e| (e.first_line..=e.last_line).contains(&line))
    };
    for example in examples {
        if !answers
            .iter()
            .any(|(curl, _, _)| *curl == example.first_line)
        {
            problems.push(format!(
                "line {}: the example did not run (a shell error before it?)",
                example.first_line
            ));
        }
    }
    let mut seen = BTreeMap::new();
    for &(curl, caller, status) in answers {
        let expected = containing(caller).and_then(|e| e.expected);
        let line = if caller == 0 { curl } else { caller };
        let wrong = match expected {
            Some(expected) => status != expected,
            None => matches!(status, 0 | 401 | 404) || status >= 500,
        };
        if wrong && seen.insert(line, status).is_none() {
            let expected = expected.map_or("a status the text predicts".to_owned(), |s| {
                format!("the predicted {s}")
            });
            problems.push(format!("line {line}: answered {status}, not {expected}"));
        }
    }
    problems
}

#[tokio::test]
async fn every_curl_example_in_the_docs_answers_what_the_text_says() {
    let mut docs = vec!["README.md".to_owned()];
    let mut names: Vec<String> = std::fs::read_dir(format!("{ROOT}/docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .collect();
    names.sort();
    docs.extend(names.into_iter().map(|n| format!("docs/{n}")));
    let mut problems = Vec::new();
    let mut ran = 0;
    for doc in &docs {
        let text = std::fs::read_to_string(format!("{ROOT}/{doc}")).unwrap();
        ran += curl_blocks(&text).len();
        problems.extend(run_doc(doc).await);
    }
    assert!(ran >= 10, "found only {ran} blocks with curl examples");
    assert!(
        problems.is_empty(),
        "doc examples that do not answer what their text says:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_reader_finds_commands_their_lines_and_predictions() {
    let doc = "text\n\n```sh\nX=1\ncurl -s a \\\n  -d b\n# 201, \"id\": 1\ncurl c   # 404 not_found\n\
               curl d # a note\n```\n\n```\ncurl not-shell\n```\n\n<!-- doc-examples: skip (placeholders) -->\n\
               ```sh\ncurl e/<id>\n```\n\n```bash\npost() { curl -X POST \"$1\"; }\n```\n";
    let blocks = curl_blocks(doc);
    assert_eq!(blocks.len(), 2, "{blocks:?}");
    assert_eq!(blocks[0].first_line, 4);
    let found = examples(&blocks[0]);
    let expect = |first_line, last_line, expected| Example {
        first_line,
        last_line,
        expected,
    };
    assert_eq!(
        found,
        [
            expect(5, 6, Some(201)),
            expect(8, 8, Some(404)),
            expect(9, 9, None)
        ]
    );
    assert_eq!(examples(&blocks[1]), [expect(22, 22, None)]);
    assert!(!runs_curl("# curl x"));
    assert!(!runs_curl("the `curl` calls"));
    let problems = judge(
        &found,
        &[(5, 5, 201), (8, 8, 200), (9, 9, 401), (9, 9, 401)],
    );
    assert_eq!(
        problems,
        [
            "line 8: answered 200, not the predicted 404",
            "line 9: answered 401, not a status the text predicts"
        ]
    );
}
