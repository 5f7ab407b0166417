//! Symbolic dimensions: a constant, a named symbol, or an expression over symbols
//! (`floor(height/2 - 1/2)`, `batch*8`), evaluated once input shapes are known.

use crate::{bail, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;

/// One dimension of a shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Dim {
    /// A known size.
    Known(u64),
    /// An expression over named symbols (a plain symbol is `Expr::Sym`).
    Sym(DimExpr),
    /// Nothing is known (ONNX dimension with neither value nor name).
    Unknown,
}

/// An arithmetic expression over dimension symbols.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum DimExpr {
    /// A literal number.
    Num(f64),
    /// A named symbol such as `batch`.
    Sym(String),
    /// A binary operation.
    Bin(char, Box<DimExpr>, Box<DimExpr>),
    /// A function call: floor, ceil, min, max, abs.
    Call(String, Vec<DimExpr>),
    /// Negation.
    Neg(Box<DimExpr>),
}

/// A shape whose dimensions may be symbolic.
pub type Shape = Vec<Dim>;

impl Dim {
    /// Parses an ONNX `dim_param` string: a symbol or an expression. `?` (what exporters
    /// such as PaddlePaddle's write for "unknown", once per dim) and an empty string are
    /// unknown dims, each its own: they bind nothing across dims or inputs. So is an
    /// expression without symbols that is no size (`-1`).
    pub fn parse(s: &str) -> Dim {
        let s = s.trim();
        if s.is_empty() || s == "?" {
            return Dim::Unknown;
        }
        match DimExpr::parse(s) {
            Ok(e) => match e.eval(&HashMap::new()) {
                Some(n) if n >= 0.0 && n.fract() == 0.0 && n < 1e18 => Dim::Known(n as u64),
                Some(_) => Dim::Unknown,
                None => Dim::Sym(e),
            },
            Err(_) => Dim::Sym(DimExpr::Sym(s.to_string())),
        }
    }

    /// The size, given values for symbols; None if a symbol is unbound or the result is not
    /// a non-negative integer.
    pub fn eval(&self, env: &HashMap<String, i64>) -> Option<u64> {
        match self {
            Dim::Known(n) => Some(*n),
            Dim::Sym(e) => {
                let v = e.eval(env)?;
                (v >= 0.0 && v.fract() == 0.0).then_some(v as u64)
            }
            Dim::Unknown => None,
        }
    }
}

impl DimExpr {
    /// Parses an expression; symbols are identifiers (letters, digits, `_`, `.`, `:`).
    pub fn parse(s: &str) -> Result<DimExpr> {
        let toks = tokenize(s)?;
        let mut p = Parser { toks, pos: 0 };
        let e = p.expr()?;
        if p.pos != p.toks.len() {
            bail!(InvalidModel, "trailing text in dimension expression '{s}'");
        }
        Ok(e)
    }

    /// Evaluates with symbol values (real division; floor/ceil round).
    pub fn eval(&self, env: &HashMap<String, i64>) -> Option<f64> {
        Some(match self {
            DimExpr::Num(n) => *n,
            DimExpr::Sym(s) => *env.get(s)? as f64,
            DimExpr::Neg(e) => -e.eval(env)?,
            DimExpr::Bin(op, a, b) => {
                let (a, b) = (a.eval(env)?, b.eval(env)?);
                match op {
                    '+' => a + b,
                    '-' => a - b,
                    '*' => a * b,
                    '/' => a / b,
                    '%' => a.rem_euclid(b),
                    _ => return None,
                }
            }
            DimExpr::Call(f, args) => {
                let v: Option<Vec<f64>> = args.iter().map(|a| a.eval(env)).collect();
                let v = v?;
                match (f.as_str(), v.as_slice()) {
                    ("floor", [x]) => x.floor(),
                    ("ceil", [x]) => x.ceil(),
                    ("abs", [x]) => x.abs(),
                    ("min", [x, y]) => x.min(*y),
                    ("max", [x, y]) => x.max(*y),
                    _ => return None,
                }
            }
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64),
    Id(String),
    Op(char),
}

fn tokenize(s: &str) -> Result<Vec<Tok>> {
    let c: Vec<char> = s.chars().collect();
    let mut i = 0;
    let mut out = Vec::new();
    while i < c.len() {
        let ch = c[i];
        if ch.is_whitespace() {
            i += 1;
        } else if ch.is_ascii_digit() {
            let st = i;
            while i < c.len() && (c[i].is_ascii_digit() || c[i] == '.') {
                i += 1;
            }
            let t: String = c[st..i].iter().collect();
            out.push(Tok::Num(
                t.parse()
                    .map_err(|_| crate::err!(InvalidModel, "bad number '{t}'"))?,
            ));
        } else if ch.is_alphabetic() || ch == '_' {
            let st = i;
            while i < c.len() && (c[i].is_alphanumeric() || matches!(c[i], '_' | '.' | ':')) {
                i += 1;
            }
            out.push(Tok::Id(c[st..i].iter().collect()));
        } else if "+-*/%(),".contains(ch) {
            out.push(Tok::Op(ch));
            i += 1;
        } else {
            bail!(
                InvalidModel,
                "unexpected '{ch}' in dimension expression '{s}'"
            );
        }
    }
    Ok(out)
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn peek_op(&self) -> Option<char> {
        match self.toks.get(self.pos) {
            Some(Tok::Op(c)) => Some(*c),
            _ => None,
        }
    }

    fn expr(&mut self) -> Result<DimExpr> {
        let mut lhs = self.term()?;
        while let Some(op @ ('+' | '-')) = self.peek_op() {
            self.pos += 1;
            lhs = DimExpr::Bin(op, Box::new(lhs), Box::new(self.term()?));
        }
        Ok(lhs)
    }

    fn term(&mut self) -> Result<DimExpr> {
        let mut lhs = self.unary()?;
        while let Some(op @ ('*' | '/' | '%')) = self.peek_op() {
            self.pos += 1;
            lhs = DimExpr::Bin(op, Box::new(lhs), Box::new(self.unary()?));
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> Result<DimExpr> {
        if self.peek_op() == Some('-') {
            self.pos += 1;
            return Ok(DimExpr::Neg(Box::new(self.unary()?)));
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<DimExpr> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        match t {
            Some(Tok::Num(n)) => Ok(DimExpr::Num(n)),
            Some(Tok::Id(name)) => {
                if self.peek_op() == Some('(') {
                    self.pos += 1;
                    let mut args = vec![self.expr()?];
                    while self.peek_op() == Some(',') {
                        self.pos += 1;
                        args.push(self.expr()?);
                    }
                    self.expect(')')?;
                    Ok(DimExpr::Call(name, args))
                } else {
                    Ok(DimExpr::Sym(name))
                }
            }
            Some(Tok::Op('(')) => {
                let e = self.expr()?;
                self.expect(')')?;
                Ok(e)
            }
            other => bail!(InvalidModel, "unexpected {other:?} in dimension expression"),
        }
    }

    fn expect(&mut self, c: char) -> Result<()> {
        if self.peek_op() != Some(c) {
            bail!(InvalidModel, "expected '{c}' in dimension expression");
        }
        self.pos += 1;
        Ok(())
    }
}

impl DimExpr {
    fn precedence(&self) -> u8 {
        match self {
            DimExpr::Bin('+' | '-', ..) => 1,
            DimExpr::Bin(..) => 2,
            DimExpr::Neg(_) => 3,
            _ => 4,
        }
    }
}

impl fmt::Display for DimExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DimExpr::Num(n) => write!(f, "{n}"),
            DimExpr::Sym(s) => f.write_str(s),
            DimExpr::Neg(e) if e.precedence() >= 3 => write!(f, "-{e}"),
            DimExpr::Neg(e) => write!(f, "-({e})"),
            DimExpr::Bin(op, a, b) => {
                let p = self.precedence();
                // Parenthesize only where precedence (or a non-associative right side) needs it.
                if a.precedence() < p {
                    write!(f, "({a})")?;
                } else {
                    write!(f, "{a}")?;
                }
                write!(f, " {op} ")?;
                let rb =
                    b.precedence() < p || (b.precedence() == p && matches!(op, '-' | '/' | '%'));
                if rb {
                    write!(f, "({b})")
                } else {
                    write!(f, "{b}")
                }
            }
            DimExpr::Call(name, args) => {
                write!(f, "{name}(")?;
                for (i, a) in args.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{a}")?;
                }
                f.write_str(")")
            }
        }
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Known(n) => write!(f, "{n}"),
            Dim::Sym(DimExpr::Sym(s)) => f.write_str(s),
            Dim::Sym(e) => write!(f, "{{{e}}}"),
            Dim::Unknown => f.write_str("?"),
        }
    }
}

/// Formats a shape as `[batch,3,224,224]`.
pub fn format_shape(s: &[Dim]) -> String {
    let parts: Vec<String> = s.iter().map(|d| d.to_string()).collect();
    format!("[{}]", parts.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yolo_style_expression() {
        let d = Dim::parse("floor(height/2 - 1/2)");
        let env = HashMap::from([("height".to_string(), 320i64)]);
        assert_eq!(d.eval(&env), Some(159));
        assert_eq!(Dim::parse("batch"), Dim::Sym(DimExpr::Sym("batch".into())));
        assert_eq!(Dim::parse("8"), Dim::Known(8));
        for unknown in ["?", " ? ", "", "-1", "1/2"] {
            assert_eq!(Dim::parse(unknown), Dim::Unknown, "{unknown:?}");
        }
        assert_eq!(
            Dim::parse("2*seq + 1").eval(&HashMap::from([("seq".into(), 4)])),
            Some(9)
        );
    }
}
