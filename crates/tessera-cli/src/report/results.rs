//! The report of measured results: strong scaling from `npb` and `app` runs at several rank
//! counts, and `bench` figures against message size.
//!
//! This module must never read files: it draws and tabulates results it is given.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use serde_json::Value;

use super::{chart_on, human_bytes, mesh, plot_error, series_colour, Figure, Output};

/// One timed run of a problem (an NPB kernel and class, or a dense application).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Run {
    /// What ran: `CG class C (signal)`, `lu n=4096 block=64`.
    pub problem: String,
    pub ranks: usize,
    pub seconds: f64,
    /// A baseline timed in the same job (ScaLAPACK for `app`), by name.
    pub baseline: Option<(String, f64)>,
}

impl Run {
    /// A run from `npb --json` or `app --json` output, or `None` for anything else.
    pub(crate) fn from_json(v: &Value) -> Option<Run> {
        let ranks = v.get("ranks")?.as_u64()? as usize;
        if let (Some(kernel), Some(class), Some(seconds)) = (
            v.get("kernel").and_then(Value::as_str),
            v.get("class").and_then(Value::as_str),
            v.get("time_s").and_then(Value::as_f64),
        ) {
            let variant = v.get("variant").and_then(Value::as_str).unwrap_or("");
            return Some(Run {
                problem: format!("{kernel} class {class} ({variant})"),
                ranks,
                seconds,
                baseline: None,
            });
        }
        let problem = v.get("problem")?;
        let seconds = v.get("outcome")?.get("seconds")?.as_f64()?;
        let field = |k: &str| {
            problem
                .get(k)
                .map(|x| x.to_string().trim_matches('"').to_string())
        };
        let baseline = v.get("baseline").and_then(|b| {
            Some((
                b.get("routine")?.as_str()?.to_string(),
                b.get("seconds")?.as_f64()?,
            ))
        });
        Some(Run {
            problem: format!(
                "{} n={} block={} ({})",
                field("app")?,
                field("n")?,
                field("block")?,
                field("variant").unwrap_or_default()
            ),
            ranks,
            seconds,
            baseline,
        })
    }
}

/// The best time per rank count of one problem, with the baseline's where there is one.
struct Scaling {
    problem: String,
    /// (ranks, seconds, baseline seconds)
    points: Vec<(usize, f64, Option<f64>)>,
    baseline: Option<String>,
}

impl Scaling {
    fn of(problem: &str, runs: &[&Run]) -> Scaling {
        let mut best: BTreeMap<usize, (f64, Option<f64>)> = BTreeMap::new();
        for r in runs {
            let entry = best.entry(r.ranks).or_insert((f64::INFINITY, None));
            entry.0 = entry.0.min(r.seconds);
            if let Some((_, b)) = &r.baseline {
                entry.1 = Some(entry.1.map_or(*b, |x: f64| x.min(*b)));
            }
        }
        Scaling {
            problem: problem.to_string(),
            points: best.into_iter().map(|(n, (t, b))| (n, t, b)).collect(),
            baseline: runs
                .iter()
                .find_map(|r| r.baseline.as_ref().map(|b| b.0.clone())),
        }
    }

    /// Speed-up over the smallest rank count, scaled so that it counts ranks: ideal
    /// scaling gives `ranks`.
    fn speedup(&self, seconds: f64) -> f64 {
        let (n0, t0, _) = self.points[0];
        t0 * n0 as f64 / seconds
    }
}

impl Figure for Scaling {
    fn size(&self) -> (u32, u32) {
        (1350, 480)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        let root = root
            .titled(
                &format!("Strong scaling: {}", self.problem),
                ("sans-serif", 22),
            )
            .map_err(plot_error)?;
        let panels = root.split_evenly((1, 3));
        let most = self.points.last().map_or(1, |p| p.0) as f64;
        let least = self.points[0].0 as f64;
        let xs = (least * 0.8)..(most * 1.25);
        let ranks_label = |v: &f64| format!("{v:.0}");
        // Time against ranks, the baseline's beside it.
        let times = self.points.iter().flat_map(|p| [Some(p.1), p.2]).flatten();
        let hi = times.fold(0f64, f64::max);
        let mut chart = chart_on(&panels[0], "time", xs.clone().log_scale(), 0f64..hi * 1.15)?;
        mesh(&mut chart)
            .x_label_formatter(&ranks_label)
            .x_desc("ranks")
            .y_desc("seconds")
            .draw()
            .map_err(plot_error)?;
        let ours: Vec<(f64, f64)> = self.points.iter().map(|p| (p.0 as f64, p.1)).collect();
        line_with_points(&mut chart, &ours, 0, "Tessera")?;
        if let Some(name) = &self.baseline {
            let theirs: Vec<(f64, f64)> = self
                .points
                .iter()
                .filter_map(|p| Some((p.0 as f64, p.2?)))
                .collect();
            line_with_points(&mut chart, &theirs, 1, name)?;
        }
        legend(&mut chart, SeriesLabelPosition::LowerLeft)?;
        // Speed-up against ideal.
        let top = self
            .points
            .iter()
            .map(|p| self.speedup(p.1))
            .fold(most, f64::max);
        let mut chart = chart_on(
            &panels[1],
            "speed-up",
            xs.clone().log_scale(),
            (least * 0.8..top * 1.25).log_scale(),
        )?;
        mesh(&mut chart)
            .x_label_formatter(&ranks_label)
            .y_label_formatter(&|v| format!("{v:.1}"))
            .x_desc("ranks")
            .y_desc("speed-up (ideal: the rank count)")
            .draw()
            .map_err(plot_error)?;
        let ideal = vec![(least, least), (most, most)];
        chart
            .draw_series(LineSeries::new(ideal, BLACK.mix(0.5).stroke_width(1)))
            .map_err(plot_error)?
            .label("ideal")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.mix(0.5)));
        let speedups: Vec<(f64, f64)> = self
            .points
            .iter()
            .map(|p| (p.0 as f64, self.speedup(p.1)))
            .collect();
        line_with_points(&mut chart, &speedups, 0, "Tessera")?;
        legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
        // Parallel efficiency.
        let mut chart = chart_on(
            &panels[2],
            "parallel efficiency",
            xs.log_scale(),
            0f64..1.25f64,
        )?;
        mesh(&mut chart)
            .x_label_formatter(&ranks_label)
            .y_label_formatter(&|v| format!("{:.0}%", v * 100.0))
            .x_desc("ranks")
            .y_desc("efficiency")
            .draw()
            .map_err(plot_error)?;
        let efficiency: Vec<(f64, f64)> = speedups.iter().map(|&(n, s)| (n, s / n)).collect();
        line_with_points(&mut chart, &efficiency, 0, "Tessera")?;
        Ok(())
    }
}

/// A series drawn as a line with a dot at each point, in colour `i`, named `name`.
fn line_with_points<'a, DB: DrawingBackend + 'a, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    points: &[(f64, f64)],
    i: usize,
    name: &str,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let colour = series_colour(i);
    chart
        .draw_series(LineSeries::new(points.to_vec(), colour.stroke_width(2)))
        .map_err(plot_error)?
        .label(name)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2)));
    chart
        .draw_series(points.iter().map(|&p| Circle::new(p, 4, colour.filled())))
        .map_err(plot_error)?;
    Ok(())
}

/// The chart's legend at `position`.
fn legend<'a, DB: DrawingBackend + 'a, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    position: SeriesLabelPosition,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    chart
        .configure_series_labels()
        .label_font(("sans-serif", 14))
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(plot_error)
}

/// Draw and tabulate runs: a scaling figure per problem measured at several rank counts.
pub(crate) fn report_runs(runs: &[Run], out: &Output) -> Result<(), String> {
    let mut problems: BTreeMap<&str, Vec<&Run>> = BTreeMap::new();
    for r in runs {
        problems.entry(&r.problem).or_default().push(r);
    }
    out.index.borrow_mut().push_str("# Runs\n\n");
    for (i, (problem, runs)) in problems.iter().enumerate() {
        let scaling = Scaling::of(problem, runs);
        let mut table = format!(
            "{:>6} {:>12} {:>10} {:>11}{}\n",
            "ranks",
            "time (s)",
            "speed-up",
            "efficiency",
            scaling
                .baseline
                .as_ref()
                .map_or(String::new(), |b| format!(" {:>12}", format!("{b} (s)")))
        );
        for &(n, t, b) in &scaling.points {
            let s = scaling.speedup(t);
            let _ = write!(
                table,
                "{n:>6} {t:>12.4} {s:>10.2} {:>10.0}%",
                100.0 * s / n as f64
            );
            if scaling.baseline.is_some() {
                let _ = write!(
                    table,
                    " {:>12}",
                    b.map_or("-".into(), |b| format!("{b:.4}"))
                );
            }
            table.push('\n');
        }
        out.table(problem, &table);
        if scaling.points.len() > 1 {
            out.picture(
                &format!("scaling-{}", i + 1),
                &format!("Strong scaling: {problem}"),
                &scaling,
            )?;
        } else {
            println!("(one rank count: run a sweep such as -n 1,2,4,8 for a scaling plot)");
        }
    }
    Ok(())
}

/// One measured figure of `bench`.
#[derive(Clone, Debug)]
struct Record {
    op: String,
    algorithm: Option<String>,
    bytes: u64,
    ranks: u64,
    metric: String,
    value: f64,
    choice: Option<String>,
}

/// A `bench rma` or `bench coll` report.
#[derive(Clone, Debug)]
pub(crate) struct Bench {
    /// The series' prefix when several files are drawn together.
    pub label: Option<String>,
    system: String,
    records: Vec<Record>,
    /// memcpy bandwidth per size, MB/s.
    memcpy: Vec<(u64, f64)>,
}

impl Bench {
    pub(crate) fn from_json(v: &Value, path: &Path) -> Result<Bench, String> {
        let bad = |what: &str| format!("{}: a bench report without {what}", path.display());
        let system = v.get("system").ok_or_else(|| bad("a system"))?;
        let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let records = v
            .get("results")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("results"))?
            .iter()
            .map(|r| {
                Some(Record {
                    op: text(r, "op")?,
                    algorithm: text(r, "algorithm"),
                    bytes: r.get("bytes")?.as_u64()?,
                    ranks: r.get("ranks")?.as_u64()?,
                    metric: text(r, "metric")?,
                    value: r.get("value")?.as_f64()?,
                    choice: text(r, "choice"),
                })
            })
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| bad("well-formed results (op, bytes, ranks, metric, value)"))?;
        if records.is_empty() {
            return Err(format!("{} holds no results", path.display()));
        }
        let memcpy = v
            .get("baselines")
            .and_then(|b| b.get("memcpy_bandwidth_mbs"))
            .and_then(Value::as_object)
            .map(|m| {
                let mut points: Vec<(u64, f64)> = m
                    .iter()
                    .filter_map(|(k, v)| Some((k.parse().ok()?, v.as_f64()?)))
                    .collect();
                points.sort_by_key(|p| p.0);
                points
            })
            .unwrap_or_default();
        Ok(Bench {
            label: None,
            system: format!(
                "{}, {} cores, {} conduit",
                text(system, "cpu").unwrap_or_default(),
                system.get("cores").and_then(Value::as_u64).unwrap_or(0),
                text(system, "conduit").unwrap_or_default()
            ),
            records,
            memcpy,
        })
    }

    fn name(&self, series: &str) -> String {
        match &self.label {
            Some(l) => format!("{l}: {series}"),
            None => series.to_string(),
        }
    }
}

/// Lines against message size on log-log axes.
struct AgainstSize {
    title: String,
    y_desc: String,
    series: Vec<(String, Vec<(f64, f64)>)>,
    /// Points drawn as rings over the lines, named once (the tuned choice).
    marked: Option<(String, Vec<(f64, f64)>)>,
}

impl Figure for AgainstSize {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        let all = self
            .series
            .iter()
            .flat_map(|s| &s.1)
            .chain(self.marked.iter().flat_map(|m| &m.1));
        let (x0, x1, y0, y1) = all.fold(
            (f64::INFINITY, 0f64, f64::INFINITY, 0f64),
            |(a, b, c, d), &(x, y)| (a.min(x), b.max(x), c.min(y), d.max(y)),
        );
        if !x0.is_finite() {
            return Err("nothing to draw".into());
        }
        let mut chart = chart_on(
            root,
            &self.title,
            (x0 * 0.7..x1 * 1.4).log_scale(),
            (y0 * 0.6..y1 * 1.8).log_scale(),
        )?;
        mesh(&mut chart)
            .x_label_formatter(&|v| human_bytes(*v))
            .y_label_formatter(&|v| figure(*v))
            .x_desc("bytes")
            .y_desc(&self.y_desc)
            .draw()
            .map_err(plot_error)?;
        for (i, (name, points)) in self.series.iter().enumerate() {
            line_with_points(&mut chart, points, i, name)?;
        }
        if let Some((name, points)) = &self.marked {
            chart
                .draw_series(
                    points
                        .iter()
                        .map(|&p| Circle::new(p, 9, BLACK.stroke_width(2))),
                )
                .map_err(plot_error)?
                .label(name.as_str())
                .legend(|(x, y)| Circle::new((x + 10, y), 6, BLACK.stroke_width(2)));
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)
    }
}

/// A measured figure for an axis: as many decimals as its size needs.
fn figure(v: f64) -> String {
    match v.abs() {
        a if a >= 100.0 => format!("{v:.0}"),
        a if a >= 1.0 => format!("{v:.1}"),
        _ => format!("{v:.3}"),
    }
}

/// A file-name part made of `text`'s letters and digits.
fn slug(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect()
}

/// Draw and tabulate bench reports: for rma, bandwidth (beside memcpy) and latency
/// against size; for coll, latency per algorithm against size per operation and team size.
pub(crate) fn report_bench(benches: &[Bench], out: &Output) -> Result<(), String> {
    let mut index = String::from("# Benchmarks\n\n");
    for b in benches {
        let _ = writeln!(
            index,
            "- {}{}",
            b.label
                .as_deref()
                .map_or(String::new(), |l| format!("{l}: ")),
            b.system
        );
    }
    out.index.borrow_mut().push_str(&(index + "\n"));
    let mut table = format!(
        "{:<24} {:<22} {:>6} {:>12} {:>14} {:>12}\n",
        "operation", "algorithm", "ranks", "bytes", "metric", "value"
    );
    for b in benches {
        for r in &b.records {
            let _ = writeln!(
                table,
                "{:<24} {:<22} {:>6} {:>12} {:>14} {:>12.3}",
                b.name(&r.op),
                r.algorithm
                    .as_deref()
                    .map_or("-".to_string(), |a| match &r.choice {
                        Some(c) => format!("{a} ({c})"),
                        None => a.to_string(),
                    }),
                r.ranks,
                r.bytes,
                r.metric,
                r.value
            );
        }
    }
    out.table("Figures", &table);
    // Point-to-point figures: one picture per metric.
    for (metric, title, y_desc) in [
        ("bandwidth_mbs", "Bandwidth against size", "MB/s"),
        ("latency_us", "Latency against size", "microseconds"),
    ] {
        let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
        for b in benches {
            let mut ops: BTreeMap<(String, u64), Vec<(f64, f64)>> = BTreeMap::new();
            for r in b.records.iter().filter(|r| {
                r.algorithm.is_none() && r.metric == metric && r.bytes > 0 && r.value > 0.0
            }) {
                ops.entry((r.op.clone(), r.ranks))
                    .or_default()
                    .push((r.bytes as f64, r.value));
            }
            for ((op, _), points) in ops {
                series.push((b.name(&op), points));
            }
            if metric == "bandwidth_mbs" && !b.memcpy.is_empty() && !series.is_empty() {
                let points = b.memcpy.iter().map(|&(s, v)| (s as f64, v)).collect();
                series.push((b.name("memcpy"), points));
            }
        }
        if !series.is_empty() {
            let figure = AgainstSize {
                title: title.to_string(),
                y_desc: y_desc.to_string(),
                series,
                marked: None,
            };
            out.picture(&slug(metric), title, &figure)?;
        }
    }
    // Collectives: one picture per operation and team size.
    let mut groups: BTreeMap<(String, u64), AgainstSize> = BTreeMap::new();
    for b in benches {
        let mut lines: BTreeMap<(String, u64, String), Vec<(f64, f64)>> = BTreeMap::new();
        for r in b
            .records
            .iter()
            .filter(|r| r.metric == "latency_us" && r.value > 0.0)
        {
            let Some(alg) = &r.algorithm else { continue };
            let x = (r.bytes.max(1)) as f64;
            let group = groups
                .entry((r.op.clone(), r.ranks))
                .or_insert_with(|| AgainstSize {
                    title: format!("{} on {} ranks: latency per algorithm", r.op, r.ranks),
                    y_desc: "microseconds".into(),
                    series: Vec::new(),
                    marked: None,
                });
            if alg == "tuned" {
                group
                    .marked
                    .get_or_insert_with(|| ("tuned choice".into(), Vec::new()))
                    .1
                    .push((x, r.value));
            } else {
                lines
                    .entry((r.op.clone(), r.ranks, alg.clone()))
                    .or_default()
                    .push((x, r.value));
            }
        }
        for ((op, ranks, alg), points) in lines {
            if let Some(g) = groups.get_mut(&(op, ranks)) {
                g.series.push((b.name(&alg), points));
            }
        }
    }
    for ((op, ranks), figure) in &groups {
        let title = format!("{op} on {ranks} ranks");
        out.picture(&format!("coll-{}-{ranks}", slug(op)), &title, figure)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speedup_counts_ranks_from_the_smallest_run() {
        let runs = [
            Run {
                problem: "p".into(),
                ranks: 2,
                seconds: 8.0,
                baseline: None,
            },
            Run {
                problem: "p".into(),
                ranks: 4,
                seconds: 4.0,
                baseline: None,
            },
            Run {
                problem: "p".into(),
                ranks: 4,
                seconds: 5.0,
                baseline: None,
            },
            Run {
                problem: "p".into(),
                ranks: 8,
                seconds: 4.0,
                baseline: None,
            },
        ];
        let s = Scaling::of("p", &runs.iter().collect::<Vec<_>>());
        assert_eq!(s.points.iter().map(|p| p.0).collect::<Vec<_>>(), [2, 4, 8]);
        assert_eq!(s.points[1].1, 4.0, "the best of repeated runs");
        assert_eq!(s.speedup(s.points[1].1), 4.0);
        assert_eq!(s.speedup(s.points[2].1), 4.0, "no gain from 4 to 8 ranks");
    }
}
