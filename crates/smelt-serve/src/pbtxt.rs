//! A parser for the protobuf text format as config.pbtxt files use it: `field: value`,
//! `field { ... }` or `field: { ... }`, lists `[a, b]`, strings, numbers, enum names,
//! `#` comments. It builds a tree; [`crate::config`] reads the fields it knows from it.

use std::fmt;

/// A parsed value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A number, enum name or bool, as written.
    Scalar(String),
    /// A quoted string, unescaped.
    Str(String),
    /// A message: its fields in order (a repeated field appears once per value).
    Message(Vec<(String, Value)>),
    /// A `[...]` list.
    List(Vec<Value>),
}

/// A syntax error with its line.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntaxError {
    /// 1-based line of the error.
    pub line: usize,
    /// What was wrong.
    pub message: String,
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// How deep messages and lists may nest (config files nest a few levels).
const MAX_DEPTH: usize = 32;

/// Parses a whole file as the fields of one message.
pub fn parse(text: &str) -> Result<Vec<(String, Value)>, SyntaxError> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    let fields = p.fields(0)?;
    p.skip();
    if p.i < p.s.len() {
        return Err(p.error("unexpected '}'"));
    }
    Ok(fields)
}

impl Value {
    /// The fields of a message (empty for other values).
    pub fn fields(&self) -> &[(String, Value)] {
        match self {
            Value::Message(f) => f,
            _ => &[],
        }
    }

    /// The scalar or string text.
    pub fn text(&self) -> Option<&str> {
        match self {
            Value::Scalar(s) | Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The values of a repeated field: a list's items, or the value itself.
    pub fn items(&self) -> Vec<&Value> {
        match self {
            Value::List(v) => v.iter().collect(),
            other => vec![other],
        }
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn error(&self, message: &str) -> SyntaxError {
        let line = 1 + self.s[..self.i.min(self.s.len())]
            .iter()
            .filter(|&&c| c == b'\n')
            .count();
        SyntaxError {
            line,
            message: message.to_string(),
        }
    }

    /// Skips whitespace, comments and the optional separators `,` and `;`.
    fn skip(&mut self) {
        while let Some(&c) = self.s.get(self.i) {
            if c == b'#' {
                while self.s.get(self.i).is_some_and(|&c| c != b'\n') {
                    self.i += 1;
                }
            } else if c.is_ascii_whitespace() || c == b',' || c == b';' {
                self.i += 1;
            } else {
                break;
            }
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip();
        self.s.get(self.i).copied()
    }

    /// Fields up to a `}` or the end.
    fn fields(&mut self, depth: usize) -> Result<Vec<(String, Value)>, SyntaxError> {
        if depth > MAX_DEPTH {
            return Err(self.error("messages nest too deeply"));
        }
        let mut out = Vec::new();
        while let Some(c) = self.peek() {
            if c == b'}' {
                break;
            }
            let name = self.word()?;
            let colon = self.peek() == Some(b':');
            if colon {
                self.i += 1;
            }
            let v = self.value(depth, colon)?;
            out.push((name, v));
        }
        Ok(out)
    }

    fn word(&mut self) -> Result<String, SyntaxError> {
        self.skip();
        let start = self.i;
        while self
            .s
            .get(self.i)
            .is_some_and(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-' | b'+'))
        {
            self.i += 1;
        }
        if start == self.i {
            return Err(self.error("expected a field name or value"));
        }
        Ok(String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
    }

    fn value(&mut self, depth: usize, colon: bool) -> Result<Value, SyntaxError> {
        if depth > MAX_DEPTH {
            return Err(self.error("values nest too deeply"));
        }
        match self.peek() {
            Some(b'{') | Some(b'<') => {
                let close = if self.s[self.i] == b'{' { b'}' } else { b'>' };
                self.i += 1;
                let f = self.fields(depth + 1)?;
                if self.peek() != Some(close) {
                    return Err(self.error("unclosed message"));
                }
                self.i += 1;
                Ok(Value::Message(f))
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                loop {
                    match self.peek() {
                        Some(b']') => {
                            self.i += 1;
                            return Ok(Value::List(items));
                        }
                        None => return Err(self.error("unclosed list")),
                        _ => items.push(self.value(depth + 1, true)?),
                    }
                }
            }
            Some(b'"') | Some(b'\'') if colon => self.string().map(Value::Str),
            Some(_) if colon => self.word().map(Value::Scalar),
            _ => Err(self.error("expected ':' or '{' after a field name")),
        }
    }

    fn string(&mut self) -> Result<String, SyntaxError> {
        let quote = self.s[self.i];
        self.i += 1;
        let mut out = Vec::new();
        loop {
            let Some(&c) = self.s.get(self.i) else {
                return Err(self.error("unclosed string"));
            };
            self.i += 1;
            match c {
                _ if c == quote => break,
                b'\\' => {
                    let Some(&e) = self.s.get(self.i) else {
                        return Err(self.error("unclosed string"));
                    };
                    self.i += 1;
                    out.push(match e {
                        b'n' => b'\n',
                        b't' => b'\t',
                        b'r' => b'\r',
                        other => other,
                    });
                }
                b'\n' => return Err(self.error("a string runs past the end of its line")),
                _ => out.push(c),
            }
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_triton_config() {
        let text = r#"
name: "mlp"  # the model
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "x", data_type: TYPE_FP32, dims: [ 16 ] } ]
output { name: "y" data_type: TYPE_FP32 dims: [4] }
dynamic_batching { preferred_batch_size: [4, 8] max_queue_delay_microseconds: 100 }
instance_group [ { count: 2 kind: KIND_CPU } ]
"#;
        let f = parse(text).unwrap();
        assert_eq!(f[0], ("name".into(), Value::Str("mlp".into())));
        assert_eq!(f[2].1.text(), Some("8"));
        let input = &f[3].1.items()[0].fields().to_vec();
        assert_eq!(
            input[1],
            ("data_type".into(), Value::Scalar("TYPE_FP32".into()))
        );
        assert_eq!(input[2].1.items().len(), 1);
        assert_eq!(f[4].1.fields()[2].1.items()[0].text(), Some("4"));
        assert_eq!(f[5].1.fields()[0].1.items().len(), 2);
    }

    #[test]
    fn errors_name_the_line_and_depth_is_bounded() {
        let e = parse("name: \"x\"\nmax_batch_size 8").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        assert!(parse("a { b: 1").is_err());
        assert!(parse("}").is_err());
        assert!(parse(&"a {".repeat(100)).is_err());
        assert!(parse(&"a: [".repeat(100)).is_err());
    }
}
