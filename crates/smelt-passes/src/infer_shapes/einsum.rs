//! Einsum's output shape from its equation: each output letter takes its size from the
//! inputs, `...` the broadcast of the inputs' remaining dims; without `->` the output is
//! `...` then the letters used once, in alphabetical order.

use super::{try_broadcast, In};
use smelt_ir::{ensure, Dim, Result};
use std::collections::HashMap;

/// Einsum's output shape; None while an input's shape is unknown.
pub(super) fn shape(equation: &str, x: &In) -> Result<Option<Vec<Dim>>> {
    let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq.as_str(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    ensure!(
        terms.len() == x.len(),
        InvalidModel,
        "equation '{equation}' has {} operands, the node {}",
        terms.len(),
        x.len()
    );
    let mut sizes: HashMap<char, Dim> = HashMap::new();
    let mut counts: HashMap<char, usize> = HashMap::new();
    let mut ellipses: Vec<Vec<Dim>> = Vec::new();
    for (i, term) in terms.iter().enumerate() {
        let Some(s) = x.shape(i) else {
            return Ok(None);
        };
        let (before, after) = match term.split_once("...") {
            Some((b, a)) => (b, Some(a)),
            None => (*term, None),
        };
        let letters = before.chars().count() + after.map_or(0, |a| a.chars().count());
        ensure!(
            letters <= s.len() && (after.is_some() || letters == s.len()),
            InvalidModel,
            "term '{term}' of '{equation}' does not fit operand {i} of rank {}",
            s.len()
        );
        let ell = s.len() - letters;
        let mut dims = s.iter();
        for c in before.chars() {
            note(c, dims.next(), &mut sizes, &mut counts, equation)?;
        }
        if after.is_some() {
            ellipses.push(dims.by_ref().take(ell).cloned().collect());
        }
        for c in after.unwrap_or("").chars() {
            note(c, dims.next(), &mut sizes, &mut counts, equation)?;
        }
    }
    let ellipsis = try_broadcast(&ellipses)?;
    let out: String = match rhs {
        Some(r) => r.to_string(),
        None => {
            let mut once: Vec<char> = counts
                .iter()
                .filter(|(_, &n)| n == 1)
                .map(|(&c, _)| c)
                .collect();
            once.sort_unstable();
            let tail: String = once.into_iter().collect();
            if ellipses.is_empty() {
                tail
            } else {
                format!("...{tail}")
            }
        }
    };
    let mut shape = Vec::new();
    let (before, after) = match out.split_once("...") {
        Some((b, a)) => (b.to_string(), Some(a.to_string())),
        None => (out.clone(), None),
    };
    let letter = |c: char| -> Result<Dim> {
        sizes.get(&c).cloned().ok_or_else(|| {
            smelt_ir::err!(
                InvalidModel,
                "output letter '{c}' of '{equation}' is in no input"
            )
        })
    };
    for c in before.chars() {
        shape.push(letter(c)?);
    }
    if let Some(a) = after {
        shape.extend(ellipsis);
        for c in a.chars() {
            shape.push(letter(c)?);
        }
    }
    Ok(Some(shape))
}

/// Records the size of letter `c`; two known sizes of one letter must agree (1 broadcasts).
fn note(
    c: char,
    d: Option<&Dim>,
    sizes: &mut HashMap<char, Dim>,
    counts: &mut HashMap<char, usize>,
    equation: &str,
) -> Result<()> {
    ensure!(
        c.is_ascii_alphabetic(),
        InvalidModel,
        "'{c}' in '{equation}' is not a letter"
    );
    let d = d.ok_or_else(|| smelt_ir::err!(Internal, "einsum term longer than its rank"))?;
    *counts.entry(c).or_default() += 1;
    match (sizes.get(&c), d) {
        (None, _) | (Some(Dim::Known(1)), Dim::Known(_)) => {
            sizes.insert(c, d.clone());
        }
        (Some(Dim::Known(a)), Dim::Known(b)) if a != b && *b != 1 => {
            smelt_ir::bail!(
                InvalidModel,
                "letter '{c}' of '{equation}' has sizes {a} and {b}"
            )
        }
        _ => {}
    }
    Ok(())
}
