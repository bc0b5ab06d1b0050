//! Every application verifies at 1–4 ranks on square and non-square grids, with matrix
//! sizes that are not multiples of the block size, and the matrices made to fail stop
//! every rank with the failing column named.

use tessera::Job;
use tessera_apps::{App, MatrixKind, Outcome, Problem, Variant, THRESHOLD};

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
                for (n, block) in [(37, 8), (64, 16), (5, 5)] {
                    let problem = Problem {
                        app,
                        n,
                        block,
                        grid,
                        variant,
                        matrix: MatrixKind::Random,
                    };
                    for o in run(grid.0 * grid.1, problem) {
                        assert!(o.failure.is_none(), "{problem:?}: {:?}", o.failure);
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
        for grid in [(1, 1), (2, 2), (1, 3)] {
            let problem = Problem {
                app,
                n: 41,
                block: 6,
                grid,
                variant: Variant::Blocking,
                matrix,
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

#[test]
fn bad_problems_are_refused_before_any_rank_starts() {
    let p = Problem {
        app: App::Summa,
        n: 10,
        block: 11,
        grid: (1, 1),
        variant: Variant::Blocking,
        matrix: MatrixKind::Random,
    };
    assert!(p.check(1).unwrap_err().contains("block size 11"));
    let p = Problem {
        block: 2,
        grid: (2, 2),
        ..p
    };
    assert!(p
        .check(3)
        .unwrap_err()
        .contains("has 4 processes, but the job has 3"));
    let p = Problem {
        grid: (1, 1),
        matrix: MatrixKind::Singular,
        ..p
    };
    assert!(p.check(1).unwrap_err().contains("takes no singular matrix"));
}
