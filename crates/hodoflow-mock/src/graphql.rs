//! `POST /api/graphql`: the read-only `factQuery` field.
//!
//! Schema: `factQuery(type: String!): [Fact!]!` with `Fact { id type attributes }`;
//! the facts are the caller's JSON:API resources of that type. The parser is
//! just enough GraphQL to tell parse, validation and complexity errors apart.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};

use crate::config::Scope;
use crate::state::ApiState;

/// A selected field: name, arguments (name, literal or variable), sub-selection.
#[derive(Debug, PartialEq)]
struct Field {
    name: String,
    args: Vec<(String, Arg)>,
    selection: Vec<Field>,
}

#[derive(Debug, PartialEq)]
enum Arg {
    Literal(String),
    Variable(String),
}

#[derive(Debug, PartialEq)]
enum Token {
    Punct(char),
    Name(String),
    Str(String),
}

fn tokenize(text: &str) -> Option<Vec<Token>> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            c if c.is_whitespace() || c == ',' => {
                chars.next();
            }
            '#' => while chars.next().is_some_and(|c| c != '\n') {},
            '{' | '}' | '(' | ')' | ':' | '$' | '!' | '[' | ']' => {
                tokens.push(Token::Punct(c));
                chars.next();
            }
            '"' => {
                chars.next();
                let mut s = String::new();
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => s.push(chars.next()?),
                        c => s.push(c),
                    }
                }
                tokens.push(Token::Str(s));
            }
            c if c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.' => {
                let mut s = String::new();
                while let Some(&c) = chars.peek() {
                    if !(c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.') {
                        break;
                    }
                    s.push(c);
                    chars.next();
                }
                tokens.push(Token::Name(s));
            }
            _ => return None,
        }
    }
    Some(tokens)
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn next(&mut self) -> Option<&Token> {
        let token = self.tokens.get(self.at);
        self.at += 1;
        token
    }

    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn expect(&mut self, c: char) -> Option<()> {
        (self.next()? == &Token::Punct(c)).then_some(())
    }

    /// `query Name($v: Type!) { ... }` or `{ ... }`.
    fn document(&mut self) -> Option<Vec<Field>> {
        if let Some(Token::Name(keyword)) = self.peek() {
            if keyword != "query" {
                return None;
            }
            self.next();
            if let Some(Token::Name(_)) = self.peek() {
                self.next();
            }
            if self.peek() == Some(&Token::Punct('(')) {
                while self.next()? != &Token::Punct(')') {}
            }
        }
        let fields = self.selection()?;
        self.peek().is_none().then_some(fields)
    }

    fn selection(&mut self) -> Option<Vec<Field>> {
        self.expect('{')?;
        let mut fields = Vec::new();
        loop {
            match self.next()? {
                Token::Punct('}') => break,
                Token::Name(name) => {
                    let name = name.clone();
                    let args = if self.peek() == Some(&Token::Punct('(')) {
                        self.arguments()?
                    } else {
                        Vec::new()
                    };
                    let selection = if self.peek() == Some(&Token::Punct('{')) {
                        self.selection()?
                    } else {
                        Vec::new()
                    };
                    fields.push(Field {
                        name,
                        args,
                        selection,
                    });
                }
                _ => return None,
            }
        }
        (!fields.is_empty()).then_some(fields)
    }

    fn arguments(&mut self) -> Option<Vec<(String, Arg)>> {
        self.expect('(')?;
        let mut args = Vec::new();
        loop {
            let name = match self.next()? {
                Token::Punct(')') => break,
                Token::Name(name) => name.clone(),
                _ => return None,
            };
            self.expect(':')?;
            let value = match self.next()? {
                Token::Punct('$') => match self.next()? {
                    Token::Name(v) => Arg::Variable(v.clone()),
                    _ => return None,
                },
                Token::Str(s) | Token::Name(s) => Arg::Literal(s.clone()),
                _ => return None,
            };
            args.push((name, value));
        }
        Some(args)
    }
}

fn count_fields(fields: &[Field]) -> usize {
    fields.iter().map(|f| 1 + count_fields(&f.selection)).sum()
}

const FACT_FIELDS: [&str; 3] = ["id", "type", "attributes"];

/// Checks a parsed document against the schema; the `type` argument's value.
fn validate(fields: &[Field], variables: &Value) -> Result<String, String> {
    let [fact_query] = fields else {
        return Err("Exactly one field, factQuery, may be selected".to_owned());
    };
    if fact_query.name != "factQuery" {
        return Err(format!(
            "Cannot query field \"{}\" on type \"Query\"",
            fact_query.name
        ));
    }
    let kind = match fact_query.args.as_slice() {
        [(name, arg)] if name == "type" => match arg {
            Arg::Literal(v) => v.clone(),
            Arg::Variable(v) => variables[v.as_str()]
                .as_str()
                .ok_or_else(|| format!("Variable \"${v}\" of type String! was not provided"))?
                .to_owned(),
        },
        _ => return Err("factQuery takes one argument, type: String!".to_owned()),
    };
    if fact_query.selection.is_empty() {
        return Err("factQuery of type [Fact!]! must have a selection of subfields".to_owned());
    }
    if let Some(unknown) = fact_query
        .selection
        .iter()
        .find(|f| !FACT_FIELDS.contains(&f.name.as_str()) || !f.selection.is_empty())
    {
        return Err(format!(
            "Cannot query field \"{}\" on type \"Fact\"",
            unknown.name
        ));
    }
    Ok(kind)
}

fn graphql_error(shared: &ApiState, code: &str, message: &str) -> Response {
    let status =
        StatusCode::from_u16(shared.limits.graphql_error_status).unwrap_or(StatusCode::BAD_REQUEST);
    let body = json!({"errors": [{"message": message, "extensions": {"code": code}}]});
    (status, Json(body)).into_response()
}

/// `POST /api/graphql`.
pub(crate) async fn query(
    State(shared): State<ApiState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let principal = match shared.gate.api(&headers, Scope::ApiRead) {
        Ok(p) => p,
        Err(refused) => return refused.into_response(),
    };
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let Some(text) = request["query"].as_str() else {
        return graphql_error(
            &shared,
            "GRAPHQL_PARSE_FAILED",
            "Body must be {\"query\": \"...\"}",
        );
    };
    let parsed = tokenize(text).and_then(|tokens| Parser { tokens, at: 0 }.document());
    let Some(fields) = parsed else {
        return graphql_error(
            &shared,
            "GRAPHQL_PARSE_FAILED",
            "Syntax Error: could not parse the document",
        );
    };
    let complexity = count_fields(&fields);
    if complexity > shared.limits.graphql_max_fields {
        let message = format!(
            "Query complexity {complexity} exceeds the maximum of {}",
            shared.limits.graphql_max_fields
        );
        return graphql_error(&shared, "QUERY_COMPLEXITY_EXCEEDED", &message);
    }
    let kind = match validate(&fields, &request["variables"]) {
        Ok(kind) => kind,
        Err(message) => return graphql_error(&shared, "GRAPHQL_VALIDATION_FAILED", &message),
    };
    let selected: Vec<&str> = fields[0]
        .selection
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    let org = principal.organization;
    let facts: Vec<Value> = {
        let resources = crate::lock(&shared.resources);
        let from = (org.clone(), kind.clone(), String::new());
        resources
            .range(from..)
            .take_while(|((o, k, _), _)| *o == org && *k == kind)
            .map(|((_, k, id), attrs)| {
                let full = json!({"id": id, "type": k, "attributes": attrs});
                selected
                    .iter()
                    .map(|f| ((*f).to_owned(), full[*f].clone()))
                    .collect()
            })
            .collect()
    };
    Json(json!({"data": {"factQuery": facts}})).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Option<Vec<Field>> {
        tokenize(text).and_then(|tokens| Parser { tokens, at: 0 }.document())
    }

    #[test]
    fn parses_named_queries_with_variables() {
        let fields =
            parse("query Facts($t: String!) { factQuery(type: $t) { id attributes } }").unwrap();
        assert_eq!(count_fields(&fields), 3);
        assert_eq!(
            validate(&fields, &json!({"t": "projects"})),
            Ok("projects".to_owned())
        );
    }

    #[test]
    fn tells_parse_errors_from_validation_errors() {
        assert!(parse("{ factQuery(type: \"x\") { id }").is_none());
        assert!(parse("mutation { x }").is_none());
        let unknown = parse("{ factQuery(type: \"x\") { id secret } }").unwrap();
        assert!(validate(&unknown, &Value::Null).is_err());
        let other = parse("{ users { id } }").unwrap();
        assert!(validate(&other, &Value::Null).is_err());
        let missing_var = parse("{ factQuery(type: $t) { id } }").unwrap();
        assert!(validate(&missing_var, &Value::Null).is_err());
    }
}
