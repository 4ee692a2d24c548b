//! The HTTP edge under slow and hostile clients, on the real binary and raw sockets (a client
//! library would finish heads, send bodies whole and hide what the server does): heads and
//! idle connections are timed, connections are capped with health checks still answered,
//! bodies are bounded in size before reading and in time (408), SIGTERM ends by a deadline,
//! and HTTP/2 is served with its limits.

use super::common::{TestApp, api_key, poll_until};
use super::stream_support::{Server, eventually, http_get, serve, terminate};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use wallet_ledger::api_keys::Scope;

async fn connect(server: &Server) -> TcpStream {
    TcpStream::connect(&server.addr).await.unwrap()
}

/// The server's side of its sockets as the kernel shows them (/proc/net/tcp), so a test waits
/// for the state it needs instead of sleeping: whether it listens, how many connections wait
/// for its `accept`, and for each connection it holds open (established, or closed by the
/// client and not yet by it) the bytes it has not read yet.
#[derive(Debug, Default, PartialEq, Eq)]
struct ServerSockets {
    listening: bool,
    not_accepted: u32,
    unread: Vec<u32>,
}

const TCP_ESTABLISHED: &str = "01";
const TCP_CLOSE_WAIT: &str = "08";
const TCP_LISTEN: &str = "0A";

fn server_sockets(server: &Server) -> ServerSockets {
    let port: u16 = server.addr.rsplit_once(':').unwrap().1.parse().unwrap();
    let port = format!(":{port:04X}");
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let mut sockets = ServerSockets::default();
    for line in table.lines().skip(1) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (local, state, queues) = (fields[1], fields[3], fields[4]);
        if !local.ends_with(&port) {
            continue;
        }
        // For a listening socket the receive queue is its accept backlog.
        let rx = u32::from_str_radix(queues.split_once(':').unwrap().1, 16).unwrap();
        match state {
            TCP_LISTEN => (sockets.listening, sockets.not_accepted) = (true, rx),
            TCP_ESTABLISHED | TCP_CLOSE_WAIT => sockets.unread.push(rx),
            _ => {}
        }
    }
    sockets
}

/// Waits until the server has accepted every connection made to it, holds `open` of them,
/// and has read all that was sent on them.
async fn wait_for_connections(server: &Server, open: usize) {
    let settled = ServerSockets {
        listening: true,
        not_accepted: 0,
        unread: vec![0; open],
    };
    let what = format!("the server holding {open} connections, all read");
    poll_until(Duration::from_secs(5), what, || async {
        (server_sockets(server) == settled).then_some(())
    })
    .await
}

/// Reads until the server closes the connection (or resets it); `None` if it has not within
/// `within`. What the server sent before closing is returned.
async fn closed_within(stream: &mut TcpStream, within: Duration) -> Option<String> {
    let mut seen = Vec::new();
    let read = tokio::time::timeout(within, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    read.ok()
        .map(|()| String::from_utf8_lossy(&seen).into_owned())
}

/// One response (head and a `Content-Length` body) from a kept-alive connection.
async fn response(stream: &mut TcpStream) -> String {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = String::from_utf8_lossy(&seen).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<usize>().unwrap())
                })
                .unwrap_or(0);
            if body.len() >= length {
                return text;
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => seen.extend_from_slice(&buf[..n]),
            other => panic!("no whole response ({other:?}); got {text:?}"),
        }
    }
}

#[tokio::test]
async fn a_head_sent_slowly_or_not_at_all_is_cut_at_the_header_timeout() {
    let app = TestApp::new().await;
    let server = serve(&app.database_url, &[], &["--header-read-timeout-ms", "600"]).await;
    let mut silent = Vec::new();
    let mut trickling = Vec::new();
    for _ in 0..20 {
        silent.push(connect(&server).await);
        let mut stream = connect(&server).await;
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n")
            .await
            .unwrap();
        trickling.push(stream);
    }
    let started = Instant::now();
    // A header byte every 100 ms would keep a per-read timeout from ever firing.
    let trickle = async {
        for _ in 0..30 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            for stream in &mut trickling {
                let _ = stream.write_all(b"x").await;
            }
        }
    };
    let (_, healthy) = tokio::join!(trickle, http_get(&server.addr, "/healthz"));
    assert_eq!(
        healthy.map(|(s, _)| s),
        Some(200),
        "others are served meanwhile"
    );
    for stream in silent.iter_mut().chain(trickling.iter_mut()) {
        assert!(
            closed_within(stream, Duration::from_secs(3))
                .await
                .is_some(),
            "a connection without a whole head was still open after {:?}",
            started.elapsed()
        );
    }
    let (status, _) = server.stop().await;
    assert!(status.success());
    app.finish().await;
}

#[tokio::test]
async fn a_resting_keep_alive_connection_is_closed_after_the_idle_timeout_not_the_head_one() {
    let app = TestApp::new().await;
    let server = serve(
        &app.database_url,
        &[],
        &[
            "--header-read-timeout-ms",
            "300",
            "--idle-timeout-ms",
            "1500",
        ],
    )
    .await;
    let mut stream = connect(&server).await;
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    assert!(response(&mut stream).await.starts_with("HTTP/1.1 200"));
    // Resting longer than the head timeout is fine: the next request is served.
    tokio::time::sleep(Duration::from_millis(800)).await;
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    assert!(response(&mut stream).await.starts_with("HTTP/1.1 200"));
    let rested = Instant::now();
    assert!(
        closed_within(&mut stream, Duration::from_secs(5))
            .await
            .is_some(),
        "an idle connection was never closed"
    );
    let after = rested.elapsed();
    assert!(
        after >= Duration::from_millis(1200),
        "closed after {after:?}, before the idle timeout"
    );
    let (status, _) = server.stop().await;
    assert!(status.success());
    app.finish().await;
}

#[tokio::test]
async fn above_the_connection_cap_health_is_answered_and_other_requests_are_503() {
    let app = TestApp::new().await;
    let server = serve(
        &app.database_url,
        &[],
        &[
            "--max-connections",
            "3",
            "--header-read-timeout-ms",
            "30000",
        ],
    )
    .await;
    // The start-up health polls have closed; their connections must be gone before the cap
    // is filled.
    wait_for_connections(&server, 0).await;
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(connect(&server).await);
    }
    wait_for_connections(&server, 3).await;
    let mut over = connect(&server).await;
    over.write_all(b"GET /v1/accounts/a HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let refused = closed_within(&mut over, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    assert!(
        refused.to_ascii_lowercase().contains("retry-after: 1"),
        "{refused}"
    );
    assert!(refused.contains(r#""code":"unavailable""#), "{refused}");
    for path in ["/healthz", "/readyz"] {
        let answer = http_get(&server.addr, path).await;
        assert_eq!(answer.map(|(s, _)| s), Some(200), "{path} above the cap");
    }
    drop(held);
    let served_again = eventually(Duration::from_secs(5), || async {
        let mut stream = connect(&server).await;
        let _ = stream
            .write_all(b"GET /v1/accounts/a HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await;
        closed_within(&mut stream, Duration::from_secs(5))
            .await
            .is_some_and(|r| r.starts_with("HTTP/1.1 401"))
    })
    .await;
    assert!(
        served_again,
        "connections are served again once the cap frees"
    );
    let (status, log) = server.stop().await;
    assert!(status.success(), "{log}");
    app.finish().await;
}

#[tokio::test]
async fn sigterm_lets_a_request_finish_and_cuts_a_held_connection_at_the_deadline() {
    let app = TestApp::new().await;
    let mut server = serve(
        &app.database_url,
        &[("LOG_FORMAT", "json")],
        &[
            "--shutdown-timeout-ms",
            "1500",
            "--header-read-timeout-ms",
            "60000",
        ],
    )
    .await;
    let mut held = connect(&server).await;
    held.write_all(b"GET /heal").await.unwrap();
    let mut finishing = connect(&server).await;
    finishing
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n")
        .await
        .unwrap();
    wait_for_connections(&server, 2).await;
    let asked = Instant::now();
    terminate(&server.child);
    // The request is finished only once the server has stopped accepting (its listener gone).
    poll_until(
        Duration::from_secs(5),
        "the server to stop listening",
        || async { (!server_sockets(&server).listening).then_some(()) },
    )
    .await;
    finishing.write_all(b"\r\n").await.unwrap();
    let answered = closed_within(&mut finishing, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(
        answered.starts_with("HTTP/1.1 200"),
        "in flight at SIGTERM: {answered:?}"
    );
    let status = tokio::time::timeout(Duration::from_secs(10), server.child.wait())
        .await
        .expect("serve exited within its shutdown deadline whatever a client holds")
        .unwrap();
    let took = asked.elapsed();
    assert!(status.success());
    assert!(took < Duration::from_secs(5), "exited after {took:?}");
    assert!(
        closed_within(&mut held, Duration::from_secs(1))
            .await
            .is_some()
    );
    let log = std::fs::read_to_string(&server.log).unwrap();
    assert!(log.contains(r#""cut_at_deadline":1"#), "{log}");
    let _ = std::fs::remove_file(&server.log);
    app.finish().await;
}

#[tokio::test]
async fn a_body_that_does_not_arrive_in_time_is_408_and_nothing_is_created() {
    let app = TestApp::new().await;
    let token = api_key(&app.pool, "t", Scope::Admin).await;
    let server = serve(&app.database_url, &[], &["--body-read-timeout-ms", "500"]).await;
    let body = r#"{"id":"slow-body","currency":"SAR"}"#;
    let head = |length: usize| {
        format!(
            "POST /v1/accounts HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {token}\r\n\
             content-type: application/json\r\ncontent-length: {length}\r\n\r\n"
        )
    };
    // A body shorter than it said, and one trickled a byte at a time.
    let mut short = connect(&server).await;
    short
        .write_all(format!("{}{body}", head(body.len() + 50)).as_bytes())
        .await
        .unwrap();
    let mut trickled = connect(&server).await;
    trickled
        .write_all(head(body.len()).as_bytes())
        .await
        .unwrap();
    let started = Instant::now();
    let trickle = async {
        for byte in body.bytes() {
            if trickled.write_all(&[byte]).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let (_, short_answer) = tokio::join!(trickle, response(&mut short));
    let trickled_answer = response(&mut trickled).await;
    for answer in [short_answer, trickled_answer] {
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(answer.contains(r#""code":"body_timeout""#), "{answer}");
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    let stored: i64 = sqlx::query_scalar("select count(*) from accounts where id = 'slow-body'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(stored, 0);
    let (status, _) = server.stop().await;
    assert!(status.success());
    app.finish().await;
}

#[tokio::test]
async fn a_declared_length_over_the_limit_is_413_before_any_body_and_without_100_continue() {
    let app = TestApp::new().await;
    let token = api_key(&app.pool, "t", Scope::Admin).await;
    let server = serve(&app.database_url, &[], &[]).await;
    for (path, length) in [
        ("/v1/accounts", 999_999_999u64),
        ("/v1/transactions", 256 * 1024 + 1),
        ("/v1/transactions/batch", 4 * 1024 * 1024 + 1),
    ] {
        let mut stream = connect(&server).await;
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {token}\r\n\
             content-type: application/json\r\ncontent-length: {length}\r\n\
             expect: 100-continue\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let answer = response(&mut stream).await;
        assert!(answer.starts_with("HTTP/1.1 413"), "{path}: {answer}");
        assert!(
            answer.contains(r#""code":"payload_too_large""#),
            "{path}: {answer}"
        );
    }
    // Within the limit, the client is told to go on.
    let mut stream = connect(&server).await;
    let head = format!(
        "POST /v1/transactions/batch HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {token}\r\n\
         content-type: application/json\r\ncontent-length: 300000\r\nexpect: 100-continue\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 100 Continue"));
    let (status, _) = server.stop().await;
    assert!(status.success());
    app.finish().await;
}

// ---------------------------------------------------------------------------------------------
// HTTP/2 (cleartext, prior knowledge), in raw frames.
// ---------------------------------------------------------------------------------------------

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const SETTINGS: u8 = 0x4;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const GOAWAY: u8 = 0x7;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// `GET /` in HPACK: indexed `:method GET`, `:scheme http`, `:path /`.
const GET_ROOT: [u8; 3] = [0x82, 0x86, 0x84];

async fn read_frame(stream: &mut TcpStream) -> Option<(u8, u8, Vec<u8>)> {
    let mut head = [0u8; 9];
    stream.read_exact(&mut head).await.ok()?;
    let len = (usize::from(head[0]) << 16) | (usize::from(head[1]) << 8) | usize::from(head[2]);
    let mut payload = vec![0u8; len];
    stream.read_exact(&mut payload).await.ok()?;
    Some((head[3], head[4], payload))
}

/// The first GOAWAY's error code, or `Some(u32::MAX)` if the connection closed without one;
/// `None` if it stayed open for `within`.
async fn goaway_within(stream: &mut TcpStream, within: Duration) -> Option<u32> {
    tokio::time::timeout(within, async {
        loop {
            match read_frame(stream).await {
                Some((GOAWAY, _, p)) => return u32::from_be_bytes([p[4], p[5], p[6], p[7]]),
                Some(_) => continue,
                None => return u32::MAX,
            }
        }
    })
    .await
    .ok()
}

async fn h2_connect(server: &Server) -> (TcpStream, Vec<(u16, u32)>) {
    let mut stream = connect(server).await;
    stream.write_all(PREFACE).await.unwrap();
    stream.write_all(&frame(SETTINGS, 0, 0, &[])).await.unwrap();
    let (kind, _, payload) = read_frame(&mut stream)
        .await
        .expect("the server's SETTINGS");
    assert_eq!(kind, SETTINGS, "HTTP/2 is served");
    let settings = payload
        .chunks(6)
        .map(|c| {
            (
                u16::from_be_bytes([c[0], c[1]]),
                u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
            )
        })
        .collect();
    stream
        .write_all(&frame(SETTINGS, 0x1, 0, &[]))
        .await
        .unwrap();
    (stream, settings)
}

#[tokio::test]
async fn http2_is_served_with_its_stream_and_header_limits_announced() {
    let app = TestApp::new().await;
    let server = serve(
        &app.database_url,
        &[],
        &[
            "--http2-max-concurrent-streams",
            "7",
            "--max-header-bytes",
            "12288",
        ],
    )
    .await;
    let (raw, settings) = h2_connect(&server).await;
    // It answers no PING, so a graceful close of it would wait for the shutdown deadline.
    drop(raw);
    const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    const MAX_HEADER_LIST_SIZE: u16 = 0x6;
    assert!(
        settings.contains(&(MAX_CONCURRENT_STREAMS, 7)),
        "{settings:?}"
    );
    assert!(
        settings.contains(&(MAX_HEADER_LIST_SIZE, 12288)),
        "{settings:?}"
    );
    wallet_ledger::install_crypto_provider();
    let client = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let answer = client
        .get(format!("http://{}/healthz", server.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.version(), reqwest::Version::HTTP_2);
    assert_eq!(answer.status(), 200);
    let (status, _) = server.stop().await;
    assert!(status.success());
    app.finish().await;
}

/// An HPACK integer with a 7-bit prefix (RFC 7541, 5.1).
fn hpack_int(mut value: usize, out: &mut Vec<u8>) {
    if value < 127 {
        out.push(value as u8);
        return;
    }
    out.push(127);
    value -= 127;
    while value >= 128 {
        out.push((value % 128) as u8 | 0x80);
        value /= 128;
    }
    out.push(value as u8);
}

#[tokio::test]
async fn http2_floods_of_continuation_frames_and_rapid_resets_end_the_connection() {
    let app = TestApp::new().await;
    let server = serve(&app.database_url, &[], &[]).await;

    // A header block that never ends: 200 CONTINUATION frames of 16 KB, far above the header
    // list limit, must not be buffered.
    let (mut stream, _) = h2_connect(&server).await;
    stream
        .write_all(&frame(HEADERS, 0, 1, &GET_ROOT))
        .await
        .unwrap();
    let mut block = Vec::new();
    while block.len() < 16_000 {
        block.push(0x00); // a literal header, new name, not indexed
        hpack_int(3, &mut block);
        block.extend_from_slice(b"x-a");
        hpack_int(1000, &mut block);
        block.extend(std::iter::repeat_n(b'a', 1000));
    }
    for _ in 0..200 {
        if stream
            .write_all(&frame(CONTINUATION, 0, 1, &block))
            .await
            .is_err()
        {
            break;
        }
    }
    assert!(
        goaway_within(&mut stream, Duration::from_secs(5))
            .await
            .is_some(),
        "a never-ending header block kept the connection open"
    );

    // Streams opened and reset at once, over and over (CVE-2023-44487).
    let (mut stream, _) = h2_connect(&server).await;
    let mut flood = Vec::new();
    for i in 0..2_000u32 {
        let id = 2 * i + 1;
        flood.extend(frame(HEADERS, END_HEADERS | END_STREAM, id, &GET_ROOT));
        flood.extend(frame(RST_STREAM, 0, id, &8u32.to_be_bytes()));
    }
    let _ = stream.write_all(&flood).await;
    let code = goaway_within(&mut stream, Duration::from_secs(5)).await;
    const ENHANCE_YOUR_CALM: u32 = 0xb;
    assert!(
        matches!(code, Some(ENHANCE_YOUR_CALM | u32::MAX)),
        "rapid resets: {code:?}"
    );
    assert_eq!(
        http_get(&server.addr, "/healthz").await.map(|(s, _)| s),
        Some(200)
    );
    let (status, _) = server.stop().await;
    assert!(status.success());
    app.finish().await;
}
