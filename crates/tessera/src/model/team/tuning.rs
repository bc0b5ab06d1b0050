//! Tuning tables: which collective algorithm to use for an operation, a team size and a
//! message size, as measured on this machine by `tessera tune`.
//!
//! A table is a JSON file meant to be read and edited by people:
//!
//! ```json
//! { "machine": "…", "entries": [
//!   { "op": "allreduce", "team_size": 2,
//!     "rules": [ { "up_to_bytes": 22627, "algorithm": "recursive_doubling" },
//!                { "up_to_bytes": null,  "algorithm": "ring" } ] } ] }
//! ```
//!
//! For a call, the entry of the operation with the nearest measured team size applies
//! (the smaller on a tie), and in it the first rule whose `up_to_bytes` is at least the
//! message size (`null`: no bound). With no entry for the operation the model
//! ([`default_algorithm`](crate::model::team::default_algorithm)) decides, as it does with
//! no table at all.
//!
//! Where the table comes from: the file named by `TESSERA_TUNING`, else
//! `$XDG_CONFIG_HOME/tessera/tuning.json` (or `~/.config/tessera/tuning.json`) if it
//! exists, which is where `tessera tune` writes by default. Where no table exists, teams
//! tune online instead (`crate::model::team` module docs); `TESSERA_TUNING=online` tunes
//! online even where a default table exists (trying only what the table leaves), and
//! `TESSERA_TUNING=none` turns tables and online tuning off (the model alone, the same
//! choice in every run). A table that cannot be read or names an unknown operation or algorithm is
//! an error when the first team is created, naming the file and the problem. Forcing an
//! algorithm (`TESSERA_COLL_<OP>`, [`Team::with_algorithm`](crate::Team::with_algorithm))
//! overrides the table.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::registry::{check_supported, Algorithm, Collective};
use crate::error::CoreError;
use crate::Result;

/// One size rule.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Rule {
    /// Largest message (bytes per member's contribution) the rule covers; `None`: any.
    pub up_to_bytes: Option<u64>,
    /// The algorithm's name (as `TESSERA_COLL_<OP>` takes it).
    pub algorithm: String,
}

/// The rules of one operation at one team size.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Entry {
    /// The operation's name (`allreduce`, `broadcast`, ...).
    pub op: String,
    /// The team size the rules were measured at.
    pub team_size: usize,
    /// In increasing order of `up_to_bytes`.
    pub rules: Vec<Rule>,
}

/// A tuning table; see the [module documentation](self).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TuningTable {
    /// Where it was measured (free text).
    #[serde(default)]
    pub machine: String,
    /// The measured rules, per operation and team size.
    pub entries: Vec<Entry>,
}

impl TuningTable {
    /// Read and check a table.
    pub fn load(path: &Path) -> Result<TuningTable> {
        let fail = |why: String| -> crate::Error {
            CoreError::BadArgument {
                call: "TuningTable::load",
                argument: "path",
                why: format!(
                    "tuning table {}: {why} (rerun `tessera tune`, or set TESSERA_TUNING=none)",
                    path.display()
                ),
            }
            .into()
        };
        let text = crate::config::read_settings_file(path).map_err(|e| fail(e.message))?;
        let table: TuningTable = serde_json::from_str(&text).map_err(|e| fail(e.to_string()))?;
        table.check().map_err(|e| fail(e.to_string()))?;
        Ok(table)
    }

    /// Every operation and algorithm name is known and the algorithm implements the
    /// operation.
    pub fn check(&self) -> Result<()> {
        for e in &self.entries {
            let op = operation(&e.op)?;
            for r in &e.rules {
                let alg: Algorithm = r.algorithm.parse()?;
                check_supported(op, alg)?;
            }
        }
        Ok(())
    }

    /// The algorithm for `op` on a team of `team_size` with `bytes`-byte messages, if the
    /// table has an entry for `op`.
    ///
    /// ```
    /// use tessera::model::tuning::{Entry, Rule, TuningTable};
    /// use tessera::{Algorithm, Collective};
    /// let table = TuningTable {
    ///     machine: String::new(),
    ///     entries: vec![Entry {
    ///         op: "allreduce".into(),
    ///         team_size: 4,
    ///         rules: vec![
    ///             Rule { up_to_bytes: Some(4096), algorithm: "recursive_doubling".into() },
    ///             Rule { up_to_bytes: None, algorithm: "ring".into() },
    ///         ],
    ///     }],
    /// };
    /// assert_eq!(table.lookup(Collective::Allreduce, 3, 8), Some(Algorithm::RECURSIVE_DOUBLING));
    /// assert_eq!(table.lookup(Collective::Allreduce, 8, 1 << 20), Some(Algorithm::RING));
    /// assert_eq!(table.lookup(Collective::Broadcast, 4, 8), None);
    /// ```
    pub fn lookup(&self, op: Collective, team_size: usize, bytes: usize) -> Option<Algorithm> {
        rule_for(&self.rules_for(op, team_size)?, bytes)
    }

    /// The rules for `op` on a team of `team_size` (the entry of the nearest team size),
    /// parsed: (largest message in bytes, algorithm) in order, the last applying beyond.
    /// Teams resolve these once, so a call's choice is a short scan.
    pub(crate) fn rules_for(&self, op: Collective, team_size: usize) -> Option<Rules> {
        let entry = self
            .entries
            .iter()
            .filter(|e| e.op == op.name())
            .min_by_key(|e| (e.team_size.abs_diff(team_size), e.team_size))?;
        Some(
            entry
                .rules
                .iter()
                .filter_map(|r| Some((r.up_to_bytes, r.algorithm.parse().ok()?)))
                .collect(),
        )
    }
}

/// Parsed rules of one operation for one team size (see [`TuningTable::rules_for`]).
pub(crate) type Rules = Vec<(Option<u64>, Algorithm)>;

/// The algorithm `rules` give for `bytes`-byte messages.
pub(crate) fn rule_for(rules: &[(Option<u64>, Algorithm)], bytes: usize) -> Option<Algorithm> {
    rules
        .iter()
        .find(|(up_to, _)| up_to.is_none_or(|b| bytes as u64 <= b))
        .or(rules.last())
        .map(|&(_, alg)| alg)
}

fn operation(name: &str) -> std::result::Result<Collective, crate::BadValue> {
    Collective::ALL
        .into_iter()
        .find(|c| c.name() == name)
        .ok_or_else(|| {
            crate::BadValue::new(
                "collective operation",
                name,
                format!("unknown collective operation {name:?}"),
            )
        })
}

/// Where `tessera tune` writes by default and where tables are looked for without
/// `TESSERA_TUNING`.
pub fn default_path() -> Option<PathBuf> {
    let config = crate::config::raw("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| crate::config::raw("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(config.join("tessera").join("tuning.json"))
}

/// How this process chooses algorithms (read once from `TESSERA_TUNING`).
#[derive(Clone, Copy)]
pub(crate) struct InForce {
    /// The tuning table, if one is in force.
    pub(crate) table: Option<&'static TuningTable>,
    /// Whether teams tune online ([`super::online`]).
    pub(crate) online: bool,
    /// Whether online tuning was asked for (`TESSERA_TUNING=online`) rather than the
    /// default where no table exists: only the default gives way to the model where a
    /// host's ranks outnumber its processors (see `Team::world`).
    pub(crate) online_asked: bool,
}

/// The tuning in force for this process: `TESSERA_TUNING=none`: the model alone;
/// `=online`: online tuning, narrowed by the default table if it exists; `=FILE`: that
/// table; unset: the default table if it exists, else online tuning (except on teams
/// whose hosts have more ranks than processors, which keep the model: `Team::world`).
pub(crate) fn in_force() -> Result<InForce> {
    // (table, online, online asked for)
    type Loaded = std::result::Result<(Option<TuningTable>, bool, bool), crate::BadValue>;
    static TABLE: OnceLock<Loaded> = OnceLock::new();
    let loaded = TABLE.get_or_init(|| {
        let load = |path: &Path| {
            TuningTable::load(path).map_err(|e| {
                crate::BadValue::new("tuning table", &path.display().to_string(), e.to_string())
            })
        };
        let default_table = || default_path().filter(|p| p.exists());
        match crate::config::raw("TESSERA_TUNING") {
            Some(v) if v == "none" => Ok((None, false, false)),
            Some(v) if v == "online" => {
                Ok((default_table().map(|p| load(&p)).transpose()?, true, true))
            }
            Some(v) => Ok((Some(load(Path::new(&v))?), false, false)),
            None => match default_table() {
                Some(p) => Ok((Some(load(&p)?), false, false)),
                None => Ok((None, true, false)),
            },
        }
    });
    match loaded {
        Ok((table, online, online_asked)) => Ok(InForce {
            table: table.as_ref(),
            online: *online,
            online_asked: *online_asked,
        }),
        Err(bad) => Err(bad.clone().into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_tables_are_named() {
        let dir = std::env::temp_dir().join(format!("tessera-tuning-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (text, expect) in [
            ("{", "EOF while parsing"),
            (
                r#"{"entries":[{"op":"allsort","team_size":2,"rules":[]}]}"#,
                "unknown collective operation \"allsort\"",
            ),
            (
                r#"{"entries":[{"op":"gather","team_size":2,"rules":[{"up_to_bytes":null,"algorithm":"ring"}]}]}"#,
                "ring",
            ),
        ] {
            let path = dir.join("t.json");
            std::fs::write(&path, text).unwrap();
            let e = TuningTable::load(&path).unwrap_err().to_string();
            assert!(e.contains(expect) && e.contains("t.json"), "{e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_nearest_team_size_and_first_covering_rule_apply() {
        let rule = |b: Option<u64>, a: &str| Rule {
            up_to_bytes: b,
            algorithm: a.into(),
        };
        let table = TuningTable {
            machine: String::new(),
            entries: vec![
                Entry {
                    op: "broadcast".into(),
                    team_size: 2,
                    rules: vec![rule(Some(100), "flat"), rule(None, "binomial")],
                },
                Entry {
                    op: "broadcast".into(),
                    team_size: 8,
                    rules: vec![rule(Some(100), "knomial4"), rule(Some(1000), "chain")],
                },
            ],
        };
        let b = Collective::Broadcast;
        assert_eq!(table.lookup(b, 2, 100), Some(Algorithm::FLAT));
        assert_eq!(table.lookup(b, 3, 101), Some(Algorithm::BINOMIAL));
        assert_eq!(table.lookup(b, 5, 8), Some(Algorithm::FLAT)); // tie: the smaller size
        assert_eq!(table.lookup(b, 6, 8), Some(Algorithm::knomial(4)));
        // Past the last bound, the last rule.
        assert_eq!(table.lookup(b, 8, 1 << 20), Some(Algorithm::CHAIN));
    }
}
