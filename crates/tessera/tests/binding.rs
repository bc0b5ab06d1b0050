//! Ranks pinned to processors of their own (`Job::bind`, `TESSERA_BIND`): each rank runs
//! on exactly one processor, no two on the same one, and a job with more ranks than
//! processors is refused before it starts. A test binary of its own: pinned rank threads
//! would otherwise share their processors with the other tests'.

use std::sync::Mutex;

use nix::sched::{sched_getaffinity, CpuSet};
use nix::unistd::Pid;
use tessera::Job;

/// The processors the calling thread may run on.
fn processors_of_this_thread() -> Vec<usize> {
    let set = sched_getaffinity(Pid::from_raw(0)).expect("sched_getaffinity");
    (0..CpuSet::count())
        .filter(|&cpu| set.is_set(cpu).unwrap_or(false))
        .collect()
}

#[test]
fn each_rank_runs_on_a_processor_of_its_own() {
    let available = processors_of_this_thread();
    let ranks = available.len().min(4);
    let seen = Mutex::new(Vec::new());
    Job::threads(ranks)
        .segment(1 << 20)
        .bind(true)
        .run(|ctx| {
            let mine = processors_of_this_thread();
            // The pinning holds for threads the rank starts, too.
            let child = std::thread::scope(|s| s.spawn(processors_of_this_thread).join());
            seen.lock()
                .unwrap()
                .push((ctx.rank(), mine, child.expect("a child thread")));
            Ok(())
        })
        .expect("a job of at most as many ranks as processors runs pinned");
    let mut seen = seen.into_inner().unwrap();
    seen.sort();
    for (rank, mine, child) in &seen {
        assert_eq!(
            mine,
            &vec![available[*rank]],
            "rank {rank} runs on the {rank}-th processor alone"
        );
        assert_eq!(child, mine, "rank {rank}'s threads inherit its processor");
    }
    assert_eq!(seen.len(), ranks);
    // The test's own thread is left as it was.
    assert_eq!(processors_of_this_thread(), available);
}

#[test]
fn more_ranks_than_processors_are_refused_before_any_starts() {
    let available = processors_of_this_thread().len();
    let started = Mutex::new(0);
    let refused = Job::threads(available + 1)
        .segment(1 << 20)
        .bind(true)
        .run(|_| {
            *started.lock().unwrap() += 1;
            Ok(())
        })
        .expect_err("more ranks than processors cannot be pinned apart");
    let message = refused.to_string();
    assert!(
        message.contains(&format!(
            "runs {} ranks and may use {available} processors",
            available + 1
        )) && message.contains("unset TESSERA_BIND"),
        "{message}"
    );
    assert_eq!(*started.lock().unwrap(), 0, "no rank started");
}
