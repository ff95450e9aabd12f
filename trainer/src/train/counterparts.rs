//! The policy's counterparts in RL rollouts, as the config's `[user]` and
//! `[judge]` sections set them up: who plays the simulated user (a task's
//! script, a local model, a remote one) and who judges whether it misled
//! the agent (a rule or a remote model).

use super::config::{JudgeKind, JudgeSection, TrainConfig, UserKind, UserSection};
use super::rollout::{MaskJudge, Users};
use crate::checkpoint;
use crate::config::LlamaConfig;
use crate::llama::Llama;
use anyhow::{Context, Result};
use burn::tensor::backend::Backend;
use forge_llm::{ChatClient, ChatConfig, RetryNotice};
use forge_model::tokenizer::ModelTokenizer;
use std::path::Path;
use std::sync::Arc;

/// The seed of a `tiny` user model is apart from the policy's.
const TINY_USER_SEED: u64 = 0x05e4_7111;

pub struct Counterparts<B: Backend> {
    user: UserSection,
    /// A local model user and its tokenizer (frozen).
    user_model: Option<(Llama<B>, ModelTokenizer)>,
    /// The local model user as records name it.
    user_name: String,
    user_client: Option<ChatClient>,
    judge_client: Option<ChatClient>,
}

impl<B: Backend> Counterparts<B> {
    /// `user_model` is the file of a local model user (`None` for `tiny`,
    /// which is made from the seed).
    pub fn new(
        config: &TrainConfig,
        user_model: Option<&Path>,
        device: &B::Device,
    ) -> Result<Self> {
        let user = config.user.clone();
        let precision = config.model.precision;
        let rollouts = config.rl.steps > 0;
        let user_model = match (user.kind, user_model) {
            (UserKind::Model, _) if !rollouts => None,
            (UserKind::Model, Some(path)) => Some((
                Llama::load(path, device)
                    .and_then(|model| model.with_precision(precision))
                    .with_context(|| format!("loading the user model {}", path.display()))?,
                checkpoint::load_tokenizer(path)?,
            )),
            (UserKind::Model, None) => {
                let tokenizer = ModelTokenizer::byte_level();
                let shape = LlamaConfig::tiny(tokenizer.vocab_size());
                let model = Llama::init(shape, config.seed ^ TINY_USER_SEED, device)
                    .with_precision(precision)?;
                Some((model, tokenizer))
            }
            _ => None,
        };
        // Rollouts of a group differ by the user's sampling too.
        let user_client = (user.kind == UserKind::Openai)
            .then(|| {
                let config =
                    ChatConfig::new(&user.base_url, &user.model).key_from_env(&user.api_key_env);
                ChatClient::new(config).context("the user's endpoint ([user])")
            })
            .transpose()?;
        let JudgeSection {
            kind,
            model,
            base_url,
            api_key_env,
        } = &config.judge;
        let judge_client = (*kind == JudgeKind::Openai)
            .then(|| {
                ChatClient::new(ChatConfig::new(base_url, model).key_from_env(api_key_env))
                    .context("the judge's endpoint ([judge])")
            })
            .transpose()?;
        let user_name = format!("model:{}", user.model);
        Ok(Self {
            user,
            user_model,
            user_name,
            user_client,
            judge_client,
        })
    }

    pub fn users(&self) -> Users<'_> {
        match (&self.user_model, &self.user_client) {
            (Some((_, tokenizer)), _) => Users::Model {
                tokenizer,
                name: &self.user_name,
                temperature: self.user.temperature as f32,
                max_tokens: self.user.max_new_tokens,
            },
            (None, Some(client)) => Users::Remote {
                client,
                sampling: forge_llm::Sampling {
                    temperature: self.user.temperature,
                    ..Default::default()
                },
            },
            (None, None) => Users::Scripted,
        }
    }

    pub fn user_model(&self) -> Option<&Llama<B>> {
        self.user_model.as_ref().map(|(model, _)| model)
    }

    /// Tells `notice` of each retry of the remote user's and judge's
    /// requests: a rate-limited endpoint otherwise only slows the steps.
    pub fn tell_retries(&self, notice: &RetryNotice) {
        for client in self.user_client.iter().chain(&self.judge_client) {
            client.on_retry(Arc::clone(notice));
        }
    }

    /// The masking judge (`None` when masking is off).
    pub fn judge(&self, masking: bool) -> Option<MaskJudge<'_>> {
        masking.then_some(match &self.judge_client {
            Some(client) => MaskJudge::Remote(client),
            None => MaskJudge::Rule,
        })
    }
}
