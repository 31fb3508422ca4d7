//! A connection refused with `GOAWAY` before any of its requests is processed.
//!
//! hyper and h2 name the highest stream ID they have received in a `GOAWAY`, so every request
//! they have seen "might have been processed". RFC 9113 section 6.8 lets a server name a lower
//! ID: the streams above it were not processed, and the client may send them again on a new
//! connection. To show a client that case, this module speaks just enough HTTP/2 by hand: it
//! reads the client's preface and frames up to the first `HEADERS`, answers `SETTINGS`, sends
//! `GOAWAY` with last stream ID 0 and `NO_ERROR` (a graceful shutdown), and closes.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The client connection preface of HTTP/2 (RFC 9113 section 3.4).
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const HEADERS: u8 = 0x1;
const SETTINGS: u8 = 0x4;
const GOAWAY: u8 = 0x7;
const ACK: u8 = 0x1;
/// How long a connection may take to send its preface, or to close after the `GOAWAY`.
const PATIENCE: Duration = Duration::from_secs(2);

/// Whether the connection starts with the HTTP/2 preface; reads nothing.
pub(crate) async fn is_h2c(stream: &TcpStream) -> bool {
    let mut seen = [0u8; PREFACE.len()];
    let wait = async {
        loop {
            let n = stream.peek(&mut seen).await.unwrap_or(0);
            if n == 0 || seen[..n] != PREFACE[..n] {
                return false;
            }
            if n == PREFACE.len() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    };
    tokio::time::timeout(PATIENCE, wait).await.unwrap_or(false)
}

/// One frame: its 9-byte header (RFC 9113 section 4.1), then `payload`.
fn frame(kind: u8, flags: u8, stream_id: u32, payload: &[u8]) -> Vec<u8> {
    let length = u32::try_from(payload.len()).unwrap_or(0).to_be_bytes();
    let mut frame = Vec::with_capacity(9 + payload.len());
    frame.extend_from_slice(&length[1..]);
    frame.extend_from_slice(&[kind, flags]);
    frame.extend_from_slice(&(stream_id & 0x7fff_ffff).to_be_bytes());
    frame.extend_from_slice(payload);
    frame
}

/// Reads up to the first request's `HEADERS`, then refuses the connection with `GOAWAY`
/// naming a last stream ID below that request's, and shuts its sending side; [`drain`] it.
/// `refusing` runs just before the `GOAWAY` leaves, so a client never sees it uncounted.
pub(crate) async fn refuse(
    mut stream: TcpStream,
    refusing: impl FnOnce(),
) -> io::Result<TcpStream> {
    let mut preface = [0u8; PREFACE.len()];
    stream.read_exact(&mut preface).await?;
    stream.write_all(&frame(SETTINGS, 0, 0, &[])).await?;
    let first = loop {
        let mut header = [0u8; 9];
        stream.read_exact(&mut header).await?;
        let length = u32::from_be_bytes([0, header[0], header[1], header[2]]);
        let (kind, flags) = (header[3], header[4]);
        let id = u32::from_be_bytes([header[5], header[6], header[7], header[8]]) & 0x7fff_ffff;
        let mut payload = vec![0u8; length as usize];
        stream.read_exact(&mut payload).await?;
        match kind {
            SETTINGS if flags & ACK == 0 => stream.write_all(&frame(SETTINGS, ACK, 0, &[])).await?,
            HEADERS => break id,
            _ => {}
        }
    };
    // Client streams are odd: 0 names none of them, and is below every one.
    let last = first.saturating_sub(2) & !1;
    let mut payload = last.to_be_bytes().to_vec();
    payload.extend_from_slice(&0u32.to_be_bytes()); // NO_ERROR
    refusing();
    stream.write_all(&frame(GOAWAY, 0, 0, &payload)).await?;
    stream.shutdown().await?;
    Ok(stream)
}

/// Reads until the client closes, then drops the connection: closing with unread bytes would
/// send a TCP reset, which may reach the client before it has read the `GOAWAY`.
pub(crate) async fn drain(mut stream: TcpStream) {
    let mut sink = [0u8; 4096];
    let drain = async { while stream.read(&mut sink).await.unwrap_or(0) > 0 {} };
    let _ = tokio::time::timeout(PATIENCE, drain).await;
}
