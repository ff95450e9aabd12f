//! Models as judges: of a task's natural-language assertions on an
//! episode's transcript (τ²-bench's NL_ASSERTION check), and of whether the
//! simulated user gave the agent wrong or missing information (the masking
//! judge of training, where the rule-based one cannot read paraphrase).

use crate::{ChatClient, Message, extract_json};
use anyhow::{Context, Result, bail};
use forge_runtime::bundle::Task;
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
        let messages = vec![Message::system(INSTRUCTIONS), Message::user(prompt)];
        ask_until_read(self.client, messages, |reply| {
            verdicts(reply, assertions.len())
        })
        .context("asking the judge model")
    }
}

/// Answers a judge may give before its reply is taken as unreadable.
const JUDGE_ATTEMPTS: usize = 3;

/// Asks `messages` of the model and reads its reply with `read` (whose
/// error says what is wrong with it, without quoting it); a reply that
/// does not read (prose, a result missing) is answered with what is
/// wrong with it and asked again, up to [`JUDGE_ATTEMPTS`] answers in all:
/// one slip of a judge's format would otherwise stop a whole evaluation.
fn ask_until_read<T>(
    client: &ChatClient,
    mut messages: Vec<Message>,
    read: impl Fn(&str) -> Result<T>,
) -> Result<T> {
    for attempt in 1.. {
        let reply = client.complete(&messages)?;
        match read(&reply) {
            Ok(read) => return Ok(read),
            Err(err) if attempt == JUDGE_ATTEMPTS => {
                bail!("{JUDGE_ATTEMPTS} answers, none readable: {err:#}; the last: {reply}");
            }
            Err(err) => {
                messages.push(Message::assistant(reply));
                messages.push(Message::user(format!(
                    "That answer could not be read: {err:#}. Reply again with the JSON object \
                     alone, as asked."
                )));
            }
        }
    }
    unreachable!("the loop returns by its last attempt")
}

const USER_INSTRUCTIONS: &str = "You check the simulated customer of a conversation with a \
customer-service agent, recorded while training the agent. The customer was given a situation \
and the facts below. Decide whether the customer was unreliable: it stated one of these facts \
wrongly, or never gave a fact the agent needed for the request. The agent's mistakes do not \
count.\n\n\
Answer with a JSON object and nothing else:\n\
{\"reasoning\": \"<one or two sentences>\", \"unreliable\": true or false}";

/// Asks a model whether the user of `transcript` misstated or withheld a
/// fact of `task` (the facts its instruction states, [`Task::stated_facts`]):
/// the reason when it did. A task that states no facts needs no question.
pub fn user_misinformation(
    client: &ChatClient,
    task: &Task,
    transcript: &[ChatMessage],
) -> Result<Option<String>> {
    let facts = task.stated_facts();
    if facts.is_empty() {
        return Ok(None);
    }
    let conversation: Vec<String> = transcript.iter().filter_map(line).collect();
    let facts: Vec<String> = facts.iter().map(|fact| format!("- {fact}")).collect();
    let prompt = format!(
        "The customer's situation:\n{}\n\nThe facts it was given:\n{}\n\nConversation:\n{}",
        task.instruction,
        facts.join("\n"),
        conversation.join("\n")
    );
    let messages = vec![Message::system(USER_INSTRUCTIONS), Message::user(prompt)];
    ask_until_read(client, messages, user_verdict).context("asking the masking judge model")
}

/// The reason of an `unreliable` verdict, `None` for a reliable user.
fn user_verdict(reply: &str) -> Result<Option<String>> {
    let Some(answer) = extract_json(reply) else {
        bail!("the masking judge's reply is not JSON");
    };
    let unreliable = answer
        .get("unreliable")
        .and_then(boolean)
        .context("the masking judge's reply has no boolean `unreliable`")?;
    Ok(unreliable.then(|| {
        answer
            .get("reasoning")
            .and_then(Value::as_str)
            .unwrap_or("the judge model found the user unreliable")
            .to_owned()
    }))
}

/// A verdict: `true` or `false`, or either quoted (as models write them).
fn boolean(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(verdict) => Some(*verdict),
        Value::String(text) if text.eq_ignore_ascii_case("true") => Some(true),
        Value::String(text) if text.eq_ignore_ascii_case("false") => Some(false),
        _ => None,
    }
}

/// One message of the transcript as the judge reads it: what the speaker
/// said, or its calls, after any remark it wrote beside them (which the
/// other side did not see).
fn line(message: &ChatMessage) -> Option<String> {
    let speaker = match message.role {
        Role::Assistant => "assistant",
        Role::User => "user",
        Role::Tool => "tool",
        Role::System => return None,
    };
    let calls = message.tool_calls.as_ref().map(|calls| {
        let calls: Vec<String> = calls
            .iter()
            .map(|call| format!("{}({})", call.function.name, call.function.arguments))
            .collect();
        format!("{speaker}: [calls {}]", calls.join(", "))
    });
    match (&message.content, calls) {
        (Some(remark), Some(calls)) => Some(format!(
            "{speaker} (to itself, unseen by the other side): {remark}\n{calls}"
        )),
        (Some(content), None) => Some(format!("{speaker}: {content}")),
        (None, calls) => calls,
    }
}

/// The judge's `metExpectation`s, one per assertion.
fn verdicts(reply: &str, expected: usize) -> Result<Vec<bool>> {
    let Some(answer) = extract_json(reply) else {
        bail!("the judge's reply is not JSON");
    };
    let results = answer
        .get("results")
        .and_then(Value::as_array)
        .context("the judge's reply has no `results` list")?;
    if results.len() != expected {
        bail!(
            "the judge graded {} outcomes, not the {expected} it was given",
            results.len()
        );
    }
    results
        .iter()
        .enumerate()
        .map(|(index, result)| {
            result
                .get("metExpectation")
                .and_then(boolean)
                .with_context(|| {
                    format!("the judge's result {index} has no boolean `metExpectation`")
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_read_with_the_remark_beside_it_as_unseen() {
        use forge_runtime::trajectory::{ChatFunction, ChatToolCall};
        let call = ChatMessage::assistant_call(ChatToolCall {
            id: "call_0".into(),
            kind: "function".into(),
            function: ChatFunction {
                name: "get_order".into(),
                arguments: "{\"id\":1}".into(),
            },
        });
        assert_eq!(
            line(&call).as_deref(),
            Some("assistant: [calls get_order({\"id\":1})]")
        );
        let remarked = ChatMessage {
            content: Some("Looking it up.".into()),
            ..call
        };
        assert_eq!(
            line(&remarked).as_deref(),
            Some(
                "assistant (to itself, unseen by the other side): Looking it up.\n\
                 assistant: [calls get_order({\"id\":1})]"
            )
        );
    }

    #[test]
    fn a_user_verdict_is_read_and_a_malformed_one_named() {
        let flagged =
            user_verdict("```json\n{\"reasoning\": \"gave 555-0001\", \"unreliable\": true}\n```");
        assert_eq!(flagged.unwrap().as_deref(), Some("gave 555-0001"));
        assert_eq!(user_verdict("{\"unreliable\": false}").unwrap(), None);
        let error = user_verdict("{\"unreliable\": \"no\"}")
            .unwrap_err()
            .to_string();
        assert!(error.contains("boolean `unreliable`"), "{error}");
        let error = user_verdict("The user was fine.").unwrap_err().to_string();
        assert!(error.contains("not JSON"), "{error}");
    }

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
        // A verdict written as a string is read.
        let quoted = "{\"results\": [{\"metExpectation\": \"True\"}]}";
        assert_eq!(verdicts(quoted, 1).unwrap(), vec![true]);
    }
}
