//! `--trigger-limit`: `N/DUR` (`100/60s`) or `off`.
//!
//! Apart from `cli.rs` so that it depends on nothing but `duration.rs` and the SDK: the fuzz
//! target `cli_values` (`fuzz/fuzz_targets/cli_values.rs`) compiles both files as they are.

/// A `--trigger-limit`: a limit, or none (`off`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TriggerLimitArg(pub(crate) Option<hodoflow_retry::limit::RouteLimit>);

/// Parses `N/DUR` (`100/60s`) or `off`.
pub(crate) fn parse(text: &str) -> Result<TriggerLimitArg, String> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("off") {
        return Ok(TriggerLimitArg(None));
    }
    let expected = "expected N/DUR such as 100/60s, or off";
    let Some((count, per)) = text.split_once('/') else {
        return Err(format!("'{text}' is not a limit: {expected}"));
    };
    let count: u32 = count
        .trim()
        .parse()
        .map_err(|_| format!("'{text}' does not start with a count: {expected}"))?;
    let per = crate::duration::parse(per)?;
    hodoflow_retry::limit::RouteLimit::new(count, per)
        .map(|limit| TriggerLimitArg(Some(limit)))
        .map_err(|e| format!("'{text}': {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn reads_a_count_per_duration_or_off() {
        let limit = parse(" 100/60s ").unwrap().0.unwrap();
        assert_eq!(
            limit,
            hodoflow_retry::limit::RouteLimit::new(100, Duration::from_secs(60)).unwrap()
        );
        assert_eq!(parse("OFF"), Ok(TriggerLimitArg(None)));
    }

    #[test]
    fn refuses_what_is_not_a_limit_naming_the_text() {
        for (text, says) in [
            ("100", "is not a limit"),
            ("x/60s", "does not start with a count"),
            ("-1/60s", "does not start with a count"),
            ("4294967296/1s", "does not start with a count"),
            ("100/60", "has no unit"),
        ] {
            let error = parse(text).unwrap_err();
            assert!(error.contains(says), "{text}: {error}");
        }
        assert!(parse("0/60s").is_err());
    }
}
