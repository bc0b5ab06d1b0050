//! `tessera selftest`: run the conduit conformance suite as a real job.

use std::process::ExitCode;

use crate::JobArgs;

/// Launch the conformance cases on the requested ranks and conduit and summarise.
pub(crate) fn drive(job: &JobArgs, case: Option<&str>) -> Result<ExitCode, String> {
    let cases: Vec<&str> = tessera::conformance::cases()
        .iter()
        .map(|c| c.name)
        .filter(|n| case.is_none_or(|f| n.contains(f)))
        .collect();
    if cases.is_empty() {
        let all: Vec<&str> = tessera::conformance::cases()
            .iter()
            .map(|c| c.name)
            .collect();
        return Err(format!(
            "no conformance case matches {:?}; cases are: {}",
            case.unwrap_or(""),
            all.join(", ")
        ));
    }
    let mut rank_args = vec!["selftest"];
    if let Some(c) = case {
        rank_args.extend(["--case", c]);
    }
    let launch = job.launch_self(&rank_args)?;
    let started = std::time::Instant::now();
    let bar = job.progress(None, "selftest: {spinner} {msg} ({elapsed})");
    bar.set_message(format!(
        "{} case(s) on {} rank(s) of the {} conduit",
        cases.len(),
        job.ranks(),
        job.conduit
    ));
    let outcome = launch.run().map_err(|e| e.to_string());
    bar.finish_and_clear();
    let outcome = outcome?;
    if outcome.code == 0 {
        println!(
            "conformance: {} case(s) passed on {} rank(s) of the {} conduit in {:.2} s ({})",
            cases.len(),
            job.ranks(),
            job.conduit,
            started.elapsed().as_secs_f64(),
            cases.join(", ")
        );
    }
    Ok(crate::report(&outcome))
}
