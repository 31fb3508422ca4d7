//! The smoke size of the simulator, in the test suite: determinism, a model that does break,
//! one that does recover, and no delivery executed twice.

use std::time::Duration;

use hodoflow_sim::{Figures, Mix, Policy, Scenario, Shape, run};

/// The smoke rate: a fiftieth of the OSDI'22 rate (capacity scaled with it), where the case
/// and its neighbours still reproduce; at a hundredth, service times of 0.3 s make every drop
/// metastable.
const SMOKE_RATE: f64 = Scenario::OSDI_RATE / 50.0;

/// The OSDI'22 case at the smoke rate, 100 open-loop senders.
fn osdi_smoke(seed: u64) -> Scenario {
    Scenario::osdi22(seed, 100, Mix::All(Shape::AllInFlight), SMOKE_RATE)
}

/// The same, cut 20 s after the trigger: enough to see what every attempt did, not to call it
/// metastable.
fn osdi_short(seed: u64) -> Scenario {
    let mut scenario = osdi_smoke(seed);
    scenario.duration = Duration::from_secs(40);
    scenario
}

fn without_wall(mut figures: Figures) -> Figures {
    figures.wall_s = 0.0;
    figures
}

#[test]
fn the_same_seed_gives_identical_figures() {
    for policy in [Policy::Osdi22, Policy::Sdk] {
        let a = without_wall(run(&osdi_short(7), policy).figures);
        let b = without_wall(run(&osdi_short(7), policy).figures);
        assert_eq!(a, b, "{}", policy.name());
    }
    let other = without_wall(run(&osdi_short(8), Policy::Osdi22).figures);
    let first = without_wall(run(&osdi_short(7), Policy::Osdi22).figures);
    assert_ne!(other.attempts, first.attempts);
}

#[test]
fn the_osdi22_client_goes_metastable_in_the_osdi_case() {
    let figures = run(&osdi_smoke(1), Policy::Osdi22).figures;
    assert!(figures.metastable, "{figures:?}");
    assert!(figures.amplification_after > 2.0, "{figures:?}");
    assert!(figures.wasted > figures.offered / 4, "{figures:?}");
}

#[test]
fn the_osdi22_client_recovers_from_a_short_shallow_drop() {
    let scenario = Scenario::drop(1, 100, Mix::Mixed, SMOKE_RATE, 0.2, Duration::from_secs(3));
    let figures = run(&scenario, Policy::Osdi22).figures;
    assert!(!figures.metastable, "{figures:?}");
    assert!(figures.recovery_s.is_some_and(|s| s <= 5), "{figures:?}");
}

#[test]
fn no_policy_executes_an_event_twice() {
    for policy in Policy::ALL {
        let figures = run(&osdi_short(1), policy).figures;
        assert_eq!(figures.duplicate_executions, 0, "{figures:?}");
        assert_eq!(
            figures.offered,
            figures.goodput + figures.lost + figures.unfinished,
            "{figures:?}"
        );
    }
}

#[test]
fn the_sdk_defaults_recover_in_the_smoke_osdi_case() {
    let figures = run(&osdi_smoke(1), Policy::Sdk).figures;
    assert!(!figures.metastable, "{figures:?}");
    assert!(figures.recovery_s.is_some_and(|s| s <= 5), "{figures:?}");
    assert_eq!(figures.duplicate_executions, 0);
}

/// A thousand small open-loop senders (1.33 events a second each) with the OSDI'22 client's
/// 3 s attempt timeout: each client's retry tokens and floor are a share of its own calls, so
/// together they retry what one client of their summed traffic would, and the fleet recovers
/// within the fleet targets: at most 1.1 attempts per event during the drop and after it.
/// (With a full bucket and a floor of 10 retries a second each, the same fleet stayed
/// metastable: 1.69 attempts per event after the trigger, 7,135 events lost; with each
/// client's floor paying a retry after a timeout, 1.11 during the drop and 4 s to recover.)
#[test]
fn a_thousand_small_senders_with_a_3_s_timeout_recover_and_lose_nothing() {
    let rate = Scenario::OSDI_RATE / 10.0;
    let scenario = Scenario::osdi22(1, 1_000, Mix::All(Shape::AllInFlight), rate);
    let figures = run(&scenario, Policy::SdkTimeout3s).figures;
    println!("{figures:?}");
    assert!(!figures.metastable, "{figures:?}");
    assert!(figures.recovery_s.is_some_and(|s| s <= 5), "{figures:?}");
    assert_eq!(figures.lost, 0, "{figures:?}");
    assert!(figures.amplification_during <= 1.1, "{figures:?}");
    assert!(figures.amplification_after <= 1.1, "{figures:?}");
    assert_eq!(figures.duplicate_executions, 0);
}
