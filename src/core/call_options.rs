//! What one call may change of its client's settings, and the setters that change it, written
//! once for every call type of every vendor.

use std::sync::Arc;

use http::HeaderMap;

use crate::core::engine::Policy;
use crate::core::shared::Shared;

/// What one call may change of its client's settings, held once by [`Call`](crate::Call),
/// [`Delivering`](crate::webhook::Delivering) and [`MethodCall`](crate::modulify::MethodCall): the headers it adds, and its policy (budget, backoff
/// or schedule, and the outbox's fleet). The setters are written once, by [`per_call_setters`].
///
/// The policy is the client's own `Arc` until a setter changes it: a call that changes nothing
/// holds a pointer while it is in flight, not a copy.
#[derive(Debug, Clone)]
pub(crate) struct CallOptions {
    pub(crate) headers: HeaderMap,
    pub(crate) policy: Arc<Policy>,
}

impl CallOptions {
    /// The client's settings, unchanged.
    pub(crate) fn of(shared: &Shared) -> Self {
        Self {
            headers: HeaderMap::new(),
            policy: Arc::clone(&shared.policy),
        }
    }

    /// This call's own policy, copied from the client's on the first change.
    pub(crate) fn policy_mut(&mut self) -> &mut Policy {
        Arc::make_mut(&mut self.policy)
    }
}

/// The per-call setters every call type exposes, inside its `impl`: `budget`, `backoff`,
/// `schedule`, and the outbox's `fleet`. The type holds its [`CallOptions`] as `options`;
/// `$noun` names it in the docs ("call", "delivery").
macro_rules! per_call_setters {
    ($noun:literal) => {
        #[doc = concat!("The budget of this ", $noun, ".\n\nDefault: the client's budget.")]
        pub fn budget(mut self, budget: $crate::core::budget::Budget) -> Self {
            self.options.policy_mut().budget = budget;
            self
        }

        #[doc = concat!(
            "The backoff of this ", $noun, ". It replaces the client's ",
            "[`schedule`](crate::ClientBuilder::schedule) and one set on this ", $noun,
            " before.\n\nDefault: the client's backoff."
        )]
        pub fn backoff(mut self, backoff: $crate::core::backoff::Backoff) -> Self {
            let policy = self.options.policy_mut();
            policy.backoff = backoff;
            policy.schedule = None;
            self
        }

        #[doc = concat!(
            "Takes the waits between the retries of this ", $noun, " from `schedule`; ",
            "`Retry-After`, the backoff's ",
            "[`retry_after_fallback`](crate::Backoff::retry_after_fallback) and the budget ",
            "still apply on top (see [`ClientBuilder::schedule`](crate::ClientBuilder::schedule)). ",
            "A later [`backoff`](Self::backoff) replaces it.\n\n",
            "Default: the client's schedule, if one was set; otherwise the waits are the backoff's."
        )]
        pub fn schedule(mut self, schedule: impl $crate::core::schedule::Schedule + 'static) -> Self {
            self.options.policy_mut().schedule = Some($crate::core::schedule::SharedSchedule::new(schedule));
            self
        }

        /// Shares the credential's pause and the route's window with other processes through
        /// `fleet` (an outbox's workers give every call their store's).
        ///
        /// Default: none; this process's limits alone.
        pub fn fleet(mut self, fleet: std::sync::Arc<dyn $crate::core::limit::shared::Fleet>) -> Self {
            self.options.policy_mut().fleet = Some(fleet);
            self
        }
    };
}
pub(crate) use per_call_setters;
