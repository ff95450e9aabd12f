//! Stage 3, continued: every write tool's preconditions hold somewhere in
//! the initial state.
//!
//! Drawn at random, a state may hold no record a tool's preconditions admit
//! (not one pending sick-day request among two dozen requests), and then the
//! tool can be neither validated nor walked: the domain would be rejected
//! for that seed alone. So records are adjusted, a field at a time, until a
//! few admit each tool, never taking the last of them from a tool already
//! served. Preconditions on unique or reference fields are left to chance:
//! changing those would break the state's consistency.

use crate::doc::{Condition, DomainDoc, FieldDoc, FieldType, Op, ToolKind};
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde_json::{Map, Value};

/// Records, at the least, whose values admit each write tool: enough that
/// a tool drawing its target at random meets one soon (a tenth, from 3 to
/// 20: large collections seldom lack them).
fn wanted(records: usize) -> usize {
    records.div_ceil(10).clamp(3, 20).min(records)
}

/// Records tried per record wanted before a need is left to chance.
const TRIES_PER_WANTED: usize = 8;

/// Adjusts `state` so that each write tool of `doc` is admitted by
/// [`wanted`] records, where its preconditions can be met by setting fields.
pub fn admit_every_write(doc: &DomainDoc, state: &mut Map<String, Value>, rng: &mut ChaCha8Rng) {
    let needs: Vec<Need> = doc
        .tools
        .iter()
        .filter(|tool| tool.kind.writes())
        .flat_map(|tool| Need::of(doc, tool))
        .collect();
    for (at, need) in needs.iter().enumerate() {
        let keys = need.keys(state);
        let want = wanted(keys.len());
        let admitted = keys.iter().filter(|key| need.admits(state, key)).count();
        if admitted >= want {
            continue;
        }
        let mut candidates: Vec<String> = keys
            .into_iter()
            .filter(|key| !need.admits(state, key))
            .collect();
        candidates.shuffle(rng);
        // What each need already served may not fall below: its count, up
        // to what it wants.
        let floors: Vec<usize> = needs[..at]
            .iter()
            .map(|done| done.count(state).min(wanted(done.keys(state).len())))
            .collect();
        let mut admitted = admitted;
        for key in candidates.into_iter().take(want * TRIES_PER_WANTED) {
            if admitted >= want {
                break;
            }
            let Some(before) = need.records(state, &key) else {
                continue;
            };
            need.meet(state, &key);
            let keeps_the_served = needs[..at]
                .iter()
                .zip(&floors)
                .all(|(done, &floor)| done.count(state) >= floor);
            if need.admits(state, &key) && keeps_the_served {
                // Counted again: a referenced record met for this one may
                // admit others too.
                admitted = need.count(state);
            } else {
                for ((collection, key), record) in before {
                    state[&collection][&key] = record;
                }
            }
        }
    }
}

/// What one write tool needs of the state: records of `collection` that,
/// with the records they reference, meet the tool's conditions.
struct Need {
    collection: String,
    groups: Vec<Group>,
}

/// Conditions on the record itself (no `reference`) or on the record a
/// reference field of it points to, with each condition's field.
struct Group {
    reference: Option<Reference>,
    conditions: Vec<(Condition, FieldDoc)>,
}

/// A record: its collection and key.
type Site = (String, String);

/// A reference field and the collection it points into.
struct Reference {
    field: String,
    target: String,
}

impl Need {
    /// The needs of `tool`: for an update or delete, its target record's
    /// (with the records it references); for a create, that of each record
    /// its reference arguments may name. None where a condition is one
    /// setting a field cannot meet, or one an update checks against its
    /// arguments (a field it sets from them, a record they name).
    fn of(doc: &DomainDoc, tool: &crate::doc::ToolDoc) -> Vec<Need> {
        let mut groups: Vec<Group> = Vec::new();
        for condition in &tool.require {
            let on_argument = condition.via.as_ref().unwrap_or(&condition.field);
            if tool.kind == ToolKind::Update && tool.params.contains(on_argument) {
                return Vec::new();
            }
            let Ok(target) = doc.via_target(tool, condition.via.as_deref()) else {
                return Vec::new();
            };
            let Some(field) = doc.field(&target, &condition.field) else {
                return Vec::new();
            };
            if field.unique || field.references.is_some() {
                return Vec::new();
            }
            let reference = condition.via.clone().map(|field| Reference {
                field,
                target: target.clone(),
            });
            let at = groups.iter().position(|group| {
                group.reference.as_ref().map(|reference| &reference.field) == condition.via.as_ref()
            });
            match at {
                Some(at) => groups[at].conditions.push((condition.clone(), field)),
                None => groups.push(Group {
                    reference,
                    conditions: vec![(condition.clone(), field)],
                }),
            }
        }
        if groups.is_empty() {
            return Vec::new();
        }
        match tool.kind {
            ToolKind::Update | ToolKind::Delete => vec![Need {
                collection: tool.collection.clone(),
                groups,
            }],
            // A new record's conditions are on the records it references.
            _ => groups
                .into_iter()
                .filter_map(|group| {
                    group.reference.map(|reference| Need {
                        collection: reference.target,
                        groups: vec![Group {
                            reference: None,
                            conditions: group.conditions,
                        }],
                    })
                })
                .collect(),
        }
    }

    fn keys(&self, state: &Map<String, Value>) -> Vec<String> {
        state
            .get(&self.collection)
            .and_then(Value::as_object)
            .map(|records| records.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// How many records of the collection admit the tool.
    fn count(&self, state: &Map<String, Value>) -> usize {
        self.keys(state)
            .iter()
            .filter(|key| self.admits(state, key))
            .count()
    }

    /// Where each group's conditions are checked for the record `key`: the
    /// collection and key of the record itself or of the one it references.
    fn sites(&self, state: &Map<String, Value>, key: &str) -> Option<Vec<Site>> {
        let record = state.get(&self.collection)?.get(key)?;
        self.groups
            .iter()
            .map(|group| match &group.reference {
                None => Some((self.collection.clone(), key.to_owned())),
                Some(reference) => Some((
                    reference.target.clone(),
                    record.get(&reference.field)?.as_str()?.to_owned(),
                )),
            })
            .collect()
    }

    /// The records [`Need::meet`] may change for `key`, as they are.
    fn records(&self, state: &Map<String, Value>, key: &str) -> Option<Vec<(Site, Value)>> {
        self.sites(state, key)?
            .into_iter()
            .map(|(collection, key)| {
                let record = state.get(&collection)?.get(&key)?.clone();
                Some(((collection, key), record))
            })
            .collect()
    }

    fn admits(&self, state: &Map<String, Value>, key: &str) -> bool {
        let Some(sites) = self.sites(state, key) else {
            return false;
        };
        sites
            .iter()
            .zip(&self.groups)
            .all(|((collection, key), group)| {
                let record = state.get(collection).and_then(|records| records.get(key));
                group.conditions.iter().all(|(condition, _)| {
                    let actual = record
                        .and_then(|record| record.get(&condition.field))
                        .unwrap_or(&Value::Null);
                    holds(actual, condition.op, &condition.value)
                })
            })
    }

    /// Sets the fields of record `key` (and of those it references) that
    /// stand in the way of the tool's conditions.
    fn meet(&self, state: &mut Map<String, Value>, key: &str) {
        let Some(sites) = self.sites(state, key) else {
            return;
        };
        for ((collection, key), group) in sites.iter().zip(&self.groups) {
            let Some(record) = state
                .get_mut(collection)
                .and_then(|records| records.get_mut(key))
                .and_then(Value::as_object_mut)
            else {
                continue;
            };
            for (condition, field) in &group.conditions {
                let actual = record.get(&condition.field).unwrap_or(&Value::Null);
                if holds(actual, condition.op, &condition.value) {
                    continue;
                }
                if let Some(value) = meeting(field, condition.op, &condition.value) {
                    record.insert(condition.field.clone(), value);
                }
            }
        }
    }
}

/// Whether `actual` stands in relation `op` to `bound`, as the generated
/// tools check it.
fn holds(actual: &Value, op: Op, bound: &Value) -> bool {
    match op {
        Op::Eq => actual == bound,
        Op::Ne => actual != bound,
        _ => match (actual.as_f64(), bound.as_f64()) {
            (Some(actual), Some(bound)) => match op {
                Op::Gt => actual > bound,
                Op::Ge => actual >= bound,
                Op::Lt => actual < bound,
                _ => actual <= bound,
            },
            _ => false,
        },
    }
}

/// A value of `field` in relation `op` to `bound`, within the field's
/// bounds; none where the field's type offers none by rule.
fn meeting(field: &FieldDoc, op: Op, bound: &Value) -> Option<Value> {
    // The constant a tool compares with: the doc's check lets it be one
    // some tool sets the field to, outside its `enum` or bounds.
    if op == Op::Eq {
        return Some(bound.clone());
    }
    if let Some(choices) = &field.choices {
        return choices
            .iter()
            .find(|choice| holds(choice, op, bound))
            .cloned();
    }
    if field.kind == FieldType::Boolean && op == Op::Ne {
        return bound.as_bool().map(|flag| Value::Bool(!flag));
    }
    let bound_number = bound.as_f64()?;
    let near = |up: bool| -> Option<Value> {
        Some(match field.kind {
            FieldType::Integer => Value::from(match (op, up) {
                (Op::Ge, _) => bound_number.ceil() as i64,
                (Op::Le, _) => bound_number.floor() as i64,
                (_, true) => bound_number.floor() as i64 + 1,
                (_, false) => bound_number.ceil() as i64 - 1,
            }),
            FieldType::Number => Value::from(match (op, up) {
                (Op::Ge | Op::Le, _) => bound_number,
                (_, true) => bound_number + 1.0,
                (_, false) => bound_number - 1.0,
            }),
            _ => return None,
        })
    };
    let fits = |value: &Value| {
        value.as_f64().is_some_and(|number| {
            field.min.is_none_or(|min| number >= min) && field.max.is_none_or(|max| number <= max)
        }) && holds(value, op, bound)
    };
    // Above the bound for `>`, below it for `<`, either side for `!=`.
    let sides: &[bool] = match op {
        Op::Lt => &[false],
        Op::Ne => &[true, false],
        _ => &[true],
    };
    sides
        .iter()
        .filter_map(|&up| near(up))
        .find(|value| fits(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::initial::initial_state;

    #[test]
    fn every_write_of_the_shipped_domains_is_admitted_by_a_few_records_whatever_the_seed() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../env-templates/domains");
        let mut served = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|extension| extension != "toml") {
                continue;
            }
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            let doc: DomainDoc = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let needs: Vec<Need> = doc
                .tools
                .iter()
                .filter(|tool| tool.kind.writes())
                .flat_map(|tool| Need::of(&doc, tool))
                .collect();
            served += needs.len();
            for seed in 0..40 {
                let state = initial_state(&doc, seed).unwrap();
                let state = state.as_object().unwrap();
                for need in &needs {
                    let records = need.keys(state).len();
                    assert!(
                        need.count(state) >= wanted(records),
                        "{name}, seed {seed}: {} of {records} `{}` records admit a write",
                        need.count(state),
                        need.collection
                    );
                }
            }
        }
        // Not vacuous: the shipped writes have preconditions to meet.
        assert!(served >= 20, "{served} needs");
    }

    #[test]
    fn values_meet_each_relation_within_the_field_bounds() {
        let field = |kind, min, max| FieldDoc {
            kind,
            description: None,
            generator: None,
            choices: None,
            min,
            max,
            references: None,
            unique: false,
            user_knows: false,
        };
        let integer = field(FieldType::Integer, Some(0.0), Some(5.0));
        for (op, bound) in [
            (Op::Gt, 2),
            (Op::Ge, 2),
            (Op::Lt, 2),
            (Op::Le, 2),
            (Op::Ne, 2),
        ] {
            let value = meeting(&integer, op, &Value::from(bound)).unwrap();
            assert!(value.is_i64(), "{value}");
            assert!(holds(&value, op, &Value::from(bound)), "{op:?} {value}");
        }
        assert_eq!(meeting(&integer, Op::Gt, &Value::from(5)), None);
        // At the top of its range, `!=` goes below.
        assert_eq!(
            meeting(&integer, Op::Ne, &Value::from(5)),
            Some(Value::from(4))
        );
        assert_eq!(meeting(&integer, Op::Lt, &Value::from(0)), None);
        let number = field(FieldType::Number, None, None);
        assert_eq!(
            meeting(&number, Op::Gt, &Value::from(0.5)),
            Some(Value::from(1.5))
        );
        let status = FieldDoc {
            choices: Some(vec![Value::from("open"), Value::from("closed")]),
            ..field(FieldType::String, None, None)
        };
        assert_eq!(
            meeting(&status, Op::Ne, &Value::from("open")),
            Some(Value::from("closed"))
        );
        let flag = field(FieldType::Boolean, None, None);
        assert_eq!(
            meeting(&flag, Op::Ne, &Value::Bool(true)),
            Some(Value::Bool(false))
        );
    }
}
