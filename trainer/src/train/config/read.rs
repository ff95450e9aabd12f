//! Reading a config table, with errors that name the key and say what it
//! takes in the words of the documentation, not of Rust's types
//! (`expected usize`) — and a likely meaning for a misspelt key.

use super::TrainConfig;

/// A key of a config that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{problem}", key_prefix(.key))]
pub struct KeyError {
    /// The dotted path of the key (an unknown one included); empty where
    /// the whole config is at fault.
    pub key: String,
    /// What is wrong with it.
    pub problem: String,
}

fn key_prefix(key: &str) -> String {
    match key.is_empty() {
        true => String::new(),
        false => format!("{key}: "),
    }
}

impl TrainConfig {
    /// The config `table` holds (absent keys take their defaults).
    pub fn from_table(table: toml::Table) -> Result<Self, KeyError> {
        serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|err| {
            let key = err.path().to_string().trim_start_matches('.').to_owned();
            let problem = plain(err.inner().message(), &key);
            KeyError { key, problem }
        })
    }
}

/// Serde's `message` about `key`, its Rust types in words, with a
/// suggestion for an unknown key close to a known one.
fn plain(message: &str, key: &str) -> String {
    // The types of the config's fields.
    const TYPES: [(&str, &str); 5] = [
        ("expected usize", "expected a whole number, 0 or more"),
        ("expected u64", "expected a whole number, 0 or more"),
        ("expected f64", "expected a number"),
        ("expected f32", "expected a number"),
        (
            "expected a sequence",
            "expected a list, e.g. [\"a\", \"b\"]",
        ),
    ];
    if let Some(unknown) = message.strip_prefix("unknown field ") {
        let table = key.rsplit_once('.').map(|(table, _)| table);
        return unknown_key(unknown, table);
    }
    let message = message.trim_end();
    // A section given a value: `sft = 5` for `[sft]`.
    if let Some((start, _)) = message.rsplit_once(", expected struct ") {
        return format!("{start}, expected a table ([{key}])");
    }
    TYPES
        .iter()
        .find_map(|(rust, words)| {
            let start = message.strip_suffix(rust)?;
            Some(format!("{start}{words}"))
        })
        .unwrap_or_else(|| message.to_owned())
}

/// Serde's "`key`, expected one of `a`, `b`" (after "unknown field ") as
/// "unknown key (did you mean `a`?); the keys of [table] are a, b".
fn unknown_key(rest: &str, table: Option<&str>) -> String {
    let mut quoted = rest.split('`').skip(1).step_by(2);
    let Some(key) = quoted.next() else {
        return format!("unknown key {rest}");
    };
    let known: Vec<&str> = quoted.collect();
    // A key of another table, put in the wrong one: `lr` at the top level.
    let elsewhere = tables_with(key);
    if !elsewhere.is_empty() {
        let tables: Vec<String> = elsewhere.iter().map(|table| format!("[{table}]")).collect();
        return format!(
            "unknown key here; `{key}` is a key of {}",
            tables.join(" and ")
        );
    }
    let meant = known
        .iter()
        .map(|name| (strsim::jaro_winkler(key, name), name))
        .filter(|(likeness, _)| *likeness >= 0.85)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, name)| format!(" (did you mean `{name}`?)"))
        .unwrap_or_default();
    let known = known.join(", ");
    match table {
        _ if known.is_empty() => format!("unknown key{meant}"),
        Some(table) => format!("unknown key{meant}; the keys of [{table}] are {known}"),
        None => format!("unknown key{meant}; the top-level keys are {known}"),
    }
}

/// The tables of the config that have a key `key`.
fn tables_with(key: &str) -> Vec<String> {
    let Ok(toml::Value::Table(config)) = toml::Value::try_from(TrainConfig::default()) else {
        return Vec::new();
    };
    config
        .into_iter()
        .filter(|(_, value)| {
            value
                .as_table()
                .is_some_and(|table| table.contains_key(key))
        })
        .map(|(name, _)| name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<TrainConfig, String> {
        TrainConfig::from_table(toml::from_str(text).unwrap()).map_err(|err| err.to_string())
    }

    #[test]
    fn a_wrong_value_names_its_key_and_what_it_takes() {
        assert_eq!(
            read("[rl]\nsteps = -3\n").unwrap_err(),
            "rl.steps: invalid value: integer `-3`, expected a whole number, 0 or more"
        );
        assert_eq!(
            read("[sft]\nlr = \"fast\"\n").unwrap_err(),
            "sft.lr: invalid type: string \"fast\", expected a number"
        );
        assert_eq!(
            read("seed = 1.5\n").unwrap_err(),
            "seed: invalid type: floating point `1.5`, expected a whole number, 0 or more"
        );
        assert_eq!(
            read("[lora]\ntargets = \"q_proj\"\n").unwrap_err(),
            "lora.targets: invalid type: string \"q_proj\", expected a list, e.g. [\"a\", \"b\"]"
        );
        assert_eq!(read("[rl]\nsteps = 3\n").unwrap().rl.steps, 3);
    }

    #[test]
    fn a_misspelt_key_is_told_the_key_it_likely_means() {
        let err = read("[rl]\nstepz = 3\n").unwrap_err();
        assert!(
            err.starts_with(
                "rl.stepz: unknown key (did you mean `steps`?); the keys of [rl] are steps, tasks_per_step,"
            ),
            "{err}"
        );
        let err = read("[optim]\nlrate = 1e-4\n").unwrap_err();
        assert!(
            err.starts_with("optim.lrate: unknown key; the keys of [optim] are beta1,"),
            "{err}"
        );
        assert_eq!(
            read("[optim]\nlr = 1e-4\n").unwrap_err(),
            "optim.lr: unknown key here; `lr` is a key of [rl] and [sft]"
        );
        assert_eq!(
            read("lr = 0.1\n").unwrap_err(),
            "lr: unknown key here; `lr` is a key of [rl] and [sft]"
        );
        assert_eq!(
            read("[sft]\nkl = 0.1\n").unwrap_err(),
            "sft.kl: unknown key here; `kl` is a key of [rl]"
        );
        assert_eq!(
            read("sft = 5\n").unwrap_err(),
            "sft: invalid type: integer `5`, expected a table ([sft])"
        );
        let err = read("sed = 1\n").unwrap_err();
        assert!(
            err.starts_with("sed: unknown key (did you mean `seed`?); the top-level keys are "),
            "{err}"
        );
    }
}
