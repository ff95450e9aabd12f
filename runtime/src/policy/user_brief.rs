//! What a model playing the simulated user is told, and how it ends the
//! dialogue: the same for every kind of model user (a local model, a
//! remote one), so that they play the same part.

/// What a model playing the user says to end the dialogue.
pub const USER_STOP: &str = "###STOP###";

/// Further endings τ²-bench's user guidelines allow: asking for a human
/// agent, and a request outside the scenario.
const OTHER_ENDINGS: [&str; 2] = ["###TRANSFER###", "###OUT-OF-SCOPE###"];

/// Whether a model user's message ends the dialogue.
pub fn ends_dialogue(message: &str) -> bool {
    message.contains(USER_STOP) || OTHER_ENDINGS.iter().any(|end| message.contains(end))
}

/// What a model playing the user is answering when it opens the dialogue.
pub const AGENT_GREETING: &str = "Hello, how can I help you today?";

/// The system prompt of a model playing the customer whose situation and
/// goal are `instruction`: the environment's own `guidelines` for its users
/// where it has some (τ²-bench's user-simulator guidelines), the
/// instruction following them as the `<scenario>`; otherwise Forge's brief,
/// which says whether the user has tools of its own (`own_tools`).
pub fn user_brief(instruction: &str, own_tools: bool, guidelines: Option<&str>) -> String {
    if let Some(guidelines) = guidelines {
        return format!(
            "{}\n\n<scenario>\n{instruction}\n</scenario>",
            guidelines.trim()
        );
    }
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
