//! The configuration: every `TESSERA_*` environment variable, read in one place with one
//! parser per kind, and the few outside variables the library consults ([`raw`]). No other
//! module of the workspace reads the environment.
//!
//! It sits below the conduits and the core (it imports only the error types), so every
//! layer may ask it.
//!
//! The rules are the same for every variable:
//! - an empty value means the variable is unset;
//! - sizes take an optional binary suffix (`64K`, `512M`, `2G`, `1T`) and must be positive;
//! - durations are seconds (`30`, `0.5`): negative, zero, NaN, infinite and absurdly large
//!   values are refused; where a duration switches something off, `off` (or `none`) says so;
//! - switches accept `1/0`, `true/false`, `yes/no` and `on/off` (any case) and refuse
//!   anything else, so a typo never silently turns a check on or off;
//! - every refusal names the variable, the value, and what is allowed.
//!
//! [`VARIABLES`] lists them all with their meaning; the job layer's documentation and the
//! README carry the same table (a test checks that none is missing).
//!
//! This module must never read anything but the process environment, and never panic on a
//! value.

use std::time::Duration;

use crate::error::{BadValue, JobError};

/// What a variable holds, which says how it is parsed and checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A size in bytes with an optional binary suffix (`64K`, `512M`, `2G`).
    Size,
    /// A positive number of seconds.
    Seconds,
    /// A positive number of seconds, or `off` for no limit.
    Limit,
    /// A number of seconds, 0 included.
    SecondsOrZero,
    /// A whole number (its unit in the meaning).
    Count,
    /// A switch: `1/0`, `true/false`, `yes/no`, `on/off`.
    Switch,
    /// One of the listed words.
    Choice(&'static [&'static str]),
    /// Free text (a path, a command, a specification its user checks).
    Text,
    /// Set by the launcher for each rank, not by users.
    Launcher,
}

impl Kind {
    /// The kind in words, for tables.
    ///
    /// ```
    /// use tessera::config::Kind;
    /// assert_eq!(Kind::Limit.describe(), "seconds or `off`");
    /// ```
    pub fn describe(self) -> String {
        match self {
            Kind::Size => "size".into(),
            Kind::Seconds => "seconds".into(),
            Kind::Limit => "seconds or `off`".into(),
            Kind::SecondsOrZero => "seconds (0 allowed)".into(),
            Kind::Count => "whole number".into(),
            Kind::Switch => "switch".into(),
            Kind::Choice(words) => words
                .iter()
                .map(|w| format!("`{w}`"))
                .collect::<Vec<_>>()
                .join(", "),
            Kind::Text => "text".into(),
            Kind::Launcher => "set by the launcher".into(),
        }
    }
}

/// One documented environment variable: the one table from which the README's table,
/// `tessera config` and the launcher's check of every setting come.
#[derive(Clone, Copy, Debug)]
pub struct Variable {
    /// Its name (`TESSERA_COLL_<OP>` stands for one variable per collective operation).
    pub name: &'static str,
    /// What it holds.
    pub kind: Kind,
    /// What applies when it is unset, in words (empty: nothing, or see the meaning).
    pub default: &'static str,
    /// What it does.
    pub meaning: &'static str,
}

/// Every variable Tessera reads (set by users) or sets for its ranks (set by the launcher).
///
/// ```
/// let names: Vec<&str> = tessera::config::VARIABLES.iter().map(|v| v.name).collect();
/// assert!(names.contains(&"TESSERA_WAIT_TIMEOUT"));
/// ```
pub const VARIABLES: &[Variable] = &[
    Variable {
        name: "TESSERA_SEGMENT",
        kind: Kind::Size,
        default: "`2G`",
        meaning: "segment size per rank (reserved lazily: untouched pages cost nothing)",
    },
    Variable {
        name: "TESSERA_AM_QUEUE",
        kind: Kind::Size,
        default: "64 KiB per sender, smaller for large jobs",
        meaning: "bytes per active-message queue (at most 256M)",
    },
    Variable {
        name: "TESSERA_WAIT_TIMEOUT",
        kind: Kind::Limit,
        default: "300 under `tessera run`, off otherwise",
        meaning: "watchdog: seconds a blocking wait may take before it fails naming the ranks it waits for",
    },
    Variable {
        name: "TESSERA_BOOT_TIMEOUT",
        kind: Kind::Seconds,
        default: "60",
        meaning: "seconds for every rank to attach at start-up",
    },
    Variable {
        name: "TESSERA_CHECK",
        kind: Kind::Switch,
        default: "off",
        meaning: "checked mode: every collective call and allocation compared across ranks in full",
    },
    Variable {
        name: "TESSERA_HIDE_PEERS",
        kind: Kind::Switch,
        default: "off",
        meaning: "treat every peer as unmapped (as on another host), a testing aid for the paths a multi-host conduit takes",
    },
    Variable {
        name: "TESSERA_BIND",
        kind: Kind::Switch,
        default: "off",
        meaning: "pin each rank to a processor of its own, rank k to the k-th the job may use, as `OMP_PROC_BIND=true` does (smp and threads conduits; refused with more ranks than processors)",
    },
    Variable {
        name: "TESSERA_SHM_NAMES",
        kind: Kind::Switch,
        default: "off",
        meaning: "`smp` ranks use named shared-memory objects, as the mpi conduit does on each host (a testing aid)",
    },
    Variable {
        name: "TESSERA_TUNING",
        kind: Kind::Text,
        default: "`~/.config/tessera/tuning.json` when it exists, else `online`, except where a host runs more ranks than it has processors (there trials time the scheduler, so `none`)",
        meaning: "how collectives choose algorithms: a tuning table's path, `online` (teams time the candidates in their first calls and agree on the fastest), or `none` (the cost model alone, the same choice every run)",
    },
    Variable {
        name: "TESSERA_TUNING_TRACE",
        kind: Kind::Switch,
        default: "off",
        meaning: "member 0 of every team that tunes online prints each decision on standard error: every candidate's trial times (the slowest member's, round by round), their medians, and the winner",
    },
    Variable {
        name: "TESSERA_CALIBRATION",
        kind: Kind::Text,
        default: "`~/.config/tessera/calibration.json` when it exists, else the built-in parameters",
        meaning: "the cost model's machine parameters, as `tessera tune --calibrate` measured them: a calibration's path, or `none` for the built-in sets (one for hosts with a core per rank, one for hosts whose ranks outnumber their processors)",
    },
    Variable {
        name: "TESSERA_STATS",
        kind: Kind::Text,
        default: "",
        meaning: "count communication and write the job's statistics to this file when it ends: operations and bytes per rank pair and kind, size histograms, collective calls per algorithm, time blocked per kind of wait (`--stats FILE` on the commands; `tessera report FILE` draws them)",
    },
    Variable {
        name: "TESSERA_COLL_<OP>",
        kind: Kind::Text,
        default: "",
        meaning: "force a collective algorithm, e.g. `TESSERA_COLL_ALLREDUCE=ring`",
    },
    Variable {
        name: "TESSERA_DIRECT",
        kind: Kind::Switch,
        default: "on, unless the calibration in force measured the mailbox faster (`tessera tune --calibrate`); a team that tunes online tries both ways per size class above 16 KiB",
        meaning: "long collective messages (16 KiB or more) between ranks of one host are read straight from the sender's memory, one copy instead of two (Linux cross-memory attach, allowed only where the ranks could debug each other); `off` copies them through the team's mailbox; set either way, it fixes the way for every call",
    },
    Variable {
        name: "TESSERA_DIRECT_SPLIT",
        kind: Kind::Switch,
        default: "from 1 MiB (too large for the receiver's cache to keep anyway), and a 2-rank reduce's one message from 256 KiB",
        meaning: "a message of 32 KiB or more read directly is copied half by the receiver and half by the sender, which would otherwise only wait for the read; the call is faster, but the sender's half then sits in the sender's cache, which a receiver reading the data soon pays for; `off`: never",
    },
    Variable {
        name: "TESSERA_MPI_BYPASS",
        kind: Kind::Switch,
        default: "on",
        meaning: "on the mpi conduit, ranks of one host reach each other through shared memory",
    },
    Variable {
        name: "TESSERA_MPI_PROGRESS",
        kind: Kind::Count,
        default: "0 (none)",
        meaning: "mpi conduit: microseconds between the polls of a progress thread",
    },
    Variable {
        name: "TESSERA_LAUNCHER",
        kind: Kind::Choice(&["mpirun", "srun"]),
        default: "`srun` inside a Slurm allocation, else `mpirun`",
        meaning: "what starts the ranks of `--conduit mpi` (`--launcher`)",
    },
    Variable {
        name: "TESSERA_MPIRUN",
        kind: Kind::Text,
        default: "`mpirun`",
        meaning: "the mpirun that `--conduit mpi` calls",
    },
    Variable {
        name: "TESSERA_MPIRUN_ARGS",
        kind: Kind::Text,
        default: "",
        meaning: "extra arguments for that mpirun, or for srun (a host file, for instance)",
    },
    Variable {
        name: "TESSERA_SIMD",
        kind: Kind::Choice(&["avx512", "avx2", "scalar", "native"]),
        default: "the best the CPU has",
        meaning: "NPB kernels: the vector level of their hot loops",
    },
    Variable {
        name: "TESSERA_MG_FUSED",
        kind: Kind::Count,
        default: "2097152 (2 MiB)",
        meaning: "NPB MG: bytes of planes the top level's one sweep up holds at a time; 0 goes stage by stage (a measuring aid)",
    },
    Variable {
        name: "TESSERA_MG_GRID",
        kind: Kind::Choice(&["auto", "npb"]),
        default: "auto",
        meaning: "NPB MG: the process grid; auto keeps x whole up to 16 ranks, npb takes NPB's at every rank count (a measuring aid)",
    },
    Variable {
        name: "TESSERA_NPB_PROGRESS",
        kind: Kind::SecondsOrZero,
        default: "30",
        meaning: "NPB kernels: seconds after which rank 0 reports progress per iteration (0: from the start)",
    },
    Variable {
        name: "TESSERA_BIN",
        kind: Kind::Text,
        default: "`target/release/tessera`",
        meaning: "the scripts in `scripts/`: the tessera executable they run",
    },
    Variable {
        name: "TESSERA_CONDUIT",
        kind: Kind::Launcher,
        default: "",
        meaning: "`smp`, `threads` or `mpi` (a program started by mpirun picks `mpi` by itself)",
    },
    Variable {
        name: "TESSERA_RANKS",
        kind: Kind::Launcher,
        default: "",
        meaning: "number of ranks in the job",
    },
    Variable {
        name: "TESSERA_RANK",
        kind: Kind::Launcher,
        default: "",
        meaning: "this process's rank (`smp` only)",
    },
    Variable {
        name: "TESSERA_JOB_ID",
        kind: Kind::Launcher,
        default: "",
        meaning: "random job id naming shared-memory objects where names are used",
    },
    Variable {
        name: "TESSERA_STATS_DIR",
        kind: Kind::Launcher,
        default: "",
        meaning: "the launcher's private directory where each rank leaves its statistics for the launcher to merge into `TESSERA_STATS`'s file",
    },
    Variable {
        name: "TESSERA_JOB_FD",
        kind: Kind::Launcher,
        default: "",
        meaning: "descriptor of the job's private shared memory: the status board and, for `smp`, every rank's region",
    },
];

/// The prefix of the variables that force a collective algorithm, one per operation
/// (checked by the team layer, which knows the operations and algorithms).
pub const COLL_PREFIX: &str = "TESSERA_COLL_";

/// The `TESSERA_COLL_<OP>` variables set (not empty), by name: `(operation, value)`, the
/// operation as written after the prefix (the team layer checks it).
///
/// ```
/// // A doctest's environment forces no algorithm.
/// assert!(tessera::config::forced_algorithms().is_empty());
/// ```
pub fn forced_algorithms() -> Vec<(String, String)> {
    let mut set: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(n, v)| {
            let op = n.to_str()?.strip_prefix(COLL_PREFIX)?.to_string();
            Some((op, v.into_string().ok()?))
        })
        .filter(|(_, v)| !v.is_empty())
        .collect();
    set.sort();
    set
}

/// Longest duration any variable or option accepts: ten years. Longer ones are refused
/// rather than overflowing a deadline.
const MAX_SECONDS: f64 = 10.0 * 365.0 * 86_400.0;

/// The value of `var`, or `None` when it is unset, empty or not valid Unicode text.
pub fn text(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.is_empty())
}

fn bad(var: &'static str, value: &str, why: impl Into<String>) -> JobError {
    JobError::BadEnv {
        var,
        value: value.to_string(),
        why: why.into(),
    }
}

/// A positive number of seconds (`30`, `0.5`, `1e3`), refusing negative, zero, NaN,
/// infinite and over-long values. Shared by the variables and `--timeout`.
///
/// ```
/// use std::time::Duration;
/// use tessera::config::parse_seconds;
/// assert_eq!(parse_seconds("0.5").unwrap(), Duration::from_millis(500));
/// for bad in ["-1", "NaN", "inf", "1e20", "0", "soon"] {
///     assert!(parse_seconds(bad).is_err(), "{bad}");
/// }
/// ```
pub fn parse_seconds(value: &str) -> Result<Duration, BadValue> {
    let bad = |message| BadValue::new("seconds", value, message);
    let seconds: f64 = value.trim().parse().map_err(|_| {
        bad(format!(
            "{value:?} is not a number of seconds (e.g. 30 or 0.5)"
        ))
    })?;
    if !seconds.is_finite() || seconds <= 0.0 {
        return Err(bad(format!(
            "{value:?}: a duration must be a positive, finite number of seconds"
        )));
    }
    if seconds > MAX_SECONDS {
        return Err(bad(format!(
            "{value:?}: at most {MAX_SECONDS} seconds (ten years) is accepted"
        )));
    }
    Duration::try_from_secs_f64(seconds).map_err(|e| bad(format!("{value:?}: {e}")))
}

/// A duration in seconds from `var`.
pub fn seconds(var: &'static str) -> Result<Option<Duration>, JobError> {
    match text(var) {
        None => Ok(None),
        Some(value) => parse_seconds(&value)
            .map(Some)
            .map_err(|why| bad(var, &value, why.message)),
    }
}

/// A limit that can be switched off: a number of seconds or `off`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// No limit.
    Off,
    /// This long.
    After(Duration),
}

/// A duration in seconds from `var`, or `off`/`none` for no limit. `0` is refused (it would
/// make every wait fail at once) with a pointer to `off`.
pub fn limit(var: &'static str) -> Result<Option<Limit>, JobError> {
    let Some(value) = text(var) else {
        return Ok(None);
    };
    let lower = value.trim().to_ascii_lowercase();
    if lower == "off" || lower == "none" {
        return Ok(Some(Limit::Off));
    }
    if lower.parse::<f64>() == Ok(0.0) {
        return Err(bad(
            var,
            &value,
            "0 seconds would fail every wait at once; give a positive number of seconds, or `off` for no limit",
        ));
    }
    parse_seconds(&value)
        .map(|d| Some(Limit::After(d)))
        .map_err(|why| bad(var, &value, format!("{why}; or `off` for no limit")))
}

/// Parse a switch: `1/0`, `true/false`, `yes/no`, `on/off`, any case.
///
/// ```
/// use tessera::config::parse_switch;
/// assert_eq!(parse_switch("Yes"), Some(true));
/// assert_eq!(parse_switch("false"), Some(false));
/// assert_eq!(parse_switch("maybe"), None);
/// ```
pub fn parse_switch(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// A switch from `var`.
pub fn switch(var: &'static str) -> Result<Option<bool>, JobError> {
    match text(var) {
        None => Ok(None),
        Some(value) => parse_switch(&value).map(Some).ok_or_else(|| {
            bad(
                var,
                &value,
                "a switch takes 1/0, true/false, yes/no or on/off",
            )
        }),
    }
}

/// A size (`4096`, `64K`, `512M`, `2G`) from `var`.
pub fn size(var: &'static str) -> Result<Option<usize>, JobError> {
    match text(var) {
        None => Ok(None),
        Some(value) => parse_size(&value)
            .map(Some)
            .map_err(|e| bad(var, &value, e.to_string())),
    }
}

/// Largest active-message queue accepted (bytes per sender and class).
pub const MAX_AM_QUEUE: usize = 256 << 20;

/// `TESSERA_AM_QUEUE`: a size of at most [`MAX_AM_QUEUE`].
pub fn am_queue() -> Result<Option<usize>, JobError> {
    let queue = size("TESSERA_AM_QUEUE")?;
    if let Some(q) = queue.filter(|&q| q > MAX_AM_QUEUE) {
        return Err(bad(
            "TESSERA_AM_QUEUE",
            &text("TESSERA_AM_QUEUE").unwrap_or_default(),
            format!(
                "{q} bytes per queue is more than the {} MiB allowed (each rank keeps two queues per peer; the default is 64K)",
                MAX_AM_QUEUE >> 20
            ),
        ));
    }
    Ok(queue)
}

/// A whole number from `var`; `what` says what is expected.
pub fn number<T: std::str::FromStr>(var: &'static str, what: &str) -> Result<Option<T>, JobError> {
    match text(var) {
        None => Ok(None),
        Some(value) => value
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| bad(var, &value, what)),
    }
}

/// The value of one of the variables that are parsed where they are used (`TESSERA_TUNING`,
/// `TESSERA_COLL_<OP>`, the ones outside Tessera's table that the library consults: an MPI
/// launcher's and Slurm's, `HOME` and `XDG_CONFIG_HOME`, OpenSHMEM's heap size), with the
/// same "empty is unset" rule.
///
/// ```
/// assert!(tessera::config::raw("TESSERA_SURELY_NOT_SET_ANYWHERE").is_none());
/// ```
pub fn raw(var: &str) -> Option<std::ffi::OsString> {
    std::env::var_os(var).filter(|v| !v.is_empty())
}

/// The names of every variable set in this process's environment (what the mpi launcher
/// forwards to the ranks it starts).
///
/// ```
/// assert!(tessera::config::names_set().all(|name| std::env::var_os(&name).is_some()));
/// ```
pub fn names_set() -> impl Iterator<Item = std::ffi::OsString> {
    std::env::vars_os().map(|(name, _)| name)
}

/// Largest settings file (a tuning table) read: far above any table `tessera tune` writes.
pub const MAX_SETTINGS_FILE: u64 = 16 << 20;

/// Read a small text file that a variable names (a tuning table): it must be a regular
/// file of at most [`MAX_SETTINGS_FILE`] bytes. It is opened without blocking, so a FIFO
/// or a device is refused by name instead of hanging or reading without end.
///
/// ```
/// use tessera::config::read_settings_file;
/// let e = read_settings_file(std::path::Path::new("/dev/zero")).unwrap_err();
/// assert!(e.to_string().contains("not a regular file"), "{e}");
/// ```
pub fn read_settings_file(path: &std::path::Path) -> Result<String, BadValue> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let given = path.display().to_string();
    let bad = |message| BadValue::new("settings file", &given, message);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| bad(e.to_string()))?;
    let meta = file.metadata().map_err(|e| bad(e.to_string()))?;
    if !meta.is_file() {
        return Err(bad("not a regular file (a FIFO, device or directory cannot be a settings file); name a file `tessera tune` wrote".into()));
    }
    if meta.len() > MAX_SETTINGS_FILE {
        return Err(bad(format!(
            "{} bytes is more than the {} MiB a settings file may have",
            meta.len(),
            MAX_SETTINGS_FILE >> 20
        )));
    }
    let mut text = String::new();
    file.take(MAX_SETTINGS_FILE + 1)
        .read_to_string(&mut text)
        .map_err(|e| bad(e.to_string()))?;
    if text.len() as u64 > MAX_SETTINGS_FILE {
        return Err(bad(format!(
            "longer than the {} MiB a settings file may have",
            MAX_SETTINGS_FILE >> 20
        )));
    }
    Ok(text)
}

/// Every `TESSERA_*` variable in the environment is one of [`VARIABLES`] (or a
/// `TESSERA_COLL_<OP>`, which the team layer checks) and holds Unicode text: a misspelt
/// name or an unreadable value is refused by name instead of silently doing nothing.
///
/// ```
/// // The environment of a doctest carries no misspelt Tessera variable.
/// tessera::config::check_names().unwrap();
/// ```
pub fn check_names() -> Result<(), JobError> {
    use std::os::unix::ffi::OsStrExt;
    let mut vars: Vec<_> = std::env::vars_os().collect();
    vars.sort();
    for (name, value) in vars {
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with("TESSERA_") {
            continue;
        }
        let known = VARIABLES
            .iter()
            .find(|v| v.name == name)
            .map(|v| v.name)
            .or_else(|| name.starts_with(COLL_PREFIX).then_some("TESSERA_COLL_<OP>"));
        let Some(known) = known else {
            let closest = VARIABLES
                .iter()
                .filter(|v| !v.name.contains('<'))
                .map(|v| (edit_distance(name, v.name), v.name))
                .min()
                .filter(|&(d, _)| d <= 3)
                .map(|(_, n)| format!("; did you mean {n}?"))
                .unwrap_or_default();
            return Err(JobError::UnknownVariable {
                name: name.to_string(),
                hint: closest,
            });
        };
        if value.to_str().is_none() {
            return Err(JobError::BadEnv {
                var: known,
                value: String::from_utf8_lossy(value.as_bytes()).into_owned(),
                why: format!("{name}'s value is not valid UTF-8 text; give it in plain text"),
            });
        }
    }
    Ok(())
}

/// Levenshtein distance between two short names: how a misspelt name finds the closest
/// known one.
///
/// ```
/// assert_eq!(tessera::config::edit_distance("--timout", "--timeout"), 1);
/// ```
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (diagonal + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// A number of seconds from `var`, 0 included (`TESSERA_NPB_PROGRESS`): 0, or what
/// [`parse_seconds`] accepts.
pub fn seconds_or_zero(var: &'static str) -> Result<Option<f64>, JobError> {
    match text(var) {
        None => Ok(None),
        Some(value) if value.trim().parse::<f64>() == Ok(0.0) => Ok(Some(0.0)),
        Some(value) => parse_seconds(&value)
            .map(|d| Some(d.as_secs_f64()))
            .map_err(|why| bad(var, &value, format!("{why}; or 0"))),
    }
}

/// One of `words` from `var` (any case; returned in lower case).
pub fn choice(var: &'static str, words: &[&str]) -> Result<Option<String>, JobError> {
    let Some(value) = text(var) else {
        return Ok(None);
    };
    let lower = value.trim().to_ascii_lowercase();
    if words.contains(&lower.as_str()) {
        return Ok(Some(lower));
    }
    Err(bad(var, &value, format!("one of {}", words.join(", "))))
}

/// Check the value of `var` by its kind: `Ok(None)` when unset, its text when it parses,
/// the refusal naming the variable otherwise. Free text, the launcher's variables and the
/// `TESSERA_COLL_<OP>` family (the team layer's) are only read here.
///
/// ```
/// use tessera::config::{check_variable, VARIABLES};
/// let segment = VARIABLES.iter().find(|v| v.name == "TESSERA_SEGMENT").unwrap();
/// assert!(check_variable(segment).is_ok());
/// ```
pub fn check_variable(var: &'static Variable) -> Result<Option<String>, JobError> {
    let name = var.name;
    if name.contains('<') {
        return Ok(None);
    }
    match var.kind {
        Kind::Size if name == "TESSERA_AM_QUEUE" => am_queue().map(drop)?,
        Kind::Size => size(name).map(drop)?,
        Kind::Seconds => seconds(name).map(drop)?,
        Kind::Limit => limit(name).map(drop)?,
        Kind::SecondsOrZero => seconds_or_zero(name).map(drop)?,
        Kind::Count => {
            number::<u64>(name, &format!("a whole number: {}", var.meaning)).map(drop)?
        }
        Kind::Switch => switch(name).map(drop)?,
        Kind::Choice(words) => choice(name, words).map(drop)?,
        Kind::Text | Kind::Launcher => {}
    }
    Ok(text(name))
}

/// Parse every variable a user may set, so that a launcher can refuse a bad value once,
/// before starting any rank, instead of every rank failing with the same message.
pub fn check_user_settings() -> Result<(), JobError> {
    check_names()?;
    for var in VARIABLES.iter().filter(|v| v.kind != Kind::Launcher) {
        check_variable(var)?;
    }
    Ok(())
}

/// One setting as `tessera config` shows it.
#[derive(Clone, Debug)]
pub struct Setting {
    /// The variable's name (for `TESSERA_COLL_<OP>`, the name set, if any).
    pub name: String,
    /// Its entry in [`VARIABLES`].
    pub variable: &'static Variable,
    /// Its value in the environment, if set (and not empty).
    pub value: Option<String>,
    /// Why the value is refused, if it is.
    pub problem: Option<String>,
}

impl Setting {
    /// Where the value in force comes from: `environment`, `default` or `launcher`.
    pub fn source(&self) -> &'static str {
        match (&self.value, self.variable.kind) {
            (Some(_), _) => "environment",
            (None, Kind::Launcher) => "launcher",
            (None, _) => "default",
        }
    }
}

/// Every variable of [`VARIABLES`] with its value in this process's environment and
/// whether it is accepted; a set `TESSERA_COLL_<OP>` shows under its own name.
///
/// ```
/// let all = tessera::config::settings();
/// assert!(all.iter().any(|s| s.name == "TESSERA_SEGMENT"));
/// ```
pub fn settings() -> Vec<Setting> {
    let mut out = Vec::new();
    for var in VARIABLES {
        if var.name.contains('<') {
            let set = forced_algorithms();
            if set.is_empty() {
                out.push(Setting {
                    name: var.name.to_string(),
                    variable: var,
                    value: None,
                    problem: None,
                });
            }
            for (op, value) in set {
                out.push(Setting {
                    name: format!("{COLL_PREFIX}{op}"),
                    variable: var,
                    value: Some(value),
                    problem: None,
                });
            }
            continue;
        }
        let problem = check_variable(var).err().map(|e| e.to_string());
        out.push(Setting {
            name: var.name.to_string(),
            variable: var,
            value: raw(var.name).map(|v| v.to_string_lossy().into_owned()),
            problem,
        });
    }
    out
}

/// The README's table of every variable, generated from [`VARIABLES`] (`tessera config
/// --markdown` prints it; a test keeps the README's copy the same).
pub fn markdown_table() -> String {
    let mut t = String::from("| variable | kind | default | meaning |\n|---|---|---|---|\n");
    for v in VARIABLES {
        t.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            v.name,
            v.kind.describe(),
            v.default,
            v.meaning
        ));
    }
    t
}

/// Parse a size such as `4096`, `64K`, `512M`, `2G` or `1T` (binary multiples).
///
/// ```
/// assert_eq!(tessera::config::parse_size("512M").unwrap(), 512 << 20);
/// assert!(tessera::config::parse_size("lots").is_err());
/// ```
pub fn parse_size(text: &str) -> Result<usize, JobError> {
    let t = text.trim();
    let (digits, shift) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return Err(JobError::BadSize(text.into())),
            };
            (&t[..i], shift)
        }
        _ => (t, 0),
    };
    let n: usize = digits
        .trim()
        .parse()
        .map_err(|_| JobError::BadSize(text.into()))?;
    if n == 0 {
        return Err(JobError::SizeOutOfRange {
            text: text.into(),
            why: "too small: a size must be positive (e.g. 64M)",
        });
    }
    n.checked_shl(shift)
        .filter(|v| v >> shift == n)
        .ok_or_else(|| JobError::SizeOutOfRange {
            text: text.into(),
            why: "too large for this machine's addresses",
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_refuse_every_degenerate_value() {
        for value in [
            "-1", "NaN", "nan", "inf", "-inf", "1e20", "0", "-0", "", "  ", "5x",
        ] {
            assert!(parse_seconds(value).is_err(), "{value:?} accepted");
        }
        assert_eq!(parse_seconds(" 2 ").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_seconds("1e3").unwrap(), Duration::from_secs(1000));
    }

    #[test]
    fn switches_accept_the_usual_spellings_only() {
        for on in ["1", "true", "TRUE", "yes", "On"] {
            assert_eq!(parse_switch(on), Some(true), "{on}");
        }
        for off in ["0", "false", "No", "off"] {
            assert_eq!(parse_switch(off), Some(false), "{off}");
        }
        for bad in ["2", "enable", "y", ""] {
            assert_eq!(parse_switch(bad), None, "{bad}");
        }
    }
}
