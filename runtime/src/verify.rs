//! Rewards: does the final state match the gold final state, and did the agent
//! tell the user what it had to?
//!
//! Exact state equality is brittle where a field is incidental (a free-text
//! note) or a list's order carries no meaning (returned item ids), so each
//! environment declares canonicalisation rules, applied to both states before
//! they are compared:
//! - `ignore_fields`: `"collection.field"` — the field is dropped from every
//!   record of the collection;
//! - `unordered_lists`: `"collection.field"` — the list is sorted (by canonical
//!   JSON) in every record of the collection.
//!
//! The reward is binary, as in the method: the state matches (unless the
//! task leaves the state out), every required output was said, and every
//! assertion, required call and judged NL assertion of the task holds;
//! partial credit — the share of checks met — is reported beside it.

use crate::canonical;
use crate::state::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;

/// Canonicalisation rules (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifyRules {
    #[serde(default)]
    pub ignore_fields: Vec<String>,
    #[serde(default)]
    pub unordered_lists: Vec<String>,
    /// A numeric required output counts only as a whole number in the
    /// agent's text (`2` is not found in `555-1234` or `2.5`). Off by default,
    /// matching τ-bench's plain substring rule.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub whole_numbers: bool,
}

impl VerifyRules {
    /// Whether the rules leave states as they are (states are then compared
    /// by their memoised digests, without turning them into JSON).
    pub fn is_empty(&self) -> bool {
        self.ignore_fields.is_empty() && self.unordered_lists.is_empty()
    }

    /// Every rule, with the name of its list.
    fn rules(&self) -> impl Iterator<Item = (&'static str, &str)> {
        let ignored = self
            .ignore_fields
            .iter()
            .map(|rule| ("ignore_fields", rule));
        let unordered = self
            .unordered_lists
            .iter()
            .map(|rule| ("unordered_lists", rule));
        ignored
            .chain(unordered)
            .map(|(list, rule)| (list, rule.as_str()))
    }

    /// Refuses a rule that is not `collection.field`: it would apply to
    /// nothing, and states would differ where the bundle meant them not to.
    pub fn check(&self) -> Result<(), String> {
        for (list, rule) in self.rules() {
            if !rule
                .split_once('.')
                .is_some_and(|(collection, field)| !collection.is_empty() && !field.is_empty())
            {
                return Err(format!("`{list}` rule `{rule}` is not `collection.field`"));
            }
        }
        Ok(())
    }

    /// Refuses a rule whose collection is none of `known` (those the
    /// environment's states hold): a misspelt name applies to nothing.
    pub fn check_collections(&self, known: &BTreeSet<&str>) -> Result<(), String> {
        for (list, rule) in self.rules() {
            let collection = rule
                .split_once('.')
                .map_or(rule, |(collection, _)| collection);
            if !known.contains(collection) {
                let known: Vec<&str> = known.iter().copied().collect();
                return Err(format!(
                    "`{list}` rule `{rule}` names collection `{collection}`, which no state of \
                     the environment holds (it holds: {})",
                    known.join(", ")
                ));
            }
        }
        Ok(())
    }

    /// The state as JSON with the rules applied.
    pub fn canonicalise(&self, state: &State) -> Value {
        let mut json = state.to_json();
        for (rule, ignore) in self
            .ignore_fields
            .iter()
            .map(|r| (r, true))
            .chain(self.unordered_lists.iter().map(|r| (r, false)))
        {
            let Some((collection, field)) = rule.split_once('.') else {
                continue;
            };
            let Some(Value::Object(records)) = json.get_mut(collection) else {
                continue;
            };
            for record in records.values_mut() {
                let Value::Object(record) = record else {
                    continue;
                };
                if ignore {
                    record.shift_remove(field);
                } else if let Some(Value::Array(items)) = record.get_mut(field) {
                    items.sort_by_cached_key(canonical::to_string);
                }
            }
        }
        json
    }
}

/// One required output and whether the agent said it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputCheck {
    pub output: String,
    pub found: bool,
}

/// One of a task's assertions or required calls, and whether it was met.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    /// The assertion's function or the required call's tool.
    pub name: String,
    pub met: bool,
}

/// How many of `checks` are met.
pub fn met(checks: &[Check]) -> usize {
    checks.iter().filter(|check| check.met).count()
}

/// How many of the required `outputs` were said.
pub fn found(outputs: &[OutputCheck]) -> usize {
    outputs.iter().filter(|check| check.found).count()
}

/// The verdict on an episode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// 1.0 when every check the task counts is met (the state matches, every
    /// required output was said, every assertion holds, every required call
    /// was made), else 0.0.
    pub reward: f64,
    pub state_match: bool,
    pub outputs: Vec<OutputCheck>,
    /// The task's assertions on the final state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assertions: Vec<Check>,
    /// The task's required calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<Check>,
    /// The task's NL assertions as a judge model found them (empty when the
    /// episode ran without a judge).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nl_assertions: Vec<Check>,
    /// Checks met / checks: one check per record that the gold actions or the
    /// agent changed (met when it equals its gold version), one per required
    /// output, assertion, required call and judged NL assertion. 1.0 when
    /// there is nothing to check.
    pub partial_credit: f64,
}

/// A task's checks beyond the state and the required outputs, as an episode
/// met them. By default there are none and the state counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checks {
    /// Whether the state match counts (tasks judged by their assertions
    /// alone leave it out of the reward; it is still reported).
    pub state_counts: bool,
    pub assertions: Vec<Check>,
    pub calls: Vec<Check>,
    pub nl_assertions: Vec<Check>,
}

impl Default for Checks {
    fn default() -> Self {
        Self {
            state_counts: true,
            assertions: Vec::new(),
            calls: Vec::new(),
            nl_assertions: Vec::new(),
        }
    }
}

/// Whether `call` (name and arguments) satisfies `required`: the same tool,
/// and equal values for the compared arguments, with Python's equality (an
/// int equals the float of the same value).
pub fn call_matches(required: &crate::bundle::RequiredCall, name: &str, arguments: &Value) -> bool {
    if required.name != name {
        return false;
    }
    // Arguments that are not an object (a call the policy's output did not
    // parse into one) match nothing.
    let Some(called) = arguments.as_object() else {
        return false;
    };
    let empty = serde_json::Map::new();
    let wanted = required.arguments.as_object().unwrap_or(&empty);
    let compared: Vec<&String> = match &required.compare {
        Some(names) => names.iter().collect(),
        None => called.keys().collect(),
    };
    compared
        .into_iter()
        .all(|key| match (called.get(key), wanted.get(key)) {
            (Some(a), Some(b)) => forge_pycompat::py_eq(a, b),
            (None, None) => true,
            _ => false,
        })
}

/// Judges a final state and the agent's messages against the gold, with the
/// task's other `checks` as the episode met them.
pub fn verify(
    rules: &VerifyRules,
    initial: &State,
    gold: &State,
    final_state: &State,
    required_outputs: &[String],
    agent_messages: &[&str],
    checks: Checks,
) -> Verdict {
    let (state_match, changed, records_met) = if rules.is_empty() {
        let changed: BTreeSet<(String, String)> = initial
            .changed_records(gold)
            .union(&initial.changed_records(final_state))
            .cloned()
            .collect();
        let met = changed
            .iter()
            .filter(|(collection, key)| gold.same_record(final_state, collection, key))
            .count();
        (gold.digest() == final_state.digest(), changed, met)
    } else {
        let initial = rules.canonicalise(initial);
        let gold = rules.canonicalise(gold);
        let reached = rules.canonicalise(final_state);
        let changed: BTreeSet<(String, String)> = changed_records(&initial, &gold)
            .union(&changed_records(&initial, &reached))
            .cloned()
            .collect();
        let met = changed
            .iter()
            .filter(|(collection, key)| {
                record(&gold, collection, key) == record(&reached, collection, key)
            })
            .count();
        (
            canonical::to_string(&gold) == canonical::to_string(&reached),
            changed,
            met,
        )
    };

    let said: Vec<String> = agent_messages
        .iter()
        .map(|text| text.to_lowercase().replace(',', ""))
        .collect();
    let outputs: Vec<OutputCheck> = required_outputs
        .iter()
        .map(|output| {
            let needle = output.to_lowercase().replace(',', "");
            let numeric = rules.whole_numbers && needle.parse::<f64>().is_ok();
            OutputCheck {
                output: output.clone(),
                found: said.iter().any(|text| {
                    if numeric {
                        contains_number(text, &needle)
                    } else {
                        text.contains(&needle)
                    }
                }),
            }
        })
        .collect();

    let outputs_met = found(&outputs);
    let Checks {
        state_counts,
        assertions,
        calls,
        nl_assertions,
    } = checks;
    let others = [&assertions, &calls, &nl_assertions];
    let others_total: usize = others.iter().map(|checks| checks.len()).sum();
    let others_met: usize = others.into_iter().map(|checks| met(checks)).sum();
    let (records_total, records_met) = match state_counts {
        true => (changed.len(), records_met),
        false => (0, 0),
    };
    let total = records_total + outputs.len() + others_total;
    let partial_credit = if total == 0 {
        f64::from(u8::from(state_match || !state_counts))
    } else {
        (records_met + outputs_met + others_met) as f64 / total as f64
    };
    let success = (state_match || !state_counts)
        && outputs_met == outputs.len()
        && others_met == others_total;
    Verdict {
        reward: if success { 1.0 } else { 0.0 },
        state_match,
        outputs,
        assertions,
        calls,
        nl_assertions,
        partial_credit,
    }
}

/// Whether `number` occurs in `text` not as part of a longer number
/// (trailing zeros of a fraction are allowed: `12` is found in `12.00`).
fn contains_number(text: &str, number: &str) -> bool {
    let bytes = text.as_bytes();
    let digit = |index: usize| bytes.get(index).is_some_and(u8::is_ascii_digit);
    text.match_indices(number).any(|(start, found)| {
        if start > 0 && (digit(start - 1) || bytes[start - 1] == b'.') {
            return false;
        }
        let mut end = start + found.len();
        if !number.contains('.') && bytes.get(end) == Some(&b'.') && digit(end + 1) {
            end += 1;
        }
        if number.contains('.') || bytes.get(end - 1) == Some(&b'.') {
            while bytes.get(end) == Some(&b'0') {
                end += 1;
            }
        }
        !digit(end)
    })
}

fn record<'a>(state: &'a Value, collection: &str, key: &str) -> Option<&'a Value> {
    state.get(collection)?.get(key)
}

/// (collection, key) of every record that differs between two states.
fn changed_records(a: &Value, b: &Value) -> BTreeSet<(String, String)> {
    let mut changed = BTreeSet::new();
    let collections: BTreeSet<&String> = a
        .as_object()
        .into_iter()
        .chain(b.as_object())
        .flat_map(|map| map.keys())
        .collect();
    for collection in collections {
        let keys: BTreeSet<&String> = [a.get(collection), b.get(collection)]
            .into_iter()
            .flatten()
            .filter_map(Value::as_object)
            .flat_map(|map| map.keys())
            .collect();
        for key in keys {
            if record(a, collection, key) != record(b, collection, key) {
                changed.insert((collection.clone(), key.clone()));
            }
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn state(value: Value) -> State {
        State::from_json(&value).unwrap()
    }

    #[test]
    fn rules_that_name_no_field_are_refused() {
        let rules = |ignore: &[&str], unordered: &[&str]| VerifyRules {
            ignore_fields: ignore.iter().map(|rule| rule.to_string()).collect(),
            unordered_lists: unordered.iter().map(|rule| rule.to_string()).collect(),
            whole_numbers: false,
        };
        assert_eq!(rules(&["orders.note"], &["orders.items"]).check(), Ok(()));
        assert_eq!(
            rules(&[], &["orders"]).check(),
            Err("`unordered_lists` rule `orders` is not `collection.field`".to_owned())
        );
        assert!(rules(&[".note"], &[]).check().is_err());
        assert!(rules(&["orders."], &[]).check().is_err());
        let known = BTreeSet::from(["orders", "users"]);
        assert_eq!(
            rules(&["orders.note"], &["users.tags"]).check_collections(&known),
            Ok(())
        );
        assert_eq!(
            rules(&["orders.note"], &["user.tags"]).check_collections(&known),
            Err(
                "`unordered_lists` rule `user.tags` names collection `user`, which no state of \
                 the environment holds (it holds: orders, users)"
                    .to_owned()
            )
        );
    }

    #[test]
    fn exact_match_with_outputs_scores_one() {
        let initial = state(json!({"orders": {"o1": {"status": "pending"}}}));
        let gold = state(json!({"orders": {"o1": {"status": "cancelled"}}}));
        let verdict = verify(
            &VerifyRules::default(),
            &initial,
            &gold,
            &gold,
            &["1,024.50".into()],
            &["Refunded $1024.50."],
            Checks::default(),
        );
        assert_eq!(verdict.reward, 1.0);
        assert!(verdict.outputs[0].found);
        assert_eq!(verdict.partial_credit, 1.0);
    }

    #[test]
    fn doing_nothing_scores_zero_with_partial_credit() {
        let initial =
            state(json!({"orders": {"o1": {"status": "pending"}, "o2": {"status": "pending"}}}));
        let gold =
            state(json!({"orders": {"o1": {"status": "cancelled"}, "o2": {"status": "pending"}}}));
        let verdict = verify(
            &VerifyRules::default(),
            &initial,
            &gold,
            &initial,
            &["42".into()],
            &["done"],
            Checks::default(),
        );
        assert_eq!(verdict.reward, 0.0);
        assert!(!verdict.state_match);
        assert_eq!(verdict.partial_credit, 0.0);
        let half = state(
            json!({"orders": {"o1": {"status": "cancelled"}, "o2": {"status": "cancelled"}}}),
        );
        let verdict = verify(
            &VerifyRules::default(),
            &initial,
            &gold,
            &half,
            &[],
            &[],
            Checks::default(),
        );
        assert_eq!(verdict.partial_credit, 0.5);
    }

    #[test]
    fn whole_numbers_are_not_found_inside_other_numbers() {
        let state = state(json!({"orders": {}}));
        let found_under = |rules: &VerifyRules, said: &str, output: &str| {
            verify(
                rules,
                &state,
                &state,
                &state,
                &[output.into()],
                &[said],
                Checks::default(),
            )
            .outputs[0]
                .found
        };
        let whole = VerifyRules {
            whole_numbers: true,
            ..VerifyRules::default()
        };
        let found = |said: &str, output: &str| found_under(&whole, said, output);
        assert!(found("You have 2 loans.", "2"));
        assert!(found("It costs $1,024.50.", "1024.5"));
        assert!(!found("Call 555-1234.", "2"));
        assert!(!found("It is 2.5 km.", "2"));
        assert!(!found("Total: 12.", "2"));
        assert!(found("Total: 2.", "2"));
        assert!(found("It is 12.00 dollars.", "12"));
        assert!(
            found_under(&VerifyRules::default(), "Call 555-1234.", "2"),
            "τ-bench's substring rule by default"
        );
    }

    #[test]
    fn rules_ignore_fields_and_list_order() {
        let rules = VerifyRules {
            ignore_fields: vec!["orders.note".into()],
            unordered_lists: vec!["orders.items".into()],
            ..VerifyRules::default()
        };
        let gold = state(json!({"orders": {"o1": {"items": ["a", "b"], "note": "x"}}}));
        let reached = state(json!({"orders": {"o1": {"items": ["b", "a"], "note": "y"}}}));
        assert!(verify(&rules, &gold, &gold, &reached, &[], &[], Checks::default()).state_match);
        assert!(
            !verify(
                &VerifyRules::default(),
                &gold,
                &gold,
                &reached,
                &[],
                &[],
                Checks::default()
            )
            .state_match
        );
    }

    #[test]
    fn assertions_and_required_calls_count_and_the_state_may_not() {
        let initial =
            state(json!({"orders": {"o1": {"status": "pending"}, "o2": {"status": "pending"}}}));
        let gold =
            state(json!({"orders": {"o1": {"status": "cancelled"}, "o2": {"status": "pending"}}}));
        // o1 as the gold has it, o2 changed where the gold did not.
        let reached =
            state(json!({"orders": {"o1": {"status": "cancelled"}, "o2": {"status": "lost"}}}));
        let met = |name: &str, met: bool| Check {
            name: name.into(),
            met,
        };
        let judge = |checks: Checks| {
            verify(
                &VerifyRules::default(),
                &initial,
                &gold,
                &reached,
                &["42".into()],
                &["it is 42"],
                checks,
            )
        };
        // Judged by its assertions alone, the state mismatch does not count,
        // nor do its records in the partial credit.
        let verdict = judge(Checks {
            state_counts: false,
            assertions: vec![met("assert_on", true)],
            ..Checks::default()
        });
        assert!(!verdict.state_match);
        assert_eq!((verdict.reward, verdict.partial_credit), (1.0, 1.0));
        // Counted, it does: one check per changed record (1 of 2 met), per
        // output (met), per assertion (met) and per call (not made).
        let verdict = judge(Checks {
            assertions: vec![met("assert_on", true)],
            calls: vec![met("refund", false)],
            ..Checks::default()
        });
        assert_eq!(verdict.reward, 0.0);
        assert_eq!(verdict.calls, vec![met("refund", false)]);
        assert_eq!(verdict.partial_credit, 3.0 / 5.0);
        // A judged statement that does not hold fails the episode.
        let verdict = judge(Checks {
            state_counts: false,
            nl_assertions: vec![met("the agent apologised", false)],
            ..Checks::default()
        });
        assert_eq!((verdict.reward, verdict.partial_credit), (0.0, 0.5));
    }

    #[test]
    fn required_calls_compare_the_named_or_the_called_arguments() {
        let required = |arguments: Value, compare: Option<Vec<&str>>| crate::bundle::RequiredCall {
            name: "refuel".into(),
            arguments,
            compare: compare.map(|names| names.into_iter().map(String::from).collect()),
        };
        let gold = required(json!({"line": "L1", "gb": 2, "note": "x"}), None);
        // All the call's own arguments are compared, as numbers by value.
        assert!(call_matches(
            &gold,
            "refuel",
            &json!({"line": "L1", "gb": 2.0})
        ));
        assert!(!call_matches(
            &gold,
            "refuel",
            &json!({"line": "L2", "gb": 2})
        ));
        assert!(!call_matches(
            &gold,
            "refuel",
            &json!({"line": "L1", "extra": 1})
        ));
        assert!(!call_matches(&gold, "other", &json!({"line": "L1"})));
        // Only the named ones; none for a name-only check.
        let named = required(json!({"line": "L1", "gb": 2}), Some(vec!["line"]));
        assert!(call_matches(
            &named,
            "refuel",
            &json!({"line": "L1", "gb": 5})
        ));
        let name_only = required(json!({"line": "L1"}), Some(vec![]));
        assert!(call_matches(&name_only, "refuel", &json!({})));
    }
}
