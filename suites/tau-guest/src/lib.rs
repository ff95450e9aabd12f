//! What the τ-bench and τ²-bench tool components share.
//!
//! The reference tools are Python functions over one nested `dict` (the
//! database; in τ²-bench a pydantic model, which the host stores as
//! `model_dump()` gives it) that answer with a string: `json.dumps` of a
//! record, a sentence, or an `"Error: …"` message. An exception escaping a
//! tool (a `KeyError` on a missing key, say) becomes `"Error: {exception}"`. Forge keeps the
//! database in the host, one record per key of each top-level table; this
//! crate gives tools Python's view of it — records as JSON values in
//! insertion order, Python's `KeyError` text, int/float identity through
//! [`Num`] — so that every output string matches the reference's.
//!
//! A tool answers `Ok(text)` for what the reference returns normally and
//! `Err(message)` for its errors; the host shows an error as
//! `"Error: {message}"`, the reference's own wording. Tools check before they
//! write, so an error leaves the state untouched. The reference does the same
//! on every path the suites' gold actions take; on a few others (a
//! `KeyError` after a first write, say) Python keeps the partial write and
//! Forge does not.

pub mod airline;
pub mod model;
pub mod retail;
pub mod toolkit;

use forge_guest::Store;
pub use forge_pycompat::{Num, dumps, py_eq};

/// For [`export_toolkits!`]'s expansion in the suites' crates.
#[doc(hidden)]
pub use forge_guest as __forge_guest;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// A tool: the database, the keyword arguments, the answer.
pub type ToolFn = fn(&mut Data<'_>, &Kwargs) -> Result<String, String>;

/// The database as the reference's tools see it.
pub struct Data<'a> {
    store: &'a mut dyn Store,
}

impl<'a> Data<'a> {
    pub fn new(store: &'a mut dyn Store) -> Self {
        Self { store }
    }

    /// `table[key]`, if present.
    pub fn get(&self, table: &str, key: &str) -> Result<Option<Value>, String> {
        self.store
            .get(table, key)
            .map(|text| {
                serde_json::from_str(&text).map_err(|err| format!("record {table}/{key}: {err}"))
            })
            .transpose()
    }

    /// `table[key]`, or Python's `KeyError` text.
    pub fn require(&self, table: &str, key: &str) -> Result<Value, String> {
        self.get(table, key)?.ok_or_else(|| key_error(key))
    }

    /// `key in table`.
    pub fn contains(&self, table: &str, key: &str) -> bool {
        self.store.get(table, key).is_some()
    }

    /// `table[key] = record`.
    pub fn put(&mut self, table: &str, key: &str, record: &Value) -> Result<(), String> {
        self.store.put(table, key, &record.to_string())
    }

    /// `table.items()`, each record read as `T` — a struct of the few fields
    /// a search looks at, so that scanning a table skips the rest of each
    /// record instead of building it. The host keeps keys in byte order; the
    /// reference iterates in file order, which differs only where a search
    /// could match two records (none of the suites' lookups can: ids and
    /// e-mails are unique, and flight numbers are stored sorted).
    pub fn scan<T: DeserializeOwned>(&self, table: &str) -> Result<Vec<(String, T)>, String> {
        self.store
            .keys(table)
            .into_iter()
            .map(|key| {
                let text = self.store.get(table, &key).ok_or_else(|| key_error(&key))?;
                let record = serde_json::from_str(&text)
                    .map_err(|err| format!("record {table}/{key}: {err}"))?;
                Ok((key, record))
            })
            .collect()
    }
}

/// The keyword arguments of a call.
pub struct Kwargs {
    map: Map<String, Value>,
    /// The Python function as its `TypeError`s name it: `GetUserDetails.invoke` (τ-bench)
    /// or `AirlineTools.book_reservation` (τ²-bench).
    callee: String,
}

impl Kwargs {
    pub fn parse(text: &str, callee: String) -> Result<Self, String> {
        match serde_json::from_str(text) {
            Ok(Value::Object(map)) => Ok(Self { map, callee }),
            Ok(_) => Err("arguments must be a JSON object".to_owned()),
            Err(err) => Err(format!("arguments are not valid JSON: {err}")),
        }
    }

    /// The keyword arguments `text` of a call to the Python function
    /// `callee`, bound to its `parameters` (each with whether it is
    /// required) as Python binds them: an unexpected keyword is refused
    /// first, then every missing required parameter at once, with the
    /// `TypeError` texts.
    pub fn bind(text: &str, callee: String, parameters: &[(&str, bool)]) -> Result<Self, String> {
        let kwargs = Self::parse(text, callee)?;
        let names: Vec<&str> = parameters.iter().map(|(name, _)| *name).collect();
        if let Some(unexpected) = kwargs.unexpected(&names) {
            return Err(format!(
                "{}() got an unexpected keyword argument '{unexpected}'",
                kwargs.callee
            ));
        }
        let missing: Vec<String> = parameters
            .iter()
            .filter(|(name, required)| *required && !kwargs.map.contains_key(*name))
            .map(|(name, _)| repr(name))
            .collect();
        let listed = match missing.as_slice() {
            [] => return Ok(kwargs),
            [one] => one.clone(),
            [first, second] => format!("{first} and {second}"),
            [rest @ .., last] => format!("{}, and {last}", rest.join(", ")),
        };
        let plural = if missing.len() == 1 { "" } else { "s" };
        Err(format!(
            "{}() missing {} required positional argument{plural}: {listed}",
            kwargs.callee,
            missing.len()
        ))
    }

    /// Argument `name` of a parameter with a default, if given.
    pub fn optional(&self, name: &str) -> Option<&Value> {
        self.map.get(name)
    }

    /// Argument `name`, or the `TypeError` Python raises when it is missing.
    pub fn get(&self, name: &str) -> Result<&Value, String> {
        self.map.get(name).ok_or_else(|| {
            format!(
                "{}() missing 1 required positional argument: '{name}'",
                self.callee
            )
        })
    }

    /// A string argument. Python would go on with any type and fail later or
    /// not at all; the host has checked types against the tool's schema
    /// before the call, so this only guards against schema and code disagreeing.
    pub fn str(&self, name: &str) -> Result<&str, String> {
        self.get(name)?
            .as_str()
            .ok_or_else(|| format!("argument '{name}' must be a string"))
    }

    /// A numeric argument.
    pub fn num(&self, name: &str) -> Result<Num, String> {
        num(self.get(name)?)
    }

    /// A list-of-strings argument.
    pub fn str_list(&self, name: &str) -> Result<Vec<String>, String> {
        self.list(name)?
            .iter()
            .map(|value| {
                value
                    .as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| format!("argument '{name}' must hold strings"))
            })
            .collect()
    }

    /// A list argument.
    pub fn list(&self, name: &str) -> Result<&Vec<Value>, String> {
        self.get(name)?
            .as_array()
            .ok_or_else(|| format!("argument '{name}' must be a list"))
    }

    /// Names that no parameter of the tool takes, in the order given.
    fn unexpected<'n>(&'n self, parameters: &[&str]) -> Option<&'n str> {
        self.map
            .keys()
            .map(String::as_str)
            .find(|name| !parameters.contains(name))
    }
}

/// One tool of a component: its name, its keyword parameters and its code.
pub struct Tool {
    pub name: &'static str,
    pub parameters: &'static [&'static str],
    pub run: ToolFn,
}

/// Runs tool `name` the way τ-bench's `Env.step` does.
pub fn call(
    tools: &[Tool],
    store: &mut dyn Store,
    name: &str,
    args: &str,
) -> Result<String, String> {
    let Some(tool) = tools.iter().find(|tool| tool.name == name) else {
        // The reference answers an unknown tool with this observation, not an error.
        return Ok(format!("Unknown action {name}"));
    };
    // Each τ-bench tool is a class named after it (`get_user_details` is
    // `GetUserDetails`) whose static `invoke` Python's errors name.
    run(tool, store, args, format!("{}.invoke", class_name(name)))
}

/// `get_user_details` → `GetUserDetails`.
fn class_name(tool: &str) -> String {
    tool.split('_')
        .flat_map(|word| {
            let mut chars = word.chars();
            chars
                .next()
                .map(|first| first.to_ascii_uppercase())
                .into_iter()
                .chain(chars)
        })
        .collect()
}

/// Runs tool `name` the way τ²-bench's `ToolKitBase.use_tool` does: a method
/// of the toolkit class `class` (`AirlineTools`), called with the arguments
/// as keywords.
pub fn call_method(
    class: &str,
    tools: &[Tool],
    store: &mut dyn Store,
    name: &str,
    args: &str,
) -> Result<String, String> {
    let Some(tool) = tools.iter().find(|tool| tool.name == name) else {
        return Err(format!("Tool '{name}' not found."));
    };
    run(tool, store, args, format!("{class}.{name}"))
}

/// Calls `tool` with the keyword arguments `args`, refusing unknown keywords
/// with the `TypeError` text of Python function `callee`.
fn run(tool: &Tool, store: &mut dyn Store, args: &str, callee: String) -> Result<String, String> {
    let kwargs = Kwargs::parse(args, callee)?;
    if let Some(unexpected) = kwargs.unexpected(tool.parameters) {
        return Err(format!(
            "{}() got an unexpected keyword argument '{unexpected}'",
            kwargs.callee
        ));
    }
    (tool.run)(&mut Data::new(store), &kwargs)
}

/// `value[key]` for a dict, or Python's `KeyError` text.
pub fn field<'v>(value: &'v Value, key: &str) -> Result<&'v Value, String> {
    value.get(key).ok_or_else(|| key_error(key))
}

/// `value[key]` for a dict, mutably.
pub fn field_mut<'v>(value: &'v mut Value, key: &str) -> Result<&'v mut Value, String> {
    value.get_mut(key).ok_or_else(|| key_error(key))
}

/// A string field.
pub fn str_field<'v>(value: &'v Value, key: &str) -> Result<&'v str, String> {
    field(value, key)?
        .as_str()
        .ok_or_else(|| format!("field '{key}' is not a string"))
}

/// A numeric field.
pub fn num_field(value: &Value, key: &str) -> Result<Num, String> {
    num(field(value, key)?)
}

/// A number, or the `TypeError` text of arithmetic on something else.
pub fn num(value: &Value) -> Result<Num, String> {
    Num::from_value(value).ok_or_else(|| format!("unsupported operand type: {value}"))
}

/// A list field, mutably.
pub fn list_mut<'v>(value: &'v mut Value, key: &str) -> Result<&'v mut Vec<Value>, String> {
    field_mut(value, key)?
        .as_array_mut()
        .ok_or_else(|| format!("field '{key}' is not a list"))
}

/// `d[key] = value` on a dict value: replaces in place or appends at the end,
/// as a Python dict does.
pub fn set(dict: &mut Value, key: &str, value: Value) {
    if let Value::Object(map) = dict {
        map.insert(key.to_owned(), value);
    }
}

/// The Python type name of a JSON value.
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(number) if number.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// Python's `str()` of a JSON value, as an f-string shows it: a string as
/// it is, anything else as its `repr`.
pub fn py_str(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => py_repr(other),
    }
}

/// Python's `repr` of a JSON value.
pub fn py_repr(value: &Value) -> String {
    match value {
        Value::Null => "None".to_owned(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        // Integers past `i64` stay exact, as Python's do.
        Value::Number(number) if number.is_u64() => number.to_string(),
        Value::Number(_) => num(value).map_or_else(|err| err, |num| num.to_python_string()),
        Value::String(text) => repr(text),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(py_repr).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(map) => {
            let items: Vec<String> = map
                .iter()
                .map(|(key, value)| format!("{}: {}", repr(key), py_repr(value)))
                .collect();
            format!("{{{}}}", items.join(", "))
        }
    }
}

/// `bool(value)`: Python's truthiness.
pub fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(flag) => *flag,
        Value::Number(number) => number.as_f64().is_some_and(|float| float != 0.0),
        Value::String(text) => !text.is_empty(),
        Value::Array(items) => !items.is_empty(),
        Value::Object(map) => !map.is_empty(),
    }
}

/// `value` as a key of a dict with string keys (`key in d`, `d.get(key)`):
/// the key if it could be one, `None` for a hashable value that is no
/// string (never found), Python's `TypeError` for an unhashable one.
pub fn dict_key(value: &Value) -> Result<Option<&str>, String> {
    match value {
        Value::String(text) => Ok(Some(text)),
        Value::Array(_) | Value::Object(_) => {
            Err(format!("unhashable type: '{}'", type_name(value)))
        }
        _ => Ok(None),
    }
}

/// `str(KeyError(key))`: the key's `repr`.
pub fn key_error(key: &str) -> String {
    repr(key)
}

/// Python's `repr` of a string.
pub fn repr(text: &str) -> String {
    let quote = if text.contains('\'') && !text.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(text.len() + 2);
    out.push(quote);
    for ch in text.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            ch if ch == quote => {
                out.push('\\');
                out.push(ch);
            }
            ch if (ch as u32) < 0x20 || ch as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", ch as u32));
            }
            ch => out.push(ch),
        }
    }
    out.push(quote);
    out
}

/// τ-bench's `calculate(expression)`.
pub fn calculate(_: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    evaluate(
        kwargs.str("expression")?,
        "invalid characters in expression",
    )
}

/// τ²-bench's `calculate(expression)`: τ-bench's, with the error capitalised.
pub fn calculate_tau2(_: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    evaluate(
        kwargs.str("expression")?,
        "Invalid characters in expression",
    )
}

/// `str(round(float(eval(expression)), 2))` over digits, `+ - * / ( ) .` and
/// spaces; `invalid` is the reference's refusal of anything else.
fn evaluate(expression: &str, invalid: &str) -> Result<String, String> {
    if !expression
        .chars()
        .all(|ch| "0123456789+-*/(). ".contains(ch))
    {
        return Err(invalid.to_owned());
    }
    let value = forge_pycompat::expr::eval(expression)?;
    Ok(Num::Float(value.as_f64()).round(2).to_python_string())
}

/// The airline searches' next-day date: `f"2024-05-{int(date[-2:]) + 1}"`
/// (no zero padding, no month rollover), or `int()`'s `ValueError` text.
pub fn next_day(date: &str) -> Result<String, String> {
    let start = date
        .char_indices()
        .rev()
        .nth(1)
        .map_or(0, |(index, _)| index);
    let day = &date[start..];
    let parsed: i64 = day
        .trim()
        .parse()
        .map_err(|_| format!("invalid literal for int() with base 10: {}", repr(day)))?;
    Ok(format!("2024-05-{}", parsed + 1))
}

/// `think(thought)`: answers nothing.
pub fn think(_: &mut Data<'_>, _: &Kwargs) -> Result<String, String> {
    Ok(String::new())
}

/// `transfer_to_human_agents(summary)`: ends the episode in the reference.
pub fn transfer_to_human_agents(_: &mut Data<'_>, _: &Kwargs) -> Result<String, String> {
    Ok("Transfer successful".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tau_bench_classes_are_named_after_their_tools() {
        assert_eq!(class_name("get_user_details"), "GetUserDetails");
        assert_eq!(class_name("search_onestop_flight"), "SearchOnestopFlight");
        assert_eq!(class_name("think"), "Think");
    }

    /// `class K: def m(self, a, b, c, d=1): ...` called as `K().m(**kwargs)`.
    #[test]
    fn binding_reports_what_python_reports() {
        let parameters = [("a", true), ("b", true), ("c", true), ("d", false)];
        let bind = |text: &str| Kwargs::bind(text, "K.m".to_owned(), &parameters).err();
        assert_eq!(
            bind("{}").unwrap(),
            "K.m() missing 3 required positional arguments: 'a', 'b', and 'c'"
        );
        assert_eq!(
            bind(r#"{"a": 1}"#).unwrap(),
            "K.m() missing 2 required positional arguments: 'b' and 'c'"
        );
        assert_eq!(
            bind(r#"{"a": 1, "b": 2}"#).unwrap(),
            "K.m() missing 1 required positional argument: 'c'"
        );
        assert_eq!(
            bind(r#"{"z": 1}"#).unwrap(),
            "K.m() got an unexpected keyword argument 'z'"
        );
        assert_eq!(bind(r#"{"a": 1, "b": 2, "c": 3}"#), None);
    }

    #[test]
    fn python_text_truth_and_keys() {
        use serde_json::json;
        assert_eq!(py_str(&json!(2)), "2");
        assert_eq!(py_str(&json!(u64::MAX)), "18446744073709551615");
        assert_eq!(py_str(&json!(-3)), "-3");
        assert_eq!(py_str(&json!(1e16)), "1e+16");
        assert_eq!(py_str(&json!("it's")), "it's");
        assert_eq!(
            py_repr(&json!({"a": [null, false, 1.5, "it's"]})),
            "{'a': [None, False, 1.5, \"it's\"]}"
        );
        assert!(!truthy(&json!(0.0)) && !truthy(&json!("")) && !truthy(&json!({})));
        assert!(!truthy(&json!(null)) && !truthy(&json!(0)) && !truthy(&json!([])));
        assert!(truthy(&json!([0])) && truthy(&json!("False")) && truthy(&json!(-1)));
        assert_eq!(dict_key(&json!("k")), Ok(Some("k")));
        assert_eq!(dict_key(&json!(1.0)), Ok(None));
        assert_eq!(
            dict_key(&json!([1])),
            Err("unhashable type: 'list'".to_owned())
        );
    }

    #[test]
    fn repr_quotes_like_python() {
        assert_eq!(repr("abc"), "'abc'");
        assert_eq!(repr("it's"), "\"it's\"");
        assert_eq!(repr("a'b\"c"), "'a\\'b\"c'");
        assert_eq!(repr("tab\there"), "'tab\\there'");
    }
}
