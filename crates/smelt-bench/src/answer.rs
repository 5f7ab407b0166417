//! The outputs of a KServe v2 infer response (binary tensor data or JSON `data`), and
//! their check against the tensors a local run computed: a load run counts wrong answers,
//! not only errors.

use smelt_ir::{bail, err, Result, Tensor};

/// One output of an infer response, its values widened to f64.
#[derive(Debug, Clone)]
pub struct Output {
    /// The output's name.
    pub name: String,
    /// Its shape as the server gave it.
    pub shape: Vec<usize>,
    /// Its values, in order.
    pub values: Vec<f64>,
    /// Whether its datatype is a float type (else integers or booleans, compared exactly).
    pub float: bool,
}

/// How a response compares with the expected outputs.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Every value bit-equal (as f64) to the expected one.
    Exact,
    /// Within the tolerance, not all bit-equal.
    Close,
    /// An output missing, of another shape, or a value off: what and where.
    Wrong(String),
}

/// Relative tolerance for float outputs: |got - want| <= RTOL * (|want| + max |want|).
pub const RTOL: f64 = 1e-6;

fn widen(datatype: &str, bytes: &[u8]) -> Result<(Vec<f64>, bool)> {
    fn chunks<const N: usize, F: Fn([u8; N]) -> f64>(b: &[u8], f: F) -> Result<Vec<f64>> {
        if !b.len().is_multiple_of(N) {
            bail!(
                Io,
                "{} bytes is not a whole number of {N}-byte values",
                b.len()
            );
        }
        Ok(b.chunks_exact(N)
            .map(|c| f(c.try_into().unwrap_or([0; N])))
            .collect())
    }
    Ok(match datatype {
        "FP32" => (
            chunks(bytes, |c: [u8; 4]| f32::from_le_bytes(c) as f64)?,
            true,
        ),
        "FP64" => (chunks(bytes, f64::from_le_bytes)?, true),
        "INT64" => (chunks(bytes, |c| i64::from_le_bytes(c) as f64)?, false),
        "INT32" => (chunks(bytes, |c| i32::from_le_bytes(c) as f64)?, false),
        "INT8" => (bytes.iter().map(|&b| b as i8 as f64).collect(), false),
        "UINT8" | "BOOL" => (bytes.iter().map(|&b| b as f64).collect(), false),
        other => bail!(Unsupported, "response datatype {other} is not checked"),
    })
}

fn json_values(data: &serde_json::Value) -> Vec<f64> {
    match data {
        serde_json::Value::Array(a) => a.iter().flat_map(json_values).collect(),
        serde_json::Value::Bool(b) => vec![f64::from(u8::from(*b))],
        v => vec![v.as_f64().unwrap_or(f64::NAN)],
    }
}

/// The outputs of a response body whose JSON header is `header_len` bytes long (the
/// `Inference-Header-Content-Length` header; None: the whole body is JSON).
pub fn parse(body: &[u8], header_len: Option<usize>) -> Result<Vec<Output>> {
    let n = header_len.unwrap_or(body.len());
    let head = body
        .get(..n)
        .ok_or_else(|| err!(Io, "response header length {n} exceeds the body"))?;
    let json: serde_json::Value = serde_json::from_slice(head)
        .map_err(|e| err!(Io, "response is not KServe v2 JSON: {e}"))?;
    let mut at = n;
    let mut outs = Vec::new();
    for o in json["outputs"].as_array().into_iter().flatten() {
        let name = o["name"].as_str().unwrap_or_default().to_string();
        let datatype = o["datatype"].as_str().unwrap_or_default();
        let shape = o["shape"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| d.as_u64().map(|d| d as usize))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| err!(Io, "output '{name}': bad shape"))?;
        let (values, float) = match o["parameters"]["binary_data_size"].as_u64() {
            Some(size) => {
                let end = at.saturating_add(size as usize);
                let bytes = body
                    .get(at..end)
                    .ok_or_else(|| err!(Io, "output '{name}': binary data past the body"))?;
                at = end;
                widen(datatype, bytes)?
            }
            None => (
                json_values(&o["data"]),
                matches!(datatype, "FP32" | "FP64" | "FP16"),
            ),
        };
        outs.push(Output {
            name,
            shape,
            values,
            float,
        });
    }
    Ok(outs)
}

/// One expected output, widened to f64 once for every answer it is compared with.
struct Want {
    name: String,
    shape: Vec<usize>,
    /// None for a dtype that does not widen (its shape is still checked).
    values: Option<Vec<f64>>,
    /// The largest magnitude among the values, the tolerance's scale.
    scale: f64,
}

/// The outputs every answer should hold (from a local run), prepared for [`check`].
pub struct Expected(Vec<Want>);

impl Expected {
    /// Prepares the expected outputs.
    pub fn new(outputs: &[(String, Tensor)]) -> Expected {
        Expected(
            outputs
                .iter()
                .map(|(name, t)| {
                    let values = t.to_f64().ok();
                    let scale = values.iter().flatten().fold(0.0f64, |m, v| m.max(v.abs()));
                    Want {
                        name: name.clone(),
                        shape: t.shape().to_vec(),
                        values,
                        scale,
                    }
                })
                .collect(),
        )
    }
}

/// Compares a response's outputs with the expected ones (every expected output must be
/// there, of its shape and value count; outputs not expected are ignored).
pub fn check(got: &[Output], want: &Expected) -> Verdict {
    let mut exact = true;
    for w in &want.0 {
        let name = &w.name;
        let Some(o) = got.iter().find(|o| &o.name == name) else {
            return Verdict::Wrong(format!("output '{name}' missing"));
        };
        if o.shape != w.shape {
            return Verdict::Wrong(format!(
                "output '{name}': shape {:?}, expected {:?}",
                o.shape, w.shape
            ));
        }
        let Some(values) = &w.values else {
            continue;
        };
        if o.values.len() != values.len() {
            return Verdict::Wrong(format!(
                "output '{name}': {} values, expected {}",
                o.values.len(),
                values.len()
            ));
        }
        for (i, (&g, &e)) in o.values.iter().zip(values).enumerate() {
            if g.to_bits() == e.to_bits() || (g.is_nan() && e.is_nan()) {
                continue;
            }
            exact = false;
            if !o.float || (g - e).abs() > RTOL * (e.abs() + w.scale) || g.is_nan() != e.is_nan() {
                return Verdict::Wrong(format!("output '{name}'[{i}]: {g}, expected {e}"));
            }
        }
    }
    if exact {
        Verdict::Exact
    } else {
        Verdict::Close
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(values: &[f32]) -> (Vec<u8>, usize) {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let head = serde_json::json!({"outputs": [{"name": "y", "datatype": "FP32",
            "shape": [values.len()], "parameters": {"binary_data_size": bytes.len()}}]})
        .to_string();
        let mut body = head.clone().into_bytes();
        body.extend_from_slice(&bytes);
        (body, head.len())
    }

    #[test]
    fn binary_and_json_responses_are_checked() {
        let want = Expected::new(&[(
            "y".to_string(),
            Tensor::from_f32(vec![3], vec![1.0, -2.0, 0.5]).unwrap(),
        )]);
        let (body, n) = response(&[1.0, -2.0, 0.5]);
        assert_eq!(
            check(&parse(&body, Some(n)).unwrap(), &want),
            Verdict::Exact
        );
        let (body, n) = response(&[1.0, -2.0000005, 0.5]);
        assert_eq!(
            check(&parse(&body, Some(n)).unwrap(), &want),
            Verdict::Close
        );
        let (body, n) = response(&[1.0, -2.0, 0.51]);
        assert!(matches!(
            check(&parse(&body, Some(n)).unwrap(), &want),
            Verdict::Wrong(_)
        ));
        let json =
            br#"{"outputs":[{"name":"y","datatype":"FP32","shape":[3],"data":[1.0,-2.0,0.5]}]}"#;
        assert_eq!(check(&parse(json, None).unwrap(), &want), Verdict::Exact);
        let short =
            br#"{"outputs":[{"name":"y","datatype":"FP32","shape":[2],"data":[1.0,-2.0]}]}"#;
        assert!(matches!(
            check(&parse(short, None).unwrap(), &want),
            Verdict::Wrong(_)
        ));
        assert!(parse(&body, Some(body.len() + 1)).is_err());
        // The declared shape, but fewer values than it holds.
        let mut few = response(&[1.0, -2.0]);
        few.0 = String::from_utf8(few.0[..few.1].to_vec())
            .unwrap()
            .replace("\"shape\":[2]", "\"shape\":[3]")
            .into_bytes()
            .into_iter()
            .chain(few.0[few.1..].iter().copied())
            .collect();
        few.1 = few.0.len() - 8;
        assert_eq!(parse(&few.0, Some(few.1)).unwrap()[0].shape, vec![3]);
        assert!(matches!(
            check(&parse(&few.0, Some(few.1)).unwrap(), &want),
            Verdict::Wrong(_)
        ));
    }
}
