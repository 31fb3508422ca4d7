//! `cargo run --release -p hodoflow-sim -- <scenario> [--smoke] [--seed N] [--threads N]
//! [--policies a,b] [--load L] [--rate R] [--from FILE] [--plots DIR]`: prints one JSON line per
//! figure.
//!
//! Scenarios: `osdi22` (the OSDI'22 case at every fleet size), `sweep` (the depth × duration
//! maps, without and with shedding), `scale` (10,000 senders × 120 s at 13.3k/s, wall time),
//! `maps` (the sweep, drawn; `--from FILE` draws the figures of an earlier run's JSON lines), `series` (the OSDI'22 case of the largest open-loop fleet, drawn
//! as a time series), `plots` (the maps and the OSDI'22 time series as PNGs in
//! `crates/hodoflow-sim/plots/`, or in `--plots DIR`),
//! `all` (every one of them). A run of some of the policies draws only into a `--plots` folder
//! given, never over the committed plots of every policy.

use std::path::PathBuf;
use std::process::ExitCode;

use hodoflow_sim::suite::{self, Job, Size};
use hodoflow_sim::{Figures, Policy, Run, plot};

struct Options {
    scenario: String,
    size: Size,
    seed: u64,
    threads: usize,
    policies: Vec<Policy>,
    load: Option<f64>,
    rate: Option<f64>,
    from: Option<String>,
    plots: Option<PathBuf>,
}

fn options() -> Result<Options, String> {
    let mut args = std::env::args().skip(1);
    let mut options = Options {
        scenario: String::new(),
        size: Size::FULL,
        seed: 1,
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        policies: Policy::ALL.to_vec(),
        load: None,
        rate: None,
        from: None,
        plots: None,
    };
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--smoke" => options.size = Size::SMOKE,
            "--seed" => options.seed = value()?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--threads" => {
                options.threads = value()?.parse().map_err(|e| format!("--threads: {e}"))?
            }
            "--load" => options.load = Some(value()?.parse().map_err(|e| format!("--load: {e}"))?),
            "--rate" => options.rate = Some(value()?.parse().map_err(|e| format!("--rate: {e}"))?),
            "--from" => options.from = Some(value()?),
            "--plots" => options.plots = Some(PathBuf::from(value()?)),
            "--policies" => {
                options.policies = value()?
                    .split(',')
                    .map(|name| Policy::from_name(name).ok_or(format!("no policy {name}")))
                    .collect::<Result<_, _>>()?
            }
            name if !name.starts_with('-') && options.scenario.is_empty() => {
                options.scenario = name.to_string()
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if options.scenario.is_empty() {
        return Err("a scenario: osdi22, sweep, maps, series, scale, plots or all".into());
    }
    Ok(options)
}

fn print(run: &Run) {
    println!(
        "{}",
        serde_json::to_string(&run.figures).expect("figures serialize")
    );
}

fn run(jobs: &[Job], options: &Options) -> Vec<Run> {
    let mut jobs = jobs.to_vec();
    if let Some(load) = options.load {
        jobs.iter_mut().for_each(|job| job.scenario.load = load);
    }
    if let Some(rate) = options.rate {
        jobs.iter_mut().for_each(|job| job.scenario.rate = rate);
    }
    suite::run_all(&jobs, options.threads, print)
}

/// Where the plots go: `--plots`, else the committed plots' folder, but only for a run of every
/// policy; `None` (with a note) for a run of some, so it never draws over them.
fn plots_dir(options: &Options) -> Option<PathBuf> {
    if let Some(dir) = &options.plots {
        if let Err(error) = std::fs::create_dir_all(dir) {
            eprintln!("hodoflow-sim: not drawn: {}: {error}", dir.display());
            return None;
        }
        return Some(dir.clone());
    }
    if !Policy::ALL.iter().all(|p| options.policies.contains(p)) {
        eprintln!("hodoflow-sim: not drawn: a run of some policies draws only into --plots DIR");
        return None;
    }
    Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("plots"))
}

fn maps(options: &Options, shedding: bool, draw: bool) -> Result<(), String> {
    let figures: Vec<Figures> = match &options.from {
        // Leaked: `Figures` holds the policy's `&'static str`, and this is a CLI that exits soon.
        Some(path) => std::fs::read_to_string(path)
            .map(|text| &*Box::leak(text.into_boxed_str()))
            .map_err(|e| format!("{path}: {e}"))?
            .lines()
            .filter(|line| line.starts_with('{'))
            .map(|line| serde_json::from_str(line).map_err(|e| format!("{path}: {e}")))
            .collect::<Result<_, _>>()?,
        None => run(
            &suite::sweep(options.seed, shedding, &options.policies),
            options,
        )
        .into_iter()
        .map(|r| r.figures)
        .collect(),
    };
    let figures: Vec<Figures> = figures
        .into_iter()
        .filter(|f| f.scenario.starts_with("map") && f.scenario.contains("shedding") == shedding)
        .collect();
    if let Some(dir) = draw.then(|| plots_dir(options)).flatten() {
        let names: Vec<&str> = options.policies.iter().map(|p| p.name()).collect();
        let (file, title) = if shedding {
            (
                "map_shedding.png",
                "Recovered (s to recover; * events lost) or metastable, N=100 open loop, 503 + Retry-After above 1 s of queue",
            )
        } else {
            (
                "map.png",
                "Recovered (s to recover; * events lost) or metastable, N=100 open loop, no shedding",
            )
        };
        plot::maps(&dir.join(file), title, &names, &figures).map_err(|e| format!("{file}: {e}"))?;
    }
    Ok(())
}

fn osdi22(options: &Options, draw: bool, only_plotted: bool) -> Result<(), String> {
    let n = options.size.fleets.last().copied().unwrap_or(100);
    let name = format!("osdi22 N={n} all-in-flight");
    let mut jobs = suite::osdi22(options.size, options.seed, &options.policies);
    if only_plotted {
        jobs.retain(|job| job.scenario.name == name);
    }
    let runs = run(&jobs, options);
    if let Some(dir) = draw.then(|| plots_dir(options)).flatten() {
        let chosen: Vec<&Run> = runs.iter().filter(|r| r.figures.scenario == name).collect();
        plot::time_series(
            &dir.join("osdi22_series.png"),
            &dir.join("osdi22_queue.png"),
            &format!("OSDI'22 case, {name}: capacity to 0.40 for 10 s (shaded)"),
            &chosen,
        )
        .map_err(|e| format!("osdi22_series.png: {e}"))?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let options = match options() {
        Ok(options) => options,
        Err(error) => {
            eprintln!("hodoflow-sim: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = match options.scenario.as_str() {
        "osdi22" => osdi22(&options, false, false),
        "series" => osdi22(&options, true, true),
        "sweep" => maps(&options, false, false).and_then(|()| maps(&options, true, false)),
        "scale" => {
            run(&[suite::scale(options.seed)], &options);
            Ok(())
        }
        "maps" => maps(&options, false, true).and_then(|()| maps(&options, true, true)),
        "plots" => osdi22(&options, true, false)
            .and_then(|()| maps(&options, false, true))
            .and_then(|()| maps(&options, true, true)),
        "all" => osdi22(&options, true, false)
            .and_then(|()| maps(&options, false, true))
            .and_then(|()| maps(&options, true, true))
            .map(|()| {
                run(&[suite::scale(options.seed)], &options);
            }),
        other => Err(format!("no scenario {other}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("hodoflow-sim: {error}");
            ExitCode::FAILURE
        }
    }
}
