//! Line charts of training curves as SVG: a run's own (`curves.svg`) and
//! several runs' side by side (`forge compare --plot`).

use anyhow::{Context, Result};
use plotters::prelude::*;
use std::path::Path;

/// A named line of (step, value) points in a colour.
pub struct Curve {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub color: RGBColor,
}

/// One chart: a title over curves that share its axes.
pub struct Panel {
    pub title: &'static str,
    /// What the horizontal axis counts (`step`, `k`).
    pub x_label: &'static str,
    pub curves: Vec<Curve>,
}

/// Ten colours that stay apart on white (Tableau's), for curves that need
/// telling apart: the `index`th, round again after ten.
pub fn color(index: usize) -> RGBColor {
    const COLORS: [RGBColor; 10] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
    ];
    COLORS[index % COLORS.len()]
}

/// Refuses `path` as a file to draw into where it holds something other
/// than a drawing (a trajectory file, a report mistyped as the plot's
/// name), which drawing would replace.
pub fn check_drawable(path: &Path) -> Result<()> {
    if path.is_dir() {
        anyhow::bail!("{} is a directory, not a file to draw into", path.display());
    }
    let Ok(mut file) = std::fs::File::open(path) else {
        return Ok(());
    };
    let mut start = [0; 256];
    let read = std::io::Read::read(&mut file, &mut start).unwrap_or(0);
    let start = String::from_utf8_lossy(&start[..read]);
    let start = start.trim_start_matches('\u{feff}').trim_start();
    if read > 0 && !start.starts_with("<svg") && !start.starts_with("<?xml") {
        anyhow::bail!(
            "{} exists and is not an SVG drawing: not drawing over it (name another file)",
            path.display()
        );
    }
    Ok(())
}

/// Draws `panels` side by side into an SVG file at `path`, each over 0 to
/// the last point of any curve. The value axes run from 0 (or below,
/// for negative values) to 1 (or above): successes and rewards read on the
/// same scale from chart to chart.
pub fn svg(path: &Path, panels: &[Panel]) -> Result<()> {
    let x_max = panels
        .iter()
        .flat_map(|panel| &panel.curves)
        .flat_map(|curve| curve.points.iter().map(|(x, _)| *x))
        .fold(1.0f64, f64::max);
    let width = 450 * panels.len().max(1) as u32;
    let mut text = String::new();
    let draw = |text: &mut String| -> std::result::Result<(), Box<dyn std::error::Error>> {
        let root = SVGBackend::with_string(text, (width, 380)).into_drawing_area();
        root.fill(&WHITE)?;
        let areas = root.split_evenly((1, panels.len().max(1)));
        for (area, panel) in areas.iter().zip(panels) {
            let values = || {
                panel
                    .curves
                    .iter()
                    .flat_map(|curve| curve.points.iter().map(|(_, y)| *y))
            };
            let top = values().fold(1.0f64, f64::max);
            let bottom = values().fold(0.0f64, f64::min);
            let mut chart = ChartBuilder::on(area)
                .caption(panel.title, ("sans-serif", 18))
                .margin(12)
                .x_label_area_size(32)
                .y_label_area_size(44)
                .build_cartesian_2d(0.0..x_max, bottom..top * 1.05)?;
            chart.configure_mesh().x_desc(panel.x_label).draw()?;
            for curve in &panel.curves {
                let color = curve.color;
                chart
                    .draw_series(LineSeries::new(curve.points.iter().copied(), &color))?
                    .label(&curve.name)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()?;
        }
        root.present()?;
        Ok(())
    };
    draw(&mut text).map_err(|err| anyhow::anyhow!("drawing {}: {err}", path.display()))?;
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}
