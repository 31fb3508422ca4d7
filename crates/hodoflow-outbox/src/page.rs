//! Keyset pagination of the outbox's jobs: a [`Cursor`] names the last job of a page by its
//! `(state, next_at, id)`, and the next page starts after it.
//!
//! # Why a keyset and not an offset
//!
//! `LIMIT 50 OFFSET 500000` reads and drops half a million rows for one page of fifty, and a job
//! enqueued or finished between two pages shifts every later one. A keyset page is one range of
//! an index (`(state, next_at)`, which in both stores ends in the job's ID), read from the
//! cursor on: the first page and the ten-thousandth cost the same with a million jobs.
//!
//! # The order, and what it guarantees
//!
//! Jobs are listed by state, in the order of [`JobState::ALL`] (pending, in flight, accepted,
//! duplicate, done, failed, needs reconciliation), then by `next_at` (the next attempt time while
//! pending, the lease's end while in flight, the finish time once final), then by ID. Paging from
//! the first page until the cursor is `None`:
//! - lists every job that keeps its state and `next_at` throughout exactly once, in that order;
//! - never lists a job twice in one page, and never goes back: each page starts after the last;
//! - lists a job that moves between pages (claimed, recorded, requeued) where it was when its
//!   part of the order was read: once if it moved within the part not yet read or within the
//!   part read already, twice if it moved from the part read to the part not yet read, not at all
//!   if it moved the other way. A listing is a walk along the order, not a snapshot.

use std::fmt;
use std::str::FromStr;

use hodoflow_retry::{Error, Result};

use super::job::{Job, JobState};

/// Where a page of jobs ended: the state, next attempt time (milliseconds since the Unix epoch,
/// as stored) and ID of its last job. Opaque to a caller, who prints it and passes it back:
/// its text form (`Display`, parsed by `FromStr`) is `<state>.<next_at>.<id>`, such as
/// `pending.1735732805999.42`.
///
/// # Examples
///
/// ```
/// use hodoflow_outbox::Cursor;
///
/// let cursor: Cursor = "failed.1735732805999.42".parse()?;
/// assert_eq!(cursor.to_string(), "failed.1735732805999.42");
/// assert!("failed.soon.42".parse::<Cursor>().is_err());
/// # Ok::<(), hodoflow_retry::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cursor {
    state: JobState,
    next_at: i64,
    id: i64,
}

impl Cursor {
    /// The cursor just after `job`.
    pub fn after(job: &Job) -> Self {
        Self {
            state: job.state,
            next_at: super::millis(job.next_at),
            id: job.id,
        }
    }

    /// The state of the job the cursor is after.
    pub fn state(&self) -> JobState {
        self.state
    }

    /// The `next_at` of the job the cursor is after, to the millisecond stored.
    pub fn next_at(&self) -> std::time::SystemTime {
        super::from_millis(self.next_at)
    }

    /// The ID of the job the cursor is after.
    pub fn id(&self) -> i64 {
        self.id
    }

    /// The stored `next_at` (milliseconds) and ID of the job the cursor is after.
    pub(crate) fn key(&self) -> (i64, i64) {
        (self.next_at, self.id)
    }
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.state, self.next_at, self.id)
    }
}

impl FromStr for Cursor {
    type Err = Error;

    /// Parses `<state>.<next_at>.<id>`.
    ///
    /// # Errors
    ///
    /// `invalid_input` for any other text.
    fn from_str(text: &str) -> Result<Self> {
        let bad = || {
            Error::invalid_input("the cursor is not one a listing printed (<state>.<next_at>.<id>)")
        };
        let mut parts = text.trim().splitn(3, '.');
        let state = parts.next().and_then(JobState::parse).ok_or_else(bad)?;
        let number = |part: Option<&str>| {
            part.filter(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|part| part.parse::<i64>().ok())
                .ok_or_else(bad)
        };
        let next_at = number(parts.next())?;
        let id = number(parts.next())?;
        Ok(Self { state, next_at, id })
    }
}

/// One part of a page's walk: a state, and the `(next_at, id)` to read it after (`None`: from
/// its first job).
pub(crate) type Part = (JobState, Option<(i64, i64)>);

/// The parts of one page's walk, in order. With a `state` filter, that state alone.
///
/// # Errors
///
/// `invalid_input` when `after` is a cursor of another state than `state`.
pub(crate) fn walk(state: Option<JobState>, after: Option<&Cursor>) -> Result<Vec<Part>> {
    match (state, after) {
        (Some(state), Some(cursor)) if cursor.state != state => Err(Error::invalid_input(format!(
            "the cursor continues a listing of {} jobs, not of {state} jobs",
            cursor.state
        ))),
        (Some(state), after) => Ok(vec![(state, after.map(Cursor::key))]),
        (None, None) => Ok(JobState::ALL.into_iter().map(|s| (s, None)).collect()),
        (None, Some(cursor)) => Ok(JobState::ALL
            .into_iter()
            .skip_while(|s| *s != cursor.state)
            .enumerate()
            .map(|(n, s)| (s, (n == 0).then(|| cursor.key())))
            .collect()),
    }
}

/// The page of `limit` jobs of `read` (up to `limit + 1`, in order, so a next page is known to
/// exist) and its cursor.
pub(crate) fn page_of(mut read: Vec<Job>, limit: usize) -> (Vec<Job>, Option<Cursor>) {
    if read.len() <= limit {
        return (read, None);
    }
    read.truncate(limit);
    let next = read.last().map(Cursor::after);
    (read, next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_prints_and_parses_back() {
        let cursor = Cursor {
            state: JobState::NeedsReconciliation,
            next_at: 1_735_732_805_999,
            id: 42,
        };
        let text = cursor.to_string();
        assert_eq!(text, "needs_reconciliation.1735732805999.42");
        assert_eq!(text.parse::<Cursor>().unwrap(), cursor);
        for bad in [
            "",
            "pending",
            "pending.1",
            "pending.1.",
            "pending..1",
            "pending.-1.2",
            "pending.1.2.3",
            "later.1.2",
            "pending.99999999999999999999.1",
        ] {
            assert!(bad.parse::<Cursor>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_walk_over_every_state_starts_at_the_cursor_s_state() {
        let cursor = Cursor {
            state: JobState::Done,
            next_at: 5,
            id: 7,
        };
        let walk = walk(None, Some(&cursor)).unwrap();
        assert_eq!(
            walk,
            [
                (JobState::Done, Some((5, 7))),
                (JobState::Failed, None),
                (JobState::NeedsReconciliation, None),
            ]
        );
        assert_eq!(super::walk(None, None).unwrap().len(), 7);
        assert!(super::walk(Some(JobState::Failed), Some(&cursor)).is_err());
        assert_eq!(
            super::walk(Some(JobState::Done), Some(&cursor)).unwrap(),
            [(JobState::Done, Some((5, 7)))]
        );
    }
}
