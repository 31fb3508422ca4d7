//! PNG plots with `plotters` (0.3, maintained, pure Rust).
//!
//! Only the bitmap backend and its PNG encoder are enabled, and text goes through `ab_glyph`
//! with a TrueType file read at run time (DejaVu Sans, or `HODOFLOW_SIM_FONT`): plotters'
//! default `ttf` feature looks fonts up through font-kit and the system's fontconfig, a C
//! dependency the simulator does not need; its SVG and GIF backends are not needed either.

use std::path::Path;

use plotters::prelude::*;

use crate::figures::Figures;
use crate::run::Run;
use crate::suite::{DEPTHS, DURATIONS};

/// Where the font is looked for when `HODOFLOW_SIM_FONT` is not set.
const FONT_PATHS: [&str; 2] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
];

/// Registers the font once; an error says why there is none.
fn font() -> Result<(), String> {
    static REGISTERED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            let path = std::env::var("HODOFLOW_SIM_FONT").ok().or_else(|| {
                FONT_PATHS
                    .iter()
                    .find(|p| Path::new(p).exists())
                    .map(|p| p.to_string())
            });
            let path = path.ok_or("no font: set HODOFLOW_SIM_FONT to a .ttf file")?;
            let bytes = std::fs::read(&path).map_err(|e| format!("{path}: {e}"))?;
            plotters::style::register_font("sans-serif", FontStyle::Normal, bytes.leak())
                .map_err(|_| format!("{path}: not a font"))
        })
        .clone()
}

type Error = Box<dyn std::error::Error>;

/// The recovered / metastable map of each policy: depth (rows) × duration (columns), green
/// with the recovery time in seconds, red when metastable.
pub fn maps(path: &Path, title: &str, policies: &[&str], figures: &[Figures]) -> Result<(), Error> {
    font()?;
    let root = BitMapBackend::new(path, (1600, 900)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 26))?;
    let panels = root.split_evenly((2, policies.len().div_ceil(2)));
    for (panel, policy) in panels.iter().zip(policies) {
        let mut chart = ChartBuilder::on(panel)
            .caption(*policy, ("sans-serif", 20))
            .margin(8)
            .x_label_area_size(36)
            .y_label_area_size(48)
            .build_cartesian_2d(
                -0.5f64..DURATIONS.len() as f64 - 0.5,
                -0.5f64..DEPTHS.len() as f64 - 0.5,
            )?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(DURATIONS.len())
            .y_labels(DEPTHS.len())
            .x_label_formatter(&|x| label(*x, &DURATIONS.map(|d| format!("{d} s"))))
            .y_label_formatter(&|y| label(*y, &DEPTHS.map(|d| format!("-{:.0}%", d * 100.0))))
            .x_desc("trigger duration")
            .y_desc("capacity lost")
            .draw()?;
        for (row, depth) in DEPTHS.iter().enumerate() {
            for (column, secs) in DURATIONS.iter().enumerate() {
                let name = format!("depth={depth} duration={secs}");
                let Some(cell) = figures
                    .iter()
                    .find(|f| f.policy == *policy && f.scenario.ends_with(&name))
                else {
                    continue;
                };
                let (x, y) = (column as f64 - 0.5, row as f64 - 0.5);
                let (color, text) = if cell.metastable {
                    (RGBColor(220, 60, 50), "meta".to_string())
                } else {
                    let secs = cell.recovery_s.unwrap_or(0);
                    let lost = if cell.lost > 0 { "*" } else { "" };
                    (RGBColor(90, 180, 90), format!("{secs} s{lost}"))
                };
                chart.draw_series([Rectangle::new(
                    [(x + 0.03, y + 0.03), (x + 0.97, y + 0.97)],
                    color.filled(),
                )])?;
                chart.draw_series([Text::new(
                    text,
                    (x + 0.3, y + 0.6),
                    ("sans-serif", 16).into_font().color(&WHITE),
                )])?;
            }
        }
    }
    root.present()?;
    Ok(())
}

/// Per policy, the OSDI'22 case second by second: offered, attempts and goodput (events a
/// second), and the queue length in a second PNG.
pub fn time_series(
    path: &Path,
    queue_path: &Path,
    title: &str,
    runs: &[&Run],
) -> Result<(), Error> {
    font()?;
    let root = BitMapBackend::new(path, (1600, 900)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 26))?;
    let panels = root.split_evenly((2, runs.len().div_ceil(2)));
    for (panel, run) in panels.iter().zip(runs) {
        let series = run.per_second();
        let top = series
            .iter()
            .map(|s| s[0].max(s[1]).max(s[2]))
            .max()
            .unwrap_or(1) as f64;
        let mut chart = ChartBuilder::on(panel)
            .caption(run.figures.policy, ("sans-serif", 20))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..series.len() as f64, 0f64..top * 1.05)?;
        chart
            .configure_mesh()
            .x_desc("s")
            .y_label_formatter(&|y| format!("{:.0}k", y / 1000.0))
            .draw()?;
        let (start, end) = run_window(run);
        chart.draw_series([Rectangle::new(
            [(start, 0.0), (end, top * 1.05)],
            RGBColor(250, 225, 200).filled(),
        )])?;
        for (index, color, label) in [
            (0, BLACK, "offered"),
            (1, RED, "attempts"),
            (2, RGBColor(30, 140, 30), "goodput"),
        ] {
            chart
                .draw_series(LineSeries::new(
                    series
                        .iter()
                        .enumerate()
                        .map(|(t, s)| (t as f64, s[index] as f64)),
                    color.stroke_width(2),
                ))?
                .label(label)
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 13))
            .draw()?;
    }
    root.present()?;

    let root = BitMapBackend::new(queue_path, (1200, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let top = runs
        .iter()
        .flat_map(|r| r.per_second())
        .map(|s| s[3])
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let seconds = runs.iter().map(|r| r.per_second().len()).max().unwrap_or(1) as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{title}: queue length"), ("sans-serif", 22))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..seconds, 0f64..top * 1.05)?;
    chart.configure_mesh().x_desc("s").y_desc("queued").draw()?;
    for (i, run) in runs.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(
                run.per_second()
                    .iter()
                    .enumerate()
                    .map(|(t, s)| (t as f64, s[3] as f64)),
                color.stroke_width(2),
            ))?
            .label(run.figures.policy)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()?;
    root.present()?;
    Ok(())
}

/// The label of the cell at `at` (cells are centred on whole numbers), none between cells.
fn label(at: f64, labels: &[String]) -> String {
    let index = at.round();
    if (at - index).abs() > 0.01 || index < 0.0 {
        return String::new();
    }
    labels.get(index as usize).cloned().unwrap_or_default()
}

fn run_window(run: &Run) -> (f64, f64) {
    run.trigger_window()
}
