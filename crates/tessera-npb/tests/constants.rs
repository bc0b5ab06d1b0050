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
    for c in CLASSES {
        let (class, entry) = (c.class, &data["EP"][c.class.to_string()]);
        assert_eq!(entry["m"].as_u64(), Some(c.m as u64), "EP {class} m");
        assert_eq!(
            entry["sx_verify_value"].as_f64(),
            c.sums.map(|s| s.0),
            "EP {class} sx"
        );
        assert_eq!(
            entry["sy_verify_value"].as_f64(),
            c.sums.map(|s| s.1),
            "EP {class} sy"
        );
    }
}

#[test]
fn is_values_match_the_shared_npb_data() {
    let Some(data) = shared_data() else { return };
    for c in &tessera_npb::is::CLASSES {
        let entry = &data["IS"][c.class.to_string()];
        // The data gives D as 2^29 keys times MIN_PROCS; `total_keys` is the product.
        assert_eq!(entry["total_keys"].as_u64(), Some(1 << c.total_keys_log2));
        assert_eq!(entry["max_key_log2"].as_u64(), Some(c.max_key_log2 as u64));
        assert_eq!(
            entry["num_buckets_log2"].as_u64(),
            Some(c.buckets_log2 as u64)
        );
        let Some(tests) = c.tests else {
            assert!(
                entry["test_index_array"].is_null(),
                "IS {} has tests",
                c.class
            );
            continue;
        };
        let index: Vec<u64> = entry["test_index_array"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(
            index,
            tests.index.iter().map(|&i| i as u64).collect::<Vec<_>>(),
            "IS {} test indices",
            c.class
        );
        for (it, row) in entry["expected_test_ranks_per_iteration"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
        {
            let row: Vec<u64> = row
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect();
            assert_eq!(
                row,
                tests.ranks[it].to_vec(),
                "IS {} iteration {}",
                c.class,
                it + 1
            );
        }
    }
}

#[test]
fn cg_values_match_the_shared_npb_data() {
    let Some(data) = shared_data() else { return };
    for c in &tessera_npb::cg::CLASSES {
        let entry = &data["CG"][c.class.to_string()];
        assert_eq!(entry["na"].as_u64(), Some(c.na as u64), "CG {} na", c.class);
        assert_eq!(entry["nonzer"].as_u64(), Some(c.nonzer as u64));
        assert_eq!(entry["niter"].as_u64(), Some(c.niter as u64));
        assert_eq!(entry["shift"].as_f64(), Some(c.shift));
        assert_eq!(
            entry["zeta_verify_value"].as_f64(),
            c.zeta,
            "CG {} zeta",
            c.class
        );
    }
    let common = &data["CG"]["_common"];
    assert_eq!(common["cgitmax"].as_u64(), Some(25));
    assert_eq!(common["rcond"].as_f64(), Some(0.1));
    assert_eq!(common["epsilon"].as_f64(), Some(1e-10));
}

#[test]
fn mg_values_match_the_shared_npb_data() {
    let Some(data) = shared_data() else { return };
    for c in &tessera_npb::mg::CLASSES {
        let entry = &data["MG"][c.class.to_string()];
        for axis in ["nx", "ny", "nz"] {
            assert_eq!(
                entry[axis].as_u64(),
                Some(c.n as u64),
                "MG {} {axis}",
                c.class
            );
        }
        assert_eq!(
            entry["nit"].as_u64(),
            Some(c.nit as u64),
            "MG {} nit",
            c.class
        );
        assert_eq!(entry["lt"].as_u64(), Some(c.n.trailing_zeros() as u64));
        assert_eq!(
            entry["verify_value"].as_f64(),
            c.rnm2,
            "MG {} rnm2",
            c.class
        );
    }
}

#[test]
fn ft_values_match_the_shared_npb_data() {
    let Some(data) = shared_data() else { return };
    for c in &tessera_npb::ft::CLASSES {
        let entry = &data["FT"][c.class.to_string()];
        assert_eq!(entry["nx"].as_u64(), Some(c.nx as u64), "FT {} nx", c.class);
        assert_eq!(entry["ny"].as_u64(), Some(c.ny as u64), "FT {} ny", c.class);
        assert_eq!(entry["nz"].as_u64(), Some(c.nz as u64), "FT {} nz", c.class);
        let sums: Vec<(f64, f64)> = entry["checksums"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|s| (s["re"].as_f64().unwrap(), s["im"].as_f64().unwrap()))
            .collect();
        assert_eq!(sums, c.checksums, "FT {} checksums", c.class);
        assert_eq!(entry["niter"].as_u64(), Some(c.niter as u64));
    }
}
