//! Guides: one page per job, each with examples that run against the embedded contract server.
//!
//! The pages are the Markdown files of `docs/guide/`, so they read the same in the repository
//! and here, and every Rust snippet in them is a doctest. A guide that needs an optional feature
//! is compiled with that feature only.
//!
//! | guide | for |
//! |---|---|
//! | [`webhooks`] | deliveries that start a run once, their IDs and outcomes, following a run |
//! | [`signing`] | triggers that demand Standard Webhooks signatures; secret rotation |
//! | [`writes`] | JSON:API writes under one `Idempotency-Key`; reads and GraphQL |
//! | [`modulify`] | Modulify's method API: the catalogue decides the key |
//! | [`exchanger`] | a token source of your own |
//! | [`budgets`] | attempts, time and waits per call; which scope a server's signal closes |
//! | [`fleet`] | the retry budget, per-trigger pacing and the figures a sender reports |
//! | `outbox` | events that survive crashes and long outages: the `hodoflow-outbox` crate's guide |
//! | `metrics` | the OpenMetrics exposition and tracing (feature `metrics`) |
//! | `middleware` | `RetryMiddleware` in a reqwest-middleware stack (feature `middleware`) |
//! | [`retry_matrix`] | which answer is retried, per surface and vendor |

/// One guide: its page from `docs/guide/`, with the links between guides resolved for rustdoc
/// (a Markdown link's first definition wins, so these come before the page's own, which name
/// the Markdown files).
macro_rules! guide {
    ($(#[$attr:meta])* $name:ident, $file:literal) => {
        $(#[$attr])*
        #[doc = "[webhooks]: crate::guide::webhooks"]
        #[doc = "[signing]: crate::guide::signing"]
        #[doc = "[writes]: crate::guide::writes"]
        #[doc = "[modulify]: crate::guide::modulify"]
        #[doc = "[exchanger]: crate::guide::exchanger"]
        #[doc = "[budgets]: crate::guide::budgets"]
        #[doc = "[fleet]: crate::guide::fleet"]
        #[cfg_attr(feature = "metrics", doc = "[metrics]: crate::guide::metrics")]
        #[cfg_attr(feature = "middleware", doc = "[middleware]: crate::guide::middleware")]
        #[doc = "[retry-matrix]: crate::guide::retry_matrix"]
        #[doc = ""]
        #[doc = include_str!(concat!("../docs/guide/", $file))]
        pub mod $name {}
    };
}

guide!(webhooks, "webhooks.md");
guide!(signing, "signing.md");
guide!(writes, "writes.md");
guide!(modulify, "modulify.md");
guide!(exchanger, "exchanger.md");
guide!(budgets, "budgets.md");
guide!(fleet, "fleet.md");
guide!(
    #[cfg(feature = "metrics")]
    metrics,
    "metrics.md"
);
guide!(
    #[cfg(feature = "middleware")]
    middleware,
    "middleware.md"
);
guide!(retry_matrix, "retry-matrix.md");
