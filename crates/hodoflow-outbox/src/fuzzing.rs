//! Entry points for the fuzz targets of `fuzz/`, compiled only under `--cfg fuzzing` (which
//! cargo-fuzz sets): the decoding of a stored row, private to the crate, reachable by a target
//! without becoming public API. Not for any other use.

/// The target of a stored job row (`job.rs`): its kind, method and route columns.
///
/// # Errors
///
/// When the row names an unknown kind or an invalid method.
pub fn stored_target(
    kind: &str,
    method: &str,
    route: &str,
) -> hodoflow_retry::Result<crate::Target> {
    crate::Target::from_row(kind, method, route)
}

/// The method and route columns a target is stored as.
pub fn target_row(target: &crate::Target) -> (String, String) {
    target.to_row()
}

/// The time of a stored milliseconds column.
pub fn stored_time(millis: i64) -> std::time::SystemTime {
    crate::from_millis(millis)
}

/// The milliseconds column a time is stored as.
pub fn time_column(time: std::time::SystemTime) -> i64 {
    crate::millis(time)
}
