//! `tessera config`: every setting Tessera reads, the value in force and where it came
//! from (the environment, the default, or the launcher), each value checked as a job
//! would check it. `--markdown` prints the README's table of every variable, generated
//! from the same table (`tessera::config::VARIABLES`).
//!
//! This module must never change a setting or start a rank: it reads and prints.

use std::process::ExitCode;

use serde::Serialize;
use tessera::config;
use tessera::model::team::calibration;
use tessera::model::tuning;

/// What applies without `TESSERA_TUNING` on this machine: the default table where it
/// exists, else online trials.
fn tuning_default() -> String {
    match tuning::default_path() {
        Some(p) if p.exists() => format!("the table {}  (default: it exists)", p.display()),
        Some(p) => format!(
            "online trials; the model where a host runs more ranks than it has processors  (default: no table at {})",
            p.display()
        ),
        None => "online trials  (default: no home directory to hold a table)".to_string(),
    }
}

/// What applies without `TESSERA_CALIBRATION` on this machine: the default calibration
/// where it exists, else the built-in parameters.
fn calibration_default() -> String {
    match calibration::default_path() {
        Some(p) if p.exists() => format!("the calibration {}  (default: it exists)", p.display()),
        Some(p) => format!(
            "the built-in parameters  (default: no calibration at {}; `tessera tune --calibrate` makes one)",
            p.display()
        ),
        None => "the built-in parameters  (default: no home directory to hold a calibration)"
            .to_string(),
    }
}

/// What applies without `TESSERA_DIRECT` (`documented`: the variable's default as the
/// table says it): direct reads, except for the team sizes whose entry in the calibration
/// in force kept long messages in the mailbox.
fn direct_default(documented: &str) -> String {
    let default = format!("{documented}  (default)");
    let Some(path) = calibration::path_in_force() else {
        return default;
    };
    // A calibration that does not load is refused below, with the reason.
    let Ok(cal) = calibration::Calibration::load(&path) else {
        return default;
    };
    let mailbox: Vec<String> = cal
        .entries
        .iter()
        .filter(|e| !e.direct_reads)
        .map(|e| {
            let regime = if e.crowded {
                ", ranks sharing processors"
            } else {
                ""
            };
            format!("{} ranks{regime}", e.team_size)
        })
        .collect();
    if mailbox.is_empty() {
        return format!("on  (default; the calibration {} keeps it)", path.display());
    }
    format!(
        "on, but through the mailbox for teams nearest {}  (default: the calibration {} measured the mailbox faster there)",
        mailbox.join(" and "),
        path.display()
    )
}

/// One row of `tessera config --json`.
#[derive(Serialize)]
struct Row<'a> {
    name: &'a str,
    kind: String,
    value: Option<&'a str>,
    source: &'static str,
    default: &'a str,
    problem: Option<&'a str>,
}

/// Print the settings (`json`: as JSON; `markdown`: the variables' table for the README).
/// Exits 2 when a value would be refused, naming it, so that a script can check a
/// configuration before it starts a job.
pub(crate) fn drive(json: bool, markdown: bool) -> Result<ExitCode, String> {
    if markdown {
        print!("{}", config::markdown_table());
        return Ok(ExitCode::SUCCESS);
    }
    let settings = config::settings();
    let mut problems: Vec<String> = settings.iter().filter_map(|s| s.problem.clone()).collect();
    // Names no table knows, then what only the team layer checks (the tuning table, the
    // forced algorithms): each refusal once.
    for extra in [
        config::check_names().err().map(|e| e.to_string()),
        tessera::check_settings().err().map(|e| e.to_string()),
    ]
    .into_iter()
    .flatten()
    {
        if !problems.contains(&extra) {
            problems.push(extra);
        }
    }
    if json {
        let rows: Vec<Row> = settings
            .iter()
            .map(|s| Row {
                name: &s.name,
                kind: s.variable.kind.describe(),
                value: s.value.as_deref(),
                source: s.source(),
                default: s.variable.default,
                problem: s.problem.as_deref(),
            })
            .collect();
        let doc = serde_json::json!({ "settings": rows, "problems": problems });
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?
        );
    } else {
        let width = settings.iter().map(|s| s.name.len()).max().unwrap_or(0);
        // The table's Markdown quoting has no place on a terminal.
        let plain = |t: &str| t.replace('`', "");
        for s in &settings {
            let shown = match (&s.value, s.source()) {
                (Some(v), _) => format!("{v}  (environment)"),
                (None, _) if s.name == "TESSERA_TUNING" => tuning_default(),
                (None, _) if s.name == "TESSERA_CALIBRATION" => calibration_default(),
                (None, _) if s.name == "TESSERA_DIRECT" => {
                    direct_default(&plain(s.variable.default))
                }
                (None, "launcher") => "-  (set by the launcher for each rank)".to_string(),
                (None, _) if s.variable.default.is_empty() => "-  (unset)".to_string(),
                (None, _) => format!("{}  (default)", plain(s.variable.default)),
            };
            println!("{:<width$}  {shown}", s.name);
        }
        for p in &problems {
            println!("refused: {}", plain(p));
        }
    }
    Ok(if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}
