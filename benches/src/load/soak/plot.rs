//! The soak's plot: one panel per series against time, with the judged part's fitted line
//! (red) that the verdict extrapolates; a PNG.

use std::path::Path;
use std::sync::OnceLock;

use anyhow::{Context, Result, anyhow};
use plotters::prelude::*;

use super::trend::{Series, Trend};

/// The font of the labels: DejaVu Sans (Debian's `fonts-dejavu-core`, which
/// `tests/cluster/provision.sh` installs).
const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// Draws `series` (each with its verdict) into the PNG `path`.
pub fn png(path: &Path, title: &str, series: &[(Series, Option<Trend>)]) -> Result<()> {
    register_font()?;
    let height = 40 + 220 * series.len() as u32;
    let root = BitMapBackend::new(path, (900, height)).into_drawing_area();
    root.fill(&WHITE).map_err(drawing)?;
    let root = root.titled(title, ("sans-serif", 20)).map_err(drawing)?;
    for (area, (s, trend)) in root.split_evenly((series.len(), 1)).iter().zip(series) {
        panel(area, s, trend.as_ref())?;
    }
    root.present().map_err(drawing)?;
    Ok(())
}

fn panel(
    area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    series: &Series,
    trend: Option<&Trend>,
) -> Result<()> {
    let t_max = series.points.last().map_or(1.0, |p| p.0).max(1.0);
    let (lo, hi) = series
        .points
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), p| {
            (lo.min(p.1), hi.max(p.1))
        });
    // Zero at the bottom where the values are positive: a flat line looks flat.
    let lo = lo.min(0.0);
    let hi = if hi > lo { hi * 1.1 } else { lo + 1.0 };
    let caption = match trend {
        Some(t) => format!(
            "{} ({}): judged part {:+.2}/h, {:+.2} over the run (allowed {:.2})",
            series.name, series.unit, t.slope_per_hour, t.growth, t.allowed
        ),
        None => format!("{} ({})", series.name, series.unit),
    };
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 15))
        .margin(8)
        // Room for the last tick's label.
        .margin_right(24)
        .x_label_area_size(28)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..t_max, lo..hi)
        .map_err(drawing)?;
    chart
        .configure_mesh()
        .x_desc("s")
        .label_style(("sans-serif", 12))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(drawing)?;
    chart
        .draw_series(LineSeries::new(series.points.iter().copied(), &BLUE))
        .map_err(drawing)?;
    if let Some(t) = trend {
        let (a, b) = t.fit;
        chart
            .draw_series(LineSeries::new([a, b], RED.stroke_width(2)))
            .map_err(drawing)?;
    }
    Ok(())
}

/// Registers [`FONT`] as `sans-serif`, once.
fn register_font() -> Result<()> {
    static FONT_BYTES: OnceLock<Option<&'static [u8]>> = OnceLock::new();
    let bytes = FONT_BYTES
        .get_or_init(|| {
            std::fs::read(FONT)
                .ok()
                .map(|b| &*Box::leak(b.into_boxed_slice()))
        })
        .with_context(|| format!("reading {FONT} (apt-get install fonts-dejavu-core)"))?;
    plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
        .map_err(|_| anyhow!("{FONT} is not a font"))
}

fn drawing<E: std::fmt::Debug>(error: E) -> anyhow::Error {
    anyhow!("drawing the plot: {error:?}")
}

#[cfg(test)]
mod tests {
    use super::super::trend::{Margin, judge};
    use super::*;

    #[test]
    fn draws_a_png_with_a_panel_per_series() {
        let series = |name, slope: f64| Series {
            name,
            unit: "u",
            margin: Margin::absolute(1.0),
            points: (0..31)
                .map(|i| (f64::from(i) * 10.0, 5.0 + slope * f64::from(i)))
                .collect(),
        };
        let judged: Vec<_> = [series("flat", 0.0), series("leak", 1.0)]
            .into_iter()
            .map(|s| {
                let trend = judge(&s, 300.0);
                (s, trend)
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("soak.png");
        png(&path, "test", &judged).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        // The header's height: the title's band and two panels.
        assert_eq!(
            u32::from_be_bytes(bytes[20..24].try_into().unwrap()),
            40 + 2 * 220
        );
    }
}
