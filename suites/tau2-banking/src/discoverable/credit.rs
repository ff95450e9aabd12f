//! Discoverable tools: credit cards — replacement cards, closures, statement
//! credits, account flags, payments from checking and credit limit increases.
//!
//! As in the reference, ids reach the records as they were given and the
//! texts as f-strings show them (`str()`), `not x` is Python's truthiness,
//! and every number argument is a float (`json.loads(parse_int=float)`).
//! Several tools check that a card account exists the reference's way: a
//! `query_database_tool` call on `account_id` whose answer must not say that
//! nothing was found.

use super::{Body, account_balance, field, invalid_choice, one_of, query_by, shows_records};
use crate::dates::TODAY;
use crate::db::Tables;
use crate::ids;
use crate::py::{
    Raised, compared_with_zero, dollars, dumps_indent, fixed, float, float_from_str, grouped, int,
    py_cmp, title_words, upper,
};
use forge_tau_guest::{Data, Kwargs, py_eq, py_str, truthy};
use serde_json::{Value, json};
use std::cmp::Ordering;

pub const TOOLS: &[Body] = &[
    Body {
        name: "order_replacement_credit_card_7291",
        run: order_replacement_credit_card,
    },
    Body {
        name: "get_user_dispute_history_7291",
        run: get_user_dispute_history,
    },
    Body {
        name: "get_pending_replacement_orders_5765",
        run: get_pending_replacement_orders,
    },
    Body {
        name: "log_credit_card_closure_reason_4521",
        run: log_credit_card_closure_reason,
    },
    Body {
        name: "get_closure_reason_history_8293",
        run: get_closure_reason_history,
    },
    Body {
        name: "apply_statement_credit_8472",
        run: apply_statement_credit,
    },
    Body {
        name: "apply_credit_card_account_flag_6147",
        run: apply_credit_card_account_flag,
    },
    Body {
        name: "close_credit_card_account_7834",
        run: close_credit_card_account,
    },
    Body {
        name: "pay_credit_card_from_checking_9182",
        run: pay_credit_card_from_checking,
    },
    Body {
        name: "submit_credit_limit_increase_request_7392",
        run: submit_credit_limit_increase_request,
    },
    Body {
        name: "get_credit_limit_increase_history_4829",
        run: get_credit_limit_increase_history,
    },
    Body {
        name: "get_payment_history_6183",
        run: get_payment_history,
    },
    Body {
        name: "approve_credit_limit_increase_5847",
        run: approve_credit_limit_increase,
    },
    Body {
        name: "deny_credit_limit_increase_5848",
        run: deny_credit_limit_increase,
    },
];

const CARD_ACCOUNTS: &str = "credit_card_accounts";
const CLI_REQUESTS: &str = "credit_limit_increase_requests";

const REPLACEMENT_REASONS: &[&str] = &[
    "fraud_suspected",
    "lost",
    "stolen",
    "damaged",
    "expired",
    "other",
];

const CLOSURE_REASONS: &[&str] = &[
    "annual_fee",
    "not_using_card",
    "found_better_card",
    "unhappy_with_rewards",
    "simplifying_finances",
    "negative_experience",
    "other",
];

const STATEMENT_CREDIT_REASONS: &[&str] = &[
    "goodwill_adjustment",
    "promotional_credit",
    "annual_fee_reversal",
    "late_fee_reversal",
    "interest_charge_reversal",
    "dispute_resolution",
    "price_match",
    "retention_offer",
    "error_correction",
    "other",
];

const FLAG_TYPES: &[&str] = &[
    "annual_fee_waived",
    "promotional_apr",
    "rewards_bonus",
    "other",
];

const FLAG_REASONS: &[&str] = &[
    "retention_offer",
    "loyalty_benefit",
    "promotional",
    "error_correction",
    "other",
];

const DENIAL_REASONS: &[&str] = &[
    "insufficient_account_age",
    "cooldown_period_active",
    "pending_disputes",
    "pending_replacement_card",
    "past_due_balance",
    "high_utilization",
    "insufficient_payment_history",
    "requested_amount_exceeds_limit",
    "other",
];

/// Dispute statuses that make a credit limit increase ineligible.
const OPEN_DISPUTE_STATUSES: &[&str] = &["SUBMITTED", "UNDER_REVIEW", "PENDING"];

/// Replacement order statuses that make a credit limit increase ineligible.
const OPEN_ORDER_STATUSES: &[&str] = &["PENDING", "PROCESSING", "SHIPPED"];

/// Account standings that make a credit limit increase ineligible.
const BAD_STANDINGS: &[&str] = &["PAST_DUE", "DELINQUENT", "COLLECTIONS", "CLOSED"];

/// `order_replacement_credit_card_7291`: records a replacement card order
/// and closes the old card's account.
fn order_replacement_credit_card(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    let required = [
        "credit_card_account_id",
        "user_id",
        "shipping_address",
        "reason",
    ];
    if !all_given(kwargs, &required)? {
        return Ok("Error: Missing required parameters (credit_card_account_id, user_id, shipping_address, reason).".to_owned());
    }
    if one_of(kwargs.get("reason")?, REPLACEMENT_REASONS).is_none() {
        return Ok(invalid_choice("reason", REPLACEMENT_REASONS));
    }
    let account_id = text(kwargs, "credit_card_account_id")?;
    if !card_account_listed(data, &account_id) {
        return Ok(account_not_found(&account_id));
    }
    let reason = text(kwargs, "reason")?;
    let address = text(kwargs, "shipping_address")?;
    let order_id = ids::credit_card_order(&account_id, &text(kwargs, "user_id")?, &reason);
    let expedited = kwargs
        .optional("expedited_shipping")
        .cloned()
        .unwrap_or(Value::Bool(false));
    let order = json!({
        "order_id": order_id,
        "credit_card_account_id": kwargs.get("credit_card_account_id")?,
        "user_id": kwargs.get("user_id")?,
        "shipping_address": kwargs.get("shipping_address")?,
        "reason": kwargs.get("reason")?,
        "expedited_shipping": expedited,
        "order_date": TODAY,
        "status": "ORDERED",
        "old_card_cancelled": true,
    });
    if !data.add("credit_card_orders", &order_id, order)? {
        return Ok(
            "Error: Order may have already been placed for this card replacement.".to_owned(),
        );
    }
    // The reference cancels the old card only where the id is a key of the table.
    data.update(
        CARD_ACCOUNTS,
        &account_id,
        vec![("status", json!("CLOSED")), ("closed_date", json!(TODAY))],
    )?;
    let (method, delivery) = if truthy(&expedited) {
        ("Expedited", "2-3 business days")
    } else {
        ("Standard", "7-10 business days")
    };
    Ok([
        format!("Order ID: {order_id}"),
        format!("Card Account: {account_id}"),
        format!("Reason: {}", title_words(&reason)),
        format!("Shipping Address: {address}"),
        format!("Shipping Method: {method}"),
        format!("Expected Delivery: {delivery}"),
        String::new(),
        "The old card has been cancelled for security. The new card will have the same account number but a new card number and CVV.".to_owned(),
    ]
    .join("\n"))
}

/// `get_user_dispute_history_7291`: the user's credit card transaction
/// disputes.
fn get_user_dispute_history(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    History {
        done: "User transaction dispute history retrieved successfully.",
        tool: "get_user_dispute_history_7291",
        heading: "Transaction dispute history for user",
        table: "transaction_disputes",
        field: "user_id",
        none: "No transaction disputes found for this user.",
    }
    .run(data, kwargs)
}

/// `get_pending_replacement_orders_5765`: the card account's replacement
/// orders (whatever their status).
fn get_pending_replacement_orders(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    History {
        done: "Pending replacement orders check completed.",
        tool: "get_pending_replacement_orders_5765",
        heading: "Replacement orders for credit card account",
        table: "credit_card_orders",
        field: "credit_card_account_id",
        none: "No pending replacement orders found for this credit card account.",
    }
    .run(data, kwargs)
}

/// `log_credit_card_closure_reason_4521`: records why the customer wants
/// the card closed (a second record for the same account and user is
/// silently dropped, as `add_to_db` drops it).
fn log_credit_card_closure_reason(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    if !all_given(
        kwargs,
        &["credit_card_account_id", "user_id", "closure_reason"],
    )? {
        return Ok("Error: Missing required parameters.".to_owned());
    }
    if one_of(kwargs.get("closure_reason")?, CLOSURE_REASONS).is_none() {
        return Ok(invalid_choice("closure_reason", CLOSURE_REASONS));
    }
    let (account, user, reason) = (
        kwargs.get("credit_card_account_id")?,
        kwargs.get("user_id")?,
        kwargs.get("closure_reason")?,
    );
    let record_id = ids::closure_reason(&py_str(account), &py_str(user));
    let record = json!({
        "record_id": record_id,
        "credit_card_account_id": account,
        "user_id": user,
        "closure_reason": reason,
        "logged_at": TODAY,
        "status": "LOGGED",
    });
    data.add("credit_card_closure_reasons", &record_id, record)?;
    let arguments = json!({
        "credit_card_account_id": account,
        "user_id": user,
        "closure_reason": reason,
    });
    Ok(format!(
        "Closure reason logged successfully.\n\n\
         Executed: log_credit_card_closure_reason_4521\n\
         Arguments: {}\n\
         Closure reason '{}' logged for account {}.",
        dumps_indent(&arguments, 2),
        py_str(reason),
        py_str(account)
    ))
}

/// `get_closure_reason_history_8293`: the closure reasons logged for the
/// card account.
fn get_closure_reason_history(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    History {
        done: "Closure reason history retrieved successfully.",
        tool: "get_closure_reason_history_8293",
        heading: "Closure reason history for credit card account",
        table: "credit_card_closure_reasons",
        field: "credit_card_account_id",
        none: "No closure reason records found for this credit card account.",
    }
    .run(data, kwargs)
}

/// `apply_statement_credit_8472`: adds a negative (credit) transaction to
/// the card's transaction history.
fn apply_statement_credit(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    let amount = kwargs.get("amount")?;
    if !all_given(kwargs, &["user_id", "credit_card_account_id", "reason"])? || amount.is_null() {
        return Ok(
            "Error: Missing required parameters (user_id, credit_card_account_id, amount, reason)."
                .to_owned(),
        );
    }
    let amount = match compared_with_zero(amount, "<=") {
        Ok(amount) => amount,
        Err(type_error) => return Err(Raised::Type(type_error)),
    };
    if amount <= 0.0 {
        return Ok("Error: Credit amount must be positive.".to_owned());
    }
    if one_of(kwargs.get("reason")?, STATEMENT_CREDIT_REASONS).is_none() {
        return Ok(invalid_choice("reason", STATEMENT_CREDIT_REASONS));
    }
    let account_id = text(kwargs, "credit_card_account_id")?;
    if !card_account_listed(data, &account_id) {
        return Ok(account_not_found(&account_id));
    }
    let (user_id, reason) = (text(kwargs, "user_id")?, text(kwargs, "reason")?);
    let transaction_id = ids::transaction(
        &user_id,
        "STATEMENT_CREDIT",
        &reason,
        amount,
        "Statement Credit",
        None,
    );
    let credit = json!({
        "transaction_id": transaction_id,
        "user_id": kwargs.get("user_id")?,
        "credit_card_account_id": kwargs.get("credit_card_account_id")?,
        "credit_card_type": "N/A",
        "merchant_name": "Rho-Bank Statement Credit",
        "transaction_amount": format!("-${}", fixed(amount, 2)),
        "transaction_date": TODAY,
        "category": "Statement Credit",
        "status": "COMPLETED",
        "rewards_earned": "0 points",
        "credit_reason": kwargs.get("reason")?,
    });
    if !data.add("credit_card_transaction_history", &transaction_id, credit)? {
        return Ok(format!(
            "Error: Failed to apply statement credit. Transaction ID '{transaction_id}' may already exist."
        ));
    }
    Ok(format!(
        "Statement credit applied successfully.\n\n\
         Executed: apply_statement_credit_8472\n\
         \x20 - Transaction ID: {transaction_id}\n\
         \x20 - User ID: {user_id}\n\
         \x20 - Account: {account_id}\n\
         \x20 - Credit Amount: ${}\n\
         \x20 - Reason: {}\n\
         \x20 - Date: {TODAY}",
        fixed(amount, 2),
        title_words(&reason)
    ))
}

/// `apply_credit_card_account_flag_6147`: records an account-level flag
/// (a fee waiver, a promotional rate…) effective today.
fn apply_credit_card_account_flag(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    let required = [
        "credit_card_account_id",
        "user_id",
        "flag_type",
        "expiration_date",
        "reason",
    ];
    if !all_given(kwargs, &required)? {
        return Ok("Error: Missing required parameters (credit_card_account_id, user_id, flag_type, expiration_date, reason).".to_owned());
    }
    if one_of(kwargs.get("flag_type")?, FLAG_TYPES).is_none() {
        return Ok(invalid_choice("flag_type", FLAG_TYPES));
    }
    if one_of(kwargs.get("reason")?, FLAG_REASONS).is_none() {
        return Ok(invalid_choice("reason", FLAG_REASONS));
    }
    let account_id = text(kwargs, "credit_card_account_id")?;
    if !card_account_listed(data, &account_id) {
        return Ok(account_not_found(&account_id));
    }
    let (flag_type, expiration) = (text(kwargs, "flag_type")?, text(kwargs, "expiration_date")?);
    let flag_id = ids::account_flag(&account_id, &flag_type, &expiration);
    let flag = json!({
        "flag_id": flag_id,
        "credit_card_account_id": kwargs.get("credit_card_account_id")?,
        "user_id": kwargs.get("user_id")?,
        "flag_type": kwargs.get("flag_type")?,
        "effective_date": TODAY,
        "expiration_date": kwargs.get("expiration_date")?,
        "reason": kwargs.get("reason")?,
        "applied_at": TODAY,
        "status": "ACTIVE",
    });
    if !data.add("credit_card_account_flags", &flag_id, flag)? {
        return Ok(format!(
            "Error: Failed to apply account flag. Flag ID '{flag_id}' may already exist."
        ));
    }
    Ok(format!(
        "Account flag applied successfully!\n\
         \x20 - Flag ID: {flag_id}\n\
         \x20 - Account: {account_id}\n\
         \x20 - User ID: {}\n\
         \x20 - Flag Type: {}\n\
         \x20 - Effective Date: {TODAY}\n\
         \x20 - Expiration Date: {expiration}\n\
         \x20 - Reason: {}",
        text(kwargs, "user_id")?,
        title_words(&flag_type),
        title_words(&text(kwargs, "reason")?)
    ))
}

/// `close_credit_card_account_7834`: marks the card account closed, today,
/// by the user.
fn close_credit_card_account(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    if !all_given(kwargs, &["credit_card_account_id", "user_id"])? {
        return Ok(
            "Error: Missing required parameters (credit_card_account_id, user_id).".to_owned(),
        );
    }
    let account_id = text(kwargs, "credit_card_account_id")?;
    if !card_account_listed(data, &account_id) {
        return Ok(account_not_found(&account_id));
    }
    let user = kwargs.get("user_id")?;
    let closing = vec![
        ("status", json!("CLOSED")),
        ("closed_date", json!(TODAY)),
        ("closed_by", user.clone()),
    ];
    if data.update(CARD_ACCOUNTS, &account_id, closing)?.is_none() {
        return Ok(format!(
            "Error: Failed to close credit card account '{account_id}'."
        ));
    }
    let arguments = json!({
        "credit_card_account_id": kwargs.get("credit_card_account_id")?,
        "user_id": user,
    });
    Ok(format!(
        "Credit card account closed successfully.\n\n\
         Executed: close_credit_card_account_7834\n\
         Arguments: {}\n\
         Account {account_id} has been closed.",
        dumps_indent(&arguments, 2)
    ))
}

/// `pay_credit_card_from_checking_9182`: moves `amount` from the user's
/// checking account to their card, lowering both balances.
fn pay_credit_card_from_checking(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    let required = ["user_id", "checking_account_id", "credit_card_account_id"];
    if !all_given(kwargs, &required)? || kwargs.get("amount")?.is_null() {
        return Ok("Error: Missing required parameters (user_id, checking_account_id, credit_card_account_id, amount).".to_owned());
    }
    let Ok(amount) = float(kwargs.get("amount")?) else {
        return Ok("Error: Invalid payment amount. Must be a positive number.".to_owned());
    };
    if amount <= 0.0 {
        return Ok("Error: Payment amount must be a positive number.".to_owned());
    }
    let user = kwargs.get("user_id")?;
    let checking_id = text(kwargs, "checking_account_id")?;
    let Some(checking) = data.record("accounts", &checking_id)? else {
        return Ok(format!(
            "Error: Checking account '{checking_id}' not found."
        ));
    };
    if !owned_by(&checking, user) {
        return Ok(format!(
            "Error: Checking account '{checking_id}' does not belong to user '{}'.",
            py_str(user)
        ));
    }
    if checking.get("class").and_then(Value::as_str) != Some("checking") {
        return Ok(format!(
            "Error: Account '{checking_id}' is not a checking account."
        ));
    }
    let available = account_balance(&checking)?;
    if amount > available {
        return Ok(format!(
            "Error: Insufficient funds in checking account. Available balance: ${}, requested payment: ${}.",
            fixed(available, 2),
            fixed(amount, 2)
        ));
    }
    let card_id = text(kwargs, "credit_card_account_id")?;
    let Some(card) = data.record(CARD_ACCOUNTS, &card_id)? else {
        return Ok(account_not_found(&card_id));
    };
    if !owned_by(&card, user) {
        return Ok(not_the_users(&card_id, user));
    }
    let owed = dollars_or_zero(card.get("current_balance"));
    if amount > owed {
        return Ok(format!(
            "Error: Payment amount (${}) exceeds credit card balance (${}). Please specify an amount up to the outstanding balance.",
            fixed(amount, 2),
            fixed(owed, 2)
        ));
    }
    let (new_checking, new_owed) = (available - amount, owed - amount);
    data.update(
        "accounts",
        &checking_id,
        vec![("current_holdings", json!(fixed(new_checking, 2)))],
    )?;
    data.update(
        CARD_ACCOUNTS,
        &card_id,
        vec![("current_balance", json!(dollars(new_owed)))],
    )?;
    Ok(format!(
        "Payment processed successfully!\n\
         \x20 - Payment Amount: ${}\n\
         \x20 - From Checking Account: {checking_id}\n\
         \x20 - To Credit Card Account: {card_id}\n\
         \x20 - New Checking Balance: ${}\n\
         \x20 - New Credit Card Balance: ${}\n\
         The payment has been applied immediately.",
        fixed(amount, 2),
        fixed(new_checking, 2),
        fixed(new_owed, 2)
    ))
}

/// `submit_credit_limit_increase_request_7392`: records a pending request to
/// raise the card's limit by a whole number of dollars.
fn submit_credit_limit_increase_request(
    data: &mut Data<'_>,
    kwargs: &Kwargs,
) -> Result<String, Raised> {
    let requested = kwargs.get("requested_increase_amount")?;
    if !all_given(kwargs, &["credit_card_account_id", "user_id"])? || requested.is_null() {
        return Ok("Error: Missing required parameters.".to_owned());
    }
    let Ok(requested) = float(requested) else {
        return Ok("Error: Invalid requested_increase_amount. Must be a whole number.".to_owned());
    };
    if !(requested.is_finite() && requested.fract() == 0.0) {
        return Ok(
            "Error: Invalid requested_increase_amount. Must be a whole number of dollars."
                .to_owned(),
        );
    }
    if requested <= 0.0 {
        return Ok("Error: Requested increase amount must be positive.".to_owned());
    }
    let account_id = text(kwargs, "credit_card_account_id")?;
    let Some(account) = data.record(CARD_ACCOUNTS, &account_id)? else {
        return Ok(account_not_found(&account_id));
    };
    let user = kwargs.get("user_id")?;
    if !owned_by(&account, user) {
        return Ok(not_the_users(&account_id, user));
    }
    let request_id = ids::credit_limit_increase_request(&account_id, &py_str(user), requested);
    let request = json!({
        "request_id": request_id,
        "credit_card_account_id": kwargs.get("credit_card_account_id")?,
        "user_id": user,
        // `int(requested)`: whole, so the cast only saturates past i64.
        "requested_increase_amount": requested as i64,
        "submitted_at": TODAY,
        "status": "PENDING",
    });
    if !data.add(CLI_REQUESTS, &request_id, request)? {
        return Ok("Error: A similar request may already exist.".to_owned());
    }
    Ok(format!(
        "Credit limit increase request submitted successfully.\n\n\
         Executed: submit_credit_limit_increase_request_7392\n\
         \x20 - Request ID: {request_id}\n\
         \x20 - Account: {account_id}\n\
         \x20 - Requested Increase: ${}\n\
         \x20 - Status: PENDING",
        grouped(requested, 0)
    ))
}

/// `get_credit_limit_increase_history_4829`: the card account's credit
/// limit increase requests and decisions.
fn get_credit_limit_increase_history(
    data: &mut Data<'_>,
    kwargs: &Kwargs,
) -> Result<String, Raised> {
    History {
        done: "Credit limit increase history retrieved.",
        tool: "get_credit_limit_increase_history_4829",
        heading: "Credit limit increase history for account",
        table: CLI_REQUESTS,
        field: "credit_card_account_id",
        none: "No credit limit increase requests found for this account.",
    }
    .run(data, kwargs)
}

/// `get_payment_history_6183`: the card's latest `months` payments, newest
/// first, and how many of them in a row were on time.
fn get_payment_history(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    let months = kwargs.get("months")?;
    if !truthy(kwargs.get("credit_card_account_id")?) || months.is_null() {
        return Ok(
            "Error: Missing required parameters (credit_card_account_id, months).".to_owned(),
        );
    }
    let Some(months) = int(months) else {
        return Ok("Error: Invalid months value. Must be a positive integer.".to_owned());
    };
    if months <= 0 {
        return Ok("Error: months must be a positive integer.".to_owned());
    }
    let account = kwargs.get("credit_card_account_id")?;
    let mut payments: Vec<Value> = data
        .table("payment_history")?
        .into_values()
        .filter(|payment| py_eq(field(payment, "credit_card_account_id"), account))
        .collect();
    let account = py_str(account);
    if payments.is_empty() {
        return Ok(format!("No payment history found for account '{account}'."));
    }
    // `sort(key=payment_date or "", reverse=True)`: stable, newest first.
    let date = |payment: &Value| match payment.get("payment_date") {
        Some(date) if truthy(date) => date.clone(),
        _ => json!(""),
    };
    payments.sort_by(|a, b| py_cmp(&date(b), &date(a)).unwrap_or(Ordering::Equal));
    payments.truncate(usize::try_from(months).unwrap_or(usize::MAX));
    let on_time = payments
        .iter()
        .take_while(|payment| payment.get("status").and_then(Value::as_str) == Some("ON_TIME"))
        .count();
    let mut lines = vec![
        format!("Payment history for account '{account}' (last {months} months):"),
        format!("Consecutive on-time payments: {on_time}"),
    ];
    lines.extend(payments.iter().map(|payment| {
        format!(
            "\n  - Payment Date: {}\n    Amount: {}\n    Status: {}",
            py_str(field(payment, "payment_date")),
            py_str(field(payment, "amount")),
            py_str(field(payment, "status"))
        )
    }));
    Ok(lines.join("\n"))
}

/// `approve_credit_limit_increase_5847`: sets the card's new limit and
/// records the approval, unless the user has an open dispute, the card a
/// replacement on its way, or the account a bad standing (one generic
/// refusal for all three). The record is dropped, as `add_to_db` drops it,
/// where its id is taken (a pending request for the same increase).
fn approve_credit_limit_increase(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    let new_limit = kwargs.get("new_credit_limit")?;
    if !all_given(kwargs, &["credit_card_account_id", "user_id"])? || new_limit.is_null() {
        return Ok("Error: Missing required parameters.".to_owned());
    }
    let account_id = text(kwargs, "credit_card_account_id")?;
    let Some(account) = data.record(CARD_ACCOUNTS, &account_id)? else {
        return Ok(account_not_found(&account_id));
    };
    let user = kwargs.get("user_id")?;
    if !owned_by(&account, user) {
        return Ok(not_the_users(&account_id, user));
    }
    if !increase_eligible(data, &account, user, kwargs.get("credit_card_account_id")?)? {
        return Ok(
            "Error: Credit limit increase request cannot be approved at this time.".to_owned(),
        );
    }
    let current = dollars_or_zero(account.get("credit_limit"));
    let new_limit = float(new_limit)?;
    let (previous, limit, increase) = (
        dollars(current),
        dollars(new_limit),
        dollars(new_limit - current),
    );
    data.update(
        CARD_ACCOUNTS,
        &account_id,
        vec![("credit_limit", json!(limit))],
    )?;
    let request_id =
        ids::credit_limit_increase_request(&account_id, &py_str(user), new_limit - current);
    let approval = json!({
        "request_id": request_id,
        "credit_card_account_id": kwargs.get("credit_card_account_id")?,
        "user_id": user,
        "previous_limit": previous,
        "new_limit": limit,
        "increase_amount": increase,
        "decision_date": TODAY,
        "status": "APPROVED",
    });
    data.add(CLI_REQUESTS, &request_id, approval)?;
    Ok(format!(
        "Credit limit increase approved!\n\
         \x20 - Account: {account_id}\n\
         \x20 - Previous Limit: {previous}\n\
         \x20 - New Limit: {limit}\n\
         \x20 - Increase: {increase}\n\
         \x20 - Effective Date: {TODAY}\n\
         The customer will receive a confirmation email."
    ))
}

/// The approval's eligibility checks, in the reference's order: no open
/// dispute of the user's, no replacement of this card under way, and an
/// `account_status` (`.upper()`, which fails on anything but a string) in
/// good standing.
fn increase_eligible(
    data: &Data<'_>,
    account: &Value,
    user: &Value,
    account_id: &Value,
) -> Result<bool, String> {
    let open_dispute = data.table("transaction_disputes")?.values().any(|dispute| {
        py_eq(field(dispute, "user_id"), user)
            && one_of(field(dispute, "status"), OPEN_DISPUTE_STATUSES).is_some()
    });
    if open_dispute {
        return Ok(false);
    }
    let open_order = data.table("credit_card_orders")?.values().any(|order| {
        py_eq(field(order, "credit_card_account_id"), account_id)
            && one_of(field(order, "status"), OPEN_ORDER_STATUSES).is_some()
    });
    if open_order {
        return Ok(false);
    }
    let standing = account
        .get("account_status")
        .map_or_else(|| Ok(String::new()), upper)?;
    Ok(!BAD_STANDINGS.contains(&standing.as_str()))
}

/// `deny_credit_limit_increase_5848`: records the denial and its reason (a
/// second denial for the same account and user is silently dropped, as
/// `add_to_db` drops it).
fn deny_credit_limit_increase(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    if !all_given(
        kwargs,
        &["credit_card_account_id", "user_id", "denial_reason"],
    )? {
        return Ok("Error: Missing required parameters.".to_owned());
    }
    if one_of(kwargs.get("denial_reason")?, DENIAL_REASONS).is_none() {
        return Ok(format!(
            "Error: Invalid denial_reason. Must be one of: {}",
            DENIAL_REASONS.join(", ")
        ));
    }
    let account_id = text(kwargs, "credit_card_account_id")?;
    if data.record(CARD_ACCOUNTS, &account_id)?.is_none() {
        return Ok(account_not_found(&account_id));
    }
    let request_id =
        ids::credit_limit_increase_request(&account_id, &text(kwargs, "user_id")?, 0.0);
    let denial = json!({
        "request_id": request_id,
        "credit_card_account_id": kwargs.get("credit_card_account_id")?,
        "user_id": kwargs.get("user_id")?,
        "denial_reason": kwargs.get("denial_reason")?,
        "decision_date": TODAY,
        "status": "DENIED",
    });
    data.add(CLI_REQUESTS, &request_id, denial)?;
    Ok(format!(
        "Credit limit increase request denied.\n\
         \x20 - Account: {account_id}\n\
         \x20 - Denial Reason: {}\n\
         \x20 - Date: {TODAY}\n\
         The customer will receive a notification explaining the denial.",
        text(kwargs, "denial_reason")?
    ))
}

/// The reference's history readers: a first line, the tool's name, a
/// heading naming the id, then the records of `table` whose `field` is the
/// argument of the same name, as `query_database_tool` lists them.
struct History {
    done: &'static str,
    tool: &'static str,
    /// The heading, up to the id.
    heading: &'static str,
    table: &'static str,
    field: &'static str,
    /// What stands for the listing when nothing matches.
    none: &'static str,
}

impl History {
    fn run(&self, data: &Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
        let value = kwargs.get(self.field)?;
        if !truthy(value) {
            return Ok(format!("Error: Missing required parameter: {}", self.field));
        }
        let id = py_str(value);
        let answer = query_by(data, self.table, self.field, &id);
        let listing = if shows_records(&answer) {
            answer
        } else {
            format!("\n{}", self.none)
        };
        Ok([
            self.done.to_owned(),
            String::new(),
            format!("Executed: {}", self.tool),
            format!("{} {id}:", self.heading),
            listing,
        ]
        .join("\n"))
    }
}

/// Argument `name` as an f-string shows it.
fn text(kwargs: &Kwargs, name: &str) -> Result<String, String> {
    kwargs.get(name).map(py_str)
}

/// Whether every argument named is truthy: the reference's
/// `if not a or not b …` guard.
fn all_given(kwargs: &Kwargs, names: &[&str]) -> Result<bool, String> {
    for name in names {
        if !truthy(kwargs.get(name)?) {
            return Ok(false);
        }
    }
    Ok(true)
}

fn account_not_found(account_id: &str) -> String {
    format!("Error: Credit card account '{account_id}' not found.")
}

fn not_the_users(account_id: &str, user: &Value) -> String {
    format!(
        "Error: Credit card account '{account_id}' does not belong to user '{}'.",
        py_str(user)
    )
}

/// `record.get("user_id") == user`.
fn owned_by(record: &Value, user: &Value) -> bool {
    py_eq(field(record, "user_id"), user)
}

/// Whether `query_database_tool` finds a card account whose `account_id` is
/// `account_id`.
fn card_account_listed(data: &Data<'_>, account_id: &str) -> bool {
    shows_records(&query_by(data, CARD_ACCOUNTS, "account_id", account_id))
}

/// `float(str(value).replace("$", "").replace(",", ""))`, 0 when absent or
/// refused.
fn dollars_or_zero(value: Option<&Value>) -> f64 {
    value
        .and_then(|value| float_from_str(&py_str(value).replace(['$', ','], "")).ok())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    //! Expected texts and records are the reference's, run on the same data.

    use super::*;
    use crate::discoverable::{as_agent_answers, reference_bank};
    use crate::py::floats;
    use forge_guest::MemoryStore;

    /// Calls `tool` with `arguments` read as the reference reads them (every
    /// number a float).
    fn call(store: &mut MemoryStore, tool: &str, arguments: Value) -> Result<String, String> {
        let body = TOOLS.iter().find(|body| body.name == tool).expect("a tool");
        let kwargs =
            Kwargs::parse(&floats(arguments).to_string(), tool.to_owned()).expect("kwargs");
        as_agent_answers((body.run)(&mut Data::new(store), &kwargs))
    }

    fn ok(store: &mut MemoryStore, tool: &str, arguments: Value) -> String {
        call(store, tool, arguments).expect("no exception")
    }

    fn record(store: &mut MemoryStore, table: &str, id: &str) -> Option<Value> {
        Data::new(store).record(table, id).expect("a table")
    }

    const ORDER: &str = "order_replacement_credit_card_7291";

    #[test]
    fn replacement_orders_close_the_old_card() {
        let mut bank = reference_bank();
        let order = |reason: &str, account: &str| {
            json!({"credit_card_account_id": account, "user_id": "584f9c5d00",
                   "shipping_address": "1456 Astoria Boulevard, Queens, NY 11102", "reason": reason})
        };
        let mut first = order("fraud_suspected", "cc_584f9c5d00_gold");
        first["expedited_shipping"] = json!(true);
        assert_eq!(
            ok(&mut bank, ORDER, first.clone()),
            "Order ID: ccord_ad344b6a4227\nCard Account: cc_584f9c5d00_gold\nReason: Fraud Suspected\nShipping Address: 1456 Astoria Boulevard, Queens, NY 11102\nShipping Method: Expedited\nExpected Delivery: 2-3 business days\n\nThe old card has been cancelled for security. The new card will have the same account number but a new card number and CVV."
        );
        assert_eq!(
            record(&mut bank, "credit_card_orders", "ccord_ad344b6a4227").unwrap(),
            json!({"order_id": "ccord_ad344b6a4227", "credit_card_account_id": "cc_584f9c5d00_gold", "user_id": "584f9c5d00", "shipping_address": "1456 Astoria Boulevard, Queens, NY 11102", "reason": "fraud_suspected", "expedited_shipping": true, "order_date": "11/14/2025", "status": "ORDERED", "old_card_cancelled": true})
        );
        assert_eq!(
            record(&mut bank, CARD_ACCOUNTS, "cc_584f9c5d00_gold").unwrap().to_string(),
            json!({"account_id": "cc_584f9c5d00_gold", "user_id": "584f9c5d00", "card_type": "Gold Rewards Card", "date_of_account_open": "03/20/2023", "current_balance": "$0.00", "credit_limit": "$5000.00", "reward_points": "8,200 points", "status": "CLOSED", "closed_date": "11/14/2025"}).to_string()
        );
        assert_eq!(
            ok(
                &mut bank,
                ORDER,
                order("fraud_suspected", "cc_584f9c5d00_gold")
            ),
            "Error: Order may have already been placed for this card replacement."
        );
        let standard = ok(&mut bank, ORDER, order("damaged", "cc_lj82d4f1a9_silver"));
        assert!(standard.contains("\nReason: Damaged\n"), "{standard}");
        assert!(
            standard
                .contains("\nShipping Method: Standard\nExpected Delivery: 7-10 business days\n")
        );
        assert_eq!(
            ok(&mut bank, ORDER, order("lost", "cc_nope")),
            "Error: Credit card account 'cc_nope' not found."
        );
        assert_eq!(
            ok(&mut bank, ORDER, order("bored", "cc_nope")),
            "Error: Invalid reason. Must be one of: ['fraud_suspected', 'lost', 'stolen', 'damaged', 'expired', 'other']"
        );
        assert_eq!(
            ok(&mut bank, ORDER, order("lost", "")),
            "Error: Missing required parameters (credit_card_account_id, user_id, shipping_address, reason)."
        );
    }

    #[test]
    fn histories_list_the_matching_records() {
        let mut bank = reference_bank();
        let disputes = ok(
            &mut bank,
            "get_user_dispute_history_7291",
            json!({"user_id": "6680a37184"}),
        );
        assert!(disputes.starts_with("User transaction dispute history retrieved successfully.\n\nExecuted: get_user_dispute_history_7291\nTransaction dispute history for user 6680a37184:\nFound 1 record(s) in 'transaction_disputes':\n\n1. Record ID: dsp_7a3e91b4c2d8\n   dispute_id: dsp_7a3e91b4c2d8\n"), "{disputes}");
        assert!(disputes.ends_with("   partial_refund_amount: None\n   eligible_for_provisional_credit: True\n   provisional_credit_given: True\n   submitted_at: 11/10/2025\n   status: UNDER_REVIEW\n"));
        assert_eq!(
            ok(
                &mut bank,
                "get_user_dispute_history_7291",
                json!({"user_id": "584f9c5d00"})
            ),
            "User transaction dispute history retrieved successfully.\n\nExecuted: get_user_dispute_history_7291\nTransaction dispute history for user 584f9c5d00:\n\nNo transaction disputes found for this user."
        );
        assert_eq!(
            ok(
                &mut bank,
                "get_user_dispute_history_7291",
                json!({"user_id": ""})
            ),
            "Error: Missing required parameter: user_id"
        );
        let orders = "get_pending_replacement_orders_5765";
        assert_eq!(
            ok(
                &mut bank,
                orders,
                json!({"credit_card_account_id": "cc_e3f4a5b6c7_eco"})
            ),
            "Pending replacement orders check completed.\n\nExecuted: get_pending_replacement_orders_5765\nReplacement orders for credit card account cc_e3f4a5b6c7_eco:\nFound 1 record(s) in 'credit_card_orders':\n\n1. Record ID: ccord_e3f4a5b6c7_eco_001\n   order_id: ccord_e3f4a5b6c7_eco_001\n   credit_card_account_id: cc_e3f4a5b6c7_eco\n   user_id: e3f4a5b6c7\n   shipping_address: 1847 Aegean Drive, Tampa, FL 33606\n   reason: damaged\n   expedited_shipping: False\n   order_date: 11/10/2025\n   expected_delivery: 11/20/2025\n   status: SHIPPED\n"
        );
        assert_eq!(
            ok(
                &mut bank,
                orders,
                json!({"credit_card_account_id": "cc_584f9c5d00_gold"})
            ),
            "Pending replacement orders check completed.\n\nExecuted: get_pending_replacement_orders_5765\nReplacement orders for credit card account cc_584f9c5d00_gold:\n\nNo pending replacement orders found for this credit card account."
        );
        assert_eq!(
            ok(&mut bank, orders, json!({"credit_card_account_id": ""})),
            "Error: Missing required parameter: credit_card_account_id"
        );
        let closures = "get_closure_reason_history_8293";
        assert_eq!(
            ok(
                &mut bank,
                closures,
                json!({"credit_card_account_id": "cc_e3f4a5b6c7_green"})
            ),
            "Closure reason history retrieved successfully.\n\nExecuted: get_closure_reason_history_8293\nClosure reason history for credit card account cc_e3f4a5b6c7_green:\nFound 1 record(s) in 'credit_card_closure_reasons':\n\n1. Record ID: clsr_e3f4a5b6c7_green_001\n   record_id: clsr_e3f4a5b6c7_green_001\n   credit_card_account_id: cc_e3f4a5b6c7_green\n   user_id: e3f4a5b6c7\n   closure_reason: simplifying_finances\n   logged_at: 09/15/2025\n   status: LOGGED\n"
        );
        assert_eq!(
            ok(
                &mut bank,
                closures,
                json!({"credit_card_account_id": "cc_584f9c5d00_gold"})
            ),
            "Closure reason history retrieved successfully.\n\nExecuted: get_closure_reason_history_8293\nClosure reason history for credit card account cc_584f9c5d00_gold:\n\nNo closure reason records found for this credit card account."
        );
        let increases = "get_credit_limit_increase_history_4829";
        let gold = json!({"credit_card_account_id": "cc_584f9c5d00_gold"});
        assert_eq!(
            ok(&mut bank, increases, gold.clone()),
            "Credit limit increase history retrieved.\n\nExecuted: get_credit_limit_increase_history_4829\nCredit limit increase history for account cc_584f9c5d00_gold:\n\nNo credit limit increase requests found for this account."
        );
        ok(
            &mut bank,
            SUBMIT,
            json!({"credit_card_account_id": "cc_584f9c5d00_gold", "user_id": "584f9c5d00", "requested_increase_amount": 2500}),
        );
        assert_eq!(
            ok(&mut bank, increases, gold),
            "Credit limit increase history retrieved.\n\nExecuted: get_credit_limit_increase_history_4829\nCredit limit increase history for account cc_584f9c5d00_gold:\nFound 1 record(s) in 'credit_limit_increase_requests':\n\n1. Record ID: cli_4fe9de112e66\n   request_id: cli_4fe9de112e66\n   credit_card_account_id: cc_584f9c5d00_gold\n   user_id: 584f9c5d00\n   requested_increase_amount: 2500\n   submitted_at: 11/14/2025\n   status: PENDING\n"
        );
        assert_eq!(
            ok(&mut bank, increases, json!({"credit_card_account_id": ""})),
            "Error: Missing required parameter: credit_card_account_id"
        );
    }

    #[test]
    fn closures_are_logged_and_applied() {
        let mut bank = reference_bank();
        let log = "log_credit_card_closure_reason_4521";
        let reason = |user: &str, reason: &str| json!({"credit_card_account_id": "cc_224959b99e_plat", "user_id": user, "closure_reason": reason});
        assert_eq!(
            ok(&mut bank, log, reason("224959b99e", "annual_fee")),
            "Closure reason logged successfully.\n\nExecuted: log_credit_card_closure_reason_4521\nArguments: {\n  \"credit_card_account_id\": \"cc_224959b99e_plat\",\n  \"user_id\": \"224959b99e\",\n  \"closure_reason\": \"annual_fee\"\n}\nClosure reason 'annual_fee' logged for account cc_224959b99e_plat."
        );
        assert_eq!(
            record(
                &mut bank,
                "credit_card_closure_reasons",
                "clsr_a7ab73bf5bc4"
            )
            .unwrap(),
            json!({"record_id": "clsr_a7ab73bf5bc4", "credit_card_account_id": "cc_224959b99e_plat", "user_id": "224959b99e", "closure_reason": "annual_fee", "logged_at": "11/14/2025", "status": "LOGGED"})
        );
        assert_eq!(
            ok(&mut bank, log, reason("224959b99e", "too_shiny")),
            "Error: Invalid closure_reason. Must be one of: ['annual_fee', 'not_using_card', 'found_better_card', 'unhappy_with_rewards', 'simplifying_finances', 'negative_experience', 'other']"
        );
        assert_eq!(
            ok(&mut bank, log, reason("", "annual_fee")),
            "Error: Missing required parameters."
        );

        let close = "close_credit_card_account_7834";
        let account = |id: &str, user: &str| json!({"credit_card_account_id": id, "user_id": user});
        assert_eq!(
            ok(
                &mut bank,
                close,
                account("cc_h1i2j3k4l5_green", "h1i2j3k4l5")
            ),
            "Credit card account closed successfully.\n\nExecuted: close_credit_card_account_7834\nArguments: {\n  \"credit_card_account_id\": \"cc_h1i2j3k4l5_green\",\n  \"user_id\": \"h1i2j3k4l5\"\n}\nAccount cc_h1i2j3k4l5_green has been closed."
        );
        assert_eq!(
            record(&mut bank, CARD_ACCOUNTS, "cc_h1i2j3k4l5_green").unwrap().to_string(),
            json!({"account_id": "cc_h1i2j3k4l5_green", "user_id": "h1i2j3k4l5", "card_type": "Green Rewards Card", "date_of_account_open": "03/01/2024", "current_balance": "$0.00", "reward_points": "2150 points", "status": "CLOSED", "closed_date": "11/14/2025", "closed_by": "h1i2j3k4l5"}).to_string()
        );
        assert_eq!(
            ok(&mut bank, close, account("cc_nope", "h1i2j3k4l5")),
            "Error: Credit card account 'cc_nope' not found."
        );
        assert_eq!(
            ok(&mut bank, close, account("cc_nope", "")),
            "Error: Missing required parameters (credit_card_account_id, user_id)."
        );
    }

    #[test]
    fn statement_credits_are_negative_transactions() {
        let mut bank = reference_bank();
        let tool = "apply_statement_credit_8472";
        let credit = |account: &str, amount: Value, reason: &str| json!({"user_id": "c7d8e9f0a1", "credit_card_account_id": account, "amount": amount, "reason": reason});
        let plat = credit("cc_c7d8e9f0a1_plat", json!(50), "retention_offer");
        assert_eq!(
            ok(&mut bank, tool, plat.clone()),
            "Statement credit applied successfully.\n\nExecuted: apply_statement_credit_8472\n  - Transaction ID: txn_cafbbcc89c13\n  - User ID: c7d8e9f0a1\n  - Account: cc_c7d8e9f0a1_plat\n  - Credit Amount: $50.00\n  - Reason: Retention Offer\n  - Date: 11/14/2025"
        );
        assert_eq!(
            record(&mut bank, "credit_card_transaction_history", "txn_cafbbcc89c13").unwrap().to_string(),
            json!({"transaction_id": "txn_cafbbcc89c13", "user_id": "c7d8e9f0a1", "credit_card_account_id": "cc_c7d8e9f0a1_plat", "credit_card_type": "N/A", "merchant_name": "Rho-Bank Statement Credit", "transaction_amount": "-$50.00", "transaction_date": "11/14/2025", "category": "Statement Credit", "status": "COMPLETED", "rewards_earned": "0 points", "credit_reason": "retention_offer"}).to_string()
        );
        assert_eq!(
            ok(&mut bank, tool, plat),
            "Error: Failed to apply statement credit. Transaction ID 'txn_cafbbcc89c13' may already exist."
        );
        let cases = [
            (
                credit("cc_c7d8e9f0a1_plat", json!(0), "retention_offer"),
                "Error: Credit amount must be positive.",
            ),
            (
                credit("cc_c7d8e9f0a1_plat", json!(12.345), "nice"),
                "Error: Invalid reason. Must be one of: ['goodwill_adjustment', 'promotional_credit', 'annual_fee_reversal', 'late_fee_reversal', 'interest_charge_reversal', 'dispute_resolution', 'price_match', 'retention_offer', 'error_correction', 'other']",
            ),
            (
                credit("cc_nope", json!(12.345), "other"),
                "Error: Credit card account 'cc_nope' not found.",
            ),
            (
                credit("cc_nope", json!("5"), "other"),
                "Error: Invalid arguments: '<=' not supported between instances of 'str' and 'int'",
            ),
            (
                credit("cc_nope", json!(null), "other"),
                "Error: Missing required parameters (user_id, credit_card_account_id, amount, reason).",
            ),
        ];
        for (arguments, expected) in cases {
            assert_eq!(ok(&mut bank, tool, arguments), expected);
        }
    }

    #[test]
    fn account_flags_are_recorded() {
        let mut bank = reference_bank();
        let tool = "apply_credit_card_account_flag_6147";
        let flag = |account: &str, flag_type: &str, expiration: &str, reason: &str| {
            json!({"credit_card_account_id": account, "user_id": "224959b99e", "flag_type": flag_type,
                   "expiration_date": expiration, "reason": reason})
        };
        let waiver = flag(
            "cc_224959b99e_plat",
            "annual_fee_waived",
            "11/14/2026",
            "loyalty_benefit",
        );
        assert_eq!(
            ok(&mut bank, tool, waiver.clone()),
            "Account flag applied successfully!\n  - Flag ID: ccflag_5ac0e00af00e\n  - Account: cc_224959b99e_plat\n  - User ID: 224959b99e\n  - Flag Type: Annual Fee Waived\n  - Effective Date: 11/14/2025\n  - Expiration Date: 11/14/2026\n  - Reason: Loyalty Benefit"
        );
        assert_eq!(
            record(&mut bank, "credit_card_account_flags", "ccflag_5ac0e00af00e").unwrap().to_string(),
            json!({"flag_id": "ccflag_5ac0e00af00e", "credit_card_account_id": "cc_224959b99e_plat", "user_id": "224959b99e", "flag_type": "annual_fee_waived", "effective_date": "11/14/2025", "expiration_date": "11/14/2026", "reason": "loyalty_benefit", "applied_at": "11/14/2025", "status": "ACTIVE"}).to_string()
        );
        let cases = [
            (
                waiver,
                "Error: Failed to apply account flag. Flag ID 'ccflag_5ac0e00af00e' may already exist.",
            ),
            (
                flag(
                    "cc_224959b99e_plat",
                    "gold_star",
                    "11/14/2026",
                    "loyalty_benefit",
                ),
                "Error: Invalid flag_type. Must be one of: ['annual_fee_waived', 'promotional_apr', 'rewards_bonus', 'other']",
            ),
            (
                flag("cc_224959b99e_plat", "other", "11/14/2026", "whim"),
                "Error: Invalid reason. Must be one of: ['retention_offer', 'loyalty_benefit', 'promotional', 'error_correction', 'other']",
            ),
            (
                flag("cc_nope", "other", "11/14/2026", "other"),
                "Error: Credit card account 'cc_nope' not found.",
            ),
            (
                flag("cc_nope", "other", "", "other"),
                "Error: Missing required parameters (credit_card_account_id, user_id, flag_type, expiration_date, reason).",
            ),
        ];
        for (arguments, expected) in cases {
            assert_eq!(ok(&mut bank, tool, arguments), expected);
        }
    }

    #[test]
    fn payments_move_money_from_checking_to_the_card() {
        let mut bank = reference_bank();
        let tool = "pay_credit_card_from_checking_9182";
        let pay = |checking: &str, card: &str, amount: Value| json!({"user_id": "224959b99e", "checking_account_id": checking, "credit_card_account_id": card, "amount": amount});
        assert_eq!(
            ok(&mut bank, tool, pay("05", "cc_224959b99e_plat", json!(75))),
            "Payment processed successfully!\n  - Payment Amount: $75.00\n  - From Checking Account: 05\n  - To Credit Card Account: cc_224959b99e_plat\n  - New Checking Balance: $2775.00\n  - New Credit Card Balance: $0.00\nThe payment has been applied immediately."
        );
        assert_eq!(
            record(&mut bank, "accounts", "05").unwrap().to_string(),
            json!({"account_id": "05", "user_id": "224959b99e", "class": "checking", "level": "Green Account", "date_opened": "11/10/2022", "status": "OPEN", "current_holdings": "2775.00"}).to_string()
        );
        assert_eq!(
            record(&mut bank, CARD_ACCOUNTS, "cc_224959b99e_plat").unwrap()["current_balance"],
            "$0.00"
        );
        let cases = [
            (
                pay("05", "cc_224959b99e_bsilver", json!(200)),
                "Error: Payment amount ($200.00) exceeds credit card balance ($125.00). Please specify an amount up to the outstanding balance.",
            ),
            (
                pay("05", "cc_224959b99e_bsilver", json!(100000)),
                "Error: Insufficient funds in checking account. Available balance: $2775.00, requested payment: $100000.00.",
            ),
            (
                pay("05", "cc_nope", json!(1)),
                "Error: Credit card account 'cc_nope' not found.",
            ),
            (
                pay("05", "cc_584f9c5d00_gold", json!(1)),
                "Error: Credit card account 'cc_584f9c5d00_gold' does not belong to user '224959b99e'.",
            ),
            (
                pay("01", "cc_224959b99e_plat", json!(1)),
                "Error: Checking account '01' does not belong to user '224959b99e'.",
            ),
            (
                pay("99", "cc_224959b99e_plat", json!(1)),
                "Error: Checking account '99' not found.",
            ),
            (
                pay("05", "cc_224959b99e_plat", json!(-3)),
                "Error: Payment amount must be a positive number.",
            ),
            (
                pay("05", "cc_224959b99e_plat", json!("abc")),
                "Error: Invalid payment amount. Must be a positive number.",
            ),
            (
                pay("05", "cc_224959b99e_plat", json!(null)),
                "Error: Missing required parameters (user_id, checking_account_id, credit_card_account_id, amount).",
            ),
            (
                pay("05", "cc_224959b99e_bsilver", json!(" 1_0.5 ")),
                "Payment processed successfully!\n  - Payment Amount: $10.50\n  - From Checking Account: 05\n  - To Credit Card Account: cc_224959b99e_bsilver\n  - New Checking Balance: $2764.50\n  - New Credit Card Balance: $114.50\nThe payment has been applied immediately.",
            ),
        ];
        for (arguments, expected) in cases {
            assert_eq!(ok(&mut bank, tool, arguments), expected);
        }
    }

    const SUBMIT: &str = "submit_credit_limit_increase_request_7392";

    #[test]
    fn increase_requests_are_whole_dollars() {
        let mut bank = reference_bank();
        let request = |account: &str, user: &str, amount: Value| json!({"credit_card_account_id": account, "user_id": user, "requested_increase_amount": amount});
        let gold = request("cc_584f9c5d00_gold", "584f9c5d00", json!(2500));
        assert_eq!(
            ok(&mut bank, SUBMIT, gold.clone()),
            "Credit limit increase request submitted successfully.\n\nExecuted: submit_credit_limit_increase_request_7392\n  - Request ID: cli_4fe9de112e66\n  - Account: cc_584f9c5d00_gold\n  - Requested Increase: $2,500\n  - Status: PENDING"
        );
        assert_eq!(
            record(&mut bank, CLI_REQUESTS, "cli_4fe9de112e66")
                .unwrap()
                .to_string(),
            r#"{"request_id":"cli_4fe9de112e66","credit_card_account_id":"cc_584f9c5d00_gold","user_id":"584f9c5d00","requested_increase_amount":2500,"submitted_at":"11/14/2025","status":"PENDING"}"#
        );
        let cases = [
            (gold, "Error: A similar request may already exist."),
            (
                request("cc_584f9c5d00_gold", "584f9c5d00", json!(2500.5)),
                "Error: Invalid requested_increase_amount. Must be a whole number of dollars.",
            ),
            (
                request("cc_584f9c5d00_gold", "584f9c5d00", json!("lots")),
                "Error: Invalid requested_increase_amount. Must be a whole number.",
            ),
            (
                request("cc_584f9c5d00_gold", "584f9c5d00", json!(0)),
                "Error: Requested increase amount must be positive.",
            ),
            (
                request("cc_nope", "584f9c5d00", json!(1000)),
                "Error: Credit card account 'cc_nope' not found.",
            ),
            (
                request("cc_224959b99e_plat", "584f9c5d00", json!(1234567)),
                "Error: Credit card account 'cc_224959b99e_plat' does not belong to user '584f9c5d00'.",
            ),
            (
                request("cc_224959b99e_plat", "", json!(1)),
                "Error: Missing required parameters.",
            ),
        ];
        for (arguments, expected) in cases {
            assert_eq!(ok(&mut bank, SUBMIT, arguments), expected);
        }
    }

    #[test]
    fn payment_history_is_newest_first() {
        let mut bank = reference_bank();
        let tool = "get_payment_history_6183";
        let history = |account: &str, months: Value| json!({"credit_card_account_id": account, "months": months});
        let cases = [
            (
                history("cc_584f9c5d00_gold", json!(3)),
                "Payment history for account 'cc_584f9c5d00_gold' (last 3 months):\nConsecutive on-time payments: 3\n\n  - Payment Date: 10/15/2025\n    Amount: $450.00\n    Status: ON_TIME\n\n  - Payment Date: 09/15/2025\n    Amount: $325.00\n    Status: ON_TIME\n\n  - Payment Date: 08/15/2025\n    Amount: $275.00\n    Status: ON_TIME",
            ),
            (
                history("cc_584f9c5d00_gold", json!(1.9)),
                "Payment history for account 'cc_584f9c5d00_gold' (last 1 months):\nConsecutive on-time payments: 1\n\n  - Payment Date: 10/15/2025\n    Amount: $450.00\n    Status: ON_TIME",
            ),
            (
                history("cc_nope", json!(6)),
                "No payment history found for account 'cc_nope'.",
            ),
            (
                history("cc_nope", json!(0)),
                "Error: months must be a positive integer.",
            ),
            (
                history("cc_nope", json!("six")),
                "Error: Invalid months value. Must be a positive integer.",
            ),
            (
                history("cc_nope", json!(null)),
                "Error: Missing required parameters (credit_card_account_id, months).",
            ),
        ];
        for (arguments, expected) in cases {
            assert_eq!(ok(&mut bank, tool, arguments), expected);
        }
        let bronze = ok(&mut bank, tool, history("cc_5e4c1a83b0_bronze", json!(6)));
        assert!(bronze.starts_with("Payment history for account 'cc_5e4c1a83b0_bronze' (last 6 months):\nConsecutive on-time payments: 6\n\n  - Payment Date: 10/15/2025\n"));
        assert!(bronze.ends_with(
            "\n\n  - Payment Date: 05/15/2025\n    Amount: $250.00\n    Status: ON_TIME"
        ));
    }

    const APPROVE: &str = "approve_credit_limit_increase_5847";

    fn approval(account: &str, user: &str, limit: Value) -> Value {
        json!({"credit_card_account_id": account, "user_id": user, "new_credit_limit": limit})
    }

    #[test]
    fn approvals_set_the_limit_when_eligible() {
        let mut bank = reference_bank();
        assert_eq!(
            ok(
                &mut bank,
                APPROVE,
                approval("cc_584f9c5d00_gold", "584f9c5d00", json!(7500))
            ),
            "Credit limit increase approved!\n  - Account: cc_584f9c5d00_gold\n  - Previous Limit: $5000.00\n  - New Limit: $7500.00\n  - Increase: $2500.00\n  - Effective Date: 11/14/2025\nThe customer will receive a confirmation email."
        );
        assert_eq!(
            record(&mut bank, CARD_ACCOUNTS, "cc_584f9c5d00_gold").unwrap()["credit_limit"],
            "$7500.00"
        );
        assert_eq!(
            record(&mut bank, CLI_REQUESTS, "cli_4fe9de112e66").unwrap().to_string(),
            json!({"request_id": "cli_4fe9de112e66", "credit_card_account_id": "cc_584f9c5d00_gold", "user_id": "584f9c5d00", "previous_limit": "$5000.00", "new_limit": "$7500.00", "increase_amount": "$2500.00", "decision_date": "11/14/2025", "status": "APPROVED"}).to_string()
        );
        let refused = "Error: Credit limit increase request cannot be approved at this time.";
        let cases = [
            (
                approval("cc_e9d195fe8e_silver", "e9d195fe8e", json!(22500)),
                "Credit limit increase approved!\n  - Account: cc_e9d195fe8e_silver\n  - Previous Limit: $15000.00\n  - New Limit: $22500.00\n  - Increase: $7500.00\n  - Effective Date: 11/14/2025\nThe customer will receive a confirmation email.",
            ),
            (
                approval("cc_6680a37184_silver", "6680a37184", json!(5000)),
                refused,
            ),
            (
                approval("cc_e3f4a5b6c7_eco", "e3f4a5b6c7", json!(5000)),
                refused,
            ),
            (
                approval("cc_nope", "e3f4a5b6c7", json!(5000)),
                "Error: Credit card account 'cc_nope' not found.",
            ),
            (
                approval("cc_e3f4a5b6c7_eco", "x", json!(5000)),
                "Error: Credit card account 'cc_e3f4a5b6c7_eco' does not belong to user 'x'.",
            ),
            (
                approval("cc_224959b99e_plat", "224959b99e", json!([1])),
                "Error: Invalid arguments: float() argument must be a string or a real number, not 'list'",
            ),
            (
                approval("cc_224959b99e_plat", "224959b99e", json!(null)),
                "Error: Missing required parameters.",
            ),
        ];
        for (arguments, expected) in cases {
            assert_eq!(ok(&mut bank, APPROVE, arguments), expected);
        }
        assert_eq!(
            call(
                &mut bank,
                APPROVE,
                approval("cc_224959b99e_plat", "224959b99e", json!("lots"))
            ),
            Err("could not convert string to float: 'lots'".to_owned())
        );
    }

    /// A pending request for the same increase keeps its id: the approval
    /// record is dropped, the limit still set (task_050's gold path).
    #[test]
    fn approvals_keep_a_pending_request_of_the_same_id() {
        let mut bank = reference_bank();
        ok(
            &mut bank,
            SUBMIT,
            json!({"credit_card_account_id": "cc_584f9c5d00_gold", "user_id": "584f9c5d00", "requested_increase_amount": 2500}),
        );
        ok(
            &mut bank,
            APPROVE,
            approval("cc_584f9c5d00_gold", "584f9c5d00", json!(7500)),
        );
        assert_eq!(
            record(&mut bank, CLI_REQUESTS, "cli_4fe9de112e66").unwrap()["status"],
            "PENDING"
        );
        assert_eq!(
            record(&mut bank, CARD_ACCOUNTS, "cc_584f9c5d00_gold").unwrap()["credit_limit"],
            "$7500.00"
        );
    }

    #[test]
    fn denials_are_recorded() {
        let mut bank = reference_bank();
        let tool = "deny_credit_limit_increase_5848";
        let deny = |account: &str, reason: &str| json!({"credit_card_account_id": account, "user_id": "5e4c1a83b0", "denial_reason": reason});
        assert_eq!(
            ok(
                &mut bank,
                tool,
                deny("cc_5e4c1a83b0_bronze", "cooldown_period_active")
            ),
            "Credit limit increase request denied.\n  - Account: cc_5e4c1a83b0_bronze\n  - Denial Reason: cooldown_period_active\n  - Date: 11/14/2025\nThe customer will receive a notification explaining the denial."
        );
        assert_eq!(
            record(&mut bank, CLI_REQUESTS, "cli_ce18a03fbbe2").unwrap().to_string(),
            json!({"request_id": "cli_ce18a03fbbe2", "credit_card_account_id": "cc_5e4c1a83b0_bronze", "user_id": "5e4c1a83b0", "denial_reason": "cooldown_period_active", "decision_date": "11/14/2025", "status": "DENIED"}).to_string()
        );
        let cases = [
            (
                deny("cc_5e4c1a83b0_bronze", "mood"),
                "Error: Invalid denial_reason. Must be one of: insufficient_account_age, cooldown_period_active, pending_disputes, pending_replacement_card, past_due_balance, high_utilization, insufficient_payment_history, requested_amount_exceeds_limit, other",
            ),
            (
                deny("cc_nope", "other"),
                "Error: Credit card account 'cc_nope' not found.",
            ),
            (deny("cc_nope", ""), "Error: Missing required parameters."),
        ];
        for (arguments, expected) in cases {
            assert_eq!(ok(&mut bank, tool, arguments), expected);
        }
    }
}
