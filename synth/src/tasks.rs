//! Stages 5–7: task DAGs, gold execution and instructions.
//!
//! A task is built as a goal-directed random walk on the tool graph, executed
//! step by step in the sandbox on a fork of the initial state:
//!
//! 1. a persona (a record of the persona collection) is drawn; what the user
//!    knows is its `user_knows` fields;
//! 2. 1–5 requirements are drawn (20% one, 35% two, 25% three, 15% four, 5%
//!    five; capped at the generator's `max_requirements`); a requirement
//!    is a write tool with an `intent` (75%) or a question a read tool `asks`
//!    (25%), applied to a record the persona owns (its key is reachable from
//!    the persona through a `list` tool filtered by the persona's key), to the
//!    persona itself, or to a record the user names by a field they know;
//! 3. the walk to each requirement is the chain of tools that turns what the
//!    user knows into the arguments needed — `find` the persona, `list` what
//!    they own, `get` the records the description mentions, look up records
//!    by a known field — so its length follows from the graph (2–8 calls per
//!    requirement in the shipped docs); walks of one task share their prefix
//!    (merging removes calls made twice);
//! 4. **reasoning nodes** derive what the user asks for from earlier outputs:
//!    argmax/argmin over a numeric field picks the record the user refers to
//!    by a superlative ("the one with the highest renewals"); sum and count
//!    over the persona's listed records answer questions such as "the total
//!    amount of your expense claims" or "how many of your loans are active";
//! 5. every call must succeed; the state after the last is the gold final
//!    state S*; a walk whose call fails is retried with other choices, then
//!    dropped;
//! 6. the instruction says who the user is, what they want and what they know
//!    — never the tool sequence; read requirements become required outputs.

use crate::doc::{DomainDoc, FieldType, TemplatePart, ToolDoc, ToolKind, template_parts};
use crate::initial::field_value;
use forge_runtime::bundle::ToolCall;
use forge_runtime::environment::{Observation, execute};
use forge_runtime::sandbox::{ToolComponent, ToolInstance};
use forge_runtime::{State, Task};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// One executed gold call.
struct Step {
    call: ToolCall,
    output: Value,
    depends_on: Vec<usize>,
    writes: bool,
}

/// A task under construction.
struct Session<'a> {
    doc: &'a DomainDoc,
    instance: ToolInstance,
    state: State,
    steps: Vec<Step>,
    /// The first step whose output held each value (JSON text), for dependencies.
    producers: BTreeMap<String, usize>,
    /// Reasoning nodes of the DAG.
    reasoning: Vec<Value>,
    facts: Map<String, Value>,
    persona: (String, Map<String, Value>),
    persona_step: Option<usize>,
    sentences: Vec<String>,
    outputs: Vec<String>,
    /// What answers each output, in the same order.
    questions: Vec<Question>,
    /// The state before the task and after each requirement kept: the
    /// states an agent may read in, whichever order it takes.
    settled: Vec<State>,
}

/// A question of the user's, by the read that answers it.
struct Question {
    call: ToolCall,
    reading: Reading,
    /// Requirements kept before it: the settled states past that many
    /// follow it.
    after: usize,
}

/// How a question's answer is read from its call's output.
enum Reading {
    /// A field of the record.
    Field(String),
    /// The total of a numeric field over the records listed.
    Sum { field: String, integer: bool },
    /// How many of the records listed have `value` in `field`.
    Count { field: String, value: Value },
}

impl Reading {
    /// The answer, as the user is told to give it.
    fn answer(&self, output: &Value) -> Option<String> {
        self.value(output).map(|value| text(&value))
    }

    fn value(&self, output: &Value) -> Option<Value> {
        let records = || {
            output
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_object)
        };
        match self {
            Self::Field(field) => output.get(field).cloned(),
            Self::Sum { field, integer } => {
                let total: f64 = records()
                    .filter_map(|record| record.get(field)?.as_f64())
                    .sum();
                let total = (total * 100.0).round() / 100.0;
                Some(if *integer {
                    Value::from(total as i64)
                } else {
                    Value::from(total)
                })
            }
            Self::Count { field, value } => Some(Value::from(
                records()
                    .filter(|record| record.get(field) == Some(value))
                    .count(),
            )),
        }
    }
}

impl<'a> Session<'a> {
    fn record(&self, collection: &str, key: &str) -> Option<Map<String, Value>> {
        self.state
            .get(collection, key)
            .and_then(|record| record.value().as_object().cloned())
    }

    /// Runs a call; `None` when it fails (the state is then unchanged).
    fn call(&mut self, tool: &ToolDoc, arguments: Map<String, Value>) -> Option<usize> {
        let call = ToolCall::new(tool.name.clone(), Value::Object(arguments));
        // A read already made, with nothing written since, is not repeated.
        if !tool.kind.writes()
            && let Some(index) = self.steps.iter().rposition(|step| step.call == call)
            && !self.steps[index..].iter().any(|step| step.writes)
        {
            return Some(index);
        }
        let executed = execute(&mut self.instance, &self.state, &call);
        let Observation::Ok(text) = executed.observation else {
            return None;
        };
        let output: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        let mut depends_on: Vec<usize> = call
            .arguments
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(_, value)| self.producers.get(&value.to_string()).copied())
            .collect();
        depends_on.sort_unstable();
        depends_on.dedup();
        let index = self.steps.len();
        record_producers(&output, index, &mut self.producers);
        self.state = executed.state;
        self.steps.push(Step {
            call,
            output,
            depends_on,
            writes: tool.kind.writes(),
        });
        Some(index)
    }

    /// Makes sure the agent has looked the persona up; the step that found it.
    fn find_persona(&mut self) -> Option<usize> {
        if let Some(step) = self.persona_step {
            return Some(step);
        }
        let doc = self.doc;
        let persona = &doc.domain.persona;
        let tool = doc.tools.iter().find(|tool| {
            tool.kind == ToolKind::Find
                && &tool.collection == persona
                && tool
                    .by
                    .as_ref()
                    .and_then(|by| doc.field(persona, by))
                    .is_some_and(|field| field.user_knows)
        })?;
        let by = tool.by.clone()?;
        let value = self.persona.1.get(&by)?.clone();
        let step = self.call(tool, Map::from_iter([(by, value)]))?;
        self.persona_step = Some(step);
        Some(step)
    }

    /// Has the agent look up a record the user names by a field they know
    /// (a unique one, such as a title, when there is one); returns the step and
    /// the phrase naming the record (`"The Silent Garden"`, `with author Ada Berg`).
    fn look_up(&mut self, collection: &str, key: &str) -> Option<(usize, String)> {
        let doc = self.doc;
        let record = self.record(collection, key)?;
        for unique_fields_first in [true, false] {
            for tool in doc
                .tools
                .iter()
                .filter(|tool| tool.collection == collection)
            {
                let known: Vec<&String> = match tool.kind {
                    ToolKind::Find => tool.by.iter().collect(),
                    ToolKind::List if tool.required_filters.is_empty() => {
                        tool.filters.iter().collect()
                    }
                    _ => continue,
                };
                for field in known {
                    let Some(field_doc) = doc.field(collection, field) else {
                        continue;
                    };
                    let Some(value) = record.get(field) else {
                        continue;
                    };
                    if !field_doc.user_knows
                        || field_doc.unique != unique_fields_first
                        || !self.unique_in(collection, field, value)
                    {
                        continue;
                    }
                    let step = self.call(tool, Map::from_iter([(field.clone(), value.clone())]))?;
                    self.know(
                        format!("{}.{field}", doc.collections[collection].noun),
                        value,
                    );
                    let phrase = if field_doc.unique {
                        format!("\"{}\"", text(value))
                    } else {
                        format!("with {} {}", words(field), text(value))
                    };
                    return Some((step, phrase));
                }
            }
        }
        None
    }

    /// Whether the user's instruction states `answer`: a fact of theirs it
    /// gives, or a word of what it asks ("… of the flight with status
    /// cancelled"), so that an agent could answer with it without a call
    /// (an answer is found in the agent's words as they are).
    fn states(&self, answer: &str) -> bool {
        let persona = &self.doc.collections[&self.doc.domain.persona];
        let stated = persona
            .fields
            .iter()
            .filter(|(_, field)| field.user_knows)
            .filter_map(|(name, _)| self.persona.1.get(name));
        stated
            .chain(self.facts.values())
            .any(|fact| text(fact) == answer)
            || self
                .sentences
                .iter()
                .any(|sentence| holds_word(sentence, answer))
    }

    /// Records a fact the user knows (see [`know`]).
    fn know(&mut self, key: String, value: &Value) {
        know(&mut self.facts, key, value);
    }

    /// Adds a requirement to the instruction: "You want to …", then "You also want to …".
    fn want(&mut self, what: &str) {
        let lead = if self.sentences.is_empty() {
            "You want to"
        } else {
            "You also want to"
        };
        self.sentences.push(format!("{lead} {what}."));
    }

    /// What a failed requirement attempt must undo.
    fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            steps: self.steps.len(),
            state: self.state.clone(),
            producers: self.producers.clone(),
            reasoning: self.reasoning.len(),
            facts: self.facts.clone(),
            persona_step: self.persona_step,
            sentences: self.sentences.len(),
            outputs: self.outputs.len(),
        }
    }

    fn restore(&mut self, checkpoint: Checkpoint) {
        self.steps.truncate(checkpoint.steps);
        self.state = checkpoint.state;
        self.producers = checkpoint.producers;
        self.reasoning.truncate(checkpoint.reasoning);
        self.facts = checkpoint.facts;
        self.persona_step = checkpoint.persona_step;
        self.sentences.truncate(checkpoint.sentences);
        self.outputs.truncate(checkpoint.outputs);
        self.questions.truncate(checkpoint.outputs);
    }

    /// Asks the user's question `question`, whose answer is `answer`.
    fn ask(&mut self, question: &str, answer: String, call: ToolCall, reading: Reading) {
        self.want(&format!("know {question}"));
        self.outputs.push(answer);
        let after = self.settled.len() - 1;
        self.questions.push(Question {
            call,
            reading,
            after,
        });
    }

    /// Whether every question has the same answer in each settled state
    /// and the state now: the instruction does not say whether a question is asked before or
    /// after a write, so an answer a write changes would fail an agent that
    /// reads in another order than the gold one (checks the fines, then
    /// pays them). A read may fail in the states before its question (of a
    /// record the task creates first), never in those after it (of one a
    /// later requirement deletes).
    fn answers_hold(&mut self) -> bool {
        let instance = &mut self.instance;
        let states: Vec<&State> = self.settled.iter().chain([&self.state]).collect();
        self.questions
            .iter()
            .zip(&self.outputs)
            .all(|(question, answer)| {
                states.iter().enumerate().all(|(at, state)| {
                    let Observation::Ok(text) =
                        execute(instance, state, &question.call).observation
                    else {
                        return at <= question.after;
                    };
                    let output = serde_json::from_str(&text).unwrap_or(Value::String(text));
                    question
                        .reading
                        .answer(&output)
                        .is_none_or(|read| &read == answer)
                })
            })
    }

    /// Whether every write requirement kept, and the one just made, leaves
    /// its mark on the state now: a value it wrote that is still there and
    /// was not there before the task (a requirement that changed nothing,
    /// a question, has none to leave). One that a later requirement undoes
    /// (suspend a line, then reactivate it) or overwrites is one an agent
    /// that skips both fulfils as well: the final state cannot tell.
    fn writes_show(&self) -> bool {
        let initial = &self.settled[0];
        let now = &self.state;
        let last = self.settled.last().expect("the initial state is settled");
        self.settled
            .windows(2)
            .map(|pair| (&pair[0], &pair[1]))
            .chain([(last, now)])
            .all(|(before, after)| {
                let changed = before.changed_records(after);
                changed.is_empty()
                    || changed.iter().any(|(collection, key)| {
                        let [initial, before, after, now] = [initial, before, after, now]
                            .map(|state| state.get(collection, key).map(|record| record.value()));
                        marks(initial, before, after, now)
                    })
            })
    }

    fn unique_in(&self, collection: &str, field: &str, value: &Value) -> bool {
        self.state.collection(collection).is_some_and(|records| {
            records
                .iter()
                .filter(|(_, record)| record.value().get(field) == Some(value))
                .count()
                == 1
        })
    }

    /// Renders an intent template for `target` (a record of the tool's
    /// collection, or the new record's arguments), with referenced records'
    /// fields looked up by `get` calls the agent would make.
    fn render(
        &mut self,
        tool: &ToolDoc,
        template: &str,
        target: &Map<String, Value>,
    ) -> Option<String> {
        let doc = self.doc;
        fill(template, |placeholder| match placeholder.split_once('.') {
            None => target.get(placeholder).cloned(),
            Some((collection, field)) => {
                let key = target
                    .get(doc.reference_field(tool, collection)?)?
                    .as_str()?
                    .to_owned();
                let record = self.record(collection, &key)?;
                if let Some(getter) = doc
                    .tools
                    .iter()
                    .find(|t| t.kind == ToolKind::Get && t.collection == collection)
                {
                    let key_field = doc.collections[collection].key_field.clone();
                    self.call(getter, Map::from_iter([(key_field, Value::String(key))]))?;
                }
                let value = record.get(field)?.clone();
                self.know(
                    format!("{}.{field}", doc.collections[collection].noun),
                    &value,
                );
                Some(value)
            }
        })
    }
}

/// Records in `facts` a fact the user knows under `key`. A task can need two
/// values of the same kind (two writes that each take a new `lamp`, two
/// books named by title): a value the key already holds is not repeated, and
/// another one goes under `key 2`, `key 3`, … so that every fact is kept.
fn know(facts: &mut Map<String, Value>, key: String, value: &Value) {
    let mut slot = key.clone();
    for repeat in 2.. {
        match facts.get(&slot) {
            Some(known) if known == value => return,
            Some(_) => slot = format!("{key} {repeat}"),
            None => break,
        }
    }
    facts.insert(slot, value.clone());
}

/// Whether a write that took a record from `before` to `after` shows in it
/// `now`: its being made or removed, or a field it set, is as the write left
/// it and not as it was at the start (`initial`).
fn marks(
    initial: Option<&Value>,
    before: Option<&Value>,
    after: Option<&Value>,
    now: Option<&Value>,
) -> bool {
    if before.is_some() != after.is_some()
        && now.is_some() == after.is_some()
        && now.is_some() != initial.is_some()
    {
        return true;
    }
    let names: BTreeSet<&String> = [before, after]
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .flat_map(Map::keys)
        .collect();
    names.into_iter().any(|name| {
        fn field<'v>(record: Option<&'v Value>, name: &str) -> Option<&'v Value> {
            record?.get(name)
        }
        let value = |record| field(record, name);
        value(before) != value(after) && value(now) == value(after) && value(now) != value(initial)
    })
}

/// Whether `text` holds `word` between characters that are no part of a
/// word (or its ends).
fn holds_word(text: &str, word: &str) -> bool {
    !word.is_empty()
        && text.match_indices(word).any(|(at, _)| {
            let before = text[..at].chars().next_back();
            let after = text[at + word.len()..].chars().next();
            [before, after]
                .iter()
                .all(|side| side.is_none_or(|ch| !ch.is_alphanumeric()))
        })
}

/// Fills an intent template: each `{placeholder}` becomes the text of what
/// `resolve` gives for it; `None` when one cannot be resolved.
fn fill(template: &str, mut resolve: impl FnMut(&str) -> Option<Value>) -> Option<String> {
    let mut out = String::new();
    for part in template_parts(template)? {
        match part {
            TemplatePart::Text(literal) => out.push_str(literal),
            TemplatePart::Placeholder(placeholder) => out.push_str(&text(&resolve(placeholder)?)),
        }
    }
    Some(out)
}

/// A session's progress before a requirement attempt.
struct Checkpoint {
    steps: usize,
    state: State,
    producers: BTreeMap<String, usize>,
    reasoning: usize,
    facts: Map<String, Value>,
    persona_step: Option<usize>,
    sentences: usize,
    outputs: usize,
}

fn record_producers(value: &Value, step: usize, producers: &mut BTreeMap<String, usize>) {
    match value {
        Value::Object(map) => map
            .values()
            .for_each(|item| record_producers(item, step, producers)),
        Value::Array(items) => items
            .iter()
            .for_each(|item| record_producers(item, step, producers)),
        Value::String(_) => {
            producers.entry(value.to_string()).or_insert(step);
        }
        _ => {}
    }
}

/// How a value reads in a sentence or a required output: strings bare,
/// integral numbers without a fraction.
fn text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Number(number) => match number.as_f64() {
            Some(float) if number.is_f64() && float.fract() == 0.0 => format!("{}", float as i64),
            _ => number.to_string(),
        },
        other => other.to_string(),
    }
}

fn words(field: &str) -> String {
    field.replace('_', " ")
}

/// Generates tasks for a domain whose tools are `component`.
pub struct TaskGenerator<'a> {
    doc: &'a DomainDoc,
    component: &'a ToolComponent,
    initial: State,
    max_requirements: usize,
}

/// A generated task and its gold final state.
pub struct GeneratedTask {
    pub task: Task,
    pub gold: State,
}

impl<'a> TaskGenerator<'a> {
    /// A generator whose tasks have at most `max_requirements` requirements
    /// (at least 1; [`crate::MAX_REQUIREMENTS`] caps nothing).
    pub fn new(
        doc: &'a DomainDoc,
        component: &'a ToolComponent,
        initial: State,
        max_requirements: usize,
    ) -> Self {
        assert!(max_requirements >= 1, "a task needs a requirement");
        Self {
            doc,
            component,
            initial,
            max_requirements,
        }
    }

    /// One attempt at a task with `seed`; `None` when the draw led nowhere.
    pub fn generate(&self, seed: u64) -> Option<GeneratedTask> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let doc = self.doc;
        let persona_collection = &doc.domain.persona;
        let personas: Vec<String> = self.initial.keys(persona_collection);
        let persona_key = personas[rng.random_range(0..personas.len())].clone();
        let persona_record = self
            .initial
            .get(persona_collection, &persona_key)?
            .value()
            .as_object()?
            .clone();
        let mut session = Session {
            doc,
            instance: self.component.instance(),
            state: self.initial.clone(),
            steps: Vec::new(),
            producers: BTreeMap::new(),
            reasoning: Vec::new(),
            facts: Map::new(),
            persona: (persona_key, persona_record),
            persona_step: None,
            sentences: Vec::new(),
            outputs: Vec::new(),
            questions: Vec::new(),
            settled: vec![self.initial.clone()],
        };
        let wanted = match rng.random_range(0..100) {
            0..20 => 1,
            20..55 => 2,
            55..80 => 3,
            80..95 => 4,
            _ => 5,
        };
        // Capped after the draw, so that the default draws what it always did.
        let wanted = wanted.min(self.max_requirements);
        let mut used_tools = Vec::new();
        let mut attempts = 0;
        while session.sentences.len() < wanted && attempts < 12 {
            attempts += 1;
            let checkpoint = session.checkpoint();
            let used = used_tools.len();
            let done = if rng.random_range(0..100) < 75 {
                self.write_requirement(&mut session, &mut rng, &mut used_tools)
            } else {
                self.read_requirement(&mut session, &mut rng)
            };
            // A question whose answer the instruction now states (given
            // with this requirement or an earlier one) could be answered by
            // echoing it, without a call.
            let leaks = || session.outputs.iter().any(|output| session.states(output));
            if done.is_none() || leaks() || !session.answers_hold() || !session.writes_show() {
                session.restore(checkpoint);
                used_tools.truncate(used);
            } else {
                session.settled.push(session.state.clone());
            }
        }
        if session.sentences.is_empty() {
            return None;
        }
        let changed = session.state.sha256() != self.initial.sha256();
        if !changed && session.outputs.is_empty() {
            return None;
        }
        Some(self.finish(session))
    }

    /// A write requirement with a tool not yet used in this task.
    fn write_requirement(
        &self,
        session: &mut Session<'_>,
        rng: &mut ChaCha8Rng,
        used_tools: &mut Vec<String>,
    ) -> Option<()> {
        let doc = self.doc;
        let writers: Vec<&ToolDoc> = doc
            .tools
            .iter()
            .filter(|tool| {
                tool.kind.writes() && tool.intent.is_some() && !used_tools.contains(&tool.name)
            })
            .collect();
        if writers.is_empty() {
            return None;
        }
        let tool = writers[rng.random_range(0..writers.len())];
        let collection = &doc.collections[&tool.collection];
        let persona = doc.domain.persona.clone();
        let mut arguments = Map::new();
        let mut suffix = String::new();
        // Dependencies need no bookkeeping here: `Session::call` derives them
        // from which earlier step produced each argument value.
        let target = if tool.kind == ToolKind::Create {
            let mut record = Map::new();
            for param in &tool.params {
                let field = doc.field(&tool.collection, param)?;
                let value = match field.references.as_deref() {
                    Some(target) if target == persona => {
                        session.find_persona()?;
                        Value::String(session.persona.0.clone())
                    }
                    Some(target) => {
                        let keys = session.state.keys(target);
                        let key = keys[rng.random_range(0..keys.len())].clone();
                        session.look_up(target, &key)?;
                        Value::String(key)
                    }
                    None => {
                        let value = field_value(&field, &Map::new(), &record, rng);
                        session.know(format!("new {}", words(param)), &value);
                        value
                    }
                };
                record.insert(param.clone(), value.clone());
                arguments.insert(param.clone(), value);
            }
            record
        } else {
            let key = self.choose_target(session, tool, rng, &mut suffix)?;
            // Not one the task made (book a seat, then cancel it): a user
            // asks to change what they have.
            session.settled[0].get(&tool.collection, &key)?;
            let mut record = session.record(&tool.collection, &key)?;
            arguments.insert(collection.key_field.clone(), Value::String(key));
            for param in &tool.params {
                let field = doc.field(&tool.collection, param)?;
                // Another value than the one held (a major changed to the
                // one it is would change nothing).
                let value = (0..8)
                    .map(|_| field_value(&field, &Map::new(), &record, rng))
                    .find(|value| record.get(param) != Some(value))?;
                session.know(format!("new {}", words(param)), &value);
                record.insert(param.clone(), value.clone());
                arguments.insert(param.clone(), value);
            }
            record
        };
        let sentence = session.render(tool, tool.intent.as_deref()?, &target)?;
        let before = session.state.sha256();
        session.call(tool, arguments)?;
        // A write that changes nothing is one an agent that skips it
        // fulfils as well.
        if session.state.sha256() == before {
            return None;
        }
        used_tools.push(tool.name.clone());
        session.want(&format!("{sentence}{suffix}"));
        Some(())
    }

    /// The key of the record an update/delete acts on: the persona itself, or
    /// one of the persona's records listed by a `list` tool filtered by the
    /// persona's key (chosen by a superlative — a reasoning node — or by a
    /// description that singles it out).
    fn choose_target(
        &self,
        session: &mut Session<'_>,
        tool: &ToolDoc,
        rng: &mut ChaCha8Rng,
        suffix: &mut String,
    ) -> Option<String> {
        let doc = self.doc;
        let persona = doc.domain.persona.clone();
        if tool.collection == persona {
            session.find_persona()?;
            return Some(session.persona.0.clone());
        }
        let collection = &doc.collections[&tool.collection];
        let owner_field = collection
            .fields
            .iter()
            .find(|(_, field)| field.references.as_deref() == Some(persona.as_str()))
            .map(|(name, _)| name.clone())?;
        let lister = doc.tools.iter().find(|t| {
            t.kind == ToolKind::List
                && t.collection == tool.collection
                && (t.required_filters.contains(&owner_field) || t.filters.contains(&owner_field))
        })?;
        session.find_persona()?;
        let owner = Value::String(session.persona.0.clone());
        let listed = session.call(lister, Map::from_iter([(owner_field, owner)]))?;
        let candidates: Vec<Map<String, Value>> = session.steps[listed]
            .output
            .as_array()?
            .iter()
            .filter_map(|item| item.as_object().cloned())
            .collect();
        if candidates.is_empty() {
            return None;
        }
        let key_of = |record: &Map<String, Value>| {
            record
                .get(&collection.key_field)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        // A superlative pick is a reasoning node; otherwise the intent's description must single the record out.
        let numeric: Vec<&String> = collection
            .fields
            .iter()
            .filter(|(_, field)| {
                matches!(field.kind, FieldType::Integer | FieldType::Number)
                    && field.references.is_none()
            })
            .map(|(name, _)| name)
            .collect();
        if candidates.len() > 1 && !numeric.is_empty() && rng.random_range(0..100) < 35 {
            let field = numeric[rng.random_range(0..numeric.len())];
            let highest = rng.random_bool(0.5);
            let value_of = |record: &Map<String, Value>| record.get(field).and_then(Value::as_f64);
            let best =
                candidates
                    .iter()
                    .filter_map(value_of)
                    .fold(None, |best: Option<f64>, value| match best {
                        Some(best) if (highest && best >= value) || (!highest && best <= value) => {
                            Some(best)
                        }
                        _ => Some(value),
                    })?;
            let winners: Vec<&Map<String, Value>> = candidates
                .iter()
                .filter(|record| value_of(record) == Some(best))
                .collect();
            if winners.len() == 1 {
                let key = key_of(winners[0])?;
                *suffix = format!(
                    " (the {} with the {} {})",
                    collection.noun,
                    if highest { "highest" } else { "lowest" },
                    words(field)
                );
                session.reasoning.push(json!({"op": if highest { "argmax" } else { "argmin" }, "field": field, "over_step": listed, "chooses": key}));
                return Some(key);
            }
        }
        let pick = &candidates[rng.random_range(0..candidates.len())];
        let key = key_of(pick)?;
        // Unambiguous only if no other candidate renders to the same description.
        if let Some(template) = &tool.intent {
            let mine = self.describe(session, tool, template, pick);
            let clashes = candidates
                .iter()
                .filter(|other| key_of(other).as_deref() != Some(key.as_str()))
                .any(|other| self.describe(session, tool, template, other) == mine);
            if mine.is_none() || clashes {
                return None;
            }
        }
        Some(key)
    }

    /// An intent rendered without making calls (to compare candidates).
    fn describe(
        &self,
        session: &Session<'_>,
        tool: &ToolDoc,
        template: &str,
        record: &Map<String, Value>,
    ) -> Option<String> {
        fill(template, |placeholder| match placeholder.split_once('.') {
            None => record.get(placeholder).cloned(),
            Some((collection, field)) => {
                let key = record
                    .get(self.doc.reference_field(tool, collection)?)?
                    .as_str()?;
                session.record(collection, key)?.get(field).cloned()
            }
        })
    }

    fn read_requirement(&self, session: &mut Session<'_>, rng: &mut ChaCha8Rng) -> Option<()> {
        if rng.random_range(0..100) < 35 {
            return self.aggregate_requirement(session, rng);
        }
        let doc = self.doc;
        let readers: Vec<&ToolDoc> = doc
            .tools
            .iter()
            .filter(|tool| tool.kind == ToolKind::Get && !tool.asks.is_empty())
            .collect();
        if readers.is_empty() {
            return None;
        }
        let tool = readers[rng.random_range(0..readers.len())];
        let field = tool.asks[rng.random_range(0..tool.asks.len())].clone();
        if doc.field(&tool.collection, &field)?.kind == FieldType::Boolean {
            return None;
        }
        let collection = &doc.collections[&tool.collection];
        let (key, question) = if tool.collection == doc.domain.persona {
            session.find_persona()?;
            (session.persona.0.clone(), format!("your {}", words(&field)))
        } else {
            let keys = session.state.keys(&tool.collection);
            let key = keys[rng.random_range(0..keys.len())].clone();
            let (_, name) = session.look_up(&tool.collection, &key)?;
            (
                key,
                format!("the {} of the {} {name}", words(&field), collection.noun),
            )
        };
        let step = session.call(
            tool,
            Map::from_iter([(collection.key_field.clone(), Value::String(key))]),
        )?;
        let reading = Reading::Field(field);
        let answer = reading.answer(&session.steps[step].output)?;
        if answer.is_empty() || session.outputs.contains(&answer) {
            return None;
        }
        let call = session.steps[step].call.clone();
        session.ask(&question, answer, call, reading);
        Some(())
    }

    /// A question answered by a reasoning node over the persona's records: the
    /// sum of a numeric field a `list` tool `asks` about, or how many records
    /// have a given value of a string field it asks about.
    fn aggregate_requirement(&self, session: &mut Session<'_>, rng: &mut ChaCha8Rng) -> Option<()> {
        let doc = self.doc;
        let persona = doc.domain.persona.clone();
        let listers: Vec<(&ToolDoc, String)> = doc
            .tools
            .iter()
            .filter(|tool| tool.kind == ToolKind::List && !tool.asks.is_empty())
            .filter_map(|tool| {
                let owner = tool.required_filters.iter().find(|filter| {
                    doc.field(&tool.collection, filter)
                        .and_then(|field| field.references)
                        .as_deref()
                        == Some(persona.as_str())
                })?;
                Some((tool, owner.clone()))
            })
            .collect();
        if listers.is_empty() {
            return None;
        }
        let (tool, owner) = &listers[rng.random_range(0..listers.len())];
        let field = tool.asks[rng.random_range(0..tool.asks.len())].clone();
        let field_doc = doc.field(&tool.collection, &field)?;
        let noun = &doc.collections[&tool.collection].noun;
        session.find_persona()?;
        let owner_key = Value::String(session.persona.0.clone());
        let step = session.call(tool, Map::from_iter([(owner.clone(), owner_key)]))?;
        let records: Vec<Map<String, Value>> = session.steps[step]
            .output
            .as_array()?
            .iter()
            .filter_map(|item| item.as_object().cloned())
            .collect();
        if records.len() < 2 {
            return None;
        }
        let output = &session.steps[step].output;
        let (question, answer, reasoning, reading) = match field_doc.kind {
            FieldType::Integer | FieldType::Number => {
                let integer = field_doc.kind == FieldType::Integer;
                let reading = Reading::Sum {
                    field: field.clone(),
                    integer,
                };
                let gives = reading.value(output)?;
                (
                    format!("the total {} of your {noun}s", words(&field)),
                    text(&gives),
                    json!({"op": "sum", "field": field, "over_step": step, "gives": gives}),
                    reading,
                )
            }
            FieldType::String => {
                let value = records[rng.random_range(0..records.len())]
                    .get(&field)?
                    .clone();
                let reading = Reading::Count {
                    field: field.clone(),
                    value: value.clone(),
                };
                let gives = reading.value(output)?;
                (
                    format!(
                        "how many of your {noun}s have {} {}",
                        words(&field),
                        text(&value)
                    ),
                    text(&gives),
                    json!({"op": "count", "field": field, "equals": value, "over_step": step, "gives": gives}),
                    reading,
                )
            }
            FieldType::Boolean => return None,
        };
        if session.outputs.contains(&answer) {
            return None;
        }
        session.reasoning.push(reasoning);
        let call = session.steps[step].call.clone();
        session.ask(&question, answer, call, reading);
        Some(())
    }

    fn finish(&self, session: Session<'_>) -> GeneratedTask {
        let doc = self.doc;
        let persona_doc = &doc.collections[&doc.domain.persona];
        let record = &session.persona.1;
        let mut intro = Vec::new();
        let mut facts = Map::new();
        if let Some(name) = record.get("name") {
            intro.push(format!("You are {}.", text(name)));
        }
        for (field, field_doc) in &persona_doc.fields {
            if field_doc.user_knows
                && let Some(value) = record.get(field)
            {
                facts.insert(field.clone(), value.clone());
                if field != "name" {
                    intro.push(format!("Your {} is {}.", words(field), text(value)));
                }
            }
        }
        facts.extend(session.facts);
        let instruction = intro
            .into_iter()
            .chain(session.sentences)
            .collect::<Vec<_>>()
            .join(" ");
        let depth = depths(&session.steps).into_iter().max().unwrap_or(0);
        let calls = session.steps.len();
        let writes = session.steps.iter().filter(|step| step.writes).count();
        let requirements =
            session.outputs.len() + session.steps.iter().filter(|step| step.writes).count();
        let dag = json!({
            "nodes": session.steps.iter().enumerate().map(|(index, step)| json!({"action": index, "depends_on": step.depends_on})).collect::<Vec<_>>(),
            "reasoning": session.reasoning,
        });
        let stats = json!({
            "tool_calls": calls,
            "dag_depth": depth,
            "requirements": requirements,
            "write_share": if calls == 0 { 0.0 } else { writes as f64 / calls as f64 },
        });
        let task = Task {
            id: String::new(),
            instruction,
            gold_actions: session.steps.iter().map(|step| step.call.clone()).collect(),
            required_outputs: session.outputs,
            initial_state: None,
            user_facts: Some(Value::Object(facts)),
            dag: Some(dag),
            gold_final_state_sha256: Some(session.state.sha256()),
            stats: Some(stats),
            nl_assertions: Vec::new(),
            setup: Vec::new(),
            state_check: true,
            assertions: Vec::new(),
            required_calls: Vec::new(),
        };
        GeneratedTask {
            task,
            gold: session.state,
        }
    }
}

/// Each step's depth in the dependency DAG (1 for a step with no dependency).
fn depths(steps: &[Step]) -> Vec<usize> {
    let mut depth = vec![1; steps.len()];
    for (index, step) in steps.iter().enumerate() {
        depth[index] = step
            .depends_on
            .iter()
            .map(|dep| depth[*dep] + 1)
            .max()
            .unwrap_or(1);
    }
    depth
}

#[cfg(test)]
mod tests {
    use super::*;
    use forge_runtime::Sandbox;
    use forge_runtime::sandbox::Limits;
    use std::path::PathBuf;

    /// Two create tools that each take a new lamp number: a two-requirement
    /// task has two facts of the same kind.
    const LAMPS: &str = r#"
[domain]
name = "lamps"
description = "A lamp switchboard."
persona = "cmds"

[collections.cmds]
key_field = "cmd_id"
key_prefix = "c"
noun = "command"
count = 1
fields.lamp = { type = "integer", min = 1, max = 999, description = "Lamp number." }
fields.act = { type = "string", enum = ["on", "off"] }

[[tools]]
name = "on"
kind = "create"
collection = "cmds"
params = ["lamp"]
set = { act = "on" }
description = "Turn a lamp on."
intent = "turn on lamp {lamp}"

[[tools]]
name = "off"
kind = "create"
collection = "cmds"
params = ["lamp"]
set = { act = "off" }
description = "Turn a lamp off."
intent = "turn off lamp {lamp}"
"#;

    /// The integration tests' cache (`<target>/forge-test-cache`), so the
    /// generated crate is compiled once for both.
    fn test_cache() -> PathBuf {
        let exe = std::env::current_exe().unwrap();
        // <target>/<profile>/deps/<test binary>
        exe.ancestors().nth(3).unwrap().join("forge-test-cache")
    }

    /// A student states their major; changing it to the one they hold
    /// changes nothing, and asking it asks what they said.
    const REGISTRAR: &str = r#"
[domain]
name = "registrar"
description = "Students and their majors."
persona = "students"

[collections.students]
key_field = "student_id"
key_prefix = "s"
noun = "student"
count = 6
fields.name = { type = "string", generator = "person_name", user_knows = true }
fields.email = { type = "string", generator = "email", unique = true, user_knows = true }
fields.major = { type = "string", enum = ["biology", "history"], user_knows = true }
fields.credits = { type = "integer", min = 10, max = 99 }

[[tools]]
name = "find_student_by_email"
kind = "find"
collection = "students"
by = "email"
description = "Find a student's id from their email."

[[tools]]
name = "get_student"
kind = "get"
collection = "students"
asks = ["major", "credits"]
description = "A student's record."

[[tools]]
name = "change_major"
kind = "update"
collection = "students"
params = ["major"]
description = "Change a student's major."
intent = "change your major to {major}"
"#;

    /// A member can freeze their account and unfreeze it again: asked for
    /// both, the final state would not tell an agent that did neither.
    const FREEZER: &str = r#"
[domain]
name = "freezer"
description = "Members whose accounts can be frozen."
persona = "members"

[collections.members]
key_field = "member_id"
key_prefix = "m"
noun = "member"
count = 6
fields.name = { type = "string", generator = "person_name", user_knows = true }
fields.email = { type = "string", generator = "email", unique = true, user_knows = true }
fields.status = { type = "string", enum = ["open", "frozen"] }
fields.nickname = { type = "string", enum = ["ace", "bee", "cat", "dot"] }

[[tools]]
name = "find_member_by_email"
kind = "find"
collection = "members"
by = "email"
description = "Find a member's id from their email."

[[tools]]
name = "freeze"
kind = "update"
collection = "members"
set = { status = "frozen" }
require = [{ field = "status", op = "==", value = "open" }]
description = "Freeze an open account."
intent = "freeze your account"

[[tools]]
name = "unfreeze"
kind = "update"
collection = "members"
set = { status = "open" }
require = [{ field = "status", op = "==", value = "frozen" }]
description = "Unfreeze a frozen account."
intent = "unfreeze your account"

[[tools]]
name = "rename"
kind = "update"
collection = "members"
params = ["nickname"]
description = "Change a member's nickname."
intent = "change your nickname to {nickname}"
"#;

    /// The tasks `doc` generates for seeds 0..40, with the component and
    /// initial state they were generated on.
    fn generated(doc: &str, max_requirements: usize) -> (Vec<Task>, ToolComponent, State) {
        let doc: DomainDoc = toml::from_str(doc).unwrap();
        doc.check().unwrap();
        let cache = test_cache();
        let compiler = crate::compile::Compiler::new(Some(cache.join("synth"))).unwrap();
        let (mut wasm, _) = compiler.compile(&[crate::source(&doc).unwrap()]).unwrap();
        let sandbox = Sandbox::new(Limits::default(), Some(cache.join("components"))).unwrap();
        let component = sandbox.load(&wasm.remove(0)).unwrap();
        let initial = State::from_json(&crate::initial::initial_state(&doc, 0).unwrap()).unwrap();
        let generator = TaskGenerator::new(&doc, &component, initial.clone(), max_requirements);
        let tasks = (0..40)
            .filter_map(|seed| generator.generate(seed))
            .map(|generated| generated.task)
            .collect();
        (tasks, component, initial)
    }

    /// Generated tasks of the lamps doc for seeds 0..40.
    fn lamp_tasks(max_requirements: usize) -> Vec<Task> {
        generated(LAMPS, max_requirements).0
    }

    #[test]
    fn every_gold_write_changes_the_state_and_no_answer_is_one_the_user_states() {
        let (tasks, component, initial) = generated(REGISTRAR, crate::MAX_REQUIREMENTS);
        let mut instance = component.instance();
        let (mut writes, mut questions) = (0, 0);
        for task in &tasks {
            let mut state = initial.clone();
            for call in &task.gold_actions {
                let executed = execute(&mut instance, &state, call);
                assert!(
                    matches!(executed.observation, Observation::Ok(_)),
                    "{}: {:?}",
                    task.instruction,
                    executed.observation
                );
                if call.name == "change_major" {
                    writes += 1;
                    assert_ne!(
                        executed.state.sha256(),
                        state.sha256(),
                        "{}: {call:?} changes nothing",
                        task.instruction
                    );
                }
                state = executed.state;
            }
            let stated = task.stated_facts();
            for output in &task.required_outputs {
                questions += 1;
                assert!(
                    !stated.contains(output),
                    "{}: asks for {output}, which it states",
                    task.instruction
                );
            }
        }
        assert!(
            writes > 0 && questions > 0,
            "{writes} writes, {questions} questions"
        );
    }

    /// A question is never asked about what the task's writes change: the
    /// instruction does not order them, so the answer would depend on
    /// whether the agent reads before or after writing (checks the fines,
    /// then pays them).
    #[test]
    fn no_answer_depends_on_the_order_of_the_reads_and_writes() {
        const LIBRARY: &str = include_str!("../../env-templates/domains/library.toml");
        let doc: DomainDoc = toml::from_str(LIBRARY).unwrap();
        let (tasks, component, initial) = generated(LIBRARY, crate::MAX_REQUIREMENTS);
        let mut instance = component.instance();
        let mut changed = 0;
        for task in &tasks {
            let final_state = task
                .gold_actions
                .iter()
                .fold(initial.clone(), |state, call| {
                    execute(&mut instance, &state, call).state
                });
            let reads = task.gold_actions.iter().filter_map(|call| {
                let tool = doc.tools.iter().find(|tool| tool.name == call.name)?;
                (tool.kind == ToolKind::Get).then_some((call, tool))
            });
            // The values each read's asked fields hold before the task and
            // after it: one the writes changed is no answer, unless another
            // read, which they left alone, gives the same (another book's
            // copies).
            let (mut moved, mut stable) = (Vec::new(), Vec::new());
            for (call, tool) in reads {
                let mut read = |state: &State| match execute(&mut instance, state, call).observation
                {
                    Observation::Ok(text) => serde_json::from_str::<Value>(&text).unwrap(),
                    other => panic!("{call:?}: {other:?}"),
                };
                let (before, after) = (read(&initial), read(&final_state));
                for field in &tool.asks {
                    let (from, to) = (text(&before[field]), text(&after[field]));
                    if from == to {
                        stable.push(from);
                    } else {
                        changed += 1;
                        moved.extend([(field, from), (field, to)]);
                    }
                }
            }
            for (field, value) in moved {
                assert!(
                    stable.contains(&value) || !task.required_outputs.contains(&value),
                    "{}: asks for the {field} {value}, which the task changes",
                    task.instruction
                );
            }
        }
        assert!(changed > 0, "no task reads what it changes");
    }

    #[test]
    fn no_write_is_asked_for_that_a_later_one_undoes() {
        let (tasks, component, initial) = generated(FREEZER, crate::MAX_REQUIREMENTS);
        let mut instance = component.instance();
        // The final state of `calls`, if every one of them succeeds.
        let mut play = |calls: Vec<&ToolCall>| {
            calls.into_iter().try_fold(initial.clone(), |state, call| {
                let executed = execute(&mut instance, &state, call);
                matches!(executed.observation, Observation::Ok(_)).then_some(executed.state)
            })
        };
        let mut skips = 0;
        for task in &tasks {
            let gold = play(task.gold_actions.iter().collect()).expect("gold succeeds");
            let writes: Vec<usize> = (0..task.gold_actions.len())
                .filter(|&at| task.gold_actions[at].name != "find_member_by_email")
                .collect();
            // No write, nor two, can be left out for the same final state.
            for (first, &skipped) in writes.iter().enumerate() {
                for &also in &writes[first..] {
                    skips += 1;
                    let rest = task
                        .gold_actions
                        .iter()
                        .enumerate()
                        .filter(|(at, _)| *at != skipped && *at != also)
                        .map(|(_, call)| call)
                        .collect();
                    assert!(
                        play(rest).is_none_or(|state| state.sha256() != gold.sha256()),
                        "{}: done without calls {skipped} and {also}",
                        task.instruction
                    );
                }
            }
        }
        assert!(
            skips > 20 && tasks.len() > 10,
            "{skips} skips in {} tasks",
            tasks.len()
        );
    }

    #[test]
    fn marks_of_a_write_are_what_it_set_and_kept() {
        let [open, frozen, closed] =
            ["open", "frozen", "closed"].map(|status| json!({"status": status}));
        let (open, frozen, closed) = (Some(&open), Some(&frozen), Some(&closed));
        // Set and kept.
        assert!(marks(open, open, frozen, frozen));
        // Undone: open again at the end.
        assert!(!marks(open, open, frozen, open));
        // An undoing itself leaves nothing the start lacked.
        assert!(!marks(open, frozen, open, open));
        // Overwritten by a later write.
        assert!(!marks(open, open, frozen, closed));
        // Made, then removed; removed and kept so.
        assert!(!marks(None, None, open, None));
        assert!(marks(open, open, None, None));
    }

    #[test]
    fn words_are_found_whole() {
        assert!(holds_word("the flight with status cancelled.", "cancelled"));
        assert!(holds_word("cancelled", "cancelled"));
        assert!(!holds_word("the uncancelled flight", "cancelled"));
        assert!(!holds_word("flight 12", "2"));
        assert!(!holds_word("anything", ""));
    }

    #[test]
    fn repeated_kinds_of_fact_are_all_kept() {
        let mut facts = Map::new();
        know(&mut facts, "new lamp".into(), &json!(29));
        know(&mut facts, "new lamp".into(), &json!(856));
        know(&mut facts, "new lamp".into(), &json!(29));
        know(&mut facts, "new lamp".into(), &json!(7));
        know(&mut facts, "book.title".into(), &json!("Dune"));
        know(&mut facts, "new lamp".into(), &json!(856));
        assert_eq!(
            Value::Object(facts),
            json!({"new lamp": 29, "new lamp 2": 856, "new lamp 3": 7, "book.title": "Dune"})
        );
    }

    #[test]
    fn a_two_write_task_keeps_both_facts() {
        let tasks = lamp_tasks(crate::MAX_REQUIREMENTS);
        let two: Vec<&Task> = tasks
            .iter()
            .filter(|task| task.gold_actions.len() == 2)
            .collect();
        assert!(!two.is_empty(), "some tasks turn two lamps on or off");
        for task in two {
            let lamps: Vec<Value> = task
                .gold_actions
                .iter()
                .map(|call| call.arguments["lamp"].clone())
                .collect();
            let facts = task.user_facts.as_ref().unwrap();
            assert_eq!(
                (&facts["new lamp"], &facts["new lamp 2"]),
                (&lamps[0], &lamps[1]),
                "{facts}"
            );
            let stated = task.stated_facts();
            for lamp in &lamps {
                assert!(stated.contains(&lamp.to_string()), "{stated:?}");
            }
        }
    }

    #[test]
    fn max_requirements_caps_the_requirements_drawn() {
        let tasks = lamp_tasks(1);
        assert!(tasks.len() >= 30, "{} tasks", tasks.len());
        for task in &tasks {
            assert_eq!(task.gold_actions.len(), 1, "{}", task.instruction);
            assert_eq!(task.stats.as_ref().unwrap()["requirements"], 1);
        }
    }
}
