//! Every environment variable Tessera reads is documented where users look: the README's
//! table and the `job` module's contract. A variable added to `job::env::VARIABLES`
//! without documentation fails here.

#[test]
fn every_variable_is_in_the_readme_and_the_job_docs() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("../../README.md")).unwrap();
    let job_docs = std::fs::read_to_string(root.join("src/job/mod.rs")).unwrap();
    for var in tessera::job::env::VARIABLES {
        let quoted = format!("`{}", var.name);
        assert!(
            readme.contains(&quoted),
            "README.md does not document {}",
            var.name
        );
        assert!(
            job_docs.contains(&quoted),
            "the job module's contract does not document {}",
            var.name
        );
    }
}
