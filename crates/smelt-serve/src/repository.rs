//! Where models come from: `--model NAME=PATH` or a repository in Triton's layout,
//! `DIR/<model>/config.pbtxt` (optional) and `DIR/<model>/<version>/model.onnx` (or
//! `model.smelt`); the highest version is served, as Triton's default policy does.

use crate::config::ModelConfig;
use smelt_ir::{bail, err, Result};
use std::path::{Path, PathBuf};

/// The file names a version folder may hold, in order of preference (a `.smelt` artifact
/// loads through the runtime once it reads artifacts).
const MODEL_FILES: [&str; 2] = ["model.onnx", "model.smelt"];

/// A model to serve, before it is loaded.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSource {
    /// The name clients use.
    pub name: String,
    /// The model file.
    pub path: PathBuf,
    /// The version served.
    pub version: String,
    /// Its configuration; None when there is no config.pbtxt (the server's defaults apply).
    pub config: Option<ModelConfig>,
}

/// A model given on the command line as `NAME=PATH` (version "1", no config).
pub fn from_arg(arg: &str) -> Result<ModelSource> {
    let (name, path) = arg
        .split_once('=')
        .ok_or_else(|| err!(InvalidInput, "a model is NAME=PATH, not '{arg}'"))?;
    check_name(name)?;
    Ok(ModelSource {
        name: name.to_string(),
        path: PathBuf::from(path),
        version: "1".into(),
        config: None,
    })
}

fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && !name.starts_with('.');
    if !ok {
        bail!(
            InvalidInput,
            "model name '{name}': use letters, digits, '_', '-' and '.' (it appears in URLs)"
        );
    }
    Ok(())
}

/// Every model of a repository folder, by name.
pub fn scan(dir: &Path) -> Result<Vec<ModelSource>> {
    let read =
        |p: &Path| std::fs::read_dir(p).map_err(|e| err!(Io, "cannot read {}: {e}", p.display()));
    let mut names: Vec<String> = read(dir)?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    let mut out = Vec::new();
    for name in names {
        let m = dir.join(&name);
        let ctx = |e: smelt_ir::Error| e.context(format!("model '{name}' ({})", m.display()));
        check_name(&name).map_err(ctx)?;
        let config = match std::fs::read_to_string(m.join("config.pbtxt")) {
            Ok(text) => {
                let c = ModelConfig::parse(&text, &name)
                    .map_err(|e| ctx(err!(InvalidInput, "config.pbtxt: {e}")))?;
                if c.name != name {
                    return Err(ctx(err!(
                        InvalidInput,
                        "config.pbtxt names the model '{}'; it must match its folder",
                        c.name
                    )));
                }
                Some(c)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(ctx(err!(Io, "cannot read config.pbtxt: {e}"))),
        };
        let mut versions: Vec<(u64, PathBuf)> = read(&m)
            .map_err(ctx)?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let v: u64 = e.file_name().to_str()?.parse().ok()?;
                let file = MODEL_FILES
                    .iter()
                    .map(|f| e.path().join(f))
                    .find(|p| p.is_file())?;
                Some((v, file))
            })
            .collect();
        versions.sort();
        let Some((version, path)) = versions.pop() else {
            return Err(ctx(err!(
                InvalidModel,
                "no version folder (a number) holding {}",
                MODEL_FILES.join(" or ")
            )));
        };
        out.push(ModelSource {
            name,
            path,
            version: version.to_string(),
            config,
        });
    }
    if out.is_empty() {
        bail!(
            InvalidInput,
            "model repository {} holds no model",
            dir.display()
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_highest_version_is_served() {
        let dir = std::env::temp_dir().join(format!("smelt-serve-repo-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for v in ["1", "3", "10", "notes"] {
            std::fs::create_dir_all(dir.join("m").join(v)).unwrap();
        }
        for v in ["1", "3"] {
            std::fs::write(dir.join("m").join(v).join("model.onnx"), b"").unwrap();
        }
        std::fs::write(dir.join("m/config.pbtxt"), "max_batch_size: 4").unwrap();
        let found = scan(&dir).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].version, "3");
        assert!(found[0].path.ends_with("m/3/model.onnx"));
        assert_eq!(found[0].config.as_ref().unwrap().max_batch_size, 4);
        std::fs::write(dir.join("m/config.pbtxt"), "name: \"other\"").unwrap();
        assert!(scan(&dir).unwrap_err().to_string().contains("must match"));
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(from_arg("mlp=a.onnx").is_ok());
        assert!(from_arg("a/b=x.onnx").is_err());
        assert!(from_arg("x.onnx").is_err());
    }
}
