//! The report of a statistics file: who sent how much to whom (a heat map), the sizes of
//! the operations per kind, each rank's time blocked per kind of wait, and their tables.
//!
//! This module must never read files: it draws and tabulates statistics it is given.

use std::collections::BTreeMap;
use std::fmt::Write;

use plotters::coord::Shift;
use plotters::prelude::*;
use tessera::{Blocked, JobStats, Traffic};

use super::{chart_on, human_bytes, mesh, plot_error, series_colour, Figure, Output};

/// Most cells along a side of the heat map; bigger jobs group neighbouring ranks.
const MAX_CELLS: usize = 128;

/// Bytes that flowed from each rank to each other (data direction: a get's bytes flow
/// from its target to its origin), all kinds together, or of one kind. A rank's operations
/// on its own memory move nothing between ranks and are left out.
pub(crate) fn flow_matrix(stats: &JobStats, kind: Option<Traffic>) -> Vec<Vec<u64>> {
    let n = stats.ranks;
    let mut m = vec![vec![0u64; n]; n];
    for part in &stats.per_rank {
        for t in &part.traffic {
            if kind.is_some_and(|k| k != t.kind) {
                continue;
            }
            let (from, to) = if t.kind.is_read() {
                (t.target, part.rank)
            } else {
                (part.rank, t.target)
            };
            if from != to {
                m[from][to] += t.bytes;
            }
        }
    }
    m
}

/// A heat map of bytes from rank (rows) to rank (columns).
struct HeatMap {
    title: String,
    /// Ranks per cell along each side.
    group: usize,
    cells: Vec<Vec<u64>>,
}

impl HeatMap {
    fn new(title: String, matrix: &[Vec<u64>]) -> HeatMap {
        let n = matrix.len();
        let group = n.div_ceil(MAX_CELLS).max(1);
        let m = n.div_ceil(group);
        let mut cells = vec![vec![0u64; m]; m];
        for (from, row) in matrix.iter().enumerate() {
            for (to, &bytes) in row.iter().enumerate() {
                cells[from / group][to / group] += bytes;
            }
        }
        HeatMap {
            title,
            group,
            cells,
        }
    }

    fn range(&self) -> Option<(f64, f64)> {
        let nonzero = self.cells.iter().flatten().copied().filter(|&b| b > 0);
        let min = nonzero.clone().min()? as f64;
        let max = nonzero.max()? as f64;
        Some((min, max.max(min * 1.0001)))
    }
}

/// The colour of `bytes` on a logarithmic scale from `min` to `max`.
fn heat_colour(bytes: u64, (min, max): (f64, f64)) -> RGBColor {
    let t = ((bytes as f64).ln() - min.ln()) / (max.ln() - min.ln());
    ViridisRGB::get_color(t.clamp(0.0, 1.0))
}

impl Figure for HeatMap {
    fn size(&self) -> (u32, u32) {
        (860, 720)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        let m = self.cells.len();
        let (left, right) = root.split_horizontally(720);
        let group = self.group;
        // Cell i spans i - 0.5 to i + 0.5, so that ticks at whole numbers name cells.
        let label = move |v: &f64| {
            let cell = v.round();
            if (v - cell).abs() < 1e-9 && cell >= 0.0 && (cell as usize) < m {
                format!("{}", cell as usize * group)
            } else {
                String::new()
            }
        };
        let mut chart = chart_on(
            &left,
            &self.title,
            -0.5f64..m as f64 - 0.5,
            -0.5f64..m as f64 - 0.5,
        )?;
        let (x_desc, y_desc) = if group == 1 {
            ("to rank".to_string(), "from rank".to_string())
        } else {
            (
                format!("to rank (cells of {group} ranks)"),
                format!("from rank (cells of {group} ranks)"),
            )
        };
        mesh(&mut chart)
            .disable_mesh()
            .x_labels(m.min(16))
            .y_labels(m.min(16))
            .x_label_formatter(&label)
            .y_label_formatter(&label)
            .x_desc(x_desc)
            .y_desc(y_desc)
            .draw()
            .map_err(plot_error)?;
        let range = self.range();
        let cells = self.cells.iter().enumerate().flat_map(|(from, row)| {
            row.iter().enumerate().map(move |(to, &bytes)| {
                let colour = match range {
                    Some(r) if bytes > 0 => heat_colour(bytes, r),
                    _ => RGBColor(238, 238, 238),
                };
                let (x, y) = (to as f64 - 0.5, from as f64 - 0.5);
                Rectangle::new([(x, y), (x + 1.0, y + 1.0)], colour.filled())
            })
        });
        chart.draw_series(cells).map_err(plot_error)?;
        let Some((min, max)) = range else {
            return Ok(());
        };
        // The colour scale.
        let mut scale = ChartBuilder::on(&right)
            .margin_top(60)
            .margin_bottom(60)
            .margin_right(10)
            .y_label_area_size(95)
            .build_cartesian_2d(0f64..1f64, (min..max).log_scale())
            .map_err(plot_error)?;
        mesh(&mut scale)
            .disable_mesh()
            .disable_x_axis()
            .y_labels(6)
            .y_label_formatter(&|v| human_bytes(*v))
            .draw()
            .map_err(plot_error)?;
        let steps = 64;
        let at = |i: usize| (min.ln() + (max.ln() - min.ln()) * i as f64 / steps as f64).exp();
        scale
            .draw_series((0..steps).map(|i| {
                let colour = ViridisRGB::get_color((i as f64 + 0.5) / steps as f64);
                Rectangle::new([(0.0, at(i)), (1.0, at(i + 1))], colour.filled())
            }))
            .map_err(plot_error)?;
        Ok(())
    }
}

/// Operations per size bucket, one line per kind.
struct Sizes {
    /// kind -> (bucket floor, operations) summed over ranks.
    series: BTreeMap<&'static str, Vec<(u64, u64)>>,
}

/// The histogram position of a bucket floor (0 for empty operations, else log2 + 1).
fn bucket_position(floor: u64) -> f64 {
    if floor == 0 {
        0.0
    } else {
        f64::from(floor.ilog2()) + 1.0
    }
}

impl Figure for Sizes {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        let points = self.series.values().flatten();
        let top = points.clone().map(|&(_, n)| n).max().unwrap_or(1) as f64;
        let last = points.map(|&(f, _)| bucket_position(f)).fold(1.0, f64::max);
        let mut chart = chart_on(
            root,
            "Operation sizes",
            -0.5f64..last + 0.5,
            (0.8f64..top * 1.5).log_scale(),
        )?;
        mesh(&mut chart)
            .x_labels(((last + 1.0) as usize).min(20))
            .x_label_formatter(&|v| {
                let k = v.round();
                if k <= 0.0 {
                    "0".into()
                } else {
                    human_bytes(2f64.powf(k - 1.0))
                }
            })
            .x_desc("bytes per operation (at least)")
            .y_desc("operations (all ranks)")
            .draw()
            .map_err(plot_error)?;
        // Bars side by side within each bucket, one per kind.
        let width = 0.8 / self.series.len() as f64;
        for (i, (kind, buckets)) in self.series.iter().enumerate() {
            let colour = series_colour(i);
            let left = -0.4 + width * i as f64;
            chart
                .draw_series(buckets.iter().map(|&(floor, n)| {
                    let x = bucket_position(floor) + left;
                    Rectangle::new([(x, 0.8), (x + width, n as f64)], colour.filled())
                }))
                .map_err(plot_error)?
                .label(*kind)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled())
                });
        }
        chart
            .configure_series_labels()
            .label_font(("sans-serif", 14))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(plot_error)
    }
}

/// Each rank's time blocked, stacked by kind of wait.
struct BlockedBars {
    ranks: usize,
    /// kind -> seconds per rank.
    series: Vec<(Blocked, Vec<f64>)>,
    elapsed: f64,
}

impl Figure for BlockedBars {
    fn size(&self) -> (u32, u32) {
        (900, (160 + 22 * self.ranks.min(64)) as u32)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        let totals: Vec<f64> = (0..self.ranks)
            .map(|r| self.series.iter().map(|(_, s)| s[r]).sum())
            .collect();
        let most = totals.iter().copied().fold(0.0, f64::max).max(1e-6);
        let mut chart = ChartBuilder::on(root)
            .caption(
                format!(
                    "Time blocked per rank (of {:.3} s on the slowest rank)",
                    self.elapsed
                ),
                ("sans-serif", 20),
            )
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(55)
            .build_cartesian_2d(0f64..most * 1.3, -0.5f64..self.ranks as f64 - 0.5)
            .map_err(plot_error)?;
        mesh(&mut chart)
            .disable_y_mesh()
            .y_labels(self.ranks.min(32))
            .y_label_formatter(&|v| {
                let r = v.round();
                if (v - r).abs() < 1e-9 && r >= 0.0 {
                    format!("{r:.0}")
                } else {
                    String::new()
                }
            })
            .x_desc("seconds")
            .y_desc("rank")
            .draw()
            .map_err(plot_error)?;
        let mut start = vec![0.0; self.ranks];
        for (i, (kind, seconds)) in self.series.iter().enumerate() {
            let colour = series_colour(i);
            let bars: Vec<_> = (0..self.ranks)
                .map(|r| {
                    let (x0, x1) = (start[r], start[r] + seconds[r]);
                    start[r] = x1;
                    let y = r as f64;
                    Rectangle::new([(x0, y - 0.35), (x1, y + 0.35)], colour.filled())
                })
                .collect();
            chart
                .draw_series(bars)
                .map_err(plot_error)?
                .label(kind.name())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled())
                });
        }
        chart
            .configure_series_labels()
            .label_font(("sans-serif", 14))
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(plot_error)
    }
}

/// The table of traffic between ranks per kind: in all, and per rank.
pub(crate) fn kind_table(stats: &JobStats) -> String {
    let ranks = stats.per_rank.len().max(1) as f64;
    let mut text = format!(
        "{:<16} {:>12} {:>12} {:>14} {:>14} {:>12}\n",
        "kind", "operations", "per rank", "bytes", "per rank", "mean size"
    );
    for t in stats.between_ranks() {
        let _ = writeln!(
            text,
            "{:<16} {:>12} {:>12.0} {:>14} {:>14} {:>12}",
            t.kind.name(),
            t.ops,
            t.ops as f64 / ranks,
            human_bytes(t.bytes as f64),
            human_bytes(t.bytes as f64 / ranks),
            human_bytes(t.bytes as f64 / t.ops.max(1) as f64),
        );
    }
    text
}

/// The table of each rank's traffic and time blocked.
fn rank_table(stats: &JobStats) -> String {
    let flow = flow_matrix(stats, None);
    let mut text = format!(
        "{:>5} {:>10} {:>12} {:>12} {:>12} {:>10}  most blocked in\n",
        "rank", "elapsed s", "operations", "bytes out", "bytes in", "blocked s"
    );
    for part in &stats.per_rank {
        let r = part.rank;
        let out: u64 = (0..stats.ranks)
            .filter(|&t| t != r)
            .map(|t| flow[r][t])
            .sum();
        let inn: u64 = (0..stats.ranks)
            .filter(|&f| f != r)
            .map(|f| flow[f][r])
            .sum();
        let ops: u64 = part.traffic.iter().map(|t| t.ops).sum();
        let blocked: f64 = part.blocked.iter().map(|b| b.seconds).sum();
        let worst = part
            .blocked
            .iter()
            .max_by(|a, b| a.seconds.total_cmp(&b.seconds))
            .map_or("-".to_string(), |b| {
                format!("{} ({:.3} s)", b.kind.name(), b.seconds)
            });
        let _ = writeln!(
            text,
            "{r:>5} {:>10.3} {ops:>12} {:>12} {:>12} {blocked:>10.3}  {worst}",
            part.elapsed_s,
            human_bytes(out as f64),
            human_bytes(inn as f64)
        );
    }
    text
}

/// The table of collective calls per operation and algorithm.
fn collective_table(stats: &JobStats) -> Option<String> {
    let mut rows: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    for part in &stats.per_rank {
        for c in &part.collectives {
            let row = rows.entry((c.op.clone(), c.algorithm.clone())).or_default();
            row.0 += c.calls;
            row.1 += c.bytes;
        }
    }
    if rows.is_empty() {
        return None;
    }
    let ranks = stats.per_rank.len().max(1) as u64;
    let mut text = format!(
        "{:<14} {:<20} {:>14} {:>16}\n",
        "operation", "algorithm", "calls per rank", "mean bytes/member"
    );
    for ((op, alg), (calls, bytes)) in rows {
        let _ = writeln!(
            text,
            "{op:<14} {alg:<20} {:>14} {:>16}",
            calls / ranks,
            human_bytes(bytes as f64 / calls.max(1) as f64)
        );
    }
    Some(text)
}

/// Draw and tabulate `stats`.
pub(crate) fn report(stats: &JobStats, out: &Output) -> Result<(), String> {
    if stats.per_rank.is_empty() {
        return Err("the statistics hold no rank's counts".into());
    }
    out.index.borrow_mut().push_str(&format!(
        "# Communication statistics: {} ranks on {}\n\n",
        stats.ranks, stats.conduit
    ));
    let flow = flow_matrix(stats, None);
    let total: u64 = flow.iter().flatten().sum();
    let heat = HeatMap::new(
        format!("Bytes between ranks, {} in all", human_bytes(total as f64)),
        &flow,
    );
    out.picture("heatmap", "Bytes from rank to rank", &heat)?;
    out.table("Traffic between ranks per kind", &kind_table(stats));
    out.table("Per rank", &rank_table(stats));
    if let Some(table) = collective_table(stats) {
        out.table("Collective calls", &table);
    }
    let mut series: BTreeMap<&'static str, BTreeMap<u64, u64>> = BTreeMap::new();
    for part in &stats.per_rank {
        for h in &part.sizes {
            let s = series.entry(h.kind.name()).or_default();
            for &(floor, n) in &h.buckets {
                *s.entry(floor).or_default() += n;
            }
        }
    }
    if !series.is_empty() {
        let sizes = Sizes {
            series: series
                .into_iter()
                .map(|(k, b)| (k, b.into_iter().collect()))
                .collect(),
        };
        out.picture("sizes", "Operation sizes", &sizes)?;
    }
    let blocked: Vec<(Blocked, Vec<f64>)> = Blocked::ALL
        .iter()
        .map(|&kind| {
            let mut per_rank = vec![0.0; stats.ranks];
            for part in &stats.per_rank {
                per_rank[part.rank] = part.blocked_s(kind);
            }
            (kind, per_rank)
        })
        .filter(|(_, s)| s.iter().any(|&x| x > 0.0))
        .collect();
    if !blocked.is_empty() {
        let bars = BlockedBars {
            ranks: stats.ranks,
            series: blocked,
            elapsed: stats
                .per_rank
                .iter()
                .map(|p| p.elapsed_s)
                .fold(0.0, f64::max),
        };
        out.picture("blocked", "Time blocked per rank", &bars)?;
    }
    Ok(())
}
