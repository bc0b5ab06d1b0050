//! `tessera npb`: run NAS Parallel Benchmark kernels as jobs and report them.

use std::path::Path;
use std::process::ExitCode;

use tessera::{Context, RankResult};
use tessera_npb::{Class, Kernel, Outcome};

use crate::JobArgs;

/// Validate everything up front: a bad kernel, class, rank count or variant is a one-line
/// error naming what is allowed.
fn plan(
    kernel: &str,
    class: &str,
    job: &JobArgs,
    variant: Option<&str>,
) -> Result<(Vec<Kernel>, Class), String> {
    let ranks = job.ranks as usize;
    let kernels = if kernel.eq_ignore_ascii_case("all") {
        // Every kernel that runs at this rank count; say which ones cannot.
        let (runnable, skipped): (Vec<Kernel>, Vec<Kernel>) = Kernel::ALL
            .into_iter()
            .partition(|k| k.check_ranks(ranks).is_ok());
        for k in skipped {
            eprintln!(
                "npb: skipping {}: {}",
                k.name().to_uppercase(),
                k.check_ranks(ranks).unwrap_err()
            );
        }
        if runnable.is_empty() {
            return Err(format!("no kernel runs on {ranks} ranks"));
        }
        runnable
    } else {
        vec![kernel.parse::<Kernel>()?]
    };
    let class = class.parse::<Class>()?;
    for k in &kernels {
        k.check_run(class, variant.unwrap_or(k.variants()[0]), ranks)?;
    }
    Ok((kernels, class))
}

/// The watchdog on every wait inside a kernel, in seconds (the longest legitimate wait is
/// a rank waiting while a peer generates its share of class B data, well under this).
const WAIT_TIMEOUT_S: &str = "120";

pub fn drive(
    kernel: &str,
    class: &str,
    job: &JobArgs,
    variant: Option<&str>,
    json: Option<&Path>,
) -> Result<ExitCode, String> {
    let (kernels, class) = plan(kernel, class, job, variant)?;
    let mut outcomes = Vec::new();
    for k in &kernels {
        let v = variant.unwrap_or(k.variants()[0]);
        eprintln!(
            "npb: {} class {class} on {} rank(s) of the {} conduit ...",
            k.name().to_uppercase(),
            job.ranks,
            job.conduit
        );
        let result = crate::ResultFile::new(&format!("npb-{}.json", k.name()))?;
        let file = result.path();
        let mut launch = job.launch_self(&[
            "npb",
            k.name(),
            "--class",
            &class.to_string(),
            "--variant",
            v,
            "--out",
            &file.to_string_lossy(),
        ])?;
        // No kernel waits long in a correct run, so a wait that does is a bug: fail naming
        // it instead of hanging (TESSERA_WAIT_TIMEOUT in the environment overrides this).
        if std::env::var_os("TESSERA_WAIT_TIMEOUT").is_none() {
            launch
                .env
                .push(("TESSERA_WAIT_TIMEOUT".into(), WAIT_TIMEOUT_S.into()));
        }
        let outcome = launch.run().map_err(|e| e.to_string())?;
        if outcome.broken_pipe {
            return Ok(crate::report(&outcome));
        }
        if outcome.code != 0 {
            let why = outcome.failure.map(|f| f.1).unwrap_or_default();
            return Err(format!(
                "{} class {class} failed: {why}",
                k.name().to_uppercase()
            ));
        }
        let text = result.read()?;
        let o: Outcome = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        print!("{o}");
        outcomes.push(o);
    }
    if outcomes.len() > 1 {
        println!(
            "\n {:<6} {:<5} {:>6} {:>12} {:>12}  verification",
            "kernel", "class", "ranks", "time (s)", "Mop/s"
        );
        for o in &outcomes {
            let v = match o.verified {
                Some(true) => "SUCCESSFUL",
                Some(false) => "UNSUCCESSFUL",
                None => "NOT PERFORMED",
            };
            println!(
                " {:<6} {:<5} {:>6} {:>12.3} {:>12.2}  {v}",
                o.kernel, o.class, o.ranks, o.time_s, o.mops
            );
        }
    }
    if let Some(path) = json {
        let text = if outcomes.len() == 1 {
            serde_json::to_string_pretty(&outcomes[0])
        } else {
            serde_json::to_string_pretty(&outcomes)
        }
        .map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n")
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    let failed = outcomes.iter().any(|o| o.verified == Some(false));
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

pub fn rank_main(
    ctx: &Context,
    kernel: &str,
    class: &str,
    variant: &str,
    out: &Path,
) -> RankResult {
    let kernel: Kernel = kernel.parse()?;
    let class: Class = class.parse()?;
    if let Some(outcome) = tessera_npb::run(ctx, kernel, class, variant)? {
        std::fs::write(out, serde_json::to_string(&outcome)?)?;
    }
    Ok(())
}
