//! The built-in policies and the scripted user.

mod gold;
mod random;
mod replay;
mod scripted_user;
mod unstable_user;

pub use gold::GoldPolicy;
pub use random::RandomPolicy;
pub use replay::{RecordedJudge, ReplayPolicy, ReplayUser};
pub use scripted_user::{ScriptedUser, scripted_user};
pub use unstable_user::UnstableUser;
