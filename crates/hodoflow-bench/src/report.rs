//! One scenario's result: the parameters, the figures and each target, as one JSON line.

use serde_json::{Map, Value, json};

/// The result of one scenario.
///
/// # Examples
///
/// ```
/// use hodoflow_bench::Report;
///
/// let mut report = Report::new("storm");
/// report.param("senders", 200);
/// report.figure("requests_per_op", 1.02);
/// report.at_most("requests_per_op", 1.02, 1.10);
/// assert!(report.passed());
/// assert!(report.to_line().starts_with(r#"{"scenario":"storm","pass":true,"#));
/// assert_eq!(report.to_json()["figures"]["requests_per_op"], 1.02);
/// ```
#[derive(Debug, Clone)]
pub struct Report {
    scenario: &'static str,
    params: Map<String, Value>,
    figures: Map<String, Value>,
    targets: Vec<Value>,
    notes: Vec<String>,
    passed: bool,
}

impl Report {
    /// An empty report of `scenario`, passing until a target is missed.
    pub fn new(scenario: &'static str) -> Self {
        Self {
            scenario,
            params: Map::new(),
            figures: Map::new(),
            targets: Vec::new(),
            notes: Vec::new(),
            passed: true,
        }
    }

    /// Records a parameter the scenario ran with.
    pub fn param(&mut self, name: &str, value: impl Into<Value>) {
        self.params.insert(name.to_owned(), value.into());
    }

    /// Records a measured figure.
    pub fn figure(&mut self, name: &str, value: impl Into<Value>) {
        self.figures.insert(name.to_owned(), value.into());
    }

    /// Adds a sentence that a reader of the figures needs.
    pub fn note(&mut self, text: impl Into<String>) {
        self.notes.push(text.into());
    }

    /// A target: `figure` must be at most `limit`.
    pub fn at_most(&mut self, figure: &str, measured: f64, limit: f64) {
        self.target(figure, "<=", measured, limit, measured <= limit);
    }

    /// A target: `figure` must be at least `limit`.
    pub fn at_least(&mut self, figure: &str, measured: f64, limit: f64) {
        self.target(figure, ">=", measured, limit, measured >= limit);
    }

    /// A target: `figure` must be exactly `expected`.
    pub fn exactly(&mut self, figure: &str, measured: f64, expected: f64) {
        self.target(figure, "==", measured, expected, measured == expected);
    }

    fn target(&mut self, figure: &str, op: &str, measured: f64, limit: f64, pass: bool) {
        self.passed &= pass;
        self.targets.push(json!({
            "figure": figure,
            "target": format!("{op} {limit}"),
            "measured": measured,
            "pass": pass,
        }));
    }

    /// The scenario's name.
    pub fn scenario(&self) -> &'static str {
        self.scenario
    }

    /// Whether every target was met.
    pub fn passed(&self) -> bool {
        self.passed
    }

    /// The report as one line of JSON, its keys in reading order: `scenario`, `pass`,
    /// `targets`, `figures`, `params`, `notes`.
    pub fn to_line(&self) -> String {
        let part = |value: &Value| value.to_string();
        format!(
            r#"{{"scenario":{},"pass":{},"targets":{},"figures":{},"params":{},"notes":{}}}"#,
            part(&json!(self.scenario)),
            self.passed,
            part(&json!(self.targets)),
            part(&Value::Object(self.figures.clone())),
            part(&Value::Object(self.params.clone())),
            part(&json!(self.notes)),
        )
    }

    /// The report as a JSON value (its keys sorted).
    pub fn to_json(&self) -> Value {
        json!({
            "scenario": self.scenario,
            "pass": self.passed,
            "targets": self.targets,
            "figures": self.figures,
            "params": self.params,
            "notes": self.notes,
        })
    }
}
