//! The instruction as an unreliable simulated user remembers it: the
//! scripted user states it, a model user is briefed with it.

use crate::bundle::Task;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// `task`'s instruction as a user of that `instability` remembers it in the
/// episode seeded by `seed` (`unstable_instruction` over the facts the
/// instruction states, those the masking judge checks).
pub fn remembered_instruction(task: &Task, instability: f64, seed: u64) -> String {
    unstable_instruction(&task.instruction, &task.stated_facts(), instability, seed)
}

/// The ChaCha stream of the user's errors (any but 0, the default stream).
const USER_STREAM: u64 = 0x75_73_65_72; // "user"

/// `instruction` as an unreliable user remembers it: with probability
/// `instability` one of `facts` changed (a digit or letter) or replaced by
/// "(something I don't remember)". Seeded. A user played by a model is given
/// this instruction, so that it misstates or withholds the fact the same way.
fn unstable_instruction(
    instruction: &str,
    facts: &[String],
    instability: f64,
    seed: u64,
) -> String {
    // The agent's sampling and the random policy draw from the episode's
    // seed too: on a stream of its own, whether the user errs is independent
    // of what the agent says (on theirs, masking would drop the episodes of
    // some first tokens and bias what is learned from the rest).
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(USER_STREAM);
    let mut instruction = instruction.to_owned();
    if !facts.is_empty() && rng.random_bool(instability.clamp(0.0, 1.0)) {
        let fact = &facts[rng.random_range(0..facts.len())];
        let replacement = if rng.random_bool(0.5) {
            corrupt(fact, &mut rng)
        } else {
            "(something I don't remember)".to_owned()
        };
        instruction = instruction.replacen(fact.as_str(), &replacement, 1);
    }
    instruction
}

/// `fact` with one character changed: a digit to another digit, a letter to
/// another letter; a fact without either gets a character appended.
fn corrupt(fact: &str, rng: &mut ChaCha8Rng) -> String {
    let mut chars: Vec<char> = fact.chars().collect();
    let candidates: Vec<usize> = chars
        .iter()
        .enumerate()
        .filter(|(_, ch)| ch.is_ascii_alphanumeric())
        .map(|(index, _)| index)
        .collect();
    match candidates.get(rng.random_range(0..candidates.len().max(1))) {
        Some(&index) => {
            let ch = chars[index];
            chars[index] = if ch.is_ascii_digit() {
                char::from(b'0' + (ch as u8 - b'0' + 1 + rng.random_range(0..9u8)) % 10)
            } else {
                let base = if ch.is_ascii_uppercase() { b'A' } else { b'a' };
                char::from(
                    base + (ch.to_ascii_lowercase() as u8 - b'a' + 1 + rng.random_range(0..25u8))
                        % 26,
                )
            };
            chars.into_iter().collect()
        }
        None => format!("{fact}x"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instability_changes_or_withholds_one_fact_reproducibly() {
        let instruction = "You are Ava Chen. Your email is ava@example.com.";
        let facts = ["Ava Chen".to_owned(), "ava@example.com".to_owned()];
        let task: Task = serde_json::from_value(serde_json::json!({
            "id": "t",
            "instruction": instruction,
            "user_facts": {"name": "Ava Chen", "email": "ava@example.com"}
        }))
        .unwrap();
        assert_eq!(task.stated_facts(), facts);
        let said = |instability: f64, seed: u64| remembered_instruction(&task, instability, seed);
        assert_eq!(said(0.0, 1), instruction);
        assert_eq!(said(1.0, 7), said(1.0, 7), "seeded");
        let spoiled = (0..20)
            .map(|seed| said(1.0, seed))
            .filter(|text| facts.iter().any(|fact| !text.contains(fact.as_str())))
            .count();
        assert_eq!(spoiled, 20, "instability 1 always spoils a fact");
        let sometimes = (0..200)
            .filter(|seed| said(0.3, *seed) != instruction)
            .count();
        assert!(
            (30..90).contains(&sometimes),
            "about 30% of 200: {sometimes}"
        );
        // Independent of the first draw an agent sampling from the same seed
        // makes.
        let agent_unlikely: Vec<u64> = (0..400)
            .filter(|&seed| ChaCha8Rng::seed_from_u64(seed).random_bool(0.3))
            .collect();
        let spoiled_then = agent_unlikely
            .iter()
            .filter(|&&seed| said(0.3, seed) != instruction)
            .count();
        assert!(
            (15..60).contains(&spoiled_then),
            "about 30% of {}: {spoiled_then}",
            agent_unlikely.len()
        );
    }
}
