//! Discoverable tools: bank accounts — opening, closing and listing a
//! customer's accounts, moving money between them, crediting them, reporting
//! interest discrepancies and listing their transactions.

use super::{
    Body, account_balance, find, invalid_choice, is_open, one_of, query_by, shows_records,
};
use crate::dates::{Day, TODAY, days_from_civil, leading_mdy, strptime_mdy, time_of_day, today};
use crate::db::{Records, Tables};
use crate::ids::deterministic_id;
use crate::py::{Raised, dollars, fixed, float, float_str, lower};
use forge_tau_guest::{Data, Kwargs, Num, py_eq, py_str, truthy};
use serde_json::{Map, Value, json};

pub const TOOLS: &[Body] = &[
    Body {
        name: "open_bank_account_4821",
        run: open_bank_account,
    },
    Body {
        name: "close_bank_account_7392",
        run: close_bank_account,
    },
    Body {
        name: "get_all_user_accounts_by_user_id_3847",
        run: get_all_user_accounts,
    },
    Body {
        name: "transfer_funds_between_bank_accounts_7291",
        run: transfer_funds,
    },
    Body {
        name: "apply_checking_account_credit_5829",
        run: |data, kwargs| apply_credit(data, kwargs, &CHECKING_CREDIT),
    },
    Body {
        name: "apply_savings_account_credit_6831",
        run: |data, kwargs| apply_credit(data, kwargs, &SAVINGS_CREDIT),
    },
    Body {
        name: "submit_interest_discrepancy_report_7294",
        run: submit_interest_discrepancy_report,
    },
    Body {
        name: "get_bank_account_transactions_9173",
        run: get_bank_account_transactions,
    },
];

/// A body's answer or what it raised.
type Answer = Result<String, Raised>;

/// `record.get(field)` as a string, `None` when absent or no string.
fn text<'r>(record: &'r Value, field: &str) -> Option<&'r str> {
    record.get(field).and_then(Value::as_str)
}

/// `(get_now() - datetime.strptime(date_opened, "%m/%d/%Y")).days` (the
/// clock's 03:40 never adds a day); `None` for a date Python cannot read.
fn age_in_days(date_opened: &Value) -> Result<Option<i64>, Raised> {
    Ok(strptime_mdy(date_opened)?.map(|opened| today() - opened))
}

// ----- open_bank_account_4821 -----

/// The account types a customer can open.
const ACCOUNT_TYPES: &[&str] = &[
    "checking",
    "savings",
    "business_checking",
    "business_savings",
];

/// What a personal checking account is called, by `account_type` or `class`.
const PERSONAL_CHECKING: &[&str] = &["checking", "personal_checking"];

/// `open_bank_account_4821`: opens an account of the given type and class for
/// a customer who meets the type's requirements (savings: a personal checking
/// account open 14 days; business checking: no closed account and an open
/// personal checking account; business savings: no negative balance and a
/// business checking account open 30 days), with a zero balance; its id is
/// the hash of user, type and class, so the same account opens only once.
fn open_bank_account(data: &mut Data<'_>, kwargs: &Kwargs) -> Answer {
    let user_id = kwargs.get("user_id")?;
    let account_type = kwargs.get("account_type")?;
    let account_class = kwargs.get("account_class")?;
    if !truthy(user_id) || !truthy(account_type) || !truthy(account_class) {
        return Ok("Error: Missing required parameters.".to_owned());
    }
    let Some(kind) = one_of(account_type, ACCOUNT_TYPES) else {
        return Ok(invalid_choice("account_type", ACCOUNT_TYPES));
    };
    let accounts = data.table("accounts")?;
    let owned: Vec<&Value> = accounts
        .values()
        .filter(|account| py_eq(account.get("user_id").unwrap_or(&Value::Null), user_id))
        .collect();
    if !eligible(kind, &owned)? {
        return Ok("Error: Account eligibility requirements not met.".to_owned());
    }
    let (user_text, class_text) = (py_str(user_id), py_str(account_class));
    let account_id = deterministic_id(&format!("account:{user_text}:{kind}:{class_text}"), 16);
    let record = json!({
        "account_id": account_id,
        "user_id": user_id,
        "account_type": kind,
        "account_class": account_class,
        "current_holdings": "0.00",
        "status": "OPEN",
        "date_opened": TODAY,
    });
    if !data.add("accounts", &account_id, record)? {
        return Ok(format!(
            "Failed to open account: Account ID '{account_id}' may already exist."
        ));
    }
    Ok(format!(
        "Bank account opened successfully!\n  - Account ID: {account_id}\n  - User ID: {user_text}\n  - Account Type: {kind}\n  - Account Class: {class_text}\n  - Status: OPEN\n  - Initial Balance: $0.00\n  - Date Opened: {TODAY}"
    ))
}

/// Whether a customer with accounts `owned` may open an account of `kind`.
fn eligible(kind: &str, owned: &[&Value]) -> Result<bool, Raised> {
    match kind {
        "savings" => has_open_account_aged(owned, PERSONAL_CHECKING, 14),
        "business_checking" => Ok(!owned
            .iter()
            .any(|account| text(account, "status") == Some("CLOSED"))
            && owned
                .iter()
                .any(|account| is_open_of_kind(account, PERSONAL_CHECKING))),
        "business_savings" => {
            for account in owned {
                if account_balance(account)? < 0.0 {
                    return Ok(false);
                }
            }
            has_open_account_aged(owned, &["business_checking"], 30)
        }
        _ => Ok(true),
    }
}

/// `acc.get("account_type", acc.get("class", "")) in kinds` and the account
/// is open (`OPEN` or `ACTIVE`).
fn is_open_of_kind(account: &Value, kinds: &[&str]) -> bool {
    let kind = account
        .get("account_type")
        .or_else(|| account.get("class"))
        .and_then(Value::as_str);
    kind.is_some_and(|kind| kinds.contains(&kind)) && is_open(account)
}

/// Whether one of `owned`, open and of one of `kinds`, was opened at least
/// `min_days` ago (an unreadable opening date counts as today).
fn has_open_account_aged(owned: &[&Value], kinds: &[&str], min_days: i64) -> Result<bool, Raised> {
    let unknown = Value::String(String::new());
    for account in owned {
        if is_open_of_kind(account, kinds) {
            let opened = account.get("date_opened").unwrap_or(&unknown);
            if age_in_days(opened)?.unwrap_or(0) >= min_days {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

// ----- close_bank_account_7392 -----

/// An early closure fee: what closing an account younger than the window costs.
struct EarlyClosure {
    fee: f64,
    window_days: i64,
}

const fn early(fee: f64, window_days: i64) -> EarlyClosure {
    EarlyClosure { fee, window_days }
}

/// `PERSONAL_CHECKING_EARLY_CLOSURE`, by account level.
const CHECKING_EARLY_CLOSURE: &[(&str, EarlyClosure)] = &[
    ("Light Blue Account", early(15.0, 30)),
    ("Light Green Account", early(15.0, 30)),
    ("Green Fee-Free Account", early(15.0, 30)),
    ("Blue Account", early(25.0, 60)),
    ("Green Account", early(25.0, 60)),
    ("Evergreen Account", early(50.0, 90)),
    ("Bluest Account", early(100.0, 180)),
];

/// `PERSONAL_SAVINGS_EARLY_CLOSURE`, by account level.
const SAVINGS_EARLY_CLOSURE: &[(&str, EarlyClosure)] = &[
    ("Bronze Account", early(20.0, 60)),
    ("Silver Account", early(35.0, 90)),
    ("Silver Plus Account", early(35.0, 90)),
    ("Gold Account", early(75.0, 180)),
    ("Gold Plus Account", early(75.0, 180)),
    ("Gold Years Account", early(75.0, 180)),
    ("Platinum Account", early(150.0, 270)),
    ("Platinum Plus Account", early(150.0, 270)),
    ("Diamond Elite Account", early(150.0, 270)),
];

/// `close_bank_account_7392`: closes an account whose balance is $0.00 — or,
/// for a personal account younger than its level's early-closure window
/// (unless the fee is waived), exactly the early closure fee. The fee is only
/// checked, never charged: the balance stays as it was.
fn close_bank_account(data: &mut Data<'_>, kwargs: &Kwargs) -> Answer {
    let account_id = kwargs.get("account_id")?;
    let default_reason = Value::String("Customer requested closure".to_owned());
    let reason = kwargs.optional("reason").unwrap_or(&default_reason);
    let waive = kwargs
        .optional("waive_early_closure_fee")
        .unwrap_or(&Value::Bool(false));
    if !truthy(account_id) {
        return Ok("Error: Missing required parameter (account_id).".to_owned());
    }
    let accounts = data.table("accounts")?;
    let Some((account_id, account)) = find(&accounts, account_id)? else {
        return Ok(format!(
            "Error: Account '{}' not found.",
            py_str(account_id)
        ));
    };
    if text(account, "status") == Some("CLOSED") {
        return Ok(format!("Error: Account '{account_id}' is already closed."));
    }
    let balance = account_balance(account)?;
    let fee = if truthy(waive) {
        0.0
    } else {
        match early_closure_fee(account)? {
            Some(fee) if balance < fee => {
                return Ok("Error: Account unable to be closed.".to_owned());
            }
            Some(fee) => fee,
            None => 0.0,
        }
    };
    if balance - fee != 0.0 {
        return Ok(format!(
            "Error: Account balance must be $0.00 before closing. Current balance: ${}",
            fixed(balance, 2)
        ));
    }
    let shown = |field: &str| account.get(field).map_or_else(|| "N/A".to_owned(), py_str);
    let (account_type, account_class) = (shown("account_type"), shown("account_class"));
    let closure = vec![
        ("status", json!("CLOSED")),
        ("date_closed", json!(TODAY)),
        ("closure_reason", reason.clone()),
        ("early_closure_fee_waived", waive.clone()),
    ];
    data.update("accounts", account_id, closure)?;
    Ok(format!(
        "Bank account closed successfully!\n  - Account ID: {account_id}\n  - Account Type: {account_type}\n  - Account Class: {account_class}\n  - Status: CLOSED\n  - Date Closed: {TODAY}\n  - Reason: {}\n  - Early Closure Fee Waived: {}",
        py_str(reason),
        if truthy(waive) { "Yes" } else { "No" }
    ))
}

/// The early closure fee a personal account owes when closed now: its
/// level's fee while it is younger than the level's window, else `None`.
fn early_closure_fee(account: &Value) -> Result<Option<f64>, Raised> {
    let tiers = match text(account, "class") {
        Some("checking") => CHECKING_EARLY_CLOSURE,
        Some("savings") => SAVINGS_EARLY_CLOSURE,
        _ => return Ok(None),
    };
    let level = text(account, "level");
    let Some((_, tier)) = tiers.iter().find(|(name, _)| Some(*name) == level) else {
        return Ok(None);
    };
    let date_opened = account.get("date_opened").unwrap_or(&Value::Null);
    if !truthy(date_opened) {
        return Ok(None);
    }
    Ok(age_in_days(date_opened)?
        .filter(|age| *age < tier.window_days)
        .map(|_| tier.fee))
}

// ----- get_all_user_accounts_by_user_id_3847 -----

/// `get_all_user_accounts_by_user_id_3847`: a customer's bank accounts and
/// credit card accounts, each listed as `query_database_tool` lists them.
fn get_all_user_accounts(data: &mut Data<'_>, kwargs: &Kwargs) -> Answer {
    let user_id = kwargs.get("user_id")?;
    if !truthy(user_id) {
        return Ok("Error: Missing required parameter: user_id".to_owned());
    }
    let user_id = py_str(user_id);
    let data: &Data<'_> = data;
    let listing = |table: &str, none: &str| {
        let found = query_by(data, table, "user_id", &user_id);
        if shows_records(&found) {
            found
        } else {
            none.to_owned()
        }
    };
    let parts = [
        "User accounts retrieved successfully.".to_owned(),
        String::new(),
        "Executed: get_all_user_accounts_by_user_id_3847".to_owned(),
        format!("Accounts for user {user_id}:"),
        String::new(),
        "Bank Accounts:".to_owned(),
        listing("accounts", "  No bank accounts found."),
        "\nCredit Card Accounts:".to_owned(),
        listing("credit_card_accounts", "  No credit card accounts found."),
    ];
    Ok(parts.join("\n"))
}

// ----- transfer_funds_between_bank_accounts_7291 -----

/// `transfer_funds_between_bank_accounts_7291`: moves a positive amount
/// between two open accounts, refusing more than the source holds; both
/// balances are rewritten as `"$1234.56"`.
fn transfer_funds(data: &mut Data<'_>, kwargs: &Kwargs) -> Answer {
    let source_id = kwargs.get("source_account_id")?;
    let destination_id = kwargs.get("destination_account_id")?;
    let amount = kwargs.get("amount")?;
    if !truthy(source_id) || !truthy(destination_id) || amount.is_null() {
        return Ok("Error: Missing required parameters (source_account_id, destination_account_id, amount).".to_owned());
    }
    let Ok(amount) = float(amount) else {
        return Ok(format!(
            "Error: Invalid amount '{}'. Must be a number.",
            py_str(amount)
        ));
    };
    if amount <= 0.0 {
        return Ok("Error: Transfer amount must be positive.".to_owned());
    }
    if py_eq(source_id, destination_id) {
        return Ok("Error: Source and destination accounts cannot be the same.".to_owned());
    }
    let mut accounts = data.table("accounts")?;
    let Some((source_id, source)) = find(&accounts, source_id)? else {
        return Ok(format!(
            "Error: Source account '{}' not found.",
            py_str(source_id)
        ));
    };
    let Some((destination_id, destination)) = find(&accounts, destination_id)? else {
        return Ok(format!(
            "Error: Destination account '{}' not found.",
            py_str(destination_id)
        ));
    };
    if !is_open(source) {
        return Ok(format!(
            "Error: Source account '{source_id}' is not active."
        ));
    }
    if !is_open(destination) {
        return Ok(format!(
            "Error: Destination account '{destination_id}' is not active."
        ));
    }
    let source_balance = account_balance(source)?;
    if source_balance < amount {
        return Ok(format!(
            "Error: Insufficient funds. Source account balance is ${}, but transfer amount is ${}.",
            fixed(source_balance, 2),
            fixed(amount, 2)
        ));
    }
    let destination_balance = account_balance(destination)?;
    let (source_id, destination_id) = (source_id.to_owned(), destination_id.to_owned());
    let new_source = source_balance - amount;
    let new_destination = destination_balance + amount;
    set_holdings(&mut accounts, &source_id, dollars(new_source));
    set_holdings(&mut accounts, &destination_id, dollars(new_destination));
    data.save("accounts", accounts)?;
    Ok(format!(
        "Transfer completed successfully!\n  - Amount: ${}\n  - From: {source_id} (new balance: ${})\n  - To: {destination_id} (new balance: ${})",
        fixed(amount, 2),
        fixed(new_source, 2),
        fixed(new_destination, 2)
    ))
}

/// `account["current_holdings"] = holdings`.
fn set_holdings(accounts: &mut Records, account_id: &str, holdings: String) {
    if let Some(Value::Object(account)) = accounts.get_mut(account_id) {
        account.insert("current_holdings".to_owned(), Value::String(holdings));
    }
}

// ----- apply_checking_account_credit_5829, apply_savings_account_credit_6831 -----

/// What sets the checking and the savings credit tools apart.
struct CreditTool {
    /// The account classes (lowercased) the tool credits.
    classes: &'static [&'static str],
    /// The credit types it takes.
    credit_types: &'static [&'static str],
    /// The transaction description of each credit type, in that order.
    descriptions: &'static [&'static str],
    /// Why an account of another class is refused, after its id.
    wrong_class: &'static str,
    /// What the new balance is written after (`$` or nothing).
    holdings_prefix: &'static str,
    /// The first part of the transaction id's seed.
    seed_prefix: &'static str,
}

/// `apply_checking_account_credit_5829`.
const CHECKING_CREDIT: CreditTool = CreditTool {
    classes: &["checking"],
    credit_types: &["rebate_credit", "fee_refund"],
    descriptions: &[
        "REBATE CREDIT - CUSTOMER SERVICE",
        "FEE REFUND - CUSTOMER SERVICE",
    ],
    wrong_class: "is not a checking account. Credits can only be applied to checking accounts.",
    holdings_prefix: "$",
    seed_prefix: "checking_credit",
};

/// `apply_savings_account_credit_6831`.
const SAVINGS_CREDIT: CreditTool = CreditTool {
    classes: &["saving", "savings"],
    credit_types: &["interest_correction", "fee_refund", "goodwill_credit"],
    descriptions: &[
        "INTEREST CORRECTION - CUSTOMER SERVICE",
        "FEE REFUND - CUSTOMER SERVICE",
        "GOODWILL CREDIT - CUSTOMER SERVICE",
    ],
    wrong_class: "is not a savings account. This tool only applies to savings accounts.",
    holdings_prefix: "",
    seed_prefix: "savings_credit",
};

/// `apply_checking_account_credit_5829` and `apply_savings_account_credit_6831`:
/// credit a positive amount of an accepted credit type to an open account of
/// the tool's class, raising its balance and recording a posted transaction
/// (id: the hash of account, type, amount and date, so the same credit on the
/// same day overwrites its transaction).
fn apply_credit(data: &mut Data<'_>, kwargs: &Kwargs, tool: &CreditTool) -> Answer {
    let account_id = kwargs.get("account_id")?;
    let amount = kwargs.get("amount")?;
    let credit_type = kwargs.get("credit_type")?;
    if !truthy(account_id) || amount.is_null() || !truthy(credit_type) {
        return Ok("Error: Missing required parameters.".to_owned());
    }
    let Ok(amount) = float(amount) else {
        return Ok("Error: Invalid credit amount. Must be a number.".to_owned());
    };
    if amount <= 0.0 {
        return Ok("Error: Credit amount must be positive.".to_owned());
    }
    let Some(type_index) = credit_type
        .as_str()
        .and_then(|kind| tool.credit_types.iter().position(|known| *known == kind))
    else {
        return Ok(invalid_choice("credit_type", tool.credit_types));
    };
    let credit_type = tool.credit_types[type_index];
    let mut accounts = data.table("accounts")?;
    let Some((account_id, account)) = find(&accounts, account_id)? else {
        return Ok(format!(
            "Error: Account '{}' not found.",
            py_str(account_id)
        ));
    };
    let account_id = account_id.to_owned();
    if !tool.classes.contains(&lowercase_class(account)?.as_str()) {
        return Ok(format!(
            "Error: Account '{account_id}' {}",
            tool.wrong_class
        ));
    }
    if !is_open(account) {
        return Ok(format!("Error: Account '{account_id}' is not active."));
    }
    let current_balance = account_balance(account)?;
    let new_balance = current_balance + amount;
    let holdings = format!("{}{}", tool.holdings_prefix, fixed(new_balance, 2));
    set_holdings(&mut accounts, &account_id, holdings);
    data.save("accounts", accounts)?;
    let seed = format!(
        "{}:{account_id}:{credit_type}:{}:{TODAY}",
        tool.seed_prefix,
        float_str(amount)
    );
    let transaction_id = format!("txn_{}", deterministic_id(&seed, 16));
    let transaction = json!({
        "transaction_id": transaction_id,
        "account_id": account_id,
        "date": TODAY,
        "description": tool.descriptions[type_index],
        "amount": Num::Float(amount).to_value(),
        "type": credit_type,
        "status": "posted",
    });
    let mut history = data.table("bank_account_transaction_history")?;
    history.insert(transaction_id.clone(), transaction);
    data.save("bank_account_transaction_history", history)?;
    Ok(format!(
        "\nCredit applied successfully!\n  - Transaction ID: {transaction_id}\n  - Account: {account_id}\n  - Credit Type: {credit_type}\n  - Amount: ${}\n  - Previous Balance: ${}\n  - New Balance: ${}",
        fixed(amount, 2),
        fixed(current_balance, 2),
        fixed(new_balance, 2)
    ))
}

/// `account.get("class", "").lower()`; the `AttributeError` of a class
/// that is no string.
fn lowercase_class(account: &Value) -> Result<String, String> {
    account
        .get("class")
        .map_or_else(|| Ok(String::new()), lower)
}

// ----- submit_interest_discrepancy_report_7294 -----

/// `submit_interest_discrepancy_report_7294`: reports an account's interest
/// credited at the wrong APY. The reference's `add_to_db` finds no
/// `interest_discrepancy_reports` table in the database and stores nothing,
/// so only the answer (with the report's would-be id) is left.
fn submit_interest_discrepancy_report(data: &mut Data<'_>, kwargs: &Kwargs) -> Answer {
    let account_id = kwargs.get("account_id")?;
    let user_id = kwargs.get("user_id")?;
    let numbers = ["expected_apy", "actual_apy", "amount_difference"]
        .map(|name| kwargs.get(name))
        .into_iter()
        .collect::<Result<Vec<&Value>, String>>()?;
    if !truthy(account_id) || !truthy(user_id) || numbers.iter().any(|value| value.is_null()) {
        return Ok("Error: Missing required parameters.".to_owned());
    }
    let Some(&[expected_apy, actual_apy, amount_difference]) = numbers
        .iter()
        .map(|value| float(value).ok())
        .collect::<Option<Vec<f64>>>()
        .as_deref()
    else {
        return Ok(
            "Error: expected_apy, actual_apy, and amount_difference must be numbers.".to_owned(),
        );
    };
    let accounts = data.table("accounts")?;
    let Some((account_id, account)) = find(&accounts, account_id)? else {
        return Ok(format!(
            "Error: Account '{}' not found.",
            py_str(account_id)
        ));
    };
    let users = data.table("users")?;
    let Some((user_id, user)) = find(&users, user_id)? else {
        return Ok(format!("Error: User '{}' not found.", py_str(user_id)));
    };
    let (expected, actual) = (float_str(expected_apy), float_str(actual_apy));
    let seed = format!("interest_report:{account_id}:{user_id}:{expected}:{actual}:{TODAY}");
    let report_id = format!("IDR_{}", deterministic_id(&seed, 16));
    let shown = |record: &Value, field: &str| {
        record
            .get(field)
            .map_or_else(|| "Unknown".to_owned(), py_str)
    };
    let difference = Num::Float(expected_apy - actual_apy)
        .round(4)
        .to_python_string();
    Ok(format!(
        "\nInterest Discrepancy Report Submitted Successfully!\n  - Report ID: {report_id}\n  - Account: {account_id} ({})\n  - Customer: {}\n  - Expected APY: {expected}%\n  - Actual APY: {actual}%\n  - APY Difference: {difference}%\n  - Amount Difference: ${}\n  - Status: PENDING_REVIEW\n\nThe backend team will investigate this discrepancy and ensure correct APY calculations are applied going forward.",
        shown(account, "level"),
        shown(user, "name"),
        fixed(amount_difference, 2)
    ))
}

// ----- get_bank_account_transactions_9173 -----

/// `get_bank_account_transactions_9173`: an account's transactions, most
/// recent first (a stable sort, so same-date records keep their stored
/// order), listed as `query_database_tool` lists records.
fn get_bank_account_transactions(data: &mut Data<'_>, kwargs: &Kwargs) -> Answer {
    let account_id = kwargs.get("account_id")?;
    if !truthy(account_id) {
        return Ok("Error: Missing required parameter: account_id".to_owned());
    }
    let accounts = data.table("accounts")?;
    let Some((account_id, _)) = find(&accounts, account_id)? else {
        return Ok(format!(
            "Error: Account '{}' not found.",
            py_str(account_id)
        ));
    };
    let constraints = Map::from_iter([("account_id".to_owned(), json!(account_id))]);
    let mut transactions: Vec<(String, Value)> = data
        .query("bank_account_transaction_history", &constraints)?
        .into_iter()
        .collect();
    transactions.sort_by_cached_key(|(_, record)| std::cmp::Reverse(happened_at(record)));
    let listing = if transactions.is_empty() {
        "\nNo transactions found for this account.".to_owned()
    } else {
        crate::db::list_records(
            "bank_account_transaction_history",
            transactions.iter().map(|(id, record)| (id, record)),
        )
    };
    Ok([
        "Bank account transactions retrieved successfully.".to_owned(),
        String::new(),
        "Executed: get_bank_account_transactions_9173".to_owned(),
        format!("Transactions for account {account_id}:"),
        listing,
    ]
    .join("\n"))
}

/// `txn_sort_key`: when a transaction happened, its `date` read as
/// `%m/%d/%Y %H:%M:%S` or else `%m/%d/%Y`, as (day, second of the day);
/// `datetime.min` (midnight of 1 January of year 1) when neither reads.
fn happened_at(record: &Value) -> (Day, u32) {
    let date = record.get("date").map_or_else(String::new, py_str);
    let moment = leading_mdy(&date).and_then(|(day, rest)| match rest {
        "" => Some((day, 0)),
        time => time_of_day(time).map(|second| (day, second)),
    });
    moment.unwrap_or((days_from_civil(1, 1, 1), 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discoverable::{as_agent_answers, reference_bank};
    use forge_guest::MemoryStore;

    /// Calls `tool` on `bank` as `call_discoverable_agent_tool` does (every
    /// number a float); an exception shows as `Error: …`.
    fn call(bank: &mut MemoryStore, tool: &str, arguments: Value) -> String {
        let body = TOOLS.iter().find(|body| body.name == tool).expect("a tool");
        let arguments = crate::py::floats(arguments).to_string();
        let kwargs = Kwargs::parse(&arguments, format!("KnowledgeTools.{tool}")).expect("kwargs");
        as_agent_answers((body.run)(&mut Data::new(bank), &kwargs))
            .unwrap_or_else(|error| format!("Error: {error}"))
    }

    fn record(bank: &mut MemoryStore, table: &str, id: &str) -> Option<Value> {
        Data::new(bank).record(table, id).expect("a table")
    }

    #[test]
    fn opens_an_account_once_for_an_eligible_customer() {
        let mut bank = reference_bank();
        let open = |bank: &mut MemoryStore, user: &str, kind: &str, class: &str| {
            let arguments = json!({"user_id": user, "account_type": kind, "account_class": class});
            call(bank, "open_bank_account_4821", arguments)
        };
        assert_eq!(
            open(&mut bank, "224959b99e", "savings", "Silver Plus Account"),
            "Bank account opened successfully!\n  - Account ID: 7e48bf3b0589cfad\n  - User ID: 224959b99e\n  - Account Type: savings\n  - Account Class: Silver Plus Account\n  - Status: OPEN\n  - Initial Balance: $0.00\n  - Date Opened: 11/14/2025"
        );
        assert_eq!(
            record(&mut bank, "accounts", "7e48bf3b0589cfad"),
            Some(
                json!({"account_id": "7e48bf3b0589cfad", "user_id": "224959b99e", "account_type": "savings", "account_class": "Silver Plus Account", "current_holdings": "0.00", "status": "OPEN", "date_opened": "11/14/2025"})
            )
        );
        assert_eq!(
            open(&mut bank, "224959b99e", "savings", "Silver Plus Account"),
            "Failed to open account: Account ID '7e48bf3b0589cfad' may already exist."
        );
        // Customer 123's checking account is six days old.
        assert_eq!(
            open(&mut bank, "123", "savings", "Bronze Account"),
            "Error: Account eligibility requirements not met."
        );
        assert_eq!(
            open(&mut bank, "123", "bogus", "Bronze Account"),
            "Error: Invalid account_type. Must be one of: ['checking', 'savings', 'business_checking', 'business_savings']"
        );
        assert_eq!(
            open(&mut bank, "123", "checking", ""),
            "Error: Missing required parameters."
        );
    }

    #[test]
    fn closes_an_emptied_account_past_its_early_closure_window() {
        let mut bank = reference_bank();
        let close = |bank: &mut MemoryStore, arguments: Value| {
            call(bank, "close_bank_account_7392", arguments)
        };
        assert_eq!(
            close(&mut bank, json!({"account_id": "58d57780cc15e32d"})),
            "Bank account closed successfully!\n  - Account ID: 58d57780cc15e32d\n  - Account Type: N/A\n  - Account Class: N/A\n  - Status: CLOSED\n  - Date Closed: 11/14/2025\n  - Reason: Customer requested closure\n  - Early Closure Fee Waived: No"
        );
        assert_eq!(
            record(&mut bank, "accounts", "58d57780cc15e32d"),
            Some(
                json!({"account_id": "58d57780cc15e32d", "user_id": "jm60a8b9c2", "class": "checking", "level": "Green Account", "date_opened": "07/17/2025", "status": "CLOSED", "current_holdings": "0.00", "date_closed": "11/14/2025", "closure_reason": "Customer requested closure", "early_closure_fee_waived": false})
            )
        );
        assert_eq!(
            close(&mut bank, json!({"account_id": "58d57780cc15e32d"})),
            "Error: Account '58d57780cc15e32d' is already closed."
        );
        // Six days old, $0 against a $25 early closure fee.
        assert_eq!(
            close(&mut bank, json!({"account_id": "01"})),
            "Error: Account unable to be closed."
        );
        assert_eq!(
            close(
                &mut bank,
                json!({"account_id": "01", "reason": "moving", "waive_early_closure_fee": true})
            ),
            "Bank account closed successfully!\n  - Account ID: 01\n  - Account Type: N/A\n  - Account Class: N/A\n  - Status: CLOSED\n  - Date Closed: 11/14/2025\n  - Reason: moving\n  - Early Closure Fee Waived: Yes"
        );
        assert_eq!(
            close(&mut bank, json!({"account_id": "03"})),
            "Error: Account balance must be $0.00 before closing. Current balance: $3400.00"
        );
        assert_eq!(
            close(&mut bank, json!({"account_id": "nope"})),
            "Error: Account 'nope' not found."
        );
        assert_eq!(
            close(&mut bank, json!({"account_id": ""})),
            "Error: Missing required parameter (account_id)."
        );
        assert_eq!(
            close(&mut bank, json!({"account_id": [1]})),
            "Error: Invalid arguments: unhashable type: 'list'"
        );
    }

    #[test]
    fn lists_a_customers_bank_and_card_accounts() {
        let mut bank = reference_bank();
        let list = |bank: &mut MemoryStore, user: &str| {
            call(
                bank,
                "get_all_user_accounts_by_user_id_3847",
                json!({"user_id": user}),
            )
        };
        assert_eq!(
            list(&mut bank, "123"),
            "User accounts retrieved successfully.\n\nExecuted: get_all_user_accounts_by_user_id_3847\nAccounts for user 123:\n\nBank Accounts:\nFound 2 record(s) in 'accounts':\n\n1. Record ID: 01\n   account_id: 01\n   user_id: 123\n   class: checking\n   level: Blue Account\n   date_opened: 11/08/2025\n   status: OPEN\n   current_holdings: 0\n\n2. Record ID: 02\n   account_id: 02\n   user_id: 123\n   class: saving\n   level: Bronze Account\n   date_opened: 11/08/2025\n   status: OPEN\n   current_holdings: 129.02\n\n\nCredit Card Accounts:\n  No credit card accounts found."
        );
        assert_eq!(
            list(&mut bank, "nouser"),
            "User accounts retrieved successfully.\n\nExecuted: get_all_user_accounts_by_user_id_3847\nAccounts for user nouser:\n\nBank Accounts:\n  No bank accounts found.\n\nCredit Card Accounts:\n  No credit card accounts found."
        );
        assert_eq!(
            list(&mut bank, ""),
            "Error: Missing required parameter: user_id"
        );
    }

    #[test]
    fn transfers_what_the_source_holds() {
        let mut bank = reference_bank();
        let transfer = |bank: &mut MemoryStore, to: &str, amount: Value| {
            let arguments =
                json!({"source_account_id": "03", "destination_account_id": to, "amount": amount});
            call(bank, "transfer_funds_between_bank_accounts_7291", arguments)
        };
        assert_eq!(
            transfer(&mut bank, "04", json!(100)),
            "Transfer completed successfully!\n  - Amount: $100.00\n  - From: 03 (new balance: $3300.00)\n  - To: 04 (new balance: $1000.00)"
        );
        let holdings = |bank: &mut MemoryStore, id: &str| {
            record(bank, "accounts", id).map(|account| account["current_holdings"].clone())
        };
        assert_eq!(holdings(&mut bank, "03"), Some(json!("$3300.00")));
        assert_eq!(holdings(&mut bank, "04"), Some(json!("$1000.00")));
        assert_eq!(
            transfer(&mut bank, "04", json!(5000)),
            "Error: Insufficient funds. Source account balance is $3300.00, but transfer amount is $5000.00."
        );
        assert_eq!(
            transfer(&mut bank, "03", json!(1)),
            "Error: Source and destination accounts cannot be the same."
        );
        assert_eq!(
            transfer(&mut bank, "zz", json!(1)),
            "Error: Destination account 'zz' not found."
        );
        assert_eq!(
            transfer(&mut bank, "04", json!("abc")),
            "Error: Invalid amount 'abc'. Must be a number."
        );
        assert_eq!(
            transfer(&mut bank, "04", json!(0)),
            "Error: Transfer amount must be positive."
        );
        assert_eq!(
            transfer(&mut bank, "04", Value::Null),
            "Error: Missing required parameters (source_account_id, destination_account_id, amount)."
        );
    }

    #[test]
    fn credits_checking_and_savings_accounts_with_a_transaction() {
        let mut bank = reference_bank();
        let credit =
            |bank: &mut MemoryStore, tool: &str, account: &str, amount: Value, kind: &str| {
                call(
                    bank,
                    tool,
                    json!({"account_id": account, "amount": amount, "credit_type": kind}),
                )
            };
        let (checking, savings) = (
            "apply_checking_account_credit_5829",
            "apply_savings_account_credit_6831",
        );
        assert_eq!(
            credit(&mut bank, checking, "03", json!(14), "fee_refund"),
            "\nCredit applied successfully!\n  - Transaction ID: txn_7284b824a0a7b0cf\n  - Account: 03\n  - Credit Type: fee_refund\n  - Amount: $14.00\n  - Previous Balance: $3400.00\n  - New Balance: $3414.00"
        );
        assert_eq!(
            record(&mut bank, "accounts", "03").map(|account| account["current_holdings"].clone()),
            Some(json!("$3414.00"))
        );
        assert_eq!(
            record(
                &mut bank,
                "bank_account_transaction_history",
                "txn_7284b824a0a7b0cf"
            ),
            Some(
                json!({"transaction_id": "txn_7284b824a0a7b0cf", "account_id": "03", "date": "11/14/2025", "description": "FEE REFUND - CUSTOMER SERVICE", "amount": 14.0, "type": "fee_refund", "status": "posted"})
            )
        );
        assert_eq!(
            credit(&mut bank, savings, "04", json!(3.5), "interest_correction"),
            "\nCredit applied successfully!\n  - Transaction ID: txn_424cdb9c5684009b\n  - Account: 04\n  - Credit Type: interest_correction\n  - Amount: $3.50\n  - Previous Balance: $900.00\n  - New Balance: $903.50"
        );
        assert_eq!(
            record(&mut bank, "accounts", "04").map(|account| account["current_holdings"].clone()),
            Some(json!("903.50"))
        );
        assert_eq!(
            record(
                &mut bank,
                "bank_account_transaction_history",
                "txn_424cdb9c5684009b"
            ),
            Some(
                json!({"transaction_id": "txn_424cdb9c5684009b", "account_id": "04", "date": "11/14/2025", "description": "INTEREST CORRECTION - CUSTOMER SERVICE", "amount": 3.5, "type": "interest_correction", "status": "posted"})
            )
        );
        assert_eq!(
            credit(&mut bank, checking, "04", json!(14), "fee_refund"),
            "Error: Account '04' is not a checking account. Credits can only be applied to checking accounts."
        );
        assert_eq!(
            credit(&mut bank, savings, "04", json!(14), "rebate_credit"),
            "Error: Invalid credit_type. Must be one of: ['interest_correction', 'fee_refund', 'goodwill_credit']"
        );
        assert_eq!(
            credit(&mut bank, savings, "04", json!("x"), "fee_refund"),
            "Error: Invalid credit amount. Must be a number."
        );
        assert_eq!(
            credit(&mut bank, checking, "03", json!(-1), "fee_refund"),
            "Error: Credit amount must be positive."
        );
        assert_eq!(
            credit(&mut bank, checking, "zz", json!(1), "fee_refund"),
            "Error: Account 'zz' not found."
        );
    }

    #[test]
    fn reports_an_interest_discrepancy_without_storing_it() {
        let mut bank = reference_bank();
        let before = reference_bank();
        let report = |bank: &mut MemoryStore, account: &str, user: &str, expected: Value| {
            let arguments = json!({"account_id": account, "user_id": user, "expected_apy": expected, "actual_apy": 4.0, "amount_difference": 33});
            call(bank, "submit_interest_discrepancy_report_7294", arguments)
        };
        assert_eq!(
            report(&mut bank, "04", "125", json!(4.275)),
            "\nInterest Discrepancy Report Submitted Successfully!\n  - Report ID: IDR_0c239b10f79e31e5\n  - Account: 04 (Silver Account)\n  - Customer: Ayan Wang\n  - Expected APY: 4.275%\n  - Actual APY: 4.0%\n  - APY Difference: 0.275%\n  - Amount Difference: $33.00\n  - Status: PENDING_REVIEW\n\nThe backend team will investigate this discrepancy and ensure correct APY calculations are applied going forward."
        );
        assert_eq!(bank, before);
        assert_eq!(
            report(&mut bank, "zz", "125", json!(4.275)),
            "Error: Account 'zz' not found."
        );
        assert_eq!(
            report(&mut bank, "04", "nouser", json!(4.275)),
            "Error: User 'nouser' not found."
        );
        assert_eq!(
            report(&mut bank, "04", "125", json!("x")),
            "Error: expected_apy, actual_apy, and amount_difference must be numbers."
        );
    }

    #[test]
    fn lists_transactions_most_recent_first_keeping_ties_in_order() {
        let mut bank = reference_bank();
        let list = |bank: &mut MemoryStore, account: &str| {
            call(
                bank,
                "get_bank_account_transactions_9173",
                json!({"account_id": account}),
            )
        };
        assert_eq!(
            list(&mut bank, "01"),
            "Bank account transactions retrieved successfully.\n\nExecuted: get_bank_account_transactions_9173\nTransactions for account 01:\n\nNo transactions found for this account."
        );
        assert_eq!(list(&mut bank, "zz"), "Error: Account 'zz' not found.");
        let dates = [
            "10/01/2025",
            "11/14/2025 10:00:00",
            "bogus",
            "10/01/2025",
            "11/14/2025",
        ];
        let mut data = Data::new(&mut bank);
        for (index, date) in dates.iter().enumerate() {
            let transaction = json!({"account_id": "02", "date": date, "amount": index as f64});
            assert!(
                data.add(
                    "bank_account_transaction_history",
                    &format!("t{index}"),
                    transaction
                )
                .unwrap()
            );
        }
        assert_eq!(
            list(&mut bank, "02"),
            "Bank account transactions retrieved successfully.\n\nExecuted: get_bank_account_transactions_9173\nTransactions for account 02:\nFound 5 record(s) in 'bank_account_transaction_history':\n\n1. Record ID: t1\n   account_id: 02\n   date: 11/14/2025 10:00:00\n   amount: 1.0\n\n2. Record ID: t4\n   account_id: 02\n   date: 11/14/2025\n   amount: 4.0\n\n3. Record ID: t0\n   account_id: 02\n   date: 10/01/2025\n   amount: 0.0\n\n4. Record ID: t3\n   account_id: 02\n   date: 10/01/2025\n   amount: 3.0\n\n5. Record ID: t2\n   account_id: 02\n   date: bogus\n   amount: 2.0\n"
        );
    }

    /// `txn_sort_key` as `datetime.strptime` reads dates (checked against Python).
    #[test]
    fn reads_transaction_dates_as_strptime_does() {
        let at = |date: &str| happened_at(&json!({"date": date}));
        let day = |month, day, year| days_from_civil(year, month, day);
        let min = (day(1, 1, 1), 0);
        assert_eq!(at("11/14/2025"), (day(11, 14, 2025), 0));
        assert_eq!(at("1/2/2025"), (day(1, 2, 2025), 0));
        assert_eq!(at("11/ 1/2025"), (day(11, 1, 2025), 0));
        assert_eq!(at("11/14/2025 10:00:59"), (day(11, 14, 2025), 36059));
        assert_eq!(at("11/14/2025 \t 9:5:7"), (day(11, 14, 2025), 32707));
        assert_eq!(at("02/29/2024"), (day(2, 29, 2024), 0));
        assert_eq!(at("12/31/9999 23:59:59"), (day(12, 31, 9999), 86399));
        for unreadable in [
            "11/14/2025 10:00:60",
            "11/14/2025 24:00:00",
            "02/29/2025",
            "01/01/0000",
            "13/01/2025",
            "00/01/2025",
            "1/32/2025",
            "11/14/2025 ",
            "2025-11-14",
            "11/14/25",
            "011/14/2025",
            "11/14/2025 1:2",
        ] {
            assert_eq!(at(unreadable), min, "{unreadable}");
        }
        assert_eq!(happened_at(&json!({})), min);
    }
}
