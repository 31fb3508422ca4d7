//! What this process holds, from `/proc/self/status`: read by the memory scenario, the herd
//! and the contract server's report.

/// A `kB` field of /proc/self/status, in bytes.
pub(crate) fn status_kb(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with(field))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Peak resident set size (VmHWM), in bytes.
pub(crate) fn peak_rss_bytes() -> Option<u64> {
    status_kb("VmHWM:")
}
