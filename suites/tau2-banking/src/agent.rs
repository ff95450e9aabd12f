//! `KnowledgeTools`: the agent's toolkit — its fixed tools, and the
//! mechanism through which it unlocks and calls the discoverable tools the
//! knowledge base names.
//!
//! The reference keeps which tools the agent has unlocked, and which read
//! calls to log (the task's read-log allowlist), in the toolkit object
//! rather than the database. A component keeps nothing between calls, so
//! both live in record `agent` of collection [`SESSION`], which the host
//! leaves out of the database it hashes, and whose `unlocked` list its
//! state check ignores (the reference's evaluation never sees it).

use crate::db::{self as bank_db, Tables, query_database_tool};
use crate::discoverable::{self, Doc, members};
use crate::ids;
use crate::knowledge;
use crate::py::{Raised, dumps_indent, loads_floats};
use forge_tau_guest::toolkit::{Answer, Toolkit, function, tool};
use forge_tau_guest::{Data, Kwargs, dict_key, py_str, type_name};
use serde_json::{Map, Value, json};

/// The collection of the toolkit's own state.
const SESSION: &str = "session";
/// Its record.
const AGENT_SESSION: &str = "agent";

/// The reasons `transfer_to_human_agents` accepts (`TransferReasonLiteral`).
const TRANSFER_REASONS: &[&str] = &[
    "fraud_or_security_concern",
    "account_closure_request",
    "deceased_account_holder",
    "legal_or_regulatory_matter",
    "account_ownership_dispute",
    "complex_billing_dispute",
    "abusive_customer_behavior",
    "third_party_inquiry",
    "technical_system_error",
    "unconfirmed_external_communication",
    "customer_demands_after_unavailable_offer_refusal",
    "kb_search_unsuccessful_customer_requests_transfer",
    "specialized_department_required",
    "accessibility_or_special_needs",
    "customer_frustrated_demands_human",
    "supervisor_request_service_complaint",
    "customer_requests_human_no_specific_reason",
    "request_completed_customer_wants_human_followup",
    "other",
];

/// The agent's tools in the reference's order, then its other methods.
pub static AGENT: Toolkit = Toolkit {
    class: "KnowledgeTools",
    schemas: include_str!("../tools.json"),
    methods: &[
        tool("grep", &[("pattern", true)], knowledge::grep),
        tool(
            "transfer_to_human_agents",
            &[("summary", true), ("reason", false)],
            transfer_to_human_agents,
        ),
        tool("get_current_time", &[], get_current_time),
        tool(
            "get_user_information_by_id",
            &[("user_id", true)],
            get_user_information_by_id,
        ),
        tool(
            "get_user_information_by_name",
            &[("customer_name", true)],
            get_user_information_by_name,
        ),
        tool(
            "get_user_information_by_email",
            &[("email", true)],
            get_user_information_by_email,
        ),
        tool(
            "change_user_email",
            &[("user_id", true), ("new_email", true)],
            change_user_email,
        ),
        tool(
            "get_referrals_by_user",
            &[("user_id", true)],
            get_referrals_by_user,
        ),
        tool(
            "get_credit_card_transactions_by_user",
            &[("user_id", true)],
            get_credit_card_transactions_by_user,
        ),
        tool(
            "get_credit_card_accounts_by_user",
            &[("user_id", true)],
            get_credit_card_accounts_by_user,
        ),
        tool(
            "log_verification",
            &[
                ("name", true),
                ("user_id", true),
                ("address", true),
                ("email", true),
                ("phone_number", true),
                ("date_of_birth", true),
                ("time_verified", true),
            ],
            log_verification,
        ),
        tool(
            "give_discoverable_user_tool",
            &[("discoverable_tool_name", true), ("arguments", false)],
            give_discoverable_user_tool,
        ),
        tool(
            "unlock_discoverable_agent_tool",
            &[("agent_tool_name", true)],
            unlock_discoverable_agent_tool,
        ),
        tool(
            "call_discoverable_agent_tool",
            &[("agent_tool_name", true), ("arguments", false)],
            call_discoverable_agent_tool,
        ),
        tool(
            "list_discoverable_agent_tools",
            &[],
            list_discoverable_agent_tools,
        ),
        function(
            "set_read_log_allowlist",
            &[("allowlist", true)],
            set_read_log_allowlist,
        ),
        function("update_db", &[("update_data", false)], update_db),
    ],
    attributes: &[
        "_user_discoverable_tools_state",
        "_agent_discoverable_tools_state",
        "_read_log_allowlist",
        "get_user_discoverable_tools_state",
        "get_agent_discoverable_tools_state",
    ],
};

/// The session record a fresh environment starts with.
fn fresh_session() -> Map<String, Value> {
    let empty = || Value::Array(Vec::new());
    Map::from_iter([
        ("read_log_allowlist".to_owned(), empty()),
        ("unlocked".to_owned(), empty()),
    ])
}

/// The session record, or a fresh one.
fn session(data: &Data<'_>) -> Result<Map<String, Value>, String> {
    match data.get(SESSION, AGENT_SESSION)? {
        Some(Value::Object(record)) => Ok(record),
        _ => Ok(fresh_session()),
    }
}

/// The names a session list holds.
fn session_names(session: &Map<String, Value>, list: &str) -> Vec<String> {
    session
        .get(list)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

fn text(message: String) -> Result<Answer, String> {
    Ok(Answer::Text(message))
}

/// `transfer_to_human_agents(summary, reason="other")`.
fn transfer_to_human_agents(_: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let reason = kwargs
        .optional("reason")
        .cloned()
        .unwrap_or_else(|| Value::String("other".to_owned()));
    let known = reason
        .as_str()
        .is_some_and(|reason| TRANSFER_REASONS.contains(&reason));
    if !known {
        return text(format!(
            "Error: Invalid transfer reason '{}'. Must be one of: {}",
            py_str(&reason),
            TRANSFER_REASONS.join(", ")
        ));
    }
    text(format!(
        "Transfer successful (reason: {}). A human agent will assist you shortly.",
        py_str(&reason)
    ))
}

/// `get_current_time()`: the domain's fixed clock.
fn get_current_time(_: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    text("The current time is 2025-11-14 03:40:00 EST.".to_owned())
}

/// A lookup the reference writes as `query_database_tool(table,
/// f'{{"field": "{value}"}}')`: the constraint is JSON text built by string
/// formatting, so a value holding a quote makes it invalid JSON, as there.
fn lookup(data: &Data<'_>, table: &str, field: &str, value: &Value) -> Result<Answer, String> {
    let constraints = format!("{{\"{field}\": \"{}\"}}", py_str(value));
    text(query_database_tool(data, table, &constraints))
}

/// `get_user_information_by_id(user_id)`.
fn get_user_information_by_id(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    lookup(data, "users", "user_id", kwargs.get("user_id")?)
}

/// `get_user_information_by_name(customer_name)`.
fn get_user_information_by_name(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    lookup(data, "users", "name", kwargs.get("customer_name")?)
}

/// `get_user_information_by_email(email)`.
fn get_user_information_by_email(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    lookup(data, "users", "email", kwargs.get("email")?)
}

/// `get_referrals_by_user(user_id)`.
fn get_referrals_by_user(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    lookup(data, "referrals", "referrer_id", kwargs.get("user_id")?)
}

/// `get_credit_card_transactions_by_user(user_id)`.
fn get_credit_card_transactions_by_user(
    data: &mut Data<'_>,
    kwargs: &Kwargs,
) -> Result<Answer, String> {
    let user_id = kwargs.get("user_id")?;
    lookup(data, "credit_card_transaction_history", "user_id", user_id)
}

/// `get_credit_card_accounts_by_user(user_id)`.
fn get_credit_card_accounts_by_user(
    data: &mut Data<'_>,
    kwargs: &Kwargs,
) -> Result<Answer, String> {
    lookup(
        data,
        "credit_card_accounts",
        "user_id",
        kwargs.get("user_id")?,
    )
}

/// `change_user_email(user_id, new_email)`.
fn change_user_email(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let user_id = kwargs.get("user_id")?;
    let new_email = kwargs.get("new_email")?;
    // `user_id not in table.data`: ids are strings, an unhashable key raises.
    let updated = match dict_key(user_id)? {
        Some(id) => data.update("users", id, vec![("email", new_email.clone())])?,
        None => None,
    };
    if updated.is_none() {
        return text(format!(
            "Error: User with ID '{}' not found.",
            py_str(user_id)
        ));
    }
    text(format!(
        "Email updated successfully.\n  - User ID: {}\n  - New Email: {}",
        py_str(user_id),
        py_str(new_email)
    ))
}

/// `log_verification(...)`: an audit record of a verified identity, keyed
/// by the user and the time.
fn log_verification(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let fields = [
        "name",
        "user_id",
        "address",
        "email",
        "phone_number",
        "date_of_birth",
        "time_verified",
    ];
    let mut record = Map::new();
    for field in fields {
        record.insert(field.to_owned(), kwargs.get(field)?.clone());
    }
    let user_id = py_str(kwargs.get("user_id")?);
    let time_verified = kwargs.get("time_verified")?;
    let Some(time) = time_verified.as_str() else {
        return Err(format!(
            "'{}' object has no attribute 'replace'",
            type_name(time_verified)
        ));
    };
    let id = ids::verification(&user_id, time);
    if !data.add("verification_history", &id, Value::Object(record))? {
        return text("Failed to log verification: Record may already exist.".to_owned());
    }
    text(format!(
        "Verification logged successfully.\n  - User: {} (ID: {user_id})\n  - Verified at: {time}",
        py_str(kwargs.get("name")?)
    ))
}

/// The `arguments` parameter: JSON text, `"{}"` by default.
fn arguments_text(kwargs: &Kwargs) -> Result<&str, String> {
    match kwargs.optional("arguments") {
        None => Ok("{}"),
        Some(Value::String(text)) => Ok(text),
        Some(other) => Err(format!(
            "the JSON object must be str, bytes or bytearray, not {}",
            type_name(other)
        )),
    }
}

/// `give_discoverable_user_tool(discoverable_tool_name, arguments="{}")`:
/// hands the user one of their discoverable tools, recorded in
/// `user_discoverable_tools`. The arguments are only checked, each member of
/// whatever JSON they hold (`for arg_name in args_dict`) against the tool's
/// signature.
fn give_discoverable_user_tool(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    // `hasattr(KnowledgeUserTools, name)` takes nothing but a string.
    let name = kwargs.get("discoverable_tool_name")?;
    let Some(name) = name.as_str() else {
        return Err(format!(
            "attribute name must be string, not '{}'",
            type_name(name)
        ));
    };
    let Some(doc) = discoverable::user_docs()
        .iter()
        .find(|doc| doc.name == name)
    else {
        return text(format!("Error: Unknown discoverable tool '{name}'."));
    };
    let arguments = match serde_json::from_str::<Value>(arguments_text(kwargs)?) {
        Ok(arguments) => arguments,
        Err(err) => return text(format!("Error: Invalid JSON in arguments: {err}")),
    };
    let parameters = doc.signature();
    for member in members(&arguments)? {
        // `arg_name not in sig.parameters and arg_name != "self"`.
        let known = match dict_key(&member)? {
            Some(member) => {
                member == "self" || parameters.iter().any(|(param, _)| *param == member)
            }
            None => false,
        };
        if !known {
            return text(format!("Error: Unexpected parameter: {}", py_str(&member)));
        }
    }
    let record = json!({"tool_name": name, "status": "GIVEN"});
    data.add(
        "user_discoverable_tools",
        &ids::user_discoverable_tool(name),
        record,
    )?;
    let shown = if forge_tau_guest::truthy(&arguments) {
        dumps_indent(&arguments, 2)
    } else {
        "(no arguments)".to_owned()
    };
    text(format!(
        "Tool given to user: {name}\nDescription: {}\nArguments: {shown}\n\n\
         The user can now execute this action by calling `call_discoverable_user_tool` \
         with discoverable_tool_name='{name}' and the same arguments.",
        doc.description
    ))
}

/// `format_discoverable_tool_for_agent`: the tool as the agent reads it.
fn format_for_agent(doc: &Doc) -> String {
    let parameters: Vec<String> = doc
        .parameters
        .iter()
        .map(|(name, definition)| {
            let field = |key: &str| definition.get(key);
            let required = field("required").and_then(Value::as_bool).unwrap_or(true);
            let kind = field("type").map_or_else(|| "string".to_owned(), py_str);
            let description = field("description").map_or_else(String::new, py_str);
            let marker = if required {
                " (required)"
            } else {
                " (optional)"
            };
            format!("  - {name}: {kind}{marker} - {description}")
        })
        .collect();
    let parameters = match parameters.is_empty() {
        true => "  (no parameters)".to_owned(),
        false => parameters.join("\n"),
    };
    format!(
        "Tool: {}\nDescription: {}\nParameters:\n{parameters}",
        doc.name, doc.description
    )
}

/// The agent's discoverable tool named by `name` (`has_discoverable_tool`:
/// any value that is no string names none, an unhashable one is Python's
/// `TypeError`), or the reference's refusal (`Ok(Err(…))`).
#[allow(clippy::type_complexity)]
fn agent_tool(
    name: &Value,
) -> Result<Result<(String, &'static Doc, discoverable::Run), String>, String> {
    let found = dict_key(name)?.and_then(discoverable::agent_tool);
    let name = py_str(name);
    Ok(match found {
        Some((doc, run)) => Ok((name, doc, run)),
        None => Err(format!(
            "Error: Unknown agent tool '{name}'. This tool is not available."
        )),
    })
}

/// `unlock_discoverable_agent_tool(agent_tool_name)`.
fn unlock_discoverable_agent_tool(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let (name, doc) = match agent_tool(kwargs.get("agent_tool_name")?)? {
        Ok((name, doc, _)) => (name, doc),
        Err(refusal) => return text(refusal),
    };
    let mut session = session(data)?;
    let mut unlocked = session_names(&session, "unlocked");
    if !unlocked.contains(&name) {
        unlocked.push(name.clone());
        session.insert("unlocked".to_owned(), json!(unlocked));
        data.put(SESSION, AGENT_SESSION, &Value::Object(session))?;
    }
    text(format!(
        "Tool unlocked: {name}\nDescription: {}\n\n{}\n\n\
         You can now use this tool by calling `call_discoverable_agent_tool` with \
         agent_tool_name='{name}' and the required arguments.",
        doc.description,
        format_for_agent(doc)
    ))
}

/// `call_discoverable_agent_tool(agent_tool_name, arguments="{}")`: runs an
/// unlocked tool with the arguments (every number a float, as the reference
/// parses them), then logs the call in `agent_discoverable_tools` when the
/// tool changes state or the task's allowlist names it. A call ending in a
/// `TypeError` (arguments that do not fit the signature, or one the body
/// raises) is answered `Error: Invalid arguments: …` and not logged, though
/// what the body wrote before raising stays, as in Python; any other
/// exception leaves the tool (`Err`).
fn call_discoverable_agent_tool(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let (name, doc, run) = match agent_tool(kwargs.get("agent_tool_name")?)? {
        Ok(found) => found,
        Err(refusal) => return text(refusal),
    };
    let session = session(data)?;
    if !session_names(&session, "unlocked").contains(&name) {
        return text(format!(
            "Error: Tool '{name}' has not been unlocked. You must first use \
             `unlock_discoverable_agent_tool` to unlock this tool before calling it."
        ));
    }
    let arguments = match loads_floats(arguments_text(kwargs)?) {
        Ok(arguments) => arguments,
        Err(err) => return text(format!("Error: Invalid JSON in arguments: {err}")),
    };
    let outcome = if arguments.is_object() {
        let callee = format!("KnowledgeTools.{name}");
        Kwargs::bind(&arguments.to_string(), callee, &doc.signature())
            .map_err(Raised::Type)
            .and_then(|bound| run(data, &bound))
    } else {
        Err(Raised::Type(format!(
            "tau2.domains.banking_knowledge.tools.KnowledgeTools.{name}() argument after ** \
             must be a mapping, not {}",
            type_name(&arguments)
        )))
    };
    let answer = match outcome {
        Ok(answer) => answer,
        Err(Raised::Type(type_error)) => return text(invalid_arguments(&type_error)),
        Err(Raised::Other(error)) => return Err(error),
    };
    if doc.mutates_state || session_names(&session, "read_log_allowlist").contains(&name) {
        let record = json!({"tool_name": name, "status": "CALLED"});
        data.add(
            "agent_discoverable_tools",
            &ids::agent_discoverable_tool(&name),
            record,
        )?;
    }
    text(answer)
}

/// `call_discoverable_agent_tool`'s answer to a `TypeError`.
pub fn invalid_arguments(type_error: &str) -> String {
    format!("Error: Invalid arguments: {type_error}")
}

/// `list_discoverable_agent_tools()`. The test for "No results found"
/// mirrors the reference's check, dead in practice: `query_database_tool`
/// never writes it (an empty table is "No records found", shown under the
/// heading), so only a record holding that very text would trip it.
fn list_discoverable_agent_tools(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    let listing = query_database_tool(data, "agent_discoverable_tools", "{}");
    if listing.contains("No results found") {
        return text(
            "No agent tools have been called yet. Search the knowledge base to discover available tools."
                .to_owned(),
        );
    }
    text(format!("Your called agent tools:\n{listing}"))
}

/// `set_read_log_allowlist(allowlist)`: which read-only discoverable tools'
/// calls are logged — the task's gold ones, set before the episode as the
/// reference's runner does.
fn set_read_log_allowlist(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let names = kwargs.str_list("allowlist")?;
    let mut session = session(data)?;
    session.insert("read_log_allowlist".to_owned(), json!(names));
    data.put(SESSION, AGENT_SESSION, &Value::Object(session))?;
    Ok(Answer::Nothing)
}

/// `update_db(update_data=None)`: a task's `initialization_data.agent_data`
/// merged into the database before the episode.
fn update_db(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    match kwargs.optional("update_data") {
        None | Some(Value::Null) => {}
        Some(Value::Object(update)) => bank_db::update_db(data, update)?,
        Some(other) => {
            return Err(format!(
                "'{}' object has no attribute 'items'",
                type_name(other)
            ));
        }
    }
    Ok(Answer::Nothing)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discoverable::reference_bank;
    use forge_guest::Store;

    fn call(store: &mut dyn Store, name: &str, args: Value) -> String {
        AGENT
            .call(store, name, &args.to_string())
            .unwrap_or_else(|err| format!("Error: {err}"))
    }

    /// Outputs of the reference's `KnowledgeTools` on `db.json`.
    #[test]
    fn fixed_tools_answer_as_the_reference_does() {
        let store = &mut reference_bank();
        assert_eq!(
            call(
                store,
                "transfer_to_human_agents",
                json!({"summary": "s", "reason": "nope"})
            ),
            format!(
                "Error: Invalid transfer reason 'nope'. Must be one of: {}",
                TRANSFER_REASONS.join(", ")
            )
        );
        assert_eq!(
            call(store, "transfer_to_human_agents", json!({"summary": "s"})),
            "Transfer successful (reason: other). A human agent will assist you shortly."
        );
        assert_eq!(
            call(
                store,
                "get_user_information_by_id",
                json!({"user_id": "nobody"})
            ),
            "No records found in 'users'."
        );
        // The reference builds the constraint text by formatting: a quote
        // breaks it (its JSON error names the place in Python's words).
        assert!(
            call(
                store,
                "get_user_information_by_id",
                json!({"user_id": "a\"b"})
            )
            .starts_with("Error: Invalid JSON: ")
        );
        assert_eq!(
            call(
                store,
                "change_user_email",
                json!({"user_id": "nobody", "new_email": "x"})
            ),
            "Error: User with ID 'nobody' not found."
        );
    }

    #[test]
    fn discoverable_tools_must_be_unlocked_and_calls_are_logged() {
        let store = &mut reference_bank();
        let name = "example_agent_tool_0000";
        let args = json!({"agent_tool_name": name});
        assert_eq!(
            call(store, "call_discoverable_agent_tool", args.clone()),
            format!(
                "Error: Tool '{name}' has not been unlocked. You must first use `unlock_discoverable_agent_tool` to unlock this tool before calling it."
            )
        );
        assert_eq!(
            call(store, "unlock_discoverable_agent_tool", args.clone()),
            "Tool unlocked: example_agent_tool_0000\nDescription: An example agent discoverable tool placeholder.\n\nReturns:\n    Example tool executed successfully.\n\nTool: example_agent_tool_0000\nDescription: An example agent discoverable tool placeholder.\n\nReturns:\n    Example tool executed successfully.\nParameters:\n  (no parameters)\n\nYou can now use this tool by calling `call_discoverable_agent_tool` with agent_tool_name='example_agent_tool_0000' and the required arguments."
        );
        assert_eq!(
            call(store, "call_discoverable_agent_tool", args.clone()),
            "Example tool executed successfully."
        );
        assert_eq!(
            call(
                store,
                "call_discoverable_agent_tool",
                json!({"agent_tool_name": name, "arguments": "{\"x\": 1}"})
            ),
            "Error: Invalid arguments: KnowledgeTools.example_agent_tool_0000() got an unexpected keyword argument 'x'"
        );
        let logged = Data::new(store).table("agent_discoverable_tools").unwrap();
        assert_eq!(
            logged.get(&ids::agent_discoverable_tool(name)),
            Some(&json!({"tool_name": name, "status": "CALLED"}))
        );
        assert_eq!(
            call(
                store,
                "unlock_discoverable_agent_tool",
                json!({"agent_tool_name": "nope"})
            ),
            "Error: Unknown agent tool 'nope'. This tool is not available."
        );
    }

    /// Answers of the reference (checked against Python): a call that ends
    /// in a `TypeError` answers its text and is not logged, even for a tool
    /// that changes state.
    #[test]
    fn a_call_ending_in_a_type_error_is_not_logged() {
        let store = &mut reference_bank();
        let name = "apply_statement_credit_8472";
        call(
            store,
            "unlock_discoverable_agent_tool",
            json!({"agent_tool_name": name}),
        );
        let arguments = json!({"user_id": "u", "credit_card_account_id": "c", "amount": "50",
            "reason": "x"});
        assert_eq!(
            call(
                store,
                "call_discoverable_agent_tool",
                json!({"agent_tool_name": name, "arguments": arguments.to_string()})
            ),
            "Error: Invalid arguments: '<=' not supported between instances of 'str' and 'int'"
        );
        assert_eq!(
            call(
                store,
                "call_discoverable_agent_tool",
                json!({"agent_tool_name": name, "arguments": "[1]"})
            ),
            "Error: Invalid arguments: tau2.domains.banking_knowledge.tools.KnowledgeTools.apply_statement_credit_8472() argument after ** must be a mapping, not list"
        );
        let logged = Data::new(store).table("agent_discoverable_tools").unwrap();
        assert!(logged.is_empty(), "{logged:?}");
        assert_eq!(
            call(
                store,
                "unlock_discoverable_agent_tool",
                json!({"agent_tool_name": 5})
            ),
            "Error: Unknown agent tool '5'. This tool is not available."
        );
        assert_eq!(
            call(
                store,
                "unlock_discoverable_agent_tool",
                json!({"agent_tool_name": [1]})
            ),
            "Error: unhashable type: 'list'"
        );
    }

    /// `give_discoverable_user_tool` goes through whatever JSON `arguments`
    /// holds, as Python's `for` does (answers checked against Python).
    #[test]
    fn given_arguments_are_checked_member_by_member() {
        let store = &mut reference_bank();
        let give = |store: &mut dyn Store, name: Value, arguments: &str| {
            let args = json!({"discoverable_tool_name": name, "arguments": arguments});
            call(store, "give_discoverable_user_tool", args)
        };
        let name = json!("get_referral_link");
        let refusals = [
            ("[1]", "Error: Unexpected parameter: 1"),
            (r#""user_id""#, "Error: Unexpected parameter: u"),
            ("5", "Error: 'int' object is not iterable"),
            ("null", "Error: 'NoneType' object is not iterable"),
            ("[[1]]", "Error: unhashable type: 'list'"),
        ];
        for (arguments, refusal) in refusals {
            assert_eq!(give(store, name.clone(), arguments), refusal, "{arguments}");
        }
        assert_eq!(
            give(store, json!(5), "{}"),
            "Error: attribute name must be string, not 'int'"
        );
        let given = Data::new(store).table("user_discoverable_tools").unwrap();
        assert!(given.is_empty(), "{given:?}");
        assert_eq!(
            give(store, name.clone(), r#"["self"]"#),
            "Tool given to user: get_referral_link\nDescription: Generate a referral link for a specific credit card to share with friends or family.\nArguments: [\n  \"self\"\n]\n\nThe user can now execute this action by calling `call_discoverable_user_tool` with discoverable_tool_name='get_referral_link' and the same arguments."
        );
        assert!(give(store, name, r#""""#).contains("\nArguments: (no arguments)\n"));
    }
}
