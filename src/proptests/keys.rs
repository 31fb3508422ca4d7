//! Keys: an idempotency key or a delivery ID round-trips or is refused as invalid input.

use super::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]
    #[test]
    fn an_idempotency_key_round_trips_or_is_refused_as_invalid_input(
        text in prop_oneof![
            "[!-~]{1,255}",
            "[!-~]{253,257}",
            "[!-~]{256,300}",
            "[ -~]{0,20}",
            ".{0,40}",
            any::<String>(),
        ],
    ) {
        let valid = (1..=255).contains(&text.len()) && text.bytes().all(|byte| byte.is_ascii_graphic());
        match IdempotencyKey::new(&text) {
            Ok(key) => {
                prop_assert!(valid, "accepted {:?}", text);
                prop_assert_eq!(key.as_str(), text.as_str());
                prop_assert_eq!(key.to_header_value(), text.as_bytes());
                prop_assert_eq!(key.to_string(), text);
            }
            Err(error) => {
                prop_assert!(!valid, "refused {:?}: {}", text, error);
                prop_assert_eq!(error.kind(), ErrorKind::InvalidInput);
            }
        }
    }

    #[test]
    fn a_delivery_id_from_headers_follows_precedence_round_trips_or_is_refused(
        pairs in prop::collection::vec(
            (
                select(vec![
                    "idempotency-key",
                    "x-github-delivery",
                    "x-shopify-webhook-id",
                    "x-twilio-idempotency-token",
                    "x-request-id",
                ]),
                prop_oneof![
                    "[!-~]{1,40}".prop_map(String::into_bytes),
                    "[ \t]{0,2}[!-~]{1,20}[ \t]{0,2}".prop_map(String::into_bytes),
                    "[ \t]{0,3}".prop_map(String::into_bytes),
                    "[!-~]{250,260}".prop_map(String::into_bytes),
                    header_bytes(20),
                ],
            ),
            0..6,
        ),
    ) {
        let mut headers = HeaderMap::new();
        for (name, value) in &pairs {
            headers.append(*name, header_value(value));
        }
        // The model: the first header in precedence order with a non-blank value, its first
        // non-blank value.
        let chosen = DeliveryHeader::PRECEDENCE.iter().find_map(|&header| {
            pairs
                .iter()
                .find(|(name, value)| *name == header.name() && !value.trim_ascii().is_empty())
                .map(|(_, value)| (header, value.trim_ascii()))
        });
        match (chosen, DeliveryId::from_headers(&headers)) {
            (None, Ok(found)) => prop_assert_eq!(found, None),
            (Some((header, value)), Ok(Some(id))) => {
                prop_assert_eq!(id.header(), header);
                prop_assert_eq!(id.key().as_str().as_bytes(), value);
                prop_assert_eq!(id.key().to_header_value(), value);
            }
            (Some((header, value)), Err(error)) => {
                let valid = value.len() <= 255 && value.iter().all(u8::is_ascii_graphic);
                prop_assert!(!valid, "refused a valid {} value {:?}", header, value);
                prop_assert_eq!(error.kind(), ErrorKind::InvalidInput);
                prop_assert!(error.to_string().contains(header.name()), "{}", error);
            }
            (chosen, found) => prop_assert!(false, "model {:?}, found {:?}", chosen, found),
        }
    }
}
