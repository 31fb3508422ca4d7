//! The scenarios, and what they need to run (their sizes are `size.rs`, which every scenario
//! reads, so the dispatch here imports the scenarios and none imports it back).

use std::path::PathBuf;

use crate::report::Report;
use crate::size::Size;
use crate::{
    Result, blip_pool, enqueue, herd, list, lost_202, memory, modulify, outage, outage_pool,
    outbox, overhead, proxy_limit, reauth, recovery, retry_after, storm, wake,
};

/// One benchmark scenario. Each returns one [`Report`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Scenario {
    /// Requests per second of the SDK against plain reqwest, same successful deliveries.
    Overhead,
    /// Requests per second of the SDK signing every delivery against the SDK unsigned.
    OverheadSigned,
    /// Requests per logical operation while every answer is 503.
    Storm,
    /// Duplicate runs when 20% of answers are lost after the server committed.
    Lost202,
    /// Retries that arrive before the server's `Retry-After` elapsed, and how late the rest are.
    RetryAfter,
    /// How bunched up the retries of 1,000 operations failing at once arrive.
    Herd,
    /// Token exchanges made when 1,000 concurrent calls meet an expired token.
    Reauth,
    /// Peak memory with 10,000 deliveries in flight, and body copies per attempt.
    Memory,
    /// The herd at 10,000 operations, with the default retry budget.
    Herd10k,
    /// Server load in a sustained outage, over the senders' healthy rate.
    Outage,
    /// Time to recover after an outage, and operations failed after healing.
    Recovery,
    /// Operations failed and 429s behind a proxy's rate limit without `Retry-After`.
    ProxyLimit,
    /// Modulify's own documented retry loop against the SDK's `ModulifyClient` on Modulify's
    /// faults: events lost, duplicate executions, early retries.
    Modulify,
    /// Jobs a second through the durable outbox (SQLite; PostgreSQL with 1, 2 and 4 worker
    /// pools) over direct calls at the same concurrency, and enqueue latency.
    Outbox,
    /// Events lost by a batch through blips of 503s or 429s without `Retry-After`, at each
    /// concurrency.
    BlipPool,
    /// Server load, requests per operation and the batch's end in a sustained outage, at each
    /// concurrency.
    OutagePool,
    /// Events a second into the outbox with `enqueue_many` (SQLite; PostgreSQL), and each
    /// batch's latency.
    Enqueue,
    /// How soon a job enqueued into an idle outbox starts (`LISTEN`/`NOTIFY`; SQLite's
    /// in-process wake-up), and an idle worker's database transactions.
    Wake,
    /// Pages of 50 jobs of a million-job outbox by keyset, first and deep (SQLite;
    /// PostgreSQL), and one `hodoflow-send outbox list` process.
    List,
}

impl Scenario {
    /// Every scenario, in the order `all` runs them.
    pub const ALL: [Scenario; 19] = [
        Scenario::Overhead,
        Scenario::OverheadSigned,
        Scenario::Storm,
        Scenario::Lost202,
        Scenario::RetryAfter,
        Scenario::Herd,
        Scenario::Reauth,
        Scenario::Memory,
        Scenario::Herd10k,
        Scenario::Outage,
        Scenario::Recovery,
        Scenario::ProxyLimit,
        Scenario::Modulify,
        Scenario::Outbox,
        Scenario::BlipPool,
        Scenario::OutagePool,
        Scenario::Enqueue,
        Scenario::Wake,
        Scenario::List,
    ];

    /// The scenario's name on the command line and in its report, such as `"lost_202"`.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Overhead => "overhead",
            Scenario::OverheadSigned => "overhead_signed",
            Scenario::Storm => "storm",
            Scenario::Lost202 => "lost_202",
            Scenario::RetryAfter => "retry_after",
            Scenario::Herd => "herd",
            Scenario::Reauth => "reauth",
            Scenario::Memory => "memory",
            Scenario::Herd10k => "herd_10k",
            Scenario::Outage => "outage",
            Scenario::Recovery => "recovery",
            Scenario::ProxyLimit => "proxy_limit",
            Scenario::Modulify => "modulify",
            Scenario::Outbox => "outbox",
            Scenario::BlipPool => "blip_pool",
            Scenario::OutagePool => "outage_pool",
            Scenario::Enqueue => "enqueue",
            Scenario::Wake => "wake",
            Scenario::List => "list",
        }
    }

    /// Runs the scenario and reports what it measured.
    ///
    /// # Errors
    ///
    /// When the run could not be carried out (a server did not start, a client could not be
    /// built). A missed target is not an error.
    pub async fn run(self, options: &Options) -> Result<Report> {
        let size = options.size;
        match self {
            Scenario::Overhead => overhead::run(size, &options.exe).await,
            Scenario::OverheadSigned => overhead::run_signed(size, &options.exe).await,
            Scenario::Storm => storm::run(size).await,
            Scenario::Lost202 => lost_202::run(size).await,
            Scenario::RetryAfter => retry_after::run(size).await,
            Scenario::Herd => herd::run(size).await,
            Scenario::Reauth => reauth::run(size).await,
            Scenario::Memory => memory::run(size, &options.exe).await,
            Scenario::Herd10k => herd::run_10k(size).await,
            Scenario::Outage => outage::run(size).await,
            Scenario::Recovery => recovery::run(size).await,
            Scenario::ProxyLimit => proxy_limit::run(size).await,
            Scenario::Modulify => modulify::run(size).await,
            Scenario::Outbox => outbox::run(size).await,
            Scenario::BlipPool => blip_pool::run(size).await,
            Scenario::OutagePool => outage_pool::run(size).await,
            Scenario::Enqueue => enqueue::run(size).await,
            Scenario::Wake => wake::run(size).await,
            Scenario::List => list::run(size, &options.exe).await,
        }
    }
}

/// What a run needs besides its size.
#[derive(Debug, Clone)]
pub struct Options {
    /// The size of every scenario.
    pub size: Size,
    /// The bench binary, started as the memory scenario's slow server (`serve-slow`) and
    /// client (`hold`), and as the overhead scenario's counted client (`count`).
    pub exe: PathBuf,
}

impl Options {
    /// Options for `size`, with `exe` as the bench binary.
    pub fn new(size: Size, exe: impl Into<PathBuf>) -> Self {
        Self {
            size,
            exe: exe.into(),
        }
    }
}
