//! The watchdog turns a hang into an error that names who is missing, and a failing
//! rank ends the others' waits instead of hanging them.

use std::time::{Duration, Instant};

use tessera::{Job, JobError};

#[test]
fn watchdog_names_the_rank_that_never_arrives() {
    let started = Instant::now();
    let err = Job::threads(3)
        .segment(1 << 20)
        .wait_timeout(Duration::from_millis(300))
        .run(|ctx| {
            if ctx.rank() == 2 {
                // Rank 2 skips the barrier and waits on its own semaphore forever.
                let sem = ctx.semaphore_new()?;
                sem.wait(ctx, 1)?;
            } else {
                ctx.barrier()?;
            }
            Ok(())
        })
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(20));
    let text = err.to_string();
    assert!(text.contains("watchdog"), "{text}");
    assert!(
        text.contains("rank 2 has not reached barrier") || text.contains("a semaphore"),
        "{text}"
    );
}

#[test]
fn a_failing_rank_releases_the_others() {
    let started = Instant::now();
    let err = Job::threads(4)
        .segment(1 << 20)
        .run(|ctx| {
            if ctx.rank() == 1 {
                return Err("rank 1 gives up".into());
            }
            ctx.barrier()?; // would hang forever without abort propagation
            Ok(())
        })
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(20));
    match err {
        JobError::RankFailed { rank, why } => {
            assert_eq!(rank, 1);
            assert!(why.contains("rank 1 gives up"), "{why}");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn segment_exhaustion_says_how_big_and_how_to_raise_it() {
    let err = Job::threads(1)
        .segment(1 << 20)
        .run(|ctx| {
            ctx.alloc_collective::<u8>(2 << 20)?;
            Ok(())
        })
        .unwrap_err()
        .to_string();
    assert!(err.contains("segment exhausted on rank 0"), "{err}");
    assert!(
        err.contains("1048576-byte segment") && err.contains("--segment"),
        "{err}"
    );
}
