//! The status page's HTML, written by hand with [`esc`] on every string that is not this
//! file's own text (see the module docs of `page` for why no template crate).
//!
//! What a job shows is chosen here, field by field: never its body, its delivery ID (the
//! identity key), its target's trigger token or route; every stored text (event ID, run ID,
//! request ID, error kind and message, lease owner) goes through the redaction set
//! (`redact.rs`, which holds the trigger token of every job read) and then [`esc`].

use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use hodoflow_outbox::{Counts, Cursor, Job, JobState, Pause, ServiceOutage};

use crate::job_line::rfc3339;
use crate::pause_line::left;

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

/// Stored text as shown: redacted, its controls and bidirectional formatting characters
/// escaped visibly and bounded (`redact::shown`), then HTML-escaped.
pub(crate) fn shown(text: &str) -> String {
    esc(&crate::redact::shown(text))
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

/// What marks a job's path segment that is not its event ID as it is ([`job_href`]).
const ESCAPED: char = '~';

/// The link of a job's page: `/jobs/` and the event ID as one path segment, with [`ESCAPED`]
/// in front when the ID is `.` or `..` (a browser resolves a dot segment away, even
/// percent-encoded as `%2E`) or starts with it.
pub(crate) fn job_href(event_id: &str) -> String {
    let escaped = matches!(event_id, "." | "..") || event_id.starts_with(ESCAPED);
    let mark = if escaped { "~" } else { "" };
    format!("/jobs/{mark}{}", segment(event_id))
}

/// The event ID of a job's path segment, decoded, as [`job_href`] wrote it.
pub(crate) fn event_id_of(segment: &str) -> &str {
    segment.strip_prefix(ESCAPED).unwrap_or(segment)
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

/// The most paused scopes, and services down, the overview lists (`outbox status` lists them
/// all).
const PAUSES_SHOWN: usize = 100;

/// The paused scopes and the services the fleet holds down, read at `now`.
#[derive(Debug)]
pub(crate) struct Pauses<'a> {
    pub(crate) pauses: &'a [Pause],
    pub(crate) outages: &'a [ServiceOutage],
    pub(crate) now: SystemTime,
}

/// The backlog chart's data: one count per point, evenly spaced over `span`, the last at `end`.
#[derive(Debug)]
pub(crate) struct Chart<'a> {
    pub(crate) points: &'a [u64],
    pub(crate) end: SystemTime,
    pub(crate) span: Duration,
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

/// The overview: counts, backlog chart, paused scopes, services down, and the jobs to look at.
pub(crate) fn overview(
    counts: &Counts,
    backlog: &Chart<'_>,
    pauses: &Pauses<'_>,
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
    body.push_str(&pauses_table(pauses));
    body.push_str(&outages_table(pauses));
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
         <th>x-request-id</th><th>next attempt</th><th>may have run</th><th></th></tr>"
    );
    if listing.jobs.is_empty() {
        out.push_str("<tr><td colspan=\"9\">none</td></tr>");
    }
    for job in &listing.jobs {
        let error = job.last_error.as_ref();
        let _ = write!(
            out,
            "<tr><td><a href=\"{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td class=\"may-have-run\">{}</td><td>{}</td></tr>",
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
            if job.may_have_run { "yes" } else { "no" },
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
    let may_have_run = if job.may_have_run {
        "yes: a call was sent and not answered, or the server said it was in progress; find \
         out whether it ran before sending it again"
    } else {
        "no"
    };
    let rows: [(&str, &str, String); 16] = [
        ("state", "state", job.state.as_str().to_owned()),
        ("may-have-run", "may have run", may_have_run.to_owned()),
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
    use hodoflow_outbox::Target;
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

/// The paused scopes: what a server's 429 or `Retry-After` closed, until when and why; the
/// first [`PAUSES_SHOWN`] in the order of their names.
fn pauses_table(pauses: &Pauses<'_>) -> String {
    let mut out = "<section id=\"pauses\"><h2>Paused scopes</h2><p class=\"note\">A server's 429 \
                   or Retry-After holds only what it names (a credential, one trigger, one \
                   vendor endpoint); the work of every other scope goes on.</p>"
        .to_owned();
    if pauses.pauses.is_empty() {
        out.push_str("<p id=\"no-pauses\">None: no scope is paused.</p></section>");
        return out;
    }
    out.push_str(
        "<table class=\"pauses\"><tr><th>scope</th><th>until (UTC)</th><th>left</th>\
         <th>why</th></tr>",
    );
    for pause in pauses.pauses.iter().take(PAUSES_SHOWN) {
        let line = crate::pause_line::PauseLine::of(pause, pauses.now);
        let why = if line.why.is_empty() {
            "-".to_owned()
        } else {
            shown(&line.why)
        };
        let _ = write!(
            out,
            "<tr class=\"pause\"><td class=\"scope\">{}</td><td class=\"until\">{}</td>\
             <td class=\"left\">{}</td><td class=\"why\">{why}</td></tr>",
            shown(&line.scope),
            esc(&line.until),
            left(Duration::from_millis(line.remaining_ms)),
        );
    }
    end_table(&mut out, "pauses", pauses.pauses.len());
    out
}

/// Closes a table of `listed` rows, of which the first [`PAUSES_SHOWN`] are shown, and its
/// section, saying where to read the rest (`more-<what>`).
fn end_table(out: &mut String, what: &str, listed: usize) {
    out.push_str("</table>");
    if let Some(more) = listed.checked_sub(PAUSES_SHOWN)
        && more > 0
    {
        let _ = write!(
            out,
            "<p class=\"note\" id=\"more-{what}\">And {more} more: \
             <code>hodoflow-send outbox status</code> lists them all.</p>"
        );
    }
    out.push_str("</section>");
}

/// The services the fleet holds down: since when, and when the next probe may go; the first
/// [`PAUSES_SHOWN`] in the order of their names.
fn outages_table(held: &Pauses<'_>) -> String {
    let mut out = "<section id=\"outages\"><h2>Services down</h2><p class=\"note\">A worker \
                   that finds a service down holds it down for every worker: one probe at a \
                   time goes until one is accepted.</p>"
        .to_owned();
    if held.outages.is_empty() {
        out.push_str("<p id=\"no-outages\">None: no service is held down.</p></section>");
        return out;
    }
    out.push_str(
        "<table class=\"outages\"><tr><th>scope</th><th>down since (UTC)</th><th>for</th>\
         <th>next probe (UTC)</th><th>in</th></tr>",
    );
    for down in held.outages.iter().take(PAUSES_SHOWN) {
        let line = crate::outage_line::OutageLine::of(down, held.now);
        let _ = write!(
            out,
            "<tr class=\"outage\"><td class=\"scope\">{}</td><td class=\"since\">{}</td>\
             <td class=\"down\">{}</td><td class=\"probe-at\">{}</td>\
             <td class=\"probe-in\">{}</td></tr>",
            shown(&line.scope),
            esc(&line.since),
            line.down(),
            esc(&line.probe_at),
            line.probe_in(),
        );
    }
    end_table(&mut out, "outages", held.outages.len());
    out
}

/// The chart's size, and its plot area inside (room for the scales' labels).
const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 200.0;
const LEFT: f64 = 52.0;
const RIGHT: f64 = 612.0;
const TOP: f64 = 24.0;
const BOTTOM: f64 = 160.0;

/// The y scale of a chart whose highest point is `max`: the step between ticks (1, 2 or 5
/// times a power of ten, so about four steps) and the top, a whole number of steps.
fn y_scale(max: u64) -> (u64, u64) {
    let mut step = 1_u64;
    'found: for power in 0..19 {
        let base = 10_u64.pow(power);
        for factor in [1, 2, 5] {
            step = base * factor;
            if step.saturating_mul(4) >= max {
                break 'found;
            }
        }
    }
    (step, max.div_ceil(step).max(1).saturating_mul(step))
}

/// The backlog as an inline SVG line chart with its scales: jobs not final on the y axis (0 to
/// a rounded top, a tick each step), the time in UTC on the x axis (a tick every quarter of
/// the span, `HH:MM`), the newest point on the right. No script: presentation attributes only.
pub(crate) fn chart(chart: &Chart<'_>) -> String {
    let points = chart.points;
    let max = points.iter().copied().max().unwrap_or(0);
    let (step, top) = y_scale(max);
    let gaps = points.len().saturating_sub(1).max(1);
    let x = |at: usize| LEFT + at as f64 * (RIGHT - LEFT) / gaps as f64;
    let y = |count: u64| BOTTOM - count as f64 * (BOTTOM - TOP) / top as f64;
    let mut svg = format!(
        "<svg class=\"chart\" id=\"backlog\" role=\"img\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" \
         width=\"{WIDTH}\" height=\"{HEIGHT}\" xmlns=\"http://www.w3.org/2000/svg\">\
         <title>Jobs not final (pending or in flight), one point a minute over the last {} \
         minutes: {} now, at most {max}</title>",
        chart.span.as_secs() / 60,
        points.last().copied().unwrap_or(0),
    );
    // The y scale: a grid line and a label at each step.
    let mut tick = 0;
    while tick <= top {
        let at = y(tick);
        let _ = write!(
            svg,
            "<line x1=\"{LEFT}\" y1=\"{at:.1}\" x2=\"{RIGHT}\" y2=\"{at:.1}\" stroke=\"#e4e7eb\"/>\
             <text class=\"y-tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" font-size=\"11\" \
             fill=\"#52606d\">{tick}</text>",
            LEFT - 6.0,
            at + 4.0
        );
        match tick.checked_add(step) {
            Some(next) => tick = next,
            None => break,
        }
    }
    // The x scale: a tick and the time of day every quarter of the span.
    let start = chart.end.checked_sub(chart.span).unwrap_or(chart.end);
    for quarter in 0..=4_u32 {
        let at = LEFT + f64::from(quarter) * (RIGHT - LEFT) / 4.0;
        let time = start + chart.span / 4 * quarter;
        let _ = write!(
            svg,
            "<line x1=\"{at:.1}\" y1=\"{BOTTOM}\" x2=\"{at:.1}\" y2=\"{:.1}\" stroke=\"#999\"/>\
             <text class=\"x-tick\" x=\"{at:.1}\" y=\"{:.1}\" text-anchor=\"middle\" \
             font-size=\"11\" fill=\"#52606d\">{}</text>",
            BOTTOM + 5.0,
            BOTTOM + 18.0,
            &rfc3339(time)[11..16]
        );
    }
    let mut line = String::new();
    for (at, count) in points.iter().enumerate() {
        let sep = if at == 0 { "" } else { " " };
        let _ = write!(line, "{sep}{:.1},{:.1}", x(at), y(*count));
    }
    let _ = write!(
        svg,
        "<line x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{LEFT}\" y2=\"{BOTTOM}\" stroke=\"#999\"/>\
         <line x1=\"{LEFT}\" y1=\"{BOTTOM}\" x2=\"{RIGHT}\" y2=\"{BOTTOM}\" stroke=\"#999\"/>\
         <polyline fill=\"none\" stroke=\"#2563eb\" stroke-width=\"2\" points=\"{line}\"/>\
         <text id=\"backlog-y-title\" x=\"{LEFT}\" y=\"12\" font-size=\"11\" fill=\"#1f2933\">\
         jobs not final (pending or in flight)</text>\
         <text id=\"backlog-x-title\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" \
         font-size=\"11\" fill=\"#1f2933\">time (UTC), one point a minute; now at the right</text>\
         </svg>",
        (LEFT + RIGHT) / 2.0,
        HEIGHT - 4.0
    );
    let _ = write!(
        svg,
        "<p class=\"note\">{} not final now; at most {max} in the last {} minutes.</p>",
        points.last().copied().unwrap_or(0),
        chart.span.as_secs() / 60
    );
    svg
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
    fn dot_ids_and_ids_starting_with_a_tilde_are_escaped_and_read_back() {
        for (id, href) in [
            (".", "/jobs/~."),
            ("..", "/jobs/~.."),
            ("~x", "/jobs/~~x"),
            ("...", "/jobs/..."),
            ("a.b", "/jobs/a.b"),
            ("x~", "/jobs/x~"),
        ] {
            assert_eq!(job_href(id), href);
            let segment = href.strip_prefix("/jobs/").unwrap();
            assert_eq!(event_id_of(segment), id);
            assert!(local_page(href), "{href}");
        }
    }

    #[test]
    fn stored_text_shows_controls_and_bidi_characters_escaped() {
        assert_eq!(
            shown("req\u{202e}<b>\u{1b}[2J"),
            "req\\u{202e}&lt;b&gt;\\x1b[2J"
        );
        assert!(shown(&"x".repeat(200_000)).len() < 2100, "bounded");
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

    fn chart_of(points: &[u64]) -> String {
        // 2025-01-01T12:00:05Z, an hour back to 11:00:05.
        let end = std::time::UNIX_EPOCH + Duration::from_secs(1_735_732_805);
        chart(&Chart {
            points,
            end,
            span: Duration::from_secs(3600),
        })
    }

    #[test]
    fn the_y_scale_rounds_up_to_a_whole_number_of_steps_of_1_2_or_5() {
        assert_eq!(y_scale(0), (1, 1));
        assert_eq!(y_scale(1), (1, 1));
        assert_eq!(y_scale(7), (2, 8));
        assert_eq!(y_scale(10), (5, 10));
        assert_eq!(y_scale(1_234), (500, 1_500));
        assert_eq!(y_scale(1_000_000), (500_000, 1_000_000));
        assert_eq!(y_scale(u64::MAX), (5_000_000_000_000_000_000, u64::MAX));
    }

    #[test]
    fn the_chart_scales_to_its_highest_point_with_its_axes_labelled() {
        let svg = chart_of(&[0, 5, 10]);
        // Points at x 52, 332, 612 on a scale of 0 to 10 from y 160 up to 24.
        assert!(
            svg.contains("points=\"52.0,160.0 332.0,92.0 612.0,24.0\""),
            "{svg}"
        );
        for label in [">0</text>", ">5</text>", ">10</text>"] {
            assert!(svg.contains(label), "{label}: {svg}");
        }
        assert_eq!(svg.matches("class=\"y-tick\"").count(), 3);
        for time in ["11:00", "11:15", "11:30", "11:45", "12:00"] {
            assert!(svg.contains(&format!(">{time}</text>")), "{time}: {svg}");
        }
        assert_eq!(svg.matches("class=\"x-tick\"").count(), 5);
        assert!(svg.contains("jobs not final (pending or in flight)"));
        assert!(svg.contains("time (UTC)"));
        assert!(!svg.contains("<script") && !svg.contains("style="));
        assert!(chart_of(&[]).contains("0 not final now"));
    }
}
