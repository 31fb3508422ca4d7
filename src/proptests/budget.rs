//! Deadlines: no wait and no attempt timeout past the budget.

use super::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]
    #[test]
    fn a_deadline_never_accepts_a_wait_that_ends_past_the_budget(
        max_elapsed in budget_durations(),
        elapsed in elapsed_durations(),
        base in durations(),
        cap in durations(),
        retry in retries(),
        verdict in waiting_verdicts(),
        server_wait in prop::option::of(durations()),
        seed in any::<u64>(),
        at_the_edge in prop::option::of(-2i64..=2),
    ) {
        let started = Instant::now();
        let budget = Budget::new().max_elapsed(max_elapsed);
        let deadline = Deadline::start(budget, started);
        let now = started + elapsed;
        let mut rng = StdRng::seed_from_u64(seed);
        let (scheduled, _) = Backoff::new()
            .base(base)
            .cap(cap)
            .wait(verdict, retry, server_wait, &mut rng)
            .expect("a waiting verdict retries");
        // Some waits end within nanoseconds of the budget's end, where an off-by-one would show.
        let wait = match at_the_edge {
            None => scheduled,
            Some(nudge) => {
                let remaining = max_elapsed.saturating_sub(elapsed);
                let step = Duration::from_nanos(nudge.unsigned_abs());
                if nudge < 0 {
                    remaining.saturating_sub(step)
                } else {
                    remaining.saturating_add(step)
                }
            }
        };
        // A wait may be slept only when it leaves an attempt's least time of the budget.
        let least = budget.least_attempt_time();
        let ends_within = elapsed
            .checked_add(wait)
            .and_then(|end| end.checked_add(least))
            .is_some_and(|end| end <= max_elapsed && wait < max_elapsed.saturating_sub(elapsed));
        match deadline.check_wait(wait, now) {
            Ok(()) => prop_assert!(ends_within, "accepted {:?} at {:?} of {:?}", wait, elapsed, max_elapsed),
            Err(Exhausted { wait: refused, remaining, least: needed }) => {
                prop_assert!(!ends_within, "refused {:?} at {:?} of {:?}", wait, elapsed, max_elapsed);
                prop_assert_eq!(refused, wait);
                prop_assert_eq!(needed, least);
                prop_assert_eq!(remaining, max_elapsed.saturating_sub(elapsed));
            }
        }
    }

    #[test]
    fn a_deadline_never_gives_an_attempt_timeout_past_the_budget(
        max_elapsed in budget_durations(),
        attempt_timeout in budget_durations(),
        elapsed in elapsed_durations(),
    ) {
        let budget = Budget::new().max_elapsed(max_elapsed).attempt_timeout(attempt_timeout);
        let started = Instant::now();
        let deadline = Deadline::start(budget, started);
        let now = started + elapsed;
        prop_assert_eq!(deadline.remaining(now), max_elapsed.saturating_sub(elapsed));
        match deadline.attempt_timeout(now) {
            Some(timeout) => {
                prop_assert!(!timeout.is_zero());
                prop_assert!(timeout <= attempt_timeout);
                prop_assert!(elapsed + timeout <= max_elapsed);
                prop_assert_eq!(timeout, attempt_timeout.min(max_elapsed - elapsed));
                prop_assert!(max_elapsed - elapsed >= budget.least_attempt_time());
            }
            // No attempt starts with less left than the least time an attempt needs.
            None => prop_assert!(
                elapsed >= max_elapsed || max_elapsed - elapsed < budget.least_attempt_time()
            ),
        }
    }
}
