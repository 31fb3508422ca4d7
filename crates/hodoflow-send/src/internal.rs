//! Panics: a bug here or in the SDK, reported as a failure of the one operation it hit.
//!
//! Each operation runs in a Tokio task, so a panic under it ends that task only; its `JoinError`
//! becomes an `internal` failure (exit 3: the operation may have been sent). The panic hook
//! replaces the default one so the panic's own message is redacted like every value printed.

use tokio::task::JoinError;

/// Installs the hook that prints a panic on standard error, redacted, on one line.
pub(crate) fn install_hook() {
    std::panic::set_hook(Box::new(|info| {
        let location = info
            .location()
            .map(|at| format!(" at {}:{}", at.file(), at.line()))
            .unwrap_or_default();
        crate::redact::eprint(&format!(
            "hodoflow-send: internal error{location}: {}",
            crate::redact::shown(message(info.payload()))
        ));
    }));
}

/// What went wrong in a task that did not finish: its panic message, or that it was cancelled.
pub(crate) fn describe(error: JoinError) -> String {
    if error.is_panic() {
        format!("a panic: {}", message(error.into_panic().as_ref()))
    } else {
        "the task was cancelled".to_owned()
    }
}

/// A panic payload's text, when it has one.
fn message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("no message")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_is_described_by_its_message() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async {
            let error = tokio::spawn(async { panic!("overflow when adding duration to instant") })
                .await
                .unwrap_err();
            assert_eq!(
                describe(error),
                "a panic: overflow when adding duration to instant"
            );
            let formatted = tokio::spawn(async { panic!("{} apples", 3) })
                .await
                .unwrap_err();
            assert_eq!(describe(formatted), "a panic: 3 apples");
        });
    }
}
