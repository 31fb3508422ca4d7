//! The retry matrix mechanism: rows, their verdicts, and the lookup of the row that covers an
//! answer.
//!
//! This module knows no vendor. A table is a slice of [`Rule`]s a profile hands in
//! (`src/vendors/`); the lookup takes the table and the profile's error-code reader as
//! arguments, so a second API profile is a second table, not new control flow.
//!
//! Within a table the most specific matching row wins: a status with an error code in the body,
//! then a list of statuses, then a status range, then `Other`. So the rows can follow the
//! document's order.

use std::sync::OnceLock;

use crate::core::answer::Answer;
use crate::core::error::ErrorKind;

/// What to do about an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Verdict {
    /// Done: hand the answer to the caller.
    Success,
    /// Retry with the same key after exponential backoff with full jitter. A `Retry-After` on the
    /// answer is honoured as the least wait.
    RetryAfterBackoff,
    /// Retry with the same key after the server's `Retry-After`; after
    /// [`Backoff::retry_after_fallback`](crate::Backoff::retry_after_fallback) (or a longer
    /// backoff) when it is absent.
    RetryAfterServerWait,
    /// Discard the cached token, exchange a new one, and retry once with the same key.
    ReexchangeOnce,
    /// Stop: never retried unchanged.
    Stop(ErrorKind),
}

impl Verdict {
    /// Whether the verdict sends the request again (after a wait or a token exchange).
    pub const fn retries(self) -> bool {
        matches!(
            self,
            Self::RetryAfterBackoff | Self::RetryAfterServerWait | Self::ReexchangeOnce
        )
    }

    /// The verdict when the caller opted in to waiting for `idempotency_key_in_progress`: the
    /// in-progress stop becomes a wait for `Retry-After` (backoff when absent), within the budget.
    pub(crate) fn waiting_for_in_progress(self) -> Self {
        match self {
            Self::Stop(ErrorKind::InProgress) => Self::RetryAfterServerWait,
            other => other,
        }
    }
}

/// Which answers a row of a retry matrix covers (see
/// [`ProfileBuilder::rule`](crate::profile::ProfileBuilder::rule)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum When {
    /// No answer came back: connect error, reset, timeout.
    NoResponse,
    /// Any of these statuses.
    Status(&'static [u16]),
    /// Any of these statuses with this error code in the body, as the profile's
    /// [`error_codes`](crate::profile::ProfileBuilder::error_codes) reads it.
    Code(&'static [u16], &'static str),
    /// A status in this inclusive range.
    Range(u16, u16),
    /// Any status no other row covers.
    Other,
}

impl When {
    /// Lower is more specific; the most specific matching row wins.
    pub(crate) const fn rank(self) -> u8 {
        match self {
            Self::NoResponse | Self::Code(..) => 0,
            Self::Status(_) => 1,
            Self::Range(..) => 2,
            Self::Other => 3,
        }
    }

    pub(crate) fn matches(self, status: Option<u16>, codes: &[String]) -> bool {
        match (self, status) {
            (Self::NoResponse, None) => true,
            (Self::Status(statuses), Some(status)) => lists(statuses, status),
            (Self::Code(statuses, code), Some(status)) => {
                lists(statuses, status) && codes.iter().any(|found| found == code)
            }
            (Self::Range(low, high), Some(status)) => (low..=high).contains(&status),
            (Self::Other, Some(_)) => true,
            _ => false,
        }
    }
}

/// Whether `statuses` holds `status`: a loop the lookup inlines (a row lists a few statuses),
/// where `contains` is a call for each row.
#[expect(
    clippy::manual_contains,
    reason = "`contains` on a `u16` slice is an outlined call here: measured, 230 instructions a lookup more"
)]
fn lists(statuses: &[u16], status: u16) -> bool {
    statuses.iter().any(|listed| *listed == status)
}

/// One row of a retry matrix: a result, its verdict, and the document's action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rule {
    pub(crate) when: When,
    pub(crate) verdict: Verdict,
    pub(crate) action: &'static str,
}

pub(crate) const fn rule(when: When, verdict: Verdict, action: &'static str) -> Rule {
    Rule {
        when,
        verdict,
        action,
    }
}

/// The verdict for a status no table covers. Every table ends in `Other`, so this is a guard.
const UNLISTED: Rule = rule(
    When::Other,
    Verdict::Stop(ErrorKind::UnexpectedStatus),
    "Outside the contract; never retried",
);

/// The verdict for an answer over the client's limit whose status does not retry: its body is
/// needed and was not read.
const TOO_LARGE: Rule = rule(
    When::Other,
    Verdict::Stop(ErrorKind::AnswerTooLarge),
    "The answer is over the client's limit; on a 2xx the server acted: read the current state",
);

/// A surface's retry matrix: its rows, and the row each status falls to, worked out on its
/// first lookup, so that an answer is looked up by its status rather than against every row.
/// A status a row of an error code lists (its body decides), or outside 100-599, and no answer
/// at all are looked up row by row, as before an index.
pub(crate) struct Matrix {
    rows: &'static [Rule],
    by_status: OnceLock<Box<[u8; STATUSES]>>,
}

/// The statuses the index covers: 100 to 599.
const FIRST_STATUS: u16 = 100;
const STATUSES: usize = 500;
/// In the index: look the status up row by row.
const BY_ROWS: u8 = u8::MAX;

impl Matrix {
    pub(crate) const fn new(rows: &'static [Rule]) -> Self {
        Self {
            rows,
            by_status: OnceLock::new(),
        }
    }

    /// The rows, in the document's order.
    #[cfg(test)]
    pub(crate) const fn rows(&self) -> &'static [Rule] {
        self.rows
    }

    /// The row `status` falls to by the index; `None` to look it up row by row.
    fn indexed(&self, status: u16) -> Option<&'static Rule> {
        let at = usize::from(status.checked_sub(FIRST_STATUS)?);
        let by_status = self.by_status.get_or_init(|| index(self.rows));
        let row = *by_status.get(at)?;
        self.rows.get(usize::from(row))
    }
}

/// Shows the rows, not the index.
impl std::fmt::Debug for Matrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.rows).finish()
    }
}

/// For each status from 100, the row the lookup finds for it without reading a body, or
/// [`BY_ROWS`] where a row of an error code lists it (its body decides) or no row covers it.
fn index(rows: &[Rule]) -> Box<[u8; STATUSES]> {
    let mut by_status = Box::new([BY_ROWS; STATUSES]);
    for (status, slot) in (FIRST_STATUS..).zip(by_status.iter_mut()) {
        let coded = rows
            .iter()
            .any(|rule| matches!(rule.when, When::Code(statuses, _) if lists(statuses, status)));
        if coded {
            continue;
        }
        let found = scan(rows, Some(status), &[], |_| Vec::new());
        if let Some(row) = rows.iter().position(|rule| std::ptr::eq(rule, found))
            && let Ok(row) = u8::try_from(row)
            && row != BY_ROWS
        {
            *slot = row;
        }
    }
    by_status
}

/// The row of `matrix` that covers `answer`: the most specific match. `codes` reads the error
/// codes of a body the way the table's vendor writes them; it is called only when a row of the
/// answer's status matches on a code.
pub(crate) fn lookup(
    matrix: &Matrix,
    answer: &Answer,
    codes: impl FnOnce(&[u8]) -> Vec<String>,
) -> &'static Rule {
    let status = answer.status().map(|status| status.as_u16());
    let rule = match status.and_then(|status| matrix.indexed(status)) {
        Some(rule) => rule,
        None => scan(matrix.rows, status, answer.body(), codes),
    };
    over_limit_or(rule, answer)
}

/// [`TOO_LARGE`] for an answer over the client's limit that `rule` would not retry, else
/// `rule`.
fn over_limit_or(rule: &'static Rule, answer: &Answer) -> &'static Rule {
    if answer.is_too_large() && !rule.verdict.retries() {
        return &TOO_LARGE;
    }
    rule
}

/// [`lookup`] row by row, never by the index: what the index must agree with.
#[cfg(test)]
pub(crate) fn lookup_by_rows(
    matrix: &Matrix,
    answer: &Answer,
    codes: impl FnOnce(&[u8]) -> Vec<String>,
) -> &'static Rule {
    let status = answer.status().map(|status| status.as_u16());
    over_limit_or(scan(matrix.rows, status, answer.body(), codes), answer)
}

/// The row of `rows` that covers `status`, row by row; `codes` reads the error codes of `body`
/// only when a row of an error code lists the status.
fn scan<'r>(
    rows: &'r [Rule],
    status: Option<u16>,
    body: &[u8],
    codes: impl FnOnce(&[u8]) -> Vec<String>,
) -> &'r Rule {
    // One pass for the rows of statuses alone; a row of an error code (the most specific) is
    // read only when one covers the status, and the body's codes only then.
    let mut best: Option<&Rule> = None;
    let mut coded = false;
    for rule in rows {
        if let When::Code(statuses, _) = rule.when {
            coded |= status.is_some_and(|status| lists(statuses, status));
        } else if rule.when.matches(status, &[])
            && best.is_none_or(|best| rule.when.rank() < best.when.rank())
        {
            best = Some(rule);
        }
    }
    if coded {
        let codes = codes(body);
        if let Some(rule) = rows
            .iter()
            .find(|rule| matches!(rule.when, When::Code(..)) && rule.when.matches(status, &codes))
        {
            best = Some(rule);
        }
    }
    best.unwrap_or(&UNLISTED)
}
