//! Benchmarks of `hodoflow-retry` against its peers, on the contract server over loopback.
//!
//! A claim such as "the SDK never duplicates a run" or "it adds no overhead" is only worth the
//! measurement behind it. Each [`Scenario`] starts the contract server (`hodoflow-mock`) on
//! `127.0.0.1:0`, drives the SDK and, where a comparison is asked, plain `reqwest` and the
//! SDK's retrying peers (`reqwest-retry` 0.9 over `reqwest-middleware` 0.5, reqwest 0.13's
//! built-in `retry`, and `backon`) against identical servers in the same run, reads what really happened from
//! the server's ledger, and returns one [`Report`]: the parameters used, the figures, and
//! pass or fail against the scenario's target. A missed target is reported as missed.
//!
//! Run it as `cargo run --release -p hodoflow-bench -- all`; `BENCHMARKS.md` at the workspace
//! root explains every figure.
//!
//! # Instruction counts
//!
//! A rate on a shared 2-core machine moves by several percent from run to run, so `overhead`
//! also counts the instructions a delivery costs each client, with valgrind's callgrind
//! (`perf stat -e instructions` reports `<not supported>` in a virtual machine without a PMU).
//! Install it from Debian's packages, as root:
//!
//! ```sh
//! apt-get update && apt-get install -y valgrind
//! ```
//!
//! The scenario then runs its hidden `count` mode in a child process, against a contract
//! server in its own process, at 100 and at 2,100 requests, and takes the difference over the
//! 2,000 requests between (start-up cancels out):
//!
//! ```sh
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     target/release/hodoflow-bench count --holder sdk --url http://127.0.0.1:PORT --requests 2100
//! ```
//!
//! `--smoke` counts too, at 10 and 40 requests, so a smoke run (and its test, which `.ci/run`
//! runs with valgrind installed) prints the instructions per delivery of each side and their
//! ratio: a regression of the happy path's cost shows in review without a full run. Without
//! valgrind `overhead` reports its rates and `"counted": false` for the instructions, and the
//! smoke run's child runs natively, uncounted.
//!
//! # Examples
//!
//! ```no_run
//! # async fn run() -> hodoflow_bench::Result<()> {
//! use hodoflow_bench::{Options, Scenario, Size};
//!
//! let options = Options::new(Size::Smoke, "target/release/hodoflow-bench");
//! let report = Scenario::Reauth.run(&options).await?;
//! println!("{}", report.to_json());
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]
#![warn(missing_debug_implementations)]

mod blip_pool;
mod body_copies;
mod drive;
mod enqueue;
mod figures;
mod herd;
mod list;
mod lost_202;
mod memory;
mod modulify;
mod modulify_peer;
mod outage;
mod outage_pool;
mod outbox;
mod overhead;
mod peers;
mod process;
mod proxy_limit;
mod reauth;
mod recovery;
mod report;
mod retry_after;
mod scenario;
mod server;
mod size;
mod storm;
mod wake;

pub use body_copies::{BodyCopies, install_body_copy_counter};
pub use memory::{Holder, Protocol, hold};
pub use overhead::count_requests;
pub use report::Report;
pub use scenario::{Options, Scenario};
pub use server::serve_slow;
pub use size::Size;

/// What a scenario fails with: the server could not start, a client could not be built, or
/// the run could not be measured. A missed target is not an error; it is in the [`Report`].
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// `Result<T, Error>`.
pub type Result<T> = std::result::Result<T, Error>;
