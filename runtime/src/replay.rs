//! Replay: re-execute a recorded episode and prove it byte-identical, or name
//! the first place it diverges.

use crate::environment::{Environment, PreparedTask};
use crate::episode::User;
use crate::episode::{Episode, EpisodeSettings, Judge};
use crate::policy::{RecordedJudge, ReplayPolicy, replayed_user};
use crate::text;
use crate::trajectory::EpisodeRecord;
use anyhow::{Result, bail};
use serde::Serialize;

/// Where a replay first differed from the record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Divergence {
    /// The tool step (0-based), when the divergence is in a step.
    pub step: Option<usize>,
    pub what: String,
}

impl std::fmt::Display for Divergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.step {
            Some(step) => write!(f, "step {step}: {}", self.what),
            None => f.write_str(&self.what),
        }
    }
}

/// Replays `record` on `env`: `Ok(None)` when every step, message, hash and
/// the verdict are identical. Errors when it cannot be replayed there: the
/// record belongs to another environment, names a task `env` lacks, or
/// holds no calls a policy could make again.
pub fn replay_episode(env: &Environment, record: &EpisodeRecord) -> Result<Option<Divergence>> {
    check_recorded_on(env, record)?;
    let Some(task) = env.task(&record.task_id) else {
        bail!(
            "environment `{}` has no task `{}`",
            env.name(),
            record.task_id
        );
    };
    let mut policy = ReplayPolicy::new(record)?;
    let mut user = replayed_user(&task.task, record);
    let mut judge = RecordedJudge::new(record);
    let settings = EpisodeSettings {
        max_turns: record.max_turns,
        seed: record.seed,
    };
    let stopped = |err: anyhow::Error| {
        Ok(Some(Divergence {
            step: None,
            what: format!("the replay stopped: {err:#}"),
        }))
    };
    let episode = match replay_actions(env, task, settings, &mut policy, user.as_mut()) {
        Ok(episode) => episode,
        Err(Stopped { err, episode }) => {
            // Where the dialogue went another way first (the user answered
            // an edited message otherwise), that is the divergence; the
            // stop it led to is only its symptom.
            let Some(episode) = episode else {
                return stopped(err);
            };
            let replayed = episode.messages();
            let Some(index) =
                (0..replayed.len()).find(|&at| record.messages.get(at) != replayed.get(at))
            else {
                return stopped(err);
            };
            let (old, new) = contrasted_or_nothing(record.messages.get(index), replayed.get(index));
            return Ok(Some(Divergence {
                step: None,
                what: format!(
                    "message {index} differs: recorded {old}, replayed {new} (and then the \
                     replay stopped: {err:#})"
                ),
            }));
        }
    };
    let replayed = match episode.finish(
        env,
        task,
        &record.policy,
        None,
        judge.as_mut().map(|judge| judge as &mut dyn Judge),
    ) {
        Ok(replayed) => replayed,
        Err(err) => return stopped(err),
    };
    // A record of an earlier format is compared under its format's name
    // (what it holds, it holds as the current format would).
    let replayed = EpisodeRecord {
        format: record.format.clone(),
        ..replayed
    };
    Ok(first_difference(record, &replayed))
}

/// Refuses `env` for `record` unless it is the very environment the
/// episode was recorded on (its content hash).
pub fn check_recorded_on(env: &Environment, record: &EpisodeRecord) -> Result<()> {
    if record.environment.content_hash != env.content_hash() {
        bail!(
            "the episode was recorded on environment `{}` with content hash {}, but `{}` has {}: \
             another version of it (its tools, rules, initial state, tasks or, for a benchmark \
             suite, the files read from its data directory differ)",
            record.environment.name,
            record.environment.content_hash,
            env.name(),
            env.content_hash()
        );
    }
    Ok(())
}

/// A replay that could not go on: why, and the episode as far as it got
/// (none where it could not start).
struct Stopped {
    err: anyhow::Error,
    episode: Option<Box<Episode>>,
}

/// Runs the recorded agent actions: to the episode's end, or — for an
/// episode cut before its dialogue ended — until they run out.
fn replay_actions(
    env: &Environment,
    task: &PreparedTask,
    settings: EpisodeSettings,
    policy: &mut ReplayPolicy,
    user: &mut dyn User,
) -> Result<Episode, Stopped> {
    let tools = env.component().tools();
    let mut episode =
        Episode::start(env, task, user, settings).map_err(|err| Stopped { err, episode: None })?;
    while !episode.is_over() {
        if let Err(err) = episode.step(policy, user, tools) {
            return Err(Stopped {
                err,
                episode: Some(Box::new(episode)),
            });
        }
    }
    Ok(episode)
}

fn first_difference(recorded: &EpisodeRecord, replayed: &EpisodeRecord) -> Option<Divergence> {
    for (index, (old, new)) in recorded.steps.iter().zip(&replayed.steps).enumerate() {
        let field = |what: &str, old: String, new: String| {
            Some(Divergence {
                step: Some(index),
                what: format!(
                    "`{}` {what} differs: recorded {old}, replayed {new}",
                    recorded.steps[index].tool
                ),
            })
        };
        // The calls replayed are the ones the record's messages make: a call
        // other than its step's is the record disagreeing with itself (an
        // edit), not the environment diverging.
        let disagree = |what: &str, old: String, new: String| {
            Some(Divergence {
                step: Some(index),
                what: format!(
                    "the record's steps and messages disagree on the call's {what}: {old} in \
                     its steps, {new} in its messages (an edited or damaged record)"
                ),
            })
        };
        let difference = if old.tool != new.tool {
            disagree("tool", shown(&old.tool), shown(&new.tool))
        } else if old.actor != new.actor {
            disagree("actor", shown(&old.actor), shown(&new.actor))
        } else if old.arguments != new.arguments {
            let (old, new) = contrasted(&old.arguments, &new.arguments);
            disagree("arguments", old, new)
        } else if old.status != new.status {
            field("status", shown(&old.status), shown(&new.status))
        } else if old.result != new.result {
            let (old, new) = contrasted(&old.result, &new.result);
            field("result", old, new)
        } else if old.fuel != new.fuel {
            field("fuel", shown(&old.fuel), shown(&new.fuel))
        } else if old.state_hash != new.state_hash {
            field("state hash", shown(&old.state_hash), shown(&new.state_hash))
        } else if old.turn != new.turn || old.call_id != new.call_id {
            disagree(
                "turn and id",
                shown(&(old.turn, &old.call_id)),
                shown(&(new.turn, &new.call_id)),
            )
        } else {
            None
        };
        if difference.is_some() {
            return difference;
        }
    }
    let episode = |what: String| Some(Divergence { step: None, what });
    if recorded.steps.len() != replayed.steps.len() {
        return episode(format!(
            "recorded {} tool steps, replayed {}",
            recorded.steps.len(),
            replayed.steps.len()
        ));
    }
    if let Some(index) = (0..recorded.messages.len().max(replayed.messages.len()))
        .find(|&index| recorded.messages.get(index) != replayed.messages.get(index))
    {
        let (old, new) =
            contrasted_or_nothing(recorded.messages.get(index), replayed.messages.get(index));
        return episode(format!(
            "message {index} differs: recorded {old}, replayed {new}"
        ));
    }
    if recorded.final_state_sha256 != replayed.final_state_sha256 {
        return episode(format!(
            "final state sha256 differs: recorded {}, replayed {}",
            recorded.final_state_sha256, replayed.final_state_sha256
        ));
    }
    // A replay reproduces the environment's side; the policy's own trace
    // (token ids of a local model) is not regenerated.
    let recorded_without_trace = EpisodeRecord {
        policy_trace: None,
        ..recorded.clone()
    };
    if &recorded_without_trace != replayed {
        return episode(metadata_difference(&recorded_without_trace, replayed));
    }
    None
}

/// Names the first field of two records that differs, with both values as
/// JSON (shortened), as the trajectory file spells them.
fn metadata_difference(recorded: &EpisodeRecord, replayed: &EpisodeRecord) -> String {
    let as_object = |record: &EpisodeRecord| match serde_json::to_value(record) {
        Ok(serde_json::Value::Object(fields)) => fields,
        _ => serde_json::Map::new(),
    };
    let (recorded, replayed) = (as_object(recorded), as_object(replayed));
    recorded
        .keys()
        .chain(replayed.keys())
        .find(|key| recorded.get(*key) != replayed.get(*key))
        .map_or_else(
            || "the episode metadata differs".to_owned(),
            |key| {
                let (old, new) = contrasted_or_nothing(recorded.get(key), replayed.get(key));
                format!("`{key}` differs: recorded {old}, replayed {new}")
            },
        )
}

/// `value` as the trajectory file spells it (JSON), shortened to 160
/// characters.
fn shown(value: &impl Serialize) -> String {
    text::shortened(&serde_json::to_string(value).unwrap_or_default(), 160)
}

/// Two differing values as [`shown`] spells them, each from a little before
/// the first character where they differ: a long value changed near its end
/// shows the change rather than the same beginning twice.
fn contrasted(old: &impl Serialize, new: &impl Serialize) -> (String, String) {
    /// Characters kept before the first difference.
    const LEAD: usize = 40;
    let old = serde_json::to_string(old).unwrap_or_default();
    let new = serde_json::to_string(new).unwrap_or_default();
    let same = old
        .chars()
        .zip(new.chars())
        .take_while(|(a, b)| a == b)
        .count();
    let skip = same.saturating_sub(LEAD);
    let cut = |text: &str| {
        let rest: String = text.chars().skip(skip).collect();
        let rest = text::shortened(&rest, 160);
        match skip {
            0 => rest,
            _ => format!("…{rest}"),
        }
    };
    (cut(&old), cut(&new))
}

/// [`contrasted`], or `nothing` for a side that has no such value.
fn contrasted_or_nothing<T: Serialize>(old: Option<&T>, new: Option<&T>) -> (String, String) {
    match (old, new) {
        (Some(old), Some(new)) => contrasted(old, new),
        (old, new) => (shown_or_nothing(old), shown_or_nothing(new)),
    }
}

/// [`shown`], or `nothing` where one side has no such value.
fn shown_or_nothing(value: Option<&impl Serialize>) -> String {
    value.map_or_else(|| "nothing".to_owned(), shown)
}
