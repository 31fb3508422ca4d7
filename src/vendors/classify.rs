//! The verdict of a [`Surface`]'s table (what
//! [`Profile::verdict`](crate::Profile::verdict) says of the built-in tables), and the tables'
//! tests.

use crate::core::answer::Answer;
use crate::core::classify;
use crate::core::matrix::Verdict;
use crate::vendors::Surface;

/// The verdict of `surface`'s retry matrix on `answer`.
pub(crate) fn classify(surface: Surface, answer: &Answer) -> Verdict {
    classify::verdict(surface.profile(), answer)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http::{HeaderMap, header};

    use std::time::SystemTime;

    use bytes::Bytes;
    use http::StatusCode;

    use super::*;
    use crate::core::attempt::TransportKind;
    use crate::core::error::{Error, ErrorKind};
    use crate::core::matrix::Rule;

    fn rule_for(surface: Surface, answer: &Answer) -> &'static Rule {
        classify::rule_for(surface.profile(), answer)
    }

    fn final_error(surface: Surface, answer: &Answer, now: SystemTime) -> Error {
        classify::final_error(surface.profile(), answer, now)
    }

    fn error_codes(surface: Surface, body: &[u8]) -> Vec<String> {
        surface.profile().codes(body)
    }
    use crate::core::matrix::When::{self, Code, NoResponse};
    use ErrorKind::{
        ClientError, Forbidden, GraphQl, InProgress, KeyReused, NotFound, PayloadTooLarge, Server,
        Unauthorized, UnexpectedStatus, Unprocessable,
    };
    use Verdict::{ReexchangeOnce, RetryAfterBackoff, RetryAfterServerWait, Stop, Success};

    const ALL: [Surface; 4] = [
        Surface::JsonApiWrite,
        Surface::Webhook,
        Surface::Read,
        Surface::GraphQl,
    ];

    fn answer(status: u16, body: &'static str) -> Answer {
        let status = StatusCode::from_u16(status).expect("valid status");
        Answer::response(
            status,
            HeaderMap::new(),
            Bytes::from_static(body.as_bytes()),
        )
    }

    fn json_api_error(code: &'static str) -> String {
        format!(r#"{{"errors":[{{"status":"409","code":"{code}","title":"t"}}]}}"#)
    }

    fn verdict(surface: Surface, status: u16, body: &'static str) -> Verdict {
        classify(surface, &answer(status, body))
    }

    #[test]
    fn retries_with_the_same_key_when_no_answer_came_back() {
        for surface in ALL {
            for kind in [
                TransportKind::Connect,
                TransportKind::Timeout,
                TransportKind::Closed,
            ] {
                let verdict = classify(surface, &Answer::no_response(kind));
                assert_eq!(verdict, RetryAfterBackoff, "{surface}");
            }
        }
    }

    #[test]
    fn waits_retry_after_on_429_everywhere() {
        for surface in ALL {
            assert_eq!(verdict(surface, 429, ""), RetryAfterServerWait, "{surface}");
        }
    }

    #[test]
    fn backs_off_on_500_502_503_504_everywhere() {
        for surface in ALL {
            for status in [500, 502, 503, 504] {
                assert_eq!(
                    verdict(surface, status, ""),
                    RetryAfterBackoff,
                    "{surface} {status}"
                );
            }
        }
    }

    #[test]
    fn retries_idempotency_unavailable_with_the_same_key() {
        let body = r#"{"errors":[{"status":"503","code":"idempotency_unavailable"}]}"#;
        let rule = rule_for(Surface::JsonApiWrite, &answer(503, body));
        assert_eq!(rule.verdict, RetryAfterBackoff);
        assert_eq!(rule.action, "Nothing was written; retry with the same key");
    }

    #[test]
    fn stops_on_a_5xx_that_is_not_transient() {
        for surface in ALL {
            assert_eq!(verdict(surface, 501, ""), Stop(Server), "{surface}");
        }
    }

    #[test]
    fn succeeds_on_2xx() {
        for surface in ALL {
            for status in [200, 201, 202, 204] {
                assert_eq!(verdict(surface, status, ""), Success, "{surface} {status}");
            }
        }
    }

    #[test]
    fn reexchanges_once_on_any_401_for_writes_reads_and_graphql() {
        for surface in [Surface::JsonApiWrite, Surface::Read, Surface::GraphQl] {
            assert_eq!(verdict(surface, 401, ""), ReexchangeOnce, "{surface}");
            let body = r#"{"errors":[{"code":"unauthorized"}]}"#;
            assert_eq!(verdict(surface, 401, body), ReexchangeOnce, "{surface}");
        }
    }

    #[test]
    fn reexchanges_webhook_missing_credentials_but_stops_on_unauthorized() {
        let missing = verdict(Surface::Webhook, 401, r#"{"error":"missing_credentials"}"#);
        let unauthorized = verdict(Surface::Webhook, 401, r#"{"error":"Unauthorized"}"#);
        let unreadable = verdict(Surface::Webhook, 401, "<html>401</html>");

        assert_eq!(missing, ReexchangeOnce);
        assert_eq!(unauthorized, Stop(Unauthorized));
        assert_eq!(unreadable, Stop(Unauthorized));
    }

    #[test]
    fn stops_on_403_without_retrying() {
        for surface in ALL {
            assert_eq!(verdict(surface, 403, ""), Stop(Forbidden), "{surface}");
        }
        let body = r#"{"error":"Insufficient scope"}"#;
        assert_eq!(verdict(Surface::Webhook, 403, body), Stop(Forbidden));
    }

    #[test]
    fn stops_on_404_without_retrying() {
        for surface in ALL {
            assert_eq!(verdict(surface, 404, ""), Stop(NotFound), "{surface}");
        }
    }

    #[test]
    fn tells_key_reused_from_in_progress() {
        let reused = json_api_error("idempotency_key_reused");
        let in_progress = json_api_error("idempotency_key_in_progress");
        let write = |body: &str| {
            let body = Bytes::copy_from_slice(body.as_bytes());
            classify(
                Surface::JsonApiWrite,
                &Answer::response(StatusCode::CONFLICT, HeaderMap::new(), body),
            )
        };

        assert_eq!(write(&reused), Stop(KeyReused));
        assert_eq!(write(&in_progress), Stop(InProgress));
        assert_eq!(
            write(r#"{"errors":[{"code":"version_conflict"}]}"#),
            Stop(ClientError)
        );
    }

    #[test]
    fn waits_for_in_progress_only_when_opted_in() {
        assert_eq!(
            Stop(InProgress).waiting_for_in_progress(),
            RetryAfterServerWait
        );
        assert_eq!(Stop(KeyReused).waiting_for_in_progress(), Stop(KeyReused));
        assert_eq!(Success.waiting_for_in_progress(), Success);
    }

    #[test]
    fn stops_on_413_and_422_without_retrying() {
        for surface in [Surface::JsonApiWrite, Surface::Webhook] {
            assert_eq!(
                verdict(surface, 413, ""),
                Stop(PayloadTooLarge),
                "{surface}"
            );
            assert_eq!(verdict(surface, 422, ""), Stop(Unprocessable), "{surface}");
        }
    }

    #[test]
    fn stops_on_any_other_4xx_without_retrying() {
        for surface in ALL {
            for status in [400, 405, 408, 410, 451] {
                assert_eq!(
                    verdict(surface, status, ""),
                    Stop(ClientError),
                    "{surface} {status}"
                );
            }
        }
    }

    #[test]
    fn stops_on_statuses_outside_the_contract() {
        for surface in ALL {
            for status in [100, 301, 302, 304, 600] {
                let verdict = verdict(surface, status, "");
                assert_eq!(verdict, Stop(UnexpectedStatus), "{surface} {status}");
            }
        }
    }

    #[test]
    fn graphql_validation_parse_and_complexity_errors_are_permanent_as_400_or_200() {
        for code in [
            "GRAPHQL_VALIDATION_FAILED",
            "GRAPHQL_PARSE_FAILED",
            "QUERY_COMPLEXITY_EXCEEDED",
        ] {
            let body =
                format!(r#"{{"errors":[{{"message":"m","extensions":{{"code":"{code}"}}}}]}}"#);
            for status in [StatusCode::OK, StatusCode::BAD_REQUEST] {
                let body = Bytes::from(body.clone());
                let answer = Answer::response(status, HeaderMap::new(), body);
                assert_eq!(
                    classify(Surface::GraphQl, &answer),
                    Stop(GraphQl),
                    "{code} {status}"
                );
            }
        }
    }

    #[test]
    fn graphql_200_with_other_errors_or_data_is_success() {
        let field_error = r#"{"data":{"factQuery":null},"errors":[{"message":"m","extensions":{"code":"NOT_FOUND"}}]}"#;
        assert_eq!(verdict(Surface::GraphQl, 200, field_error), Success);
        assert_eq!(
            verdict(Surface::GraphQl, 200, r#"{"data":{"factQuery":[]}}"#),
            Success
        );
        assert_eq!(
            verdict(Surface::GraphQl, 400, "not json"),
            Stop(ClientError)
        );
    }

    #[test]
    fn graphql_codes_on_other_surfaces_mean_nothing() {
        let body = r#"{"errors":[{"extensions":{"code":"GRAPHQL_PARSE_FAILED"}}]}"#;
        assert_eq!(verdict(Surface::Read, 200, body), Success);
    }

    #[test]
    fn reads_error_codes_the_way_each_surface_writes_them() {
        let json_api = br#"{"errors":[{"code":"a"},{"title":"no code"},{"code":"b"}]}"#;
        let webhook = br#"{"error":"Trigger not found"}"#;
        let graphql = br#"{"errors":[{"message":"m","extensions":{"code":"C"}}]}"#;

        assert_eq!(error_codes(Surface::JsonApiWrite, json_api), ["a", "b"]);
        assert_eq!(error_codes(Surface::Read, json_api), ["a", "b"]);
        assert_eq!(
            error_codes(Surface::Webhook, webhook),
            ["Trigger not found"]
        );
        assert_eq!(error_codes(Surface::GraphQl, graphql), ["C"]);
        assert!(error_codes(Surface::Webhook, b"").is_empty());
        assert!(error_codes(Surface::JsonApiWrite, b"{\"errors\":7}").is_empty());
    }

    #[test]
    fn every_table_covers_every_status_and_no_response() {
        for &surface in Surface::all() {
            let rules = surface.rules();
            assert!(
                rules.iter().any(|rule| rule.when == NoResponse),
                "{surface}"
            );
            assert!(
                rules.iter().any(|rule| rule.when == When::Other),
                "{surface}"
            );
        }
    }

    #[test]
    fn no_two_rows_of_one_rank_overlap() {
        for &surface in Surface::all() {
            for status in 100..=599 {
                for codes in [Vec::new(), known_codes(surface)] {
                    let mut ranks: Vec<u8> = surface
                        .rules()
                        .iter()
                        .filter(|rule| rule.when.matches(Some(status), &codes))
                        .filter(|rule| !matches!(rule.when, Code(..)))
                        .map(|rule| rule.when.rank())
                        .collect();
                    let count = ranks.len();
                    ranks.dedup();
                    assert_eq!(ranks.len(), count, "{surface} {status}");
                }
            }
        }
    }

    #[test]
    fn the_index_finds_the_row_a_row_by_row_lookup_finds() {
        use crate::core::matrix::{lookup, lookup_by_rows};
        for &surface in Surface::all() {
            let matrix = &surface.profile().rules;
            for status in 100..=999 {
                let status = StatusCode::from_u16(status).unwrap();
                for codes in [Vec::new(), known_codes(surface)] {
                    for answer in [
                        Answer::response(status, HeaderMap::new(), Bytes::from_static(b"{}")),
                        Answer::too_large(status, HeaderMap::new()),
                    ] {
                        let indexed = lookup(matrix, &answer, |_| codes.clone());
                        let by_rows = lookup_by_rows(matrix, &answer, |_| codes.clone());
                        assert!(
                            std::ptr::eq(indexed, by_rows),
                            "{surface} {status} {codes:?}"
                        );
                    }
                }
            }
            let none = Answer::no_response(TransportKind::Timeout);
            let indexed = lookup(matrix, &none, |_| Vec::new());
            assert!(std::ptr::eq(
                indexed,
                lookup_by_rows(matrix, &none, |_| Vec::new())
            ));
        }
    }

    fn known_codes(surface: Surface) -> Vec<String> {
        surface
            .rules()
            .iter()
            .filter_map(|rule| match rule.when {
                Code(_, code) => Some(code.to_owned()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn final_error_of_a_stop_quotes_the_code_and_the_documents_action() {
        let body = Bytes::from(json_api_error("idempotency_key_in_progress"));
        let answer = Answer::response(StatusCode::CONFLICT, HeaderMap::new(), body.clone());
        let error = final_error(Surface::JsonApiWrite, &answer, SystemTime::now());

        assert_eq!(error.kind(), InProgress);
        assert_eq!(
            error.to_string(),
            "idempotency key in progress (409 idempotency_key_in_progress): retry later with the same key"
        );
        assert_eq!(error.status(), Some(StatusCode::CONFLICT));
        assert_eq!(error.body(), Some(&body));
    }

    #[test]
    fn an_unsupported_trigger_authentication_stops_saying_a_re_signed_retry_cannot_succeed() {
        let refused = answer(422, r#"{"error":"Unsupported trigger authentication"}"#);
        assert_eq!(classify(Surface::Webhook, &refused), Stop(Unprocessable));
        let error = final_error(Surface::Webhook, &refused, SystemTime::now());
        assert_eq!(
            error.to_string(),
            "unprocessable request (422 Unsupported trigger authentication): fix the trigger's authentication or the signing secret; a re-signed retry with the same secret cannot succeed"
        );
        let failed = answer(422, r#"{"error":"Processing failed"}"#);
        let error = final_error(Surface::Webhook, &failed, SystemTime::now());
        assert!(
            error
                .to_string()
                .ends_with("fix payload or trigger configuration")
        );
    }

    #[test]
    fn final_error_names_a_missing_webhook_trigger() {
        let answer = answer(404, r#"{"error":"Trigger not found"}"#);
        let error = final_error(Surface::Webhook, &answer, SystemTime::now());
        assert_eq!(error.kind(), NotFound);
        assert_eq!(
            error.to_string(),
            "webhook trigger not found (404 Trigger not found): confirm token and active workflow; do not retry unchanged"
        );
    }

    #[test]
    fn final_error_of_a_retryable_answer_keeps_retry_after() {
        let mut headers = HeaderMap::new();
        headers.insert(header::RETRY_AFTER, http::HeaderValue::from_static("7"));
        let answer = Answer::response(StatusCode::TOO_MANY_REQUESTS, headers, Bytes::new());
        let error = final_error(Surface::Webhook, &answer, SystemTime::now());

        assert_eq!(error.kind(), ErrorKind::RateLimited);
        assert_eq!(error.retry_after(), Some(Duration::from_secs(7)));
        assert_eq!(error.to_string(), "rate limited (429)");
        assert_eq!(error.body(), None);
    }

    #[test]
    fn final_error_of_a_second_401_is_unauthorized() {
        let answer = answer(401, r#"{"error":"missing_credentials"}"#);
        let error = final_error(Surface::Webhook, &answer, SystemTime::now());
        assert_eq!(error.kind(), Unauthorized);
        let error = final_error(
            Surface::JsonApiWrite,
            &super::tests::answer(401, ""),
            SystemTime::now(),
        );
        assert_eq!(error.kind(), Unauthorized);
    }

    #[test]
    fn final_error_without_an_answer_is_transport() {
        let answer = Answer::no_response(TransportKind::Timeout);
        let error = final_error(Surface::Read, &answer, SystemTime::now());
        assert_eq!(error.kind(), ErrorKind::Transport);
        assert_eq!(error.to_string(), "no answer from the server (timeout)");
        assert_eq!(error.status(), None);
    }

    #[test]
    fn final_error_of_an_exhausted_5xx_is_server() {
        let error = final_error(Surface::JsonApiWrite, &answer(503, ""), SystemTime::now());
        assert_eq!(error.kind(), Server);
        assert!(error.is_retryable());
    }

    #[test]
    fn answer_reads_request_id_and_retry_after() {
        let mut headers = HeaderMap::new();
        headers.insert("x-request-id", http::HeaderValue::from_static("req-9"));
        headers.insert(header::RETRY_AFTER, http::HeaderValue::from_static("2"));
        let answer = Answer::response(StatusCode::SERVICE_UNAVAILABLE, headers, Bytes::new());

        assert_eq!(answer.request_id(), Some("req-9"));
        assert_eq!(
            answer.retry_after(SystemTime::now()),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            Answer::no_response(TransportKind::Closed).request_id(),
            None
        );
        assert_eq!(
            Answer::no_response(TransportKind::Closed).retry_after(SystemTime::now()),
            None
        );
    }

    fn modulify(status: u16, code: &str) -> Verdict {
        let body = format!(r#"{{"data":null,"error":{{"code":"{code}","message":"m"}}}}"#);
        let status = StatusCode::from_u16(status).unwrap();
        let answer = Answer::response(status, HeaderMap::new(), Bytes::from(body));
        classify(Surface::Modulify, &answer)
    }

    #[test]
    fn modulify_stops_on_a_key_reused_with_another_body_as_422_not_409() {
        assert_eq!(modulify(422, "idempotency_key_reused"), Stop(KeyReused));
        assert_eq!(modulify(422, "validation_failed"), Stop(Unprocessable));
        // Hodoflow's reuse code on a 409 means nothing to Modulify.
        assert_eq!(modulify(409, "idempotency_key_reused"), Stop(ClientError));
    }

    #[test]
    fn modulify_waits_out_a_key_in_progress_and_a_spent_budget() {
        assert_eq!(
            modulify(409, "idempotency_key_in_progress"),
            RetryAfterServerWait
        );
        assert_eq!(modulify(429, "rate_limited"), RetryAfterServerWait);
        for status in [500, 502, 503, 504] {
            assert_eq!(modulify(status, "internal_error"), RetryAfterBackoff);
        }
        let none = classify(
            Surface::Modulify,
            &Answer::no_response(TransportKind::Closed),
        );
        assert_eq!(none, RetryAfterBackoff);
    }

    #[test]
    fn modulify_stops_on_a_static_token_refused_and_on_a_bad_key_or_body() {
        assert_eq!(modulify(401, "unauthorized"), Stop(Unauthorized));
        assert_eq!(
            modulify(400, "invalid_idempotency_key"),
            Stop(ErrorKind::InvalidInput)
        );
        assert_eq!(modulify(400, "invalid_request"), Stop(Unprocessable));
        assert_eq!(modulify(403, "forbidden"), Stop(Forbidden));
        assert_eq!(modulify(404, "not_found"), Stop(NotFound));
        assert_eq!(modulify(413, "payload_too_large"), Stop(PayloadTooLarge));
        assert_eq!(modulify(200, ""), Success);
    }

    #[test]
    fn a_modulify_key_in_progress_left_when_the_budget_ends_is_in_progress() {
        let body = r#"{"data":null,"error":{"code":"idempotency_key_in_progress","message":"m"}}"#;
        let answer = Answer::response(
            StatusCode::CONFLICT,
            HeaderMap::new(),
            Bytes::from_static(body.as_bytes()),
        );
        let error = final_error(Surface::Modulify, &answer, SystemTime::now());
        assert_eq!(error.kind(), InProgress, "{error}");
        assert!(
            error.to_string().contains("idempotency_key_in_progress"),
            "{error}"
        );
    }
}
