//! The status page's tests: `outbox serve` as a child process, and raw HTTP/1.1 to it.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A child process killed when dropped.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `command` (`hodoflow-send` with its environment) as `outbox --outbox OUTBOX serve
/// --listen 127.0.0.1:0 EXTRA…`; returns it and its base URL, read from the line it prints.
pub fn serve(mut command: Command, outbox: &str, extra: &[&str]) -> (Running, String) {
    let mut child = command
        .args([
            "outbox",
            "--outbox",
            outbox,
            "serve",
            "--listen",
            "127.0.0.1:0",
        ])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the binary starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("no address printed: {line:?}"))
        .trim_end_matches('/')
        .to_owned();
    (Running(child), url)
}

/// The `Host` of `base`, as a browser sends it: the page's own address.
pub fn host(base: &str) -> &str {
    base.trim_start_matches("http://")
}

/// A connection to the page at `base`, reads bounded by 10 s.
pub fn connect(base: &str) -> TcpStream {
    let stream = TcpStream::connect(host(base)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
}

/// One HTTP/1.1 request over a fresh connection: status, headers (lower-cased names) and body.
pub fn http(base: &str, request: &str) -> (u16, String, String) {
    let mut stream = connect(base);
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    parse(&answer)
}

/// The status, lower-cased head and body of an answer.
pub fn parse(answer: &str) -> (u16, String, String) {
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((answer, ""));
    let status = head
        .split(' ')
        .nth(1)
        .unwrap_or_else(|| panic!("not an answer: {answer:?}"))
        .parse()
        .unwrap();
    (status, head.to_ascii_lowercase(), body.to_owned())
}

/// `GET path` with the page's own `Host` and `headers` (each line ending in CRLF).
pub fn get_with(base: &str, path: &str, headers: &str) -> (u16, String, String) {
    http(
        base,
        &format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n{headers}\r\n",
            host(base)
        ),
    )
}

/// `GET path` with the page's own `Host`.
pub fn get(base: &str, path: &str) -> (u16, String, String) {
    get_with(base, path, "")
}

/// `POST path` of a form with the page's own `Host` and `headers`.
pub fn post(base: &str, path: &str, headers: &str, form: &str) -> (u16, String, String) {
    http(
        base,
        &format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Type: \
             application/x-www-form-urlencoded\r\nContent-Length: {}\r\n{headers}\r\n{form}",
            host(base),
            form.len()
        ),
    )
}

/// The security headers every response carries.
#[track_caller]
pub fn assert_security_headers(head: &str) {
    for header in [
        "content-security-policy: default-src 'none'; style-src 'self'; img-src 'self' data:; \
         form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        "x-content-type-options: nosniff",
        "referrer-policy: no-referrer",
        "cache-control: no-store",
    ] {
        assert!(head.contains(header), "{header} missing in {head}");
    }
}

/// The value of the cookie `name` a response's head sets, if it sets it.
pub fn set_cookie<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        line.strip_prefix("set-cookie: ")?
            .strip_prefix(name)?
            .strip_prefix('=')?
            .split(';')
            .next()
    })
}
