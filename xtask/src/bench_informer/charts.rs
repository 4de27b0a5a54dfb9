//! The SVG charts (plotters): sync time and peak RSS against the pod count, and the event
//! latencies' CDFs.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;

use super::contenders::Contender;
use super::measure::{Key, Latencies, Sample, med, quantile};

/// Where the charts go, relative to the workspace root.
pub(super) const CHART_DIR: &str = "bench/informer/charts";

/// Writes `sync.svg`, `rss.svg` and, when there are latencies, `latency.svg` into
/// [`CHART_DIR`].
pub(super) fn write_all(
    root: &Path,
    pods: &[usize],
    samples: &BTreeMap<Key, Vec<Sample>>,
    latency: &BTreeMap<Contender, Latencies>,
    latency_pods: usize,
) -> anyhow::Result<()> {
    let charts = root.join(CHART_DIR);
    std::fs::create_dir_all(&charts).with_context(|| format!("creating {}", charts.display()))?;
    metric_chart(
        &charts.join("sync.svg"),
        "Initial sync (spawn to synced)",
        "ms, median",
        pods,
        samples,
        |s| s.spawn_ms,
    )?;
    metric_chart(
        &charts.join("rss.svg"),
        "Peak RSS after sync",
        "MiB, median",
        pods,
        samples,
        |s| s.rss_kib / 1024.0,
    )?;
    if !latency.is_empty() {
        latency_chart(&charts.join("latency.svg"), latency, latency_pods)?;
    }
    Ok(())
}

/// Each contender's colour in every chart.
fn color(c: Contender) -> plotters::style::RGBColor {
    match c {
        Contender::ClientGo => plotters::style::RGBColor(0x1f, 0x77, 0xb4),
        Contender::ClientGoJson => plotters::style::RGBColor(0x17, 0xbe, 0xcf),
        Contender::Kinformer => plotters::style::RGBColor(0xd6, 0x27, 0x28),
        Contender::KinformerJson => plotters::style::RGBColor(0xff, 0x7f, 0x0e),
        Contender::KinformerModify => plotters::style::RGBColor(0x94, 0x67, 0xbd),
        Contender::KubeRuntime => plotters::style::RGBColor(0x2c, 0xa0, 0x2c),
    }
}

/// Sync time or RSS against the pod count, one panel without and one with the transform.
fn metric_chart(
    path: &Path,
    title: &str,
    y_desc: &str,
    pods: &[usize],
    samples: &BTreeMap<Key, Vec<Sample>>,
    f: impl Fn(&Sample) -> f64 + Copy,
) -> anyhow::Result<()> {
    use plotters::prelude::*;
    #[allow(clippy::cast_precision_loss)]
    let xs: Vec<f64> = pods.iter().map(|&n| n as f64).collect();
    let max_x = xs.iter().copied().fold(1.0, f64::max);
    let max_y = samples
        .keys()
        .map(|&k| med(samples, k, f))
        .fold(1.0, f64::max);
    let root = SVGBackend::new(path, (1000, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    for (area, strip) in root.split_evenly((1, 2)).iter().zip([false, true]) {
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!(
                    "{title}: managedFields {}",
                    if strip { "stripped" } else { "kept" }
                ),
                ("sans-serif", 16),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..max_x * 1.05, 0.0..max_y * 1.15)?;
        chart
            .configure_mesh()
            .x_desc("pods")
            .y_desc(y_desc)
            .draw()?;
        for &c in Contender::for_strip(strip) {
            let points: Vec<(f64, f64)> = pods
                .iter()
                .zip(&xs)
                .map(|(&n, &x)| (x, med(samples, (n, strip, c), f)))
                .collect();
            line(&mut chart, c, points, 4)?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    }
    root.present()?;
    Ok(())
}

/// The event latencies' CDFs.
fn latency_chart(
    path: &Path,
    latency: &BTreeMap<Contender, Latencies>,
    pods: usize,
) -> anyhow::Result<()> {
    use plotters::prelude::*;
    let lo = latency
        .values()
        .filter_map(|l| l.from_send.first().copied())
        .fold(0.0, f64::min);
    // The CDF up to the largest p99 (the tail beyond it would squeeze the rest).
    let hi = latency
        .values()
        .map(|l| quantile(&l.from_send, 0.99))
        .fold(1.0, f64::max);
    let root = SVGBackend::new(path, (800, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Event latency CDF ({pods} pods, patch sent to handler, up to the largest p99)"
            ),
            ("sans-serif", 16),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(lo..hi * 1.05, 0.0..1.0)?;
    chart
        .configure_mesh()
        .x_desc("ms")
        .y_desc("fraction of updates")
        .draw()?;
    for (c, l) in latency {
        #[allow(clippy::cast_precision_loss)]
        let total = l.from_send.len().max(1) as f64;
        #[allow(clippy::cast_precision_loss)]
        let points: Vec<(f64, f64)> = l
            .from_send
            .iter()
            .enumerate()
            .filter(|(_, v)| **v <= hi)
            .map(|(i, &v)| (v, (i + 1) as f64 / total))
            .collect();
        line(&mut chart, *c, points, 0)?;
    }
    legend(&mut chart, SeriesLabelPosition::LowerRight)?;
    root.present()?;
    Ok(())
}

/// A chart of this module: an SVG with numbers on both axes.
type Chart<'a, 'b> = plotters::chart::ChartContext<
    'a,
    plotters::prelude::SVGBackend<'b>,
    plotters::coord::cartesian::Cartesian2d<
        plotters::coord::types::RangedCoordf64,
        plotters::coord::types::RangedCoordf64,
    >,
>;

/// Draws contender `c`'s line through `points` (a dot of `dot_size` at each, none for 0)
/// and its legend entry.
fn line(
    chart: &mut Chart<'_, '_>,
    c: Contender,
    points: Vec<(f64, f64)>,
    dot_size: u32,
) -> anyhow::Result<()> {
    use plotters::prelude::*;
    let color = color(c);
    chart
        .draw_series(LineSeries::new(points, color.stroke_width(2)).point_size(dot_size))?
        .label(c.name())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    Ok(())
}

/// The legend, in a white box at `position`.
fn legend<'a, 'b: 'a>(
    chart: &mut Chart<'a, 'b>,
    position: plotters::chart::SeriesLabelPosition,
) -> anyhow::Result<()> {
    use plotters::prelude::*;
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}
