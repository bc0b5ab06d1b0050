//! Calibrations: the cost model's machine parameters as measured on this host by
//! `tessera tune --calibrate`, per team size.
//!
//! A calibration is a JSON file meant to be read by people:
//!
//! ```json
//! { "machine": "Intel(R) Xeon(R) Processor, 16 cores",
//!   "entries": [ { "team_size": 16, "crowded": false,
//!                  "direct_reads": true,
//!                  "params": { "round_us": 0.54, "tree_round_us": 0.31, ... } } ] }
//! ```
//!
//! A team takes the entry of the nearest team size (the smaller on a tie) among those
//! measured in its own regime (`crowded`: some host runs more ranks than it has
//! processors), and where the file has none for that regime, the built-in parameters
//! ([`MachineParams::built_in`]). The world team also takes the entry's `direct_reads`:
//! whether long messages between ranks of one host are read straight from the sender
//! (`core::direct`) or go through the mailbox, whichever the calibration measured faster
//! (an entry without it, or no entry, reads directly; `TESSERA_DIRECT` overrides both). A
//! team that tunes online takes that as its first candidate only, and tries the other way
//! too for calls above [`DIRECT_FROM`](super::DIRECT_FROM) bytes.
//!
//! Where the file comes from: the one `TESSERA_CALIBRATION` names, else
//! `$XDG_CONFIG_HOME/tessera/calibration.json` (or `~/.config/tessera/calibration.json`)
//! if it exists, which is where `tessera tune --calibrate` writes by default;
//! `TESSERA_CALIBRATION=none` keeps the built-in parameters. A file that cannot be read,
//! or holds a parameter that is not a positive number, is an error when the first team is
//! made, naming the file and the problem.
//!
//! This module must never measure: it reads, checks and looks up.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::cost::MachineParams;
use crate::error::CoreError;
use crate::Result;

/// The parameters measured at one team size.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CalibrationEntry {
    /// The team size they were measured at.
    pub team_size: usize,
    /// Whether that team's host ran more ranks than it has processors.
    pub crowded: bool,
    /// Whether long messages are read straight from their sender (`core::direct`): the
    /// calibration measured that faster than the mailbox, or could not compare the two
    /// (absent: true). The parameters are those measured that way.
    #[serde(default = "reads_directly_unless_measured")]
    pub direct_reads: bool,
    /// The parameters.
    pub params: MachineParams,
}

/// What an entry without `direct_reads` means: long messages are read directly, as they
/// are without a calibration.
fn reads_directly_unless_measured() -> bool {
    true
}

/// A calibration file; see the [module documentation](self).
///
/// ```
/// use tessera::model::team::{Calibration, CalibrationEntry, MachineParams};
/// let mut cal = Calibration::default();
/// let entry = |team_size, crowded, direct_reads, params| CalibrationEntry {
///     team_size, crowded, direct_reads, params,
/// };
/// cal.insert(entry(16, false, true, MachineParams::DEDICATED));
/// cal.insert(entry(4, true, false, MachineParams::CROWDED));
/// assert_eq!(cal.params_for(12, false), MachineParams::DEDICATED);
/// assert_eq!(cal.params_for(8, true), MachineParams::CROWDED);
/// assert!(!cal.direct_reads_for(8, true) && cal.direct_reads_for(2, false));
/// ```
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Calibration {
    /// Where it was measured (free text).
    #[serde(default)]
    pub machine: String,
    /// The measured parameters, per team size and regime.
    pub entries: Vec<CalibrationEntry>,
}

impl Calibration {
    /// Read and check a calibration.
    pub fn load(path: &Path) -> Result<Calibration> {
        let fail = |why: String| -> crate::Error {
            CoreError::BadArgument { call: "Calibration::load", argument: "path", why: format!(
                "calibration {}: {why} (rerun `tessera tune --calibrate`, or set TESSERA_CALIBRATION=none)",
                path.display()
            ) }
            .into()
        };
        let text = crate::config::read_settings_file(path).map_err(|e| fail(e.message))?;
        let cal: Calibration = serde_json::from_str(&text).map_err(|e| fail(e.to_string()))?;
        for e in &cal.entries {
            e.params
                .check()
                .map_err(|why| fail(format!("team size {}: {why}", e.team_size)))?;
        }
        Ok(cal)
    }

    /// Add `entry`, replacing one of the same team size and regime.
    pub fn insert(&mut self, entry: CalibrationEntry) {
        self.entries
            .retain(|e| (e.team_size, e.crowded) != (entry.team_size, entry.crowded));
        self.entries.push(entry);
        self.entries.sort_by_key(|e| (e.crowded, e.team_size));
    }

    /// The parameters for a team of `team_size` in the `crowded` regime: the nearest
    /// measured size of that regime (the smaller on a tie), else the built-in set.
    pub fn params_for(&self, team_size: usize, crowded: bool) -> MachineParams {
        self.nearest(team_size, crowded)
            .map_or(MachineParams::built_in(crowded), |e| e.params)
    }

    /// Whether a team of `team_size` in the `crowded` regime reads long messages directly:
    /// as the entry [`Calibration::params_for`] takes says, else yes.
    pub fn direct_reads_for(&self, team_size: usize, crowded: bool) -> bool {
        self.nearest(team_size, crowded)
            .is_none_or(|e| e.direct_reads)
    }

    /// The entry of the nearest measured size in the `crowded` regime (the smaller on a
    /// tie).
    fn nearest(&self, team_size: usize, crowded: bool) -> Option<&CalibrationEntry> {
        self.entries
            .iter()
            .filter(|e| e.crowded == crowded)
            .min_by_key(|e| (e.team_size.abs_diff(team_size), e.team_size))
    }
}

/// Where `tessera tune --calibrate` writes by default and where a calibration is looked
/// for without `TESSERA_CALIBRATION`.
pub fn default_path() -> Option<PathBuf> {
    super::tuning::default_path().map(|p| p.with_file_name("calibration.json"))
}

/// The file of the calibration in force: the one `TESSERA_CALIBRATION` names, else the
/// default location where a calibration exists there; `None` for the built-in parameters
/// (`TESSERA_CALIBRATION=none`, or no file).
///
/// ```
/// std::env::set_var("TESSERA_CALIBRATION", "none");
/// assert_eq!(tessera::model::team::calibration::path_in_force(), None);
/// ```
pub fn path_in_force() -> Option<PathBuf> {
    match crate::config::raw("TESSERA_CALIBRATION") {
        Some(v) if v == "none" => None,
        Some(v) => Some(PathBuf::from(v)),
        None => default_path().filter(|p| p.exists()),
    }
}

/// The calibration in force for this process (read once): `None` for the built-in
/// parameters. It finds the file by [`path_in_force`]'s rule, written out here: the body
/// calling it moved the collectives' code so that 8-byte allgathers, allreduces and
/// all-to-alls at 2 ranks ran 1.14–1.21× slower on a Zen 2 (`compare-coll.py`, three
/// rounds), a placement effect this form does not have.
pub(crate) fn in_force() -> Result<Option<&'static Calibration>> {
    static LOADED: OnceLock<std::result::Result<Option<Calibration>, crate::BadValue>> =
        OnceLock::new();
    let loaded = LOADED.get_or_init(|| {
        let load = |path: &Path| {
            Calibration::load(path).map_err(|e| {
                crate::BadValue::new("calibration", &path.display().to_string(), e.to_string())
            })
        };
        match crate::config::raw("TESSERA_CALIBRATION") {
            Some(v) if v == "none" => Ok(None),
            Some(v) => load(Path::new(&v)).map(Some),
            None => default_path()
                .filter(|p| p.exists())
                .map(|p| load(&p))
                .transpose(),
        }
    });
    match loaded {
        Ok(cal) => Ok(cal.as_ref()),
        Err(bad) => Err(bad.clone().into()),
    }
}

/// Whether a team of `team_size` in the `crowded` regime reads long messages directly by
/// the calibration in force (without one, yes).
pub(crate) fn direct_reads_for(team_size: usize, crowded: bool) -> Result<bool> {
    Ok(in_force()?.is_none_or(|cal| cal.direct_reads_for(team_size, crowded)))
}

/// The parameters a team of `team_size` in the `crowded` regime uses: where crowded, with
/// this host's processors as the ones its members share (`MachineParams::cores`; a team
/// over several hosts counts its members as if on one, as simulated hosts on one machine
/// are), else none.
pub(crate) fn params_for(team_size: usize, crowded: bool) -> Result<MachineParams> {
    let params = match in_force()? {
        Some(cal) => cal.params_for(team_size, crowded),
        None => MachineParams::built_in(crowded),
    };
    Ok(MachineParams {
        cores: crowded.then(super::online_processors),
        ..params
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_calibrations_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        let mut bad = serde_json::to_value(CalibrationEntry {
            team_size: 4,
            crowded: false,
            direct_reads: true,
            params: MachineParams::DEDICATED,
        })
        .unwrap();
        bad["params"]["copy_gbps"] = serde_json::json!(-1.0);
        for (text, expect) in [
            ("{".to_string(), "EOF while parsing"),
            (
                serde_json::json!({ "entries": [bad] }).to_string(),
                "copy_gbps is -1",
            ),
        ] {
            std::fs::write(&path, text).unwrap();
            let e = Calibration::load(&path).unwrap_err().to_string();
            assert!(e.contains(expect) && e.contains("c.json"), "{e}");
        }
    }

    #[test]
    fn the_nearest_size_of_the_same_regime_applies() {
        let mut cal = Calibration::default();
        let at = |round_us: f64| MachineParams {
            round_us,
            ..MachineParams::DEDICATED
        };
        for (size, crowded, round) in [(2, false, 1.0), (8, false, 2.0), (8, true, 3.0)] {
            cal.insert(CalibrationEntry {
                team_size: size,
                crowded,
                direct_reads: size == 2,
                params: at(round),
            });
        }
        assert_eq!(cal.params_for(5, false).round_us, 1.0); // tie: the smaller size
        assert_eq!(cal.params_for(6, false).round_us, 2.0);
        assert_eq!(cal.params_for(2, true).round_us, 3.0);
        // The verdict on direct reads follows the same entry.
        assert!(cal.direct_reads_for(5, false) && !cal.direct_reads_for(6, false));
        assert!(!cal.direct_reads_for(2, true));
        cal.entries.retain(|e| !e.crowded);
        assert_eq!(cal.params_for(4, true), MachineParams::CROWDED);
        assert!(cal.direct_reads_for(4, true));
        // Inserting the same size and regime replaces.
        cal.insert(CalibrationEntry {
            team_size: 2,
            crowded: false,
            direct_reads: true,
            params: at(9.0),
        });
        assert_eq!(cal.entries.len(), 2);
        assert_eq!(cal.params_for(2, false).round_us, 9.0);
    }

    /// An entry that does not say how long messages travel reads them directly.
    #[test]
    fn an_entry_without_a_verdict_on_direct_reads_reads_directly() {
        let mut entry = serde_json::to_value(CalibrationEntry {
            team_size: 8,
            crowded: true,
            direct_reads: false,
            params: MachineParams::CROWDED,
        })
        .unwrap();
        let cal: Calibration =
            serde_json::from_value(serde_json::json!({ "entries": [entry.clone()] })).unwrap();
        assert!(!cal.direct_reads_for(8, true));
        entry.as_object_mut().unwrap().remove("direct_reads");
        let cal: Calibration =
            serde_json::from_value(serde_json::json!({ "entries": [entry] })).unwrap();
        assert!(cal.direct_reads_for(8, true));
    }
}
