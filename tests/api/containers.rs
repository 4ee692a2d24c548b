//! The Dockerfile and compose.yaml pass the binary subcommands, flags and environment variables
//! as plain text, which nothing else checks: a mistyped `--metrics-adr` or `DATABSE_URL` would
//! only show up when a container is started (or, for an environment variable, never: the app
//! would silently run on its default). This test reads both files, takes every subcommand, flag
//! and environment variable they hand to `wallet-ledger`, and looks each one up in the binary's
//! own `<subcommand> --help`, where clap lists the flags and prints `[env: NAME=]` for each
//! environment variable.
//!
//! compose.yaml is read with a small parser for the YAML it uses (block maps and lists,
//! one-line flow lists, quoted scalars, anchors, aliases and `<<` merges); anything else in
//! the file fails the test with a message saying so, rather than being skipped.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_wallet-ledger");
const DOCKERFILE: &str = include_str!("../../Dockerfile");
const COMPOSE: &str = include_str!("../../compose.yaml");
const MAIN_RS: &str = include_str!("../../src/main.rs");

/// Environment variables of the other images in compose.yaml (PostgreSQL, Valkey): not the
/// app's, so not in its help. A variable of a non-app service must be listed here.
const OTHER_IMAGES_ENV: &[&str] = &[
    "POSTGRES_USER",
    "POSTGRES_PASSWORD",
    "POSTGRES_DB",
    "POSTGRES_INITDB_ARGS",
    "PGDATA",
    "POSTGRES_HOST_AUTH_METHOD",
];

/// Read by `src/main.rs` itself (logging), not by clap: checked against its source instead.
const READ_BY_MAIN: &[&str] = &["LOG_FORMAT", "RUST_LOG"];

// ---------------------------------------------------------------------------------------------
// The binary's help, per subcommand path.

#[derive(Debug, Default)]
struct Help {
    flags: BTreeSet<String>,
    env: BTreeSet<String>,
    subcommands: BTreeSet<String>,
}

fn help_of<'a>(path: &[String], cache: &'a mut HashMap<Vec<String>, Help>) -> &'a Help {
    cache.entry(path.to_vec()).or_insert_with(|| {
        // A clean environment: the help then shows `[env: NAME=]` without values, and no
        // variable of the test's own environment can change what is printed.
        let output = Command::new(BIN)
            .args(path)
            .arg("--help")
            .env_clear()
            .output()
            .expect("the binary runs");
        assert!(
            output.status.success(),
            "`wallet-ledger {} --help` failed (is `{}` a subcommand?): {}",
            path.join(" "),
            path.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
        parse_help(&String::from_utf8(output.stdout).unwrap())
    })
}

fn parse_help(text: &str) -> Help {
    let mut help = Help::default();
    let mut in_commands = false;
    for line in text.lines() {
        if line.ends_with(':') && !line.starts_with(' ') {
            in_commands = line == "Commands:";
            continue;
        }
        if in_commands {
            // A command's line is indented two columns; its description's wrapped lines more.
            if let Some(name) = line.split_whitespace().next()
                && line.starts_with("  ")
                && !line.starts_with("   ")
            {
                help.subcommands.insert(name.to_owned());
            }
            continue;
        }
        // An option line starts with its names: `-h, --help`, `--stream <STREAM>`. Flags
        // named in descriptions do not count.
        for word in line.split_whitespace() {
            let word = word.trim_end_matches(',');
            if !word.starts_with('-') {
                break;
            }
            help.flags.insert(word.to_owned());
        }
        let mut rest = line;
        while let Some(at) = rest.find("[env: ") {
            rest = &rest[at + "[env: ".len()..];
            // `[env: NAME=value]`, or `[env: NAME]` where the value is hidden (secrets).
            let end = rest
                .find(['=', ']'])
                .expect("`[env: NAME` ends with `=` or `]`");
            help.env.insert(rest[..end].to_owned());
        }
    }
    help
}

/// What one container hands to the binary: its arguments (after `wallet-ledger`) and the
/// names of the environment variables it sets.
#[derive(Debug)]
struct Invocation {
    origin: String,
    args: Vec<String>,
    env: Vec<String>,
}

/// Checks one invocation: the subcommand path exists, each flag is one of that path's, and each
/// environment variable is read by that path (or by `main.rs`). Returns the problems found.
fn check(invocation: &Invocation, cache: &mut HashMap<Vec<String>, Help>) -> Vec<String> {
    let mut problems = Vec::new();
    let origin = &invocation.origin;
    let mut path: Vec<String> = Vec::new();
    let mut args = invocation.args.iter().peekable();
    // The subcommand path: leading words that the help of the path so far lists as commands.
    while let Some(word) = args.peek() {
        if word.starts_with('-') {
            break;
        }
        let known = help_of(&path, cache).subcommands.contains(word.as_str());
        if !known {
            if path.is_empty() {
                problems.push(format!(
                    "{origin}: `{word}` is not a wallet-ledger subcommand"
                ));
                return problems;
            }
            break;
        }
        path.push((*word).clone());
        args.next();
    }
    if path.is_empty()
        && !invocation
            .args
            .iter()
            .any(|a| a == "--version" || a == "--help")
    {
        problems.push(format!("{origin}: no subcommand in {:?}", invocation.args));
        return problems;
    }
    let help = help_of(&path, cache);
    let shown = if path.is_empty() {
        "wallet-ledger".to_owned()
    } else {
        format!("wallet-ledger {}", path.join(" "))
    };
    for arg in args {
        let flag = if arg.starts_with("--") {
            arg.split('=').next().unwrap()
        } else if arg.len() == 2 && arg.starts_with('-') {
            arg.as_str()
        } else {
            continue; // a flag's value or a positional argument
        };
        if !help.flags.contains(flag) {
            problems.push(format!("{origin}: `{shown}` has no flag `{flag}`"));
        }
    }
    for name in &invocation.env {
        if READ_BY_MAIN.contains(&name.as_str()) {
            continue;
        }
        if !help.env.contains(name) {
            problems.push(format!(
                "{origin}: `{shown}` reads no environment variable `{name}` \
                 (it reads: {})",
                help.env.iter().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    problems
}

// ---------------------------------------------------------------------------------------------
// The Dockerfile.

/// The final stage's instructions (what the running container gets), continuation lines
/// joined, comments dropped: `(INSTRUCTION, rest)`.
fn final_stage(dockerfile: &str) -> Vec<(String, String)> {
    let mut instructions = Vec::new();
    let mut current = String::new();
    for line in dockerfile.lines() {
        let trimmed = line.trim();
        if current.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        if trimmed.starts_with('#') {
            continue; // a comment inside a continued instruction
        }
        if let Some(head) = trimmed.strip_suffix('\\') {
            current.push_str(head);
            current.push(' ');
            continue;
        }
        current.push_str(trimmed);
        let (word, rest) = current
            .split_once(char::is_whitespace)
            .unwrap_or((&current, ""));
        let word = word.to_ascii_uppercase();
        if word == "FROM" {
            instructions.clear();
        }
        instructions.push((word, rest.trim().to_owned()));
        current.clear();
    }
    instructions
}

fn exec_form(rest: &str) -> Option<Vec<String>> {
    rest.starts_with('[')
        .then(|| serde_json::from_str(rest).expect("an exec-form instruction is a JSON array"))
}

/// Names set by `ENV NAME=value ...` (or the legacy `ENV NAME value`).
fn env_names(rest: &str) -> Vec<String> {
    if !rest.contains('=') {
        return vec![
            rest.split_whitespace()
                .next()
                .unwrap_or_default()
                .to_owned(),
        ];
    }
    let mut names = Vec::new();
    let mut quoted = None;
    let mut token = String::new();
    for c in rest.chars().chain(std::iter::once(' ')) {
        match (quoted, c) {
            (None, '"' | '\'') => quoted = Some(c),
            (Some(q), c) if c == q => quoted = None,
            (None, c) if c.is_whitespace() => {
                if let Some((name, _)) = token.split_once('=') {
                    names.push(name.to_owned());
                }
                token.clear();
            }
            _ => token.push(c),
        }
    }
    names
}

fn dockerfile_invocations(dockerfile: &str) -> Vec<Invocation> {
    let stage = final_stage(dockerfile);
    let mut entrypoint = None;
    let mut cmd = None;
    let mut env = Vec::new();
    let mut invocations = Vec::new();
    for (word, rest) in &stage {
        match word.as_str() {
            "ENTRYPOINT" => entrypoint = Some(exec_form(rest).expect("ENTRYPOINT in exec form")),
            "CMD" => cmd = Some(exec_form(rest).expect("CMD in exec form")),
            "ENV" => env.extend(env_names(rest)),
            "RUN" => {
                if let Some(words) = exec_form(rest)
                    && words.first().is_some_and(|w| w.ends_with("wallet-ledger"))
                {
                    invocations.push(Invocation {
                        origin: format!("Dockerfile RUN {rest}"),
                        args: words[1..].to_vec(),
                        env: Vec::new(),
                    });
                }
            }
            _ => {}
        }
    }
    let entrypoint = entrypoint.expect("the Dockerfile's final stage has an ENTRYPOINT");
    assert_eq!(
        entrypoint,
        ["wallet-ledger"],
        "the image's ENTRYPOINT is the binary, so compose commands are its arguments"
    );
    invocations.push(Invocation {
        origin: "Dockerfile ENTRYPOINT + CMD".to_owned(),
        args: cmd.expect("the Dockerfile's final stage has a CMD"),
        env,
    });
    invocations
}

// ---------------------------------------------------------------------------------------------
// compose.yaml: the YAML it uses.

#[derive(Debug, Clone, PartialEq)]
enum Yaml {
    Scalar(String),
    List(Vec<Yaml>),
    Map(Vec<(String, Yaml)>),
}

impl Yaml {
    fn get(&self, key: &str) -> Option<&Yaml> {
        match self {
            Yaml::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn scalar(&self) -> Option<&str> {
        match self {
            Yaml::Scalar(s) => Some(s),
            _ => None,
        }
    }
}

struct Line {
    number: usize,
    indent: usize,
    text: String,
}

struct Parser {
    lines: Vec<Line>,
    at: usize,
    anchors: HashMap<String, Yaml>,
}

/// Drops a comment: `#` at the start or after whitespace, outside quotes.
fn strip_comment(line: &str) -> &str {
    let mut quoted = None;
    let mut previous = ' ';
    for (i, c) in line.char_indices() {
        match (quoted, c) {
            (None, '"' | '\'') => quoted = Some(c),
            (Some(q), c) if c == q => quoted = None,
            (None, '#') if previous.is_whitespace() => return &line[..i],
            _ => {}
        }
        previous = c;
    }
    line
}

/// Splits `key: value` at the first `:` followed by a space or the end, outside quotes.
fn split_key(text: &str) -> Option<(&str, &str)> {
    let mut quoted = None;
    let bytes = text.as_bytes();
    for (i, c) in text.char_indices() {
        match (quoted, c) {
            (None, '"' | '\'') => quoted = Some(c),
            (Some(q), c) if c == q => quoted = None,
            (None, ':') if i + 1 == bytes.len() || bytes[i + 1] == b' ' => {
                return Some((&text[..i], text[i + 1..].trim()));
            }
            _ => {}
        }
    }
    None
}

fn unquote(text: &str) -> String {
    let text = text.trim();
    if let Some(inner) = text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
        inner.replace("\\\"", "\"").replace("\\\\", "\\")
    } else if let Some(inner) = text.strip_prefix('\'').and_then(|t| t.strip_suffix('\'')) {
        inner.replace("''", "'")
    } else {
        text.to_owned()
    }
}

impl Parser {
    fn new(text: &str) -> Parser {
        let lines = text
            .lines()
            .enumerate()
            .filter_map(|(i, raw)| {
                assert!(
                    !raw.starts_with('\t'),
                    "compose.yaml line {}: tabs are not YAML indentation",
                    i + 1
                );
                let text = strip_comment(raw).trim_end();
                let indent = text.len() - text.trim_start().len();
                (!text.trim().is_empty()).then(|| Line {
                    number: i + 1,
                    indent,
                    text: text.trim_start().to_owned(),
                })
            })
            .collect();
        Parser {
            lines,
            at: 0,
            anchors: HashMap::new(),
        }
    }

    fn unsupported(&self, number: usize, what: &str) -> ! {
        panic!(
            "compose.yaml line {number}: {what} is beyond the YAML this test reads; \
             write it with block maps and lists, or extend tests/api/containers.rs"
        )
    }

    /// A value written after `key:` or `- `: an alias, a flow list or a scalar.
    fn inline(&self, number: usize, text: &str) -> Yaml {
        if let Some(name) = text.strip_prefix('*') {
            return self
                .anchors
                .get(name)
                .cloned()
                .unwrap_or_else(|| panic!("compose.yaml line {number}: unknown alias *{name}"));
        }
        if let Some(inner) = text.strip_prefix('[') {
            let inner = inner
                .strip_suffix(']')
                .unwrap_or_else(|| self.unsupported(number, "a flow list over several lines"));
            let mut items = Vec::new();
            let mut quoted = None;
            let mut item = String::new();
            for c in inner.chars().chain(std::iter::once(',')) {
                match (quoted, c) {
                    (None, '"' | '\'') => {
                        quoted = Some(c);
                        item.push(c);
                    }
                    (Some(q), c) if c == q => {
                        quoted = None;
                        item.push(c);
                    }
                    (None, ',') => {
                        if !item.trim().is_empty() {
                            items.push(Yaml::Scalar(unquote(&item)));
                        }
                        item.clear();
                    }
                    (None, '[' | '{') => self.unsupported(number, "a nested flow collection"),
                    _ => item.push(c),
                }
            }
            return Yaml::List(items);
        }
        if text.starts_with('{') {
            self.unsupported(number, "a flow map");
        }
        if text.starts_with('|') || text.starts_with('>') {
            self.unsupported(number, "a block scalar");
        }
        if text.starts_with('&') || text.starts_with('!') {
            self.unsupported(number, "an anchor or tag on a scalar");
        }
        Yaml::Scalar(unquote(text))
    }

    /// The value after `key:` (or after `- key:`): inline, or the block on the next lines.
    fn value(&mut self, number: usize, indent: usize, text: &str) -> Yaml {
        let (anchor, text) = match text.strip_prefix('&') {
            Some(rest) => {
                let (name, rest) = rest.split_once(' ').unwrap_or((rest, ""));
                (Some(name.to_owned()), rest.trim())
            }
            None => (None, text),
        };
        let value = if text.is_empty() {
            match self.lines.get(self.at) {
                Some(next) if next.indent > indent => {
                    let child = next.indent;
                    self.block(child)
                }
                // A list may sit at its key's own indentation.
                Some(next) if next.indent == indent && next.text.starts_with("- ") => {
                    self.block(indent)
                }
                _ => Yaml::Scalar(String::new()),
            }
        } else {
            self.inline(number, text)
        };
        if let Some(name) = anchor {
            self.anchors.insert(name, value.clone());
        }
        value
    }

    fn block(&mut self, indent: usize) -> Yaml {
        if self.lines[self.at].text.starts_with("- ") || self.lines[self.at].text == "-" {
            self.list(indent)
        } else {
            self.map(indent)
        }
    }

    fn list(&mut self, indent: usize) -> Yaml {
        let mut items = Vec::new();
        while let Some(line) = self.lines.get(self.at) {
            if line.indent != indent || !(line.text.starts_with("- ") || line.text == "-") {
                break;
            }
            let number = line.number;
            let item = line.text[1..].trim().to_owned();
            self.at += 1;
            if item.is_empty() {
                self.unsupported(number, "a list item on the next line");
            }
            if split_key(&item).is_some() && !item.starts_with(['"', '\'', '[']) {
                // `- key: value`: a map whose keys sit two columns in.
                self.at -= 1;
                self.lines[self.at].indent = indent + 2;
                self.lines[self.at].text = item;
                items.push(self.map(indent + 2));
            } else {
                items.push(self.inline(number, &item));
            }
        }
        Yaml::List(items)
    }

    fn map(&mut self, indent: usize) -> Yaml {
        let mut entries: Vec<(String, Yaml)> = Vec::new();
        let mut merged: Vec<(String, Yaml)> = Vec::new();
        while let Some(line) = self.lines.get(self.at) {
            if line.indent < indent {
                break;
            }
            let number = line.number;
            if line.indent > indent {
                self.unsupported(number, "unexpected indentation");
            }
            let text = line.text.clone();
            let Some((key, rest)) = split_key(&text) else {
                self.unsupported(number, "a line that is not `key: value`");
            };
            let key = unquote(key);
            self.at += 1;
            let value = self.value(number, indent, rest);
            if key == "<<" {
                let Yaml::Map(from) = value else {
                    self.unsupported(number, "a merge of something other than a map");
                };
                for (k, v) in from {
                    if !merged.iter().any(|(m, _)| *m == k) {
                        merged.push((k, v));
                    }
                }
            } else {
                assert!(
                    !entries.iter().any(|(k, _)| *k == key),
                    "compose.yaml line {number}: `{key}` twice in one map"
                );
                entries.push((key, value));
            }
        }
        // Keys written in the map win over merged ones, whatever their order.
        for (k, v) in merged {
            if !entries.iter().any(|(e, _)| *e == k) {
                entries.push((k, v));
            }
        }
        Yaml::Map(entries)
    }
}

fn parse_yaml(text: &str) -> Yaml {
    let mut parser = Parser::new(text);
    let root = parser.map(0);
    assert_eq!(
        parser.at,
        parser.lines.len(),
        "compose.yaml parsed to its end"
    );
    root
}

/// `environment:` as a map or as a list of `NAME=value`.
fn environment_names(service: &Yaml) -> Vec<String> {
    match service.get("environment") {
        None => Vec::new(),
        Some(Yaml::Map(entries)) => entries.iter().map(|(k, _)| k.clone()).collect(),
        Some(Yaml::List(items)) => items
            .iter()
            .map(|item| {
                let text = item.scalar().expect("an environment item is a string");
                text.split('=').next().unwrap().to_owned()
            })
            .collect(),
        Some(other) => panic!("environment is a map or a list, not {other:?}"),
    }
}

fn words(value: &Yaml, what: &str) -> Vec<String> {
    match value {
        Yaml::List(items) => items
            .iter()
            .map(|i| i.scalar().expect("a list of strings").to_owned())
            .collect(),
        Yaml::Scalar(s) => s.split_whitespace().map(str::to_owned).collect(),
        Yaml::Map(_) => panic!("{what} is a string or a list"),
    }
}

/// Every service of compose.yaml: `(name, is the app, invocation)`.
fn compose_services(compose: &str, image_cmd: &[String]) -> Vec<(String, bool, Invocation)> {
    let root = parse_yaml(compose);
    let Some(Yaml::Map(services)) = root.get("services") else {
        panic!("compose.yaml has a `services` map");
    };
    services
        .iter()
        .map(|(name, service)| {
            let image = service.get("image").and_then(Yaml::scalar).unwrap_or("");
            // The app's image, or a build that names no image; a build that names another
            // image (docker/pg-auto-failover) is not the app.
            let app = image.contains("wallet-ledger")
                || (service.get("build").is_some() && image.is_empty());
            let args = match service.get("command") {
                Some(command) => words(command, "command"),
                None if app => image_cmd.to_vec(),
                None => Vec::new(),
            };
            if app {
                assert!(
                    service.get("entrypoint").is_none(),
                    "service {name} overrides the entrypoint; extend tests/api/containers.rs"
                );
                // A healthcheck that runs the binary is an invocation too.
                if let Some(test) = service.get("healthcheck").and_then(|h| h.get("test")) {
                    let test = words(test, "healthcheck.test");
                    assert!(
                        !test.iter().any(|w| w.contains("wallet-ledger")),
                        "service {name}'s healthcheck runs wallet-ledger; extend the test"
                    );
                }
            }
            let invocation = Invocation {
                origin: format!("compose.yaml service `{name}`"),
                args,
                env: environment_names(service),
            };
            (name.clone(), app, invocation)
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------

#[test]
fn the_parsers_read_what_the_files_use() {
    let yaml = parse_yaml(
        "x-a: &a\n  image: wallet-ledger:local\n  environment: &env\n    A: \"1\" # note\n\
         services:\n  s:\n    <<: *a\n    command: [\"consume\", '--x', y]\n    environment:\n\
         \x20     <<: *env\n      B: 'it''s'\n    profiles:\n    - jobs\n    healthcheck:\n\
         \x20     test:\n        - CMD\n        - curl # a comment\n    depends_on: *env\n",
    );
    let s = yaml.get("services").unwrap().get("s").unwrap();
    assert_eq!(
        s.get("image"),
        Some(&Yaml::Scalar("wallet-ledger:local".into()))
    );
    assert_eq!(
        words(s.get("command").unwrap(), "command"),
        ["consume", "--x", "y"]
    );
    assert_eq!(environment_names(s), ["B", "A"]);
    assert_eq!(
        s.get("environment").unwrap().get("B"),
        Some(&Yaml::Scalar("it's".into()))
    );
    assert_eq!(words(s.get("profiles").unwrap(), "profiles"), ["jobs"]);
    assert_eq!(
        words(s.get("healthcheck").unwrap().get("test").unwrap(), "test"),
        ["CMD", "curl"]
    );

    assert_eq!(env_names("A=1 B=\"two words\" C=x"), ["A", "B", "C"]);
    assert_eq!(env_names("LEGACY value"), ["LEGACY"]);
    let stage = final_stage(
        "FROM a AS build\nENV X=1\nFROM b\n# c\nENV Y=1 \\\n    Z=2\nCMD [\"serve\"]\n",
    );
    assert_eq!(
        stage,
        [
            ("FROM".to_owned(), "b".to_owned()),
            ("ENV".to_owned(), "Y=1  Z=2".to_owned()),
            ("CMD".to_owned(), "[\"serve\"]".to_owned()),
        ]
    );

    let help = parse_help(
        "Usage: x\n\nCommands:\n  list    Print\n          more text\n  help    Help\n\n\
         Options:\n      --redis-url <URL>  Redis [env: REDIS_URL=] [default: x]\n\
         \x20 -h, --help  Print help\n",
    );
    assert_eq!(
        help.subcommands,
        BTreeSet::from(["list".into(), "help".into()])
    );
    assert_eq!(
        help.flags,
        BTreeSet::from(["--redis-url".into(), "-h".into(), "--help".into()])
    );
    assert_eq!(help.env, BTreeSet::from(["REDIS_URL".into()]));
}

#[test]
fn the_dockerfile_and_compose_pass_only_what_the_binary_takes() {
    for name in READ_BY_MAIN {
        assert!(
            MAIN_RS.contains(name),
            "{name} is listed as read by src/main.rs, which does not mention it"
        );
    }
    let mut cache = HashMap::new();
    let mut problems = Vec::new();

    let docker = dockerfile_invocations(DOCKERFILE);
    let image_cmd = docker.last().unwrap().args.clone();
    for invocation in &docker {
        problems.extend(check(invocation, &mut cache));
    }

    let services = compose_services(COMPOSE, &image_cmd);
    let mut subcommands = BTreeMap::new();
    for (name, app, invocation) in &services {
        if *app {
            problems.extend(check(invocation, &mut cache));
            if let Some(first) = invocation.args.first() {
                subcommands.insert(name.clone(), first.clone());
            }
        } else {
            for var in &invocation.env {
                if !OTHER_IMAGES_ENV.contains(&var.as_str()) {
                    problems.push(format!(
                        "{}: `{var}` is not in OTHER_IMAGES_ENV (if that image reads it, \
                         list it there)",
                        invocation.origin
                    ));
                }
            }
        }
    }
    // The parser found the processes docs/operations.md describes, so a parse that lost a
    // service cannot pass by checking nothing.
    let found: BTreeSet<&str> = subcommands.values().map(String::as_str).collect();
    for expected in ["migrate", "serve", "consume", "reconcile"] {
        assert!(
            found.contains(expected),
            "compose.yaml runs no `{expected}` (found {subcommands:?})"
        );
    }
    assert!(
        problems.is_empty(),
        "the Dockerfile or compose.yaml passes what wallet-ledger does not take:\n  {}",
        problems.join("\n  ")
    );
}
