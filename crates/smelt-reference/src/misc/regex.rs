//! A small backtracking regular-expression engine for RegexFullMatch.
//!
//! Supports literals, `.`, classes `[...]` (ranges, negation, `\w\d\s` inside), the escapes
//! `\w \W \d \D \s \S \b \B` and escaped metacharacters, groups `(...)` / `(?:...)`,
//! alternation, the quantifiers `* + ? {m} {m,} {m,n}` (greedy or lazy), and `^ $`.
//! `\w`, `\d` and `\s` are ASCII, as in RE2.

use std::cell::Cell;

#[derive(Debug, Clone)]
enum Item {
    Range(char, char),
    Word(bool),
    Digit(bool),
    Space(bool),
}

#[derive(Debug, Clone)]
enum Node {
    Char(char),
    Any,
    Class(Vec<Item>, bool),
    Start,
    End,
    WordBoundary(bool),
    Concat(Vec<Node>),
    Alt(Vec<Node>),
    Repeat(Box<Node>, usize, Option<usize>, bool),
}

/// A compiled pattern.
pub struct Regex {
    root: Node,
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c')
}

impl Item {
    fn matches(&self, c: char) -> bool {
        match *self {
            Item::Range(a, b) => a <= c && c <= b,
            Item::Word(neg) => is_word(c) != neg,
            Item::Digit(neg) => c.is_ascii_digit() != neg,
            Item::Space(neg) => is_space(c) != neg,
        }
    }
}

struct Parser<'a> {
    s: &'a [char],
    i: usize,
}

const MAX_REPEAT: usize = 1000;

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }

    fn alt(&mut self) -> Result<Node, String> {
        let mut alts = vec![self.concat()?];
        while self.peek() == Some('|') {
            self.i += 1;
            alts.push(self.concat()?);
        }
        Ok(if alts.len() == 1 {
            alts.pop().unwrap_or(Node::Concat(vec![]))
        } else {
            Node::Alt(alts)
        })
    }

    fn concat(&mut self) -> Result<Node, String> {
        let mut items = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let atom = self.atom()?;
            items.push(self.quantified(atom)?);
        }
        Ok(Node::Concat(items))
    }

    fn number(&mut self) -> Option<usize> {
        let st = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        if st == self.i {
            return None;
        }
        self.s[st..self.i].iter().collect::<String>().parse().ok()
    }

    fn quantified(&mut self, atom: Node) -> Result<Node, String> {
        let (min, max) = match self.peek() {
            Some('*') => (0, None),
            Some('+') => (1, None),
            Some('?') => (0, Some(1)),
            Some('{') => {
                let save = self.i;
                self.i += 1;
                let Some(lo) = self.number() else {
                    self.i = save;
                    return Ok(atom);
                };
                let hi = if self.peek() == Some(',') {
                    self.i += 1;
                    self.number()
                } else {
                    Some(lo)
                };
                if self.peek() != Some('}') {
                    return Err("unterminated {m,n}".into());
                }
                if lo > MAX_REPEAT || hi.is_some_and(|h| h > MAX_REPEAT || h < lo) {
                    return Err("bad repetition bounds".into());
                }
                (lo, hi)
            }
            _ => return Ok(atom),
        };
        self.i += 1;
        let greedy = if self.peek() == Some('?') {
            self.i += 1;
            false
        } else {
            true
        };
        Ok(Node::Repeat(Box::new(atom), min, max, greedy))
    }

    fn escape(&mut self) -> Result<Result<Item, Node>, String> {
        let c = self.peek().ok_or("trailing backslash")?;
        self.i += 1;
        Ok(match c {
            'w' => Ok(Item::Word(false)),
            'W' => Ok(Item::Word(true)),
            'd' => Ok(Item::Digit(false)),
            'D' => Ok(Item::Digit(true)),
            's' => Ok(Item::Space(false)),
            'S' => Ok(Item::Space(true)),
            'b' => Err(Node::WordBoundary(true)),
            'B' => Err(Node::WordBoundary(false)),
            'n' => Ok(Item::Range('\n', '\n')),
            't' => Ok(Item::Range('\t', '\t')),
            'r' => Ok(Item::Range('\r', '\r')),
            c if c.is_ascii_alphanumeric() => return Err(format!("unsupported escape \\{c}")),
            c => Ok(Item::Range(c, c)),
        })
    }

    fn atom(&mut self) -> Result<Node, String> {
        let c = self.peek().ok_or("unexpected end")?;
        self.i += 1;
        Ok(match c {
            '.' => Node::Any,
            '^' => Node::Start,
            '$' => Node::End,
            '(' => {
                if self.s[self.i..].starts_with(&['?', ':']) {
                    self.i += 2;
                } else if self.peek() == Some('?') {
                    return Err("unsupported group flags".into());
                }
                let n = self.alt()?;
                if self.peek() != Some(')') {
                    return Err("missing )".into());
                }
                self.i += 1;
                n
            }
            '[' => self.class()?,
            '\\' => match self.escape()? {
                Ok(Item::Range(a, _)) => Node::Char(a),
                Ok(it) => Node::Class(vec![it], false),
                Err(n) => n,
            },
            '*' | '+' | '?' => return Err(format!("nothing to repeat before '{c}'")),
            c => Node::Char(c),
        })
    }

    fn class(&mut self) -> Result<Node, String> {
        let neg = self.peek() == Some('^');
        if neg {
            self.i += 1;
        }
        let mut items = Vec::new();
        let mut first = true;
        loop {
            let c = self.peek().ok_or("missing ]")?;
            self.i += 1;
            if c == ']' && !first {
                break;
            }
            first = false;
            let lo = if c == '\\' {
                match self.escape()? {
                    Ok(Item::Range(a, _)) => a,
                    Ok(it) => {
                        items.push(it);
                        continue;
                    }
                    Err(_) => return Err("\\b inside a class".into()),
                }
            } else {
                c
            };
            if self.peek() == Some('-') && self.s.get(self.i + 1).is_some_and(|&n| n != ']') {
                self.i += 1;
                let mut hi = self.peek().ok_or("missing ]")?;
                self.i += 1;
                if hi == '\\' {
                    match self.escape()? {
                        Ok(Item::Range(a, _)) => hi = a,
                        _ => return Err("bad class range".into()),
                    }
                }
                if hi < lo {
                    return Err("reversed class range".into());
                }
                items.push(Item::Range(lo, hi));
            } else {
                items.push(Item::Range(lo, lo));
            }
        }
        Ok(Node::Class(items, neg))
    }
}

struct Matcher<'a> {
    s: &'a [char],
    budget: Cell<u64>,
}

impl Matcher<'_> {
    fn m(&self, n: &Node, p: usize, k: &dyn Fn(usize) -> bool) -> bool {
        let b = self.budget.get();
        if b == 0 {
            return false;
        }
        self.budget.set(b - 1);
        let s = self.s;
        match n {
            Node::Char(c) => s.get(p) == Some(c) && k(p + 1),
            Node::Any => s.get(p).is_some_and(|&c| c != '\n') && k(p + 1),
            Node::Class(items, neg) => {
                s.get(p)
                    .is_some_and(|&c| items.iter().any(|it| it.matches(c)) != *neg)
                    && k(p + 1)
            }
            Node::Start => p == 0 && k(p),
            Node::End => p == s.len() && k(p),
            Node::WordBoundary(want) => {
                let before = p > 0 && is_word(s[p - 1]);
                let after = p < s.len() && is_word(s[p]);
                ((before != after) == *want) && k(p)
            }
            Node::Concat(items) => self.seq(items, p, k),
            Node::Alt(alts) => alts.iter().any(|a| self.m(a, p, k)),
            Node::Repeat(inner, min, max, greedy) => self.rep(inner, *min, *max, *greedy, 0, p, k),
        }
    }

    fn seq(&self, items: &[Node], p: usize, k: &dyn Fn(usize) -> bool) -> bool {
        match items.split_first() {
            None => k(p),
            Some((first, rest)) => self.m(first, p, &|q| self.seq(rest, q, k)),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn rep(
        &self,
        n: &Node,
        min: usize,
        max: Option<usize>,
        greedy: bool,
        count: usize,
        p: usize,
        k: &dyn Fn(usize) -> bool,
    ) -> bool {
        let more = |this: &Self| {
            max.is_none_or(|m| count < m)
                && this.m(n, p, &|q| {
                    (q != p || count < min) && this.rep(n, min, max, greedy, count + 1, q, k)
                })
        };
        let more = || more(self);
        let stop = || count >= min && k(p);
        let order: [&dyn Fn() -> bool; 2] = if greedy {
            [&more, &stop]
        } else {
            [&stop, &more]
        };
        order.iter().any(|f| f())
    }
}

impl Regex {
    /// Compiles a pattern.
    pub fn new(pattern: &str) -> Result<Regex, String> {
        let chars: Vec<char> = pattern.chars().collect();
        let mut p = Parser { s: &chars, i: 0 };
        let root = p.alt()?;
        if p.i != chars.len() {
            return Err("unbalanced )".into());
        }
        Ok(Regex { root })
    }

    /// True when the whole string matches; an error when backtracking takes too long.
    pub fn full_match(&self, text: &str) -> Result<bool, String> {
        let s: Vec<char> = text.chars().collect();
        let m = Matcher {
            s: &s,
            budget: Cell::new(50_000_000),
        };
        let hit = m.m(&self.root, 0, &|p| p == s.len());
        if !hit && m.budget.get() == 0 {
            return Err("the pattern backtracks too much on this input".into());
        }
        Ok(hit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_matches() {
        let r = Regex::new(r"www\.[\w.-]+\.\bcom\b").unwrap();
        assert!(r.full_match("www.google.com").unwrap());
        assert!(!r.full_match("www.bbc.co.uk").unwrap());
        let e = Regex::new(r"(\W|^)[\w.\-]{0,25}@(yahoo|gmail)\.com(\W|$)").unwrap();
        assert!(e.full_match("account@gmail.com").unwrap());
        assert!(!e.full_match("account@hotmail.com").unwrap());
        assert!(Regex::new("a*?b").unwrap().full_match("aaab").unwrap());
        assert!(Regex::new("[^0-9]+").unwrap().full_match("abc").unwrap());
    }
}
