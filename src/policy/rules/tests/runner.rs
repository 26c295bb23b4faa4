//! The table runner: it checks every case of a table, collecting what each
//! one got wrong, and fails once at the end, listing every failing case by
//! name with each difference.

use std::collections::BTreeSet;
use std::fmt::{Debug, Write as _};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// A table's case: it has a name, unique in its table.
pub(super) trait Named {
    /// The name printed when the case fails.
    fn name(&self) -> &str;
}

/// What one case got wrong, collected while it is checked.
#[derive(Debug, Default)]
pub(super) struct Mismatches(Vec<String>);

impl Mismatches {
    /// Records `what` unless `ok`.
    pub(super) fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.0.push(what());
        }
    }

    /// Records a difference unless `got == want`; `what` names the value.
    pub(super) fn equal<T: PartialEq + Debug>(&mut self, what: &str, got: T, want: T) {
        if got != want {
            self.0.push(format!("{what}: got {got:?}, want {want:?}"));
        }
    }
}

/// Checks every case of `table` with `check` (a case whose check panics
/// counts as failing, with the panic's message), then panics once if any
/// failed, naming each failing case and listing what differed.
pub(super) fn run_table<C: Named>(
    table: &str,
    cases: &[C],
    mut check: impl FnMut(&C, &mut Mismatches),
) {
    assert!(!cases.is_empty(), "table {table:?} has no cases");
    let mut names = BTreeSet::new();
    let mut failed: Vec<(&str, Vec<String>)> = Vec::new();
    for case in cases {
        let mut found = Mismatches::default();
        if !names.insert(case.name()) {
            found.0.push("another case has the same name".to_owned());
        }
        let run = catch_unwind(AssertUnwindSafe(|| check(case, &mut found)));
        if let Err(panic) = run {
            found
                .0
                .push(format!("panicked: {}", panic_message(&*panic)));
        }
        if !found.0.is_empty() {
            failed.push((case.name(), found.0));
        }
    }
    if failed.is_empty() {
        return;
    }
    let mut report = format!(
        "table {table:?}: {} of {} cases failed",
        failed.len(),
        cases.len()
    );
    for (name, mismatches) in &failed {
        let _ = write!(report, "\n- {name}");
        for mismatch in mismatches {
            let _ = write!(report, "\n    {}", mismatch.replace('\n', "\n    "));
        }
    }
    panic!("{report}");
}

/// The text a panic was raised with.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "(not a text)".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Square {
        name: &'static str,
        of: i32,
        is: i32,
    }

    impl Named for Square {
        fn name(&self) -> &str {
            self.name
        }
    }

    fn squares() -> Vec<Square> {
        let case = |name, of, is| Square { name, of, is };
        vec![
            case("2 squared", 2, 4),
            case("3 squared, wrongly", 3, 10),
            case("4 squared", 4, 16),
            case("5 squared, wrongly", 5, 26),
            case("6 squared, panics", 6, 0),
        ]
    }

    fn check(case: &Square, m: &mut Mismatches) {
        assert!(case.of != 6, "six is not allowed");
        m.equal("square", case.of * case.of, case.is);
        m.check(case.is >= 0, || "negative".to_owned());
    }

    #[test]
    fn a_failing_table_names_every_failing_case_and_what_differed() {
        let failure = catch_unwind(|| run_table("squares", &squares(), check))
            .expect_err("the table has failing cases");
        let report = panic_message(&*failure);
        assert_eq!(
            report,
            "table \"squares\": 3 of 5 cases failed\n\
             - 3 squared, wrongly\n    square: got 9, want 10\n\
             - 5 squared, wrongly\n    square: got 25, want 26\n\
             - 6 squared, panics\n    panicked: six is not allowed"
        );
    }

    #[test]
    fn a_passing_table_passes_and_duplicate_names_fail() {
        let good: Vec<Square> = squares()
            .into_iter()
            .filter(|s| s.of * s.of == s.is)
            .collect();
        run_table("squares", &good, check);
        let twice = vec![
            Square {
                name: "2 squared",
                of: 2,
                is: 4,
            },
            Square {
                name: "2 squared",
                of: 2,
                is: 4,
            },
        ];
        let failure =
            catch_unwind(|| run_table("twice", &twice, check)).expect_err("two cases share a name");
        assert!(panic_message(&*failure).contains("another case has the same name"));
    }
}
