//! The LLM path of synthesis: for every stage the method drives with a
//! language model, an OpenAI-compatible endpoint does the work and Forge
//! checks it.
//!
//! - **Structure and tool semantics** — a *plain* doc (the domain and its tools'
//!   names, descriptions and parameters, as any API reference has them) is
//!   given to the model with the doc format and an example; it answers with
//!   the annotated doc (collections, fields, what each tool reads, writes and
//!   requires). The answer is parsed and checked; parse and consistency errors
//!   are fed back for a bounded number of rounds. From the annotated doc the
//!   tools are generated, compiled and validated in the sandbox like any other
//!   doc; validation failures are fed back too (see [`crate::synthesize`]).
//! - **Instructions** — each task's templated instruction is rewritten by the
//!   model into natural language; a rewrite that drops or changes any fact
//!   the user must state (names, emails, titles, new values) is refused and
//!   the template kept.

use crate::doc::{DomainDoc, ToolDoc};
use anyhow::{Context, Result, bail};
use forge_llm::{ChatClient, ChatError, Message, extract_json};
use forge_runtime::bundle::Task;
use forge_runtime::parallel::in_parallel;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;

/// A doc without annotations: what an API reference says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlainDoc {
    pub domain: PlainDomain,
    pub tools: Vec<PlainTool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlainDomain {
    pub name: String,
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlainTool {
    pub name: String,
    pub description: String,
    /// JSON schema of the arguments, when the reference gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
}

/// A doc as given: annotated (synthesizable offline) or plain (needs a model).
#[derive(Debug, Clone)]
pub enum AnyDoc {
    Annotated(DomainDoc),
    Plain(PlainDoc),
}

impl AnyDoc {
    /// Reads a `.toml` or `.json` doc of either kind. An annotated doc that
    /// fails its checks is an error; a doc that is neither kind reports why
    /// it is not the kind it is written as.
    pub fn read(path: &Path) -> Result<Self> {
        let extension = path
            .extension()
            .map(|ext| ext.to_string_lossy().to_ascii_lowercase());
        let json = match extension.as_deref() {
            Some("json") => true,
            // Without an extension, TOML, as the shipped docs are written.
            Some("toml") | None => false,
            Some(other) => bail!(
                "{}: a doc is TOML (.toml) or JSON (.json), not .{other}",
                path.display()
            ),
        };
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        // Editors on Windows open a file with a byte-order mark, which
        // TOML's parser skips and JSON's does not.
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        let annotated: Result<DomainDoc> = if json {
            serde_json::from_str(text).map_err(Into::into)
        } else {
            toml::from_str(text).map_err(Into::into)
        };
        match annotated {
            Ok(doc) => {
                doc.check()
                    .with_context(|| format!("{} is inconsistent", path.display()))?;
                Ok(Self::Annotated(doc))
            }
            Err(annotated_err) => {
                let plain: Result<PlainDoc> = if json {
                    serde_json::from_str(text).map_err(Into::into)
                } else {
                    toml::from_str(text).map_err(Into::into)
                };
                // The error of the format the doc is written in names its
                // problem: an annotated doc has collections. Text that is
                // no JSON or TOML at all is in neither.
                let (err, format) = match (plain, has_collections(text, json)) {
                    (Ok(plain), _) if plain.tools.is_empty() => {
                        bail!(
                            "{} documents no tools: an environment is its tools",
                            path.display()
                        )
                    }
                    (Ok(plain), _) => return Ok(Self::Plain(plain)),
                    (Err(_), Ok(true)) => (annotated_err, " (an annotated doc)"),
                    (Err(plain_err), Ok(false)) => {
                        (plain_err, " (a plain doc: it has no `collections`)")
                    }
                    // Read as a doc, it fails at the first field missing
                    // before the syntax goes wrong: the syntax error is
                    // the one to name.
                    (Err(_), Err(syntax)) => (syntax, ""),
                };
                Err(err).with_context(|| format!("{} is malformed{format}", path.display()))
            }
        }
    }

    pub fn name(&self) -> &str {
        match self {
            Self::Annotated(doc) => &doc.domain.name,
            Self::Plain(doc) => &doc.domain.name,
        }
    }
}

const FORMAT: &str = include_str!("../../env-templates/domains/README.md");
const EXAMPLE: &str = include_str!("../../env-templates/domains/library.toml");

/// The conversation that turns a plain doc into an annotated one.
pub struct Annotator<'a> {
    client: &'a ChatClient,
    plain: &'a PlainDoc,
    messages: Vec<Message>,
}

impl<'a> Annotator<'a> {
    pub fn new(client: &'a ChatClient, plain: &'a PlainDoc) -> Self {
        let system = format!(
            "You turn the plain documentation of a tool API into an annotated Forge domain doc.\n\n\
             # The format\n\n{FORMAT}\n\n# An example (TOML)\n\n{EXAMPLE}\n\n\
             Reply with only the annotated doc as one JSON object with the same structure \
             (`domain`, `collections`, `tools`). Keep the domain name and implement every documented \
             tool, and no other, under its documented name, taking the arguments its `parameters` \
             document under their names."
        );
        let user = format!(
            "The plain documentation:\n\n{}",
            serde_json::to_string_pretty(plain).expect("docs serialise")
        );
        Self {
            client,
            plain,
            messages: vec![Message::system(system), Message::user(user)],
        }
    }

    /// Asks for the annotated doc, feeding errors back, for at most `rounds`
    /// answers. Returns the doc and how many answers it took.
    pub fn annotate(&mut self, rounds: usize) -> Result<(DomainDoc, usize)> {
        let mut last_error = String::new();
        for round in 1..=rounds {
            let reply = self
                .client
                .complete(&self.messages)
                .context("asking the model for the annotated doc")?;
            self.messages.push(Message::assistant(reply.clone()));
            match self.check(&reply) {
                Ok(doc) => return Ok((doc, round)),
                Err(err) => {
                    last_error = format!("{err:#}");
                    self.feedback(&format!("That doc is not valid: {last_error}"));
                }
            }
        }
        bail!(
            "no valid annotated doc in {}; the last problem: {last_error}",
            models_answers(rounds)
        )
    }

    /// The report of an annotation that failed with `why`, for the doc's
    /// author to see where the model went wrong: its answers, each with
    /// what was wrong with it. None before any answer (the endpoint failed
    /// at once): there is nothing to see.
    pub fn rejection_report(&self, why: &anyhow::Error) -> Option<String> {
        // The system prompt and the doc come first; then the answers, each
        // followed by what was wrong with it.
        let conversation = &self.messages[2..];
        if conversation.is_empty() {
            return None;
        }
        let mut report = format!("# {} — rejected\n\n{why:#}.\n", self.plain.domain.name);
        let mut answer = 0;
        for message in conversation {
            match message.role.as_str() {
                "assistant" => {
                    answer += 1;
                    // A fence longer than any run of backticks in the answer
                    // (models fence their JSON) holds it whole.
                    let longest = message
                        .content
                        .split(|c| c != '`')
                        .map(str::len)
                        .max()
                        .unwrap_or(0);
                    let fence = "`".repeat(longest.max(2) + 1);
                    report += &format!(
                        "\n## Answer {answer}\n\n{fence}\n{}\n{fence}\n",
                        message.content
                    );
                }
                _ => {
                    let said = message.content.trim_end_matches(FIX_IT).trim_end();
                    report += &format!("\n{said}\n");
                }
            }
        }
        Some(report)
    }

    /// Puts a doc the model gave earlier back into the conversation as its answer.
    pub fn replay_answer(&mut self, doc_json: &str) {
        self.messages.push(Message::assistant(doc_json));
    }

    /// Tells the model what went wrong with its last doc (used for sandbox
    /// validation failures too).
    pub fn feedback(&mut self, problem: &str) {
        self.messages
            .push(Message::user(format!("{problem}\n{FIX_IT}")));
    }

    fn check(&self, reply: &str) -> Result<DomainDoc> {
        let value = extract_json(reply).context("the reply contains no JSON object")?;
        let doc: DomainDoc =
            serde_json::from_value(value).context("the JSON is not a doc in the format")?;
        doc.check()?;
        if doc.domain.name != self.plain.domain.name {
            bail!("the domain name must stay `{}`", self.plain.domain.name);
        }
        let missing: Vec<&str> = self
            .plain
            .tools
            .iter()
            .map(|tool| tool.name.as_str())
            .filter(|name| !doc.tools.iter().any(|tool| tool.name == *name))
            .collect();
        if !missing.is_empty() {
            bail!("documented tools are missing: {}", missing.join(", "));
        }
        let invented: Vec<&str> = doc
            .tools
            .iter()
            .map(|tool| tool.name.as_str())
            .filter(|name| !self.plain.tools.iter().any(|tool| tool.name == *name))
            .collect();
        if !invented.is_empty() {
            bail!(
                "tools the doc does not document: {} (annotate the documented tools alone)",
                invented.join(", ")
            );
        }
        for plain in &self.plain.tools {
            let tool = doc.tools.iter().find(|tool| tool.name == plain.name);
            if let (Some(tool), Some(schema)) = (tool, &plain.parameters) {
                check_parameters(&doc, tool, schema)?;
            }
        }
        Ok(doc)
    }
}

/// Refuses an annotated `tool` whose arguments are not those its plain doc's
/// JSON `schema` documents: one it invents, or a required one it drops,
/// would make an environment of another API than the one documented. (An
/// optional one may go: the format has optional arguments for lists alone.)
fn check_parameters(doc: &DomainDoc, tool: &ToolDoc, schema: &Value) -> Result<()> {
    // An object schema without properties documents a tool of none.
    let none = serde_json::Map::new();
    let documented = match schema.get("properties").and_then(Value::as_object) {
        Some(documented) => documented,
        None if schema.get("type").and_then(Value::as_str) == Some("object") => &none,
        None => return Ok(()),
    };
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str);
    let annotated = crate::codegen::parameters(doc, tool);
    let taken = annotated["properties"]
        .as_object()
        .expect("parameters are an object schema");
    let invented: Vec<&str> = taken
        .keys()
        .map(String::as_str)
        .filter(|name| !documented.contains_key(*name))
        .collect();
    let dropped: Vec<&str> = required.filter(|name| !taken.contains_key(*name)).collect();
    if invented.is_empty() && dropped.is_empty() {
        return Ok(());
    }
    let names = |names: Vec<&str>| match names.is_empty() {
        true => "none".to_owned(),
        false => names.join(", "),
    };
    bail!(
        "tool `{}` must take the documented arguments ({}), but takes {}",
        tool.name,
        names(documented.keys().map(String::as_str).collect()),
        names(taken.keys().map(String::as_str).collect())
    )
}

/// "the model's one answer", "the model's 3 answers": what a bound on
/// answers (`--llm-rounds`) let the model give, as errors say it.
/// What each feedback to the model ends with.
const FIX_IT: &str = "Fix it and reply with the whole corrected doc as JSON.";

pub fn models_answers(count: usize) -> String {
    match count {
        1 => "the model's one answer".to_owned(),
        count => format!("the model's {count} answers"),
    }
}

/// Whether `text`, JSON (`json`) or TOML, has `collections`: the mark of
/// an annotated doc. An error where it is no JSON or TOML at all.
fn has_collections(text: &str, json: bool) -> Result<bool> {
    Ok(match json {
        true => serde_json::from_str::<serde_json::Value>(text)?
            .get("collections")
            .is_some(),
        false => toml::from_str::<toml::Table>(text)?.contains_key("collections"),
    })
}

/// Rewrites every task's instruction ([`refine_instruction`]), as many at
/// once as the client lets out (each rewrite depends on its instruction
/// alone, so the order they end in changes nothing, where the endpoint's
/// answer does not depend on the requests beside it). Returns how many
/// rewrites were taken; a failed rewrite fails the domain, with the
/// earliest such task's error, once the requests already out have ended.
pub fn refine_instructions(client: &ChatClient, tasks: &mut [Task]) -> Result<usize> {
    let asked: Vec<(usize, &Task)> = tasks.iter().enumerate().collect();
    let mut rewrites = vec![None; tasks.len()];
    in_parallel(
        &asked,
        client.config().max_in_flight,
        |(at, task)| {
            let rewrite = refine_instruction(client, &task.instruction, &task.stated_facts())
                .with_context(|| {
                    format!(
                        "asking the model to rewrite task `{}`'s instruction",
                        task.id
                    )
                })?;
            Ok((at, rewrite))
        },
        |(at, rewrite)| {
            rewrites[at] = rewrite;
            Ok(())
        },
    )?;
    let mut rewritten = 0;
    for (task, rewrite) in tasks.iter_mut().zip(rewrites) {
        // A model that echoes the template back has rewritten nothing.
        if let Some(rewrite) = rewrite.filter(|rewrite| *rewrite != task.instruction) {
            task.instruction = rewrite;
            rewritten += 1;
        }
    }
    Ok(rewritten)
}

/// Rewrites an instruction in natural language, keeping every fact; none
/// when the model's rewrite is not [`faithful`] (the template stays, and
/// the report counts it). A call that fails (after the client's retries) is an error:
/// a domain quietly left with its templates would look rewritten.
pub fn refine_instruction(
    client: &ChatClient,
    instruction: &str,
    facts: &[String],
) -> Result<Option<String>, ChatError> {
    let messages = [
        Message::system(
            "Rewrite a customer's task description so it reads naturally, in the second person, as \
             the customer's own situation. Keep every name, email, number, title and quoted value \
             exactly as written. Do not add facts. Reply with the rewritten text only.",
        ),
        Message::user(instruction),
    ];
    let rewrite = client.complete(&messages)?;
    let rewrite = unwrapped(&rewrite);
    Ok(faithful(rewrite, instruction, facts).then(|| rewrite.to_owned()))
}

/// A reply without what models often wrap a text in: a code fence
/// (```` ```text … ``` ````), or quotation marks around the whole of it.
fn unwrapped(reply: &str) -> &str {
    let mut text = reply.trim();
    if let Some(fenced) = text.strip_prefix("```")
        && let Some((_, body)) = fenced.split_once('\n')
        && let Some(body) = body.trim_end().strip_suffix("```")
    {
        text = body.trim();
    }
    for (open, close) in [('"', '"'), ('\u{201c}', '\u{201d}')] {
        if let Some(inner) = text
            .strip_prefix(open)
            .and_then(|rest| rest.strip_suffix(close))
            && quotes_pair_up(inner, open, close)
        {
            return inner.trim();
        }
    }
    text
}

/// Whether the quotation marks in `text` open and close in pairs, so that
/// marks around it would be around the whole of it: `"Dune" and "Emma"`
/// stripped of its outer marks leaves `Dune" and "Emma`, which do not.
/// A straight mark opens after white space or a bracket (or at the start),
/// and closes elsewhere.
fn quotes_pair_up(text: &str, open: char, close: char) -> bool {
    let mut depth = 0usize;
    let mut previous = ' ';
    for c in text.chars() {
        let opens = match (c == open, c == close) {
            (true, true) => previous.is_whitespace() || "([{".contains(previous),
            (true, false) => true,
            (false, true) => false,
            (false, false) => {
                previous = c;
                continue;
            }
        };
        match opens {
            // Straight marks do not nest.
            true if open == close && depth > 0 => return false,
            true => depth += 1,
            false if depth == 0 => return false,
            false => depth -= 1,
        }
        previous = c;
    }
    depth == 0
}

/// Said of the instructions whose rewrite was not [`faithful`].
pub const TEMPLATES_KEPT: &str =
    " (the others keep their template: their rewrite lost a fact, turned the task round or ran on)";

/// Whether a rewrite of `instruction` can stand for it: every fact kept
/// verbatim, no longer than a paraphrase runs (three times the
/// instruction, and 200 characters more for short ones: a model that
/// rambles on buries the task), and no negation the instruction lacks (a
/// "do not" that turns the task round). Rules of thumb: a faithful rewrite
/// they refuse costs only its naturalness, as the template stays.
pub fn faithful(rewrite: &str, instruction: &str, facts: &[String]) -> bool {
    !rewrite.is_empty()
        && keeps_facts(rewrite, facts)
        && keeps_requirements(rewrite, instruction)
        && rewrite.len() <= 3 * instruction.len() + 200
        && negations(rewrite) <= negations(instruction)
}

/// Whether every fact appears verbatim.
pub fn keeps_facts(text: &str, facts: &[String]) -> bool {
    facts.iter().all(|fact| text.contains(fact.as_str()))
}

/// Whether every requirement of the templated `instruction` (its sentences
/// "You want to …", "You also want to …") left a trace in `rewrite`: one
/// of its words of four letters or more, other than the template's own,
/// begins a word of the rewrite with its first four letters (so "fines"
/// finds "fine", "phone" finds "phone's"). A rewrite that drops a
/// requirement without a fact — "pay all your fines" — would leave its
/// task asking for a change the instruction no longer mentions.
fn keeps_requirements(rewrite: &str, instruction: &str) -> bool {
    const TEMPLATE: [&str; 10] = [
        "your", "also", "want", "know", "with", "have", "that", "this", "from", "what",
    ];
    let words = |text: &str| -> Vec<String> {
        text.split(|ch: char| !ch.is_alphanumeric())
            .filter(|word| word.chars().count() >= 4)
            .map(str::to_lowercase)
            .collect()
    };
    let stem = |word: &str| word.chars().take(4).collect::<String>();
    let said: Vec<String> = words(rewrite).iter().map(|word| stem(word)).collect();
    instruction
        .split_inclusive('.')
        .map(str::trim)
        .filter(|sentence| {
            sentence.starts_with("You want to") || sentence.starts_with("You also want to")
        })
        .all(|requirement| {
            let mut cues = words(requirement)
                .into_iter()
                .filter(|word| !TEMPLATE.contains(&word.as_str()))
                .peekable();
            cues.peek().is_none() || cues.any(|cue| said.contains(&stem(&cue)))
        })
}

/// The words of `text` that negate what follows.
fn negations(text: &str) -> usize {
    const NEGATIONS: [&str; 7] = ["not", "no", "never", "nothing", "neither", "nor", "cannot"];
    text.split(|ch: char| !(ch.is_alphanumeric() || ch == '\'' || ch == '’'))
        .map(|word| word.to_lowercase().replace('’', "'"))
        .filter(|word| NEGATIONS.contains(&word.as_str()) || word.ends_with("n't"))
        .count()
}

#[cfg(test)]
mod tests {
    use super::{AnyDoc, faithful, keeps_facts, unwrapped};

    #[test]
    fn a_doc_is_read_by_its_extension_and_its_syntax_errors_named() {
        let dir = tempfile::tempdir().unwrap();
        let read = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            AnyDoc::read(&path).map_err(|err| format!("{err:#}"))
        };
        let plain = r#"{"domain": {"name": "parking", "description": "x"}, "tools": [{"name": "a", "description": "b"}]}"#;
        assert!(matches!(read("p.json", plain), Ok(AnyDoc::Plain(_))));
        // A byte-order mark, as some editors write, is no part of the doc.
        let marked = format!("\u{feff}{plain}");
        assert!(matches!(read("marked.JSON", &marked), Ok(AnyDoc::Plain(_))));
        // Text that is no JSON is named as such, not as a doc missing a field.
        let comma = plain.replace("}]}", "},]}");
        let error = read("comma.json", &comma).unwrap_err();
        assert!(
            error.contains("comma.json is malformed: trailing comma"),
            "{error}"
        );
        assert!(
            read("p.yaml", plain)
                .unwrap_err()
                .ends_with("p.yaml: a doc is TOML (.toml) or JSON (.json), not .yaml")
        );
    }

    #[test]
    fn a_rewrite_that_turns_the_task_round_or_rambles_is_not_faithful() {
        let instruction = "You are Ava Chen. You want to pay all your fines.";
        let facts = vec!["Ava Chen".to_owned()];
        assert!(faithful(
            "I'm Ava Chen, and I'd like to settle every fine I owe.",
            instruction,
            &facts
        ));
        for reversed in [
            "I'm Ava Chen, and I absolutely do NOT want to pay my fines.",
            "I'm Ava Chen and I don't want to pay my fines.",
            "I'm Ava Chen. Never pay my fines.",
        ] {
            assert!(!faithful(reversed, instruction, &facts), "{reversed}");
        }
        let rambling = format!(
            "I'm Ava Chen and I want to pay my fines. {}",
            "blah ".repeat(100)
        );
        assert!(!faithful(&rambling, instruction, &facts));
        assert!(!faithful("", instruction, &[]));
    }

    #[test]
    fn a_rewrite_loses_the_fence_or_quotes_a_model_wraps_it_in() {
        let text = "You are Ana. You want to renew \"Dune\".";
        for reply in [
            format!("```\n{text}\n```"),
            format!("```text\n{text}\n```\n"),
            format!("  {text}  "),
        ] {
            assert_eq!(unwrapped(&reply), text, "{reply}");
        }
        assert_eq!(unwrapped("\"You want a book.\""), "You want a book.");
        assert_eq!(
            unwrapped("\u{201c}You want a book.\u{201d}"),
            "You want a book."
        );
        // Quotes that open and close parts of it stay.
        let quoted = "\"Dune\" and \"Emma\"";
        assert_eq!(unwrapped(quoted), quoted);
        let curly = "\u{201c}Dune\u{201d} and \u{201c}Emma\u{201d}";
        assert_eq!(unwrapped(curly), curly);
        // Quotes around the whole of a text that quotes a title go.
        assert_eq!(unwrapped(&format!("\"{text}\"")), text);
        assert_eq!(
            unwrapped("\u{201c}You want \u{201c}Dune\u{201d}.\u{201d}"),
            "You want \u{201c}Dune\u{201d}."
        );
    }

    #[test]
    fn a_rewrite_must_keep_every_requirement() {
        let instruction = "You are Ava Chen. You want to pay all your fines. You also want to \
                           know your status. You also want to know the copies available of the book \
                           \"Dune\".";
        let facts = vec!["Ava Chen".to_owned(), "Dune".to_owned()];
        assert!(faithful(
            "I'm Ava Chen: I'd like to pay off my fine, check my account's status and see how \
             many copies of Dune are in.",
            instruction,
            &facts
        ));
        // The fines dropped, or the status question.
        for dropped in [
            "I'm Ava Chen and I'd like my status and the copies of Dune.",
            "I'm Ava Chen, I owe fines, and how many copies of Dune are there?",
        ] {
            assert!(!faithful(dropped, instruction, &facts), "{dropped}");
        }
    }

    #[test]
    fn a_rewrite_must_keep_every_fact() {
        let facts = vec![
            "ava.chen@example.com".to_owned(),
            "The Silent Garden".to_owned(),
        ];
        assert!(keeps_facts(
            "I'm Ava (ava.chen@example.com) and want to return The Silent Garden.",
            &facts
        ));
        assert!(!keeps_facts(
            "I'm Ava and want to return The Silent Garden.",
            &facts
        ));
    }
}
