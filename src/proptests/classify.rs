//! Classification: total over every answer of every surface, and each profile's fixed rows.

use super::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]
    #[test]
    fn the_fields_read_in_one_pass_are_those_read_by_name(headers in headers()) {
        use crate::core::answer::{Fields, RATE_LIMIT, RATE_LIMIT_POLICY, X_REQUEST_ID};
        let fields = Fields::of(&headers);
        prop_assert_eq!(fields.retry_after(), headers.get(http::header::RETRY_AFTER));
        prop_assert_eq!(
            fields.request_id(),
            headers.get(X_REQUEST_ID).and_then(|id| id.to_str().ok())
        );
        prop_assert!(fields.rate_limit().eq(headers.get_all(RATE_LIMIT)));
        prop_assert!(fields.rate_limit_policy().eq(headers.get_all(RATE_LIMIT_POLICY)));
        let mut policy = headers.get_all(RATE_LIMIT_POLICY).iter();
        let one = match (policy.next(), policy.next()) {
            (Some(line), None) => Some(line),
            _ => None,
        };
        prop_assert_eq!(fields.rate_limit_policy_line(), one);
    }

    #[test]
    fn classification_is_total_over_every_answer(
        surface in select(surfaces()),
        status in 100u16..=599,
        headers in headers(),
        body in bodies(),
        now in moments(),
    ) {
        let status = StatusCode::from_u16(status).expect("100 to 599 is a status");
        let answer = Answer::response(status, headers, body);
        let verdict = classify(surface, &answer);
        prop_assert!(
            surface.rules().iter().any(|rule| rule.verdict == verdict),
            "{:?} is no verdict of the {} table",
            verdict,
            surface
        );
        let _ = answer.retry_after(now);
        let error = final_error(surface, &answer, now);
        prop_assert_eq!(error.status(), Some(status));
    }

    #[test]
    fn no_answer_is_retried_with_backoff_on_every_surface(
        surface in select(surfaces()),
        kind in select(TRANSPORT_KINDS.to_vec()),
        now in moments(),
    ) {
        let answer = Answer::no_response(kind);
        prop_assert_eq!(classify(surface, &answer), Verdict::RetryAfterBackoff);
        prop_assert_eq!(answer.retry_after(now), None);
        prop_assert_eq!(final_error(surface, &answer, now).kind(), ErrorKind::Transport);
    }

    #[test]
    fn a_2xx_webhook_answer_is_success(
        status in 200u16..=299,
        headers in headers(),
        body in bodies(),
    ) {
        let status = StatusCode::from_u16(status).expect("2xx is a status");
        let answer = Answer::response(status, headers, body);
        prop_assert_eq!(classify(Surface::Webhook, &answer), Verdict::Success);
    }

    #[test]
    fn a_2xx_modulify_answer_is_success_whatever_its_body(
        status in 200u16..=299,
        headers in headers(),
        body in bodies(),
    ) {
        let status = StatusCode::from_u16(status).expect("2xx is a status");
        let answer = Answer::response(status, headers, body);
        prop_assert_eq!(classify(Surface::Modulify, &answer), Verdict::Success);
    }

    #[test]
    fn modulify_tells_409_in_progress_and_422_reuse_by_their_code_alone(
        status in select(vec![409u16, 422]),
        headers in headers(),
        body in modulify_bodies(),
    ) {
        let codes = Surface::Modulify.profile().codes(&body);
        let answer = Answer::response(StatusCode::from_u16(status).expect("a status"), headers, body);
        let verdict = classify(Surface::Modulify, &answer);
        let expected = match status {
            409 if codes.iter().any(|code| code == "idempotency_key_in_progress") => {
                Verdict::RetryAfterServerWait
            }
            409 => Verdict::Stop(ErrorKind::ClientError),
            _ if codes.iter().any(|code| code == "idempotency_key_reused") => {
                Verdict::Stop(ErrorKind::KeyReused)
            }
            _ => Verdict::Stop(ErrorKind::Unprocessable),
        };
        prop_assert_eq!(verdict, expected);
    }

    #[test]
    fn modulify_never_exchanges_on_401_and_always_retries_429_500_502_503_504(
        status in select(vec![401u16, 429, 500, 502, 503, 504]),
        headers in headers(),
        body in modulify_bodies(),
        kind in select(TRANSPORT_KINDS.to_vec()),
    ) {
        let answer = Answer::response(StatusCode::from_u16(status).expect("a status"), headers, body);
        let verdict = classify(Surface::Modulify, &answer);
        match status {
            401 => prop_assert_eq!(verdict, Verdict::Stop(ErrorKind::Unauthorized)),
            429 => prop_assert_eq!(verdict, Verdict::RetryAfterServerWait),
            _ => prop_assert_eq!(verdict, Verdict::RetryAfterBackoff),
        }
        let lost = Answer::no_response(kind);
        prop_assert_eq!(classify(Surface::Modulify, &lost), Verdict::RetryAfterBackoff);
    }

    #[test]
    fn statuses_403_404_413_422_always_stop_on_every_surface(
        surface in select(surfaces()),
        status in select(vec![403u16, 404, 413, 422]),
        headers in headers(),
        body in bodies(),
    ) {
        let answer = Answer::response(
            StatusCode::from_u16(status).expect("a status"),
            headers,
            body,
        );
        let verdict = classify(surface, &answer);
        prop_assert!(matches!(verdict, Verdict::Stop(_)), "{} on {} gave {:?}", status, surface, verdict);
        match status {
            403 => prop_assert_eq!(verdict, Verdict::Stop(ErrorKind::Forbidden)),
            404 => prop_assert_eq!(verdict, Verdict::Stop(ErrorKind::NotFound)),
            _ => {}
        }
    }
}
