//! The backon and backoff crate adapters: each keeps the floors and the budget, and starts afresh per operation.

use super::*;

/// backon's `ExponentialBuilder` over its settings, seeded so a case can be replayed. A
/// `total_delay` stays within a century and the factor within 0 to 10: backon 1.6 checks the
/// total with an addition that does not saturate, which panics once its sum nears
/// `Duration::MAX` (a huge total, or a negative factor, which makes the next delay the maximum).
#[cfg(feature = "backon")]
fn backon_builders() -> impl Strategy<Value = backon::ExponentialBuilder> {
    let century = (0u64..=86_400 * 365 * 100).prop_map(Duration::from_secs);
    (
        durations(),
        prop::option::of(durations()),
        prop::option::of(century),
        prop::option::of(0usize..=16),
        (0.0f32..=10.0, any::<bool>(), any::<u64>()),
    )
        .prop_map(|(min, max, total, times, (factor, jitter, seed))| {
            let builder = backon::ExponentialBuilder::new()
                .with_min_delay(min)
                .with_factor(factor)
                .with_jitter_seed(seed)
                .with_total_delay(total);
            let builder = match max {
                Some(max) => builder.with_max_delay(max),
                None => builder.without_max_delay(),
            };
            let builder = match times {
                Some(times) => builder.with_max_times(times),
                None => builder.without_max_times(),
            };
            if jitter {
                builder.with_jitter()
            } else {
                builder
            }
        })
}

#[cfg(feature = "backon")]
proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn a_backon_schedule_keeps_the_retry_after_floor_the_fallback_and_the_budget(
        builder in backon_builders(),
        fallback in durations(),
        answers in answers(),
        spent in spent(),
        seed in any::<u64>(),
    ) {
        let schedule = crate::core::schedule::BackonSchedule::new(builder);
        plans_keep_the_floors_and_the_budget(schedule, fallback, &answers, spent, seed)?;
    }

    #[test]
    fn a_backon_schedule_waits_what_its_builder_builds_afresh_per_operation(
        builder in backon_builders(),
    ) {
        use backon::BackoffBuilder;

        let schedule = crate::core::schedule::BackonSchedule::new(builder);
        let built: Vec<_> = builder.build().take(20).collect();
        prop_assert_eq!(schedule.start().take(20).collect::<Vec<_>>(), built.clone());
        prop_assert_eq!(schedule.start().take(20).collect::<Vec<_>>(), built);
    }
}

/// The `backoff` crate's `ExponentialBackoff` over its settings: intervals from zero to
/// `Duration::MAX`, with and without a `max_elapsed_time`.
#[cfg(feature = "backoff")]
fn backoff_crate_schedules() -> impl Strategy<Value = backoff::ExponentialBackoff> {
    (
        durations(),
        durations(),
        prop::option::of(durations()),
        (0.0f64..=2.0, 0.0f64..=10.0),
    )
        .prop_map(|(initial, max, elapsed, (randomization, multiplier))| {
            backoff::ExponentialBackoffBuilder::new()
                .with_initial_interval(initial)
                .with_max_interval(max)
                .with_max_elapsed_time(elapsed)
                .with_randomization_factor(randomization)
                .with_multiplier(multiplier)
                .build()
        })
}

#[cfg(feature = "backoff")]
proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn a_backoff_crate_schedule_keeps_the_retry_after_floor_the_fallback_and_the_budget(
        schedule in backoff_crate_schedules(),
        fallback in durations(),
        answers in answers(),
        spent in spent(),
        seed in any::<u64>(),
    ) {
        let schedule = crate::core::schedule::BackoffCrateSchedule::new(schedule);
        plans_keep_the_floors_and_the_budget(schedule, fallback, &answers, spent, seed)?;
    }

    #[test]
    fn a_backoff_crate_schedule_starts_afresh_per_operation(
        mut schedule in backoff_crate_schedules(),
        stepped in 0usize..5,
    ) {
        use backoff::backoff::Backoff as _;

        schedule.randomization_factor = 0.0;
        schedule.max_elapsed_time = None;
        for _ in 0..stepped {
            schedule.next_backoff();
        }
        let adapted = crate::core::schedule::BackoffCrateSchedule::new(schedule.clone());
        schedule.reset();
        let expected: Vec<_> = std::iter::from_fn(|| schedule.next_backoff()).take(20).collect();
        // Even without randomization the crate draws up to a nanosecond of noise.
        let near = |waits: Vec<Duration>| {
            waits.len() == expected.len()
                && waits.iter().zip(&expected).all(|(wait, expected)| {
                    wait.abs_diff(*expected) <= Duration::from_nanos(1)
                })
        };
        for _ in 0..2 {
            let waits: Vec<_> = adapted.start().take(20).collect();
            prop_assert!(near(waits.clone()), "{:?} is not {:?}", waits, expected);
        }
    }
}
