//! The chat format of the policy: the model family's chat template (see
//! [`ChatTemplate`]: ChatML for SmolLM2, Qwen2.5 and Qwen3, Llama 3's, Zephyr's,
//! Llama 2's, Mistral's) with the tool schemas in the system prompt, and
//! tool calls in Forge's format:
//!
//! ```text
//! <tool_call>{"name": "get_user", "arguments": {"user_id": "u1"}}</tool_call>
//! ```
//!
//! Tool results come back as `tool` turns (or whatever the format has for
//! them). Replies are parsed robustly: a
//! call whose JSON is malformed still becomes a call (with its raw arguments,
//! which the host answers with a validation error the model can learn from),
//! never a crash.

mod probe;
mod template;

/// Tokenizers of the chat formats, for tests across the crate.
#[cfg(test)]
pub(crate) use template::tests::{llama3_tokenizer, zephyr_tokenizer};
pub use template::{ChatTemplate, ChatText, beginning, completion, reply_opening, stop_ids, turn};

use crate::Generation;
use crate::sampling::Sampling;
use forge_model::tokenizer::ModelTokenizer;
use forge_runtime::bundle::ToolCall;
use forge_runtime::episode::{Action, Policy};
use forge_runtime::schema::ToolSpec;
use forge_runtime::trajectory::{ChatMessage, Role};
use serde_json::{Value, json};
use template::{THINK_CLOSE, THINK_OPEN, empty_thought, rest_of_turn};

/// What Llama 3.1 and later write before a call.
const PYTHON_TAG: &str = "<|python_tag|>";
const CALL_OPEN: &str = "<tool_call>";
const CALL_CLOSE: &str = "</tool_call>";

/// How the tools are listed in the system prompt.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolListing {
    /// Each tool's OpenAI-style JSON schema (what instruction-tuned models expect).
    #[default]
    Schemas,
    /// One line per tool, `name(param, …): description`: short prompts for
    /// small models trained from scratch.
    Compact,
    /// No tools, nor the line on how to call one: the system prompt alone,
    /// for a model trained from scratch on one domain, which learns its
    /// tools and the call format from the data. To such a model the listing
    /// is the same text before every task, which only spreads its attention
    /// thinner and lengthens every sequence.
    None,
}

/// Whether a thinking model (Qwen3) reasons in `<think>…</think>` before
/// it replies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Thinking {
    /// As the model does of its own accord.
    #[default]
    On,
    /// Each reply opens with an empty `<think>\n\n</think>\n\n`, as
    /// Qwen3's template writes with `enable_thinking=False`: the model
    /// replies at once. For models whose vocabulary has `<think>`.
    Off,
}

impl std::str::FromStr for Thinking {
    type Err = String;

    /// `on` or `off`, as the config and `--thinking` name them.
    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "on" => Ok(Self::On),
            "off" => Ok(Self::Off),
            other => Err(format!("`{other}`: expected on or off")),
        }
    }
}

impl Thinking {
    /// Refuses `Off` for a model without the tokens to think in.
    pub fn check(self, tokenizer: &ModelTokenizer) -> Result<(), String> {
        let thinks = [THINK_OPEN, THINK_CLOSE]
            .iter()
            .all(|token| tokenizer.token_id(token).is_some());
        match self {
            Self::Off if !thinks => Err(format!(
                "thinking off is for models that think in {THINK_OPEN}…{THINK_CLOSE} (Qwen3); \
                 this model's vocabulary has no such tokens"
            )),
            _ => Ok(()),
        }
    }
}

/// The system side of the prompt: what the agent is told before the
/// dialogue, and whether it thinks before replying.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PromptStyle {
    pub system: String,
    pub tools: ToolListing,
    pub thinking: Thinking,
}

/// How a model was trained to be prompted, saved with its checkpoints
/// (`prompt.json`) so that running it later prompts it the same way.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PromptSettings {
    /// The system prompt; empty means [`PromptStyle::for_service`]'s.
    #[serde(default)]
    pub system: String,
    #[serde(default)]
    pub tools: ToolListing,
    #[serde(default)]
    pub thinking: Thinking,
}

impl PromptSettings {
    /// The prompt for an environment whose service is `description`.
    pub fn style(&self, description: &str) -> PromptStyle {
        let mut style = PromptStyle::for_service(description);
        if !self.system.is_empty() {
            style.system = self.system.clone();
        }
        style.tools = self.tools;
        style.thinking = self.thinking;
        style
    }
}

impl PromptStyle {
    /// The default agent instructions for the service `description`.
    pub fn for_service(description: &str) -> Self {
        Self {
            system: format!(
                "You are the customer-service agent of this service:\n{description}\n\nHelp the \
                 user with their request using the tools. Act only on what the user asks and \
                 confirms; tell them the information they ask for."
            ),
            tools: ToolListing::Schemas,
            thinking: Thinking::On,
        }
    }
}

/// The prompt for the assistant's next turn.
pub fn render(style: &PromptStyle, tools: &[ToolSpec], transcript: &[ChatMessage]) -> ChatText {
    render_replies(style, tools, transcript, &[])
}

/// [`render`], with the transcript's last `replies.len()` assistant
/// messages written as the model wrote them (`replies`, in order), its
/// reasoning in `<think>…</think>` included: earlier turns' reasoning stays
/// in context (where Qwen3's own template drops it), and each prompt goes
/// on from the last prompt and reply as they were.
pub fn render_replies(
    style: &PromptStyle,
    tools: &[ToolSpec],
    transcript: &[ChatMessage],
    replies: &[String],
) -> ChatText {
    let mut out = beginning();
    out.push(turn(
        "system",
        &with_tools(&style.system, style.tools, tools),
    ));
    // Assistant messages before the model's own turns (a task's recorded
    // history) are rendered from what they hold.
    let assistant = |message: &&ChatMessage| message.role == Role::Assistant;
    let before_own = transcript
        .iter()
        .filter(assistant)
        .count()
        .checked_sub(replies.len());
    let mut assistants: usize = 0;
    for message in transcript {
        let (role, content) = match message.role {
            Role::System => ("system", message.content.clone().unwrap_or_default()),
            Role::User => ("user", message.content.clone().unwrap_or_default()),
            Role::Tool => ("tool", message.content.clone().unwrap_or_default()),
            Role::Assistant => {
                let own = before_own
                    .and_then(|before| assistants.checked_sub(before))
                    .and_then(|at| replies.get(at));
                assistants += 1;
                if let Some(reply) = own {
                    // As it was prompted: after the empty reasoning its
                    // prompt ended in, with thinking off.
                    out.push(reply_opening());
                    if style.thinking == Thinking::Off {
                        out.push(empty_thought());
                    }
                    out.push(rest_of_turn(reply));
                    continue;
                }
                ("assistant", assistant_text(message))
            }
        };
        out.push(turn(role, &content));
    }
    out.push(reply_opening());
    if style.thinking == Thinking::Off {
        out.push(empty_thought());
    }
    out
}

/// `system` followed by how to call a tool and `tools`, listed as `listing`
/// says; `system` alone without tools or with [`ToolListing::None`].
pub fn with_tools(system: &str, listing: ToolListing, tools: &[ToolSpec]) -> String {
    let listing: fn(&ToolSpec) -> String = match listing {
        ToolListing::Schemas => |tool| tool.to_openai()["function"].to_string(),
        ToolListing::Compact => compact,
        ToolListing::None => return system.to_owned(),
    };
    if tools.is_empty() {
        return system.to_owned();
    }
    let mut system = format!(
        "{system}\n\nYou can call a tool by replying with exactly one line:\n\
         <tool_call>{{\"name\": <tool name>, \"arguments\": <arguments object>}}</tool_call>\nTools:"
    );
    for tool in tools {
        system.push('\n');
        system.push_str(&listing(tool));
    }
    system
}

/// An assistant message as the model writes it: its text, then its tool
/// calls in Forge's format. A completion is this followed by the end of the
/// turn.
pub fn assistant_text(message: &ChatMessage) -> String {
    let calls = message.tool_calls.iter().flatten().map(|call| {
        let arguments = call.function.parsed_arguments();
        format!(
            "{CALL_OPEN}{}{CALL_CLOSE}",
            json!({"name": call.function.name, "arguments": arguments})
        )
    });
    message
        .content
        .iter()
        .filter(|text| !text.is_empty())
        .cloned()
        .chain(calls)
        .collect::<Vec<_>>()
        .join("\n")
}

/// `name(param, …): description`, required parameters first as the schema lists them.
fn compact(tool: &ToolSpec) -> String {
    let params: Vec<&str> = tool.parameters["properties"]
        .as_object()
        .map(|properties| properties.keys().map(String::as_str).collect())
        .unwrap_or_default();
    format!("{}({}): {}", tool.name, params.join(", "), tool.description)
}

/// What the model's reply asks for: a call in Forge's format (with what it
/// wrote before the call as its remark) or in Llama 3's own, else a message
/// to the user. Reasoning a thinking model writes first is not part of it.
pub fn parse_reply(reply: &str) -> Action {
    let reply = after_thinking(reply).trim();
    let Some(start) = reply.find(CALL_OPEN) else {
        return llama3_call(reply).unwrap_or_else(|| Action::Say(reply.to_owned()));
    };
    let remark = Some(reply[..start].trim_end().to_owned()).filter(|text| !text.is_empty());
    let call = call_in(&reply[start + CALL_OPEN.len()..]);
    Action::Call { call, remark }
}

/// The call `body` writes (what follows [`CALL_OPEN`], up to
/// [`CALL_CLOSE`]); a malformed one is a call whose arguments are its text
/// as written, which the host answers as such.
fn call_in(body: &str) -> ToolCall {
    let body = body
        .find(CALL_CLOSE)
        .map_or(body, |end| &body[..end])
        .trim();
    match serde_json::from_str::<Value>(body) {
        Ok(Value::Object(call)) => {
            let name = call
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let arguments = call
                .get("arguments")
                .cloned()
                .unwrap_or(Value::Object(Default::default()));
            // Arguments sent as a JSON string are unwrapped when they parse.
            let arguments = match arguments {
                Value::String(text) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
                other => other,
            };
            ToolCall::new(name, arguments)
        }
        _ => ToolCall::new(
            quoted_after(body, "\"name\"").unwrap_or_default(),
            Value::String(body.to_owned()),
        ),
    }
}

/// What follows the reasoning in `<think>…</think>` (Qwen3 thinks before
/// every reply unless told not to): a call mentioned while thinking is not
/// made. Reasoning the token limit cut short leaves nothing.
pub(crate) fn after_thinking(reply: &str) -> &str {
    if let Some(end) = reply.rfind(THINK_CLOSE) {
        return &reply[end + THINK_CLOSE.len()..];
    }
    reply
        .find(THINK_OPEN)
        .map_or(reply, |start| &reply[..start])
}

/// A call in the format Llama 3.1 and later write of their own accord,
/// whatever the system prompt says: the whole reply one JSON object
/// `{"name": …, "parameters": {…}}`, perhaps after `<|python_tag|>`.
fn llama3_call(reply: &str) -> Option<Action> {
    let body = reply.strip_prefix(PYTHON_TAG).unwrap_or(reply).trim_start();
    let Ok(Value::Object(call)) = serde_json::from_str::<Value>(body) else {
        return None;
    };
    let name = call.get("name")?.as_str()?;
    let arguments = call.get("parameters").or_else(|| call.get("arguments"))?;
    arguments
        .is_object()
        .then(|| Action::call(ToolCall::new(name, arguments.clone())))
}

/// The string value after `key` in malformed JSON, if one can be read.
fn quoted_after(text: &str, key: &str) -> Option<String> {
    let rest = &text[text.find(key)? + key.len()..];
    let rest = &rest[rest.find('"')? + 1..];
    Some(rest[..rest.find('"')?].to_owned())
}

/// Where a policy's completions come from: the rollout engine's batcher,
/// which decodes many episodes' turns together.
pub trait Generator {
    fn generate(&mut self, prompt: &[u32], sampling: &Sampling) -> anyhow::Result<Generation>;
}

/// The local model as the agent.
pub struct ModelPolicy<'a> {
    generator: Box<dyn Generator + 'a>,
    tokenizer: &'a ModelTokenizer,
    style: PromptStyle,
    sampling: Sampling,
    turns: Vec<Value>,
    /// The text of each reply, as the model wrote it.
    replies: Vec<String>,
}

impl<'a> ModelPolicy<'a> {
    /// The policy whose completions come from `generator`.
    pub fn with_generator(
        generator: Box<dyn Generator + 'a>,
        tokenizer: &'a ModelTokenizer,
        style: PromptStyle,
        sampling: Sampling,
    ) -> Self {
        Self {
            generator,
            tokenizer,
            style,
            sampling,
            turns: Vec::new(),
            replies: Vec::new(),
        }
    }
}

impl Policy for ModelPolicy<'_> {
    fn act(&mut self, transcript: &[ChatMessage], tools: &[ToolSpec]) -> anyhow::Result<Action> {
        let prompt =
            render_replies(&self.style, tools, transcript, &self.replies).encode(self.tokenizer)?;
        let sampling = Sampling {
            seed: self.sampling.seed.wrapping_add(self.turns.len() as u64),
            ..self.sampling.clone()
        };
        let Generation {
            tokens,
            logprobs,
            stopped,
        } = self.generator.generate(&prompt, &sampling)?;
        // A turn that stopped ends in the token that ends it, which is the
        // template's, not the reply's.
        let said = &tokens[..tokens.len() - usize::from(stopped)];
        let text = self.tokenizer.decode(said)?;
        self.turns.push(
            json!({"prompt_ids": prompt, "ids": tokens, "logprobs": logprobs, "stopped": stopped}),
        );
        let action = parse_reply(&text);
        self.replies.push(text);
        Ok(action)
    }

    fn trace(&mut self) -> Option<Value> {
        Some(json!({"turns": std::mem::take(&mut self.turns)}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use forge_runtime::trajectory::{ChatFunction, ChatToolCall};

    #[test]
    fn replies_become_actions_robustly() {
        assert_eq!(
            parse_reply(" Your order is on its way.\n"),
            Action::Say("Your order is on its way.".into())
        );
        let call = parse_reply(
            "<tool_call>{\"name\": \"get_user\", \"arguments\": {\"user_id\": \"u1\"}}</tool_call>",
        );
        assert_eq!(
            call,
            Action::call(ToolCall::new("get_user", json!({"user_id": "u1"})))
        );
        let stringly = parse_reply(
            "<tool_call>{\"name\": \"get_user\", \"arguments\": \"{\\\"user_id\\\": \\\"u1\\\"}\"}",
        );
        assert_eq!(
            stringly, call,
            "a missing close tag and string arguments are tolerated"
        );
        match parse_reply(
            "<tool_call>{\"name\": \"get_user\", \"arguments\": {\"user_id\": </tool_call>",
        ) {
            Action::Call {
                call:
                    ToolCall {
                        name,
                        arguments: Value::String(raw),
                        ..
                    },
                ..
            } => {
                assert_eq!(name, "get_user");
                assert!(raw.contains("user_id"));
            }
            other => panic!("a malformed call stays a call: {other:?}"),
        }
        for native in [
            "{\"name\": \"get_user\", \"parameters\": {\"user_id\": \"u1\"}}",
            "<|python_tag|>{\"name\": \"get_user\", \"parameters\": {\"user_id\": \"u1\"}}",
        ] {
            assert_eq!(parse_reply(native), call, "Llama 3's own format: {native}");
        }
        let thought = "<think>\nThe user wants u1. <tool_call>{\"name\": \"drop\"}</tool_call>?\n</think>\n\n";
        for reply in [
            format!(
                "{thought}<tool_call>{{\"name\": \"get_user\", \"arguments\": {{\"user_id\": \"u1\"}}}}</tool_call>"
            ),
            format!("{thought}{{\"name\": \"get_user\", \"parameters\": {{\"user_id\": \"u1\"}}}}"),
        ] {
            assert_eq!(
                parse_reply(&reply),
                call,
                "only what follows the reasoning: {reply}"
            );
        }
        assert_eq!(
            parse_reply(&format!("{thought}Hello!")),
            Action::Say("Hello!".into())
        );
        // What the model wrote before its call is kept as its remark, and
        // written before the call again.
        let remarked = parse_reply(
            "I will look u1 up.\n<tool_call>{\"name\": \"get_user\", \"arguments\": {\"user_id\": \"u1\"}}</tool_call>",
        );
        let Action::Call { call: made, remark } = &remarked else {
            panic!("a call: {remarked:?}");
        };
        assert_eq!(remark.as_deref(), Some("I will look u1 up."));
        assert_eq!(Action::call(made.clone()), call);
        let message = ChatMessage {
            content: remark.clone(),
            ..ChatMessage::assistant_call(ChatToolCall {
                id: "call_0".into(),
                kind: "function".into(),
                function: ChatFunction {
                    name: made.name.clone(),
                    arguments: made.arguments.to_string(),
                },
            })
        };
        assert_eq!(parse_reply(&assistant_text(&message)), remarked);
        assert_eq!(
            parse_reply("<think>Let me call <tool_call>{\"name\": \"drop\""),
            Action::Say(String::new()),
            "reasoning cut short by the token limit says nothing"
        );
        for said in [
            "{\"name\": \"Ava\"}",
            "{\"name\": \"Ava\", \"parameters\": 3}",
            "{oops",
        ] {
            assert_eq!(parse_reply(said), Action::Say(said.into()), "{said}");
        }
    }

    /// Answers every turn with `reply`, stopped by its last token.
    struct Replies(Vec<u32>);

    impl Generator for Replies {
        fn generate(&mut self, _: &[u32], _: &Sampling) -> anyhow::Result<Generation> {
            Ok(Generation {
                tokens: self.0.clone(),
                logprobs: vec![-0.5; self.0.len()],
                stopped: true,
            })
        }
    }

    #[test]
    fn the_end_of_the_turn_is_not_part_of_what_the_model_says() {
        for tokenizer in [
            ModelTokenizer::byte_level(),
            llama3_tokenizer(),
            zephyr_tokenizer(),
        ] {
            let reply = completion("Lamp 3 is on.").encode(&tokenizer).unwrap();
            let mut policy = ModelPolicy::with_generator(
                Box::new(Replies(reply.clone())),
                &tokenizer,
                PromptStyle::for_service("Lamps."),
                Sampling::greedy(),
            );
            let action = policy.act(&[ChatMessage::user("Lamp 3?")], &[]).unwrap();
            assert_eq!(action, Action::Say("Lamp 3 is on.".into()));
            let trace = policy.trace().unwrap();
            assert_eq!(
                trace["turns"][0]["ids"],
                json!(reply),
                "the recorded ids keep the end, which training learns"
            );
        }
    }

    /// Answers with each of its replies in turn, keeping the prompts.
    struct Prompted {
        replies: Vec<Vec<u32>>,
        prompts: Vec<Vec<u32>>,
    }

    impl Generator for &mut Prompted {
        fn generate(&mut self, prompt: &[u32], _: &Sampling) -> anyhow::Result<Generation> {
            self.prompts.push(prompt.to_vec());
            let tokens = self.replies.remove(0);
            Ok(Generation {
                logprobs: vec![-0.5; tokens.len()],
                tokens,
                stopped: true,
            })
        }
    }

    #[test]
    fn earlier_turns_reasoning_stays_in_context() {
        // Qwen3's: with thinking off, prompts hold an empty reasoning.
        let control = [
            "<|endoftext|>",
            "<|im_start|>",
            "<|im_end|>",
            THINK_OPEN,
            THINK_CLOSE,
        ];
        let tokenizer = ModelTokenizer::byte_level_with(&control, control[1], control[2]);
        let said = |text: &str| completion(text).encode(&tokenizer).unwrap();
        let call = "<tool_call>{\"name\": \"get_lamp\", \"arguments\": {\"lamp\": 3}}</tool_call>";
        for thinking in [Thinking::On, Thinking::Off] {
            // With thinking off, the prompt holds the empty reasoning.
            let thought = match thinking {
                Thinking::On => "<think>\nThe user wants lamp 3; get_lamp tells.\n</think>\n\n",
                Thinking::Off => "",
            };
            let mut generator = Prompted {
                replies: vec![said(&format!("{thought}{call}")), said("Lamp 3 is on.")],
                prompts: Vec::new(),
            };
            let style = PromptStyle {
                thinking,
                ..PromptStyle::for_service("Lamps.")
            };
            let mut policy = ModelPolicy::with_generator(
                Box::new(&mut generator),
                &tokenizer,
                style,
                Sampling::greedy(),
            );
            // A history the task recorded comes first: rendered from its messages.
            let mut transcript = vec![
                ChatMessage::user("Hi"),
                ChatMessage::assistant("Hello!"),
                ChatMessage::user("Is lamp 3 on?"),
            ];
            let Action::Call {
                call: call_made, ..
            } = policy.act(&transcript, &[]).unwrap()
            else {
                panic!("a call");
            };
            transcript.push(ChatMessage::assistant_call(ChatToolCall {
                id: "call_0".into(),
                kind: "function".into(),
                function: ChatFunction {
                    name: call_made.name.clone(),
                    arguments: call_made.arguments.to_string(),
                },
            }));
            transcript.push(ChatMessage::tool("call_0", "{\"on\": true}"));
            policy.act(&transcript, &[]).unwrap();
            drop(policy);
            let second = tokenizer.decode(&generator.prompts[1]).unwrap();
            assert!(second.contains("Hello!"), "{second}");
            // The first turn exactly as the model wrote it, reasoning and
            // all, so the second prompt goes on from the first prompt and
            // reply.
            let first_turn = tokenizer.decode(&generator.prompts[0]).unwrap() + thought + call;
            assert!(second.starts_with(&first_turn), "{thinking:?}: {second}");
        }
    }

    #[test]
    fn the_prompt_is_chatml_with_tools_and_calls_in_forge_format() {
        let tools = [ToolSpec {
            name: "get_user".into(),
            description: "Get a user.".into(),
            parameters: json!({"type": "object"}),
        }];
        let transcript = [
            ChatMessage::user("Hi"),
            ChatMessage::assistant_call(ChatToolCall {
                id: "call_0".into(),
                kind: "function".into(),
                function: ChatFunction {
                    name: "get_user".into(),
                    arguments: "{\"user_id\":\"u1\"}".into(),
                },
            }),
            ChatMessage::tool("call_0", "{\"name\":\"Ava\"}"),
        ];
        let style = PromptStyle {
            system: "Be helpful.".into(),
            tools: ToolListing::Schemas,
            thinking: Thinking::On,
        };
        let prompt = render(&style, &tools, &transcript).to_text(ChatTemplate::ChatMl);
        assert!(prompt.starts_with("<|im_start|>system\nBe helpful."));
        assert!(
            prompt.contains("{\"name\":\"get_user\",\"description\":\"Get a user.\""),
            "{prompt}"
        );
        assert!(prompt.contains("<|im_start|>assistant\n<tool_call>{\"name\":\"get_user\",\"arguments\":{\"user_id\":\"u1\"}}</tool_call><|im_end|>"), "{prompt}");
        assert!(prompt.contains("<|im_start|>tool\n{\"name\":\"Ava\"}<|im_end|>"));
        assert!(prompt.ends_with("<|im_start|>assistant\n"));
        let compact = PromptStyle {
            tools: ToolListing::Compact,
            ..style.clone()
        };
        let prompt = render(&compact, &tools, &transcript).to_text(ChatTemplate::ChatMl);
        assert!(
            prompt.contains("Tools:\nget_user(): Get a user.<|im_end|>"),
            "{prompt}"
        );
        // Unlisted, the tools leave the system prompt as it is written; the
        // dialogue's calls are rendered as before.
        let unlisted = PromptStyle {
            tools: ToolListing::None,
            ..style.clone()
        };
        let prompt = render(&unlisted, &tools, &transcript).to_text(ChatTemplate::ChatMl);
        assert!(
            prompt.starts_with("<|im_start|>system\nBe helpful.<|im_end|>\n"),
            "{prompt}"
        );
        assert!(prompt.contains("<|im_start|>assistant\n<tool_call>{\"name\":\"get_user\""));
        let replying = PromptStyle {
            thinking: Thinking::Off,
            ..compact
        };
        let prompt = render(&replying, &tools, &transcript).to_text(ChatTemplate::ChatMl);
        assert!(
            prompt.ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n"),
            "Qwen3's template without thinking: {prompt}"
        );
        assert!(
            prompt.matches("<think>").count() == 1,
            "earlier replies stay as they were said"
        );
        let err = Thinking::Off
            .check(&ModelTokenizer::byte_level())
            .unwrap_err();
        assert!(err.contains("no such tokens"), "{err}");
        let qwen3 =
            ModelTokenizer::byte_level_with(&[THINK_OPEN, THINK_CLOSE], THINK_OPEN, THINK_CLOSE);
        assert_eq!(Thinking::Off.check(&qwen3), Ok(()));
        assert_eq!(Thinking::On.check(&ModelTokenizer::byte_level()), Ok(()));
    }
}
