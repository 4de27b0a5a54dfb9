//! Label selectors: this crate's [`Selector`] (client-go's `labels.Selector`: requirements
//! that must all hold), and client-go's string grammar parsed into it.
//!
//! The cache speaks its own selector type so that it builds without kube; kube-core's
//! `Selector` (what `LabelSelector` converts into) converts both ways under the `kube`
//! feature. The parser is a port of apimachinery's `labels.Parse` (lexer, parser and
//! key/value validation), producing [`Requirement`]s:
//!
//! | string            | requirement                 |
//! | ----------------- | --------------------------- |
//! | `a=b`, `a==b`     | `Equal(a, b)`               |
//! | `a!=b`            | `NotEqual(a, b)`            |
//! | `a in (x,y)`      | `In(a, {x, y})`             |
//! | `a notin (x)`     | `NotIn(a, {x})`             |
//! | `a`               | `Exists(a)`                 |
//! | `!a`              | `DoesNotExist(a)`           |
//!
//! As in client-go, the requirements are sorted by key, value sets are sorted and
//! deduplicated, a value may be empty (`a=`, `a in ()`, `a in (,x)`), `in` and `notin` are
//! also valid keys and values, whitespace (space, tab, CR, LF) separates tokens, and a NUL
//! byte ends the token it is in (and the input, at the start of a token). Keys must be
//! qualified names (`[prefix/]name`, a DNS-1123 subdomain prefix of at most 253 characters
//! and a name of at most 63 alphanumerics, `-`, `_`, `.`, starting and ending alphanumeric);
//! values are empty or follow the name rule.
//!
//! Two differences:
//!
//! - client-go also accepts `a>1` and `a<1`, which kube-core's `Expression` cannot
//!   represent (so neither does [`Requirement`], which converts into it). A selector client-go accepts that has such a requirement is refused with
//!   [`Error::UnsupportedSelectorOperator`](crate::Error::UnsupportedSelectorOperator); one
//!   client-go refuses too (`a>x`, `a>1,b=-`) is an
//!   [`Error::InvalidSelector`](crate::Error::InvalidSelector), as for any other operator.
//! - Requirements with the same key keep their order in the input here (a stable sort).
//!   client-go sorts with `sort.Sort`, which is stable only up to 12 elements (an insertion
//!   sort); above that it is Go's pattern-defeating quicksort, which may reorder equal keys.
//!   So a selector of more than 12 requirements that repeats keys can print them in
//!   another order than client-go's `String()`: for `b!=1,a!=2,b!=3,...,b!=15` client-go
//!   prints `a!=10,a!=8,a!=14,a!=4,...`, kinformer `a!=2,a!=4,a!=6,...` (a selector with one
//!   key repeated 13 or 20 times comes out in input order on both sides). Which ones match
//!   is the same: the requirements are and-ed, and their order does not change the result.
//!   Matching client-go's order would mean porting Go's unstable sort step for step, for
//!   selectors no one writes.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::Error;

/// A label selector: requirements on an object's labels that must all hold (client-go's
/// `labels.Selector`). Made by [`parse_selector`] from client-go's string form, collected
/// from [`Requirement`]s, or (feature `kube`) converted from kube-core's `Selector`, which a
/// `LabelSelector` converts into. The empty selector ([`everything`]) matches every object.
///
/// ```
/// use std::collections::BTreeMap;
/// use kinformer_indexer::{Requirement, Selector};
///
/// let sel: Selector = [
///     Requirement::Equal("app".into(), "web".into()),
///     Requirement::DoesNotExist("canary".into()),
/// ]
/// .into_iter()
/// .collect();
/// assert_eq!(sel.to_string(), "app=web,!canary");
/// let labels = BTreeMap::from([("app".to_string(), "web".to_string())]);
/// assert!(sel.matches(&labels));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

/// One requirement of a [`Selector`] on one label key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Requirement {
    /// The label is set to the value.
    Equal(String, String),
    /// The label is not set, or set to another value.
    NotEqual(String, String),
    /// The label is set to one of the values.
    In(String, BTreeSet<String>),
    /// The label is not set, or set to none of the values.
    NotIn(String, BTreeSet<String>),
    /// The label is set.
    Exists(String),
    /// The label is not set.
    DoesNotExist(String),
}

impl Requirement {
    /// The label key the requirement is on.
    pub fn key(&self) -> &str {
        match self {
            Self::In(k, _)
            | Self::NotIn(k, _)
            | Self::Equal(k, _)
            | Self::NotEqual(k, _)
            | Self::Exists(k)
            | Self::DoesNotExist(k) => k,
        }
    }

    /// Whether `labels` meet the requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Self::In(key, values) => labels.get(key).is_some_and(|v| values.contains(v)),
            Self::NotIn(key, values) => labels.get(key).is_none_or(|v| !values.contains(v)),
            Self::Exists(key) => labels.contains_key(key),
            Self::DoesNotExist(key) => !labels.contains_key(key),
            Self::Equal(key, value) => labels.get(key) == Some(value),
            Self::NotEqual(key, value) => labels.get(key) != Some(value),
        }
    }
}

/// client-go's `String()` of one requirement (`==` prints as `=`).
impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = |values: &BTreeSet<String>| {
            values
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(",")
        };
        match self {
            Self::In(key, values) => write!(f, "{key} in ({})", set(values)),
            Self::NotIn(key, values) => write!(f, "{key} notin ({})", set(values)),
            Self::Equal(key, value) => write!(f, "{key}={value}"),
            Self::NotEqual(key, value) => write!(f, "{key}!={value}"),
            Self::Exists(key) => f.write_str(key),
            Self::DoesNotExist(key) => write!(f, "!{key}"),
        }
    }
}

impl Selector {
    /// Whether it matches every object: no requirements. Listers then skip label
    /// matching.
    pub fn selects_all(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether `labels` meet every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// The requirements, in the order they were given (sorted by key when parsed).
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }
}

/// client-go's `String()`: the requirements joined by `,`; the empty selector is `""`.
impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

impl FromIterator<Requirement> for Selector {
    fn from_iter<I: IntoIterator<Item = Requirement>>(iter: I) -> Self {
        Self {
            requirements: iter.into_iter().collect(),
        }
    }
}

/// client-go's `labels.SelectorFromSet`: one `Equal` per label, sorted by key.
///
/// ```
/// use kinformer_indexer::Selector;
///
/// let sel: Selector = [("tier", "web"), ("app", "nginx")].into_iter().collect();
/// assert_eq!(sel.to_string(), "app=nginx,tier=web");
/// ```
impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Selector {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut requirements: Vec<Requirement> = iter
            .into_iter()
            .map(|(k, v)| Requirement::Equal(k.into(), v.into()))
            .collect();
        requirements.sort_by(|a, b| a.key().cmp(b.key()));
        Self { requirements }
    }
}

impl From<Requirement> for Selector {
    fn from(requirement: Requirement) -> Self {
        Self {
            requirements: vec![requirement],
        }
    }
}

impl IntoIterator for Selector {
    type Item = Requirement;
    type IntoIter = std::vec::IntoIter<Requirement>;

    fn into_iter(self) -> Self::IntoIter {
        self.requirements.into_iter()
    }
}

#[cfg(feature = "kube")]
mod kube_conversions {
    use kube_core::Expression;

    use super::{Requirement, Selector};

    /// kube-core's selector (what a `LabelSelector` converts into), requirement for
    /// requirement.
    impl From<kube_core::Selector> for Selector {
        fn from(selector: kube_core::Selector) -> Self {
            selector.into_iter().map(Requirement::from).collect()
        }
    }

    impl From<Expression> for Requirement {
        fn from(expression: Expression) -> Self {
            match expression {
                Expression::In(k, v) => Self::In(k, v),
                Expression::NotIn(k, v) => Self::NotIn(k, v),
                Expression::Equal(k, v) => Self::Equal(k, v),
                Expression::NotEqual(k, v) => Self::NotEqual(k, v),
                Expression::Exists(k) => Self::Exists(k),
                Expression::DoesNotExist(k) => Self::DoesNotExist(k),
            }
        }
    }

    /// This selector as kube-core's, for kube's `ListParams::labels_from`.
    impl From<Selector> for kube_core::Selector {
        fn from(selector: Selector) -> Self {
            selector.into_iter().map(Expression::from).collect()
        }
    }

    impl From<Requirement> for Expression {
        fn from(requirement: Requirement) -> Self {
            match requirement {
                Requirement::In(k, v) => Self::In(k, v),
                Requirement::NotIn(k, v) => Self::NotIn(k, v),
                Requirement::Equal(k, v) => Self::Equal(k, v),
                Requirement::NotEqual(k, v) => Self::NotEqual(k, v),
                Requirement::Exists(k) => Self::Exists(k),
                Requirement::DoesNotExist(k) => Self::DoesNotExist(k),
            }
        }
    }
}

/// The selector that matches everything (client-go's `labels.Everything()`). Listers skip
/// label matching entirely for it.
pub fn everything() -> Selector {
    Selector::default()
}

/// Parses a label selector in client-go's string form (`labels.Parse`).
///
/// The requirements are sorted by key, as client-go sorts them, and the result's `Display`
/// is client-go's `String()` of the same selector, except that `==` prints as `=` and,
/// beyond 12 requirements, in the order of requirements that share a key. That sort is
/// stable here (a repeated key keeps the input's order); client-go's `sort.Sort` is stable
/// only up to 12 elements (an insertion sort) and above that may reorder equal keys. Which
/// labels match is the same either way: the requirements are and-ed.
///
/// ```
/// use kinformer_indexer::parse_selector;
/// use std::collections::BTreeMap;
///
/// let sel = parse_selector("tier in (web, db), app=nginx, !canary")?;
/// assert_eq!(sel.to_string(), "app=nginx,!canary,tier in (db,web)");
///
/// let labels = BTreeMap::from([("app".to_string(), "nginx".to_string()), ("tier".to_string(), "web".to_string())]);
/// assert!(sel.matches(&labels));
///
/// assert!(parse_selector("app=nginx||tier=web").is_err());
/// assert!(parse_selector("").unwrap().selects_all());
/// # Ok::<(), kinformer_indexer::Error>(())
/// ```
///
/// # Errors
/// [`Error::InvalidSelector`] for input outside the grammar or with an invalid key or
/// value (`>` and `<` need an integer); [`Error::UnsupportedSelectorOperator`] for a
/// selector client-go accepts that uses `>` or `<`.
pub fn parse_selector(selector: &str) -> Result<Selector, Error> {
    let tokens = lex(selector);
    let mut parser = Parser {
        tokens: &tokens,
        pos: 0,
        input: selector,
        unsupported: None,
    };
    let mut exprs = parser.parse()?;
    // Only now: a grammar or validation error anywhere in the input comes first, as
    // client-go refuses such a selector whatever its operators.
    if let Some(operator) = parser.unsupported {
        return Err(Error::UnsupportedSelectorOperator {
            selector: selector.to_owned(),
            operator,
        });
    }
    // Sort to make parsing deterministic, as client-go does.
    exprs.sort_by(|a, b| a.key().cmp(b.key()));
    Ok(exprs.into_iter().collect())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok {
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn keyword(s: &str) -> Option<Tok> {
    Some(match s {
        ")" => Tok::ClosedPar,
        "," => Tok::Comma,
        "!" => Tok::DoesNotExist,
        "==" => Tok::DoubleEquals,
        "=" => Tok::Equals,
        ">" => Tok::GreaterThan,
        "in" => Tok::In,
        "<" => Tok::LessThan,
        "!=" => Tok::NotEquals,
        "notin" => Tok::NotIn,
        "(" => Tok::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// client-go's lexer, byte for byte: `read` yields 0 at the end of input *and* for a NUL
/// byte (which it consumes), and that 0 ends whatever is being scanned.
struct Lexer<'a> {
    s: &'a str,
    pos: usize,
}

impl<'a> Lexer<'a> {
    fn read(&mut self) -> u8 {
        match self.s.as_bytes().get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                b
            }
            None => 0,
        }
    }

    fn unread(&mut self) {
        self.pos = self.pos.saturating_sub(1);
    }

    /// The text between two byte positions. Tokens only ever break at ASCII bytes, so the
    /// slice is always on character boundaries.
    fn text(&self, start: usize, end: usize) -> &'a str {
        self.s.get(start..end).unwrap_or("")
    }

    fn scan_id_or_keyword(&mut self) -> (Tok, &'a str) {
        let start = self.pos;
        let mut end;
        loop {
            end = self.pos;
            let ch = self.read();
            if ch == 0 {
                break;
            }
            if is_special(ch) || is_whitespace(ch) {
                self.unread();
                break;
            }
        }
        let lit = self.text(start, end);
        (keyword(lit).unwrap_or(Tok::Identifier), lit)
    }

    fn scan_special(&mut self) -> (Tok, &'a str) {
        let start = self.pos;
        let mut last: Option<(Tok, &'a str)> = None;
        loop {
            let ch = self.read();
            if ch == 0 {
                break;
            }
            if !is_special(ch) {
                self.unread();
                break;
            }
            match keyword(self.text(start, self.pos)) {
                Some(tok) => last = Some((tok, self.text(start, self.pos))),
                None if last.is_some() => {
                    self.unread();
                    break;
                }
                None => {}
            }
        }
        // Every single special byte is a token, so `last` is always set.
        last.unwrap_or((Tok::EndOfString, ""))
    }

    fn lex(&mut self) -> (Tok, &'a str) {
        let mut ch = self.read();
        while is_whitespace(ch) {
            ch = self.read();
        }
        if ch == 0 {
            (Tok::EndOfString, "")
        } else if is_special(ch) {
            self.unread();
            self.scan_special()
        } else {
            self.unread();
            self.scan_id_or_keyword()
        }
    }
}

fn lex(s: &str) -> Vec<(Tok, &str)> {
    let mut lexer = Lexer { s, pos: 0 };
    let mut tokens = Vec::new();
    loop {
        let (tok, lit) = lexer.lex();
        tokens.push((tok, lit));
        if tok == Tok::EndOfString {
            return tokens;
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    /// `in` and `notin` read as identifiers.
    Values,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Exists,
    DoesNotExist,
    Equals,
    NotEquals,
    In,
    NotIn,
}

struct Parser<'t, 'a> {
    tokens: &'t [(Tok, &'a str)],
    pos: usize,
    input: &'a str,
    /// The first `>` or `<` of a valid requirement: kube-core cannot hold it.
    unsupported: Option<&'static str>,
}

impl<'a> Parser<'_, 'a> {
    fn err(&self, reason: impl Into<String>) -> Error {
        Error::InvalidSelector {
            selector: self.input.to_owned(),
            reason: reason.into(),
        }
    }

    fn lookahead(&self, ctx: Context) -> (Tok, &'a str) {
        let (tok, lit) = self
            .tokens
            .get(self.pos)
            .copied()
            .unwrap_or((Tok::EndOfString, ""));
        match (ctx, tok) {
            (Context::Values, Tok::In | Tok::NotIn) => (Tok::Identifier, lit),
            _ => (tok, lit),
        }
    }

    fn consume(&mut self, ctx: Context) -> (Tok, &'a str) {
        let t = self.lookahead(ctx);
        self.pos += 1;
        t
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, Error> {
        let mut exprs = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(Context::Values);
            match tok {
                Tok::Identifier | Tok::DoesNotExist => {
                    let expr = self.parse_requirement().map_err(|reason| {
                        self.err(format!("unable to parse requirement: {reason}"))
                    })?;
                    exprs.extend(expr);
                    let (t, l) = self.consume(Context::Values);
                    match t {
                        Tok::EndOfString => return Ok(exprs),
                        Tok::Comma => {
                            let (t2, l2) = self.lookahead(Context::Values);
                            if t2 != Tok::Identifier && t2 != Tok::DoesNotExist {
                                return Err(self
                                    .err(format!("found '{l2}', expected: identifier after ','")));
                            }
                        }
                        _ => {
                            return Err(
                                self.err(format!("found '{l}', expected: ',' or 'end of string'"))
                            );
                        }
                    }
                }
                Tok::EndOfString => return Ok(exprs),
                _ => {
                    return Err(self.err(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    )));
                }
            }
        }
    }

    /// The error is a grammar or validation problem (to be prefixed). `None` is a valid
    /// `>` or `<` requirement, recorded in `unsupported`.
    fn parse_requirement(&mut self) -> Result<Option<Requirement>, String> {
        let (key, op) = self.parse_key_and_infer_operator()?;
        let op = match op {
            Some(op) => op,
            None => match self.parse_operator()? {
                Ok(op) => op,
                Err(unsupported) => {
                    // Validated as client-go does, so that only a selector it accepts is
                    // reported as unsupported.
                    let value = self.parse_exact_value()?;
                    if value.parse::<i64>().is_err() {
                        return Err(format!(
                            "invalid value {value:?} for key {key:?}: for 'Gt', 'Lt' operators, \
                             the value must be an integer"
                        ));
                    }
                    validate_label_value(key, &value)?;
                    self.unsupported.get_or_insert(unsupported);
                    return Ok(None);
                }
            },
        };
        let key = key.to_owned();
        Ok(Some(match op {
            Op::Exists => Requirement::Exists(key),
            Op::DoesNotExist => Requirement::DoesNotExist(key),
            Op::In | Op::NotIn => {
                let values = self.parse_values()?;
                for v in &values {
                    validate_label_value(&key, v)?;
                }
                if op == Op::In {
                    Requirement::In(key, values)
                } else {
                    Requirement::NotIn(key, values)
                }
            }
            Op::Equals | Op::NotEquals => {
                let value = self.parse_exact_value()?;
                validate_label_value(&key, &value)?;
                if op == Op::Equals {
                    Requirement::Equal(key, value)
                } else {
                    Requirement::NotEqual(key, value)
                }
            }
        }))
    }

    /// A key, and `Exists` / `DoesNotExist` when no binary operator follows.
    fn parse_key_and_infer_operator(&mut self) -> Result<(&'a str, Option<Op>), String> {
        let mut op = None;
        let (mut tok, mut lit) = self.consume(Context::Values);
        if tok == Tok::DoesNotExist {
            op = Some(Op::DoesNotExist);
            (tok, lit) = self.consume(Context::Values);
        }
        if tok != Tok::Identifier {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        validate_label_key(lit)?;
        let (next, _) = self.lookahead(Context::Values);
        if (next == Tok::EndOfString || next == Tok::Comma) && op.is_none() {
            op = Some(Op::Exists);
        }
        Ok((lit, op))
    }

    /// The binary operator; `Err` inside for `>` / `<`.
    fn parse_operator(&mut self) -> Result<Result<Op, &'static str>, String> {
        let (tok, lit) = self.consume(Context::KeyAndOperator);
        Ok(Ok(match tok {
            Tok::In => Op::In,
            Tok::Equals | Tok::DoubleEquals => Op::Equals,
            Tok::NotIn => Op::NotIn,
            Tok::NotEquals => Op::NotEquals,
            Tok::GreaterThan => return Ok(Err(">")),
            Tok::LessThan => return Ok(Err("<")),
            _ => {
                return Err(format!(
                    "found '{lit}', expected: in, notin, =, ==, !=, gt, lt"
                ));
            }
        }))
    }

    /// `(x,y,z)`; empty entries are the empty value.
    fn parse_values(&mut self) -> Result<BTreeSet<String>, String> {
        let (tok, lit) = self.consume(Context::Values);
        if tok != Tok::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.lookahead(Context::Values);
        match tok {
            Tok::Identifier | Tok::Comma => {
                let set = self.parse_identifiers_list()?;
                let (tok, _) = self.consume(Context::Values);
                if tok != Tok::ClosedPar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(set)
            }
            Tok::ClosedPar => {
                self.consume(Context::Values);
                Ok(BTreeSet::from([String::new()]))
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    fn parse_identifiers_list(&mut self) -> Result<BTreeSet<String>, String> {
        let mut set = BTreeSet::new();
        loop {
            let (tok, lit) = self.consume(Context::Values);
            match tok {
                Tok::Identifier => {
                    set.insert(lit.to_owned());
                    let (tok2, lit2) = self.lookahead(Context::Values);
                    match tok2 {
                        Tok::Comma => {}
                        Tok::ClosedPar => return Ok(set),
                        _ => return Err(format!("found '{lit2}', expected: ',' or ')'")),
                    }
                }
                Tok::Comma => {
                    if set.is_empty() {
                        set.insert(String::new()); // "(,"
                    }
                    let (tok2, _) = self.lookahead(Context::Values);
                    if tok2 == Tok::ClosedPar {
                        set.insert(String::new()); // ",)"
                        return Ok(set);
                    }
                    if tok2 == Tok::Comma {
                        set.insert(String::new()); // ",,"
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    fn parse_exact_value(&mut self) -> Result<String, String> {
        let (tok, _) = self.lookahead(Context::Values);
        if tok == Tok::EndOfString || tok == Tok::Comma {
            return Ok(String::new());
        }
        let (tok, lit) = self.consume(Context::Values);
        if tok == Tok::Identifier {
            Ok(lit.to_owned())
        } else {
            Err(format!("found '{lit}', expected: identifier"))
        }
    }
}

const NAME_MAX: usize = 63;
const PREFIX_MAX: usize = 253;

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`: apimachinery's qualified-name part, also
/// the form of a non-empty label value.
fn is_name(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// A lowercase RFC 1123 subdomain: dot-separated labels of `[a-z0-9-]`, each starting and
/// ending alphanumeric, at most 253 characters in all.
fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= PREFIX_MAX
        && s.split('.').all(|label| {
            let b = label.as_bytes();
            let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
            match (b.first(), b.last()) {
                (Some(first), Some(last)) => {
                    alnum(first) && alnum(last) && b.iter().all(|c| alnum(c) || *c == b'-')
                }
                _ => false,
            }
        })
}

/// apimachinery's `IsQualifiedName` (label keys).
fn validate_label_key(key: &str) -> Result<(), String> {
    let mut problems = Vec::new();
    let mut parts = key.split('/');
    let (prefix, name) = match (parts.next(), parts.next(), parts.next()) {
        (Some(name), None, _) => (None, name),
        (Some(prefix), Some(name), None) => (Some(prefix), name),
        _ => {
            return Err(format!(
                "invalid label key {key:?}: a valid label key must consist of alphanumeric characters, \
                 '-', '_' or '.', and must start and end with an alphanumeric character, with an \
                 optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            ));
        }
    };
    match prefix {
        Some("") => problems.push("prefix part must be non-empty".to_owned()),
        Some(p) if !is_dns1123_subdomain(p) => problems.push(format!(
            "prefix part must be a lowercase RFC 1123 subdomain of at most {PREFIX_MAX} characters"
        )),
        _ => {}
    }
    if name.is_empty() {
        problems.push("name part must be non-empty".to_owned());
    } else if name.len() > NAME_MAX {
        problems.push(format!(
            "name part must be no more than {NAME_MAX} characters"
        ));
    }
    if !is_name(name) {
        problems.push(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start \
             and end with an alphanumeric character"
                .to_owned(),
        );
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "invalid label key {key:?}: {}",
            problems.join("; ")
        ))
    }
}

/// apimachinery's `IsValidLabelValue`.
fn validate_label_value(key: &str, value: &str) -> Result<(), String> {
    if value.len() > NAME_MAX {
        return Err(format!(
            "invalid label value {value:?} for key {key:?}: must be no more than {NAME_MAX} characters"
        ));
    }
    if !value.is_empty() && !is_name(value) {
        return Err(format!(
            "invalid label value {value:?} for key {key:?}: a valid label must be an empty string \
             or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an \
             alphanumeric character"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        lex(s).into_iter().map(|(t, _)| t).collect()
    }

    #[test]
    fn lexer_returns_the_longest_token() {
        use Tok::*;
        for (s, t) in [
            ("", EndOfString),
            (",", Comma),
            ("notin", NotIn),
            ("in", In),
            ("=", Equals),
            ("==", DoubleEquals),
            (">", GreaterThan),
            ("<", LessThan),
            ("!", DoesNotExist),
            ("!=", NotEquals),
            ("(", OpenPar),
            (")", ClosedPar),
            ("~", Identifier),
            ("||", Identifier),
        ] {
            let mut l = Lexer { s, pos: 0 };
            let (tok, lit) = l.lex();
            assert_eq!(tok, t, "{s:?}");
            assert_eq!(lit, s);
        }
    }

    #[test]
    fn lexer_sequences_match_client_go() {
        use Tok::*;
        let cases: &[(&str, &[Tok])] = &[
            (
                "key in ( value )",
                &[Identifier, In, OpenPar, Identifier, ClosedPar, EndOfString],
            ),
            (
                "key notin ( value )",
                &[
                    Identifier,
                    NotIn,
                    OpenPar,
                    Identifier,
                    ClosedPar,
                    EndOfString,
                ],
            ),
            (
                "key in ( value1, value2 )",
                &[
                    Identifier,
                    In,
                    OpenPar,
                    Identifier,
                    Comma,
                    Identifier,
                    ClosedPar,
                    EndOfString,
                ],
            ),
            ("key", &[Identifier, EndOfString]),
            ("!key", &[DoesNotExist, Identifier, EndOfString]),
            ("()", &[OpenPar, ClosedPar, EndOfString]),
            ("", &[EndOfString]),
            (
                "x in (),y",
                &[
                    Identifier,
                    In,
                    OpenPar,
                    ClosedPar,
                    Comma,
                    Identifier,
                    EndOfString,
                ],
            ),
            (
                "== != (), = notin",
                &[
                    DoubleEquals,
                    NotEquals,
                    OpenPar,
                    ClosedPar,
                    Comma,
                    Equals,
                    NotIn,
                    EndOfString,
                ],
            ),
            ("key>2", &[Identifier, GreaterThan, Identifier, EndOfString]),
            ("key<1", &[Identifier, LessThan, Identifier, EndOfString]),
            ("!==", &[NotEquals, Equals, EndOfString]),
            ("a\0b", &[Identifier, Identifier, EndOfString]),
            ("a \0 b", &[Identifier, EndOfString]),
        ];
        for (s, want) in cases {
            assert_eq!(toks(s), *want, "{s:?}");
        }
    }

    #[test]
    fn label_key_rules() {
        for good in [
            "a",
            "A1",
            "a.b_c-d",
            "example.com/a",
            "a-b.c/x",
            &"a".repeat(63),
        ] {
            assert!(validate_label_key(good).is_ok(), "{good:?}");
        }
        let long_prefix = format!("{}/a", "a".repeat(254));
        for bad in [
            "",
            "-a",
            "a-",
            "/a",
            "a/",
            "a/b/c",
            "Example.com/a",
            "a..b./c",
            "é",
            &"a".repeat(64),
            &long_prefix,
        ] {
            assert!(validate_label_key(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn label_value_rules() {
        for good in ["", "a", "a.b_c-D9", &"v".repeat(63)] {
            assert!(validate_label_value("k", good).is_ok(), "{good:?}");
        }
        for bad in ["-a", "a_", "a/b", "a b", &"v".repeat(64)] {
            assert!(validate_label_value("k", bad).is_err(), "{bad:?}");
        }
    }
}
