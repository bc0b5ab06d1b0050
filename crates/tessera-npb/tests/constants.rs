//! The verification values carried in this crate equal the official ones in the project's
//! shared NPB data (`../shared/npb/verification.json` beside the repository, as on the
//! developers' machines and in CI). Skipped, with a message, where that file is absent.

use std::path::PathBuf;

use tessera_npb::ep::CLASSES;

fn shared_data() -> Option<serde_json::Value> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/npb/verification.json");
    match std::fs::read_to_string(&path) {
        Ok(text) => Some(serde_json::from_str(&text).expect("verification.json parses")),
        Err(_) => {
            eprintln!("skipped: {} not found", path.display());
            None
        }
    }
}

#[test]
fn ep_values_match_the_shared_npb_data() {
    let Some(data) = shared_data() else { return };
    for (class, m, sx, sy) in CLASSES {
        let entry = &data["EP"][class.to_string()];
        assert_eq!(entry["m"].as_u64(), Some(m as u64), "EP {class} m");
        assert_eq!(entry["sx_verify_value"].as_f64(), Some(sx), "EP {class} sx");
        assert_eq!(entry["sy_verify_value"].as_f64(), Some(sy), "EP {class} sy");
    }
}
