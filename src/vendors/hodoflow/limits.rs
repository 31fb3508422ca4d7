//! Hodoflow's documented limits: a trigger's window (Hodoflow's webhook sender guide) and the most
//! bytes of a webhook's answer read.

use std::time::Duration;

use crate::core::limit::figures::RouteLimit;

/// The most bytes of a webhook answer read: 64 KiB. A webhook answer is a status and a run ID
/// (`{"status":"accepted","workflow_run_id":…}` or `{"error":…}`, `docs/wire-contract.md`): a
/// thousand times that.
pub(crate) const WEBHOOK_ANSWER_LIMIT: usize = 64 * 1024;

/// A webhook trigger's limit by default, as Hodoflow's webhook sender guide documents it: 100
/// requests per 60-second window. Clients pace at it, with
/// [`pace_triggers`](crate::hodoflow::HodoflowBuilder::pace_triggers), until a server states its
/// own figures.
pub const TRIGGER_LIMIT: RouteLimit = RouteLimit::from_parts(100, Duration::from_secs(60));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_trigger_window_is_100_per_minute_and_valid() {
        let documented = TRIGGER_LIMIT;
        assert_eq!(
            (documented.requests(), documented.per()),
            (100, Duration::from_secs(60))
        );
        assert_eq!(
            RouteLimit::new(documented.requests(), documented.per()).ok(),
            Some(documented)
        );
    }
}
