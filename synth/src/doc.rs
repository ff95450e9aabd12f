//! The domain documentation format: what a person (or an LLM) writes to
//! describe a tool environment.
//!
//! A doc is TOML (or the same structure as JSON). It names the domain, the
//! collections of the state with their fields, and the tools. Tools are
//! described as an API reference would (name, description, parameters) plus
//! annotations that let synthesis run offline, by rule: what kind of operation
//! a tool is (`find`, `get`, `list`, `create`, `update`, `delete`), which
//! collection it works on, its preconditions (`require`), its effects on the
//! target record (`set`, `params`) and on related records (`change`), which
//! fields a user can ask about (`asks`), and how a user would phrase wanting it
//! (`intent`). Fields a user knows (`user_knows`) are what simulated users can
//! say about themselves and the things they refer to. See
//! `env-templates/domains/README.md` for the full reference with an example.

use anyhow::{Context, Result, bail, ensure};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// A domain doc.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DomainDoc {
    pub domain: Domain,
    /// Collections by name, in the order they are generated (referenced
    /// collections must come first).
    pub collections: BTreeMap<String, CollectionDoc>,
    pub tools: Vec<ToolDoc>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Domain {
    /// Lower-case identifier: letters, digits, `-`, `_`.
    pub name: String,
    pub description: String,
    /// The collection whose records are the users who talk to the agent.
    pub persona: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollectionDoc {
    /// The field holding each record's key (e.g. `member_id`).
    pub key_field: String,
    /// Keys are `prefix` + a number (`m1`, `m2`…).
    pub key_prefix: String,
    /// The singular noun used in messages (`member`).
    pub noun: String,
    /// Records in the initial state.
    pub count: usize,
    pub fields: BTreeMap<String, FieldDoc>,
}

/// One field of a record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldDoc {
    #[serde(rename = "type")]
    pub kind: FieldType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A value generator (see [`crate::values`]) for strings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator: Option<String>,
    /// The allowed values.
    #[serde(default, rename = "enum", skip_serializing_if = "Option::is_none")]
    pub choices: Option<Vec<Value>>,
    /// Inclusive bounds for numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// The collection whose key this field holds.
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub references: Option<String>,
    /// No two records share the value.
    #[serde(default)]
    pub unique: bool,
    /// A user can state this value (their own email, a book's title).
    #[serde(default)]
    pub user_knows: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FieldType {
    String,
    Integer,
    Number,
    Boolean,
}

impl FieldType {
    pub fn json_schema_type(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Integer => "integer",
            Self::Number => "number",
            Self::Boolean => "boolean",
        }
    }

    /// Whether `value` is of this type.
    pub fn admits(self, value: &Value) -> bool {
        match self {
            Self::String => value.is_string(),
            Self::Integer => value.is_i64() || value.is_u64(),
            Self::Number => value.is_number(),
            Self::Boolean => value.is_boolean(),
        }
    }
}

/// A piece of an intent template: literal text, or a `{placeholder}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TemplatePart<'a> {
    Text(&'a str),
    Placeholder(&'a str),
}

/// The pieces of an intent template, in order; `None` when a `{` is not
/// closed.
pub fn template_parts(template: &str) -> Option<Vec<TemplatePart<'_>>> {
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let close = open + rest[open..].find('}')?;
        parts.push(TemplatePart::Text(&rest[..open]));
        parts.push(TemplatePart::Placeholder(&rest[open + 1..close]));
        rest = &rest[close + 1..];
    }
    parts.push(TemplatePart::Text(rest));
    Some(parts)
}

/// The most records a collection's initial state holds: enough for any
/// task, few enough that synthesis and every episode's state stay small.
pub const MOST_RECORDS: usize = 10_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolKind {
    /// Look a record up by a unique field; returns `{key_field: key}`.
    Find,
    /// A record by key.
    Get,
    /// Records matching equality filters.
    List,
    /// A new record from arguments and constants.
    Create,
    /// Change a record (by key) from arguments and constants.
    Update,
    /// Remove a record (by key).
    Delete,
}

impl ToolKind {
    pub fn writes(self) -> bool {
        matches!(self, Self::Create | Self::Update | Self::Delete)
    }
}

/// One tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDoc {
    pub name: String,
    pub description: String,
    pub kind: ToolKind,
    pub collection: String,
    /// `find`: the unique field looked up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// `list`: fields that may filter (optional arguments).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filters: Vec<String>,
    /// `list`: filters that must be given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_filters: Vec<String>,
    /// `create`/`update`: fields whose values come from arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub params: Vec<String>,
    /// `create`/`update`: fields set to constants.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub set: BTreeMap<String, Value>,
    /// Preconditions; the call fails, changing nothing, when one does not hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub require: Vec<Condition>,
    /// Effects on records related through a reference field.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub change: Vec<Change>,
    /// `get`/`list`: fields a user may ask about (read-only requirements).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub asks: Vec<String>,
    /// How a user phrases wanting this call, with `{field}` placeholders for
    /// arguments and target-record fields and `{collection.field}` for fields
    /// of records it references.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent: Option<String>,
}

/// A precondition on the target record (`via` absent) or on the record that a
/// reference field of the target (or an argument) points to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Condition {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    pub field: String,
    pub op: Op,
    pub value: Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    #[serde(rename = "==")]
    Eq,
    #[serde(rename = "!=")]
    Ne,
    #[serde(rename = ">")]
    Gt,
    #[serde(rename = ">=")]
    Ge,
    #[serde(rename = "<")]
    Lt,
    #[serde(rename = "<=")]
    Le,
}

impl Op {
    pub fn symbol(self) -> &'static str {
        match self {
            Self::Eq => "==",
            Self::Ne => "!=",
            Self::Gt => ">",
            Self::Ge => ">=",
            Self::Lt => "<",
            Self::Le => "<=",
        }
    }
}

/// An effect on the target record (`via` absent) or on the record that the
/// reference field `via` points to: add a number to a field, or set it to a
/// constant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Change {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    pub field: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set: Option<Value>,
}

impl DomainDoc {
    /// Reads a doc (`.toml` or `.json`) and checks it.
    pub fn read(path: &Path) -> Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let doc: Self = match path.extension().and_then(|ext| ext.to_str()) {
            Some("json") => serde_json::from_str(forge_runtime::bom::strip(&text))
                .with_context(|| format!("{} is malformed", path.display()))?,
            _ => {
                toml::from_str(&text).with_context(|| format!("{} is malformed", path.display()))?
            }
        };
        doc.check()
            .with_context(|| format!("{} is inconsistent", path.display()))?;
        Ok(doc)
    }

    pub fn collection(&self, name: &str) -> Result<&CollectionDoc> {
        self.collections
            .get(name)
            .with_context(|| format!("no collection `{name}`"))
    }

    /// The field `name` of `collection`, the key field included (as a string).
    pub fn field(&self, collection: &str, name: &str) -> Option<FieldDoc> {
        let doc = self.collections.get(collection)?;
        if doc.key_field == name {
            return Some(FieldDoc {
                kind: FieldType::String,
                description: Some(format!("The {}'s id.", doc.noun)),
                generator: None,
                choices: None,
                min: None,
                max: None,
                references: Some(collection.to_owned()),
                unique: true,
                user_knows: false,
            });
        }
        doc.fields.get(name).cloned()
    }

    /// Collections in an order where every referenced collection comes first.
    pub fn generation_order(&self) -> Result<Vec<&str>> {
        let mut order: Vec<&str> = Vec::new();
        while order.len() < self.collections.len() {
            let before = order.len();
            for (name, collection) in &self.collections {
                if order.contains(&name.as_str()) {
                    continue;
                }
                let ready = collection
                    .fields
                    .values()
                    .filter_map(|field| field.references.as_deref())
                    .all(|target| target == name || order.contains(&target));
                if ready {
                    order.push(name);
                }
            }
            if order.len() == before {
                // Those left are on a cycle or wait on one.
                let waiting: Vec<String> = self
                    .collections
                    .keys()
                    .filter(|name| !order.contains(&name.as_str()))
                    .map(|name| format!("`{name}`"))
                    .collect();
                bail!(
                    "the references of the collections {} form a cycle or lead into one: each \
                     collection's records are made after those they reference",
                    waiting.join(", ")
                );
            }
        }
        Ok(order)
    }

    /// Checks names, references and annotations; errors name the tool or field.
    pub fn check(&self) -> Result<()> {
        ensure!(
            Spelling::Domain.admits(&self.domain.name),
            "domain name `{}` must be {}",
            self.domain.name,
            Spelling::Domain
        );
        self.collection(&self.domain.persona)
            .context("domain.persona")?;
        for (name, collection) in &self.collections {
            ensure!(
                Spelling::Domain.admits(name),
                "collection name `{name}` must be {}",
                Spelling::Domain
            );
            ensure!(
                (1..=MOST_RECORDS).contains(&collection.count),
                "collection `{name}`: count {} is not between 1 and {MOST_RECORDS}",
                collection.count
            );
            ensure!(
                !collection.fields.contains_key(&collection.key_field),
                "collection `{name}`: the key field `{}` is implicit; do not list it in fields",
                collection.key_field
            );
            for field_name in collection.fields.keys().chain([&collection.key_field]) {
                ensure!(
                    Spelling::Field.admits(field_name),
                    "collection `{name}`: field name `{field_name}` must be {}",
                    Spelling::Field
                );
            }
            for (field_name, field) in &collection.fields {
                let at = || format!("collection `{name}`, field `{field_name}`");
                if let Some(target) = &field.references {
                    ensure!(
                        self.collections.contains_key(target),
                        "{}: references unknown collection `{target}`",
                        at()
                    );
                    ensure!(
                        field.kind == FieldType::String,
                        "{}: a reference must be a string",
                        at()
                    );
                    ensure!(
                        target != name,
                        "{}: references its own collection, whose keys do not exist yet when \
                         its records are made",
                        at()
                    );
                }
                if let Some(choices) = &field.choices {
                    ensure!(!choices.is_empty(), "{}: `enum` lists no value", at());
                    if let Some(wrong) = choices.iter().find(|choice| !field.kind.admits(choice)) {
                        bail!(
                            "{}: enum value {wrong} is not of its type, {}",
                            at(),
                            field.kind.json_schema_type()
                        );
                    }
                }
                let distinct = match (&field.choices, field.kind) {
                    (Some(choices), _) => Some(
                        choices
                            .iter()
                            .enumerate()
                            .filter(|(at, choice)| !choices[..*at].contains(choice))
                            .count(),
                    ),
                    (None, FieldType::Boolean) => Some(2),
                    _ => None,
                };
                if let Some(distinct) = distinct.filter(|_| field.unique) {
                    ensure!(
                        distinct >= collection.count,
                        "{}: unique, but it takes only {distinct} values for {} records",
                        at(),
                        collection.count
                    );
                }
                if let Some(generator) = &field.generator {
                    ensure!(
                        crate::values::is_generator(generator),
                        "{}: unknown generator `{generator}` (known: {})",
                        at(),
                        crate::values::GENERATORS.join(", ")
                    );
                    ensure!(
                        field.kind == FieldType::String,
                        "{}: generators make strings, and the field is {}",
                        at(),
                        field.kind.json_schema_type()
                    );
                }
                ensure!(
                    (field.min.is_none() && field.max.is_none())
                        || matches!(field.kind, FieldType::Integer | FieldType::Number),
                    "{}: `min` and `max` bound numbers, and the field is {}",
                    at(),
                    field.kind.json_schema_type()
                );
                for (bound, value) in [("min", field.min), ("max", field.max)] {
                    ensure!(
                        value.is_none_or(f64::is_finite),
                        "{}: `{bound}` is {}, not a finite number",
                        at(),
                        value.unwrap_or_default()
                    );
                }
                if let (Some(min), Some(max)) = (field.min, field.max) {
                    ensure!(min <= max, "{}: min is above max", at());
                    ensure!(
                        field.kind != FieldType::Integer || min.ceil() <= max.floor(),
                        "{}: no integer lies from min {min} to max {max}",
                        at()
                    );
                }
            }
        }
        self.generation_order()?;
        ensure!(
            !self.tools.is_empty(),
            "the doc defines no tools: an environment is its tools"
        );
        let mut seen = std::collections::BTreeSet::new();
        for tool in &self.tools {
            ensure!(
                seen.insert(&tool.name),
                "tool `{}` is defined twice",
                tool.name
            );
            self.check_tool(tool)
                .with_context(|| format!("tool `{}`", tool.name))?;
        }
        Ok(())
    }

    fn check_tool(&self, tool: &ToolDoc) -> Result<()> {
        ensure!(
            Spelling::Tool.admits(&tool.name),
            "the name must be {}",
            Spelling::Tool
        );
        let collection = self.collection(&tool.collection)?;
        let field = |name: &str| {
            self.field(&tool.collection, name)
                .with_context(|| format!("`{}` has no field `{name}`", tool.collection))
        };
        for (list, names) in [
            ("filters", &tool.filters),
            ("required_filters", &tool.required_filters),
            ("params", &tool.params),
            ("asks", &tool.asks),
        ] {
            if let Some(name) = repeated(names) {
                bail!("`{list}` names `{name}` twice");
            }
        }
        if let Some(name) = tool.params.iter().find(|name| tool.set.contains_key(*name)) {
            bail!(
                "`{name}` is both in `params` and in `set`: a field comes from the arguments or is a constant"
            );
        }
        match tool.kind {
            ToolKind::Find => {
                let by = tool.by.as_deref().context("a `find` tool needs `by`")?;
                ensure!(field(by)?.unique, "`by` field `{by}` must be unique");
            }
            ToolKind::List => {
                for filter in tool.filters.iter().chain(&tool.required_filters) {
                    field(filter)?;
                }
            }
            ToolKind::Create | ToolKind::Update => {
                for name in tool.params.iter().chain(tool.set.keys()) {
                    ensure!(
                        name != &collection.key_field,
                        "the key field `{name}` cannot be set"
                    );
                    let field = field(name)?;
                    if let Some(value) = tool.set.get(name) {
                        check_constant(name, &field, value)
                            .with_context(|| format!("set `{name}`"))?;
                    }
                }
            }
            ToolKind::Get | ToolKind::Delete => {}
        }
        for name in &tool.asks {
            field(name)?;
        }
        for condition in &tool.require {
            let target = self.via_target(tool, condition.via.as_deref())?;
            let field = self.field(&target, &condition.field).with_context(|| {
                format!("require: `{target}` has no field `{}`", condition.field)
            })?;
            self.check_condition(&target, condition, &field)
                .with_context(|| {
                    format!(
                        "require `{} {} {}`",
                        condition.field,
                        condition.op.symbol(),
                        condition.value
                    )
                })?;
        }
        for change in &tool.change {
            let target = self.via_target(tool, change.via.as_deref())?;
            let field = self
                .field(&target, &change.field)
                .with_context(|| format!("change: `{target}` has no field `{}`", change.field))?;
            ensure!(
                change.add.is_some() != change.set.is_some(),
                "change of `{}`: give exactly one of `add` and `set`",
                change.field
            );
            if let Some(add) = change.add {
                ensure!(
                    matches!(field.kind, FieldType::Integer | FieldType::Number),
                    "change: `add` needs a numeric field, `{}` is not",
                    change.field
                );
                ensure!(
                    add.is_finite(),
                    "change of `{}`: `add` is {add}, not a finite number",
                    change.field
                );
                // An integer is added to as an integer: a fraction would
                // make it a number, and past 2^53 the f64 `add` is read as
                // no longer holds a whole number exactly.
                ensure!(
                    field.kind != FieldType::Integer
                        || (add.fract() == 0.0 && add.abs() <= 9_007_199_254_740_992.0),
                    "change of `{}`: `add` is {add}, but the field is an integer: add a whole \
                     number of at most 2^53",
                    change.field
                );
            }
            if let Some(value) = &change.set {
                check_constant(&change.field, &field, value)
                    .with_context(|| format!("change of `{}`", change.field))?;
            }
        }
        if let Some(intent) = &tool.intent {
            self.check_intent(tool, intent)
                .with_context(|| format!("intent `{intent}`"))?;
        }
        Ok(())
    }

    /// Every placeholder of an intent must name a value its tasks have: a
    /// misspelt one would leave the tool out of every task without a word.
    /// `{field}` is a field of the target record (of the arguments, for a
    /// `create`); `{collection.field}` a field of a record the target
    /// references.
    fn check_intent(&self, tool: &ToolDoc, intent: &str) -> Result<()> {
        let known = |name: &str| match tool.kind {
            ToolKind::Create => tool.params.iter().any(|param| param == name),
            _ => self.field(&tool.collection, name).is_some(),
        };
        let parts = template_parts(intent).context("a `{` is not closed by a `}`")?;
        for part in parts {
            let TemplatePart::Placeholder(placeholder) = part else {
                continue;
            };
            match placeholder.split_once('.') {
                None => ensure!(
                    known(placeholder),
                    "`{{{placeholder}}}` is not {}",
                    match tool.kind {
                        ToolKind::Create => "one of the tool's params",
                        _ => "a field of the tool's collection",
                    }
                ),
                Some((collection, field)) => {
                    ensure!(
                        self.reference_field(tool, collection)
                            .is_some_and(|name| known(name)),
                        "`{{{placeholder}}}`: the target record references no `{collection}`"
                    );
                    ensure!(
                        self.field(collection, field).is_some(),
                        "`{{{placeholder}}}`: `{collection}` has no field `{field}`"
                    );
                }
            }
        }
        Ok(())
    }

    /// `==` and `!=` compare with a value the field can hold: one of its
    /// `enum` values or a constant some tool sets it to; the orderings
    /// compare numbers.
    fn check_condition(
        &self,
        collection: &str,
        condition: &Condition,
        field: &FieldDoc,
    ) -> Result<()> {
        let (name, value) = (&condition.field, &condition.value);
        if !matches!(condition.op, Op::Eq | Op::Ne) {
            ensure!(
                matches!(field.kind, FieldType::Integer | FieldType::Number),
                "`{}` orders only numbers, and `{name}` is of type {}",
                condition.op.symbol(),
                field.kind.json_schema_type()
            );
            ensure!(value.is_number(), "{value} is not a number");
            return Ok(());
        }
        check_constant(name, field, value)?;
        let Some(choices) = &field.choices else {
            return Ok(());
        };
        let set = self.constants_set(collection, name);
        ensure!(
            choices.contains(value) || set.contains(&value),
            "{value} is neither one of `{name}`'s values ({}) nor set by any tool",
            choices
                .iter()
                .chain(set)
                .map(Value::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
        Ok(())
    }

    /// The constants tools write into `field` of `collection` (`set`, and
    /// `change`'s `set` through a reference).
    fn constants_set(&self, collection: &str, field: &str) -> Vec<&Value> {
        let mut constants = Vec::new();
        for tool in &self.tools {
            if tool.collection == collection
                && matches!(tool.kind, ToolKind::Create | ToolKind::Update)
                && let Some(value) = tool.set.get(field)
            {
                constants.push(value);
            }
            for change in &tool.change {
                if change.field == field
                    && self
                        .via_target(tool, change.via.as_deref())
                        .is_ok_and(|target| target == collection)
                    && let Some(value) = &change.set
                {
                    constants.push(value);
                }
            }
        }
        constants
    }

    /// The field of `tool`'s collection that references `collection` (the
    /// first, if several do): through it an intent's
    /// `{collection.field}` is looked up.
    pub fn reference_field(&self, tool: &ToolDoc, collection: &str) -> Option<&String> {
        self.collections[&tool.collection]
            .fields
            .iter()
            .find(|(_, field)| field.references.as_deref() == Some(collection))
            .map(|(name, _)| name)
    }

    /// The collection a `via` reference field of a tool's target points to.
    pub fn via_target(&self, tool: &ToolDoc, via: Option<&str>) -> Result<String> {
        let Some(via) = via else {
            return Ok(tool.collection.clone());
        };
        let field = self.field(&tool.collection, via).with_context(|| {
            format!(
                "`via` field `{via}` is not a field of `{}`",
                tool.collection
            )
        })?;
        field
            .references
            .with_context(|| format!("`via` field `{via}` is not a reference"))
    }
}

/// The longest name a doc may give anything.
const MAX_NAME: usize = 64;

/// The characters a doc's names may hold, by what each name becomes: domain
/// and collection names become directory and file names, tool names become
/// the names agents call, and field names become parts of the generated
/// tools' identifiers.
#[derive(Clone, Copy)]
enum Spelling {
    Domain,
    Tool,
    Field,
}

impl Spelling {
    fn admits(self, name: &str) -> bool {
        let admits_char = |ch: char| match self {
            Self::Domain => ch.is_ascii_lowercase() || ch.is_ascii_digit() || "-_".contains(ch),
            Self::Tool => ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '_',
            Self::Field => ch.is_ascii_alphanumeric() || ch == '_',
        };
        // Names become file names (and, with a prefix, crate names): a
        // long one would pass here and fail the file system mid-build.
        (1..=MAX_NAME).contains(&name.len()) && name.chars().all(admits_char)
    }
}

impl std::fmt::Display for Spelling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Domain => "lower-case letters, digits, `-` or `_`",
            Self::Tool => "lower-case letters, digits or `_`",
            Self::Field => "ASCII letters, digits or `_`",
        })?;
        write!(f, ", at most {MAX_NAME} of them")
    }
}

/// The first name `names` holds twice.
fn repeated(names: &[String]) -> Option<&String> {
    let mut seen = std::collections::BTreeSet::new();
    names.iter().find(|name| !seen.insert(*name))
}

/// A constant a tool writes into a field or compares it with must be of the
/// field's type, and for a `number` field written with a decimal point, as
/// the state holds it (the state's `0.0` never equals `0`). Otherwise a
/// precondition never (or always) holds and the tool drops out of every
/// task without a word.
fn check_constant(name: &str, field: &FieldDoc, value: &Value) -> Result<()> {
    let kind = field.kind.json_schema_type();
    ensure!(
        field.kind.admits(value),
        "{value} is not of `{name}`'s type, {kind}"
    );
    // The initial state holds enum values as the doc writes them.
    let as_held = value.is_f64()
        || field
            .choices
            .as_ref()
            .is_some_and(|choices| choices.contains(value));
    ensure!(
        field.kind != FieldType::Number || as_held,
        "`{name}` is a number field: write {value} as {value}.0, as the state holds it"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
[domain]
name = "parking"
description = "Parking permits."
persona = "drivers"

[collections.drivers]
key_field = "driver_id"
key_prefix = "d"
noun = "driver"
count = 5
fields.name = { type = "string", generator = "person_name", user_knows = true }
fields.email = { type = "string", generator = "email", unique = true, user_knows = true }
fields.credit = { type = "number", min = 0, max = 50 }

[collections.permits]
key_field = "permit_id"
key_prefix = "p"
noun = "permit"
count = 5
fields.driver_id = { type = "string", ref = "drivers" }
fields.zone = { type = "string", enum = ["A", "B"] }

[[tools]]
name = "find_driver_by_email"
kind = "find"
collection = "drivers"
by = "email"
description = "Find a driver."
"#;

    fn parse(extra: &str) -> Result<DomainDoc> {
        let doc: DomainDoc = toml::from_str(&format!("{BASE}{extra}"))?;
        doc.check()?;
        Ok(doc)
    }

    fn error(extra: &str) -> String {
        format!("{:#}", parse(extra).expect_err("the doc should be refused"))
    }

    #[test]
    fn a_consistent_doc_passes() {
        let doc = parse("").unwrap();
        assert_eq!(doc.generation_order().unwrap(), ["drivers", "permits"]);
    }

    #[test]
    fn inconsistencies_are_named() {
        assert!(error("[[tools]]\nname = \"x\"\nkind = \"find\"\ncollection = \"drivers\"\nby = \"name\"\ndescription = \"\"\n").contains("`by` field `name` must be unique"));
        assert!(error("[[tools]]\nname = \"x\"\nkind = \"get\"\ncollection = \"cars\"\ndescription = \"\"\n").contains("no collection `cars`"));
        assert!(
            error("[[tools]]\nname = \"x\"\nkind = \"update\"\ncollection = \"permits\"\nchange = [{ via = \"driver_id\", field = \"name\", add = 1 }]\ndescription = \"\"\n")
                .contains("`add` needs a numeric field")
        );
        assert!(
            error("[[tools]]\nname = \"x\"\nkind = \"update\"\ncollection = \"permits\"\nrequire = [{ via = \"zone\", field = \"credit\", op = \">\", value = 0 }]\ndescription = \"\"\n")
                .contains("`via` field `zone` is not a reference")
        );
        // An integer changed by a fraction, or past where adding is exact.
        let visits = |add: &str| {
            let doc = BASE.replace(
                "fields.credit = { type = \"number\", min = 0, max = 50 }",
                "fields.credit = { type = \"number\", min = 0, max = 50 }\nfields.visits = { type = \"integer\", min = 0, max = 3 }",
            );
            let tool = format!(
                "[[tools]]\nname = \"x\"\nkind = \"update\"\ncollection = \"permits\"\nchange = [{{ via = \"driver_id\", field = \"visits\", add = {add} }}]\ndescription = \"\"\n"
            );
            let doc: DomainDoc = toml::from_str(&format!("{doc}{tool}")).unwrap();
            format!(
                "{:#}",
                doc.check().expect_err("the change should be refused")
            )
        };
        assert!(visits("1.5").contains("`add` is 1.5, but the field is an integer"));
        assert!(visits("9223372036854775807").contains("add a whole number of at most 2^53"));
        assert!(visits("nan").contains("`add` is NaN, not a finite number"));
        // An integer range that holds no integer.
        let doc: DomainDoc = toml::from_str(&BASE.replace(
            "fields.credit = { type = \"number\", min = 0, max = 50 }",
            "fields.credit = { type = \"integer\", min = 0.5, max = 0.7 }",
        ))
        .unwrap();
        assert!(
            format!("{:#}", doc.check().unwrap_err())
                .contains("no integer lies from min 0.5 to max 0.7")
        );
        assert!(error("[[tools]]\nname = \"find_driver_by_email\"\nkind = \"get\"\ncollection = \"drivers\"\ndescription = \"\"\n").contains("defined twice"));
        assert!(error("[[tools]]\nname = \"Get-Driver\"\nkind = \"get\"\ncollection = \"drivers\"\ndescription = \"\"\n").contains("tool `Get-Driver`: the name must be lower-case letters, digits or `_`"));
    }

    #[test]
    fn constants_the_fields_cannot_hold_are_refused() {
        let update = |extra: &str| {
            format!(
                "[[tools]]\nname = \"x\"\nkind = \"update\"\ncollection = \"permits\"\n{extra}\ndescription = \"\"\n"
            )
        };
        // A value outside the enum is one the field can hold once a tool
        // sets it.
        let moves = update(
            "set = { zone = \"C\" }\nrequire = [{ via = \"driver_id\", field = \"credit\", op = \"==\", value = 0.0 }, { field = \"zone\", op = \"!=\", value = \"C\" }]",
        );
        parse(&moves).unwrap();
        // A number field's enum values are held as written.
        let counted = BASE.replace(
            "fields.credit = { type = \"number\", min = 0, max = 50 }",
            "fields.credit = { type = \"number\", enum = [1, 2] }",
        );
        let doc: DomainDoc = toml::from_str(&format!(
            "{counted}[[tools]]\nname = \"x\"\nkind = \"update\"\ncollection = \"drivers\"\nset = {{ credit = 2 }}\nrequire = [{{ field = \"credit\", op = \"==\", value = 1 }}]\ndescription = \"\"\n"
        ))
        .unwrap();
        doc.check().unwrap();
        let update = |extra: &str| {
            format!(
                "{moves}{}",
                update(extra).replacen("name = \"x\"", "name = \"y\"", 1)
            )
        };
        for (extra, expected) in [
            (
                "set = { zone = 1 }",
                "set `zone`: 1 is not of `zone`'s type, string",
            ),
            (
                "require = [{ field = \"zone\", op = \"==\", value = \"a\" }]",
                "require `zone == \"a\"`: \"a\" is neither one of `zone`'s values (\"A\", \"B\", \"C\") nor set by any tool",
            ),
            (
                "require = [{ via = \"driver_id\", field = \"credit\", op = \"!=\", value = 0 }]",
                "write 0 as 0.0",
            ),
            (
                "require = [{ field = \"zone\", op = \">\", value = 0 }]",
                "`>` orders only numbers, and `zone` is of type string",
            ),
            (
                "require = [{ via = \"driver_id\", field = \"credit\", op = \"<\", value = \"zero\" }]",
                "\"zero\" is not a number",
            ),
            (
                "change = [{ via = \"driver_id\", field = \"name\", set = false }]",
                "change of `name`: false is not of `name`'s type, string",
            ),
            (
                "params = [\"zone\", \"zone\"]",
                "`params` names `zone` twice",
            ),
            (
                "params = [\"zone\"]\nset = { zone = \"A\" }",
                "`zone` is both in `params` and in `set`",
            ),
        ] {
            let message = error(&update(extra));
            assert!(message.contains(expected), "{extra}: {message}");
        }
    }

    #[test]
    fn field_names_that_cannot_be_part_of_an_identifier_are_refused() {
        for (from, to) in [
            ("fields.credit =", "fields.\"credit-limit\" ="),
            ("key_field = \"driver_id\"", "key_field = \"driver id\""),
        ] {
            let doc: DomainDoc = toml::from_str(&BASE.replace(from, to)).unwrap();
            let message = format!("{:#}", doc.check().unwrap_err());
            assert!(
                message.contains("must be ASCII letters, digits or `_`"),
                "{message}"
            );
        }
    }

    #[test]
    fn unknown_keys_and_generators_are_refused() {
        let typo = BASE.replace("key_prefix = \"p\"", "key_prefx = \"p\"");
        assert!(
            toml::from_str::<DomainDoc>(&typo)
                .unwrap_err()
                .to_string()
                .contains("key_prefx")
        );
        let generator = BASE.replace("generator = \"person_name\"", "generator = \"nickname\"");
        let doc: DomainDoc = toml::from_str(&generator).unwrap();
        assert!(format!("{:#}", doc.check().unwrap_err()).contains("unknown generator `nickname`"));
    }

    #[test]
    fn values_the_initial_state_cannot_hold_are_refused() {
        let refused = |from: &str, to: &str, expected: &str| {
            let doc: DomainDoc = toml::from_str(&BASE.replace(from, to)).unwrap();
            let message = format!("{:#}", doc.check().unwrap_err());
            assert!(message.contains(expected), "{to}: {message}");
        };
        let zone = "fields.zone = { type = \"string\", enum = [\"A\", \"B\"] }";
        refused(
            zone,
            "fields.zone = { type = \"string\", enum = [] }",
            "`enum` lists no value",
        );
        refused(
            zone,
            "fields.zone = { type = \"integer\", enum = [\"A\"] }",
            "enum value \"A\" is not of its type, integer",
        );
        // Five permits cannot each have their own of two zones or two
        // booleans: drawing them would never end.
        refused(
            zone,
            "fields.zone = { type = \"string\", enum = [\"A\", \"B\"], unique = true }",
            "unique, but it takes only 2 values for 5 records",
        );
        refused(
            zone,
            "fields.zone = { type = \"boolean\", unique = true }",
            "unique, but it takes only 2 values for 5 records",
        );
        refused(
            zone,
            "fields.zone = { type = \"string\", enum = [\"A\", \"A\", \"B\", \"B\", \"C\"], unique = true }",
            "unique, but it takes only 3 values for 5 records",
        );
        // What would be ignored is refused: a generator of strings for a
        // number, bounds on a string.
        refused(
            zone,
            "fields.zone = { type = \"integer\", generator = \"email\" }",
            "field `zone`: generators make strings, and the field is integer",
        );
        refused(
            zone,
            "fields.zone = { type = \"string\", min = 1, max = 3 }",
            "field `zone`: `min` and `max` bound numbers, and the field is string",
        );
        let tools = BASE.find("[[tools]]").unwrap();
        let doc: DomainDoc = toml::from_str(&format!("tools = []\n{}", &BASE[..tools])).unwrap();
        let message = format!("{:#}", doc.check().unwrap_err());
        assert!(message.contains("the doc defines no tools"), "{message}");
        refused(
            "count = 5\nfields.driver_id",
            "count = 100000\nfields.driver_id",
            "count 100000 is not between 1 and 10000",
        );
        refused(
            "fields.driver_id = { type = \"string\", ref = \"drivers\" }",
            "fields.driver_id = { type = \"string\", ref = \"permits\" }",
            "references its own collection",
        );
    }

    #[test]
    fn intents_name_only_values_their_tasks_have() {
        let tool = |kind: &str, extra: &str, intent: &str| {
            format!(
                "[[tools]]\nname = \"x\"\nkind = \"{kind}\"\ncollection = \"permits\"\n{extra}description = \"\"\nintent = \"{intent}\"\n"
            )
        };
        let create = |intent: &str| tool("create", "params = [\"driver_id\", \"zone\"]\n", intent);
        parse(&create("a permit in zone {zone} for {drivers.name}")).unwrap();
        parse(&tool(
            "delete",
            "",
            "drop permit {permit_id} of zone {zone}",
        ))
        .unwrap();
        assert!(
            error(&create("a permit in zone {zoen}"))
                .contains("`{zoen}` is not one of the tool's params")
        );
        assert!(
            error(&tool("delete", "", "drop {colour}"))
                .contains("`{colour}` is not a field of the tool's collection")
        );
        assert!(error(&create("for {drivers.nick}")).contains("`drivers` has no field `nick`"));
        assert!(
            error(&create("for {cars.name}")).contains("the target record references no `cars`")
        );
        assert!(error(&create("in zone {zone")).contains("a `{` is not closed by a `}`"));
    }

    #[test]
    fn bounds_that_are_no_finite_numbers_are_refused_by_name() {
        for (bounds, said) in [
            ("min = nan, max = inf", "`min` is NaN"),
            ("max = inf", "`max` is inf"),
        ] {
            let doc: DomainDoc = toml::from_str(&BASE.replace(
                "fields.credit = { type = \"number\", min = 0, max = 50 }",
                &format!("fields.credit = {{ type = \"number\", {bounds} }}"),
            ))
            .unwrap();
            let error = format!("{:#}", doc.check().unwrap_err());
            assert!(
                error.contains(said) && error.contains("not a finite number"),
                "{error}"
            );
        }
    }

    #[test]
    fn reference_cycles_are_refused() {
        let cyclic = BASE.replace(
            "fields.credit = { type = \"number\", min = 0, max = 50 }",
            "fields.permit_id = { type = \"string\", ref = \"permits\" }",
        );
        let doc: DomainDoc = toml::from_str(&cyclic).unwrap();
        let error = format!("{:#}", doc.check().unwrap_err());
        assert!(error.contains("collections `"), "{error}");
        assert!(error.contains("form a cycle"), "{error}");
    }
}
