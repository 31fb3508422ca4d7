//! What the engine is built from, set the same way by [`ClientBuilder`](crate::ClientBuilder)
//! and [`RetryMiddlewareBuilder`](crate::middleware::RetryMiddlewareBuilder).
//!
//! Both builders hold one [`EngineOptions`] and get `budget`, `backoff`, `rate_budget`,
//! `retry_budget` and `max_answer_bytes` from one macro, [`engine_setters`], so each setter's
//! body and doc are written once; the docs name what each builder builds and sends ("client" and
//! "call", "middleware" and "request"). A macro, not a trait with provided methods: the setters
//! stay inherent methods, so callers need no trait in scope and the public API is what it was.
//!
//! Not shared, because they mean different things:
//! - `exchanger` sets the same field in both builders, but in a client it is one of three token
//!   sources (without any, the build fails), and in a middleware it replaces the request's own
//!   `Authorization` (without one, that header is sent as it is): each builder writes its own.
//! - The client's `schedule`, `seed` and route pacing have no middleware counterpart.
//! - The outbox's `WorkerBuilder` (the `hodoflow-outbox` crate) configures workers around a
//!   client that is already built, not an engine: its `poll_interval` is how often a worker
//!   claims jobs (the client's is how often `follow_run` polls), its `schedule` takes a
//!   `LongSchedule` of waits between calls (the client's, a [`Schedule`](crate::schedule::Schedule) of waits
//!   between attempts), and its route limit takes an `Option` and is shared by every worker
//!   of the store. It shares none of these setters.

use std::sync::Arc;

use crate::core::answer_limit::DEFAULT_ANSWER_LIMIT;
use crate::core::auth::{TokenCache, TokenExchanger};
use crate::core::backoff::Backoff;
use crate::core::budget::Budget;
use crate::core::engine::{Endpoint, Engine, Policy};
use crate::core::error::{Error, Result};
use crate::core::jitter::Jitter;
use crate::core::limit::Limiters;
use crate::core::limit::cubic::SendRates;
use crate::core::limit::gate::{Gate, RateBudget};
use crate::core::limit::retry_budget::RetryBudget;
use crate::core::limit::window::Windows;
use crate::core::stats::Counters;

/// The settings a client and a middleware both build their engine from: the policy of every
/// call, the token exchanger, the credential's rate budget, the retry budget and the answer
/// limit. The setters are written once, by [`engine_setters`].
pub(crate) struct EngineOptions {
    pub(crate) policy: Policy,
    pub(crate) exchanger: Option<Arc<dyn TokenExchanger>>,
    pub(crate) rate_budget: Option<RateBudget>,
    pub(crate) retry_budget: RetryBudget,
    pub(crate) answer_limit: usize,
}

impl EngineOptions {
    /// The defaults each setter documents.
    pub(crate) fn new() -> Self {
        Self {
            policy: Policy {
                budget: Budget::default(),
                backoff: Backoff::default(),
                schedule: None,
                fleet: None,
                queue: None,
            },
            exchanger: None,
            rate_budget: None,
            retry_budget: RetryBudget::new(),
            answer_limit: DEFAULT_ANSWER_LIMIT,
        }
    }

    /// Refuses an invalid budget and a zero answer limit.
    pub(crate) fn validate(&self) -> Result<()> {
        self.policy.budget.validate()?;
        if self.answer_limit == 0 {
            return Err(Error::invalid_input("max_answer_bytes must be at least 1"));
        }
        Ok(())
    }

    /// The engine, and the policy of its calls. The builder passes what only it decides: the
    /// token source (made from [`exchanger`](Self::exchanger), which it has taken, or from its
    /// own credentials), the routes' windows, the jitter's seed and the endpoint it sends for.
    pub(crate) fn engine(
        self,
        tokens: Option<TokenCache>,
        windows: Windows,
        seed: Option<u64>,
        endpoint: Endpoint,
    ) -> (Engine, Policy) {
        // The gate's release spread draws apart from the backoff's jitter, from the same seed.
        let gate_seed = seed.map(|seed| seed ^ 0x9e37_79b9_7f4a_7c15);
        let engine = Engine {
            jitter: Jitter::new(seed),
            tokens,
            limits: Limiters {
                retry_budget: self.retry_budget,
                rates: SendRates::default(),
                windows,
                gate: Gate::new(self.rate_budget, Jitter::new(gate_seed)),
            },
            counters: Counters::default(),
            #[cfg(feature = "metrics")]
            meter: Default::default(),
            answer_limit: self.answer_limit,
            endpoint,
        };
        (engine, self.policy)
    }
}

/// The setters every builder of an engine exposes, inside its `impl`: `budget`, `backoff`,
/// `rate_budget`, `retry_budget` and `max_answer_bytes`. The builder holds its
/// [`EngineOptions`] as `options`.
///
/// In the docs, `owner` names what is built ("client"), `noun` what it sends ("call");
/// `per_call` follows "budget of every call" and "backoff between retries" (a client's
/// calls override them), and `after_backoff` follows the backoff's first sentence (a client's
/// `schedule`). Both are empty for a builder without those.
macro_rules! engine_setters {
    (
        owner: $owner:literal,
        noun: $noun:literal,
        per_call: $per_call:literal,
        after_backoff: $after_backoff:literal $(,)?
    ) => {
        #[doc = concat!(
            "The attempt and elapsed-time budget of every ", $noun, $per_call, ".\n\n",
            "Default: [`Budget::default`](crate::Budget::default): 5 attempts, 60 s, 15 s per ",
            "attempt."
        )]
        pub fn budget(mut self, budget: $crate::core::budget::Budget) -> Self {
            self.options.policy.budget = budget;
            self
        }

        #[doc = concat!(
            "The backoff between retries", $per_call, ".", $after_backoff, "\n\n",
            "Default: [`Backoff::default`](crate::Backoff::default): 500 ms doubling to 30 s, ",
            "full jitter."
        )]
        pub fn backoff(mut self, backoff: $crate::core::backoff::Backoff) -> Self {
            self.options.policy.backoff = backoff;
            self.options.policy.schedule = None;
            self
        }

        #[doc = concat!(
            "The credential's rate budget: attempts of every ", $noun, " of this ", $owner,
            " (and its clones) are spaced to fit it, and a wait for a slot that would end past a ",
            $noun, "'s budget stops it with `budget_exhausted`. With or without it, a server's ",
            "429 with `Retry-After` (or a `RateLimit` field with nothing remaining) closes the ",
            "scope it speaks for (a route, or the credential's API budget) for every ", $noun,
            " of the ", $owner, " until that instant, and no other scope.\n\n",
            "Default: none (only the server's answers pace the ", $owner, ")."
        )]
        pub fn rate_budget(mut self, budget: $crate::core::limit::gate::RateBudget) -> Self {
            self.options.rate_budget = Some(budget);
            self
        }

        #[doc = concat!(
            "The token bucket that caps the retries of every ", $noun, " of this ", $owner,
            ", shared with every client and middleware given a clone of `budget`. ",
            "[`RetryBudget::disabled`](crate::limit::RetryBudget::disabled) turns it off.\n\n",
            "Default: a bucket of this ", $owner, "'s own, ",
            "[`RetryBudget::new`](crate::limit::RetryBudget::new): 500 tokens, 5 a retry, 10 a retry ",
            "after a timeout."
        )]
        pub fn retry_budget(mut self, budget: $crate::core::limit::retry_budget::RetryBudget) -> Self {
            self.options.retry_budget = budget;
            self
        }

        #[doc = concat!(
            "The most bytes of an answer the ", $owner, " reads. A body over it is never ",
            "buffered past the limit: the ", $noun, " retries when its status would be retried ",
            "anyway, and otherwise stops with ",
            "[`ErrorKind::AnswerTooLarge`](crate::ErrorKind::AnswerTooLarge). Webhook answers ",
            "are read up to 64 KiB, the token endpoint's too: both are a few fields.\n\n",
            "Default: 8 MiB ([`DEFAULT_ANSWER_LIMIT`](crate::transport::DEFAULT_ANSWER_LIMIT)). At least 1."
        )]
        pub fn max_answer_bytes(mut self, bytes: usize) -> Self {
            self.options.answer_limit = bytes;
            self
        }
    };
}
pub(crate) use engine_setters;
