//! Every environment variable Tessera reads is documented where users look, from one
//! table: the README carries `config::markdown_table()` (what `tessera config --markdown`
//! prints) word for word, and the `job` module's contract points to that table. A variable
//! added to `config::VARIABLES` changes the generated table, and this test then asks for
//! the README to be regenerated.

#[test]
fn the_readme_carries_the_generated_table_of_every_variable() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("../../README.md")).unwrap();
    let table = tessera::config::markdown_table();
    assert!(
        readme.contains(&table),
        "README.md's table of variables is not the generated one; replace it with the output of `tessera config --markdown`:\n{table}"
    );
    for var in tessera::config::VARIABLES {
        assert!(table.contains(&format!("`{}`", var.name)), "{}", var.name);
    }
    let job_docs = std::fs::read_to_string(root.join("src/job/mod.rs")).unwrap();
    assert!(
        job_docs.contains("[`config::VARIABLES`]") && job_docs.contains("tessera config"),
        "the job module's contract must point to the one table"
    );
}
