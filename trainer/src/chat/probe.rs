//! Telling a chat format by the model's own chat template: the Jinja source
//! a model file carries is rendered, as Hugging Face renders it, on probe
//! chats and compared with Forge's layout of the same chats.

use super::ChatTemplate;
use super::template::{BOS, EOS, beginning, reply_opening, turn};

/// Whether a model's own chat template, `source` (Jinja, rendered as
/// Hugging Face renders it), lays out a probe chat as `template` does, with
/// a system prompt or, as some formats have none, without — up to white
/// space, whose place template revisions vary and Forge's layout fixes, and
/// the beginning of text, which tokenizers often add themselves. A
/// template that does not render is not alike.
pub(super) fn renders_like(source: &str, template: ChatTemplate) -> bool {
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
    // A file's template is input: one that would loop on is cut short.
    env.set_fuel(Some(100_000));
    env.add_function(
        "raise_exception",
        |message: String| -> Result<String, Error> {
            Err(Error::new(ErrorKind::InvalidOperation, message))
        },
    );
    let comparable = |text: &str| {
        let text: String = text.chars().filter(|ch| !ch.is_whitespace()).collect();
        text.strip_prefix(BOS).map_or(text.clone(), str::to_owned)
    };
    let chat = [
        ("system", "S"),
        ("user", "U"),
        ("assistant", "A"),
        ("user", "V"),
    ];
    [&chat[..], &chat[1..]].into_iter().any(|chat| {
        let messages: Vec<_> = chat
            .iter()
            .map(|&(role, content)| context! { role, content })
            .collect();
        let rendered = env.render_str(
            source,
            context! { messages, add_generation_prompt => true, bos_token => BOS, eos_token => EOS },
        );
        let mut expected = beginning();
        for &(role, content) in chat {
            expected.push(turn(role, content));
        }
        expected.push(reply_opening());
        rendered.is_ok_and(|rendered| comparable(&rendered) == comparable(&expected.to_text(template)))
    })
}
