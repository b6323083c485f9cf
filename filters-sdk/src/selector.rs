//! Kubernetes label selectors (`app=web,tier!=db,env in (a,b),!legacy`), parsed once and
//! matched against an object's labels. The filter host's `list` import and the native test
//! harness both match with this, so a filter sees the same answer in tests and in the gateway.
//!
//! Supported terms, as `kubectl -l` takes them: `k=v`, `k==v`, `k!=v`, `k in (v1,v2)`,
//! `k notin (v1)`, `k` (exists) and `!k` (does not exist); terms are joined by commas and
//! must all hold. The empty selector matches everything.

use std::collections::BTreeMap;
use std::fmt;

use thiserror::Error;

/// Why a selector does not parse.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum SelectorError {
    /// A character that cannot appear in a selector.
    #[error("unexpected character {found:?} at byte {at}")]
    Character {
        /// The character.
        found: char,
        /// Its byte offset.
        at: usize,
    },
    /// A token in the wrong place.
    #[error("expected {expected}, found {found}")]
    Syntax {
        /// What the grammar wanted.
        expected: &'static str,
        /// What was there.
        found: String,
    },
}

/// How a requirement compares a label.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Operator {
    /// The label is one of the values (`=`, `==`, `in`).
    In(Vec<String>),
    /// The label is absent or none of the values (`!=`, `notin`).
    NotIn(Vec<String>),
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
}

/// One term of a selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// The comparison.
    pub operator: Operator,
}

impl Requirement {
    fn matches(&self, value: Option<&str>) -> bool {
        match (&self.operator, value) {
            (Operator::In(values), Some(value)) => values.iter().any(|v| v == value),
            (Operator::In(_), None) => false,
            (Operator::NotIn(values), Some(value)) => values.iter().all(|v| v != value),
            (Operator::NotIn(_), None) => true,
            (Operator::Exists, value) => value.is_some(),
            (Operator::DoesNotExist, value) => value.is_none(),
        }
    }
}

/// A parsed label selector: all its requirements must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// The selector that matches everything.
    pub fn everything() -> LabelSelector {
        LabelSelector::default()
    }

    /// Parses the Kubernetes selector syntax.
    pub fn parse(text: &str) -> Result<LabelSelector, SelectorError> {
        Parser {
            tokens: tokenize(text)?,
            at: 0,
        }
        .selector()
    }

    /// The requirements, in the order written.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Whether this selector matches everything.
    pub fn is_everything(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether labels looked up by `label` satisfy every requirement.
    pub fn matches_with<'a>(&self, label: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.requirements.iter().all(|r| r.matches(label(&r.key)))
    }

    /// Whether a label map satisfies every requirement.
    pub fn matches(&self, labels: &BTreeMap<&str, &str>) -> bool {
        self.matches_with(|key| labels.get(key).copied())
    }

    /// Whether a Kubernetes object (as JSON) satisfies every requirement by its
    /// `metadata.labels`.
    pub fn matches_object(&self, object: &serde_json::Value) -> bool {
        let labels = object.pointer("/metadata/labels");
        self.matches_with(|key| labels?.get(key)?.as_str())
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match &r.operator {
                Operator::In(values) => write!(f, "{} in ({})", r.key, values.join(","))?,
                Operator::NotIn(values) => write!(f, "{} notin ({})", r.key, values.join(","))?,
                Operator::Exists => f.write_str(&r.key)?,
                Operator::DoesNotExist => write!(f, "!{}", r.key)?,
            }
        }
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Word(String),
    Equals,
    NotEquals,
    Bang,
    Open,
    Close,
    Comma,
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Token::Word(word) => write!(f, "{word:?}"),
            Token::Equals => f.write_str("'='"),
            Token::NotEquals => f.write_str("'!='"),
            Token::Bang => f.write_str("'!'"),
            Token::Open => f.write_str("'('"),
            Token::Close => f.write_str("')'"),
            Token::Comma => f.write_str("','"),
        }
    }
}

/// Characters of label keys (with their `prefix/`) and values.
fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/')
}

fn tokenize(text: &str) -> Result<Vec<Token>, SelectorError> {
    let mut tokens = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let token = match c {
            c if c.is_whitespace() => continue,
            '=' => {
                // `==` means the same as `=`.
                chars.next_if(|(_, c)| *c == '=');
                Token::Equals
            }
            '!' if chars.next_if(|(_, c)| *c == '=').is_some() => Token::NotEquals,
            '!' => Token::Bang,
            '(' => Token::Open,
            ')' => Token::Close,
            ',' => Token::Comma,
            c if is_word_char(c) => {
                let mut word = String::from(c);
                while let Some((_, c)) = chars.next_if(|(_, c)| is_word_char(*c)) {
                    word.push(c);
                }
                Token::Word(word)
            }
            found => return Err(SelectorError::Character { found, at }),
        };
        tokens.push(token);
    }
    Ok(tokens)
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.at).cloned();
        self.at += 1;
        token
    }

    fn unexpected(&self, expected: &'static str, found: Option<Token>) -> SelectorError {
        SelectorError::Syntax {
            expected,
            found: found.map_or_else(|| "the end".to_owned(), |t| t.to_string()),
        }
    }

    fn selector(mut self) -> Result<LabelSelector, SelectorError> {
        let mut requirements = Vec::new();
        if self.peek().is_none() {
            return Ok(LabelSelector { requirements });
        }
        loop {
            requirements.push(self.requirement()?);
            match self.next() {
                None => return Ok(LabelSelector { requirements }),
                Some(Token::Comma) => {}
                other => return Err(self.unexpected("',' or the end", other)),
            }
        }
    }

    fn key(&mut self) -> Result<String, SelectorError> {
        match self.next() {
            Some(Token::Word(key)) => Ok(key),
            other => Err(self.unexpected("a label key", other)),
        }
    }

    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        if self.peek() == Some(&Token::Bang) {
            self.at += 1;
            let key = self.key()?;
            let operator = Operator::DoesNotExist;
            return Ok(Requirement { key, operator });
        }
        let key = self.key()?;
        let operator = match self.peek() {
            None | Some(Token::Comma) => Operator::Exists,
            Some(Token::Equals) => {
                self.at += 1;
                Operator::In(vec![self.value()?])
            }
            Some(Token::NotEquals) => {
                self.at += 1;
                Operator::NotIn(vec![self.value()?])
            }
            Some(Token::Word(word)) if word == "in" => {
                self.at += 1;
                Operator::In(self.set()?)
            }
            Some(Token::Word(word)) if word == "notin" => {
                self.at += 1;
                Operator::NotIn(self.set()?)
            }
            _ => {
                let found = self.next();
                return Err(self.unexpected("an operator (=, ==, !=, in, notin)", found));
            }
        };
        Ok(Requirement { key, operator })
    }

    /// A value after `=` or `!=`; it may be empty (`k=` matches the empty value).
    fn value(&mut self) -> Result<String, SelectorError> {
        match self.peek() {
            None | Some(Token::Comma) => Ok(String::new()),
            Some(Token::Word(_)) => match self.next() {
                Some(Token::Word(value)) => Ok(value),
                _ => unreachable!("peeked a word"),
            },
            _ => {
                let found = self.next();
                Err(self.unexpected("a value", found))
            }
        }
    }

    /// `(v1, v2, …)`: at least one value.
    fn set(&mut self) -> Result<Vec<String>, SelectorError> {
        match self.next() {
            Some(Token::Open) => {}
            other => return Err(self.unexpected("'('", other)),
        }
        let mut values = Vec::new();
        loop {
            match self.next() {
                Some(Token::Word(value)) => values.push(value),
                other => return Err(self.unexpected("a value", other)),
            }
            match self.next() {
                Some(Token::Comma) => {}
                Some(Token::Close) => return Ok(values),
                other => return Err(self.unexpected("',' or ')'", other)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn matches(selector: &str, labels: &[(&str, &str)]) -> bool {
        let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
        LabelSelector::parse(selector).unwrap().matches(&labels)
    }

    #[test]
    fn every_operator() {
        let web = [("app", "web"), ("tier", "front")];
        assert!(matches("", &web));
        assert!(matches("app=web", &web));
        assert!(matches("app==web", &web));
        assert!(!matches("app=db", &web));
        assert!(matches("app!=db", &web));
        assert!(
            matches("env!=prod", &web),
            "!= holds when the label is absent"
        );
        assert!(!matches("app!=web", &web));
        assert!(matches("app in (db, web)", &web));
        assert!(!matches("app in (db)", &web));
        assert!(!matches("env in (prod)", &web));
        assert!(matches("app notin (db)", &web));
        assert!(matches("env notin (prod)", &web));
        assert!(!matches("app notin (web,db)", &web));
        assert!(matches("tier", &web));
        assert!(!matches("env", &web));
        assert!(matches("!env", &web));
        assert!(!matches("!app", &web));
        assert!(matches(" app = web , tier in (front) , !env ", &web));
        assert!(!matches("app=web,tier=back", &web));
        assert!(matches(
            "example.com/role=edge",
            &[("example.com/role", "edge")]
        ));
        assert!(matches("empty=", &[("empty", "")]));
    }

    #[test]
    fn bad_selectors_say_why() {
        for bad in [
            "app=web,",
            "=web",
            "app in web",
            "app in ()",
            "app in (a b)",
            "app >",
            "app=(x)",
            "app=web)",
            "a b",
            "app=w@b",
            "!",
        ] {
            let error = LabelSelector::parse(bad).unwrap_err();
            assert!(!error.to_string().is_empty(), "{bad}");
        }
        assert_eq!(
            LabelSelector::parse("app=w@b").unwrap_err(),
            SelectorError::Character { found: '@', at: 5 }
        );
    }

    #[test]
    fn objects_match_by_their_metadata_labels() {
        let selector = LabelSelector::parse("app=web,!legacy").unwrap();
        assert!(selector.matches_object(&json!({"metadata": {"labels": {"app": "web"}}})));
        assert!(!selector.matches_object(&json!({"metadata": {"name": "x"}})));
        assert!(LabelSelector::everything().matches_object(&json!({})));
    }

    #[test]
    fn display_round_trips() {
        let text = "a in (x,y),b notin (z),c,!d";
        let selector = LabelSelector::parse(text).unwrap();
        assert_eq!(selector.to_string(), text);
        assert_eq!(
            LabelSelector::parse(&selector.to_string()).unwrap(),
            selector
        );
        assert_eq!(selector.requirements().len(), 4);
    }
}
