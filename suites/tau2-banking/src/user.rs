//! `KnowledgeUserTools`: the customer's toolkit. Its own tools apply for a
//! credit card, refer a friend, make a card purchase and ask for a human;
//! `call_discoverable_user_tool` runs the discoverable tools the agent has
//! given the user (`crate::discoverable::user`).

use crate::dates::TODAY;
use crate::db::{Tables, query_database_tool};
use crate::discoverable::{Doc, members, shows_records, user_tool};
use crate::ids;
use crate::py::{Raised, dollars, float, floats, str_list};
use forge_tau_guest::toolkit::{Answer, Toolkit, function, tool};
use forge_tau_guest::{Data, Kwargs, dict_key, py_str, type_name};
use serde_json::{Value, json};

/// The user's tools in the reference's order, then its other method.
pub static USER: Toolkit = Toolkit {
    class: "KnowledgeUserTools",
    schemas: include_str!("../user_tools.json"),
    methods: &[
        tool(
            "apply_for_credit_card",
            &[
                ("card_type", true),
                ("customer_name", true),
                ("annual_income", true),
                ("rho_bank_subscription", false),
            ],
            apply_for_credit_card,
        ),
        tool(
            "submit_referral",
            &[("user_id", true), ("account_type", true)],
            submit_referral,
        ),
        tool(
            "call_discoverable_user_tool",
            &[("discoverable_tool_name", true), ("arguments", false)],
            call_discoverable_user_tool,
        ),
        tool(
            "list_discoverable_user_tools",
            &[],
            list_discoverable_user_tools,
        ),
        tool(
            "request_human_agent_transfer",
            &[],
            request_human_agent_transfer,
        ),
        tool(
            "submit_transaction",
            &[
                ("user_id", true),
                ("credit_card_type", true),
                ("merchant_name", true),
                ("amount", true),
                ("category", true),
            ],
            submit_transaction,
        ),
        function(
            "query_database",
            &[("database_name", true), ("constraints", false)],
            query_database,
        ),
    ],
    attributes: &[
        "_check_tool_given",
        "_log_user_tool_call",
        "submit_cash_back_dispute_0589",
        "get_referral_link",
        "get_card_last_4_digits",
        "deposit_check_3847",
        "VALID_CREDIT_CARD_TYPES",
        "CREDIT_CARD_REWARDS",
    ],
};

/// `VALID_CREDIT_CARD_TYPES`: the cards one may apply for.
const VALID_CREDIT_CARD_TYPES: &[&str] = &[
    "Bronze Rewards Card",
    "Business Bronze Rewards Card",
    "Business Gold Rewards Card",
    "Business Platinum Rewards Card",
    "Business Silver Rewards Card",
    "Crypto-Cash Back",
    "Diamond Elite Card",
    "EcoCard",
    "Gold Rewards Card",
    "Green Rewards Card",
    "Platinum Rewards Card",
    "Silver Rewards Card",
    "Silver Zoom Card",
];

/// `CREDIT_CARD_REWARDS`: each card's cash back percentage by purchase
/// category, `default` for the others.
const CREDIT_CARD_REWARDS: &[(&str, &[(&str, f64)])] = &[
    ("Bronze Rewards Card", &[("default", 1.0)]),
    (
        "Silver Rewards Card",
        &[("Travel", 4.0), ("Software", 4.0), ("default", 1.0)],
    ),
    ("Gold Rewards Card", &[("default", 2.5)]),
    ("Platinum Rewards Card", &[("default", 10.0)]),
    ("Business Bronze Rewards Card", &[("default", 1.0)]),
    (
        "Business Silver Rewards Card",
        &[("Travel", 10.0), ("Software", 10.0), ("default", 1.0)],
    ),
    (
        "Green Rewards Card",
        &[("Sustainable", 3.0), ("default", 1.0)],
    ),
    (
        "Business Gold Rewards Card",
        &[("Operations", 2.5), ("default", 1.0)],
    ),
    (
        "Business Platinum Rewards Card",
        &[
            ("Travel", 4.0),
            ("Software", 4.0),
            ("Media", 4.0),
            ("default", 1.5),
        ],
    ),
    (
        "Silver Zoom Card",
        &[("Transportation", 3.0), ("default", 1.0)],
    ),
    ("Diamond Elite Card", &[("default", 5.0)]),
    ("EcoCard", &[("Green", 5.0), ("default", 1.0)]),
    ("Crypto-Cash Back", &[("default", 2.0)]),
];

/// `apply_for_credit_card(card_type, customer_name, annual_income,
/// rho_bank_subscription=False)`: files a pending application, its id drawn
/// from the arguments as Python shows them (`float(annual_income)`,
/// `str(rho_bank_subscription)`).
fn apply_for_credit_card(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let card_type = kwargs.get("card_type")?;
    let customer_name = kwargs.get("customer_name")?;
    let subscription = kwargs
        .optional("rho_bank_subscription")
        .cloned()
        .unwrap_or(Value::Bool(false));
    if !card_type
        .as_str()
        .is_some_and(|card| VALID_CREDIT_CARD_TYPES.contains(&card))
    {
        return Ok(Answer::Text(format!(
            "Error: Invalid card_type '{}'. Must be one of: {}",
            py_str(card_type),
            str_list(VALID_CREDIT_CARD_TYPES)
        )));
    }
    // A JSON record holds no infinity nor NaN: those are refused too.
    let Some(income) = float(kwargs.get("annual_income")?)
        .ok()
        .and_then(|income| serde_json::Number::from_f64(income).map(Value::Number))
    else {
        return Ok(Answer::Text(
            "Error: Invalid annual_income. Must be a number.".to_owned(),
        ));
    };
    let application_id = ids::application(
        &py_str(card_type),
        &py_str(customer_name),
        &py_str(&income),
        &py_str(&subscription),
    );
    let application = json!({
        "application_id": application_id,
        "card_type": card_type,
        "customer_name": customer_name,
        "annual_income": income,
        "rho_bank_subscription": subscription,
        "status": "PENDING",
        "date": TODAY,
    });
    if !data.add("credit_card_applications", &application_id, application)? {
        return Ok(Answer::Text(format!(
            "Failed to submit application: Record ID '{application_id}' may already exist."
        )));
    }
    Ok(Answer::Text(
        "Credit card application submitted:\nYour application has been successfully submitted. \
         You will receive a decision within 5-7 business days via email."
            .to_owned(),
    ))
}

/// `submit_referral(user_id, account_type)`: records a referral to an
/// account type.
fn submit_referral(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let (user_id, account_type) = (kwargs.str("user_id")?, kwargs.str("account_type")?);
    let referral_id = ids::referral(user_id, account_type, None);
    let referral = json!({
        "referral_id": referral_id,
        "referrer_id": user_id,
        "referred_account_type": account_type,
        "referral_status": "NO_PROGRESS",
        "date": TODAY,
    });
    if !data.add("referrals", &referral_id, referral)? {
        return Ok(Answer::Text(format!(
            "Failed to submit referral: Record ID '{referral_id}' may already exist."
        )));
    }
    Ok(Answer::Text(format!(
        "Referral request submitted successfully!\n  - Referral ID: {referral_id}\n  - Referrer ID: {user_id}\n  \
         - Account Type: {account_type}\n  - Status: NO_PROGRESS\n  - Date: {TODAY}\n\n\
         Share your referral ID with the person you're referring. \
         They will need to use this when applying for their account."
    )))
}

/// `query_database(database_name, constraints="{}")`: `query_database_tool`
/// (no tool: a method tasks may invoke).
fn query_database(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let constraints = match kwargs.optional("constraints") {
        Some(constraints) => constraints
            .as_str()
            .ok_or("argument 'constraints' must be a string")?,
        None => "{}",
    };
    let name = kwargs.str("database_name")?;
    Ok(Answer::Text(query_database_tool(data, name, constraints)))
}

/// `call_discoverable_user_tool(discoverable_tool_name, arguments="{}")`:
/// runs a discoverable tool on `arguments` (a JSON object whose numbers are
/// all floats, `json.loads(arguments, parse_int=float)`), after the
/// reference's checks: an unknown tool, JSON it cannot read, a missing or
/// unexpected parameter. The tool itself refuses one not given, and logs
/// the call (`_log_user_tool_call`) before anything in it can raise: a
/// `TypeError` it raises is answered `Error: Invalid arguments for tool …`
/// with the log kept, as Python's write already happened; any other
/// exception leaves the tool (`Err`).
fn call_discoverable_user_tool(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let name = kwargs.get("discoverable_tool_name")?;
    let arguments = match kwargs.optional("arguments") {
        Some(Value::String(text)) => text.as_str(),
        Some(other) => {
            return Err(format!(
                "the JSON object must be str, bytes or bytearray, not {}",
                type_name(other)
            ));
        }
        None => "{}",
    };
    // `has_discoverable_tool(name)`: `name in {name: method}`.
    let Some((doc, run)) = dict_key(name)?.and_then(user_tool) else {
        return Ok(Answer::Text(format!(
            "Error: Unknown discoverable tool '{}'.",
            py_str(name)
        )));
    };
    let name = doc.name.as_str();
    // The reference's text is json.JSONDecodeError's, here serde_json's.
    let args = match serde_json::from_str(arguments) {
        Ok(args) => floats(args),
        Err(err) => {
            return Ok(Answer::Text(format!(
                "Error: Invalid JSON in arguments: {err}"
            )));
        }
    };
    if let Some(refusal) = check_signature(doc, &args)? {
        return Ok(Answer::Text(refusal));
    }
    let outcome = if args.is_object() {
        let callee = format!("KnowledgeUserTools.{name}");
        Kwargs::bind(&args.to_string(), callee, &doc.signature())
            .map_err(Raised::Type)
            .and_then(|bound| run(data, &bound))
    } else {
        Err(Raised::Type(format!(
            "tau2.domains.banking_knowledge.tools.KnowledgeUserTools.{name}() argument after ** \
             must be a mapping, not {}",
            type_name(&args)
        )))
    };
    match outcome {
        Ok(answer) => Ok(Answer::Text(answer)),
        Err(Raised::Type(type_error)) => Ok(Answer::Text(invalid_arguments(name, &type_error))),
        Err(Raised::Other(error)) => Err(error),
    }
}

/// `call_discoverable_user_tool`'s answer to a `TypeError` of tool
/// `tool_name`.
pub fn invalid_arguments(tool_name: &str, type_error: &str) -> String {
    format!("Error: Invalid arguments for tool '{tool_name}': {type_error}")
}

/// The reference's check of `args_dict` against the tool's signature: the
/// first required parameter missing (`name in args`), else the first
/// argument it does not take (`for name in args`). `args` is whatever JSON
/// `arguments` held, as Python's `in` and `for` treat it (a list's items, a
/// string's characters; a number or `null` is Python's `TypeError`, worded
/// as the `in` or the `for` words it).
fn check_signature(doc: &Doc, args: &Value) -> Result<Option<String>, String> {
    let parameters = doc.signature();
    for (parameter, required) in &parameters {
        if *required && !holds(args, parameter)? {
            return Ok(Some(format!(
                "Error: Missing required parameter: {parameter}"
            )));
        }
    }
    for argument in members(args)? {
        let takes = dict_key(&argument)?
            .is_some_and(|name| parameters.iter().any(|(parameter, _)| *parameter == name));
        if !takes {
            return Ok(Some(format!(
                "Error: Unexpected parameter: {}",
                py_str(&argument)
            )));
        }
    }
    Ok(None)
}

/// `name in args`; Python's `TypeError` for a value `in` cannot search.
fn holds(args: &Value, name: &str) -> Result<bool, String> {
    match args {
        Value::Object(map) => Ok(map.contains_key(name)),
        Value::Array(items) => Ok(items.iter().any(|item| item.as_str() == Some(name))),
        Value::String(text) => Ok(text.contains(name)),
        other => Err(format!(
            "argument of type '{}' is not iterable",
            type_name(other)
        )),
    }
}

/// `list_discoverable_user_tools()`: the tools the agent has given, as
/// `query_database_tool` lists them. The test for "No results found"
/// mirrors the reference's check, dead in practice: the listing never says
/// it (with none given it shows "No records found" under its heading), so
/// only a record holding that very text would trip it.
fn list_discoverable_user_tools(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    let given = query_database_tool(data, "user_discoverable_tools", "{}");
    Ok(Answer::Text(if given.contains("No results found") {
        "No tools have been given to you yet by the agent.".to_owned()
    } else {
        format!("Tools given to you by the agent:\n{given}")
    }))
}

/// `request_human_agent_transfer()`: records request number n+1, n being
/// how often "request_id" appears in the listing of those before.
fn request_human_agent_transfer(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    let earlier = query_database_tool(data, "human_transfer_requests", "{}");
    let number = if shows_records(&earlier) {
        earlier.matches("request_id").count() + 1
    } else {
        1
    };
    let request_id = format!("transfer_request_{number}");
    let request = json!({
        "request_id": request_id,
        "request_number": number,
        "requested_at": TODAY,
        "status": "PENDING",
    });
    data.add("human_transfer_requests", &request_id, request)?;
    Ok(Answer::Text(format!(
        "Transfer request #{number} submitted.\nThe agent will process your request."
    )))
}

/// `submit_transaction(user_id, credit_card_type, merchant_name, amount,
/// category)`: records a completed card purchase and the points it earns
/// (`int(amount * rate)`, the rate a percentage from `CREDIT_CARD_REWARDS`).
fn submit_transaction(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let user_id = kwargs.str("user_id")?;
    let card_type = kwargs.str("credit_card_type")?;
    let merchant = kwargs.str("merchant_name")?;
    let amount = kwargs.num("amount")?.as_f64();
    let category = kwargs.str("category")?;
    let Some((_, rates)) = CREDIT_CARD_REWARDS
        .iter()
        .find(|(card, _)| *card == card_type)
    else {
        return Ok(Answer::Text(format!(
            "Error: Unknown credit card type '{card_type}'. Available types: {}",
            str_list(CREDIT_CARD_REWARDS.iter().map(|(card, _)| *card))
        )));
    };
    let transaction_id = ids::transaction(user_id, card_type, merchant, amount, category, None);
    let rate = reward_rate(rates, category);
    // `int()` truncates toward zero, and has no negative zero.
    let points = format!("{:.0}", (amount * rate).trunc() + 0.0);
    let transaction = json!({
        "transaction_id": transaction_id,
        "user_id": user_id,
        "credit_card_type": card_type,
        "merchant_name": merchant,
        "transaction_amount": dollars(amount),
        "transaction_date": TODAY,
        "category": category,
        "status": "COMPLETED",
        "rewards_earned": format!("{points} points"),
    });
    if !data.add(
        "credit_card_transaction_history",
        &transaction_id,
        transaction,
    )? {
        return Ok(Answer::Text(format!(
            "Failed to submit transaction: Record ID '{transaction_id}' may already exist."
        )));
    }
    Ok(Answer::Text(format!(
        "Transaction submitted successfully!\n  - Transaction ID: {transaction_id}\n  - User ID: {user_id}\n  \
         - Card Type: {card_type}\n  - Merchant: {merchant}\n  - Amount: {}\n  - Category: {category}\n  \
         - Date: {TODAY}\n  - Rewards Earned: {points} points ({}% cashback rate)\n",
        dollars(amount),
        py_str(&json!(rate))
    )))
}

/// `card_rewards.get(category, card_rewards["default"])`.
fn reward_rate(rates: &[(&str, f64)], category: &str) -> f64 {
    let rate = |wanted: &str| {
        rates
            .iter()
            .find(|(name, _)| *name == wanted)
            .map(|(_, rate)| *rate)
    };
    rate(category).or_else(|| rate("default")).unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discoverable::reference_bank;
    use forge_guest::MemoryStore;

    fn call(store: &mut MemoryStore, name: &str, arguments: Value) -> String {
        USER.call(store, name, &arguments.to_string())
            .expect("an answer")
    }

    fn record(store: &mut MemoryStore, table: &str, id: &str) -> Option<Value> {
        Data::new(store).record(table, id).unwrap()
    }

    const APPLIED: &str = "Credit card application submitted:\nYour application has been successfully submitted. You will receive a decision within 5-7 business days via email.";

    /// Task 001's application, the same again, and the reference's other
    /// outcomes.
    #[test]
    fn applications_are_filed_once() {
        let store = &mut reference_bank();
        let apply = |store: &mut MemoryStore, card: &str, income: Value, subscribed: Value| {
            let mut args =
                json!({"card_type": card, "customer_name": "Sarah Bosch", "annual_income": income});
            if !subscribed.is_null() {
                args["rho_bank_subscription"] = subscribed;
            }
            call(store, "apply_for_credit_card", args)
        };
        assert_eq!(
            apply(store, "Gold Rewards Card", json!(100000), json!(true)),
            APPLIED
        );
        let id = "e26eca5e8c8b1b90";
        assert_eq!(
            record(store, "credit_card_applications", id).unwrap(),
            json!({"application_id": id, "card_type": "Gold Rewards Card", "customer_name": "Sarah Bosch", "annual_income": 100000.0, "rho_bank_subscription": true, "status": "PENDING", "date": "11/14/2025"})
        );
        assert_eq!(
            apply(store, "Gold Rewards Card", json!(100000.0), json!(true)),
            format!("Failed to submit application: Record ID '{id}' may already exist.")
        );
        assert_eq!(
            apply(store, "EcoCard", json!("1234.5"), json!(null)),
            APPLIED
        );
        assert!(record(store, "credit_card_applications", "e4ad1daae5fe37f7").is_some());
        assert_eq!(
            apply(store, "Gold", json!(1), json!(null)),
            "Error: Invalid card_type 'Gold'. Must be one of: ['Bronze Rewards Card', 'Business Bronze Rewards Card', 'Business Gold Rewards Card', 'Business Platinum Rewards Card', 'Business Silver Rewards Card', 'Crypto-Cash Back', 'Diamond Elite Card', 'EcoCard', 'Gold Rewards Card', 'Green Rewards Card', 'Platinum Rewards Card', 'Silver Rewards Card', 'Silver Zoom Card']"
        );
        assert_eq!(
            apply(store, "EcoCard", json!("lots"), json!(null)),
            "Error: Invalid annual_income. Must be a number."
        );
    }

    /// Task 010's referral, then the same again.
    #[test]
    fn referrals_are_submitted_once() {
        let store = &mut reference_bank();
        let args = json!({"user_id": "76ad9cc60e", "account_type": "Platinum Rewards Card"});
        assert_eq!(
            call(store, "submit_referral", args.clone()),
            "Referral request submitted successfully!\n  - Referral ID: fa2896839e417592\n  - Referrer ID: 76ad9cc60e\n  - Account Type: Platinum Rewards Card\n  - Status: NO_PROGRESS\n  - Date: 11/14/2025\n\nShare your referral ID with the person you're referring. They will need to use this when applying for their account."
        );
        assert_eq!(
            record(store, "referrals", "fa2896839e417592").unwrap(),
            json!({"referral_id": "fa2896839e417592", "referrer_id": "76ad9cc60e", "referred_account_type": "Platinum Rewards Card", "referral_status": "NO_PROGRESS", "date": "11/14/2025"})
        );
        assert_eq!(
            call(store, "submit_referral", args),
            "Failed to submit referral: Record ID 'fa2896839e417592' may already exist."
        );
    }

    /// Task 016's purchase, a category with its own rate, a refund, a
    /// repeat, an unknown card.
    #[test]
    fn transactions_earn_their_cards_rewards() {
        let store = &mut reference_bank();
        let buy = |store: &mut MemoryStore, card: &str, amount: Value, category: &str| {
            let args = json!({"user_id": "friend_user_5839", "credit_card_type": card, "merchant_name": "Best Buy", "amount": amount, "category": category});
            call(store, "submit_transaction", args)
        };
        assert_eq!(
            buy(store, "Silver Rewards Card", json!(750), "Shopping"),
            "Transaction submitted successfully!\n  - Transaction ID: txn_758bc1b7306a\n  - User ID: friend_user_5839\n  - Card Type: Silver Rewards Card\n  - Merchant: Best Buy\n  - Amount: $750.00\n  - Category: Shopping\n  - Date: 11/14/2025\n  - Rewards Earned: 750 points (1.0% cashback rate)\n"
        );
        assert_eq!(
            record(store, "credit_card_transaction_history", "txn_758bc1b7306a").unwrap(),
            json!({"transaction_id": "txn_758bc1b7306a", "user_id": "friend_user_5839", "credit_card_type": "Silver Rewards Card", "merchant_name": "Best Buy", "transaction_amount": "$750.00", "transaction_date": "11/14/2025", "category": "Shopping", "status": "COMPLETED", "rewards_earned": "750 points"})
        );
        assert!(
            buy(store, "Silver Rewards Card", json!(127.43), "Software")
                .ends_with("  - Rewards Earned: 509 points (4.0% cashback rate)\n")
        );
        assert!(buy(store, "Gold Rewards Card", json!(-0.1), "Dining").ends_with(
            "  - Amount: $-0.10\n  - Category: Dining\n  - Date: 11/14/2025\n  - Rewards Earned: 0 points (2.5% cashback rate)\n"
        ));
        assert_eq!(
            buy(store, "Silver Rewards Card", json!(750.0), "Shopping"),
            "Failed to submit transaction: Record ID 'txn_758bc1b7306a' may already exist."
        );
        assert_eq!(
            buy(store, "Gold", json!(1), "Dining"),
            "Error: Unknown credit card type 'Gold'. Available types: ['Bronze Rewards Card', 'Silver Rewards Card', 'Gold Rewards Card', 'Platinum Rewards Card', 'Business Bronze Rewards Card', 'Business Silver Rewards Card', 'Green Rewards Card', 'Business Gold Rewards Card', 'Business Platinum Rewards Card', 'Silver Zoom Card', 'Diamond Elite Card', 'EcoCard', 'Crypto-Cash Back']"
        );
    }

    /// Task 034: requests numbered in turn, listed by `query_database`.
    #[test]
    fn transfer_requests_are_numbered() {
        let store = &mut reference_bank();
        for number in 1..=2 {
            assert_eq!(
                call(store, "request_human_agent_transfer", json!({})),
                format!(
                    "Transfer request #{number} submitted.\nThe agent will process your request."
                )
            );
        }
        assert_eq!(
            USER.invoke(
                store,
                "query_database",
                r#"{"database_name": "human_transfer_requests"}"#
            ),
            Ok(dumps_text(
                "Found 2 record(s) in 'human_transfer_requests':\n\n1. Record ID: transfer_request_1\n   request_id: transfer_request_1\n   request_number: 1\n   requested_at: 11/14/2025\n   status: PENDING\n\n2. Record ID: transfer_request_2\n   request_id: transfer_request_2\n   request_number: 2\n   requested_at: 11/14/2025\n   status: PENDING\n"
            ))
        );
    }

    fn dumps_text(text: &str) -> String {
        forge_tau_guest::dumps(&json!(text))
    }

    /// The listing before and after the agent gives a tool.
    #[test]
    fn given_tools_are_listed() {
        let store = &mut reference_bank();
        assert_eq!(
            call(store, "list_discoverable_user_tools", json!({})),
            "Tools given to you by the agent:\nNo records found in 'user_discoverable_tools'."
        );
        give(store, "get_referral_link");
        assert_eq!(
            call(store, "list_discoverable_user_tools", json!({})),
            "Tools given to you by the agent:\nFound 1 record(s) in 'user_discoverable_tools':\n\n1. Record ID: fc21fceb1501a934\n   tool_name: get_referral_link\n   status: GIVEN\n"
        );
    }

    /// `give_discoverable_user_tool(name)`'s record.
    fn give(store: &mut MemoryStore, name: &str) {
        let record = json!({"tool_name": name, "status": "GIVEN"});
        let id = ids::user_discoverable_tool(name);
        Data::new(store)
            .add("user_discoverable_tools", &id, record)
            .unwrap();
    }

    fn call_discoverable(
        store: &mut MemoryStore,
        name: &str,
        arguments: &str,
    ) -> Result<String, String> {
        let args = json!({"discoverable_tool_name": name, "arguments": arguments});
        USER.call(store, "call_discoverable_user_tool", &args.to_string())
    }

    /// Task 061's deposit (its amount read as a float), and the reference's
    /// refusals in the order it checks.
    #[test]
    fn discoverable_tools_are_called_after_the_reference_checks() {
        let store = &mut reference_bank();
        give(store, "deposit_check_3847");
        give(store, "get_referral_link");
        assert!(
            call_discoverable(
                store,
                "deposit_check_3847",
                r#"{"account_id": "61d4e5f6a7b8c901", "check_amount": 25}"#
            )
            .unwrap()
            .contains("\n  \"check_amount\": 25.0\n}\nCheck deposit processed!\n")
        );
        let refusals = [
            ("nope", "{}", "Error: Unknown discoverable tool 'nope'."),
            (
                "apply_for_credit_card",
                "{}",
                "Error: Unknown discoverable tool 'apply_for_credit_card'.",
            ),
            (
                "get_referral_link",
                r#"{"user_id": "u1"}"#,
                "Error: Missing required parameter: card_name",
            ),
            (
                "get_referral_link",
                r#"{"user_id": "u1", "card_name": "x", "zz": 1}"#,
                "Error: Unexpected parameter: zz",
            ),
            (
                "get_card_last_4_digits",
                r#"{"credit_card_account_id": "x", "self": 1}"#,
                "Error: Unexpected parameter: self",
            ),
            (
                "get_referral_link",
                r#""user_id card_name""#,
                "Error: Unexpected parameter: u",
            ),
            (
                "get_referral_link",
                r#"["user_id", "card_name"]"#,
                "Error: Invalid arguments for tool 'get_referral_link': tau2.domains.banking_knowledge.tools.KnowledgeUserTools.get_referral_link() argument after ** must be a mapping, not list",
            ),
            (
                "get_card_last_4_digits",
                r#"{"credit_card_account_id": "x"}"#,
                "Error: Tool 'get_card_last_4_digits' has not been given to you by the agent. The agent must first use `give_discoverable_user_tool` to give this tool to you.",
            ),
        ];
        for (name, arguments, refusal) in refusals {
            assert_eq!(
                call_discoverable(store, name, arguments),
                Ok(refusal.to_owned()),
                "{arguments}"
            );
        }
        assert!(
            call_discoverable(store, "get_referral_link", r#"{"a": "#)
                .unwrap()
                .starts_with("Error: Invalid JSON in arguments: ")
        );
        assert_eq!(
            call_discoverable(store, "get_referral_link", "5"),
            Err("argument of type 'float' is not iterable".to_owned())
        );
        let named = |store: &mut MemoryStore, name: Value| {
            let args = json!({"discoverable_tool_name": name});
            USER.call(store, "call_discoverable_user_tool", &args.to_string())
        };
        assert_eq!(
            named(store, json!(5)),
            Ok("Error: Unknown discoverable tool '5'.".to_owned())
        );
        assert_eq!(
            named(store, json!([1])),
            Err("unhashable type: 'list'".to_owned())
        );
        // A `TypeError` the tool raises after logging the call: the log stays
        // (as checked against Python).
        give(store, "deposit_check_3847");
        assert_eq!(
            call_discoverable(
                store,
                "deposit_check_3847",
                r#"{"account_id": ["zz"], "check_amount": 5}"#
            ),
            Ok(
                "Error: Invalid arguments for tool 'deposit_check_3847': unhashable type: 'list'"
                    .to_owned()
            )
        );
        let logged = record(store, "user_discoverable_tool_calls", "d522e5dc2579118d");
        assert_eq!(
            logged,
            Some(
                json!({"tool_name": "deposit_check_3847", "arguments": {"account_id": ["zz"], "check_amount": 5.0}, "called_at": "11/14/2025", "status": "CALLED"})
            )
        );
    }
}
