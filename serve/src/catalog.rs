//! The environments a server offers, and how a new episode picks its task.

use crate::ServeError;
use forge_runtime::{Environment, PreparedTask};
use std::collections::BTreeSet;
use std::sync::Arc;

/// The loaded environments, in the order given; their names are unique.
pub struct Catalog {
    envs: Vec<Arc<Environment>>,
}

/// A task of the catalog: its environment and its index there.
#[derive(Clone)]
pub struct TaskRef {
    pub env: Arc<Environment>,
    pub index: usize,
}

impl TaskRef {
    pub fn task(&self) -> &PreparedTask {
        &self.env.tasks()[self.index]
    }

    /// `env/task`: unique across the catalog.
    pub fn qualified_id(&self) -> String {
        format!("{}/{}", self.env.name(), self.task().task.id)
    }
}

impl Catalog {
    /// Refuses an empty list, two environments of one name and environments
    /// without tasks: a client could not tell them apart or start anything.
    pub fn new(envs: Vec<Environment>) -> anyhow::Result<Self> {
        if envs.is_empty() {
            anyhow::bail!("no environment to serve");
        }
        let mut names = BTreeSet::new();
        for env in &envs {
            if !names.insert(env.name().to_owned()) {
                anyhow::bail!(
                    "two environments are named `{}`; serve one of them",
                    env.name()
                );
            }
            if env.tasks().is_empty() {
                anyhow::bail!("environment `{}` has no tasks", env.name());
            }
        }
        Ok(Self {
            envs: envs.into_iter().map(Arc::new).collect(),
        })
    }

    pub fn envs(&self) -> &[Arc<Environment>] {
        &self.envs
    }

    pub fn env(&self, name: &str) -> Option<&Arc<Environment>> {
        self.envs.iter().find(|env| env.name() == name)
    }

    /// Every task, environment by environment.
    pub fn task_count(&self) -> usize {
        self.envs.iter().map(|env| env.tasks().len()).sum()
    }

    /// The `ordinal`-th task of the catalog (wrapping around).
    pub fn nth(&self, ordinal: u64) -> TaskRef {
        let mut rest = (ordinal % self.task_count() as u64) as usize;
        for env in &self.envs {
            if rest < env.tasks().len() {
                return TaskRef {
                    env: env.clone(),
                    index: rest,
                };
            }
            rest -= env.tasks().len();
        }
        unreachable!("the ordinal is below the task count")
    }

    /// The task a reset asks for: `task_id` is a task's id — `env/task`, or
    /// the bare id when one environment has it — and `env` narrows the search
    /// (without `task_id`: that environment's `ordinal`-th task).
    pub fn find(
        &self,
        env: Option<&str>,
        task_id: Option<&str>,
        ordinal: u64,
    ) -> Result<TaskRef, ServeError> {
        let envs: Vec<&Arc<Environment>> = match env {
            Some(name) => vec![self.env(name).ok_or_else(|| {
                ServeError::NotFound(format!(
                    "no environment `{name}` here (serving: {})",
                    self.env_names().join(", ")
                ))
            })?],
            None => self.envs.iter().collect(),
        };
        let Some(task_id) = task_id else {
            return Ok(match env {
                Some(_) => {
                    let env = envs[0];
                    TaskRef {
                        env: env.clone(),
                        index: (ordinal % env.tasks().len() as u64) as usize,
                    }
                }
                None => self.nth(ordinal),
            });
        };
        let (env_part, bare) = match task_id.split_once('/') {
            Some((env_name, bare)) if self.env(env_name).is_some() => (Some(env_name), bare),
            _ => (None, task_id),
        };
        let matches: Vec<TaskRef> = envs
            .iter()
            .filter(|env| env_part.is_none_or(|name| env.name() == name))
            .filter_map(|env| {
                env.tasks()
                    .iter()
                    .position(|task| task.task.id == bare)
                    .map(|index| TaskRef {
                        env: (*env).clone(),
                        index,
                    })
            })
            .collect();
        match matches.len() {
            1 => Ok(matches.into_iter().next().expect("one match")),
            0 => Err(ServeError::NotFound(format!("no task `{task_id}` here"))),
            // There, but which is not said: the request is at fault.
            _ => Err(ServeError::BadRequest(format!(
                "task `{task_id}` is in several environments ({}); name it `env/task`",
                matches
                    .iter()
                    .map(|task| task.env.name().to_owned())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    pub fn env_names(&self) -> Vec<String> {
        self.envs.iter().map(|env| env.name().to_owned()).collect()
    }
}
