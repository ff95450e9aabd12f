//! The built-in policies, the scripted user, and what a model playing the
//! user is told.

mod gold;
mod random;
mod remembered;
mod replay;
mod scripted_user;
mod user_brief;

pub use gold::GoldPolicy;
pub use random::RandomPolicy;
pub use remembered::remembered_instruction;
pub use replay::{RecordedJudge, ReplayPolicy, ReplayUser, replayed_user};
pub use scripted_user::{ScriptedUser, request, scripted_user};
pub use user_brief::{AGENT_GREETING, USER_STOP, ends_dialogue, user_brief};
