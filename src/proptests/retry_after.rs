//! `Retry-After`: any header value, delay-seconds, the three HTTP-date forms, junk.

use super::*;

#[test]
fn the_date_oracle_writes_the_rfc_9110_examples() {
    // RFC 9110, section 5.6.7: Sunday, 6 November 1994, 08:49:37 UTC.
    let seconds = 784_111_777;
    assert_eq!(
        format_date(DateForm::ImfFixdate, seconds),
        "Sun, 06 Nov 1994 08:49:37 GMT"
    );
    assert_eq!(
        format_date(DateForm::Rfc850, seconds),
        "Sunday, 06-Nov-94 08:49:37 GMT"
    );
    assert_eq!(
        format_date(DateForm::Asctime, seconds),
        "Sun Nov  6 08:49:37 1994"
    );
    assert_eq!(
        format_date(DateForm::ImfFixdate, YEAR_10000 - 1),
        "Fri, 31 Dec 9999 23:59:59 GMT"
    );
    assert_eq!(
        format_date(DateForm::ImfFixdate, YEAR_2070),
        "Wed, 01 Jan 2070 00:00:00 GMT"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]
    #[test]
    fn retry_after_parsing_of_any_header_value_never_panics(
        bytes in value_bytes(),
        now in moments(),
    ) {
        let Ok(value) = HeaderValue::from_bytes(&bytes) else {
            return Ok(());
        };
        let parsed = parse_retry_after(&value, now);
        if value.to_str().is_err() {
            prop_assert_eq!(parsed, None, "a value outside visible ASCII is not read");
        }
    }

    #[test]
    fn retry_after_delay_seconds_parse_to_their_value_clamped_to_7_days(
        digits in prop_oneof!["[0-9]{1,40}", any::<u64>().prop_map(|n| n.to_string())],
        padding in select(vec![("", ""), (" ", ""), ("", "  "), ("\t", " ")]),
        now in moments(),
    ) {
        let text = format!("{}{digits}{}", padding.0, padding.1);
        let value = HeaderValue::from_str(&text).expect("digits and blanks are a header value");
        let significant = digits.trim_start_matches('0');
        let expected = if significant.len() > 20 {
            u64::MAX
        } else {
            let wide: u128 = digits.parse().expect("at most 20 significant digits fit in u128");
            u64::try_from(wide).unwrap_or(u64::MAX)
        };
        let expected = Duration::from_secs(expected).min(MAX_RETRY_AFTER);
        prop_assert_eq!(parse_retry_after(&value, now), Some(expected));
    }

    #[test]
    fn retry_after_http_dates_in_every_form_parse_to_the_wait_from_now(
        (form, seconds) in dated(),
        now in moments(),
    ) {
        let text = format_date(form, seconds);
        let value = HeaderValue::from_str(&text).expect("a date is a header value");
        let date = UNIX_EPOCH + Duration::from_secs(seconds);
        let expected = wait_until(date, now).min(MAX_RETRY_AFTER);
        prop_assert_eq!(parse_retry_after(&value, now), Some(expected), "{}", text);
    }

    #[test]
    fn a_retry_after_date_at_or_before_now_is_no_wait(
        (form, seconds) in dated(),
        late in durations(),
    ) {
        let date = UNIX_EPOCH + Duration::from_secs(seconds);
        let Some(now) = date.checked_add(late) else {
            return Ok(());
        };
        let value = HeaderValue::from_str(&format_date(form, seconds)).expect("a header value");
        prop_assert_eq!(parse_retry_after(&value, now), Some(Duration::ZERO));
    }

    #[test]
    fn junk_retry_after_is_none(
        junk in prop_oneof![
            "[A-Za-z ,:;./_+-]{0,30}",
            "[+-][0-9]{1,10}",
            "[0-9]{1,10}[.,][0-9]{1,5}",
            "[0-9]{1,10} ?(s|sec|seconds|ms)",
            "0x[0-9a-f]{1,8}",
            "[0-9]{1,5} [0-9]{1,5}",
            // An IMF-fixdate with a field out of range: day, hour, minute or second.
            (32u8..=99).prop_map(|day| format!("Wed, {day} Oct 2026 07:28:00 GMT")),
            (24u8..=99).prop_map(|hour| format!("Wed, 21 Oct 2026 {hour}:28:00 GMT")),
            (60u8..=99).prop_map(|minute| format!("Wed, 21 Oct 2026 07:{minute}:00 GMT")),
            (60u8..=99).prop_map(|second| format!("Wed, 21 Oct 2026 07:28:{second} GMT")),
            "[A-Z][a-z]{2}".prop_filter("not a month", |month| !MONTHS.contains(&month.as_str()))
                .prop_map(|month| format!("Wed, 21 {month} 2026 07:28:00 GMT")),
        ],
        now in moments(),
    ) {
        let value = HeaderValue::from_str(&junk).expect("printable ASCII is a header value");
        prop_assert_eq!(parse_retry_after(&value, now), None, "{:?}", junk);
    }
}
