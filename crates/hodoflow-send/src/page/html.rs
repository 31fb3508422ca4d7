//! The status page's HTML, written by hand with [`esc`] on every string that is not this
//! file's own text (see the module docs of `page` for why no template crate).
//!
//! What a job shows is chosen here, field by field: never its body, its delivery ID (the
//! identity key), its target's trigger token or route; every stored text (event ID, run ID,
//! request ID, error kind and message, lease owner) goes through the redaction set
//! (`redact.rs`, which holds the trigger token of every job read) and then [`esc`].

use std::fmt::Write as _;
use std::time::SystemTime;

use hodoflow_retry::outbox::{Counts, Cursor, Job, JobState};

use crate::job_line::rfc3339;

/// `text` with `&`, `<`, `>`, `"` and `'` as character references: safe as element text and
/// as a quoted attribute value.
pub(crate) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Stored text as shown: redacted, then escaped.
pub(crate) fn shown(text: &str) -> String {
    esc(&crate::redact::text(text))
}

/// `text` as one path segment: every byte but the URL's unreserved ones percent-encoded.
pub(crate) fn segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// The link of a job's page.
pub(crate) fn job_href(event_id: &str) -> String {
    format!("/jobs/{}", segment(event_id))
}

/// A whole page: `title` (this file's text or escaped) and `body` (HTML).
pub(crate) fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title} · hodoflow outbox</title>\
         <link rel=\"stylesheet\" href=\"/style.css\"></head>\
         <body><header><a href=\"/\">hodoflow outbox</a></header><main>{body}</main></body></html>\n"
    )
}

/// Whether the credential's pause is on.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Pause {
    /// No base URL given: the worker's scope is not known here.
    Unknown,
    /// Not paused.
    Off,
    /// Paused until then.
    Until(SystemTime),
}

/// Who reads the page, and what their forms carry.
#[derive(Debug, Clone)]
pub(crate) struct Viewer {
    /// The session's CSRF token.
    pub(crate) csrf: String,
    /// Logged in with the admin token.
    pub(crate) admin: bool,
    /// The server was given an admin token (without one, nothing can be requeued).
    pub(crate) retry_enabled: bool,
}

/// One list of jobs on the overview: its state, at most a page of jobs, whether it is a later
/// page, and the cursor of the next page when more may follow.
#[derive(Debug)]
pub(crate) struct Listing {
    pub(crate) state: JobState,
    pub(crate) jobs: Vec<Job>,
    pub(crate) paged: bool,
    pub(crate) next: Option<Cursor>,
}

/// The overview: counts, backlog chart, pause, and the jobs to look at.
pub(crate) fn overview(
    counts: &Counts,
    backlog: &[u64],
    pause: Pause,
    listings: &[Listing],
    viewer: &Viewer,
) -> String {
    let mut body = String::new();
    body.push_str("<h1>Outbox</h1><section><h2>Jobs by state</h2><table class=\"counts\"><tr>");
    for state in JobState::ALL {
        let _ = write!(body, "<th>{}</th>", state.as_str());
    }
    body.push_str("<th>total</th></tr><tr>");
    for state in JobState::ALL {
        let _ = write!(
            body,
            "<td id=\"count-{}\">{}</td>",
            state.as_str(),
            counts.of(state)
        );
    }
    let _ = write!(
        body,
        "<td id=\"count-total\">{}</td></tr></table></section>",
        counts.total()
    );
    let _ = write!(
        body,
        "<section><h2>Backlog, last hour</h2>{}</section>",
        chart(backlog)
    );
    let pause = match pause {
        Pause::Unknown => "not known: start the page with the workers' --base-url".to_owned(),
        Pause::Off => "off".to_owned(),
        Pause::Until(until) => format!("on, until {}", rfc3339(until)),
    };
    let _ = write!(
        body,
        "<section><h2>Credential pause</h2><p id=\"pause\">{pause}</p></section>"
    );
    body.push_str(&login(viewer, "/"));
    for listing in listings {
        body.push_str(&jobs_table(listing, viewer));
    }
    page("Outbox", &body)
}

/// The login form (or who is logged in), back to `back` (a local path) afterwards.
fn login(viewer: &Viewer, back: &str) -> String {
    if !viewer.retry_enabled {
        return "<p class=\"note\">Read-only: this server was started without \
                --admin-token-file, so no job can be requeued here.</p>"
            .to_owned();
    }
    if viewer.admin {
        return format!(
            "<form class=\"login\" method=\"post\" action=\"/logout\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
             <span>Logged in with the admin token.</span> <button type=\"submit\">Log out</button></form>",
            esc(&viewer.csrf)
        );
    }
    login_form(
        &viewer.csrf,
        back,
        "<span class=\"note\">needed to retry a job</span>",
    )
}

/// The form that takes the admin token; `note` is this file's own HTML.
pub(crate) fn login_form(csrf: &str, back: &str, note: &str) -> String {
    format!(
        "<form class=\"login\" method=\"post\" action=\"/login\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
         <input type=\"hidden\" name=\"back\" value=\"{}\">\
         <label>Admin token <input type=\"password\" name=\"token\" id=\"token\" \
         autocomplete=\"current-password\"></label> <button type=\"submit\" id=\"login\">Log in</button>\
         {note}</form>",
        esc(csrf),
        esc(back)
    )
}

/// Whether `back` is a page of this server to return to after logging in: `/` or a job's
/// page as [`job_href`] writes it (no other host, no scheme, no `//`).
pub(crate) fn local_page(back: &str) -> bool {
    back == "/"
        || back.strip_prefix("/jobs/").is_some_and(|rest| {
            !rest.is_empty()
                && rest.bytes().all(|b| {
                    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'%')
                })
        })
}

/// The table of one listing, with its retry buttons and its "next" link.
fn jobs_table(listing: &Listing, viewer: &Viewer) -> String {
    let state = listing.state.as_str();
    let mut out = format!(
        "<section id=\"{state}\"><h2>{state}</h2><table class=\"jobs\"><tr><th>event ID</th>\
         <th>calls</th><th>attempts</th><th>last error</th><th>status</th>\
         <th>x-request-id</th><th>next attempt</th><th></th></tr>"
    );
    if listing.jobs.is_empty() {
        out.push_str("<tr><td colspan=\"8\">none</td></tr>");
    }
    for job in &listing.jobs {
        let error = job.last_error.as_ref();
        let _ = write!(
            out,
            "<tr><td><a href=\"{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&job_href(&job.event_id)),
            shown(&job.event_id),
            job.calls,
            job.attempts,
            error.map_or_else(|| "-".to_owned(), |e| shown(&e.kind)),
            error
                .and_then(|e| e.status)
                .map_or_else(|| "-".to_owned(), |s| s.to_string()),
            error
                .and_then(|e| e.request_id.as_deref())
                .map_or_else(|| "-".to_owned(), shown),
            next_attempt(job),
            retry_form(job, viewer, "list"),
        );
    }
    out.push_str("</table>");
    // Keyset pages go forward; back is the first page.
    if listing.paged {
        let _ = write!(
            out,
            "<a class=\"page\" href=\"/?state={state}\">first page</a> "
        );
    }
    if let Some(next) = &listing.next {
        let _ = write!(
            out,
            "<a class=\"page\" id=\"next-{state}\" href=\"/?state={state}&amp;after={}\">next</a>",
            esc(&next.to_string())
        );
    }
    out.push_str("</section>");
    out
}

/// When the job is due (pending) or may be reclaimed (in flight); `-` once final.
fn next_attempt(job: &Job) -> String {
    if job.state.is_final() {
        "-".to_owned()
    } else {
        rfc3339(job.next_at)
    }
}

/// The retry button of `job`, back to `back` (`list` or `job`) afterwards.
fn retry_form(job: &Job, viewer: &Viewer, back: &str) -> String {
    if !viewer.retry_enabled || crate::job_line::delivered(job.state) {
        return String::new();
    }
    format!(
        "<form method=\"post\" action=\"{}/retry\"><input type=\"hidden\" name=\"csrf\" \
         value=\"{}\"><input type=\"hidden\" name=\"back\" value=\"{back}\">\
         <button type=\"submit\" class=\"retry\">Retry</button></form>",
        esc(&job_href(&job.event_id)),
        esc(&viewer.csrf)
    )
}

/// One job's page: every stored field that is safe to show.
pub(crate) fn job(job: &Job, viewer: &Viewer, notice: Option<&str>) -> String {
    let time = |at: Option<SystemTime>| at.map_or_else(|| "-".to_owned(), rfc3339);
    let text = |value: Option<&str>| value.map_or_else(|| "-".to_owned(), shown);
    let error = job.last_error.as_ref();
    let rows: [(&str, &str, String); 15] = [
        ("state", "state", job.state.as_str().to_owned()),
        ("calls", "calls", job.calls.to_string()),
        ("attempts", "attempts", job.attempts.to_string()),
        ("created", "created", rfc3339(job.created_at)),
        ("first-sent", "first sent", time(job.first_sent_at)),
        ("finished", "finished", time(job.finished_at)),
        ("next", "next attempt", next_attempt(job)),
        (
            "lease-owner",
            "lease owner",
            text(job.lease_owner.as_deref()),
        ),
        ("lease-until", "lease until", time(job.lease_until)),
        ("run-id", "workflow run ID", text(job.run_id.as_deref())),
        (
            "error-kind",
            "last error",
            text(error.map(|e| e.kind.as_str())),
        ),
        (
            "error-status",
            "status",
            error
                .and_then(|e| e.status)
                .map_or_else(|| "-".to_owned(), |s| s.to_string()),
        ),
        (
            "request-id",
            "x-request-id",
            text(error.and_then(|e| e.request_id.as_deref())),
        ),
        (
            "error-message",
            "message",
            text(error.map(|e| e.message.as_str())),
        ),
        ("kind", "target", target_kind(job).to_owned()),
    ];
    let mut body = format!("<h1 id=\"event-id\">{}</h1>", shown(&job.event_id));
    if let Some(notice) = notice {
        let _ = write!(
            body,
            "<p class=\"notice\" id=\"notice\">{}</p>",
            esc(notice)
        );
    }
    body.push_str("<table class=\"job\">");
    for (id, label, value) in rows {
        let _ = write!(
            body,
            "<tr><th>{label}</th><td id=\"job-{id}\">{value}</td></tr>"
        );
    }
    body.push_str("</table>");
    body.push_str(&retry_form(job, viewer, "job"));
    body.push_str(&login(viewer, &job_href(&job.event_id)));
    page("Job", &body)
}

/// What kind of target a job has, without its route or token.
fn target_kind(job: &Job) -> &'static str {
    use hodoflow_retry::outbox::Target;
    match &job.target {
        Target::Webhook { .. } => "webhook delivery",
        Target::Modulify { .. } => "Modulify call",
        _ => "JSON:API write",
    }
}

/// A page that only says `message` (escaped), with a link back.
pub(crate) fn message(title: &str, message: &str) -> String {
    page(
        title,
        &format!(
            "<h1>{title}</h1><p id=\"message\">{}</p><p><a href=\"/\">Back to the outbox</a></p>",
            esc(message)
        ),
    )
}

/// The backlog as an inline SVG line chart, 600×120, the newest point on the right.
pub(crate) fn chart(points: &[u64]) -> String {
    const WIDTH: f64 = 600.0;
    const HEIGHT: f64 = 120.0;
    let top = points.iter().copied().max().unwrap_or(0).max(1);
    let gaps = points.len().saturating_sub(1).max(1) as f64;
    let mut line = String::new();
    for (at, count) in points.iter().enumerate() {
        let x = at as f64 * WIDTH / gaps;
        let y = HEIGHT - (*count as f64 * (HEIGHT - 10.0) / top as f64);
        let _ = write!(line, "{}{x:.1},{y:.1}", if at == 0 { "" } else { " " });
    }
    let now = points.last().copied().unwrap_or(0);
    format!(
        "<svg class=\"chart\" id=\"backlog\" role=\"img\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" \
         width=\"{WIDTH}\" height=\"{HEIGHT}\" xmlns=\"http://www.w3.org/2000/svg\">\
         <title>Jobs not final over the last hour: {now} now, at most {top}</title>\
         <line x1=\"0\" y1=\"{HEIGHT}\" x2=\"{WIDTH}\" y2=\"{HEIGHT}\" stroke=\"#999\"/>\
         <polyline fill=\"none\" stroke=\"#2563eb\" stroke-width=\"2\" points=\"{line}\"/>\
         <text x=\"4\" y=\"12\" font-size=\"11\" fill=\"#555\">{top}</text></svg>\
         <p class=\"note\">{now} not final now; 60 minutes ago on the left.</p>"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_covers_every_character_that_ends_text_or_an_attribute() {
        assert_eq!(
            esc(r#"<script>alert("x" & 'y')</script>"#),
            "&lt;script&gt;alert(&quot;x&quot; &amp; &#39;y&#39;)&lt;/script&gt;"
        );
        assert_eq!(esc("plain text, ünïcode"), "plain text, ünïcode");
        assert_eq!(
            esc("&amp;"),
            "&amp;amp;",
            "escaped once more, never trusted"
        );
    }

    #[test]
    fn path_segments_encode_everything_but_unreserved_bytes() {
        assert_eq!(segment("order-1.a_b~"), "order-1.a_b~");
        assert_eq!(segment("a/b?c#d e"), "a%2Fb%3Fc%23d%20e");
        assert_eq!(segment("\"><x"), "%22%3E%3Cx");
        assert_eq!(segment("é"), "%C3%A9");
    }

    #[test]
    fn only_local_pages_are_returned_to() {
        assert!(local_page("/"));
        assert!(local_page(&job_href("a/b c")));
        for elsewhere in [
            "//evil.example",
            "https://evil.example/",
            "/jobs/",
            "/jobs/a/../x",
            "/x",
            "",
        ] {
            assert!(!local_page(elsewhere), "{elsewhere}");
        }
    }

    #[test]
    fn the_chart_scales_to_its_highest_point() {
        let svg = chart(&[0, 5, 10]);
        assert!(
            svg.contains("points=\"0.0,120.0 300.0,65.0 600.0,10.0\""),
            "{svg}"
        );
        assert!(chart(&[]).contains("0 not final now"));
    }
}
