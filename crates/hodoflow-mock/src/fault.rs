//! Fault injection: what the network and the server can do to a request.
//!
//! A [`Fault`] pairs an action with the requests it applies to (method and path
//! prefix) and how often: the next N matching requests, or each one with a
//! seeded probability. Faults are tried in the order they were injected: the
//! first that fires takes the request, and a probability that does not fire
//! leaves it to the next matching fault.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Deserialize;

/// What happens to a request the fault applies to.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum FaultAction {
    /// Answer this status, headers and body without executing anything.
    Respond {
        /// The status code.
        status: u16,
        /// Extra headers (e.g. `Retry-After`).
        #[serde(default)]
        headers: BTreeMap<String, String>,
        /// The body, sent as `application/json` when it parses as JSON.
        #[serde(default)]
        body: String,
    },
    /// Close the connection before executing: nothing runs, no answer. Over HTTP/2 the
    /// stream is reset with `INTERNAL_ERROR`, which does not tell the client nothing ran.
    CloseBeforeExecute,
    /// Refuse the request unprocessed. Over HTTP/2 the stream is reset with `REFUSED_STREAM`,
    /// which tells the client nothing was processed (RFC 9113 section 8.7); HTTP/1.1 has no
    /// such signal, so there the connection is closed as by `close_before_execute`.
    RefuseStream,
    /// Execute, then close without answering: the unobserved commit.
    ExecuteThenClose,
    /// Execute, then hold the answer back this long (a client timeout fires after the commit).
    ExecuteThenDelay {
        /// How long the answer is held.
        #[serde(with = "millis")]
        delay_ms: Duration,
    },
    /// Wait this long, then handle normally.
    DelayThenHandle {
        /// How long the request waits before it is handled.
        #[serde(with = "millis")]
        delay_ms: Duration,
    },
    /// Hold the write's key reservation this long while it executes, so a
    /// concurrent retry meets `idempotency_key_in_progress`.
    SlowExecution {
        /// How long the execution takes.
        #[serde(with = "millis")]
        delay_ms: Duration,
    },
    /// Reserve the key, then fail with this 5xx status: the key is released and
    /// nothing is written.
    FailExecution {
        /// The 5xx status.
        status: u16,
    },
    /// Answer as if the bearer token had expired, in the surface's own form.
    ExpiredToken,
    /// A signed trigger checks this delivery's timestamp on a clock this many seconds off the
    /// server's (positive: ahead), as a server with a skewed clock would.
    SkewedClock {
        /// Seconds ahead (or behind, when negative) of the server's clock.
        skew_secs: i64,
    },
    /// A signed trigger checks this delivery against a secret rotated in that no sender holds,
    /// as if its secrets had been replaced: it is refused, and nothing runs.
    RotatedSecret,
    /// A token exchange issues its token as usual (it lives `Limits::token_ttl` on the server)
    /// but its answer states this `expires_in` instead: any JSON value (`0`, `-5`, `1e300`,
    /// `"60"`), or, when `None` (JSON `null` or absent), no `expires_in` field at all.
    StatedExpiresIn {
        /// The `expires_in` the answer states; `None` leaves the field out.
        #[serde(default)]
        expires_in: Option<serde_json::Value>,
    },
    /// A token exchange issues this text as its access token (a word such as `accepted`, or
    /// anything else), valid for `Limits::token_ttl` like any token it issues.
    IssuedToken {
        /// The access token issued.
        access_token: String,
    },
}

impl FaultAction {
    /// A short name for logs and the ledger.
    pub fn name(&self) -> &'static str {
        match self {
            FaultAction::Respond { .. } => "respond",
            FaultAction::CloseBeforeExecute => "close_before_execute",
            FaultAction::RefuseStream => "refuse_stream",
            FaultAction::ExecuteThenClose => "execute_then_close",
            FaultAction::ExecuteThenDelay { .. } => "execute_then_delay",
            FaultAction::DelayThenHandle { .. } => "delay_then_handle",
            FaultAction::SlowExecution { .. } => "slow_execution",
            FaultAction::FailExecution { .. } => "fail_execution",
            FaultAction::ExpiredToken => "expired_token",
            FaultAction::SkewedClock { .. } => "skewed_clock",
            FaultAction::RotatedSecret => "rotated_secret",
            FaultAction::StatedExpiresIn { .. } => "stated_expires_in",
            FaultAction::IssuedToken { .. } => "issued_token",
        }
    }
}

mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer};

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

/// How often a fault fires.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Firing {
    /// For the next N matching requests, then the fault is gone.
    Times(u32),
    /// For each matching request with this probability, drawn from a seeded generator.
    Probability {
        /// Between 0 and 1.
        p: f64,
        /// The seed, so a rehearsal can be repeated.
        seed: u64,
    },
    /// For every matching request during this long from when the fault is armed (an outage
    /// window), then the fault is gone.
    During {
        /// How long the window lasts.
        #[serde(with = "millis")]
        window_ms: Duration,
    },
    /// For each matching request above this many per second: a token bucket of this many
    /// tokens, refilled at this rate, as a reverse proxy's rate limit (Envoy's local rate
    /// limit, Traefik's, nginx `limit_req` with a burst) counts. A request that finds a token
    /// takes it and is left to the next fault.
    AboveRate {
        /// Requests admitted per second, and the burst.
        per_second: u32,
    },
}

/// A fault and the requests it applies to.
///
/// # Examples
///
/// ```
/// use hodoflow_mock::Fault;
///
/// // The next webhook delivery commits, then its answer is lost.
/// let fault = Fault::execute_then_close().on("POST", "/api/v1/webhooks/").times(1);
/// # let _ = fault;
/// ```
///
/// The control route refuses a field it does not know (a `"times": 3` beside `firing`, say),
/// so a rehearsal never arms something other than what it wrote.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[must_use]
pub struct Fault {
    /// What happens.
    pub action: FaultAction,
    /// Only requests with this method, in any case (any method when `None`).
    #[serde(default)]
    pub method: Option<String>,
    /// Only requests whose raw path starts with this.
    #[serde(default)]
    pub path_prefix: String,
    /// How often.
    #[serde(default = "once")]
    pub firing: Firing,
}

fn once() -> Firing {
    Firing::Times(1)
}

impl Fault {
    /// A fault with `action` on every request, once.
    pub fn new(action: FaultAction) -> Self {
        Self {
            action,
            method: None,
            path_prefix: String::new(),
            firing: once(),
        }
    }

    /// Answer `status` without executing.
    pub fn respond(status: u16) -> Self {
        Self::new(FaultAction::Respond {
            status,
            headers: BTreeMap::new(),
            body: String::new(),
        })
    }

    /// `503 idempotency_unavailable`: the key store cannot be reached, nothing is written.
    pub fn idempotency_unavailable() -> Self {
        Self::respond(503).body(
            r#"{"errors":[{"status":"503","code":"idempotency_unavailable","title":"Idempotency store unavailable"}]}"#,
        )
    }

    /// `503 Processing temporarily unavailable` with `Retry-After: seconds`.
    pub fn webhook_unavailable(retry_after_secs: u64) -> Self {
        Self::respond(503)
            .header("Retry-After", &retry_after_secs.to_string())
            .body(r#"{"error":"Processing temporarily unavailable"}"#)
    }

    /// Close the connection before executing.
    pub fn close_before_execute() -> Self {
        Self::new(FaultAction::CloseBeforeExecute)
    }

    /// Refuse the request unprocessed: `REFUSED_STREAM` over HTTP/2, a closed connection over
    /// HTTP/1.1.
    pub fn refuse_stream() -> Self {
        Self::new(FaultAction::RefuseStream)
    }

    /// Execute, then close the connection without answering.
    pub fn execute_then_close() -> Self {
        Self::new(FaultAction::ExecuteThenClose)
    }

    /// Execute, then delay the answer.
    pub fn execute_then_delay(delay: Duration) -> Self {
        Self::new(FaultAction::ExecuteThenDelay { delay_ms: delay })
    }

    /// Delay, then handle.
    pub fn delay_then_handle(delay: Duration) -> Self {
        Self::new(FaultAction::DelayThenHandle { delay_ms: delay })
    }

    /// Hold the key reservation while the write executes.
    pub fn slow_execution(delay: Duration) -> Self {
        Self::new(FaultAction::SlowExecution { delay_ms: delay })
    }

    /// Reserve the key, then fail with a 5xx; the key is released.
    pub fn fail_execution(status: u16) -> Self {
        Self::new(FaultAction::FailExecution { status })
    }

    /// Answer as if the token had expired.
    pub fn expired_token() -> Self {
        Self::new(FaultAction::ExpiredToken)
    }

    /// A signed trigger checks the timestamp on a clock `skew_secs` off the server's.
    pub fn skewed_clock(skew_secs: i64) -> Self {
        Self::new(FaultAction::SkewedClock { skew_secs })
    }

    /// A signed trigger's secrets are rotated to one no sender holds, for this delivery.
    pub fn rotated_secret() -> Self {
        Self::new(FaultAction::RotatedSecret)
    }

    /// A token exchange's answer states `expires_in` (any JSON value: `0`, `-5`, `"60"`)
    /// instead of the token's lifetime; the token itself lives `Limits::token_ttl` as usual.
    ///
    /// ```
    /// use hodoflow_mock::Fault;
    ///
    /// // Every token answer says the token expires at once; the server keeps it an hour.
    /// let fault = Fault::stated_expires_in(0.into()).on("POST", "/oauth/token").times(u32::MAX);
    /// # let _ = fault;
    /// ```
    pub fn stated_expires_in(expires_in: serde_json::Value) -> Self {
        Self::new(FaultAction::StatedExpiresIn {
            expires_in: Some(expires_in),
        })
    }

    /// A token exchange's answer has no `expires_in` field; the token itself lives
    /// `Limits::token_ttl` as usual.
    pub fn no_expires_in() -> Self {
        Self::new(FaultAction::StatedExpiresIn { expires_in: None })
    }

    /// A token exchange issues `access_token` (a word such as `accepted`, or anything else) as
    /// its token, valid like any other; the server never prints it.
    pub fn issued_token(access_token: &str) -> Self {
        Self::new(FaultAction::IssuedToken {
            access_token: access_token.to_owned(),
        })
    }

    /// Adds a header to a `respond` fault.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        if let FaultAction::Respond { headers, .. } = &mut self.action {
            headers.insert(name.to_owned(), value.to_owned());
        }
        self
    }

    /// Sets the body of a `respond` fault.
    pub fn body(mut self, text: &str) -> Self {
        if let FaultAction::Respond { body, .. } = &mut self.action {
            text.clone_into(body);
        }
        self
    }

    /// Applies only to `method` requests whose path starts with `path_prefix`.
    pub fn on(mut self, method: &str, path_prefix: &str) -> Self {
        self.method = Some(method.to_ascii_uppercase());
        self.path_prefix = path_prefix.to_owned();
        self
    }

    /// Fires for the next `n` matching requests.
    pub fn times(mut self, n: u32) -> Self {
        self.firing = Firing::Times(n);
        self
    }

    /// Fires for each matching request with probability `p`, seeded.
    pub fn probability(mut self, p: f64, seed: u64) -> Self {
        self.firing = Firing::Probability { p, seed };
        self
    }

    /// Fires for every matching request during `window` from when it is armed.
    pub fn during(mut self, window: Duration) -> Self {
        self.firing = Firing::During { window_ms: window };
        self
    }

    /// Fires for each matching request above `per_second` requests a second (a token bucket of
    /// `per_second` tokens refilled at `per_second` a second).
    pub fn above_rate(mut self, per_second: u32) -> Self {
        self.firing = Firing::AboveRate { per_second };
        self
    }

    /// `429 Rate limit exceeded` **without** `Retry-After` above `per_second` requests a
    /// second, as a reverse proxy in front of the server answers.
    pub fn proxy_rate_limit(per_second: u32) -> Self {
        Self::respond(429)
            .body(r#"{"error":"Rate limit exceeded"}"#)
            .above_rate(per_second)
    }

    fn matches(&self, method: &str, path: &str) -> bool {
        self.method
            .as_deref()
            .is_none_or(|m| m.eq_ignore_ascii_case(method))
            && path.starts_with(&self.path_prefix)
    }
}

#[derive(Debug)]
struct Armed {
    fault: Fault,
    /// The order it was armed in: the first armed of the faults that match goes first.
    order: u64,
    rng: StdRng,
    armed_at: Instant,
    /// The tokens of an `AboveRate` bucket, and when they were counted.
    tokens: f64,
    counted_at: Instant,
}

/// The faults in force, first armed first.
///
/// Faults are kept by path prefix, so a request looks up each prefix of its path (one map
/// look-up per character) instead of trying every armed fault: a scenario that arms a fault
/// for each of 10,000 triggers costs each request what one fault would.
#[derive(Debug, Default)]
pub(crate) struct FaultTable {
    by_prefix: HashMap<String, Vec<Armed>>,
    armed: u64,
    /// How many armed faults have a window, so that the sweep for ended windows is skipped
    /// while there are none.
    windows: usize,
}

impl FaultTable {
    pub(crate) fn push(&mut self, fault: Fault) {
        let seed = match fault.firing {
            Firing::Probability { seed, .. } => seed,
            Firing::Times(_) | Firing::During { .. } | Firing::AboveRate { .. } => 0,
        };
        let now = Instant::now();
        let tokens = match fault.firing {
            Firing::AboveRate { per_second } => f64::from(per_second),
            _ => 0.0,
        };
        if matches!(fault.firing, Firing::During { .. }) {
            self.windows += 1;
        }
        self.armed += 1;
        self.by_prefix
            .entry(fault.path_prefix.clone())
            .or_default()
            .push(Armed {
                fault,
                order: self.armed,
                rng: StdRng::seed_from_u64(seed),
                armed_at: now,
                tokens,
                counted_at: now,
            });
    }

    pub(crate) fn clear(&mut self) {
        self.by_prefix.clear();
        self.windows = 0;
    }

    /// The action for this request, if a fault fires on it.
    pub(crate) fn take(&mut self, method: &str, path: &str) -> Option<FaultAction> {
        self.take_at(method, path, Instant::now())
    }

    fn take_at(&mut self, method: &str, path: &str, now: Instant) -> Option<FaultAction> {
        if self.windows > 0 {
            self.sweep_windows(now);
        }
        // The faults that match, from every prefix of the path, in the order they were armed.
        let mut matching: Vec<(u64, usize, usize)> = Vec::new();
        for end in (0..=path.len()).filter(|&end| path.is_char_boundary(end)) {
            if let Some(armed) = self.by_prefix.get(&path[..end]) {
                matching.extend(
                    armed
                        .iter()
                        .enumerate()
                        .filter(|(_, armed)| armed.fault.matches(method, path))
                        .map(|(index, armed)| (armed.order, end, index)),
                );
            }
        }
        matching.sort_unstable_by_key(|&(order, ..)| order);
        // Each matching fault in turn gets its chance: a probability that does not fire
        // leaves the request to the next one.
        for (_, end, index) in matching {
            let prefix = &path[..end];
            let bucket = self.by_prefix.get_mut(prefix)?;
            let armed = &mut bucket[index];
            match &mut armed.fault.firing {
                Firing::Times(n) => {
                    let action = armed.fault.action.clone();
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        bucket.remove(index);
                        if bucket.is_empty() {
                            self.by_prefix.remove(prefix);
                        }
                    }
                    return Some(action);
                }
                Firing::Probability { p, .. } => {
                    let p = p.clamp(0.0, 1.0);
                    if armed.rng.random_bool(p) {
                        return Some(armed.fault.action.clone());
                    }
                }
                Firing::During { .. } => return Some(armed.fault.action.clone()),
                Firing::AboveRate { per_second } => {
                    let rate = f64::from(*per_second);
                    let elapsed = now.saturating_duration_since(armed.counted_at);
                    armed.tokens = (armed.tokens + elapsed.as_secs_f64() * rate).min(rate);
                    armed.counted_at = now;
                    if armed.tokens >= 1.0 {
                        armed.tokens -= 1.0;
                    } else {
                        return Some(armed.fault.action.clone());
                    }
                }
            }
        }
        None
    }

    /// A window that has ended is gone.
    fn sweep_windows(&mut self, now: Instant) {
        let mut windows = 0;
        self.by_prefix.retain(|_, bucket| {
            bucket.retain(|armed| match armed.fault.firing {
                Firing::During { window_ms } => {
                    let open = now.saturating_duration_since(armed.armed_at) < window_ms;
                    windows += usize::from(open);
                    open
                }
                _ => true,
            });
            !bucket.is_empty()
        });
        self.windows = windows;
    }

    #[cfg(test)]
    fn armed(&self) -> impl Iterator<Item = &Armed> {
        self.by_prefix.values().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_fires_exactly_n_times_on_matching_requests_only() {
        let mut table = FaultTable::default();
        table.push(
            Fault::close_before_execute()
                .on("POST", "/api/v1/webhooks/")
                .times(2),
        );
        assert_eq!(table.take("GET", "/api/v1/webhooks/t"), None);
        assert_eq!(table.take("POST", "/oauth/token"), None);
        assert!(table.take("POST", "/api/v1/webhooks/t").is_some());
        assert!(table.take("POST", "/api/v1/webhooks/t").is_some());
        assert_eq!(table.take("POST", "/api/v1/webhooks/t"), None);
    }

    #[test]
    fn the_first_armed_of_the_faults_on_every_prefix_of_a_path_fires() {
        let mut table = FaultTable::default();
        table.push(
            Fault::respond(500)
                .on("POST", "/api/v1/webhooks/trg_a")
                .times(1),
        );
        table.push(Fault::respond(501).on("POST", "/api/").times(1));
        table.push(Fault::respond(502).times(1));
        table.push(
            Fault::respond(503)
                .on("GET", "/api/v1/webhooks/trg_a")
                .times(1),
        );
        let mut status = |method, path| match table.take(method, path) {
            Some(FaultAction::Respond { status, .. }) => Some(status),
            _ => None,
        };
        assert_eq!(status("POST", "/api/v1/webhooks/trg_b"), Some(501));
        assert_eq!(status("POST", "/api/v1/webhooks/trg_a"), Some(500));
        assert_eq!(status("POST", "/api/v1/webhooks/trg_a"), Some(502));
        assert_eq!(status("POST", "/api/v1/webhooks/trg_a"), None);
        assert_eq!(status("GET", "/api/v1/webhooks/trg_a/1"), Some(503));
        assert_eq!(status("GET", "/api/v1/webhooks/trg_a/1"), None);
    }

    #[test]
    fn a_probability_that_does_not_fire_leaves_the_request_to_the_next_fault() {
        let mut table = FaultTable::default();
        table.push(Fault::respond(503).probability(0.0, 1));
        table.push(Fault::execute_then_close().times(1));
        assert_eq!(
            table.take("POST", "/x"),
            Some(FaultAction::ExecuteThenClose)
        );
        assert_eq!(
            table.take("POST", "/x"),
            None,
            "503 never fires, the other is spent"
        );
        table.push(Fault::respond(503).probability(1.0, 1));
        table.push(Fault::execute_then_close().times(1));
        assert!(matches!(
            table.take("POST", "/x"),
            Some(FaultAction::Respond { status: 503, .. })
        ));
    }

    #[test]
    fn probability_is_repeatable_for_a_seed() {
        let draw = |seed| {
            let mut table = FaultTable::default();
            table.push(Fault::respond(500).probability(0.3, seed));
            (0..200)
                .map(|_| table.take("GET", "/").is_some())
                .collect::<Vec<_>>()
        };
        let first = draw(7);
        assert_eq!(first, draw(7));
        let fired = first.iter().filter(|f| **f).count();
        assert!(
            (30..=90).contains(&fired),
            "fired {fired} of 200 at p = 0.3"
        );
    }

    #[test]
    fn during_fires_for_its_window_only() {
        let mut table = FaultTable::default();
        table.push(Fault::respond(503).during(Duration::from_secs(5)));
        let armed = table.armed().next().unwrap().armed_at;
        assert!(table.take_at("POST", "/x", armed).is_some());
        assert!(
            table
                .take_at("POST", "/x", armed + Duration::from_millis(4999))
                .is_some()
        );
        assert_eq!(
            table.take_at("POST", "/x", armed + Duration::from_secs(5)),
            None
        );
        assert_eq!(table.armed().count(), 0, "gone once its window ended");
    }

    #[test]
    fn above_rate_admits_a_burst_then_the_rate_and_refuses_the_rest() {
        let mut table = FaultTable::default();
        table.push(Fault::proxy_rate_limit(50));
        let t0 = table.armed().next().unwrap().armed_at;
        let refused = (0..60)
            .filter(|_| table.take_at("POST", "/x", t0).is_some())
            .count();
        assert_eq!(refused, 10, "a burst of 50 passes");
        let later = t0 + Duration::from_millis(100);
        let refused = (0..10)
            .filter(|_| table.take_at("POST", "/x", later).is_some())
            .count();
        assert_eq!(refused, 5, "5 tokens came back in 100 ms");
        let Some(FaultAction::Respond {
            status, headers, ..
        }) = table.take_at("POST", "/x", later)
        else {
            panic!("a 429");
        };
        assert_eq!(status, 429);
        assert!(headers.is_empty(), "no Retry-After");
    }

    #[test]
    fn the_control_route_form_refuses_unknown_fields_and_matches_a_method_in_any_case() {
        let misplaced = serde_json::from_str::<Fault>(
            r#"{"action":{"respond":{"status":503}},"path_prefix":"/x","times":3}"#,
        );
        assert!(
            misplaced
                .unwrap_err()
                .to_string()
                .contains("unknown field `times`")
        );
        let typo =
            serde_json::from_str::<Fault>(r#"{"action":{"respond":{"status":503,"header":{}}}}"#);
        assert!(
            typo.unwrap_err()
                .to_string()
                .contains("unknown field `header`")
        );
        let lower: Fault = serde_json::from_str(
            r#"{"action":{"respond":{"status":503}},"method":"post","path_prefix":"/x"}"#,
        )
        .unwrap();
        let mut table = FaultTable::default();
        table.push(lower);
        assert!(table.take("POST", "/x/1").is_some(), "post matches POST");
    }

    #[test]
    fn parses_the_control_route_form() {
        let fault: Fault = serde_json::from_str(
            r#"{"action":{"respond":{"status":429,"headers":{"Retry-After":"2"}}},
                "method":"POST","path_prefix":"/api/json/","firing":{"times":3}}"#,
        )
        .unwrap();
        assert_eq!(fault.firing, Firing::Times(3));
        let delay: Fault =
            serde_json::from_str(r#"{"action":{"execute_then_delay":{"delay_ms":250}}}"#).unwrap();
        assert_eq!(
            delay.action,
            FaultAction::ExecuteThenDelay {
                delay_ms: Duration::from_millis(250)
            }
        );
    }
}
