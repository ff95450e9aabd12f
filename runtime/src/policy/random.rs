use crate::bundle::ToolCall;
use crate::episode::{Action, Policy};
use crate::schema::ToolSpec;
use crate::trajectory::{ChatMessage, Role};
use anyhow::{Result, bail};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Map, Value};

/// The deepest schema a random value is drawn for (a recursive `$ref` ends
/// there, in null).
const MAX_DEPTH: usize = 16;

/// Makes schema-valid tool calls with seeded random arguments, then says
/// something random to the user. Strings are drawn from what the episode has
/// shown so far (the user's words, values in tool results), so its calls can
/// hit real records: its success rate is the chance level a task must beat.
pub struct RandomPolicy {
    rng: ChaCha8Rng,
    calls_left: usize,
}

impl RandomPolicy {
    /// Most tool calls a random episode makes.
    pub const MAX_CALLS: usize = 4;

    pub fn new(seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let calls_left = rng.random_range(1..=Self::MAX_CALLS);
        Self { rng, calls_left }
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        (!items.is_empty()).then(|| &items[self.rng.random_range(0..items.len())])
    }

    /// A value of `schema`, a part of the tool's parameters `root` (which
    /// its `$ref`s point into), `depth` schemas down.
    fn value(&mut self, schema: &Value, root: &Value, depth: usize, pool: &Pool) -> Value {
        if depth > MAX_DEPTH {
            return Value::Null;
        }
        // τ²-bench's pydantic schemas name their models' (`$ref` into
        // `$defs`) and optional fields' (`anyOf` with null) types so.
        if let Some(target) = schema
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|path| root.pointer(path.strip_prefix('#')?))
        {
            return self.value(target, root, depth + 1, pool);
        }
        if let Some(Value::Array(alternatives)) =
            schema.get("anyOf").or_else(|| schema.get("oneOf"))
        {
            let typed: Vec<&Value> = alternatives
                .iter()
                .filter(|alternative| alternative.get("type") != Some(&Value::from("null")))
                .collect();
            if let Some(alternative) = self.pick(&typed) {
                return self.value(alternative, root, depth + 1, pool);
            }
        }
        if let Some(Value::Array(choices)) = schema.get("enum")
            && let Some(choice) = self.pick(choices)
        {
            return choice.clone();
        }
        let kind = match schema.get("type") {
            Some(Value::String(kind)) => kind.as_str(),
            Some(Value::Array(kinds)) => kinds
                .iter()
                .filter_map(Value::as_str)
                .find(|kind| *kind != "null")
                .unwrap_or("null"),
            _ => "string",
        };
        let minimum = schema.get("minimum").and_then(Value::as_f64);
        let maximum = schema.get("maximum").and_then(Value::as_f64);
        match kind {
            "integer" => {
                let low = minimum.map_or(0, |low| low.ceil() as i64);
                let high = maximum.map_or(low + 3, |high| high.floor() as i64).max(low);
                Value::from(self.rng.random_range(low..=high))
            }
            "number" => match self.pick(&pool.numbers) {
                Some(number)
                    if minimum.is_none_or(|low| *number >= low)
                        && maximum.is_none_or(|high| *number <= high) =>
                {
                    Value::from(*number)
                }
                _ => Value::from(
                    minimum.unwrap_or(0.0) + f64::from(self.rng.random_range(0..100u32)),
                ),
            },
            "boolean" => Value::Bool(self.rng.random_bool(0.5)),
            "array" => {
                let low = schema.get("minItems").and_then(Value::as_u64).unwrap_or(1) as usize;
                let high = schema
                    .get("maxItems")
                    .and_then(Value::as_u64)
                    .map_or(low + 1, |high| high as usize)
                    .max(low);
                let len = self.rng.random_range(low..=high);
                let item = schema.get("items").cloned().unwrap_or(Value::Null);
                Value::Array(
                    (0..len)
                        .map(|_| self.value(&item, root, depth + 1, pool))
                        .collect(),
                )
            }
            "object" => self.object(schema, root, depth, pool),
            "null" => Value::Null,
            _ => Value::String(self.pick(&pool.strings).cloned().unwrap_or_default()),
        }
    }

    fn object(&mut self, schema: &Value, root: &Value, depth: usize, pool: &Pool) -> Value {
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let mut object = Map::new();
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            for (name, property) in properties {
                if required.contains(&name.as_str()) || self.rng.random_bool(0.5) {
                    let value = self.value(property, root, depth + 1, pool);
                    object.insert(name.clone(), value);
                }
            }
        }
        Value::Object(object)
    }
}

impl Policy for RandomPolicy {
    fn act(&mut self, transcript: &[ChatMessage], tools: &[ToolSpec]) -> Result<Action> {
        let pool = Pool::from_transcript(transcript);
        if self.calls_left > 0 && !tools.is_empty() {
            self.calls_left -= 1;
            let tool = &tools[self.rng.random_range(0..tools.len())];
            let arguments = self.object(&tool.parameters, &tool.parameters, 0, &pool);
            return Ok(Action::call(ToolCall::new(tool.name.clone(), arguments)));
        }
        let words: Vec<String> = (0..3)
            .filter_map(|_| self.pick(&pool.strings).cloned())
            .collect();
        if words.is_empty() && transcript.is_empty() {
            bail!("the random policy needs a transcript to draw from");
        }
        Ok(Action::Say(words.join(" ")))
    }
}

/// Strings and numbers the episode has shown.
struct Pool {
    strings: Vec<String>,
    numbers: Vec<f64>,
}

impl Pool {
    fn from_transcript(transcript: &[ChatMessage]) -> Self {
        let mut pool = Self {
            strings: Vec::new(),
            numbers: Vec::new(),
        };
        for message in transcript {
            let Some(content) = &message.content else {
                continue;
            };
            match message.role {
                Role::User => pool.add_words(content),
                Role::Tool => match serde_json::from_str::<Value>(content) {
                    Ok(value) => pool.add_value(&value),
                    Err(_) => pool.add_words(content),
                },
                Role::System | Role::Assistant => {}
            }
        }
        pool
    }

    fn add_words(&mut self, text: &str) {
        for word in text.split_whitespace() {
            let word = word.trim_matches(|ch: char| {
                !ch.is_alphanumeric() && ch != '@' && ch != '.' && ch != '-' && ch != '_'
            });
            let word = word.trim_end_matches('.');
            if !word.is_empty() {
                self.strings.push(word.to_owned());
            }
        }
    }

    fn add_value(&mut self, value: &Value) {
        match value {
            Value::String(text) => self.strings.push(text.clone()),
            Value::Number(number) => self.numbers.extend(number.as_f64()),
            Value::Array(items) => items.iter().for_each(|item| self.add_value(item)),
            Value::Object(map) => map.values().for_each(|item| self.add_value(item)),
            Value::Null | Value::Bool(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_follow_refs_and_alternatives_into_the_schemas_they_name() {
        let parameters = json!({
            "type": "object",
            "properties": {
                "flights": {"type": "array", "items": {"$ref": "#/$defs/Flight"}},
                "insurance": {"anyOf": [{"type": "null"}, {"type": "boolean"}]},
                "next": {"$ref": "#/$defs/Loop"},
            },
            "required": ["flights", "insurance", "next"],
            "$defs": {
                "Flight": {
                    "type": "object",
                    "properties": {"flight_number": {"type": "string"}, "seats": {"type": "integer"}},
                    "required": ["flight_number", "seats"],
                },
                "Loop": {"anyOf": [{"$ref": "#/$defs/Loop"}]},
            },
        });
        let tool = ToolSpec {
            name: "book".into(),
            description: String::new(),
            parameters,
        };
        let transcript = [ChatMessage::user("book HAT001 please")];
        for seed in 0..20 {
            let Action::Call { call, .. } = RandomPolicy::new(seed)
                .act(&transcript, std::slice::from_ref(&tool))
                .unwrap()
            else {
                panic!("a call first");
            };
            let flights = call.arguments["flights"].as_array().unwrap();
            assert!(
                flights
                    .iter()
                    .all(|flight| flight["flight_number"].is_string() && flight["seats"].is_i64()),
                "{}",
                call.arguments
            );
            assert!(
                call.arguments["insurance"].is_boolean(),
                "{}",
                call.arguments
            );
            // A schema that names itself ends in null.
            assert!(call.arguments["next"].is_null(), "{}", call.arguments);
        }
    }
}
