//! `tessera report FILE... [-o DIR]`: tables and pictures from what other commands wrote.
//!
//! The kind of each file is read from its contents:
//! - a statistics file (`--stats FILE`, `TESSERA_STATS`): a heat map of bytes per rank
//!   pair, the operation sizes per kind, each rank's time blocked per kind of wait, and
//!   tables of the same (several files are parts of one job, merged);
//! - `npb --json` or `app --json` results (one run, several, or a sweep over rank counts):
//!   time, speed-up and parallel efficiency against ranks, per problem;
//! - `bench rma --json`: bandwidth against size beside memcpy, and latency against size;
//!   `bench coll --json`: latency per algorithm against size, per operation, with the tuned
//!   choice marked. Several bench files are drawn together, each series named by its file.
//!
//! Pictures are SVG and PNG (`--format`), drawn with `plotters`; text is set in a TrueType
//! font of the system (DejaVu Sans or Liberation Sans where installed, else the first one
//! found under `/usr/share/fonts`). `DIR/index.md` lists the tables and the pictures.
//!
//! This module must never run a job: it only reads files and draws.

mod results;
mod stats;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::OnceLock;

use clap::{Args, ValueEnum};
use plotters::chart::MeshStyle;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;

/// `tessera report`'s command line.
#[derive(Args, Debug)]
pub(crate) struct ReportArgs {
    /// Files to draw: statistics (--stats), npb/app results (--json, sweeps included), or
    /// bench rma/coll results (--json); one kind at a time.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Directory for the pictures and index.md (created if missing).
    #[arg(short = 'o', long = "output", default_value = "report")]
    output: PathBuf,
    /// Picture formats to write.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "svg,png")]
    format: Vec<Format>,
}

/// A picture format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// Scalable vector graphics.
    Svg,
    /// Portable network graphics.
    Png,
}

impl Format {
    fn extension(self) -> &'static str {
        match self {
            Format::Svg => "svg",
            Format::Png => "png",
        }
    }
}

/// What a file holds.
enum Input {
    Stats(tessera::JobStats),
    Runs(Vec<results::Run>),
    Bench(results::Bench),
}

impl Input {
    fn kind(&self) -> &'static str {
        match self {
            Input::Stats(_) => "communication statistics",
            Input::Runs(_) => "npb or app results",
            Input::Bench(_) => "bench results",
        }
    }
}

/// Read `path` and say what it holds.
fn read_input(path: &Path) -> Result<Input, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{} is not JSON: {e}", path.display()))?;
    let name = path.display();
    if value.get("format").and_then(|f| f.as_str()) == Some(tessera::core::report::FORMAT) {
        return tessera::JobStats::parse(&text)
            .map(Input::Stats)
            .map_err(|why| format!("{name} is not a statistics file: {why}"));
    }
    if value.get("results").is_some() && value.get("system").is_some() {
        return results::Bench::from_json(&value, path).map(Input::Bench);
    }
    let items: Vec<&serde_json::Value> = match &value {
        serde_json::Value::Array(items) => items.iter().collect(),
        one => vec![one],
    };
    if items.is_empty() {
        return Err(format!("{name} holds no results (an empty list)"));
    }
    let runs: Result<Vec<results::Run>, String> = items
        .iter()
        .map(|item| results::Run::from_json(item).ok_or(()))
        .collect::<Result<_, ()>>()
        .map_err(|()| {
            format!(
                "{name}: unknown kind of JSON; report reads statistics files (--stats FILE), npb and app results (--json) and bench rma/coll results (--json)"
            )
        });
    runs.map(Input::Runs)
}

/// Run `tessera report`.
pub(crate) fn drive(args: &ReportArgs) -> Result<ExitCode, String> {
    let mut inputs = Vec::new();
    for path in &args.files {
        inputs.push((path.clone(), read_input(path)?));
    }
    let (first_path, first) = &inputs[0];
    if let Some((path, other)) = inputs
        .iter()
        .find(|(_, i)| std::mem::discriminant(i) != std::mem::discriminant(first))
    {
        return Err(format!(
            "{} holds {} but {} holds {}: report one kind at a time",
            first_path.display(),
            first.kind(),
            path.display(),
            other.kind()
        ));
    }
    std::fs::create_dir_all(&args.output)
        .map_err(|e| format!("creating {}: {e}", args.output.display()))?;
    let out = Output {
        dir: args.output.clone(),
        formats: args.format.clone(),
        index: std::cell::RefCell::new(String::new()),
    };
    match first {
        Input::Stats(_) => {
            let parts = inputs
                .into_iter()
                .filter_map(|(_, i)| match i {
                    Input::Stats(s) => Some(s),
                    _ => None,
                })
                .collect();
            let merged = tessera::JobStats::merge(parts).map_err(|e| e.to_string())?;
            stats::report(&merged, &out)?;
        }
        Input::Runs(_) => {
            let runs = inputs
                .into_iter()
                .flat_map(|(_, i)| match i {
                    Input::Runs(r) => r,
                    _ => Vec::new(),
                })
                .collect::<Vec<_>>();
            results::report_runs(&runs, &out)?;
        }
        Input::Bench(_) => {
            let several = inputs.len() > 1;
            let benches = inputs
                .into_iter()
                .filter_map(|(path, i)| match i {
                    Input::Bench(mut b) => {
                        if several {
                            b.label = Some(
                                path.file_stem()
                                    .unwrap_or_default()
                                    .to_string_lossy()
                                    .into_owned(),
                            );
                        }
                        Some(b)
                    }
                    _ => None,
                })
                .collect::<Vec<_>>();
            results::report_bench(&benches, &out)?;
        }
    }
    let index = out.dir.join("index.md");
    std::fs::write(&index, out.index.borrow().as_str())
        .map_err(|e| format!("writing {}: {e}", index.display()))?;
    eprintln!("report: pictures and index.md in {}", out.dir.display());
    Ok(ExitCode::SUCCESS)
}

/// Where a report goes: the directory, the formats, and the index being written.
pub(crate) struct Output {
    dir: PathBuf,
    formats: Vec<Format>,
    index: std::cell::RefCell<String>,
}

impl Output {
    /// Print `text` (a table) and add it to the index.
    fn table(&self, title: &str, text: &str) {
        println!("\n{title}\n{text}");
        let mut index = self.index.borrow_mut();
        index.push_str(&format!("## {title}\n\n```text\n{text}```\n\n"));
    }

    /// Draw `figure` as `DIR/name.<ext>` in every format, and list it in the index.
    fn picture(&self, name: &str, title: &str, figure: &impl Figure) -> Result<(), String> {
        font()?;
        let size = figure.size();
        for &format in &self.formats {
            let path = self.dir.join(format!("{name}.{}", format.extension()));
            match format {
                Format::Svg => {
                    let root = SVGBackend::new(&path, size).into_drawing_area();
                    draw_on(figure, &root, &path)?;
                }
                Format::Png => {
                    let root = BitMapBackend::new(&path, size).into_drawing_area();
                    draw_on(figure, &root, &path)?;
                }
            }
        }
        let shown = self.formats.first().map_or("svg", |f| f.extension());
        self.index
            .borrow_mut()
            .push_str(&format!("## {title}\n\n![{title}]({name}.{shown})\n\n"));
        Ok(())
    }
}

fn draw_on<DB: DrawingBackend>(
    figure: &impl Figure,
    root: &DrawingArea<DB, Shift>,
    path: &Path,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let failed = |e: String| format!("drawing {}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| failed(e.to_string()))?;
    figure.draw(root).map_err(failed)?;
    root.present().map_err(|e| failed(e.to_string()))
}

/// A picture.
trait Figure {
    /// Its size in pixels.
    fn size(&self) -> (u32, u32) {
        (900, 600)
    }

    /// Draw it on `root` (already white).
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>
    where
        DB::ErrorType: 'static;
}

/// A chart with axes `X` and `Y`.
type Chart<'a, DB, X, Y> = ChartContext<'a, DB, Cartesian2d<X, Y>>;

/// A chart on `area` with a caption, room for tick labels and axis names, and axes over
/// `x` and `y`.
fn chart_on<'a, DB: DrawingBackend, X: AsRangedCoord, Y: AsRangedCoord>(
    area: &'a DrawingArea<DB, Shift>,
    caption: impl AsRef<str>,
    x: X,
    y: Y,
) -> Result<Chart<'a, DB, X::CoordDescType, Y::CoordDescType>, String>
where
    DB::ErrorType: 'static,
{
    ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(x, y)
        .map_err(plot_error)
}

/// The chart's mesh, with the report's text sizes; configure and draw it.
fn mesh<'a, 'b, DB, X, Y>(
    chart: &'b mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
) -> MeshStyle<'a, 'b, X, Y, DB>
where
    DB: DrawingBackend,
    X: Ranged + ValueFormatter<X::ValueType>,
    Y: Ranged + ValueFormatter<Y::ValueType>,
{
    let mut style = chart.configure_mesh();
    style
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 16));
    style
}

/// A plotting error as text.
fn plot_error<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> String {
    e.to_string()
}

/// Places a TrueType font may be found, in order of preference.
const FONTS: [&str; 5] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation/LiberationSans-Regular.ttf",
];

/// Load a system font for text, once.
fn font() -> Result<(), String> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let path = FONTS
                .iter()
                .map(PathBuf::from)
                .find(|p| p.is_file())
                .or_else(|| first_ttf(Path::new("/usr/share/fonts"), 4))
                .ok_or_else(|| {
                    "no TrueType font found under /usr/share/fonts to set the pictures' text in; install one (apt-get install fonts-dejavu-core)".to_string()
                })?;
            let bytes = std::fs::read(&path)
                .map_err(|e| format!("reading the font {}: {e}", path.display()))?;
            // Fonts are registered for the life of the process.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
                .map_err(|_| format!("{} is not a usable TrueType font", path.display()))
        })
        .clone()
}

/// The first `.ttf` file under `dir`, looking `depth` levels down.
fn first_ttf(dir: &Path, depth: u32) -> Option<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    if let Some(ttf) = entries
        .iter()
        .find(|p| p.extension().is_some_and(|e| e.eq_ignore_ascii_case("ttf")))
    {
        return Some(ttf.clone());
    }
    if depth == 0 {
        return None;
    }
    entries
        .iter()
        .filter(|p| p.is_dir())
        .find_map(|p| first_ttf(p, depth - 1))
}

/// `bytes` in binary units, for labels and tables.
fn human_bytes(bytes: f64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 || value >= 100.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// The colour of series `i`.
fn series_colour(i: usize) -> RGBColor {
    const COLOURS: [RGBColor; 10] = [
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
    COLOURS[i % COLOURS.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_read_in_binary_units() {
        assert_eq!(human_bytes(0.0), "0 B");
        assert_eq!(human_bytes(1536.0), "1.5 KiB");
        assert_eq!(human_bytes(300.0 * 1024.0 * 1024.0), "300 MiB");
    }
}
