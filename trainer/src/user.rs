//! A local model as the simulated user: briefed like every model user
//! (`forge_runtime::policy::user_brief`), it sees the dialogue from the
//! user's side in its own chat template, calls the user's own tools (where
//! the environment gives the user some) in the agent's call format, and
//! ends the dialogue as [`ends_dialogue`] says. Its turns come from a
//! [`Generator`], so that the rollout engine decodes the users of all live
//! episodes as one batch.

use crate::chat::{
    ChatText, Generator, ToolListing, after_thinking, assistant_text, beginning, parse_reply,
    reply_opening, turn, with_tools,
};
use crate::sampling::Sampling;
use forge_model::tokenizer::ModelTokenizer;
use forge_runtime::bundle::{Actor, ToolCall};
use forge_runtime::episode::{Action, User, UserTurn};
use forge_runtime::policy::{AGENT_GREETING, ends_dialogue, user_brief};
use forge_runtime::schema::ToolSpec;
use forge_runtime::trajectory::{ChatMessage, Role, UserRef, user_view};

pub struct ModelUser<'a> {
    generator: Box<dyn Generator + 'a>,
    tokenizer: &'a ModelTokenizer,
    /// The model, as records name it (`model:NAME`).
    name: &'a str,
    instruction: String,
    /// The environment's brief for a model playing its users.
    guidelines: Option<String>,
    sampling: Sampling,
    turns: u64,
}

impl<'a> ModelUser<'a> {
    /// The user whose situation and goal are `instruction`, played by the
    /// model records name `name`; each of its turns samples with
    /// `sampling`, the seed advanced per turn.
    pub fn new(
        generator: Box<dyn Generator + 'a>,
        tokenizer: &'a ModelTokenizer,
        name: &'a str,
        instruction: &str,
        sampling: Sampling,
    ) -> Self {
        Self {
            generator,
            tokenizer,
            name,
            instruction: instruction.to_owned(),
            guidelines: None,
            sampling,
            turns: 0,
        }
    }

    /// The same user briefed by `guidelines` (the environment's own, such as
    /// τ²-bench's user-simulator guidelines), as a remote model user is.
    pub fn with_guidelines(self, guidelines: Option<&str>) -> Self {
        Self {
            guidelines: guidelines.map(str::to_owned),
            ..self
        }
    }

    /// The model's next turn as it wrote it (special tokens dropped: the
    /// agent's prompt would read them as its own control tokens).
    fn reply(&mut self, transcript: &[ChatMessage], tools: &[ToolSpec]) -> anyhow::Result<String> {
        let brief = with_tools(
            &user_brief(
                &self.instruction,
                !tools.is_empty(),
                self.guidelines.as_deref(),
            ),
            ToolListing::Schemas,
            tools,
        );
        let prompt = render(&brief, transcript).encode(self.tokenizer)?;
        let sampling = Sampling {
            seed: self.sampling.seed.wrapping_add(self.turns),
            ..self.sampling.clone()
        };
        self.turns += 1;
        let generation = self.generator.generate(&prompt, &sampling)?;
        Ok(self.tokenizer.decode_text(&generation.tokens)?)
    }
}

impl User for ModelUser<'_> {
    fn open(&mut self, tools: &[ToolSpec]) -> anyhow::Result<String> {
        let text = self.reply(&[], tools)?;
        // What a thinking model reasoned is not said.
        Ok(after_thinking(&text).trim().to_owned())
    }

    fn stops_at_opening(&self, opening: &str) -> bool {
        ends_dialogue(opening)
    }

    fn respond(
        &mut self,
        transcript: &[ChatMessage],
        tools: &[ToolSpec],
    ) -> anyhow::Result<UserTurn> {
        let text = self.reply(transcript, tools)?;
        if let (false, Action::Call { call, .. }) = (tools.is_empty(), parse_reply(&text)) {
            return Ok(UserTurn::Call(ToolCall {
                actor: Actor::User,
                ..call
            }));
        }
        let text = after_thinking(&text).trim();
        Ok(match ends_dialogue(text) {
            true => UserTurn::Stop,
            false => UserTurn::Say(text.to_owned()),
        })
    }

    fn played_by(&self) -> Option<UserRef> {
        Some(UserRef::Model {
            name: self.name.to_owned(),
        })
    }
}

/// The prompt of the user's next turn: its brief as the system turn, the
/// agent's greeting and messages as `user` turns, its own messages and
/// calls as `assistant` turns and their results as `tool` turns; the
/// agent's tool traffic is hidden from it. The greeting stays, so each
/// prompt extends the last.
fn render(brief: &str, transcript: &[ChatMessage]) -> ChatText {
    let mut out = beginning();
    out.push(turn("system", brief));
    out.push(turn("user", AGENT_GREETING));
    for message in user_view(transcript) {
        let content = message.content.as_deref().unwrap_or_default();
        match message.role {
            Role::User => out.push(turn("user", content)),
            Role::Assistant => out.push(turn("assistant", &assistant_text(&message))),
            Role::Tool => out.push(turn("tool", content)),
            Role::System => {}
        }
    }
    out.push(reply_opening());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::completion;
    use crate::sampling::Generation;
    use forge_runtime::policy::USER_STOP;

    type Prompts = std::rc::Rc<std::cell::RefCell<Vec<Vec<u32>>>>;

    /// Answers every turn with `reply`, recording the prompts.
    struct Canned {
        reply: Vec<u32>,
        prompts: Prompts,
    }

    impl Generator for Canned {
        fn generate(&mut self, prompt: &[u32], _: &Sampling) -> anyhow::Result<Generation> {
            self.prompts.borrow_mut().push(prompt.to_vec());
            Ok(Generation {
                tokens: self.reply.clone(),
                logprobs: vec![0.0; self.reply.len()],
                stopped: true,
            })
        }
    }

    /// Users whose every turn is a canned reply, the prompts of them all
    /// recorded in order.
    struct Fixture {
        tokenizer: ModelTokenizer,
        prompts: Prompts,
    }

    impl Fixture {
        fn new() -> Self {
            Self {
                tokenizer: ModelTokenizer::byte_level(),
                prompts: Prompts::default(),
            }
        }

        /// The user of `instruction` that answers every turn with `reply`.
        fn user(&self, reply: &str, instruction: &str) -> ModelUser<'_> {
            let generator = Canned {
                reply: completion(reply).encode(&self.tokenizer).unwrap(),
                prompts: Prompts::clone(&self.prompts),
            };
            let greedy = Sampling::greedy();
            ModelUser::new(
                Box::new(generator),
                &self.tokenizer,
                "model:canned",
                instruction,
                greedy,
            )
        }

        /// The prompt of the `index`th turn any of its users took, as text.
        fn prompt(&self, index: usize) -> String {
            self.tokenizer
                .decode(&self.prompts.borrow()[index])
                .unwrap()
        }
    }

    #[test]
    fn the_user_sees_the_dialogue_from_its_side_and_stops_on_its_word() {
        let canned = Fixture::new();
        let instruction = "You are Ava; turn lamp 3 on.";
        let mut user = canned.user("Lamp 3 on, please.", instruction);
        assert_eq!(user.open(&[]).unwrap(), "Lamp 3 on, please.");
        let opening = canned.prompt(0);
        assert!(opening.starts_with("<|im_start|>system\nYou are a customer"));
        assert!(opening.contains(instruction));
        assert!(opening.ends_with(&format!(
            "<|im_start|>user\n{AGENT_GREETING}<|im_end|>\n<|im_start|>assistant\n"
        )));
        let transcript = [
            ChatMessage::user("Lamp 3 on, please."),
            ChatMessage::tool("call_0", "{\"ok\": true}"),
            ChatMessage::assistant("Lamp 3 is on."),
        ];
        let mut done = canned.user(&format!("Thanks! {USER_STOP}"), instruction);
        assert_eq!(done.respond(&transcript, &[]).unwrap(), UserTurn::Stop);
        let reply = canned.prompt(1);
        assert!(
            reply.ends_with(
                "<|im_start|>assistant\nLamp 3 on, please.<|im_end|>\n\
                 <|im_start|>user\nLamp 3 is on.<|im_end|>\n<|im_start|>assistant\n"
            ),
            "{reply}"
        );
        assert!(!reply.contains("\"ok\""), "tool traffic is hidden: {reply}");
        assert!(
            canned.prompts.borrow()[1].starts_with(&canned.prompts.borrow()[0]),
            "each prompt extends the last, the greeting kept"
        );
        let mut thinking = canned.user(
            "<think>I am Ava.</think>\n\nLamp 3 on, please.",
            instruction,
        );
        assert_eq!(
            thinking.open(&[]).unwrap(),
            "Lamp 3 on, please.",
            "a thinking model's reasoning is not said"
        );
    }

    #[test]
    fn the_environments_guidelines_brief_the_user_and_their_endings_end_the_dialogue() {
        let canned = Fixture::new();
        let guidelines = "# User Simulation Guidelines\nYou are playing the role of a customer.\n";
        let instruction = "You are Ava; your phone has no signal.";
        let mut user = canned
            .user("I need a human. ###TRANSFER###", instruction)
            .with_guidelines(Some(guidelines));
        let transcript = [
            ChatMessage::user("My phone has no signal."),
            ChatMessage::assistant("Please restart it."),
        ];
        assert_eq!(user.respond(&transcript, &[]).unwrap(), UserTurn::Stop);
        let prompt = canned.prompt(0);
        assert!(
            prompt.starts_with(&format!(
                "<|im_start|>system\n{}\n\n<scenario>\n{instruction}\n</scenario><|im_end|>",
                guidelines.trim()
            )),
            "{prompt}"
        );
        assert!(!prompt.contains("You are a customer talking"), "{prompt}");
    }

    #[test]
    fn a_user_with_tools_of_its_own_calls_them_and_reads_their_results() {
        use forge_runtime::trajectory::{ChatFunction, ChatToolCall};
        let canned = Fixture::new();
        let tools = [ToolSpec {
            name: "check_status_bar".into(),
            description: "What the phone's status bar shows.".into(),
            parameters: serde_json::json!({"type": "object", "properties": {}}),
        }];
        let call = "<tool_call>{\"name\": \"check_status_bar\", \"arguments\": {}}</tool_call>";
        let chat_call = |id: &str, name: &str| ChatToolCall {
            id: id.into(),
            kind: "function".into(),
            function: ChatFunction {
                name: name.into(),
                arguments: "{}".into(),
            },
        };
        let mut transcript = vec![
            ChatMessage::user("My phone has no signal."),
            ChatMessage::assistant_call(chat_call("call_0", "get_line")),
            ChatMessage::tool("call_0", "line L1 active"),
            ChatMessage::assistant("Please check your status bar."),
        ];
        let mut user = canned.user(call, "Your phone has no signal.");
        assert_eq!(
            user.respond(&transcript, &tools).unwrap(),
            UserTurn::Call(ToolCall {
                actor: Actor::User,
                ..ToolCall::new("check_status_bar", serde_json::json!({}))
            })
        );
        let first = canned.prompt(0);
        assert!(first.contains("You have tools of your own"), "{first}");
        assert!(first.contains("\"name\":\"check_status_bar\""), "{first}");
        transcript.push(ChatMessage::user_call(chat_call(
            "call_1",
            "check_status_bar",
        )));
        transcript.push(ChatMessage::tool("call_1", "Airplane Mode"));
        let mut reader = canned.user("Airplane mode is on.", "Your phone has no signal.");
        assert_eq!(
            reader.respond(&transcript, &tools).unwrap(),
            UserTurn::Say("Airplane mode is on.".into())
        );
        let second = canned.prompt(1);
        assert!(
            second.ends_with(&format!(
                "<|im_start|>user\nPlease check your status bar.<|im_end|>\n\
                 <|im_start|>assistant\n{}<|im_end|>\n\
                 <|im_start|>tool\nAirplane Mode<|im_end|>\n<|im_start|>assistant\n",
                call.replace(": ", ":").replace(", ", ",")
            )),
            "{second}"
        );
        assert!(
            !second.contains("line L1"),
            "the agent's tool traffic is hidden: {second}"
        );
        // Offered no tools, a user's call-like text is said as it is.
        let mut toolless = canned.user(call, "Your phone has no signal.");
        assert_eq!(
            toolless.respond(&transcript, &[]).unwrap(),
            UserTurn::Say(call.into())
        );
    }
}
