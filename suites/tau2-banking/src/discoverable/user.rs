//! The user's discoverable tools: `KnowledgeUserTools`' methods marked
//! `@is_discoverable_tool`, actions the customer takes in the real world
//! (an app, a web page) once the agent has given them the tool. Each refuses
//! a tool not given (`_check_tool_given`), then logs the call
//! (`_log_user_tool_call`) before its own checks, so a call that fails those
//! checks is logged all the same, as in the reference.

use super::{Body, account_balance, find, is_open, query_by, shows_records};
use crate::dates::TODAY;
use crate::db::Tables;
use crate::ids;
use crate::py::{Raised, dollars, dumps_indent, float};
use forge_tau_guest::{Data, Kwargs, py_str, truthy, type_name};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The bodies, in the reference's order.
pub const TOOLS: &[Body] = &[
    Body {
        name: "submit_cash_back_dispute_0589",
        run: submit_cash_back_dispute,
    },
    Body {
        name: "get_referral_link",
        run: get_referral_link,
    },
    Body {
        name: "get_card_last_4_digits",
        run: get_card_last_4_digits,
    },
    Body {
        name: "deposit_check_3847",
        run: deposit_check,
    },
];

/// `_check_tool_given(tool_name)`: the refusal of a tool the agent has not
/// given (`give_discoverable_user_tool`), `None` for one it has.
fn check_tool_given(data: &Data<'_>, tool_name: &str) -> Option<String> {
    let given = query_by(data, "user_discoverable_tools", "tool_name", tool_name);
    given.contains("No records found").then(|| {
        format!(
            "Error: Tool '{tool_name}' has not been given to you by the agent. \
             The agent must first use `give_discoverable_user_tool` to give this tool to you."
        )
    })
}

/// `_log_user_tool_call(tool_name, args)`: records the call in
/// `user_discoverable_tool_calls` (a repeated call, same id, is not added
/// again).
fn log_user_tool_call(data: &mut Data<'_>, tool_name: &str, args: &Value) -> Result<(), String> {
    let call = json!({
        "tool_name": tool_name,
        "arguments": args,
        "called_at": TODAY,
        "status": "CALLED",
    });
    let id = ids::user_discoverable_tool_call(tool_name, args);
    data.add("user_discoverable_tool_calls", &id, call)?;
    Ok(())
}

/// How every tool begins: `_check_tool_given`, then `_log_user_tool_call`.
/// `Some(refusal)` when the tool was not given (nothing is logged then).
fn begin(data: &mut Data<'_>, tool_name: &str, args: &Value) -> Result<Option<String>, String> {
    if let Some(refusal) = check_tool_given(data, tool_name) {
        return Ok(Some(refusal));
    }
    log_user_tool_call(data, tool_name, args)?;
    Ok(None)
}

/// The head of every tool's success: its headline, then
/// `Executed: {tool}` and `Arguments: {json.dumps(args, indent=2)}`.
fn executed(headline: &str, tool_name: &str, args: &Value) -> String {
    format!(
        "{headline}\n\nExecuted: {tool_name}\nArguments: {}\n",
        dumps_indent(args, 2)
    )
}

/// `submit_cash_back_dispute_0589(user_id, transaction_id)`: files a cash
/// back dispute, resolved and approved at once where the task's
/// `task_config` says `dispute_settings.auto_resolve_disputes`.
fn submit_cash_back_dispute(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    const NAME: &str = "submit_cash_back_dispute_0589";
    let (user_id, transaction_id) = (kwargs.get("user_id")?, kwargs.get("transaction_id")?);
    let args = json!({"user_id": user_id, "transaction_id": transaction_id});
    if let Some(refusal) = begin(data, NAME, &args)? {
        return Ok(refusal);
    }
    let dispute_id = ids::dispute(&py_str(user_id), &py_str(transaction_id));
    let resolved = auto_resolve_disputes(data)?;
    let mut dispute = json!({
        "dispute_id": dispute_id,
        "user_id": user_id,
        "transaction_id": transaction_id,
        "submitted_at": TODAY,
        "status": if resolved { "RESOLVED" } else { "SUBMITTED" },
    });
    let status = if resolved {
        dispute["resolution"] = json!("APPROVED");
        "Status: RESOLVED - The dispute has been reviewed and approved. The transaction rewards need to be updated."
    } else {
        "Status: SUBMITTED - Your dispute has been queued for review."
    };
    let added = data.add("cash_back_disputes", &dispute_id, dispute)?;
    let head = executed(
        "Cash back dispute submitted successfully. Your case has been queued for review.",
        NAME,
        &args,
    );
    Ok(if added {
        format!("{head}Dispute ID: {dispute_id}\n{status}")
    } else {
        format!("{head}Note: Dispute may have already been submitted for this transaction.")
    })
}

/// `task_config.data.get("dispute_settings", {}).get("auto_resolve_disputes",
/// False)`, as a truth value.
fn auto_resolve_disputes(data: &Data<'_>) -> Result<bool, String> {
    match data.table("task_config")?.get("dispute_settings") {
        None => Ok(false),
        Some(Value::Object(settings)) => {
            Ok(settings.get("auto_resolve_disputes").is_some_and(truthy))
        }
        Some(other) => Err(format!(
            "'{}' object has no attribute 'get'",
            type_name(other)
        )),
    }
}

/// `get_referral_link(user_id, card_name)`: records a referral for the card
/// and answers the link to share.
fn get_referral_link(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    const NAME: &str = "get_referral_link";
    let (user_id, card_name) = (kwargs.get("user_id")?, kwargs.get("card_name")?);
    let args = json!({"user_id": user_id, "card_name": card_name});
    if let Some(refusal) = begin(data, NAME, &args)? {
        return Ok(refusal);
    }
    let referral_id = ids::referral_link(&py_str(user_id), &py_str(card_name));
    let referral = json!({
        "referral_id": referral_id,
        "referrer_id": user_id,
        "referred_account_type": card_name,
        "referral_status": "NO_PROGRESS",
        "date": TODAY,
    });
    let added = data.add("referrals", &referral_id, referral)?;
    let head = executed(
        "Referral link generated successfully. Share this link with the person you want to refer.",
        NAME,
        &args,
    );
    Ok(if added {
        format!(
            "{head}Referral ID: {referral_id}\nReferral link: https://rhobank.com/refer/{referral_id}"
        )
    } else {
        format!("{head}Note: A referral link for this card may have already been generated.")
    })
}

/// `get_card_last_4_digits(credit_card_account_id)`: the card's last four
/// digits, made up from the account id (the first four decimal digits of
/// `sha256("card_last4:{id}")`, padded with zeros).
fn get_card_last_4_digits(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    const NAME: &str = "get_card_last_4_digits";
    let account_id = kwargs.get("credit_card_account_id")?;
    let args = json!({"credit_card_account_id": account_id});
    if let Some(refusal) = begin(data, NAME, &args)? {
        return Ok(refusal);
    }
    let account_id = py_str(account_id);
    let found = query_by(data, "credit_card_accounts", "account_id", &account_id);
    if !shows_records(&found) {
        return Ok(format!(
            "Error: Credit card account '{account_id}' not found."
        ));
    }
    let head = executed("Card information retrieved successfully.", NAME, &args);
    Ok(format!(
        "{head}Last 4 digits of card: {}",
        last_4_digits(&account_id)
    ))
}

/// The first four decimal digits of `sha256("card_last4:{account_id}")`'s
/// hex digest, `ljust(4, "0")`.
fn last_4_digits(account_id: &str) -> String {
    let digest = Sha256::digest(format!("card_last4:{account_id}").as_bytes());
    let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
    let digits: String = hex.chars().filter(char::is_ascii_digit).take(4).collect();
    format!("{digits:0<4}")
}

/// `deposit_check_3847(account_id, check_amount)`: adds a positive check
/// amount to an active (or open) account's `current_holdings`.
fn deposit_check(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    const NAME: &str = "deposit_check_3847";
    let (account_id, check_amount) = (kwargs.get("account_id")?, kwargs.get("check_amount")?);
    let args = json!({"account_id": account_id, "check_amount": check_amount});
    if let Some(refusal) = begin(data, NAME, &args)? {
        return Ok(refusal);
    }
    let Ok(amount) = float(check_amount) else {
        return Ok(format!(
            "Error: Invalid check amount '{}'. Must be a number.",
            py_str(check_amount)
        ));
    };
    if amount <= 0.0 {
        return Ok("Error: Check amount must be positive.".to_owned());
    }
    let accounts = data.table("accounts")?;
    let Some((id, account)) = find(&accounts, account_id)? else {
        return Ok(format!(
            "Error: Account '{}' not found.",
            py_str(account_id)
        ));
    };
    if !is_open(account) {
        return Ok(format!("Error: Account '{id}' is not active."));
    }
    let previous = account_balance(account)?;
    let balance = previous + amount;
    data.update(
        "accounts",
        id,
        vec![("current_holdings", json!(dollars(balance)))],
    )?;
    let head = executed(
        "Check deposited successfully. Funds will be available according to your account's deposit policy.",
        NAME,
        &args,
    );
    Ok(format!(
        "{head}Check deposit processed!\n  - Account: {id}\n  - Check Amount: {}\n  - Previous Balance: {}\n  - New Balance: {}",
        dollars(amount),
        dollars(previous),
        dollars(balance)
    ))
}

#[cfg(test)]
mod tests {
    use super::super::{reference_bank, user_tool};
    use super::*;
    use crate::py::floats;
    use forge_guest::MemoryStore;

    /// Runs the body of user tool `name` on `arguments` (numbers as floats),
    /// answered as `call_discoverable_user_tool` answers it.
    fn call(store: &mut MemoryStore, name: &str, arguments: Value) -> Result<String, String> {
        let (doc, run) = user_tool(name).expect("a user tool");
        let outcome = Kwargs::bind(
            &floats(arguments).to_string(),
            format!("KnowledgeUserTools.{name}"),
            &doc.signature(),
        )
        .map_err(Raised::Type)
        .and_then(|kwargs| run(&mut Data::new(store), &kwargs));
        match outcome {
            Err(Raised::Type(type_error)) => Ok(crate::user::invalid_arguments(name, &type_error)),
            Err(Raised::Other(error)) => Err(error),
            Ok(answer) => Ok(answer),
        }
    }

    /// A bank where the agent has given the user every discoverable tool
    /// (`give_discoverable_user_tool`).
    fn bank_with_tools_given() -> MemoryStore {
        let mut store = reference_bank();
        let mut data = Data::new(&mut store);
        for body in TOOLS {
            let record = json!({"tool_name": body.name, "status": "GIVEN"});
            let id = ids::user_discoverable_tool(body.name);
            assert!(data.add("user_discoverable_tools", &id, record).unwrap());
        }
        store
    }

    fn record(store: &mut MemoryStore, table: &str, id: &str) -> Option<Value> {
        Data::new(store).record(table, id).unwrap()
    }

    fn calls_logged(store: &mut MemoryStore) -> usize {
        Data::new(store)
            .table("user_discoverable_tool_calls")
            .unwrap()
            .len()
    }

    #[test]
    fn tools_not_given_are_refused_and_not_logged() {
        let store = &mut reference_bank();
        let args = json!({"user_id": "u1", "card_name": "Gold Rewards Card"});
        assert_eq!(
            call(store, "get_referral_link", args).unwrap(),
            "Error: Tool 'get_referral_link' has not been given to you by the agent. The agent must first use `give_discoverable_user_tool` to give this tool to you."
        );
        assert_eq!(calls_logged(store), 0);
    }

    /// Task 017's call, then the same again, on the reference's bank.
    #[test]
    fn cash_back_disputes_are_submitted_once() {
        let store = &mut bank_with_tools_given();
        let args = json!({"user_id": "76ad9cc60e", "transaction_id": "txn_1"});
        let head = "Cash back dispute submitted successfully. Your case has been queued for review.\n\nExecuted: submit_cash_back_dispute_0589\nArguments: {\n  \"user_id\": \"76ad9cc60e\",\n  \"transaction_id\": \"txn_1\"\n}\n";
        assert_eq!(
            call(store, "submit_cash_back_dispute_0589", args.clone()).unwrap(),
            format!(
                "{head}Dispute ID: dsp_9c1c7174be91\nStatus: SUBMITTED - Your dispute has been queued for review."
            )
        );
        assert_eq!(
            call(store, "submit_cash_back_dispute_0589", args).unwrap(),
            format!("{head}Note: Dispute may have already been submitted for this transaction.")
        );
        assert_eq!(
            record(store, "cash_back_disputes", "dsp_9c1c7174be91").unwrap(),
            json!({"dispute_id": "dsp_9c1c7174be91", "user_id": "76ad9cc60e", "transaction_id": "txn_1", "submitted_at": "11/14/2025", "status": "SUBMITTED"})
        );
        assert_eq!(calls_logged(store), 1);
    }

    /// Task 026: its `task_config` resolves disputes at once.
    #[test]
    fn disputes_resolve_at_once_where_the_task_says_so() {
        let store = &mut bank_with_tools_given();
        let mut settings = serde_json::Map::new();
        settings.insert(
            "dispute_settings".to_owned(),
            json!({"auto_resolve_disputes": true}),
        );
        Data::new(store).save("task_config", settings).unwrap();
        let args = json!({"user_id": "755bcb4d5d", "transaction_id": "txn_a8f1c2d3e403"});
        assert_eq!(
            call(store, "submit_cash_back_dispute_0589", args).unwrap(),
            "Cash back dispute submitted successfully. Your case has been queued for review.\n\nExecuted: submit_cash_back_dispute_0589\nArguments: {\n  \"user_id\": \"755bcb4d5d\",\n  \"transaction_id\": \"txn_a8f1c2d3e403\"\n}\nDispute ID: dsp_c16631293b89\nStatus: RESOLVED - The dispute has been reviewed and approved. The transaction rewards need to be updated."
        );
        assert_eq!(
            record(store, "cash_back_disputes", "dsp_c16631293b89").unwrap()["resolution"],
            "APPROVED"
        );
    }

    /// Task 015's call, then the same again, then one with a number for an id.
    #[test]
    fn referral_links_are_generated_once() {
        let store = &mut bank_with_tools_given();
        let args = json!({"user_id": "890389b165", "card_name": "Platinum Rewards Card"});
        let head = "Referral link generated successfully. Share this link with the person you want to refer.\n\nExecuted: get_referral_link\nArguments: {\n  \"user_id\": \"890389b165\",\n  \"card_name\": \"Platinum Rewards Card\"\n}\n";
        assert_eq!(
            call(store, "get_referral_link", args.clone()).unwrap(),
            format!(
                "{head}Referral ID: faa78faa461cf918\nReferral link: https://rhobank.com/refer/faa78faa461cf918"
            )
        );
        assert_eq!(
            call(store, "get_referral_link", args).unwrap(),
            format!("{head}Note: A referral link for this card may have already been generated.")
        );
        let args = json!({"user_id": 12, "card_name": "Gold é"});
        assert_eq!(
            call(store, "get_referral_link", args).unwrap(),
            "Referral link generated successfully. Share this link with the person you want to refer.\n\nExecuted: get_referral_link\nArguments: {\n  \"user_id\": 12.0,\n  \"card_name\": \"Gold \\u00e9\"\n}\nReferral ID: bb6a67c73a7499b5\nReferral link: https://rhobank.com/refer/bb6a67c73a7499b5"
        );
        assert_eq!(
            record(store, "referrals", "bb6a67c73a7499b5").unwrap(),
            json!({"referral_id": "bb6a67c73a7499b5", "referrer_id": 12.0, "referred_account_type": "Gold é", "referral_status": "NO_PROGRESS", "date": "11/14/2025"})
        );
    }

    /// Task 031's call, an unknown account, and an id that breaks the
    /// reference's constraints JSON (so that it finds "no error").
    #[test]
    fn card_digits_come_from_the_account_id() {
        let store = &mut bank_with_tools_given();
        let digits = |store: &mut MemoryStore, id: &str| {
            call(
                store,
                "get_card_last_4_digits",
                json!({"credit_card_account_id": id}),
            )
            .unwrap()
        };
        assert_eq!(
            digits(store, "cc_890389b165_silver"),
            "Card information retrieved successfully.\n\nExecuted: get_card_last_4_digits\nArguments: {\n  \"credit_card_account_id\": \"cc_890389b165_silver\"\n}\nLast 4 digits of card: 5320"
        );
        assert_eq!(
            digits(store, "cc_nope"),
            "Error: Credit card account 'cc_nope' not found."
        );
        assert!(digits(store, "a\"b").ends_with("\"a\\\"b\"\n}\nLast 4 digits of card: 5958"));
        assert_eq!(calls_logged(store), 3);
    }

    /// Task 061's call, then a string amount (Python's `float()` reads it),
    /// then the refusals, each logged all the same.
    #[test]
    fn checks_are_deposited_into_open_accounts() {
        let store = &mut bank_with_tools_given();
        let deposit = |store: &mut MemoryStore, account: Value, amount: Value| {
            let args = json!({"account_id": account, "check_amount": amount});
            call(store, "deposit_check_3847", args).unwrap()
        };
        assert_eq!(
            deposit(store, json!("61d4e5f6a7b8c901"), json!(25)),
            "Check deposited successfully. Funds will be available according to your account's deposit policy.\n\nExecuted: deposit_check_3847\nArguments: {\n  \"account_id\": \"61d4e5f6a7b8c901\",\n  \"check_amount\": 25.0\n}\nCheck deposit processed!\n  - Account: 61d4e5f6a7b8c901\n  - Check Amount: $25.00\n  - Previous Balance: $0.00\n  - New Balance: $25.00"
        );
        assert!(
            deposit(store, json!("61d4e5f6a7b8c901"), json!(" 2_5.5 ")).ends_with(
                "  - Check Amount: $25.50\n  - Previous Balance: $25.00\n  - New Balance: $50.50"
            )
        );
        assert_eq!(
            record(store, "accounts", "61d4e5f6a7b8c901").unwrap()["current_holdings"],
            "$50.50"
        );
        assert_eq!(
            deposit(store, json!("01"), json!("abc")),
            "Error: Invalid check amount 'abc'. Must be a number."
        );
        assert_eq!(
            deposit(store, json!("01"), json!(null)),
            "Error: Invalid check amount 'None'. Must be a number."
        );
        assert_eq!(
            deposit(store, json!("01"), json!(-5)),
            "Error: Check amount must be positive."
        );
        assert_eq!(
            deposit(store, json!("zz"), json!(5)),
            "Error: Account 'zz' not found."
        );
        assert_eq!(
            deposit(store, json!(["zz"]), json!(5)),
            "Error: Invalid arguments for tool 'deposit_check_3847': unhashable type: 'list'"
        );
        Data::new(store)
            .update("accounts", "01", vec![("status", json!("CLOSED"))])
            .unwrap();
        assert_eq!(
            deposit(store, json!("01"), json!(5)),
            "Error: Account '01' is not active."
        );
        assert_eq!(calls_logged(store), 8);
    }
}
