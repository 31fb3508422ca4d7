//! Terminal safety: what a server (or a stored job, or a file) said, made inert before a
//! terminal sees it.
//!
//! In text mode this tool prints text it did not write: a server's error messages, titles and
//! request IDs, a run's ID, the catalogue's descriptions, an outbox job's event ID and error.
//! A hostile or compromised server could put terminal controls in them: `ESC [2J` clears the
//! screen, `CR` and cursor moves (`ESC [A`) rewrite earlier lines, `OSC 0` sets the window
//! title and `OSC 52` writes the clipboard. So each such value passes [`field`] where it is put
//! into a line: a value with a control character in it is shown escaped as a whole, Rust-style
//! (`\x1b[31m`, `\n`, `\u{9b}`, a backslash as `\\`), so the text shows the value it is and
//! never another one, and it cannot forge a line of its own; a value is bounded in length. And
//! every line written in text mode passes [`strip`] at the one place it is written
//! (`redact.rs`'s `print` and `eprint`, and the log writer in `logging.rs`): a last net that
//! removes what no field should hold any more.
//!
//! [`strip`] removes every C0 control character but tab (and the line feed between this tool's
//! own lines), DEL, every C1 control character (U+0080 to U+009F), and every escape sequence
//! whole, in its 7-bit (`ESC [`, `ESC ]` ...) and 8-bit (U+009B, U+009D ...) forms: CSI
//! sequences up to their final byte, OSC, DCS, SOS, PM and APC strings up to their terminator
//! (BEL, `ESC \` or U+009C; an unterminated one to the end of the text, as a terminal would
//! swallow it), and the other escape sequences (`ESC c`, `ESC 7`, `ESC ( B`).
//!
//! Bounded: a field at [`FIELD_LIMIT`] bytes, any line written at [`LINE_LIMIT`] bytes; a cut
//! says how many bytes it left out. `--json` output keeps its exact values: JSON escapes every
//! C0 character (`\u001b`), and [`escape_json_controls`] escapes DEL and C1 as well, so its text
//! is inert.

use std::borrow::Cow;

/// The most bytes of one server-provided or stored field shown in a line.
pub(crate) const FIELD_LIMIT: usize = 2048;

/// The most bytes of one line written in text mode (a log line included).
pub(crate) const LINE_LIMIT: usize = 16 * 1024;

const ESC: char = '\u{1b}';
const BEL: char = '\u{7}';
/// The 8-bit String Terminator.
const ST: char = '\u{9c}';

/// One server-provided or stored value, for a line of text: as it is when it holds no control
/// character, otherwise escaped whole ([`escape`]); at most [`FIELD_LIMIT`] bytes.
pub(crate) fn field(text: &str) -> Cow<'_, str> {
    match escape(text) {
        Cow::Borrowed(plain) => bound(plain, FIELD_LIMIT),
        Cow::Owned(escaped) => Cow::Owned(bound_escaped(&escaped, FIELD_LIMIT).into_owned()),
    }
}

/// `text` as it is when it holds no control character and no bidirectional formatting
/// character (which reorders what a reader sees); otherwise each of them written as an escape
/// (`\n`, `\r`, `\t`, `\x1b`, `\u{9b}`, `\u{202e}`) and each backslash doubled, so what is
/// shown reads back as the value, and no escape in it can be taken for another.
pub(crate) fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| is_control(c) || is_bidi(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\0'..='\u{1f}' | '\u{7f}' => out.push_str(&format!("\\x{:02x}", u32::from(c))),
            '\u{80}'..='\u{9f}' => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c if is_bidi(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// `text` without escape sequences and control characters other than tab, and other than the
/// line feed when `lines` (a carriage return is always removed: it rewrites a line). Without
/// `lines`, a line break (`\n`, `\r\n`, `\r`) becomes one space.
pub(crate) fn strip(text: &str, lines: bool) -> Cow<'_, str> {
    let unsafe_char = |c: char| is_control(c) && c != '\t' && !(lines && c == '\n');
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\t' => out.push(c),
            '\n' if lines => out.push(c),
            '\n' | '\r' => {
                if c == '\r' && chars.peek() == Some(&'\n') {
                    chars.next();
                }
                if !lines {
                    out.push(' ');
                }
            }
            ESC => match chars.peek().copied() {
                Some('[') => {
                    chars.next();
                    skip_csi(&mut chars);
                }
                Some(']' | 'P' | 'X' | '^' | '_') => {
                    chars.next();
                    skip_string(&mut chars);
                }
                Some(' '..='/') => {
                    // nF: intermediates, then one final byte.
                    while chars.next_if(|c| matches!(c, ' '..='/')).is_some() {}
                    chars.next_if(|c| matches!(c, '0'..='~'));
                }
                Some('0'..='~') => {
                    chars.next();
                }
                _ => {}
            },
            '\u{9b}' => skip_csi(&mut chars),
            '\u{90}' | '\u{98}' | '\u{9d}' | '\u{9e}' | '\u{9f}' => skip_string(&mut chars),
            c if is_control(c) => {}
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Each line of `text` cut to `limit` bytes (on a character boundary), saying what was cut.
pub(crate) fn bound(text: &str, limit: usize) -> Cow<'_, str> {
    bound_with(text, limit, |_, end| end)
}

/// `escaped`, a value [`escape`] wrote, cut as [`bound`] cuts, but never inside an escape
/// (`\x1b`, `\u{202e}`, `\\`): half an escape would read back as another value.
fn bound_escaped(escaped: &str, limit: usize) -> Cow<'_, str> {
    bound_with(escaped, limit, |line, end| {
        let bytes = line.as_bytes();
        let mut at = 0;
        while at < end {
            let len = match bytes[at] {
                b'\\' => match bytes.get(at + 1) {
                    Some(b'x') => 4,
                    Some(b'u') => line[at..].find('}').map_or(2, |close| close + 1),
                    _ => 2,
                },
                _ => 1,
            };
            if at + len > end {
                return at;
            }
            at += len;
        }
        end
    })
}

/// Each line of `text` cut to `limit` bytes, where `cut_at` moves the cut back from the
/// character boundary at or before `limit`.
fn bound_with(text: &str, limit: usize, cut_at: impl Fn(&str, usize) -> usize) -> Cow<'_, str> {
    if text.split('\n').all(|line| line.len() <= limit) {
        return Cow::Borrowed(text);
    }
    let cut: Vec<String> = text
        .split('\n')
        .map(|line| {
            if line.len() <= limit {
                return line.to_owned();
            }
            let mut end = limit;
            while !line.is_char_boundary(end) {
                end -= 1;
            }
            let end = cut_at(line, end);
            format!("{}… ({} bytes cut)", &line[..end], line.len() - end)
        })
        .collect();
    Cow::Owned(cut.join("\n"))
}

/// `json`, serialized JSON, with DEL, the C1 controls and the bidirectional formatting
/// characters written as `\u007f` ... `\u009f`, `\u202e` ...
///
/// serde_json escapes the C0 controls but writes DEL, C1 and the bidirectional formatting
/// characters as they are: a terminal may take U+009B for CSI, and U+202E reorders what the
/// reader sees. Outside a string JSON has no such character, so the text keeps its exact value:
/// the same JSON, each of them escaped.
pub(crate) fn escape_json_controls(json: &str) -> Cow<'_, str> {
    let hidden = |c: char| matches!(c, '\u{7f}'..='\u{9f}') || is_bidi(c);
    if !json.chars().any(hidden) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        match c {
            c if hidden(c) => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A bidirectional formatting character: the marks, embeddings, overrides and isolates, and
/// the line and paragraph separators.
pub(crate) fn is_bidi(c: char) -> bool {
    matches!(c,
        '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        | '\u{2028}' | '\u{2029}')
}

/// A C0 control, DEL or a C1 control.
fn is_control(c: char) -> bool {
    matches!(c, '\0'..='\u{1f}' | '\u{7f}'..='\u{9f}')
}

/// Skips a CSI sequence after its introducer: parameter and intermediate bytes, then the final
/// byte. Anything else ends it where it stands.
fn skip_csi(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while chars
        .next_if(|c| matches!(c, '0'..='?' | ' '..='/'))
        .is_some()
    {}
    chars.next_if(|c| matches!(c, '@'..='~'));
}

/// Skips a control string (OSC, DCS, SOS, PM, APC) after its introducer, its terminator
/// included: BEL, `ESC \` or ST; an unterminated one runs to the end.
fn skip_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while let Some(c) = chars.next() {
        match c {
            BEL | ST => return,
            ESC => {
                chars.next_if_eq(&'\\');
                return;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_and_unicode_are_kept_as_they_are() {
        for text in ["", "accepted: run wr_1", "café ✓ 東京", "100%", "C:\\dir"] {
            assert!(
                matches!(field(text), Cow::Borrowed(t) if t == text),
                "{text:?}"
            );
        }
        assert!(matches!(strip("one\ntwo", true), Cow::Borrowed("one\ntwo")));
        assert!(matches!(strip("a\tb", false), Cow::Borrowed("a\tb")));
    }

    #[test]
    fn a_field_with_a_control_is_shown_escaped_never_altered() {
        assert_eq!(field("\u{1b}[31mrun-1"), "\\x1b[31mrun-1");
        assert_eq!(field("a\u{0}b\u{7}c\u{7f}d\te"), "a\\x00b\\x07c\\x7fd\\te");
        assert_eq!(field("x\u{85}y\u{9b}2J"), "x\\u{85}y\\u{9b}2J");
        assert_eq!(field("txt\u{202e}gpj.exe"), "txt\\u{202e}gpj.exe");
        assert_eq!(field("a\u{2066}b\u{200f}"), "a\\u{2066}b\\u{200f}");
        assert_eq!(field("one\ntwo\r\nthree"), "one\\ntwo\\r\\nthree");
        // A backslash of a value that is escaped is doubled: `\x1b` as text reads back as it is.
        assert_eq!(field("\\x1b and \u{1b}"), "\\\\x1b and \\x1b");
        for hostile in [
            "\u{1b}]0;owned\u{7}title",
            "\u{9d}52;c;eA==\u{9c}",
            "\r\u{1b}[2J",
        ] {
            assert!(!field(hostile).chars().any(is_control), "{hostile:?}");
        }
    }

    #[test]
    fn strip_removes_c0_controls_but_tab_and_del_and_c1_controls() {
        assert_eq!(strip("a\u{0}b\u{7}c\u{8}d\u{7f}e\tf", false), "abcde\tf");
        assert_eq!(strip("x\u{85}y\u{8d}z\u{9c}w", false), "xyzw");
        assert_eq!(strip("bell\u{7}\u{7}", false), "bell");
    }

    #[test]
    fn strip_turns_a_line_break_into_a_space_and_a_carriage_return_never_survives() {
        assert_eq!(
            strip("one\ntwo\r\nthree\rfour", false),
            "one two three four"
        );
        assert_eq!(
            strip("error: x\raccepted: run wr_9\nnext", true),
            "error: xaccepted: run wr_9\nnext"
        );
    }

    #[test]
    fn strip_removes_csi_sequences_whole_in_both_forms() {
        let field = |text| strip(text, false);
        assert_eq!(field("\u{1b}[2Jcleared"), "cleared");
        assert_eq!(
            field("up\u{1b}[3Aover\u{1b}[1;1Hhome\u{1b}[K"),
            "upoverhome"
        );
        assert_eq!(field("\u{1b}[31;1mred\u{1b}[0m"), "red");
        assert_eq!(field("\u{1b}[?25lhidden cursor"), "hidden cursor");
        assert_eq!(field("\u{9b}2J8-bit"), "8-bit");
        assert_eq!(field("cut\u{1b}["), "cut");
    }

    #[test]
    fn strip_removes_osc_strings_with_either_terminator_title_and_clipboard_included() {
        let field = |text| strip(text, false);
        assert_eq!(field("\u{1b}]0;owned\u{7}title"), "title");
        assert_eq!(field("\u{1b}]2;owned\u{1b}\\title"), "title");
        assert_eq!(field("\u{1b}]52;c;cm0gLXJmIH4=\u{7}clip"), "clip");
        assert_eq!(field("\u{9d}52;c;eA==\u{9c}clip"), "clip");
        assert_eq!(
            field("\u{1b}]8;;http://evil.example\u{1b}\\link\u{1b}]8;;\u{1b}\\"),
            "link"
        );
        assert_eq!(field("before\u{1b}]0;never ends"), "before");
    }

    #[test]
    fn strip_removes_dcs_pm_apc_and_other_escape_sequences() {
        let field = |text| strip(text, false);
        assert_eq!(field("\u{1b}P1$r0m\u{1b}\\dcs"), "dcs");
        assert_eq!(
            field("\u{1b}^pm\u{1b}\\\u{1b}_apc\u{7}\u{1b}Xsos\u{9c}end"),
            "end"
        );
        assert_eq!(field("\u{1b}creset\u{1b}7save\u{1b}8"), "resetsave");
        assert_eq!(field("\u{1b}(Bcharset\u{1b}#8"), "charset");
        assert_eq!(field("lone\u{1b}"), "lone");
        assert_eq!(field("\u{1b}\u{1b}[2Jx"), "x");
    }

    #[test]
    fn json_keeps_its_value_with_del_and_c1_escaped() {
        let value = serde_json::json!({"t": "a\u{1b}[2J\u{9b}2J\u{9d}0;x\u{9c}\u{7f}é\u{202e}"});
        let line = value.to_string();
        let escaped = escape_json_controls(&line);
        assert!(
            !escaped.chars().any(|c| is_control(c) || is_bidi(c)),
            "{escaped}"
        );
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&escaped).unwrap(),
            value
        );
        assert!(matches!(
            escape_json_controls("{\"a\":1}"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn an_escaped_field_is_never_cut_inside_an_escape() {
        for pad in 0..8 {
            let value = format!("{}{}", "a".repeat(FIELD_LIMIT - 6 + pad), "\0".repeat(10));
            let shown = field(&value);
            let (kept, _) = shown.split_once('…').expect("cut");
            assert!(kept.len() <= FIELD_LIMIT, "{pad}");
            // Whole escapes only: what is kept is the value's start, escaped.
            let escapes = kept.trim_start_matches('a');
            assert_eq!(escapes.len() % 4, 0, "{pad}: {escapes:?}");
            assert!(
                escapes.split("\\x00").all(str::is_empty),
                "{pad}: {escapes:?}"
            );
        }
    }

    #[test]
    fn a_field_is_bounded_on_a_character_boundary_saying_what_was_cut() {
        let long = "é".repeat(FIELD_LIMIT);
        let cut = field(&long);
        assert!(cut.len() < FIELD_LIMIT + 32, "{}", cut.len());
        assert!(
            cut.ends_with(&format!("… ({} bytes cut)", FIELD_LIMIT)),
            "{cut}"
        );
        let lines = format!("short\n{}", "x".repeat(LINE_LIMIT + 5));
        let bounded = bound(&lines, LINE_LIMIT);
        assert!(bounded.starts_with("short\nxxx"));
        assert!(
            bounded.ends_with("… (5 bytes cut)"),
            "{}",
            &bounded[bounded.len() - 20..]
        );
    }
}
