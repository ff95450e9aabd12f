//! A model judging a task's natural-language assertions on an episode's
//! transcript (τ²-bench's NL_ASSERTION check).

use crate::{ChatClient, Message, extract_json};
use anyhow::{Context, Result, bail};
use forge_runtime::episode::Judge;
use forge_runtime::trajectory::{ChatMessage, Role};
use serde_json::Value;

/// Asks a model whether each assertion holds of the dialogue. The model sees
/// the agent's and the user's messages (tool traffic as the calls made) and
/// answers, per assertion in order, whether the agent met it — the form the
/// reference judge asks for (`{"results": [{"expectedOutcome", "reasoning",
/// "metExpectation"}]}`).
pub struct ModelJudge<'a> {
    client: &'a ChatClient,
}

const INSTRUCTIONS: &str = "You grade a conversation between a customer-service agent and a \
customer, recorded while testing the agent. You are given the conversation and a list of \
expected outcomes. Decide for each expected outcome, independently, whether the agent met it.\n\n\
Answer with a JSON object and nothing else:\n\
{\"results\": [{\"expectedOutcome\": \"<the outcome, repeated>\", \"reasoning\": \"<one or two \
sentences>\", \"metExpectation\": true or false}]}\n\
with one result per expected outcome, in the order given.";

impl<'a> ModelJudge<'a> {
    pub fn new(client: &'a ChatClient) -> Self {
        Self { client }
    }
}

impl Judge for ModelJudge<'_> {
    fn judge(&mut self, assertions: &[String], transcript: &[ChatMessage]) -> Result<Vec<bool>> {
        let conversation: Vec<String> = transcript.iter().filter_map(line).collect();
        let outcomes: Vec<String> = assertions
            .iter()
            .enumerate()
            .map(|(index, assertion)| format!("{}. {assertion}", index + 1))
            .collect();
        let prompt = format!(
            "Conversation:\n{}\n\nExpected outcomes:\n{}",
            conversation.join("\n"),
            outcomes.join("\n")
        );
        let reply = self
            .client
            .complete(&[Message::system(INSTRUCTIONS), Message::user(prompt)])
            .context("asking the judge model")?;
        verdicts(&reply, assertions.len())
    }
}

/// One message of the transcript as the judge reads it.
fn line(message: &ChatMessage) -> Option<String> {
    let speaker = match message.role {
        Role::Assistant => "assistant",
        Role::User => "user",
        Role::Tool => "tool",
        Role::System => return None,
    };
    match (&message.content, &message.tool_calls) {
        (Some(content), _) => Some(format!("{speaker}: {content}")),
        (None, Some(calls)) => Some(format!(
            "{speaker}: [calls {}]",
            calls
                .iter()
                .map(|call| format!("{}({})", call.function.name, call.function.arguments))
                .collect::<Vec<_>>()
                .join(", ")
        )),
        (None, None) => None,
    }
}

/// The judge's `metExpectation`s, one per assertion.
fn verdicts(reply: &str, expected: usize) -> Result<Vec<bool>> {
    let Some(answer) = extract_json(reply) else {
        bail!("the judge's reply is not JSON: {reply}");
    };
    let results = answer
        .get("results")
        .and_then(Value::as_array)
        .with_context(|| format!("the judge's reply has no `results` list: {reply}"))?;
    if results.len() != expected {
        bail!(
            "the judge graded {} outcomes, not the {expected} it was given: {reply}",
            results.len()
        );
    }
    results
        .iter()
        .enumerate()
        .map(|(index, result)| {
            result
                .get("metExpectation")
                .and_then(Value::as_bool)
                .with_context(|| {
                    format!("the judge's result {index} has no boolean `metExpectation`: {reply}")
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_are_read_in_order_and_malformed_replies_named() {
        let reply = "```json\n{\"results\": [{\"expectedOutcome\": \"a\", \"metExpectation\": true}, \
                     {\"expectedOutcome\": \"b\", \"reasoning\": \"no\", \"metExpectation\": false}]}\n```";
        assert_eq!(verdicts(reply, 2).unwrap(), vec![true, false]);
        let error = verdicts(reply, 3).unwrap_err().to_string();
        assert!(error.contains("graded 2 outcomes, not the 3"), "{error}");
        let error = verdicts("I think so", 1).unwrap_err().to_string();
        assert!(error.contains("not JSON"), "{error}");
        let error = verdicts("{\"results\": [{\"metExpectation\": \"yes\"}]}", 1)
            .unwrap_err()
            .to_string();
        assert!(error.contains("result 0"), "{error}");
    }
}
