//! One token for every caller: cached, refreshed before it expires, exchanged by one caller at
//! a time, with a backoff shared by every caller while the token endpoint fails.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use http::HeaderValue;
use tokio::time::Instant;

use crate::core::error::{Error, Result};
use crate::core::jitter::Jitter;
use crate::core::redact::Secrets;
use crate::core::runtime;

use super::TokenExchanger;
use crate::core::auth::secret::AccessToken;

/// The most a token is refreshed ahead of its expiry.
const MAX_REFRESH_SKEW: Duration = Duration::from_secs(30);

/// The shortest life a token is cached for, counted from the start of its exchange. A token
/// that expires sooner (`"expires_in": 0`, or one already expired when it arrives) serves only
/// the callers that waited for its exchange, and the exchange counts as failed: the next one
/// waits the shared backoff. `expires_in` is in whole seconds, so no token an endpoint means to
/// last is caught; what it bounds is the exchanges of one credential, about one per 0.9 s while
/// tokens are cached and one per backoff step while they are not.
pub(crate) const MIN_TOKEN_LIFETIME: Duration = Duration::from_secs(1);

/// A token handed out by a [`TokenCache`], with the exchange it came from: shared, so that
/// each call holds a pointer to it, not a copy.
#[derive(Debug, Clone)]
pub(crate) struct CachedToken(Arc<Issued>);

impl std::ops::Deref for CachedToken {
    type Target = Issued;

    fn deref(&self) -> &Issued {
        &self.0
    }
}

/// What one exchange issued, as its callers hold it.
#[derive(Debug)]
pub(crate) struct Issued {
    token: AccessToken,
    generation: u64,
    /// `Bearer …`, built once per exchange; `None` when the token cannot be a header value.
    authorization: Option<HeaderValue>,
    /// How long it lived from the start of its exchange, when under [`MIN_TOKEN_LIFETIME`]:
    /// it serves only the callers that waited for that exchange.
    short_lived: Option<Duration>,
}

impl CachedToken {
    /// The token.
    #[cfg(test)]
    pub(crate) fn token(&self) -> &AccessToken {
        &self.token
    }

    /// The token's text. Never log it.
    #[cfg(any(test, fuzzing))]
    pub(crate) fn expose(&self) -> &str {
        self.token.secret().expose()
    }

    /// The `Authorization: Bearer …` value, marked sensitive.
    pub(crate) fn authorization(&self) -> Result<HeaderValue> {
        match &self.authorization {
            Some(value) => Ok(value.clone()),
            None => self.token.authorization(),
        }
    }
}

/// The first wait of the shared backoff after a failed exchange.
const EXCHANGE_BACKOFF_FIRST: Duration = Duration::from_millis(250);

/// The longest wait of the shared backoff (a longer `Retry-After` from the token endpoint is
/// still waited in full): the most a healed token endpoint waits for its next exchange.
const EXCHANGE_BACKOFF_MAX: Duration = Duration::from_secs(5);

/// How long a caller waits for a token, and how long an exchange it starts may take.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TokenWait {
    /// The caller gives up waiting (for an exchange in flight, or for the shared backoff to
    /// end) at this instant.
    pub(crate) until: Instant,
    /// The bound of an exchange this caller starts, its connect and body read included. It
    /// runs on without the caller, so other callers may use its token.
    pub(crate) exchange_timeout: Duration,
}

impl TokenWait {
    /// Wait and exchange for at most `limit` from now.
    #[cfg(test)]
    pub(crate) fn within(limit: Duration) -> Self {
        Self {
            until: runtime::now() + limit,
            exchange_timeout: limit,
        }
    }
}

/// Caches one token for every caller, refreshes it before it expires, and single-flights the
/// exchange: at most one is in flight, and every caller that needs a token waits for it.
///
/// An exchange that fails starts a backoff **shared by every caller**: no exchange starts
/// before it ends (250 ms, doubling to at most 5 s, drawn in its upper half; or the token
/// endpoint's `Retry-After` when longer). A caller whose time outlasts the backoff waits it
/// out and takes the next exchange's token; one whose time does not gets the last failure at
/// once. A failing token endpoint therefore sees about one exchange per backoff step, however
/// many callers need a token: 1,000 calls during a 10 s outage cost it about ten exchanges,
/// not one per caller round trip.
///
/// A token that lives less than [`MIN_TOKEN_LIFETIME`] (1 s) from the start of its exchange,
/// such as one answered `"expires_in": 0`, is not held: the callers that waited for that
/// exchange send it, and the exchange counts as failed, so the next waits the shared backoff.
/// Whatever the token endpoint answers, one credential's exchanges stay a few a second at most.
/// A 401 for such a token ends the call at once, as a refusal: exchanging again would get
/// another token that expires at once.
///
/// The exchange runs in a task of its own, bounded by the timeout of the caller that started
/// it: a caller that gives up does not cut it short for the others.
#[derive(Clone)]
pub(crate) struct TokenCache {
    inner: Arc<TokenState>,
}

struct TokenState {
    exchanger: Arc<dyn TokenExchanger>,
    /// What the exchanger declared it holds, and every token it issued: to clean what a
    /// server echoes (`redact.rs`).
    secrets: Secrets,
    /// The held token, mirrored from `State::held`, so the common case (a fresh token) is read
    /// without taking the state's lock.
    current: std::sync::RwLock<Option<Held>>,
    state: std::sync::Mutex<State>,
    /// Exchanges finished, mirrored from `State::finished`.
    finished: AtomicU64,
    /// Sent the count of finished exchanges when one finishes; callers waiting for the one in
    /// flight subscribe to it.
    done: tokio::sync::watch::Sender<u64>,
    /// Draws the shared backoff's jitter.
    jitter: Jitter,
}

#[derive(Default)]
struct State {
    held: Option<Held>,
    last_failure: Option<Error>,
    finished: u64,
    /// An exchange is in flight.
    in_flight: bool,
    /// Exchanges failed in a row.
    failures: u32,
    /// No exchange starts before this: the shared backoff after a failure.
    retry_at: Option<Instant>,
    /// The last exchange's token when it was too short-lived to hold: for the callers that
    /// waited for that exchange only.
    handoff: Option<CachedToken>,
}

#[derive(Clone)]
struct Held {
    token: CachedToken,
    refresh_at: Option<Instant>,
}

impl Held {
    /// The token, if it need not be refreshed yet at `now`.
    fn fresh(&self, now: Instant) -> Option<CachedToken> {
        self.refresh_at
            .is_none_or(|refresh_at| now < refresh_at)
            .then(|| self.token.clone())
    }
}

impl State {
    /// The held token, if it need not be refreshed yet.
    fn fresh(&self, now: Instant) -> Option<CachedToken> {
        self.held.as_ref()?.fresh(now)
    }

    /// The held token, if it has not expired: good enough while a refresh fails.
    fn unexpired(&self, now: Instant) -> Option<CachedToken> {
        let held = self.held.as_ref()?;
        held.token
            .token
            .expires_at()
            .is_none_or(|expires_at| now < expires_at)
            .then(|| held.token.clone())
    }
}

impl TokenCache {
    pub(crate) fn new(exchanger: Arc<dyn TokenExchanger>) -> Self {
        let secrets = Secrets::default();
        for secret in exchanger.secrets() {
            secrets.add(secret.expose());
        }
        Self {
            inner: Arc::new(TokenState {
                exchanger,
                secrets,
                current: std::sync::RwLock::new(None),
                state: std::sync::Mutex::new(State::default()),
                finished: AtomicU64::new(0),
                done: tokio::sync::watch::channel(0).0,
                jitter: Jitter::new(None),
            }),
        }
    }

    /// The secrets of this credential: what its exchanger holds, and the tokens it issued.
    pub(crate) fn secrets(&self) -> &Secrets {
        &self.inner.secrets
    }

    /// Exchanges finished, failed ones included.
    pub(crate) fn exchanges(&self) -> u64 {
        self.inner.finished.load(Ordering::Acquire)
    }

    /// The cached token, while it need not be refreshed: what [`get`](Self::get) answers at
    /// once, without a future.
    pub(crate) fn fresh(&self) -> Option<CachedToken> {
        self.inner
            .current()
            .as_ref()
            .and_then(|held| held.fresh(runtime::now()))
    }

    /// A token to send: the cached one while fresh, else the token of the one shared exchange,
    /// waited for within `wait`.
    ///
    /// While a refresh ahead of expiry fails, the old token is used while it lasts.
    pub(crate) async fn get(&self, wait: TokenWait) -> Result<CachedToken> {
        if let Some(token) = self.fresh() {
            return Ok(token);
        }
        let asked = runtime::now();
        // The exchange this caller waited for, whose token it may use however short-lived.
        let mut waited_for = None;
        loop {
            match self.next(wait, waited_for)? {
                Next::Token(token) => return Ok(token),
                Next::Backoff(at) => {
                    waited_for = None;
                    runtime::sleep_until(at).await;
                }
                Next::Exchange(mut finished) => {
                    let left = wait.until.saturating_duration_since(runtime::now());
                    if runtime::timeout(left, finished.changed()).await.is_err() {
                        return Err(unanswered(wait, asked));
                    }
                    waited_for = Some(*finished.borrow_and_update());
                }
            }
        }
    }

    /// A new token after `stale` was refused with a 401: `stale` is dropped (if it is still the
    /// cached token), and the token comes from one shared exchange, so a burst of 401s for one
    /// token causes one exchange.
    pub(crate) async fn refresh_after_unauthorized(
        &self,
        stale: &CachedToken,
        wait: TokenWait,
    ) -> Result<CachedToken> {
        {
            let mut state = self.inner.lock();
            if let Some(lifetime) = stale.short_lived {
                // The server refused a token that expired at once: another exchange would get
                // another such token. Callers in the backoff learn it at once too.
                let refused = refused_short_lived(lifetime);
                if state
                    .handoff
                    .as_ref()
                    .is_some_and(|handed| handed.generation == stale.generation)
                {
                    state.last_failure = Some(refused.clone());
                }
                return Err(refused);
            }
            if state
                .held
                .as_ref()
                .is_some_and(|held| held.token.generation == stale.generation)
            {
                state.held = None;
                *self.inner.current_mut() = None;
            }
        }
        self.get(wait).await
    }

    /// Under the state's lock: the token if there is one to use, else what to wait for,
    /// starting the exchange if none is in flight and the backoff is over. The last failure
    /// when the caller should not wait: it cannot be retried, or the backoff outlasts `wait`.
    /// `waited_for` is the exchange the caller waited for: its token is the caller's even when
    /// it is too short-lived to be cached.
    fn next(&self, wait: TokenWait, waited_for: Option<u64>) -> Result<Next> {
        let mut state = self.inner.lock();
        let now = runtime::now();
        if let Some(token) = state.fresh(now) {
            return Ok(Next::Token(token));
        }
        if let Some(token) = state
            .handoff
            .as_ref()
            .filter(|handed| Some(handed.generation) == waited_for)
        {
            return Ok(Next::Token(token.clone()));
        }
        if state.in_flight {
            return Ok(Next::Exchange(self.inner.done.subscribe()));
        }
        if let Some(retry_at) = state.retry_at.filter(|&at| now < at) {
            if let Some(token) = state.unexpired(now) {
                return Ok(Next::Token(token));
            }
            let failure = state
                .last_failure
                .clone()
                .unwrap_or_else(|| Error::token_exchange("the last exchange failed"));
            if !failure.is_retryable() {
                return Err(failure);
            }
            if retry_at >= wait.until {
                return Err(failure.with_note(format_args!(
                    "; the exchanges back off for another {:?}, past the {:?} the call has left",
                    shown(retry_at - now),
                    shown(wait.until.saturating_duration_since(now))
                )));
            }
            return Ok(Next::Backoff(retry_at));
        }
        state.in_flight = true;
        let finished = self.inner.done.subscribe();
        drop(state);
        let inner = Arc::clone(&self.inner);
        tokio::spawn(async move {
            let started = runtime::now();
            let result =
                match runtime::timeout(wait.exchange_timeout, inner.exchanger.exchange()).await {
                    Ok(result) => result,
                    Err(_) => Err(Error::token_exchange(format_args!(
                        "no answer from the token endpoint within {:?}, the attempt timeout",
                        shown(wait.exchange_timeout)
                    ))),
                };
            inner.record(result, started);
        });
        Ok(Next::Exchange(finished))
    }
}

/// What a caller that found no fresh token does next.
enum Next {
    /// Use this token.
    Token(CachedToken),
    /// Wait for the exchange in flight.
    Exchange(tokio::sync::watch::Receiver<u64>),
    /// Wait for the shared backoff to end.
    Backoff(Instant),
}

impl TokenState {
    /// Records the result of an exchange that started at `started`: a token is held and ends
    /// the backoff; a failure, or a token too short-lived to cache, starts (or lengthens) it.
    fn record(&self, result: Result<AccessToken>, started: Instant) {
        let mut state = self.lock();
        let now = runtime::now();
        state.in_flight = false;
        state.finished += 1;
        self.finished.store(state.finished, Ordering::Release);
        state.handoff = None;
        match result {
            Ok(token) => {
                self.secrets.add_token(token.secret().expose());
                let short_lived = short_lived(&token, started, now);
                let authorization = token.authorization().ok();
                let cached = CachedToken(Arc::new(Issued {
                    token,
                    generation: state.finished,
                    authorization,
                    short_lived,
                }));
                match short_lived {
                    Some(lifetime) => {
                        state.handoff = Some(cached);
                        self.back_off(&mut state, now, expires_at_once(lifetime));
                    }
                    None => {
                        let held = Held {
                            refresh_at: refresh_at(&cached.token, now),
                            token: cached,
                        };
                        *self.current_mut() = Some(held.clone());
                        state.held = Some(held);
                        state.last_failure = None;
                        state.failures = 0;
                        state.retry_at = None;
                    }
                }
            }
            Err(error) => self.back_off(&mut state, now, error),
        }
        let finished = state.finished;
        drop(state);
        self.done.send_replace(finished);
    }

    /// Starts (or lengthens) the shared backoff after a failed exchange, at `now`.
    fn back_off(&self, state: &mut State, now: Instant, error: Error) {
        state.failures = state.failures.saturating_add(1);
        let backoff = self
            .jitter
            .with(|rng| exchange_backoff(state.failures, rng))
            .max(error.retry_after().unwrap_or_default());
        state.retry_at = now.checked_add(backoff);
        tracing::warn!(
            failed_exchanges = state.failures,
            wait_ms = backoff.as_millis() as u64,
            retryable = error.is_retryable(),
            "the token exchange failed; every caller's next exchange waits"
        );
        state.last_failure = Some(error);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn current(&self) -> std::sync::RwLockReadGuard<'_, Option<Held>> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn current_mut(&self) -> std::sync::RwLockWriteGuard<'_, Option<Held>> {
        self.current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The shared backoff after the `failures`-th failed exchange in a row: 250 ms doubling to at
/// most 5 s, drawn uniformly in its upper half, so it never shrinks to nothing.
fn exchange_backoff<R: rand::Rng + ?Sized>(failures: u32, rng: &mut R) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    let ceiling = EXCHANGE_BACKOFF_FIRST
        .saturating_mul(1 << doublings)
        .min(EXCHANGE_BACKOFF_MAX);
    let floor = ceiling / 2;
    floor + Duration::from_nanos(rng.random_range(0..=(ceiling - floor).as_nanos() as u64))
}

impl fmt::Debug for TokenCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenCache").finish_non_exhaustive()
    }
}

/// How long `token`, asked for at `started` and received at `now`, lives from `started`, when
/// that is under [`MIN_TOKEN_LIFETIME`] or it has expired already; `None` for a token to hold.
fn short_lived(token: &AccessToken, started: Instant, now: Instant) -> Option<Duration> {
    let expires_at = token.expires_at()?;
    let lifetime = expires_at.saturating_duration_since(started);
    (lifetime < MIN_TOKEN_LIFETIME || expires_at <= now).then_some(lifetime)
}

/// The failure a token too short-lived to hold counts as: retryable, so callers wait the
/// backoff for the next exchange when their time allows.
fn expires_at_once(lifetime: Duration) -> Error {
    Error::token_exchange(format_args!(
        "the token endpoint issued tokens that expire at once (the last one lived {:?} from \
         the start of its exchange; a token is kept when it lives at least {:?})",
        shown(lifetime),
        MIN_TOKEN_LIFETIME
    ))
}

/// The failure when the server refused a token that expired at once: not retryable, as
/// exchanging again gets another such token.
fn refused_short_lived(lifetime: Duration) -> Error {
    Error::token_exchange(format_args!(
        "the token endpoint issued tokens that expire at once (the last one lived {:?} from \
         the start of its exchange, under the {:?} a token must live), and the server refused \
         the last one as expired",
        shown(lifetime),
        MIN_TOKEN_LIFETIME
    ))
    .with_status(http::StatusCode::OK)
}

/// The failure of a caller whose time ran out while the exchange it waited for went on: it
/// states the time the caller had left, and the exchange's own bound.
fn unanswered(wait: TokenWait, asked: Instant) -> Error {
    let left = wait.until.saturating_duration_since(asked);
    if left.is_zero() {
        return Error::token_exchange(format_args!(
            "the call had no time left to wait for the token endpoint (an exchange may take up \
             to {:?}, the attempt timeout)",
            shown(wait.exchange_timeout)
        ));
    }
    Error::token_exchange(format_args!(
        "no answer from the token endpoint within the {:?} the call had left (an exchange may \
         take up to {:?}, the attempt timeout)",
        shown(left),
        shown(wait.exchange_timeout)
    ))
}

/// `duration` to the millisecond for a message (to the microsecond under a millisecond), so it
/// reads `4.999s`, not `4.998734411s`.
fn shown(duration: Duration) -> Duration {
    if duration < Duration::from_millis(1) {
        return Duration::from_micros(u64::try_from(duration.as_micros()).unwrap_or(u64::MAX));
    }
    Duration::from_millis(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX))
}

/// When to refresh `token`, received at `now`: ahead of expiry by a tenth of its lifetime, at
/// most 30 s. `None` when the expiry is unknown.
fn refresh_at(token: &AccessToken, now: Instant) -> Option<Instant> {
    let expires_at = token.expires_at()?;
    let skew = (expires_at.saturating_duration_since(now) / 10).min(MAX_REFRESH_SKEW);
    Some(expires_at.checked_sub(skew).unwrap_or(expires_at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::auth::ExchangeFuture;
    use crate::core::error::ErrorKind;
    use http::StatusCode;
    use std::sync::atomic::AtomicUsize;

    /// A minute to wait for a token.
    #[allow(non_snake_case)]
    fn WAIT() -> TokenWait {
        TokenWait::within(Duration::from_secs(60))
    }

    /// Counts exchanges; each gives a new token that lives `lifetime`, after `delay`.
    struct Counting {
        exchanges: AtomicUsize,
        lifetime: Option<Duration>,
        delay: Duration,
        fail: bool,
    }

    impl Counting {
        fn new(lifetime: Option<Duration>) -> Arc<Self> {
            Arc::new(Self {
                exchanges: AtomicUsize::new(0),
                lifetime,
                delay: Duration::from_millis(5),
                fail: false,
            })
        }

        fn failing() -> Arc<Self> {
            Arc::new(Self {
                exchanges: AtomicUsize::new(0),
                lifetime: None,
                delay: Duration::from_secs(1),
                fail: true,
            })
        }

        fn count(&self) -> usize {
            self.exchanges.load(Ordering::SeqCst)
        }
    }

    impl TokenExchanger for Counting {
        fn exchange(&self) -> ExchangeFuture<'_> {
            Box::pin(async move {
                let number = self.exchanges.fetch_add(1, Ordering::SeqCst) + 1;
                tokio::time::sleep(self.delay).await;
                if self.fail {
                    return Err(Error::token_exchange("the token endpoint answered 503")
                        .with_status(StatusCode::SERVICE_UNAVAILABLE));
                }
                let expires_at = self
                    .lifetime
                    .and_then(|life| Instant::now().checked_add(life));
                Ok(AccessToken::new(format!("token-{number}"), expires_at))
            })
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_thousand_concurrent_401s_cause_one_exchange() {
        let exchanger = Counting::new(None);
        let cache = Arc::new(TokenCache::new(exchanger.clone()));
        let stale = cache.get(WAIT()).await.expect("first token");
        assert_eq!(exchanger.count(), 1);

        let tasks: Vec<_> = (0..1_000)
            .map(|_| {
                let cache = Arc::clone(&cache);
                let stale = stale.clone();
                tokio::spawn(async move { cache.refresh_after_unauthorized(&stale, WAIT()).await })
            })
            .collect();
        for task in tasks {
            let token = task.await.expect("task").expect("refreshed token");
            assert_eq!(token.token().secret().expose(), "token-2");
        }

        assert_eq!(exchanger.count(), 2);
    }

    /// Runs `callers` concurrent `get()`s on `cache`; their results, in spawn order.
    async fn concurrent_gets(cache: &Arc<TokenCache>, callers: usize) -> Vec<Result<CachedToken>> {
        let tasks: Vec<_> = (0..callers)
            .map(|_| {
                let cache = Arc::clone(cache);
                tokio::spawn(async move { cache.get(WAIT()).await })
            })
            .collect();
        let mut results = Vec::with_capacity(callers);
        for task in tasks {
            results.push(task.await.expect("task"));
        }
        results
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_first_callers_share_one_exchange() {
        let exchanger = Counting::new(Some(Duration::from_secs(3600)));
        let cache = Arc::new(TokenCache::new(exchanger.clone()));

        for token in concurrent_gets(&cache, 100).await {
            token.expect("token");
        }

        assert_eq!(exchanger.count(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn refreshes_the_token_shortly_before_it_expires() {
        let exchanger = Counting::new(Some(Duration::from_secs(100)));
        let cache = TokenCache::new(exchanger.clone());

        let first = cache.get(WAIT()).await.expect("token");
        tokio::time::advance(Duration::from_secs(85)).await;
        let still = cache.get(WAIT()).await.expect("token");
        assert_eq!(exchanger.count(), 1);
        assert_eq!(still.generation, first.generation);

        // A 100 s token is refreshed 10 s (a tenth of its life) before it expires.
        tokio::time::advance(Duration::from_secs(6)).await;
        let renewed = cache.get(WAIT()).await.expect("token");
        assert_eq!(exchanger.count(), 2);
        assert_ne!(renewed.generation, first.generation);
    }

    #[test]
    fn the_shared_backoff_doubles_from_250_ms_to_5_s_in_its_upper_half() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        for (failures, ceiling_ms) in [(1, 250), (2, 500), (3, 1_000), (5, 4_000), (6, 5_000)] {
            for _ in 0..100 {
                let wait = exchange_backoff(failures, &mut rng);
                let ceiling = Duration::from_millis(ceiling_ms);
                assert!(
                    wait >= ceiling / 2 && wait <= ceiling,
                    "{failures}: {wait:?}"
                );
            }
        }
        assert!(exchange_backoff(u32::MAX, &mut rng) <= EXCHANGE_BACKOFF_MAX);
    }

    #[test]
    fn refresh_skew_is_a_tenth_of_the_lifetime_and_at_most_30_s() {
        let now = Instant::now();
        let hour = AccessToken::new("t", Some(now + Duration::from_secs(3600)));
        let minute = AccessToken::new("t", Some(now + Duration::from_secs(60)));
        assert_eq!(
            refresh_at(&hour, now),
            Some(now + Duration::from_secs(3570))
        );
        assert_eq!(
            refresh_at(&minute, now),
            Some(now + Duration::from_secs(54))
        );
        assert_eq!(refresh_at(&AccessToken::new("t", None), now), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_refresh_for_an_older_token_reuses_the_newer_one() {
        let exchanger = Counting::new(None);
        let cache = TokenCache::new(exchanger.clone());
        let first = cache.get(WAIT()).await.expect("token");
        let second = cache
            .refresh_after_unauthorized(&first, WAIT())
            .await
            .expect("token");
        let again = cache
            .refresh_after_unauthorized(&first, WAIT())
            .await
            .expect("token");

        assert_eq!(again.generation, second.generation);
        assert_eq!(exchanger.count(), 2);
        cache
            .refresh_after_unauthorized(&second, WAIT())
            .await
            .expect("token");
        assert_eq!(exchanger.count(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn callers_queued_behind_a_failed_exchange_share_its_failure() {
        let exchanger = Counting::failing();
        let cache = Arc::new(TokenCache::new(exchanger.clone()));

        // 50 callers with 1.2 s each: the exchange takes 1 s and fails, and the backoff after
        // it (125-250 ms) ends too late for the next exchange to be answered in their time.
        let tasks: Vec<_> = (0..50)
            .map(|_| {
                let cache = Arc::clone(&cache);
                tokio::spawn(async move {
                    cache
                        .get(TokenWait::within(Duration::from_millis(1_200)))
                        .await
                })
            })
            .collect();
        for task in tasks {
            let error = task.await.expect("task").expect_err("exchange fails");
            assert_eq!(error.kind(), ErrorKind::TokenExchange);
        }
        assert!(exchanger.count() <= 2, "{} exchanges", exchanger.count());
    }

    #[tokio::test(start_paused = true)]
    async fn a_caller_during_the_shared_backoff_is_answered_without_an_exchange() {
        let exchanger = Counting::failing();
        let cache = TokenCache::new(exchanger.clone());
        cache
            .get(TokenWait::within(Duration::from_millis(1_100)))
            .await
            .expect_err("exchange fails");
        assert_eq!(exchanger.count(), 1);

        // The backoff (125-250 ms) outlasts this caller's 100 ms: the failure, at once.
        let asked = Instant::now();
        let error = cache
            .get(TokenWait::within(Duration::from_millis(100)))
            .await
            .expect_err("backing off");
        assert_eq!(Instant::now(), asked, "no wait");
        assert_eq!(exchanger.count(), 1, "no exchange");
        assert!(error.to_string().contains("back off"), "{error}");
        assert!(error.is_retryable());
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_exchange_is_shared_until_its_backoff_ends() {
        struct Refused(AtomicUsize);
        impl TokenExchanger for Refused {
            fn exchange(&self) -> ExchangeFuture<'_> {
                self.0.fetch_add(1, Ordering::SeqCst);
                Box::pin(async {
                    Err(
                        Error::token_exchange("the token endpoint answered 401 invalid_client")
                            .with_status(StatusCode::UNAUTHORIZED),
                    )
                })
            }
        }
        let exchanger = Arc::new(Refused(AtomicUsize::new(0)));
        let cache = Arc::new(TokenCache::new(exchanger.clone()));
        let tasks: Vec<_> = (0..100)
            .map(|_| {
                let cache = Arc::clone(&cache);
                tokio::spawn(async move { cache.get(WAIT()).await })
            })
            .collect();
        for task in tasks {
            let error = task.await.expect("task").expect_err("refused");
            assert!(!error.is_retryable(), "{error}");
        }
        assert_eq!(exchanger.0.load(Ordering::SeqCst), 1, "not waited out");
        tokio::time::advance(Duration::from_millis(300)).await;
        cache.get(WAIT()).await.expect_err("refused");
        assert_eq!(exchanger.0.load(Ordering::SeqCst), 2, "tried again later");
    }

    /// Answers 503 (after `delay`) until `healed_at`, then a token.
    struct DownUntil {
        healed_at: Instant,
        delay: Duration,
        failed: AtomicUsize,
        granted: AtomicUsize,
    }

    impl TokenExchanger for DownUntil {
        fn exchange(&self) -> ExchangeFuture<'_> {
            Box::pin(async move {
                tokio::time::sleep(self.delay).await;
                if Instant::now() < self.healed_at {
                    self.failed.fetch_add(1, Ordering::SeqCst);
                    return Err(Error::token_exchange("the token endpoint answered 503")
                        .with_status(StatusCode::SERVICE_UNAVAILABLE));
                }
                self.granted.fetch_add(1, Ordering::SeqCst);
                Ok(AccessToken::expiring_in(
                    "tok-healed",
                    Duration::from_secs(3600),
                ))
            })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_token_endpoint_down_10_s_sees_few_exchanges_from_a_thousand_callers() {
        let exchanger = Arc::new(DownUntil {
            healed_at: Instant::now() + Duration::from_secs(10),
            delay: Duration::from_millis(20),
            failed: AtomicUsize::new(0),
            granted: AtomicUsize::new(0),
        });
        let cache = Arc::new(TokenCache::new(exchanger.clone()));
        // 1,000 calls arrive evenly over the 10 s outage, each with the default 60 s.
        let mut tasks = Vec::new();
        for _ in 0..1_000 {
            let cache = Arc::clone(&cache);
            tasks.push(tokio::spawn(async move { cache.get(WAIT()).await }));
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        for task in tasks {
            let token = task
                .await
                .expect("task")
                .expect("every call outlasts the outage");
            assert_eq!(token.expose(), "tok-healed");
        }
        let failed = exchanger.failed.load(Ordering::SeqCst);
        assert_eq!(
            exchanger.granted.load(Ordering::SeqCst),
            1,
            "one exchange serves all"
        );
        // 250 ms doubling to 5 s, drawn in the upper half: at most 8 steps fit in 10 s.
        assert!(failed <= 9, "{failed} exchanges failed");
        assert_eq!(cache.exchanges(), failed as u64 + 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_refresh_ahead_of_expiry_keeps_the_unexpired_token() {
        struct FailsSecond(AtomicUsize);
        impl TokenExchanger for FailsSecond {
            fn exchange(&self) -> ExchangeFuture<'_> {
                Box::pin(async move {
                    if self.0.fetch_add(1, Ordering::SeqCst) == 0 {
                        Ok(AccessToken::expiring_in(
                            "tok-0001",
                            Duration::from_secs(100),
                        ))
                    } else {
                        Err(Error::token_exchange("the token endpoint answered 503"))
                    }
                })
            }
        }
        let cache = TokenCache::new(Arc::new(FailsSecond(AtomicUsize::new(0))));
        cache.get(WAIT()).await.expect("token");

        tokio::time::advance(Duration::from_secs(95)).await;
        let kept = cache.get(WAIT()).await.expect("the unexpired token");
        assert_eq!(kept.token().secret().expose(), "tok-0001");

        tokio::time::advance(Duration::from_secs(10)).await;
        cache
            .get(WAIT())
            .await
            .expect_err("expired and not renewed");
    }

    #[tokio::test(start_paused = true)]
    async fn a_token_that_expires_at_once_serves_the_callers_of_its_exchange_only() {
        let exchanger = Counting::new(Some(Duration::ZERO));
        let cache = Arc::new(TokenCache::new(exchanger.clone()));

        for token in concurrent_gets(&cache, 50).await {
            assert_eq!(token.expect("token").expose(), "token-1");
        }
        assert_eq!(exchanger.count(), 1, "one exchange for the 50 that waited");

        // The exchange counts as failed: a caller with less time than the backoff (125-250 ms)
        // is told why at once, without an exchange.
        let asked = Instant::now();
        let error = cache
            .get(TokenWait::within(Duration::from_millis(100)))
            .await
            .expect_err("no token to hold");
        assert_eq!(Instant::now(), asked, "no wait");
        assert_eq!(exchanger.count(), 1, "no exchange");
        let message = error.to_string();
        assert!(
            message.starts_with(
                "token exchange failed: the token endpoint issued tokens that expire at once \
                 (the last one lived 5ms from the start of its exchange; a token is kept when \
                 it lives at least 1s); the exchanges back off for another "
            ),
            "{message}"
        );
        assert!(
            message.ends_with(", past the 100ms the call has left"),
            "{message}"
        );
        assert!(error.is_retryable());

        // A caller with time waits the backoff out and sends the next exchange's token.
        let token = cache.get(WAIT()).await.expect("the next exchange's token");
        assert_eq!(token.expose(), "token-2");
        assert!(Instant::now() - asked >= Duration::from_millis(125));
    }

    #[tokio::test(start_paused = true)]
    async fn tokens_that_expire_at_once_cost_a_few_exchanges_a_second_at_most() {
        // Lives 5 ms (the exchange's own time), 905 ms, and the 1 s floor: the last is held and
        // refreshed ahead of expiry, about once per 0.9 s.
        for (lifetime, most) in [
            (Duration::ZERO, 10),
            (Duration::from_millis(900), 10),
            (Duration::from_millis(995), 12),
        ] {
            let exchanger = Counting::new(Some(lifetime));
            let cache = Arc::new(TokenCache::new(exchanger.clone()));
            // A call every 10 ms for 10 s, each with 60 s to get its token.
            let started = Instant::now();
            let mut tasks = Vec::new();
            for _ in 0..1_000 {
                let cache = Arc::clone(&cache);
                tasks.push(tokio::spawn(async move { cache.get(WAIT()).await }));
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            for task in tasks {
                task.await.expect("task").expect("every call gets a token");
            }
            let seconds = (Instant::now() - started).as_secs_f64();
            // 250 ms doubling to 5 s, drawn in the upper half: at most 9 exchanges in 10 s,
            // and the calls still waiting at 10 s share one more.
            let exchanges = exchanger.count();
            assert!(
                exchanges <= most,
                "{lifetime:?}: {exchanges} in {seconds:.1} s"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_token_that_lives_the_floor_is_held_and_hostile_lifetimes_are_bounded() {
        // 1 s from the exchange's start (its 5 ms included): held like any other.
        let exchanger = Counting::new(Some(Duration::from_secs(1) - Duration::from_millis(5)));
        let cache = TokenCache::new(exchanger.clone());
        cache.get(WAIT()).await.expect("token");
        cache.get(WAIT()).await.expect("the same token");
        assert_eq!(exchanger.count(), 1);

        /// Issues tokens that expired before they were asked for, or never do.
        struct Expiry(Option<Duration>, AtomicUsize);
        impl TokenExchanger for Expiry {
            fn exchange(&self) -> ExchangeFuture<'_> {
                self.1.fetch_add(1, Ordering::SeqCst);
                let expires_at = self.0.and_then(|ago| Instant::now().checked_sub(ago));
                Box::pin(async move { Ok(AccessToken::new("tok-expiry", expires_at)) })
            }
        }
        // Expired an hour ago: served to its callers, then the backoff.
        let past = Arc::new(Expiry(Some(Duration::from_secs(3600)), AtomicUsize::new(0)));
        let cache = TokenCache::new(past.clone());
        cache.get(WAIT()).await.expect("served to its caller");
        cache
            .get(TokenWait::within(Duration::from_millis(50)))
            .await
            .expect_err("in the backoff");
        assert_eq!(past.1.load(Ordering::SeqCst), 1);
        // No expiry: held until a 401.
        let never = Arc::new(Expiry(None, AtomicUsize::new(0)));
        let cache = TokenCache::new(never.clone());
        for _ in 0..100 {
            cache.get(WAIT()).await.expect("token");
            tokio::time::advance(Duration::from_secs(3600)).await;
        }
        assert_eq!(never.1.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_401_for_a_token_that_expired_at_once_ends_the_call_without_an_exchange() {
        let exchanger = Counting::new(Some(Duration::ZERO));
        let cache = TokenCache::new(exchanger.clone());
        let sent = cache.get(WAIT()).await.expect("token");

        let error = cache
            .refresh_after_unauthorized(&sent, WAIT())
            .await
            .expect_err("another exchange would get another such token");
        assert_eq!(exchanger.count(), 1, "no exchange");
        assert!(!error.is_retryable(), "{error}");
        assert_eq!(
            error.to_string(),
            "token exchange failed: the token endpoint issued tokens that expire at once (the \
             last one lived 5ms from the start of its exchange, under the 1s a token must \
             live), and the server refused the last one as expired"
        );
        // A caller in the backoff hears it at once, whatever its time.
        let refused = cache.get(WAIT()).await.expect_err("refused");
        assert_eq!(refused.to_string(), error.to_string());
        assert_eq!(exchanger.count(), 1);
    }

    /// Never answers.
    struct Silent(AtomicUsize);

    impl TokenExchanger for Silent {
        fn exchange(&self) -> ExchangeFuture<'_> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Box::pin(std::future::pending())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_out_of_time_states_the_time_it_had_and_the_attempt_timeout() {
        let cache = TokenCache::new(Arc::new(Silent(AtomicUsize::new(0))));
        let five_of_fifteen = TokenWait {
            until: Instant::now() + Duration::from_secs(5),
            exchange_timeout: Duration::from_secs(15),
        };
        let error = cache.get(five_of_fifteen).await.expect_err("no answer");
        assert_eq!(
            error.to_string(),
            "token exchange failed: no answer from the token endpoint within the 5s the call \
             had left (an exchange may take up to 15s, the attempt timeout)"
        );

        let cache = TokenCache::new(Arc::new(Silent(AtomicUsize::new(0))));
        let none_left = TokenWait {
            until: Instant::now(),
            exchange_timeout: Duration::from_secs(10),
        };
        let error = cache.get(none_left).await.expect_err("no time");
        assert_eq!(
            error.to_string(),
            "token exchange failed: the call had no time left to wait for the token endpoint \
             (an exchange may take up to 10s, the attempt timeout)"
        );

        // The exchange itself ends at the attempt timeout; a caller in the backoff after it
        // hears that.
        tokio::time::sleep(Duration::from_millis(10_001)).await;
        let error = cache
            .get(TokenWait::within(Duration::from_millis(10)))
            .await
            .expect_err("backing off");
        assert!(
            error.to_string().starts_with(
                "token exchange failed: no answer from the token endpoint within 10s, the \
                 attempt timeout; the exchanges back off"
            ),
            "{error}"
        );
    }
}
