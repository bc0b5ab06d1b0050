//! Every application verifies at 1–4 ranks on square and non-square grids, with matrix
//! sizes that are not multiples of the block size, and the matrices made to fail stop
//! every rank with the failing column named.

use tessera::Job;
use tessera_apps::{App, AppError, MatrixKind, Outcome, Problem, Variant, THRESHOLD};

fn run(ranks: usize, problem: Problem) -> Vec<Outcome> {
    let outcomes = std::sync::Mutex::new(Vec::new());
    Job::threads(ranks)
        .run(|ctx| {
            let o = tessera_apps::run(ctx, &problem)?;
            outcomes.lock().unwrap().push(o);
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{problem:?} on {ranks} ranks: {e}"));
    outcomes.into_inner().unwrap()
}

const GRIDS: [(usize, usize); 6] = [(1, 1), (1, 2), (2, 1), (1, 3), (3, 1), (2, 2)];

#[test]
fn every_application_verifies_on_every_grid() {
    for app in App::ALL {
        for &variant in app.variants() {
            for grid in GRIDS {
                // The last two generate the input in other blocks and redistribute it
                // first (smaller and larger than the block, neither dividing n).
                for (n, block, input_block) in [
                    (37, 8, None),
                    (64, 16, None),
                    (5, 5, None),
                    (37, 8, Some(5)),
                    (37, 6, Some(13)),
                ] {
                    let problem = Problem {
                        app,
                        n,
                        block,
                        grid,
                        variant,
                        matrix: MatrixKind::Random,
                        input_block,
                    };
                    for o in run(grid.0 * grid.1, problem) {
                        assert!(o.failure.is_none(), "{problem:?}: {:?}", o.failure);
                        assert_eq!(
                            o.redistribute_seconds.is_some(),
                            input_block.is_some(),
                            "{problem:?}: a redistribution time exactly when the input is redistributed"
                        );
                        assert!(
                            o.residual.is_some_and(|r| r < THRESHOLD),
                            "{problem:?}: residual {:?} ({})",
                            o.residual,
                            o.residual_name
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn matrices_that_cannot_be_factored_name_the_column_on_every_rank() {
    for (app, matrix, says) in [
        (
            App::Cholesky,
            MatrixKind::Indefinite,
            "not positive definite: the leading minor fails at column 20",
        ),
        (
            App::Lu,
            MatrixKind::Singular,
            "singular: the pivot of column 20",
        ),
    ] {
        // Column 20 falls in the second panel of a pair at block 6 (panel 18) and in the
        // first at block 5 (panel 20): Cholesky's lookahead takes panels two at a time.
        for (grid, block) in [(1, 1), (2, 2), (1, 3), (2, 1)]
            .into_iter()
            .flat_map(|g| [(g, 6), (g, 5)])
        {
            for &variant in app.variants() {
                let problem = Problem {
                    app,
                    n: 41,
                    block,
                    grid,
                    variant,
                    matrix,
                    input_block: None,
                };
                let outcomes = run(grid.0 * grid.1, problem);
                assert_eq!(outcomes.len(), grid.0 * grid.1);
                for o in outcomes {
                    let why = o.failure.expect("the factorisation must fail");
                    assert!(why.contains(says), "{problem:?}: {why}");
                }
            }
        }
    }
}

#[test]
fn bad_problems_are_refused_before_any_rank_starts() {
    let p = Problem {
        app: App::Summa,
        n: 10,
        block: 11,
        grid: (1, 1),
        variant: Variant::Blocking,
        matrix: MatrixKind::Random,
        input_block: None,
    };
    let refused = |p: Problem, ranks: usize, option: &str, says: &str| {
        let err = p.check(ranks).unwrap_err();
        assert!(
            matches!(&err, AppError::BadArgument { option: o, .. } if *o == option),
            "{err:?}"
        );
        assert!(err.to_string().contains(says), "{err}");
    };
    refused(p, 1, "--block", "block size 11");
    for bad in [0, 11] {
        let p = Problem {
            block: 2,
            input_block: Some(bad),
            ..p
        };
        refused(p, 1, "--input-block", &format!("input block size {bad}"));
    }
    let p = Problem {
        block: 2,
        grid: (2, 2),
        ..p
    };
    refused(p, 3, "--grid", "has 4 processes, but the job has 3");
    let p = Problem {
        grid: (1, 1),
        matrix: MatrixKind::Singular,
        ..p
    };
    refused(p, 1, "--matrix", "takes no singular matrix");
}
