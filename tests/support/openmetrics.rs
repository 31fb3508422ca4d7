//! A strict reader of the OpenMetrics 1.0 text format, for tests: it refuses what the
//! specification's ABNF and rules refuse, as far as an exposition without exemplars or
//! timestamps goes, and hands back the families for the test to check.
//!
//! Checked: every line ends in `\n`, none is empty, `# EOF` is the last; `# HELP`, `# TYPE` and
//! `# UNIT` come before their family's samples, at most once each, and a family's name that has
//! a unit ends in `_<unit>`; a family is one run of lines (never interleaved with another, never
//! seen twice); names and label names match the grammar, label names are unique in a sample
//! and never start with `__`; label values are quoted with only `\\`, `\"` and `\n` escaped; each
//! sample's name is one its family's type allows (a counter: `_total`, `_created`; a
//! histogram: `_bucket` with `le`, `_count`, `_sum`, `_created`); no label set is repeated; a
//! counter is a non-negative number; a histogram's buckets rise in `le` to `+Inf`, their counts
//! never fall, and the `+Inf` bucket equals `_count`.

#![allow(dead_code, reason = "each test file uses a part of the reader")]

use std::collections::{BTreeMap, HashMap, HashSet};

/// One sample line: its full name, labels and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// One metric family: its type, help, unit and samples in order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Family {
    pub kind: String,
    pub help: Option<String>,
    pub unit: Option<String>,
    pub samples: Vec<Sample>,
}

impl Family {
    /// The value of the sample `name` with exactly `labels`.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let wanted: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.samples
            .iter()
            .find(|sample| sample.name == name && sample.labels == wanted)
            .map(|sample| sample.value)
    }

    /// The sum of the samples named `name` whose labels include `labels`.
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.samples
            .iter()
            .filter(|sample| sample.name == name)
            .filter(|sample| {
                labels
                    .iter()
                    .all(|(k, v)| sample.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|sample| sample.value)
            .sum()
    }

    /// The label names of every sample, `le` left out.
    pub fn label_names(&self) -> HashSet<Vec<String>> {
        self.samples
            .iter()
            .map(|sample| {
                sample
                    .labels
                    .keys()
                    .filter(|name| *name != "le")
                    .cloned()
                    .collect()
            })
            .collect()
    }
}

/// Reads `text` strictly; the families by name, or what rule the text broke.
pub fn parse(text: &str) -> Result<HashMap<String, Family>, String> {
    let Some(body) = text.strip_suffix("# EOF\n") else {
        return Err("the exposition does not end with `# EOF\\n`".into());
    };
    let mut families: HashMap<String, Family> = HashMap::new();
    let mut current: Option<String> = None;
    // Which kinds of line the current family has had.
    let mut seen_meta: HashSet<&'static str> = HashSet::new();
    let mut had_samples = false;
    let mut series: HashSet<(String, BTreeMap<String, String>)> = HashSet::new();
    for (number, line) in body.split_inclusive('\n').enumerate() {
        let at = |why: String| format!("line {}: {why}: {line:?}", number + 1);
        let Some(line) = line.strip_suffix('\n') else {
            return Err(at("no newline at the end".into()));
        };
        if line.is_empty() {
            return Err(at("an empty line".into()));
        }
        if let Some(meta) = line.strip_prefix("# ") {
            let mut parts = meta.splitn(3, ' ');
            let keyword = parts.next().unwrap_or_default();
            let name = parts.next().ok_or_else(|| at("no metric name".into()))?;
            let rest = parts.next();
            check_name(name).map_err(at)?;
            let kind: &'static str = match keyword {
                "HELP" => "help",
                "TYPE" => "type",
                "UNIT" => "unit",
                _ => return Err(at(format!("unknown descriptor {keyword:?}"))),
            };
            if current.as_deref() != Some(name) {
                if families.contains_key(name) {
                    return Err(at(format!("family {name} seen twice or interleaved")));
                }
                families.insert(name.to_owned(), Family::default());
                current = Some(name.to_owned());
                seen_meta.clear();
                had_samples = false;
            }
            if had_samples {
                return Err(at(format!("{keyword} after the family's samples")));
            }
            if !seen_meta.insert(kind) {
                return Err(at(format!("a second {keyword} line")));
            }
            let family = families.get_mut(name).expect("inserted above");
            match kind {
                "help" => {
                    let help = rest.unwrap_or_default();
                    check_escapes(help).map_err(at)?;
                    family.help = Some(help.to_owned());
                }
                "type" => {
                    let kind = rest.ok_or_else(|| at("no type".into()))?;
                    const TYPES: [&str; 8] = [
                        "counter",
                        "gauge",
                        "histogram",
                        "gaugehistogram",
                        "stateset",
                        "info",
                        "summary",
                        "unknown",
                    ];
                    if !TYPES.contains(&kind) {
                        return Err(at(format!("unknown type {kind:?}")));
                    }
                    family.kind = kind.to_owned();
                }
                _ => {
                    let unit = rest.ok_or_else(|| at("no unit".into()))?;
                    if !name.ends_with(&format!("_{unit}")) {
                        return Err(at(format!("{name} does not end with its unit {unit}")));
                    }
                    family.unit = Some(unit.to_owned());
                }
            }
            continue;
        }
        if line.starts_with('#') {
            return Err(at("a comment that is no descriptor".into()));
        }
        let sample = parse_sample(line).map_err(at)?;
        let family_name = current
            .clone()
            .ok_or_else(|| at("a sample before any descriptor".into()))?;
        let family = families.get_mut(&family_name).expect("current exists");
        let kind = if family.kind.is_empty() {
            "unknown"
        } else {
            family.kind.as_str()
        };
        let suffix = sample
            .name
            .strip_prefix(family_name.as_str())
            .ok_or_else(|| at(format!("{} is not of family {family_name}", sample.name)))?;
        let allowed: &[&str] = match kind {
            "counter" => &["_total", "_created"],
            "histogram" => &["_bucket", "_count", "_sum", "_created"],
            "gauge" | "unknown" => &[""],
            other => return Err(at(format!("type {other} is not read by this test"))),
        };
        if !allowed.contains(&suffix) {
            return Err(at(format!("{} in a {kind} family", sample.name)));
        }
        if (suffix == "_bucket") != sample.labels.contains_key("le") {
            return Err(at("`le` belongs to a bucket, and only there".into()));
        }
        if kind == "counter" && (sample.value.is_nan() || sample.value < 0.0) {
            return Err(at("a counter below zero or NaN".into()));
        }
        if !series.insert((sample.name.clone(), sample.labels.clone())) {
            return Err(at("a label set repeated".into()));
        }
        had_samples = true;
        family.samples.push(sample);
    }
    for (name, family) in &families {
        if family.kind == "histogram" {
            check_histogram(name, family)?;
        }
    }
    Ok(families)
}

fn check_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let first = chars.next().ok_or("an empty name")?;
    let ok = (first.is_ascii_alphabetic() || first == '_' || first == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
    if ok {
        Ok(())
    } else {
        Err(format!("{name:?} is not a metric name"))
    }
}

fn check_label_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let first = chars.next().ok_or("an empty label name")?;
    let ok = (first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with("__");
    if ok {
        Ok(())
    } else {
        Err(format!("{name:?} is not a label name"))
    }
}

/// Only `\\`, `\"` and `\n` may follow a backslash.
fn check_escapes(text: &str) -> Result<(), String> {
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\\' && !matches!(chars.next(), Some('\\' | '"' | 'n')) {
            return Err("an escape other than \\\\, \\\" or \\n".into());
        }
    }
    Ok(())
}

fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line.find(['{', ' ']).ok_or("a sample without a value")?;
    let name = &line[..name_end];
    check_name(name)?;
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if let Some(inner) = rest.strip_prefix('{') {
        rest = inner;
        loop {
            if let Some(after) = rest.strip_prefix('}') {
                rest = after;
                break;
            }
            let eq = rest.find('=').ok_or("a label without `=`")?;
            let label = &rest[..eq];
            check_label_name(label)?;
            rest = rest[eq + 1..]
                .strip_prefix('"')
                .ok_or("a label value not quoted")?;
            let mut value = String::new();
            let mut chars = rest.char_indices();
            let end = loop {
                match chars.next() {
                    None => return Err("a label value not closed".into()),
                    Some((i, '"')) => break i,
                    Some((_, '\\')) => match chars.next() {
                        Some((_, '\\')) => value.push('\\'),
                        Some((_, '"')) => value.push('"'),
                        Some((_, 'n')) => value.push('\n'),
                        _ => return Err("a bad escape in a label value".into()),
                    },
                    Some((_, '\n')) => return Err("a raw newline in a label value".into()),
                    Some((_, c)) => value.push(c),
                }
            };
            if labels.insert(label.to_owned(), value).is_some() {
                return Err(format!("label {label} twice"));
            }
            rest = &rest[end + 1..];
            if let Some(after) = rest.strip_prefix(',') {
                rest = after;
                if rest.starts_with('}') {
                    return Err("a trailing comma".into());
                }
            } else if !rest.starts_with('}') {
                return Err("labels not separated by `,`".into());
            }
        }
    }
    let value = rest.strip_prefix(' ').ok_or("no space before the value")?;
    if value.contains(' ') {
        return Err("a timestamp or exemplar, which this exposition never has".into());
    }
    let value = parse_number(value)?;
    Ok(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// A number as OpenMetrics writes it: a decimal or `+Inf`, `-Inf`, `NaN`.
fn parse_number(text: &str) -> Result<f64, String> {
    match text {
        "+Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        _ if text
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E')) =>
        {
            text.parse()
                .map_err(|_| format!("{text:?} is not a number"))
        }
        _ => Err(format!("{text:?} is not a number")),
    }
}

/// Per label set: buckets rising to `+Inf`, counts never falling, `+Inf` equal to `_count`, a
/// `_sum` present.
fn check_histogram(name: &str, family: &Family) -> Result<(), String> {
    let mut by_set: BTreeMap<Vec<(String, String)>, Vec<&Sample>> = BTreeMap::new();
    for sample in &family.samples {
        let key = sample
            .labels
            .iter()
            .filter(|(k, _)| *k != "le")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        by_set.entry(key).or_default().push(sample);
    }
    for (set, samples) in by_set {
        let find = |suffix: &str| {
            samples
                .iter()
                .find(|s| s.name == format!("{name}{suffix}"))
                .map(|s| s.value)
        };
        let count = find("_count").ok_or(format!("{name}{set:?}: no _count"))?;
        find("_sum").ok_or(format!("{name}{set:?}: no _sum"))?;
        if count < 0.0 || count.fract() != 0.0 {
            return Err(format!(
                "{name}{set:?}: _count {count} is not a whole number"
            ));
        }
        let buckets: Vec<(f64, f64)> = samples
            .iter()
            .filter(|s| s.name == format!("{name}_bucket"))
            .map(|s| Ok((parse_number(&s.labels["le"])?, s.value)))
            .collect::<Result<_, String>>()?;
        let Some(last) = buckets.last() else {
            return Err(format!("{name}{set:?}: no buckets"));
        };
        if last.0 != f64::INFINITY {
            return Err(format!("{name}{set:?}: the last bucket is not +Inf"));
        }
        if last.1 != count {
            return Err(format!(
                "{name}{set:?}: +Inf holds {} but _count is {count}",
                last.1
            ));
        }
        for pair in buckets.windows(2) {
            if pair[0].0 >= pair[1].0 {
                return Err(format!("{name}{set:?}: le does not rise: {pair:?}"));
            }
            if pair[0].1 > pair[1].1 {
                return Err(format!("{name}{set:?}: a bucket count falls: {pair:?}"));
            }
        }
    }
    Ok(())
}
