//! τ²-bench (`sierra-research/tau2-bench`): `mock`, `airline`, `retail`,
//! `telecom` and `banking_knowledge`.
//!
//! Layout read from the data directory:
//!
//! ```text
//! tau2-bench/<domain>/db.json|db.toml            the agent's database
//! tau2-bench/<domain>/user_db.json|user_db.toml  the user's (mock, telecom)
//! tau2-bench/<domain>/tasks.json                 [{id, user_scenario, initial_state, evaluation_criteria, …}]
//!                                                (banking_knowledge: tasks/task_*.json, one task each)
//! tau2-bench/<domain>/policy.md                  the agent policy (telecom: main_policy.md + tech_support_manual.md;
//!                                                banking_knowledge: prompts/grep_only.md and its components)
//! tau2-bench/user_simulator/simulation_guidelines[_tools].md  how a model plays the user (optional)
//! ```
//!
//! The reference holds its databases as pydantic models, so they are loaded
//! the way the models dump them ([`crate::pydantic`], driven by the models'
//! schemas in `suites/tau2-<domain>/`), and laid out in the state as
//! [`crate::layout`] describes. Each task becomes a Forge task named by its
//! `id`:
//! - its `initialization_data` merged into the databases, and its
//!   `initialization_actions` (and the tool calls of its `message_history`)
//!   as set-up steps;
//! - the gold actions of its `evaluation_criteria` (the actions the reference
//!   replays to build the gold database), the user's included;
//! - the checks its `reward_basis` counts: DB (the state check),
//!   COMMUNICATE (`communicate_info` as required outputs), ENV_ASSERTION (its
//!   `env_assertions`), ACTION (its gold actions as required calls) and
//!   NL_ASSERTION (its `nl_assertions`, for a judge model).

use crate::layout::{self, Side};
use crate::pydantic::Schema;
use crate::{parse_task, read_json};
use anyhow::{Context, Result, bail};
use forge_pycompat::dict_update;
use forge_runtime::bundle::{
    Assertion, FunctionCall, Manifest, RequiredCall, SetupStep, Task, ToolCall,
};
use forge_runtime::verify::VerifyRules;
use forge_runtime::{Actor, Bundle};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One τ²-bench domain.
pub struct Domain {
    pub name: &'static str,
    /// Where its tasks are.
    pub tasks: TaskFiles,
    /// The agent's database: its file and `DB.model_json_schema()`.
    pub db: Database,
    /// The user's database, in domains whose user has tools.
    pub user_db: Option<Database>,
    /// Reads the agent policy from the domain's directory.
    pub policy: fn(&Path) -> Result<String>,
    pub component: &'static [u8],
    /// Whether the environment syncs its two sides after every call.
    pub sync: bool,
    /// Whether the user has tools (without a database of their own, in
    /// `banking_knowledge`, whose user works on the agent's).
    pub user_tools: bool,
    /// Whether the agent works from a knowledge base (`banking_knowledge`):
    /// its documents (`documents/*.json`) join the state as collection
    /// `documents`, which every task shares, so a task's
    /// `initialization_data` is merged in by a set-up step (`update_db`)
    /// rather than by a state of its own; each task also starts by giving
    /// the toolkit the read-log allowlist the reference's runner derives
    /// from the gold actions; and the state check ignores which
    /// discoverable tools the agent unlocked, which the reference keeps
    /// outside its database.
    pub knowledge_base: bool,
}

/// How a domain's tasks are stored.
pub enum TaskFiles {
    /// `tasks.json`, a list.
    List,
    /// `tasks/task_*.json`, one file each, taken in name order.
    PerTask,
}

/// A database file of a domain and its model's schema.
pub struct Database {
    pub file: &'static str,
    pub schema: &'static str,
}

pub const MOCK: Domain = Domain {
    name: "mock",
    tasks: TaskFiles::List,
    db: Database {
        file: "db.json",
        schema: include_str!("../tau2-mock/db.schema.json"),
    },
    user_db: Some(Database {
        file: "user_db.json",
        schema: include_str!("../tau2-mock/user_db.schema.json"),
    }),
    policy: policy_md,
    component: include_bytes!(concat!(env!("OUT_DIR"), "/tau2-mock.wasm")),
    sync: false,
    user_tools: true,
    knowledge_base: false,
};

pub const AIRLINE: Domain = Domain {
    name: "airline",
    tasks: TaskFiles::List,
    db: Database {
        file: "db.json",
        schema: include_str!("../tau2-airline/db.schema.json"),
    },
    user_db: None,
    policy: policy_md,
    component: include_bytes!(concat!(env!("OUT_DIR"), "/tau2-airline.wasm")),
    sync: false,
    user_tools: false,
    knowledge_base: false,
};

pub const RETAIL: Domain = Domain {
    name: "retail",
    tasks: TaskFiles::List,
    db: Database {
        file: "db.json",
        schema: include_str!("../tau2-retail/db.schema.json"),
    },
    user_db: None,
    policy: policy_md,
    component: include_bytes!(concat!(env!("OUT_DIR"), "/tau2-retail.wasm")),
    sync: false,
    user_tools: false,
    knowledge_base: false,
};

pub const TELECOM: Domain = Domain {
    name: "telecom",
    tasks: TaskFiles::List,
    db: Database {
        file: "db.toml",
        schema: include_str!("../tau2-telecom/db.schema.json"),
    },
    user_db: Some(Database {
        file: "user_db.toml",
        schema: include_str!("../tau2-telecom/user_db.schema.json"),
    }),
    policy: telecom_policy,
    component: include_bytes!(concat!(env!("OUT_DIR"), "/tau2-telecom.wasm")),
    sync: true,
    user_tools: true,
    knowledge_base: false,
};

pub const BANKING: Domain = Domain {
    name: "banking_knowledge",
    tasks: TaskFiles::PerTask,
    db: Database {
        file: "db.json",
        schema: include_str!("../tau2-banking/db.schema.json"),
    },
    user_db: None,
    policy: banking_policy,
    component: include_bytes!(concat!(env!("OUT_DIR"), "/tau2-banking.wasm")),
    sync: false,
    user_tools: true,
    knowledge_base: true,
};

/// `policy.md`.
fn policy_md(dir: &Path) -> Result<String> {
    read_text(&dir.join("policy.md"))
}

/// The telecom policy as the reference's default ("manual") environment
/// assembles it.
fn telecom_policy(dir: &Path) -> Result<String> {
    let main = read_text(&dir.join("main_policy.md"))?;
    let manual = read_text(&dir.join("tech_support_manual.md"))?;
    Ok(format!(
        "<main_policy>\n{main}\n</main_policy>\n<tech_support_policy>\n{manual}\n</tech_support_policy>"
    ))
}

/// The banking policy as the reference's "grep_only" retrieval variant
/// builds it: `prompts/grep_only.md` with each `{{component:NAME}}`
/// replaced by `prompts/components/NAME.md` — one pass, as the reference's
/// `re.sub(r"\{\{component:(\w+)\}\}", …)` makes it (a placeholder a component
/// brings stays as it is, and text that is no placeholder is left alone).
fn banking_policy(dir: &Path) -> Result<String> {
    const OPEN: &str = "{{component:";
    let prompts = dir.join("prompts");
    let template = read_text(&prompts.join("grep_only.md"))?;
    let mut policy = String::with_capacity(template.len());
    let mut rest = template.as_str();
    while let Some(start) = rest.find(OPEN) {
        let after = &rest[start + OPEN.len()..];
        let name_len = after
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        let name = &after[..name_len];
        if name.is_empty() || !after[name_len..].starts_with("}}") {
            policy.push_str(&rest[..start + OPEN.len()]);
            rest = after;
            continue;
        }
        policy.push_str(&rest[..start]);
        policy.push_str(&read_text(
            &prompts.join("components").join(format!("{name}.md")),
        )?);
        rest = &after[name_len + 2..];
    }
    policy.push_str(rest);
    if policy.trim().is_empty() {
        bail!(
            "{}: the policy is empty",
            prompts.join("grep_only.md").display()
        );
    }
    Ok(policy)
}

fn read_text(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

/// The reference user simulator's guidelines
/// (`tau2-bench/user_simulator/simulation_guidelines.md`, or `…_tools.md`
/// for users with tools), without persona guidelines; none when the data
/// directory does not have them.
fn user_guidelines(data: &Path, user_has_tools: bool) -> Result<Option<String>> {
    let name = match user_has_tools {
        true => "simulation_guidelines_tools.md",
        false => "simulation_guidelines.md",
    };
    let path = data.join("tau2-bench/user_simulator").join(name);
    if !path.exists() {
        return Ok(None);
    }
    Ok(Some(read_text(&path)?.replace("<PERSONA_GUIDELINES>", "")))
}

/// A TOML file as JSON; errors name the file.
fn read_toml(path: &Path) -> Result<Value> {
    let text = read_text(path)?;
    let value: toml::Value =
        toml::from_str(&text).with_context(|| format!("{} is not valid TOML", path.display()))?;
    serde_json::to_value(value)
        .with_context(|| format!("{}: not representable as JSON", path.display()))
}

/// A loaded database: the dump of its model, which of its fields are
/// tables, and the model to validate task data against.
struct Loaded {
    schema: Schema,
    tables: Vec<String>,
    db: Map<String, Value>,
}

impl Loaded {
    fn read(dir: &Path, database: &Database) -> Result<Self> {
        let schema = Schema::parse(database.schema)?;
        let path = dir.join(database.file);
        let raw = if database.file.ends_with(".toml") {
            read_toml(&path)?
        } else {
            read_json(&path)?
        };
        let Value::Object(db) = schema
            .dump(&raw)
            .map_err(|error| anyhow::anyhow!("{}: {error}", path.display()))?
        else {
            bail!("{}: the database is not an object", path.display());
        };
        let tables = schema.table_fields();
        Ok(Self { schema, tables, db })
    }

    /// The database with `update` merged in as the reference's `update_db`
    /// does (a recursive dict update, then the model validated again).
    fn merged(&self, update: &Map<String, Value>) -> Result<Map<String, Value>, String> {
        let mut merged = Value::Object(self.db.clone());
        dict_update(&mut merged, update);
        match self.schema.dump(&merged)? {
            Value::Object(db) => Ok(db),
            _ => Err("the database is not an object".into()),
        }
    }
}

/// A domain's databases as loaded.
struct Databases {
    agent: Loaded,
    user: Option<Loaded>,
}

impl Databases {
    /// The state holding both databases, either replaced when given.
    fn state(
        &self,
        agent: Option<&Map<String, Value>>,
        user: Option<&Map<String, Value>>,
    ) -> Value {
        let mut state = Map::new();
        layout::store(
            &mut state,
            Side::Agent,
            agent.unwrap_or(&self.agent.db),
            &self.agent.tables,
        );
        if let Some(loaded) = &self.user {
            layout::store(
                &mut state,
                Side::User,
                user.unwrap_or(&loaded.db),
                &loaded.tables,
            );
        }
        Value::Object(state)
    }
}

/// The parts of a reference task that Forge uses; the rest (description,
/// annotations, natural-language assertions, …) is for human readers and the
/// reference's LLM judge.
#[derive(Deserialize)]
struct Tau2Task {
    id: String,
    user_scenario: UserScenario,
    #[serde(default)]
    initial_state: Option<InitialState>,
    #[serde(default)]
    evaluation_criteria: Option<Criteria>,
}

/// What the reference's user simulator is told (`UserScenario`).
#[derive(Deserialize)]
struct UserScenario {
    #[serde(default)]
    persona: Option<String>,
    instructions: Instructions,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Instructions {
    Structured {
        domain: String,
        reason_for_call: String,
        #[serde(default)]
        known_info: Option<String>,
        #[serde(default)]
        unknown_info: Option<String>,
        task_instructions: String,
    },
    Text(String),
}

#[derive(Deserialize)]
struct InitialState {
    #[serde(default)]
    initialization_data: Option<InitializationData>,
    #[serde(default)]
    initialization_actions: Option<Vec<Value>>,
    #[serde(default)]
    message_history: Option<Vec<Value>>,
}

#[derive(Deserialize)]
struct InitializationData {
    #[serde(default)]
    agent_data: Option<Map<String, Value>>,
    #[serde(default)]
    user_data: Option<Value>,
}

#[derive(Deserialize, Default)]
struct Criteria {
    #[serde(default)]
    actions: Option<Vec<Action>>,
    #[serde(default)]
    env_assertions: Option<Vec<EnvAssertion>>,
    #[serde(default)]
    communicate_info: Option<Vec<String>>,
    #[serde(default)]
    nl_assertions: Option<Vec<String>>,
    /// The checks whose product is the reward; `[DB, COMMUNICATE]` when absent.
    #[serde(default)]
    reward_basis: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct Action {
    name: String,
    arguments: Map<String, Value>,
    #[serde(default = "assistant")]
    requestor: String,
    /// The arguments the ACTION check compares; all of the call's when absent.
    #[serde(default)]
    compare_args: Option<Vec<String>>,
}

/// A function of one side's toolkit (`EnvFunctionCall`).
#[derive(Deserialize)]
struct EnvFunctionCall {
    env_type: String,
    func_name: String,
    #[serde(default)]
    arguments: Map<String, Value>,
}

#[derive(Deserialize)]
struct EnvAssertion {
    #[serde(flatten)]
    call: EnvFunctionCall,
    #[serde(default = "yes")]
    assert_value: bool,
}

fn assistant() -> String {
    "assistant".to_owned()
}

fn yes() -> bool {
    true
}

/// A `requestor` or `env_type` as the side whose tools or functions run.
fn actor(side: &str) -> Result<Actor> {
    match side {
        "assistant" => Ok(Actor::Agent),
        "user" => Ok(Actor::User),
        other => bail!("`{other}` is neither `assistant` nor `user`"),
    }
}

impl EnvFunctionCall {
    fn into_call(self) -> Result<FunctionCall> {
        Ok(FunctionCall {
            actor: actor(&self.env_type).context("env_type")?,
            function: self.func_name,
            arguments: Value::Object(self.arguments),
        })
    }
}

/// Reads `domain` from `data` as a bundle.
pub fn load(domain: &Domain, data: &Path) -> Result<Bundle> {
    let dir = data.join("tau2-bench").join(domain.name);
    if !dir.is_dir() {
        bail!(
            "{} is not a directory: --data must hold `tau2-bench/{}/` as the τ²-bench repository lays out `data/tau2/domains/{}/`",
            dir.display(),
            domain.name,
            domain.name
        );
    }
    let databases = Databases {
        agent: Loaded::read(&dir, &domain.db)?,
        user: domain
            .user_db
            .as_ref()
            .map(|database| Loaded::read(&dir, database))
            .transpose()?,
    };
    let tasks = read_tasks(&dir, &domain.tasks)?
        .into_iter()
        .map(|(path, task)| {
            let id = task.id.clone();
            convert(task, &databases, domain.knowledge_base)
                .with_context(|| format!("{}: task `{id}`", path.display()))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut initial_state = databases.state(None, None);
    if domain.knowledge_base
        && let Value::Object(state) = &mut initial_state
    {
        state.insert(
            layout::DOCUMENTS.to_owned(),
            Value::Object(read_documents(&dir.join("documents"))?),
        );
    }
    let verify = if domain.knowledge_base {
        VerifyRules {
            ignore_fields: vec![format!("{}.unlocked", layout::SESSION)],
            ..VerifyRules::default()
        }
    } else {
        VerifyRules::default()
    };
    Ok(Bundle {
        manifest: Manifest {
            name: format!("tau2-bench-{}", domain.name),
            description: (domain.policy)(&dir)?,
            verify,
            provenance: Some(json!({"suite": format!("tau2-bench/{}", domain.name)})),
            hashes: None,
            // Malformed calls get the reference's own answers.
            check_arguments: false,
            sync: domain.sync,
            user_guidelines: user_guidelines(data, domain.user_tools)?,
            splits: read_splits(&dir)?,
            // The reference's agents transfer by a tool and then a message.
            ending_tools: Vec::new(),
        },
        wasm: Arc::from(domain.component),
        initial_state,
        tasks,
    })
}

/// The reference's named subsets of the tasks (`split_tasks.json`: a name to
/// its task ids), where the domain has them.
fn read_splits(dir: &Path) -> Result<BTreeMap<String, Vec<String>>> {
    let path = dir.join("split_tasks.json");
    if !path.exists() {
        return Ok(BTreeMap::new());
    }
    serde_json::from_value(read_json(&path)?)
        .with_context(|| format!("{}: expected an object of task id lists", path.display()))
}

/// The knowledge base (`documents/*.json`, each `{id, title, content}`) as
/// records `{title, content}` keyed by id. (The reference reads the files
/// in directory order; the state keeps ids in byte order, which decides
/// the order of documents a search ranks equal.)
fn read_documents(dir: &Path) -> Result<Map<String, Value>> {
    #[derive(Deserialize)]
    struct Document {
        id: String,
        title: String,
        content: String,
    }
    let mut documents = Map::new();
    for path in json_files(dir, "")? {
        let document: Document = serde_json::from_value(read_json(&path)?).with_context(|| {
            format!("{}: not a document {{id, title, content}}", path.display())
        })?;
        documents.insert(
            document.id,
            json!({"title": document.title, "content": document.content}),
        );
    }
    if documents.is_empty() {
        bail!("{} holds no documents", dir.display());
    }
    documents.sort_keys();
    Ok(documents)
}

/// The domain's tasks, each with the file it came from.
fn read_tasks(dir: &Path, files: &TaskFiles) -> Result<Vec<(PathBuf, Tau2Task)>> {
    match files {
        TaskFiles::List => {
            let path = dir.join("tasks.json");
            let Value::Array(list) = read_json(&path)? else {
                bail!("{}: not a list of tasks", path.display());
            };
            list.into_iter()
                .enumerate()
                .map(|(index, task)| Ok((path.clone(), parse_task(&path, Some(index), task)?)))
                .collect()
        }
        TaskFiles::PerTask => json_files(&dir.join("tasks"), "task_")?
            .into_iter()
            .map(|path| {
                let task = parse_task(&path, None, read_json(&path)?)?;
                Ok((path, task))
            })
            .collect(),
    }
}

/// The `{prefix}*.json` files of `dir`, in name order.
fn json_files(dir: &Path, prefix: &str) -> Result<Vec<PathBuf>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .map(|entry| entry.map(|entry| entry.path()))
        .collect::<std::io::Result<_>>()
        .with_context(|| format!("reading {}", dir.display()))?;
    paths.retain(|path| {
        path.file_name()
            .and_then(|name| name.to_str())
            .is_some_and(|name| name.starts_with(prefix) && name.ends_with(".json"))
    });
    paths.sort();
    Ok(paths)
}

/// A reference task as a Forge task.
fn convert(task: Tau2Task, databases: &Databases, knowledge_base: bool) -> Result<Task> {
    let criteria = task.evaluation_criteria.unwrap_or_default();
    let basis = criteria
        .reward_basis
        .unwrap_or_else(|| vec!["DB".to_owned(), "COMMUNICATE".to_owned()]);
    if let Some(other) = basis.iter().find(|check| {
        ![
            "DB",
            "COMMUNICATE",
            "NL_ASSERTION",
            "ENV_ASSERTION",
            "ACTION",
        ]
        .contains(&check.as_str())
    }) {
        bail!("evaluation_criteria.reward_basis: unknown check `{other}`");
    }
    let counts = |check: &str| basis.iter().any(|counted| counted == check);
    // The reference skips its state check (scoring it 1) when a task has
    // neither gold actions nor assertions.
    let state_check =
        counts("DB") && (criteria.actions.is_some() || criteria.env_assertions.is_some());
    let actions = criteria.actions.unwrap_or_default();
    let gold_actions: Vec<ToolCall> = actions
        .iter()
        .map(|action| {
            Ok(ToolCall {
                name: action.name.clone(),
                arguments: Value::Object(action.arguments.clone()),
                actor: actor(&action.requestor).with_context(|| {
                    format!("evaluation_criteria.actions: `{}`: requestor", action.name)
                })?,
            })
        })
        .collect::<Result<_>>()?;
    let required_calls = match counts("ACTION") {
        true => actions
            .into_iter()
            .map(|action| RequiredCall {
                name: action.name,
                arguments: Value::Object(action.arguments),
                compare: action.compare_args,
            })
            .collect(),
        false => Vec::new(),
    };
    let assertions = match counts("ENV_ASSERTION") {
        true => criteria
            .env_assertions
            .unwrap_or_default()
            .into_iter()
            .map(|assertion| {
                Ok(Assertion {
                    call: assertion
                        .call
                        .into_call()
                        .context("evaluation_criteria.env_assertions")?,
                    expected: Value::Bool(assertion.assert_value),
                })
            })
            .collect::<Result<_>>()?,
        false => Vec::new(),
    };
    // The reference counts what the agent said only when COMMUNICATE is in
    // the basis, and NL assertions (judged by a model) only when
    // NL_ASSERTION is.
    let required_outputs = match counts("COMMUNICATE") {
        true => criteria.communicate_info.unwrap_or_default(),
        false => Vec::new(),
    };
    let nl_assertions = match counts("NL_ASSERTION") {
        true => criteria.nl_assertions.unwrap_or_default(),
        false => Vec::new(),
    };
    let (initial_state, mut setup) = match task.initial_state {
        Some(initial) => initial_state(initial, databases, knowledge_base)?,
        None => (None, Vec::new()),
    };
    if knowledge_base {
        setup.insert(0, read_log_allowlist(&gold_actions));
    }
    Ok(Task {
        id: task.id,
        instruction: scenario_text(&task.user_scenario),
        gold_actions,
        required_outputs,
        initial_state,
        user_facts: None,
        dag: None,
        gold_final_state_sha256: None,
        stats: None,
        nl_assertions,
        setup,
        state_check,
        assertions,
        required_calls,
    })
}

/// `KnowledgeTools.set_read_log_allowlist` with the discoverable tools the
/// gold actions call, as the reference's runner sets it up for every task
/// (`runner/build.py`, `_derive_read_log_allowlist`): calls of read-only
/// discoverable tools are logged in the database only when the gold calls
/// them too, so that a check the task needs still counts and an extra one
/// does not.
fn read_log_allowlist(gold_actions: &[ToolCall]) -> SetupStep {
    let mut names: Vec<&str> = Vec::new();
    let called = gold_actions
        .iter()
        .filter(|action| action.name == "call_discoverable_agent_tool")
        .filter_map(|action| action.arguments.get("agent_tool_name")?.as_str())
        .filter(|name| !name.is_empty());
    for name in called {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    SetupStep::Function(FunctionCall {
        actor: Actor::Agent,
        function: "set_read_log_allowlist".to_owned(),
        arguments: json!({ "allowlist": names }),
    })
}

/// The task's own initial state, when its `initialization_data` changes the
/// databases (merged in as the reference's `update_db` does), and its set-up
/// steps: the `initialization_actions`, then the tool calls of its
/// `message_history`, which the reference re-executes. (The history's text
/// messages are not shown to the agent.)
fn initial_state(
    initial: InitialState,
    databases: &Databases,
    knowledge_base: bool,
) -> Result<(Option<Value>, Vec<SetupStep>)> {
    let mut setup = initial
        .initialization_actions
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(index, action)| {
            serde_json::from_value::<EnvFunctionCall>(action)
                .context("malformed")
                .and_then(EnvFunctionCall::into_call)
                .map(SetupStep::Function)
                .with_context(|| format!("initial_state.initialization_actions[{index}]"))
        })
        .collect::<Result<Vec<_>>>()?;
    for (index, message) in initial
        .message_history
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        setup.extend(
            history_calls(message)
                .with_context(|| format!("initial_state.message_history[{index}]"))?,
        );
    }
    let Some(data) = initial.initialization_data else {
        return Ok((None, setup));
    };
    let agent = data
        .agent_data
        .as_ref()
        .map(|update| databases.agent.merged(update))
        .transpose()
        .map_err(|error| {
            anyhow::anyhow!("initial_state.initialization_data.agent_data: {error}")
        })?;
    let user = match (data.user_data, &databases.user) {
        (None, _) => None,
        (Some(_), None) => {
            bail!("initial_state.initialization_data.user_data: the domain has no user database")
        }
        (Some(Value::Object(update)), Some(loaded)) => {
            Some(loaded.merged(&update).map_err(|error| {
                anyhow::anyhow!("initial_state.initialization_data.user_data: {error}")
            })?)
        }
        (Some(_), Some(_)) => bail!("initial_state.initialization_data.user_data: not an object"),
    };
    if agent.is_none() && user.is_none() {
        return Ok((None, setup));
    }
    if knowledge_base {
        // Checked above against the model; merged by the component, first
        // as the reference's `set_state` merges it before any action.
        if let Some(update) = data.agent_data {
            setup.insert(0, update_db(update));
        }
        return Ok((None, setup));
    }
    Ok((Some(databases.state(agent.as_ref(), user.as_ref())), setup))
}

/// `KnowledgeTools.update_db(update)`: a task's `agent_data` merged into the
/// database as the reference's `update_db` merges it (`addict.Dict.update`).
fn update_db(update: Map<String, Value>) -> SetupStep {
    SetupStep::Function(FunctionCall {
        actor: Actor::Agent,
        function: "update_db".to_owned(),
        arguments: json!({ "update_data": update }),
    })
}

/// The tool calls of one message of a task's history, as set-up steps: each
/// made by its `requestor` (the assistant unless it says otherwise).
fn history_calls(message: &Value) -> Result<Vec<SetupStep>> {
    let Some(calls) = message.get("tool_calls").and_then(Value::as_array) else {
        return Ok(Vec::new());
    };
    calls
        .iter()
        .enumerate()
        .map(|(index, call)| {
            let name = call
                .get("name")
                .and_then(Value::as_str)
                .with_context(|| format!("tool_calls[{index}] has no `name`"))?;
            let requestor = call
                .get("requestor")
                .and_then(Value::as_str)
                .unwrap_or("assistant");
            Ok(SetupStep::Call(ToolCall {
                name: name.to_owned(),
                arguments: call.get("arguments").cloned().unwrap_or_else(|| json!({})),
                actor: actor(requestor)
                    .with_context(|| format!("tool_calls[{index}].requestor"))?,
            }))
        })
        .collect()
}

/// `str(user_scenario)`: what the reference's user simulator reads.
fn scenario_text(scenario: &UserScenario) -> String {
    let mut lines = Vec::new();
    if let Some(persona) = &scenario.persona {
        lines.push("Persona:".to_owned());
        lines.push(indent(persona));
    }
    lines.push("Instructions:".to_owned());
    lines.push(indent(&instructions_text(&scenario.instructions)));
    lines.join("\n")
}

/// `str(StructuredUserInstructions)` (or the plain text).
fn instructions_text(instructions: &Instructions) -> String {
    match instructions {
        Instructions::Text(text) => text.clone(),
        Instructions::Structured {
            domain,
            reason_for_call,
            known_info,
            unknown_info,
            task_instructions,
        } => {
            let mut lines = vec![
                format!("Domain: {domain}"),
                format!("Reason for call:\n{}", indent(reason_for_call)),
            ];
            if let Some(known) = known_info {
                lines.push(format!("Known info:\n{}", indent(known)));
            }
            if let Some(unknown) = unknown_info {
                lines.push(format!("Unknown info:\n{}", indent(unknown)));
            }
            lines.push(format!("Task instructions:\n{}", indent(task_instructions)));
            lines.join("\n")
        }
    }
}

/// `textwrap.indent(text, "\t")`: a tab before every line that is not blank.
fn indent(text: &str) -> String {
    text.split_inclusive('\n')
        .map(|line| match line.trim().is_empty() {
            true => line.to_owned(),
            false => format!("\t{line}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `re.sub(r"\{\{component:(\w+)\}\}", …)` in one pass: what is no
    /// placeholder stays, and so does a placeholder a component brings.
    #[test]
    fn the_banking_policy_fills_in_its_components_once() {
        let dir = tempfile::tempdir().unwrap();
        let prompts = dir.path().join("prompts");
        std::fs::create_dir_all(prompts.join("components")).unwrap();
        std::fs::write(
            prompts.join("grep_only.md"),
            "A {{component:head}} B {{component: x}} {{component:}} {{component:tail",
        )
        .unwrap();
        std::fs::write(prompts.join("components/head.md"), "[{{component:head}}]").unwrap();
        assert_eq!(
            banking_policy(dir.path()).unwrap(),
            "A [{{component:head}}] B {{component: x}} {{component:}} {{component:tail"
        );
        std::fs::write(prompts.join("grep_only.md"), "{{component:missing}}").unwrap();
        let error = format!("{:#}", banking_policy(dir.path()).unwrap_err());
        assert!(error.contains("missing.md"), "{error}");
    }

    #[test]
    fn indent_skips_blank_lines() {
        assert_eq!(indent("a\n\n b\n"), "\ta\n\n\t b\n");
    }
}
