//! Telling a chat format by the model's own chat template: the Jinja source
//! a model file carries is rendered, as Hugging Face renders it, on probe
//! chats and compared with Forge's layout of the same chats.

use super::ChatTemplate;
use super::template::{beginning, reply_opening, turn};

/// The probe chat; the same without its system prompt is the other.
const CHAT: [(&str, &str); 4] = [
    ("system", "S"),
    ("user", "U"),
    ("assistant", "A"),
    ("user", "V"),
];

/// A model's own chat template rendered on the probe chats: with a system
/// prompt (none where the template refuses one) and without.
pub(super) struct Probes {
    with_system: Option<String>,
    without_system: Option<String>,
    /// The beginning of text, which tokenizers often add themselves.
    bos: String,
}

impl Probes {
    /// Renders `source` (Jinja) as Hugging Face does: blocks trimmed,
    /// Python's string methods, `raise_exception`, the model's `bos` and
    /// `eos` tokens. A template is input: one that would run on is cut
    /// short by a fuel limit.
    pub(super) fn render(source: &str, bos: &str, eos: &str) -> Self {
        use minijinja::syntax::SyntaxConfig;
        use minijinja::{Environment, Error, ErrorKind, context};
        let mut env = Environment::new();
        let syntax = SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .expect("the default delimiters are valid");
        env.set_syntax(syntax);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.set_fuel(Some(100_000));
        env.add_function(
            "raise_exception",
            |message: String| -> Result<String, Error> {
                Err(Error::new(ErrorKind::InvalidOperation, message))
            },
        );
        let render = |chat: &[(&str, &str)]| {
            let messages: Vec<_> = chat
                .iter()
                .map(|&(role, content)| context! { role, content })
                .collect();
            env.render_str(
                source,
                context! { messages, add_generation_prompt => true, bos_token => bos, eos_token => eos },
            )
            .ok()
        };
        Self {
            with_system: render(&CHAT),
            without_system: render(&CHAT[1..]),
            bos: bos.to_owned(),
        }
    }

    /// Whether the template lays out the probe chats as `template` does —
    /// up to white space, whose place template revisions vary and Forge's
    /// layout fixes, and the beginning of text.
    pub(super) fn fit(&self, template: ChatTemplate) -> bool {
        let comparable = |text: &str| comparable(text, &self.bos);
        let alike = |rendered: &Option<String>, chat: &[(&str, &str)]| {
            rendered
                .as_deref()
                .is_some_and(|rendered| comparable(rendered) == comparable(&layout(chat, template)))
        };
        match template {
            // Mistral's templates refuse a system prompt or, from v0.3, put
            // it in the last instruction; Forge puts it in the first, which
            // each later prompt then extends.
            ChatTemplate::Mistral { .. } => {
                let moved = [("user", "U"), ("assistant", "A"), ("user", "S\n\nV")];
                alike(&self.without_system, &CHAT[1..])
                    && (self.with_system.is_none()
                        || alike(&self.with_system, &CHAT)
                        || alike(&self.with_system, &moved))
            }
            _ => alike(&self.with_system, &CHAT),
        }
    }
}

/// `chat` as `template` lays it out, ready for the assistant's reply.
fn layout(chat: &[(&str, &str)], template: ChatTemplate) -> String {
    let mut text = beginning();
    for &(role, content) in chat {
        text.push(turn(role, content));
    }
    text.push(reply_opening());
    text.to_text(template)
}

/// `text` without white space and a leading `bos`.
fn comparable(text: &str, bos: &str) -> String {
    let text: String = text.chars().filter(|ch| !ch.is_whitespace()).collect();
    match text.strip_prefix(bos) {
        Some(rest) => rest.to_owned(),
        None => text,
    }
}
