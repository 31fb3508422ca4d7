//! Tokens: one cached token, one re-exchange and one retry after a 401, a second 401 stops, a
//! failed exchange sends nothing, custom exchangers are used, and concurrent 401s share one
//! exchange.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hodoflow_mock::{DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, Fault, ManualClock, MockServer};
use hodoflow_retry::{
    Budget, ErrorKind,
    attempt::WaitReason,
    auth::{ClientCredentials, ExchangeFuture, TokenExchanger},
};
use support::{JSON_API, PROJECTS, client, client_with, key, project, server, statuses};

// Every test again over h2c, as over_h2c::<name>.
support::over_h2c!(
    one_token_serves_every_call_while_it_is_fresh,
    an_expired_token_is_exchanged_again_once_and_the_write_succeeds,
    a_401_on_every_attempt_stops_after_exactly_two_attempts_as_unauthorized,
    a_bad_client_secret_fails_the_token_exchange_and_nothing_reaches_the_api,
    a_custom_exchanger_is_asked_for_the_token_and_again_after_a_401,
    a_custom_exchanger_whose_token_the_server_refuses_is_asked_twice_then_unauthorized,
    a_custom_exchanger_that_reports_a_refusal_fails_every_call_at_once_like_the_built_in,
    a_thousand_concurrent_calls_refused_with_401_share_one_token_exchange
);

/// Hands out what `source` gives and counts how often it was asked.
struct Counting<S> {
    source: S,
    exchanges: Arc<AtomicUsize>,
}

impl<S> Counting<S> {
    fn new(source: S) -> (Self, Arc<AtomicUsize>) {
        let exchanges = Arc::new(AtomicUsize::new(0));
        let counting = Self {
            source,
            exchanges: exchanges.clone(),
        };
        (counting, exchanges)
    }
}

impl<S: TokenExchanger> TokenExchanger for Counting<S> {
    fn exchange(&self) -> ExchangeFuture<'_> {
        self.exchanges.fetch_add(1, Ordering::SeqCst);
        self.source.exchange()
    }
}

#[tokio::test]
async fn one_token_serves_every_call_while_it_is_fresh() {
    let server = server().await;
    let client = client(&server);

    for _ in 0..3 {
        client.get(PROJECTS).send().await.unwrap();
    }

    assert_eq!(server.ledger().tokens_issued(), 1);
}

#[tokio::test]
async fn an_expired_token_is_exchanged_again_once_and_the_write_succeeds() {
    let server = server().await;
    server.inject(Fault::expired_token().on("POST", JSON_API));
    let key = key("project-orion:create");

    let response = client(&server)
        .create(PROJECTS, key.clone(), project("Orion"))
        .send()
        .await
        .unwrap();

    assert_eq!(statuses(response.attempts()), [Some(401), Some(201)]);
    assert_eq!(response.attempts()[0].wait_reason(), WaitReason::Reexchange);
    let ledger = server.ledger();
    assert_eq!(ledger.tokens_issued(), 2);
    assert_eq!(ledger.writes_executed(key.as_str()), 1);
}

#[tokio::test]
async fn a_401_on_every_attempt_stops_after_exactly_two_attempts_as_unauthorized() {
    let server = server().await;
    server.inject(Fault::expired_token().on("POST", JSON_API).times(100));
    let key = key("project-lyra:create");

    let error = client(&server)
        .create(PROJECTS, key.clone(), project("Lyra"))
        .send()
        .await
        .unwrap_err();

    assert_eq!(error.kind(), ErrorKind::Unauthorized, "{error}");
    assert_eq!(statuses(error.attempts()), [Some(401), Some(401)]);
    assert!(!error.may_have_run());
    let ledger = server.ledger();
    assert_eq!(ledger.tokens_issued(), 2, "one exchange, one re-exchange");
    assert_eq!(ledger.requests_with_key(key.as_str()).len(), 2);
    assert_eq!(ledger.writes_executed(key.as_str()), 0);
}

#[tokio::test]
async fn a_bad_client_secret_fails_the_token_exchange_and_nothing_reaches_the_api() {
    const WRONG: &str = "not-the-demo-secret";
    let server = server().await;
    let client = support::builder(&server)
        .client_credentials(DEMO_CLIENT_ID, WRONG)
        .build()
        .unwrap();

    let error = client.get(PROJECTS).send().await.unwrap_err();

    assert_eq!(error.kind(), ErrorKind::TokenExchange, "{error}");
    assert_eq!(error.status().map(|s| s.as_u16()), Some(401));
    assert!(error.attempts().is_empty());
    assert!(!error.may_have_run());
    assert!(!error.is_retryable(), "wrong credentials stay wrong");
    assert!(!format!("{error} {error:?}").contains(WRONG));
    let ledger = server.ledger();
    assert_eq!(ledger.exchanges().len(), 1);
    assert_eq!(ledger.tokens_issued(), 0);
    assert!(ledger.requests_to("GET", JSON_API).is_empty());
}

#[tokio::test]
async fn a_custom_exchanger_is_asked_for_the_token_and_again_after_a_401() {
    let server = server().await;
    server.inject(Fault::expired_token().on("GET", JSON_API));
    let credentials =
        ClientCredentials::new(&server.base_url(), DEMO_CLIENT_ID, DEMO_CLIENT_SECRET)
            .unwrap()
            .http_client(support::http_client());
    let (exchanger, exchanges) = Counting::new(credentials);
    let client = support::builder(&server)
        .exchanger(exchanger)
        .build()
        .unwrap();

    let response = client.get(PROJECTS).send().await.unwrap();

    assert_eq!(statuses(response.attempts()), [Some(401), Some(200)]);
    assert_eq!(exchanges.load(Ordering::SeqCst), 2);
    assert_eq!(server.ledger().tokens_issued(), 2);
}

#[tokio::test]
async fn a_custom_exchanger_whose_token_the_server_refuses_is_asked_twice_then_unauthorized() {
    let server = server().await;
    let (exchanger, exchanges) = Counting::new(support::Forged);
    let client = support::builder(&server)
        .exchanger(exchanger)
        .build()
        .unwrap();

    let error = client.get(PROJECTS).send().await.unwrap_err();

    assert_eq!(error.kind(), ErrorKind::Unauthorized, "{error}");
    assert_eq!(statuses(error.attempts()), [Some(401), Some(401)]);
    assert_eq!(exchanges.load(Ordering::SeqCst), 2);
    let ledger = server.ledger();
    assert!(
        ledger.exchanges().is_empty(),
        "the client never used /oauth/token"
    );
    assert_eq!(ledger.requests_to("GET", PROJECTS).len(), 2);
}

/// Refuses every exchange as a token endpoint that does not know the client would (401).
struct Refusing;

impl TokenExchanger for Refusing {
    fn exchange(&self) -> ExchangeFuture<'_> {
        Box::pin(async {
            Err(hodoflow_retry::Error::token_exchange("invalid_client")
                .with_status(reqwest::StatusCode::UNAUTHORIZED))
        })
    }
}

/// A custom exchanger says "refused" as the built-in one does: each call ends at once, not
/// retryable, with the status, nothing sent to the API and no exchange retried.
#[tokio::test]
async fn a_custom_exchanger_that_reports_a_refusal_fails_every_call_at_once_like_the_built_in() {
    const CALLS: usize = 20;
    let server = server().await;
    let (exchanger, exchanges) = Counting::new(Refusing);
    let client = support::builder(&server)
        .exchanger(exchanger)
        .build()
        .unwrap();

    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..CALLS {
        let client = client.clone();
        calls.spawn(async move { client.get(PROJECTS).send().await.unwrap_err() });
    }
    for error in calls.join_all().await {
        assert_eq!(error.kind(), ErrorKind::TokenExchange, "{error}");
        assert_eq!(error.status().map(|s| s.as_u16()), Some(401), "{error}");
        assert!(!error.is_retryable(), "a refusal stays a refusal: {error}");
        assert!(!error.may_have_run());
        assert!(error.attempts().is_empty());
    }
    let asked = exchanges.load(Ordering::SeqCst);
    assert!(
        (1..=CALLS).contains(&asked),
        "no exchange retried: {asked} for {CALLS} calls"
    );
    assert!(server.ledger().requests_to("GET", PROJECTS).is_empty());
}

/// Every call starts with the cached token, which the server's clock has expired; each 401 asks
/// for a new token, and all but the first find it already exchanged. A fault would not do here:
/// `expired_token().times(N)` could also refuse a retry that arrives before the last first
/// attempt, and a second 401 stops the call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_calls_refused_with_401_share_one_token_exchange() {
    const CALLS: usize = 1000;
    let clock = ManualClock::new();
    let server = support::server_with(MockServer::builder().clock(clock.clone())).await;
    let client = client(&server);
    client.get(PROJECTS).send().await.unwrap();
    clock.advance(Duration::from_secs(2 * 3600));
    // Hold each first answer back a little, so every call has sent the stale token before the
    // first 401 comes back. A retry that meets the delay is only slower.
    server.inject(
        Fault::delay_then_handle(Duration::from_millis(200))
            .on("GET", PROJECTS)
            .times(CALLS as u32),
    );

    let calls: Vec<_> = (0..CALLS)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { client.get(PROJECTS).send().await })
        })
        .collect();
    let mut refused_once = 0;
    for call in calls {
        let response = call.await.unwrap().expect("every call succeeds");
        match statuses(response.attempts()).as_slice() {
            [Some(200)] => {}
            [Some(401), Some(200)] => refused_once += 1,
            other => panic!("unexpected attempts {other:?}"),
        }
    }

    let ledger = server.ledger();
    assert_eq!(
        ledger.tokens_issued(),
        2,
        "{refused_once} calls met a 401; one exchange before them, one after"
    );
    let answered_401 = ledger
        .requests_to("GET", PROJECTS)
        .iter()
        .filter(|request| request.status == Some(401))
        .count();
    assert_eq!(answered_401, refused_once);
    assert!(
        refused_once >= 1,
        "the first answer to the stale token is a 401"
    );
}

/// The token endpoint answers 503 for 10 s while 1,000 writes arrive, one every 10 ms, each with
/// a 60 s budget. The exchanges back off as one, shared by every call: the token endpoint sees at
/// most 30 exchange requests, one grants the token after it heals, and every write runs exactly
/// once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_endpoint_down_10_s_sees_at_most_30_exchanges_from_1000_calls() {
    const CALLS: u64 = 1_000;
    let server = server().await;
    let outage = Duration::from_secs(10);
    server.inject(
        Fault::respond(503)
            .body(r#"{"error":"temporarily_unavailable"}"#)
            .on("POST", "/oauth/token")
            .during(outage),
    );
    let client = client_with(
        &server,
        Budget::new()
            .max_attempts(5)
            .max_elapsed(Duration::from_secs(60))
            .attempt_timeout(Duration::from_secs(5)),
    );

    let started = tokio::time::Instant::now();
    let mut calls = Vec::new();
    for n in 0..CALLS {
        let client = client.clone();
        calls.push(tokio::spawn(async move {
            let key = key(&format!("token-outage:{n}"));
            let name = format!("Outage {n}");
            client.create(PROJECTS, key, project(&name)).send().await
        }));
        tokio::time::sleep_until(started + outage * (n as u32 + 1) / CALLS as u32).await;
    }
    for call in calls {
        let response = call.await.unwrap().expect("every call outlasts the outage");
        assert_eq!(response.attempts().len(), 1, "one request to the API");
    }
    let took = started.elapsed();

    let ledger = server.ledger();
    let exchanges = ledger.requests_to("POST", "/oauth/token");
    let refused = exchanges.iter().filter(|r| r.status == Some(503)).count();
    eprintln!(
        "{CALLS} calls over a {outage:?} token outage: {} exchange requests ({refused} refused), \
         all done in {took:?}",
        exchanges.len()
    );
    assert!(exchanges.len() <= 30, "{} exchanges", exchanges.len());
    assert_eq!(ledger.tokens_issued(), 1, "one exchange serves everyone");
    assert_eq!(exchanges.len(), refused + 1);
    assert_eq!(ledger.total_writes_executed(), CALLS as u32);
    for n in 0..CALLS {
        let key = key(&format!("token-outage:{n}"));
        assert_eq!(ledger.writes_executed(key.as_str()), 1, "write {n}");
    }
}

/// Client credentials that note the `Retry-After` of every exchange that failed.
struct NotingRetryAfter {
    inner: ClientCredentials,
    refused: Arc<std::sync::Mutex<Vec<Option<Duration>>>>,
}

impl TokenExchanger for NotingRetryAfter {
    fn exchange(&self) -> ExchangeFuture<'_> {
        Box::pin(async move {
            let exchanged = self.inner.exchange().await;
            if let Err(error) = &exchanged {
                self.refused.lock().unwrap().push(error.retry_after());
            }
            exchanged
        })
    }

    fn secrets(&self) -> Vec<hodoflow_retry::Secret> {
        self.inner.secrets()
    }
}

/// A busy token endpoint's `Retry-After` reaches the exchanges' shared backoff: the refusal
/// carries it, the second call (started 100 ms in) does not start an exchange of its own, and
/// both wait for the one after it. That no exchange starts before it ends, and when the next
/// does, is checked in virtual time (tests/paused_time.rs).
#[tokio::test]
async fn a_token_endpoint_retry_after_holds_every_exchange() {
    let server = server().await;
    server.inject(
        Fault::respond(429)
            .header("Retry-After", "1")
            .body(r#"{"error":"slow_down"}"#)
            .on("POST", "/oauth/token")
            .times(1),
    );
    let refused = Arc::new(std::sync::Mutex::new(Vec::new()));
    let credentials =
        ClientCredentials::new(&server.base_url(), DEMO_CLIENT_ID, DEMO_CLIENT_SECRET)
            .unwrap()
            .http_client(support::http_client());
    let exchanger = NotingRetryAfter {
        inner: credentials,
        refused: Arc::clone(&refused),
    };
    let client = support::builder(&server)
        .exchanger(exchanger)
        .build()
        .unwrap();
    let (first, second) = tokio::join!(client.get(PROJECTS).send(), async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        client.get(PROJECTS).send().await
    });
    assert_eq!(first.expect("waits the second out").attempts().len(), 1);
    assert_eq!(second.expect("waits too").attempts().len(), 1);

    assert_eq!(*refused.lock().unwrap(), [Some(Duration::from_secs(1))]);
    let ledger = server.ledger();
    let exchanges = ledger.requests_to("POST", "/oauth/token");
    let statuses: Vec<_> = exchanges.iter().map(|r| r.status).collect();
    assert_eq!(
        statuses,
        [Some(429), Some(200)],
        "the refused one and one after it"
    );
    assert_eq!(ledger.tokens_issued(), 1);
}
