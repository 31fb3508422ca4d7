//! What the server is seeded with and every limit and window it keeps.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The organization of the demo credentials.
pub const DEMO_ORGANIZATION: &str = "acme";
/// The client ID of the demo credentials.
pub const DEMO_CLIENT_ID: &str = "demo-client";
/// The client secret of the demo credentials.
pub const DEMO_CLIENT_SECRET: &str = "demo-secret";
/// The token of the demo webhook trigger.
pub const DEMO_TRIGGER_TOKEN: &str = "trg_demo_4b1d9c0e7f";
/// The demo Modulify API token: always accepted, may call every method.
pub const DEMO_MODULIFY_TOKEN: &str = "mfy_demo_7c2e9a41";

/// Every limit and window of the contract, each configurable.
///
/// `Limits::default()` holds the documented values (the vendors' pages and
/// `docs/wire-contract.md`).
#[derive(Debug, Clone)]
pub struct Limits {
    /// Lifetime of an issued access token, stated as `expires_in` in whole seconds; zero issues
    /// tokens that are expired at once. Default: 1 hour.
    pub token_ttl: Duration,
    /// How long an expired token is still told apart from an unknown one. Default: 24 hours.
    pub expired_token_memory: Duration,
    /// A reservation whose request never finished is released after this. Default: 5 minutes.
    pub reservation_timeout: Duration,
    /// Completed JSON:API responses are replayed for this long. Default: 24 hours.
    pub idempotency_retention: Duration,
    /// Largest JSON:API write body. Default: 1,048,576 bytes.
    pub api_body_limit: usize,
    /// Largest webhook body. Default: 1,048,576 bytes.
    pub webhook_body_limit: usize,
    /// Requests allowed per trigger in one fixed window. Default: 100.
    pub webhook_rate_limit: u32,
    /// Length of the webhook rate window. Default: 60 seconds.
    pub webhook_rate_window: Duration,
    /// Whether webhook answers state the trigger's window with the IETF RateLimit fields,
    /// `RateLimit-Policy: "trigger";q=<webhook_rate_limit>;w=<webhook_rate_window in s>` and
    /// `RateLimit: "trigger";r=<left>;t=<s to reset>` (`docs/wire-contract.md`, "RateLimit
    /// fields"). Default: true.
    pub webhook_rate_limit_fields: bool,
    /// Accepted delivery identities are remembered for this long. Default: 7 days.
    pub delivery_retention: Duration,
    /// Width of the time bucket of the header-less delivery hash. Default: 2 hours.
    pub delivery_hash_bucket: Duration,
    /// Requests allowed per credential in one `api_rate_window`, JSON:API and GraphQL.
    /// Default: `None` (unlimited).
    pub api_rate_limit: Option<u32>,
    /// Length of the per-credential rate window. Default: 60 seconds.
    pub api_rate_window: Duration,
    /// How long a new workflow run stays `queued`. Default: 200 ms.
    pub run_queued_for: Duration,
    /// How long a workflow run stays `running`. Default: 800 ms.
    pub run_running_for: Duration,
    /// Most fields a GraphQL document may select. Default: 50.
    pub graphql_max_fields: usize,
    /// Status of a GraphQL validation, parse or complexity error: 400 or 200. Default: 400.
    pub graphql_error_status: u16,
    /// Request records the ledger keeps (between this and twice this; executions,
    /// runs and exchanges are always kept). Default: 100,000.
    pub ledger_requests_kept: usize,
    /// Successful Modulify answers are replayed for this long (Modulify's "Idempotency and
    /// retries"). Default: 24 hours.
    pub modulify_retention: Duration,
    /// Modulify calls a token may make in one `modulify_rate_window`; replays are free.
    /// Default: 60.
    pub modulify_rate_limit: u32,
    /// Length of the per-token Modulify rate window. Default: 60 seconds.
    pub modulify_rate_window: Duration,
    /// Largest Modulify answer body that is kept for replay; a larger one is replayed as
    /// `data: null` with a message. Default: 1,048,576 bytes.
    pub modulify_answer_kept_limit: usize,
    /// Largest Modulify request body. Default: 1,048,576 bytes.
    pub modulify_body_limit: usize,
}

impl Default for Limits {
    fn default() -> Self {
        const HOUR: u64 = 3600;
        Self {
            token_ttl: Duration::from_secs(HOUR),
            expired_token_memory: Duration::from_secs(24 * HOUR),
            reservation_timeout: Duration::from_secs(5 * 60),
            idempotency_retention: Duration::from_secs(24 * HOUR),
            api_body_limit: 1_048_576,
            webhook_body_limit: 1_048_576,
            webhook_rate_limit: 100,
            webhook_rate_window: Duration::from_secs(60),
            webhook_rate_limit_fields: true,
            delivery_retention: Duration::from_secs(7 * 24 * HOUR),
            delivery_hash_bucket: Duration::from_secs(2 * HOUR),
            api_rate_limit: None,
            api_rate_window: Duration::from_secs(60),
            run_queued_for: Duration::from_millis(200),
            run_running_for: Duration::from_millis(800),
            graphql_max_fields: 50,
            graphql_error_status: 400,
            ledger_requests_kept: 100_000,
            modulify_retention: Duration::from_secs(24 * HOUR),
            modulify_rate_limit: 60,
            modulify_rate_window: Duration::from_secs(60),
            modulify_answer_kept_limit: 1_048_576,
            modulify_body_limit: 1_048_576,
        }
    }
}

/// A bearer-token scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// JSON:API reads, workflow runs and GraphQL.
    ApiRead,
    /// JSON:API unsafe writes.
    ApiWrite,
    /// Webhook deliveries.
    Webhooks,
}

impl Scope {
    /// Every scope, in the order a token response lists them.
    pub const ALL: [Scope; 3] = [Scope::ApiRead, Scope::ApiWrite, Scope::Webhooks];

    /// The wire name (`api_read`, `api_write`, `webhooks`).
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::ApiRead => "api_read",
            Scope::ApiWrite => "api_write",
            Scope::Webhooks => "webhooks",
        }
    }

    /// Parses a wire name.
    pub fn parse(name: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

/// A service account allowed to exchange client credentials for tokens.
///
/// Its `Debug` prints the secret as `<redacted>`.
#[derive(Clone, Serialize, Deserialize)]
pub struct ClientSeed {
    /// The client ID; also the service-account principal that scopes keys.
    pub client_id: String,
    /// The client secret. Never logged.
    pub client_secret: String,
    /// The tenant (organization) the account belongs to.
    pub organization: String,
    /// Scopes the account may be granted.
    #[serde(default = "all_scopes")]
    pub scopes: Vec<Scope>,
}

impl std::fmt::Debug for ClientSeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientSeed")
            .field("client_id", &self.client_id)
            .field("client_secret", &"<redacted>")
            .field("organization", &self.organization)
            .field("scopes", &self.scopes)
            .finish()
    }
}

fn all_scopes() -> Vec<Scope> {
    Scope::ALL.to_vec()
}

impl ClientSeed {
    /// An account of `organization` with every scope.
    pub fn new(client_id: &str, client_secret: &str, organization: &str) -> Self {
        Self {
            client_id: client_id.to_owned(),
            client_secret: client_secret.to_owned(),
            organization: organization.to_owned(),
            scopes: all_scopes(),
        }
    }

    /// Limits the scopes the account may be granted.
    #[must_use]
    pub fn scopes(mut self, scopes: &[Scope]) -> Self {
        self.scopes = scopes.to_vec();
        self
    }

    /// The demo account: `demo-client` / `demo-secret` of `acme`, every scope.
    pub fn demo() -> Self {
        Self::new(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, DEMO_ORGANIZATION)
    }
}

/// The terminal state a workflow run reaches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunOutcome {
    /// The run succeeds.
    #[default]
    Succeeded,
    /// The run fails.
    Failed,
    /// The run is cancelled.
    Cancelled,
}

impl RunOutcome {
    /// The wire name of the state.
    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Succeeded => "succeeded",
            RunOutcome::Failed => "failed",
            RunOutcome::Cancelled => "cancelled",
        }
    }
}

/// A webhook trigger that starts a workflow.
///
/// Its `Debug` prints the token as `<redacted>`.
#[derive(Clone, Serialize, Deserialize)]
pub struct TriggerSeed {
    /// The secret token in the trigger URL. Never logged.
    pub token: String,
    /// The organization (also its domain on the legacy path).
    pub organization: String,
    /// An inactive trigger answers 404, indistinguishable from an unknown token.
    #[serde(default = "yes")]
    pub active: bool,
    /// A trigger configured with authentication the runtime cannot serve answers
    /// 422 `Unsupported trigger authentication`.
    #[serde(default)]
    pub unsupported_auth: bool,
    /// The state the workflow runs it starts end in.
    #[serde(default)]
    pub run_outcome: RunOutcome,
    /// Standard Webhooks signing secrets (`whsec_` + base64): when any is set, a delivery must
    /// be signed with one of them (`docs/wire-contract.md`, "Signed deliveries"), or it is
    /// answered 422 `Unsupported trigger authentication`. Two during a rotation. Never logged.
    #[serde(default)]
    pub signing_secrets: Vec<String>,
}

impl std::fmt::Debug for TriggerSeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TriggerSeed")
            .field("token", &"<redacted>")
            .field("organization", &self.organization)
            .field("active", &self.active)
            .field("unsupported_auth", &self.unsupported_auth)
            .field("run_outcome", &self.run_outcome)
            .field("signing_secrets", &self.signing_secrets.len())
            .finish()
    }
}

fn yes() -> bool {
    true
}

impl TriggerSeed {
    /// An active trigger of `organization` whose runs succeed.
    pub fn new(token: &str, organization: &str) -> Self {
        Self {
            token: token.to_owned(),
            organization: organization.to_owned(),
            active: true,
            unsupported_auth: false,
            run_outcome: RunOutcome::Succeeded,
            signing_secrets: Vec::new(),
        }
    }

    /// Demands deliveries signed with `secret` (`whsec_` + base64); called again, it adds a
    /// secret, as during a rotation.
    #[must_use]
    pub fn signing_secret(mut self, secret: &str) -> Self {
        self.signing_secrets.push(secret.to_owned());
        self
    }

    /// Sets the terminal state of the runs it starts.
    #[must_use]
    pub fn run_outcome(mut self, outcome: RunOutcome) -> Self {
        self.run_outcome = outcome;
        self
    }

    /// Marks the trigger inactive (deactivated workflow).
    #[must_use]
    pub fn inactive(mut self) -> Self {
        self.active = false;
        self
    }

    /// Marks the trigger's authentication as unsupported.
    #[must_use]
    pub fn unsupported_auth(mut self) -> Self {
        self.unsupported_auth = true;
        self
    }

    /// The demo trigger of `acme`.
    pub fn demo() -> Self {
        Self::new(DEMO_TRIGGER_TOKEN, DEMO_ORGANIZATION)
    }
}

/// A Modulify API token (`docs/wire-contract.md`, "Modulify"): static, no exchange.
///
/// Its `Debug` prints the token as `<redacted>`.
///
/// # Examples
///
/// ```
/// use hodoflow_mock::{MockServer, ModulifyTokenSeed};
///
/// // A token that may only read sites: any other method answers 403 `forbidden`.
/// let builder = MockServer::builder()
///     .modulify_token(ModulifyTokenSeed::new("mfy_reader").methods(&["get_site", "list_sites"]));
/// # let _ = builder;
/// ```
#[derive(Clone, Serialize, Deserialize)]
pub struct ModulifyTokenSeed {
    /// The bearer token. Never logged.
    pub token: String,
    /// The methods it may call; `None`: every method.
    #[serde(default)]
    pub methods: Option<Vec<String>>,
}

impl std::fmt::Debug for ModulifyTokenSeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModulifyTokenSeed")
            .field("token", &"<redacted>")
            .field("methods", &self.methods)
            .finish()
    }
}

impl ModulifyTokenSeed {
    /// A token that may call every method.
    pub fn new(token: &str) -> Self {
        Self {
            token: token.to_owned(),
            methods: None,
        }
    }

    /// Limits the methods it may call; any other answers 403 `forbidden`.
    #[must_use]
    pub fn methods(mut self, methods: &[&str]) -> Self {
        self.methods = Some(methods.iter().map(|m| (*m).to_owned()).collect());
        self
    }

    /// Whether it may call `method`.
    pub fn may_call(&self, method: &str) -> bool {
        self.methods
            .as_ref()
            .is_none_or(|allowed| allowed.iter().any(|m| m == method))
    }

    /// The demo token, [`DEMO_MODULIFY_TOKEN`], allowed every method.
    pub fn demo() -> Self {
        Self::new(DEMO_MODULIFY_TOKEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_file_trigger_may_carry_signing_secrets() {
        let seed: TriggerSeed = serde_json::from_str(
            r#"{"token":"trg_1","organization":"acme","signing_secrets":["whsec_old","whsec_new"]}"#,
        )
        .unwrap();
        assert_eq!(seed.signing_secrets, ["whsec_old", "whsec_new"]);
        let plain: TriggerSeed =
            serde_json::from_str(r#"{"token":"trg_2","organization":"acme"}"#).unwrap();
        assert!(plain.signing_secrets.is_empty(), "unsigned by default");
    }

    #[test]
    fn debug_never_prints_a_client_secret_or_trigger_token() {
        let client = format!("{:?}", ClientSeed::new("svc", "s3cr3t", "acme"));
        let trigger = format!(
            "{:?}",
            TriggerSeed::new("trg_s3cr3t", "acme").signing_secret("whsec_s3cr3t")
        );
        let modulify = format!("{:?}", ModulifyTokenSeed::new("mfy_s3cr3t"));
        assert!(!modulify.contains("s3cr3t"), "{modulify}");
        assert!(
            client.contains("svc") && !client.contains("s3cr3t"),
            "{client}"
        );
        assert!(
            trigger.contains("acme") && !trigger.contains("s3cr3t"),
            "{trigger}"
        );
    }
}
