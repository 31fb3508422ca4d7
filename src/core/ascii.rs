//! Whole-text tests of ASCII ranges, a word of eight bytes at a time: the texts a server sent
//! (`redact.rs`) and the keys a caller passed (`key/`) are read on every call, and are usually
//! all in range.

/// Whether every byte is printable ASCII (`' '..='~'`).
pub(crate) fn printable(bytes: &[u8]) -> bool {
    up_to_tilde(bytes, b' ')
}

/// Whether every byte is visible ASCII (`'!'..='~'`).
pub(crate) fn visible(bytes: &[u8]) -> bool {
    up_to_tilde(bytes, b'!')
}

/// Whether every byte is in `low..='~'`, for a `low` of at most 0x80.
fn up_to_tilde(bytes: &[u8], low: u8) -> bool {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    debug_assert!(low <= 0x80);
    let words = bytes.chunks_exact(8);
    let tail = words.remainder();
    words
        .map(|word| u64::from_ne_bytes(word.try_into().expect("eight bytes")))
        .all(|word| {
            // A byte under `low`, or 0x7F (zero once xored with 0x7F), sets its high bit in the
            // subtraction when its own high bit was clear; a byte of 0x80 or more is not ASCII.
            let below = word.wrapping_sub(u64::from(low) * ONES);
            let delete = (word ^ (0x7F * ONES)).wrapping_sub(ONES);
            (word | ((below | delete) & !word)) & HIGH == 0
        })
        && tail.iter().all(|byte| (low..=b'~').contains(byte))
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The word-at-a-time tests say what byte-at-a-time ones say, at every length and
        /// offset, about bytes around each edge of the ranges.
        #[test]
        fn words_read_as_bytes(
            mut bytes in proptest::collection::vec(0x21u8..=0x7e, 0..40),
            odd in proptest::option::of((
                proptest::num::usize::ANY,
                proptest::sample::select(vec![0x00u8, 0x1f, 0x20, 0x21, 0x7e, 0x7f, 0x80, 0xa0, 0xff]),
            )),
        ) {
            if let Some((at, byte)) = odd && !bytes.is_empty() {
                let at = at % bytes.len();
                bytes[at] = byte;
            }
            let printable_bytes = bytes.iter().all(|byte| (b' '..=b'~').contains(byte));
            proptest::prop_assert_eq!(printable(&bytes), printable_bytes);
            let visible_bytes = bytes.iter().all(u8::is_ascii_graphic);
            proptest::prop_assert_eq!(visible(&bytes), visible_bytes);
        }
    }
}
