//! Stage 3: initial state values — seeded, realistic, and referentially
//! consistent (every reference points at an existing record; unique fields
//! are unique).

use crate::doc::{DomainDoc, FieldDoc, FieldType};
use crate::values;
use anyhow::{Result, bail};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// The initial state of a domain: `{collection: {key: record}}`.
pub fn initial_state(doc: &DomainDoc, seed: u64) -> Result<Value> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut state = Map::new();
    for name in doc.generation_order()? {
        let collection = &doc.collections[name];
        let mut records = Map::new();
        let mut taken: std::collections::BTreeMap<&str, BTreeSet<String>> = Default::default();
        for index in 1..=collection.count {
            let key = format!("{}{index}", collection.key_prefix);
            let mut record = Map::new();
            record.insert(collection.key_field.clone(), Value::String(key.clone()));
            // Derived generators (an email from the name) run after the rest.
            let (derived, plain): (Vec<_>, Vec<_>) = collection
                .fields
                .iter()
                .partition(|(_, field)| field.generator.as_deref() == Some("email"));
            for (field_name, field) in plain.into_iter().chain(derived) {
                let mut value = field_value(field, &state, &record, &mut rng);
                if field.unique {
                    let seen = taken.entry(field_name).or_default();
                    let mut attempt = 0;
                    // The text numbered once draws run out: each attempt
                    // after numbers it anew, rather than adding a number to
                    // the last one (`Dune 50 51 52`).
                    let mut numbered: Option<String> = None;
                    while seen.contains(&value.to_string()) {
                        attempt += 1;
                        value = match (attempt < 50, &value) {
                            (true, _) => field_value(field, &state, &record, &mut rng),
                            // Free text may be told apart by a number; a
                            // value from a set (an enum, dates, numbers)
                            // may not leave it.
                            (false, Value::String(text))
                                if field.choices.is_none()
                                    && !matches!(
                                        field.generator.as_deref(),
                                        Some("date" | "birth_date")
                                    ) =>
                            {
                                let base = numbered.get_or_insert_with(|| text.clone());
                                Value::String(format!("{base} {attempt}"))
                            }
                            (false, _) => bail!(
                                "collection `{name}`, field `{field_name}`: unique, but 50 draws \
                                 found no value the first {} records do not hold; widen its \
                                 values or lower the count",
                                index - 1
                            ),
                        };
                    }
                    seen.insert(value.to_string());
                }
                record.insert(field_name.clone(), value);
            }
            records.insert(key, Value::Object(record));
        }
        state.insert(name.to_owned(), Value::Object(records));
    }
    crate::coverage::admit_every_write(doc, &mut state, &mut rng);
    Ok(Value::Object(state))
}

/// A value for `field`. References pick an existing key of the (already
/// generated) target collection.
pub fn field_value(
    field: &FieldDoc,
    state: &Map<String, Value>,
    record: &Map<String, Value>,
    rng: &mut ChaCha8Rng,
) -> Value {
    if let Some(target) = &field.references {
        let keys: Vec<&String> = state
            .get(target)
            .and_then(Value::as_object)
            .map(|records| records.keys().collect())
            .unwrap_or_default();
        return match keys.len() {
            0 => Value::Null,
            len => Value::String(keys[rng.random_range(0..len)].clone()),
        };
    }
    if let Some(choices) = &field.choices
        && !choices.is_empty()
    {
        return choices[rng.random_range(0..choices.len())].clone();
    }
    match field.kind {
        FieldType::String => Value::String(values::generate(
            field.generator.as_deref().unwrap_or("word"),
            rng,
            record,
        )),
        FieldType::Integer => {
            let low = field.min.unwrap_or(0.0).ceil() as i64;
            let high = (field.max.unwrap_or(10.0).floor() as i64).max(low);
            Value::from(rng.random_range(low..=high))
        }
        FieldType::Number => {
            let low = field.min.unwrap_or(0.0);
            let high = field.max.unwrap_or(100.0).max(low);
            let cents =
                rng.random_range((low * 100.0).round() as i64..=(high * 100.0).round() as i64);
            Value::from(cents as f64 / 100.0)
        }
        FieldType::Boolean => Value::Bool(rng.random_bool(0.5)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn library() -> DomainDoc {
        toml::from_str(include_str!("../../env-templates/domains/library.toml")).unwrap()
    }

    #[test]
    fn states_are_seeded_consistent_and_unique_where_declared() {
        let doc = library();
        let state = initial_state(&doc, 7).unwrap();
        assert_eq!(
            state,
            initial_state(&doc, 7).unwrap(),
            "same seed, same state"
        );
        assert_ne!(state, initial_state(&doc, 8).unwrap());
        for (name, collection) in &doc.collections {
            let records = state[name].as_object().unwrap();
            assert_eq!(records.len(), collection.count);
            for (field, field_doc) in &collection.fields {
                let values: Vec<&Value> = records.values().map(|record| &record[field]).collect();
                if let Some(target) = &field_doc.references {
                    for value in &values {
                        assert!(
                            state[target].get(value.as_str().unwrap()).is_some(),
                            "{name}.{field} = {value} dangles"
                        );
                    }
                }
                if field_doc.unique {
                    let distinct: BTreeSet<String> =
                        values.iter().map(|value| value.to_string()).collect();
                    assert_eq!(distinct.len(), values.len(), "{name}.{field} repeats");
                }
                if let (Some(min), Some(max)) = (field_doc.min, field_doc.max) {
                    assert!(
                        values
                            .iter()
                            .all(|value| (min..=max).contains(&value.as_f64().unwrap())),
                        "{name}.{field} out of range"
                    );
                }
            }
        }
    }

    #[test]
    fn unique_text_past_its_draws_is_numbered_once() {
        let mut doc = library();
        // More books than there are titles to draw.
        doc.collections.get_mut("books").unwrap().count = 400;
        let state = initial_state(&doc, 7).unwrap();
        let titles: Vec<&str> = state["books"]
            .as_object()
            .unwrap()
            .values()
            .map(|book| book["title"].as_str().unwrap())
            .collect();
        let number = |word: Option<&str>| word.is_some_and(|word| word.parse::<u32>().is_ok());
        assert!(
            titles
                .iter()
                .any(|title| number(title.split(' ').next_back()))
        );
        for title in titles {
            let mut words = title.rsplit(' ');
            assert!(
                !(number(words.next()) && number(words.next())),
                "`{title}` is numbered twice"
            );
        }
    }
}
