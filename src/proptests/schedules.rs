//! Backoff and schedules: the cap, the `Retry-After` floor and jitter, and any plugged-in schedule's plan against the budget (the backon and backoff crate adapters too).

use super::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]
    #[test]
    fn backoff_without_retry_after_never_exceeds_the_cap(
        base in durations(),
        cap in durations(),
        retry in retries(),
        verdict in verdicts(),
        seed in any::<u64>(),
    ) {
        let backoff = Backoff::new().base(base).cap(cap);
        let mut rng = StdRng::seed_from_u64(seed);
        match backoff.wait(verdict, retry, None, &mut rng) {
            Some((wait, WaitReason::Backoff)) => {
                prop_assert!(wait <= cap, "{:?} > cap {:?}", wait, cap);
                prop_assert!(wait <= backoff.ceiling(retry));
            }
            Some((wait, WaitReason::Reexchange)) => {
                prop_assert_eq!(verdict, Verdict::ReexchangeOnce);
                prop_assert_eq!(wait, Duration::ZERO);
            }
            Some((wait, WaitReason::RetryAfterFallback)) => {
                prop_assert_eq!(verdict, Verdict::RetryAfterServerWait);
                let fallback = Backoff::DEFAULT_RETRY_AFTER_FALLBACK;
                prop_assert!(wait >= fallback && wait - fallback <= retry_after_jitter_max(fallback));
            }
            Some(other) => prop_assert!(false, "no Retry-After, yet {:?}", other),
            None => prop_assert!(!verdict.retries()),
        }
    }

    #[test]
    fn backoff_never_undercuts_retry_after_and_adds_at_most_the_documented_jitter(
        base in durations(),
        cap in durations(),
        retry in retries(),
        verdict in waiting_verdicts(),
        server_wait in durations(),
        seed in any::<u64>(),
    ) {
        let backoff = Backoff::new().base(base).cap(cap);
        let mut rng = StdRng::seed_from_u64(seed);
        let (wait, reason) = backoff
            .wait(verdict, retry, Some(server_wait), &mut rng)
            .expect("a waiting verdict retries");
        prop_assert!(wait >= server_wait, "{:?} undercuts Retry-After {:?}", wait, server_wait);
        match reason {
            WaitReason::RetryAfter => {
                let jitter = wait - server_wait;
                prop_assert!(jitter <= retry_after_jitter_max(server_wait), "jitter {:?}", jitter);
            }
            WaitReason::Backoff => {
                prop_assert_eq!(verdict, Verdict::RetryAfterBackoff);
                prop_assert!(wait <= cap && wait <= backoff.ceiling(retry));
            }
            other => prop_assert!(false, "unexpected reason {:?}", other),
        }
    }

    #[test]
    fn any_schedule_keeps_the_retry_after_floor_the_fallback_and_the_budget(
        listed in prop::collection::vec(durations(), 0..12),
        fallback in durations(),
        answers in answers(),
        spent in spent(),
        seed in any::<u64>(),
    ) {
        plans_keep_the_floors_and_the_budget(Listed(listed), fallback, &answers, spent, seed)?;
    }
}
