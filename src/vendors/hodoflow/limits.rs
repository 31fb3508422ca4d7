//! Hodoflow's documented limits: a trigger's window (Hodoflow's webhook sender guide) and the most
//! bytes of a webhook's answer read.

use std::time::Duration;

use crate::core::limit::figures::TriggerLimit;

/// The most bytes of a webhook answer read: 64 KiB. A webhook answer is a status and a run ID
/// (`{"status":"accepted","workflow_run_id":…}` or `{"error":…}`, `docs/wire-contract.md`): a
/// thousand times that.
pub(crate) const WEBHOOK_ANSWER_LIMIT: usize = 64 * 1024;

impl TriggerLimit {
    /// The default of Hodoflow's webhook sender guide: 100 requests per 60-second window.
    pub const DOCUMENTED: Self = Self::from_parts(100, Duration::from_secs(60));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_trigger_window_is_100_per_minute_and_valid() {
        let documented = TriggerLimit::DOCUMENTED;
        assert_eq!(
            (documented.requests(), documented.per()),
            (100, Duration::from_secs(60))
        );
        assert_eq!(
            TriggerLimit::new(documented.requests(), documented.per()).ok(),
            Some(documented)
        );
    }
}
