//! Guessing the admin token, throttled per client.
//!
//! Every admin token a request presents (the login form's, or `Authorization: Bearer`) is
//! judged here, under one lock: the comparison and the record of its result cannot interleave
//! with another request's, so parallel guesses are counted one by one. A client (an IPv4
//! address, or an IPv6 /64, what one host usually holds) may be wrong [`FREE`] times in a row;
//! each wrong token after that shuts it out for a while, 5 s at first and twice as long each
//! time, up to [`MAX_WAIT`]: while shut out, its tokens are not even compared, and it is
//! answered `429 Too Many Requests` with a `Retry-After`. A right token ends the count; so do
//! [`FORGET`] without a wrong one. The table holds [`MAX_CLIENTS`] clients at most (the ones
//! seen longest ago go first), so a flood of addresses cannot grow it.
//!
//! A client on the same address as the admin (every local process shares `127.0.0.1`) can shut
//! the admin out for up to [`MAX_WAIT`] by guessing: the price of throttling at all.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Wrong tokens in a row a client may present before it is shut out.
pub(crate) const FREE: u32 = 2;

/// The first time a client is shut out.
const FIRST_WAIT: Duration = Duration::from_secs(5);

/// The longest time a client is shut out.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(60);

/// How long without a wrong token before a client's count starts again.
const FORGET: Duration = Duration::from_secs(15 * 60);

/// The most clients the table holds.
const MAX_CLIENTS: usize = 4096;

/// What came of a token a client presented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Judged {
    /// The admin token.
    Right,
    /// Another token.
    Wrong,
    /// Not compared: the client is shut out for this long.
    ShutOut(Duration),
}

/// One client's wrong tokens.
#[derive(Debug, Clone, Copy)]
struct Wrong {
    /// In a row.
    count: u32,
    /// The last one.
    last: Instant,
    /// Shut out until.
    until: Option<Instant>,
}

/// The wrong tokens of every client.
#[derive(Debug, Default)]
pub(crate) struct Throttle {
    clients: Mutex<HashMap<IpAddr, Wrong>>,
}

impl Throttle {
    /// Judges the token `client` presented with `right` (a constant-time comparison), at `now`.
    pub(crate) fn judge(
        &self,
        client: IpAddr,
        now: Instant,
        right: impl FnOnce() -> bool,
    ) -> Judged {
        let client = key(client);
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(wrong) = clients.get(&client)
            && let Some(until) = wrong.until
            && now < until
        {
            return Judged::ShutOut(until - now);
        }
        if right() {
            clients.remove(&client);
            return Judged::Right;
        }
        if clients.len() >= MAX_CLIENTS && !clients.contains_key(&client) {
            clients.retain(|_, wrong| now.duration_since(wrong.last) < FORGET);
            if clients.len() >= MAX_CLIENTS
                && let Some(oldest) = clients
                    .iter()
                    .min_by_key(|(_, wrong)| wrong.last)
                    .map(|(client, _)| *client)
            {
                clients.remove(&oldest);
            }
        }
        let wrong = clients.entry(client).or_insert(Wrong {
            count: 0,
            last: now,
            until: None,
        });
        if now.duration_since(wrong.last) >= FORGET {
            wrong.count = 0;
        }
        wrong.count += 1;
        wrong.last = now;
        wrong.until = (wrong.count > FREE).then(|| now + wait(wrong.count - FREE));
        Judged::Wrong
    }
}

/// How long the `n`th shut-out lasts: 5 s, doubling, at most [`MAX_WAIT`].
fn wait(n: u32) -> Duration {
    FIRST_WAIT
        .saturating_mul(1 << (n - 1).min(16))
        .min(MAX_WAIT)
}

/// The client `ip` counts for: an IPv4 address, or the /64 of an IPv6 one.
fn key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & !((1_u128 << 64) - 1);
            IpAddr::V6(bits.into())
        }
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn after_two_wrong_tokens_a_client_is_shut_out_longer_each_time() {
        let throttle = Throttle::default();
        let client = ip("192.0.2.7");
        let start = Instant::now();
        assert_eq!(throttle.judge(client, start, || false), Judged::Wrong);
        assert_eq!(throttle.judge(client, start, || false), Judged::Wrong);
        assert_eq!(throttle.judge(client, start, || false), Judged::Wrong);
        let mut compared = false;
        let judged = throttle.judge(client, start, || {
            compared = true;
            true
        });
        assert_eq!(judged, Judged::ShutOut(Duration::from_secs(5)));
        assert!(
            !compared,
            "a client shut out is not compared, even with the right token"
        );
        // Another client is not held by it.
        assert_eq!(
            throttle.judge(ip("192.0.2.8"), start, || true),
            Judged::Right
        );
        let later = start + Duration::from_secs(5);
        assert_eq!(throttle.judge(client, later, || false), Judged::Wrong);
        assert_eq!(
            throttle.judge(client, later, || true),
            Judged::ShutOut(Duration::from_secs(10))
        );
        assert_eq!(wait(20), MAX_WAIT);
    }

    #[test]
    fn a_right_token_or_a_quiet_quarter_hour_ends_the_count() {
        let throttle = Throttle::default();
        let client = ip("192.0.2.9");
        let start = Instant::now();
        throttle.judge(client, start, || false);
        throttle.judge(client, start, || false);
        assert_eq!(throttle.judge(client, start, || true), Judged::Right);
        throttle.judge(client, start, || false);
        throttle.judge(client, start, || false);
        let quiet = start + FORGET;
        assert_eq!(throttle.judge(client, quiet, || false), Judged::Wrong);
        assert_eq!(throttle.judge(client, quiet, || false), Judged::Wrong);
    }

    #[test]
    fn an_ipv6_client_is_its_64_and_the_table_is_bounded() {
        assert_eq!(key(ip("2001:db8::1")), key(ip("2001:db8::ffff:1")));
        assert_ne!(key(ip("2001:db8::1")), key(ip("2001:db8:0:1::1")));
        assert_eq!(key(ip("::ffff:192.0.2.1")), ip("192.0.2.1"));
        let throttle = Throttle::default();
        let now = Instant::now();
        for n in 0..(MAX_CLIENTS as u32 + 10) {
            throttle.judge(IpAddr::V4(n.into()), now, || false);
        }
        assert_eq!(throttle.clients.lock().unwrap().len(), MAX_CLIENTS);
    }
}
