//! How big a run is: read by every scenario and by the dispatch in `scenario.rs`.

/// How big a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Size {
    /// The sizes the targets are stated for.
    Full,
    /// A tiny run that walks every code path in a second or two; its figures mean nothing.
    Smoke,
}

impl Size {
    /// `full` at [`Size::Full`], `smoke` otherwise.
    pub(crate) fn pick<T>(self, full: T, smoke: T) -> T {
        match self {
            Size::Full => full,
            Size::Smoke => smoke,
        }
    }
}
