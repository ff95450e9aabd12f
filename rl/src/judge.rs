//! MEU masking: did the simulated user give incorrect or missing information?
//!
//! The default judge is deterministic. A task's user knows facts
//! (`user_facts`); those its instruction states are facts the user is meant
//! to tell the agent. If some user message states one of them differently —
//! or none states it at all — the user, not the agent, may have spoiled the
//! episode, and the rollout is masked out of advantages and loss.

use forge_runtime::Task;
use forge_runtime::trajectory::{ChatMessage, Role};

/// The first stated fact that no user message states: `Some(fact)` means
/// the user gave wrong or missing information. Case and runs of white
/// space do not count: a model user who writes "ava chen" or breaks a
/// line inside an address has stated the fact.
pub fn misinformation(task: &Task, messages: &[ChatMessage]) -> Option<String> {
    let said: Vec<String> = messages
        .iter()
        .filter(|message| message.role == Role::User)
        .filter_map(|message| message.content.as_deref())
        .map(normalised)
        .collect();
    task.stated_facts()
        .into_iter()
        .find(|fact| !said.iter().any(|text| states(text, &normalised(fact))))
}

/// `text` in lower case, each run of white space one space.
fn normalised(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// Whether `text` holds `fact` as a whole: not as part of a longer number
/// or word, so that a user who says lamp 87 has not stated lamp 7 (but one
/// who says lamp7 has).
fn states(text: &str, fact: &str) -> bool {
    let joins = |neighbour: Option<char>, edge: Option<char>| {
        neighbour.zip(edge).is_some_and(|(neighbour, edge)| {
            (neighbour.is_numeric() && edge.is_numeric())
                || (neighbour.is_alphabetic() && edge.is_alphabetic())
        })
    };
    text.match_indices(fact).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + fact.len()..].chars().next();
        !joins(before, fact.chars().next()) && !joins(after, fact.chars().next_back())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn task() -> Task {
        serde_json::from_value(json!({
            "id": "t",
            "instruction": "You are Ava Chen. Your email is ava@example.com. You want to return \"Dune\".",
            "user_facts": {"name": "Ava Chen", "email": "ava@example.com", "book.title": "Dune", "phone": "555-0000"}
        }))
        .unwrap()
    }

    #[test]
    fn a_user_who_states_every_fact_is_not_flagged() {
        let messages = [
            ChatMessage::user("I'm Ava Chen, ava@example.com, returning Dune."),
            ChatMessage::assistant("ok"),
        ];
        assert_eq!(
            task().stated_facts(),
            ["Ava Chen", "ava@example.com", "Dune"]
        );
        assert_eq!(misinformation(&task(), &messages), None);
    }

    #[test]
    fn a_wrong_or_withheld_fact_is_flagged() {
        let wrong = [ChatMessage::user(
            "I'm Ava Chen, avb@example.com, returning Dune.",
        )];
        assert_eq!(
            misinformation(&task(), &wrong).as_deref(),
            Some("ava@example.com")
        );
        let withheld = [
            ChatMessage::user("I'm Ava Chen and want to return Dune."),
            ChatMessage::user("I forgot my email."),
        ];
        assert_eq!(
            misinformation(&task(), &withheld).as_deref(),
            Some("ava@example.com")
        );
        // A fact inside a longer number or word is not stated.
        let within = [ChatMessage::user(
            "I'm Ava Chen, ava@example.com.au, returning Dunes.",
        )];
        assert_eq!(misinformation(&task(), &within).as_deref(), Some("Dune"));
        let lamp = |said: &str| {
            let task: Task = serde_json::from_value(json!({
                "id": "lamp", "instruction": "Turn on lamp 7.", "user_facts": {"lamp": "7"}
            }))
            .unwrap();
            misinformation(&task, &[ChatMessage::user(said)])
        };
        assert_eq!(lamp("turn on lamp 87").as_deref(), Some("7"));
        assert_eq!(lamp("turn on lamp 7.").as_deref(), None);
        assert_eq!(lamp("lamp7 please").as_deref(), None);
        // Case and white space aside, the words must be the same.
        let loosely = [ChatMessage::user(
            "i'm AVA  CHEN,\nava@Example.com; returning dune",
        )];
        assert_eq!(misinformation(&task(), &loosely), None);
        // Facts the instruction does not state (the phone) are not required.
        assert!(!task().stated_facts().contains(&"555-0000".to_owned()));
    }
}
