//! The built-in policies, the scripted user, and what a model playing the
//! user is told.

mod gold;
mod random;
mod replay;
mod scripted_user;
mod unstable_user;
mod user_brief;

pub use gold::GoldPolicy;
pub use random::RandomPolicy;
pub use replay::{RecordedJudge, ReplayPolicy, ReplayUser};
pub use scripted_user::{ScriptedUser, scripted_user};
pub use unstable_user::{UnstableUser, remembered_instruction};
pub use user_brief::{AGENT_GREETING, USER_STOP, user_brief};
