//! A local model as the simulated user: briefed like every model user
//! (`forge_runtime::policy::user_brief`), it sees the dialogue from the
//! user's side in its own chat template and ends it by saying
//! [`USER_STOP`]. Its turns come from a [`Generator`], so that the rollout
//! engine decodes the users of all live episodes as one batch.

use crate::chat::{ChatText, Generator, after_thinking, beginning, reply_opening, turn};
use crate::sampling::Sampling;
use forge_model::tokenizer::ModelTokenizer;
use forge_runtime::episode::{User, UserTurn};
use forge_runtime::policy::{AGENT_GREETING, USER_STOP, user_brief};
use forge_runtime::schema::ToolSpec;
use forge_runtime::trajectory::{ChatMessage, Role};

pub struct ModelUser<'a> {
    generator: Box<dyn Generator + 'a>,
    tokenizer: &'a ModelTokenizer,
    brief: String,
    sampling: Sampling,
    turns: u64,
}

impl<'a> ModelUser<'a> {
    /// The user whose situation and goal are `instruction`; each of its
    /// turns samples with `sampling`, the seed advanced per turn.
    pub fn new(
        generator: Box<dyn Generator + 'a>,
        tokenizer: &'a ModelTokenizer,
        instruction: &str,
        sampling: Sampling,
    ) -> Self {
        Self {
            generator,
            tokenizer,
            brief: user_brief(instruction, false),
            sampling,
            turns: 0,
        }
    }

    fn say(&mut self, transcript: &[ChatMessage]) -> anyhow::Result<String> {
        let prompt = render(&self.brief, transcript).encode(self.tokenizer)?;
        let sampling = Sampling {
            seed: self.sampling.seed.wrapping_add(self.turns),
            ..self.sampling.clone()
        };
        self.turns += 1;
        let generation = self.generator.generate(&prompt, &sampling)?;
        // Special tokens are dropped: the agent's prompt would read them as
        // its own control tokens. What a thinking model reasoned is not said.
        let text = self.tokenizer.decode_text(&generation.tokens)?;
        Ok(after_thinking(&text).trim().to_owned())
    }
}

impl User for ModelUser<'_> {
    fn open(&mut self) -> anyhow::Result<String> {
        self.say(&[])
    }

    /// The model is offered no tools: a local model user only talks.
    fn respond(&mut self, transcript: &[ChatMessage], _: &[ToolSpec]) -> anyhow::Result<UserTurn> {
        let text = self.say(transcript)?;
        Ok(match text.contains(USER_STOP) {
            true => UserTurn::Stop,
            false => UserTurn::Say(text),
        })
    }
}

/// The prompt of the user's next message: its brief as the system turn,
/// the agent's greeting and messages as `user` turns and its own as
/// `assistant` turns; the agent's tool traffic is hidden from it. The
/// greeting stays, so each prompt extends the last.
fn render(brief: &str, transcript: &[ChatMessage]) -> ChatText {
    let mut out = beginning();
    out.push(turn("system", brief));
    out.push(turn("user", AGENT_GREETING));
    for message in transcript {
        let Some(content) = message.content.as_deref() else {
            continue;
        };
        match message.role {
            Role::Assistant => out.push(turn("user", content)),
            Role::User => out.push(turn("assistant", content)),
            Role::System | Role::Tool => {}
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

    /// Answers every turn with `reply`, recording the prompts.
    struct Canned {
        reply: Vec<u32>,
        prompts: std::rc::Rc<std::cell::RefCell<Vec<Vec<u32>>>>,
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

    #[test]
    fn the_user_sees_the_dialogue_from_its_side_and_stops_on_its_word() {
        let tokenizer = ModelTokenizer::byte_level();
        let prompts = std::rc::Rc::default();
        let canned = |text: &str| Canned {
            reply: completion(text).encode(&tokenizer).unwrap(),
            prompts: std::rc::Rc::clone(&prompts),
        };
        let instruction = "You are Ava; turn lamp 3 on.";
        let mut user = ModelUser::new(
            Box::new(canned("Lamp 3 on, please.")),
            &tokenizer,
            instruction,
            Sampling::greedy(),
        );
        assert_eq!(user.open().unwrap(), "Lamp 3 on, please.");
        let opening = tokenizer.decode(&prompts.borrow()[0]).unwrap();
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
        let mut done = ModelUser::new(
            Box::new(canned(&format!("Thanks! {USER_STOP}"))),
            &tokenizer,
            instruction,
            Sampling::greedy(),
        );
        assert_eq!(done.respond(&transcript, &[]).unwrap(), UserTurn::Stop);
        let reply = tokenizer.decode(&prompts.borrow()[1]).unwrap();
        assert!(
            reply.ends_with(
                "<|im_start|>assistant\nLamp 3 on, please.<|im_end|>\n\
                 <|im_start|>user\nLamp 3 is on.<|im_end|>\n<|im_start|>assistant\n"
            ),
            "{reply}"
        );
        assert!(!reply.contains("\"ok\""), "tool traffic is hidden: {reply}");
        assert!(
            prompts.borrow()[1].starts_with(&prompts.borrow()[0]),
            "each prompt extends the last, the greeting kept"
        );
        let mut thinking = ModelUser::new(
            Box::new(canned("<think>I am Ava.</think>\n\nLamp 3 on, please.")),
            &tokenizer,
            instruction,
            Sampling::greedy(),
        );
        assert_eq!(
            thinking.open().unwrap(),
            "Lamp 3 on, please.",
            "a thinking model's reasoning is not said"
        );
    }
}
