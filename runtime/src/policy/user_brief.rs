//! What a model playing the simulated user is told: one brief for every
//! kind of model user (a local model in training, a remote one anywhere), so
//! that they play the same part.

/// What a model playing the user says to end the dialogue.
pub const USER_STOP: &str = "###STOP###";

/// What a model playing the user is answering when it opens the dialogue.
pub const AGENT_GREETING: &str = "Hello, how can I help you today?";

/// The system prompt of a model playing the customer whose situation and
/// goal are `instruction`; `own_tools` says it has tools of its own.
pub fn user_brief(instruction: &str, own_tools: bool) -> String {
    let tools = match own_tools {
        true => {
            " You have tools of your own (your phone, your inbox): use them when the agent asks \
             you to check or change something on your side, one call at a time, and tell the \
             agent what you found."
        }
        false => "",
    };
    format!(
        "You are a customer talking to a customer-service agent. Your situation and goal:\n\
         {instruction}\n\nSay one message at a time, as the customer. Give only the information \
         the agent asks for and that your situation contains; never invent facts.{tools} When \
         your goal is met, or cannot be met, reply with exactly {USER_STOP}."
    )
}
