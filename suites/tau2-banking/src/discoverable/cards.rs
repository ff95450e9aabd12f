//! Discoverable tools: debit cards. Ordering one for a checking account,
//! activating it (three variants, by why the card was issued), closing,
//! freezing and unfreezing it, clearing its fraud alert or velocity block,
//! resetting or changing its PIN, listing an account's cards and raising a
//! daily limit for a day.
//!
//! Like the reference, the tools answer their refusals as text (`Ok`); an
//! `Err` is an exception Python would raise. A string parameter given a
//! truthy value that is no string is refused with an `Err` (Python would go
//! on, and mostly fail on a string method).

use super::{Body, DEBIT_CARDS, field, invalid_choice};
use crate::dates::{TODAY, strptime_mdy, today};
use crate::db::{Records, Tables};
use crate::ids;
use crate::py::{
    Raised, dumps_indent, fixed, float, float_from_str, float_str, lower, py_cmp, title_words,
    upper,
};
use forge_tau_guest::{Data, Kwargs, Num, py_eq, py_str, set, truthy, type_name};
use serde_json::{Map, Value, json};
use std::cmp::Ordering;

pub const TOOLS: &[Body] = &[
    Body {
        name: "order_debit_card_5739",
        run: order_debit_card,
    },
    Body {
        name: "activate_debit_card_8291",
        run: activate_new_card,
    },
    Body {
        name: "activate_debit_card_8292",
        run: activate_replacement_card,
    },
    Body {
        name: "activate_debit_card_8293",
        run: activate_reissued_card,
    },
    Body {
        name: "close_debit_card_4721",
        run: close_debit_card,
    },
    Body {
        name: "freeze_debit_card_3892",
        run: freeze_debit_card,
    },
    Body {
        name: "unfreeze_debit_card_3893",
        run: unfreeze_debit_card,
    },
    Body {
        name: "clear_debit_card_fraud_alert_4892",
        run: clear_debit_card_fraud_alert,
    },
    Body {
        name: "reset_debit_card_pin_6284",
        run: reset_debit_card_pin,
    },
    Body {
        name: "change_debit_card_pin_6285",
        run: change_debit_card_pin,
    },
    Body {
        name: "get_debit_cards_by_account_id_7823",
        run: get_debit_cards_by_account_id,
    },
    Body {
        name: "request_temporary_debit_card_limit_increase_8374",
        run: request_temporary_limit_increase,
    },
];

const ACCOUNTS: &str = "accounts";

// ---------------------------------------------------------------------------
// Ordering
// ---------------------------------------------------------------------------

/// `order_debit_card_5739`: orders a card for an open checking account of
/// the user holding at least $25 and no active card or pending order,
/// charges the fees to the account (with a fee transaction) and records
/// the order and the new card, PENDING until activated.
fn order_debit_card(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    let Ok(delivery_fee) = fee(kwargs.get("delivery_fee")?) else {
        return Ok("Error: delivery_fee must be a number.".to_owned());
    };
    let Ok(design_fee) = fee(kwargs.get("design_fee")?) else {
        return Ok("Error: design_fee must be a number.".to_owned());
    };
    let excess_fee = excess_replacement_fee(kwargs.optional("excess_replacement_fee"));
    let given = [
        kwargs.get("account_id")?,
        kwargs.get("user_id")?,
        kwargs.get("delivery_option")?,
        kwargs.get("card_design")?,
        kwargs.get("shipping_address")?,
    ];
    let (Some(delivery_fee), Some(design_fee)) = (delivery_fee, design_fee) else {
        return Ok(MISSING_ORDER_PARAMETERS.to_owned());
    };
    if !given.iter().all(|value| truthy(value)) {
        return Ok(MISSING_ORDER_PARAMETERS.to_owned());
    }
    let order = Order {
        account_id: kwargs.str("account_id")?,
        user_id: kwargs.str("user_id")?,
        delivery_option: kwargs.str("delivery_option")?.to_uppercase(),
        card_design: kwargs.str("card_design")?.to_uppercase(),
        shipping_address: kwargs.get("shipping_address")?,
        delivery_fee,
        design_fee,
        excess_fee,
    };
    if !DELIVERY_OPTIONS.contains(&order.delivery_option.as_str()) {
        return Ok(invalid_choice("delivery_option", DELIVERY_OPTIONS));
    }
    if !CARD_DESIGNS.contains(&order.card_design.as_str()) {
        return Ok(invalid_choice("card_design", CARD_DESIGNS));
    }
    match order_refusal(data, &order)? {
        Refusal::Refused(message) => Ok(message),
        Refusal::Allowed(balance) => place_order(data, &order, balance),
    }
}

const MISSING_ORDER_PARAMETERS: &str = "Error: Missing required parameters. Required: account_id, user_id, delivery_option, delivery_fee, card_design, design_fee, shipping_address.";
const DELIVERY_OPTIONS: &[&str] = &["STANDARD", "EXPEDITED", "RUSH"];
const CARD_DESIGNS: &[&str] = &["CLASSIC", "PREMIUM", "CUSTOM"];

/// An order's arguments, checked and normalised (options upper-cased).
struct Order<'a> {
    account_id: &'a str,
    user_id: &'a str,
    delivery_option: String,
    card_design: String,
    shipping_address: &'a Value,
    delivery_fee: f64,
    design_fee: f64,
    /// An int 0 where the reference's `float()` refused the argument.
    excess_fee: Num,
}

impl Order<'_> {
    /// `delivery_fee + design_fee + excess_replacement_fee`.
    fn total_fee(&self) -> f64 {
        self.delivery_fee + self.design_fee + self.excess_fee.as_f64()
    }

    /// The fees charged, each as the reference names it (`label` joins a
    /// name and its amount).
    fn fee_parts(&self, label: &str) -> Vec<String> {
        let mut parts = Vec::new();
        if self.delivery_fee > 0.0 {
            parts.push(format!("Delivery{label}${}", float_str(self.delivery_fee)));
        }
        if self.design_fee > 0.0 {
            parts.push(format!("Design{label}${}", float_str(self.design_fee)));
        }
        let excess = self.excess_fee.as_f64();
        if excess > 0.0 {
            parts.push(format!("Excess Replacement{label}${}", fixed(excess, 0)));
        }
        parts
    }
}

/// Whether an order may go ahead: the account's balance, or the refusal.
enum Refusal {
    Allowed(f64),
    Refused(String),
}

/// The account checks of `order_debit_card_5739`, in its order.
fn order_refusal(data: &Data<'_>, order: &Order<'_>) -> Result<Refusal, String> {
    let account_id = order.account_id;
    let refused = |message: String| Ok(Refusal::Refused(message));
    let Some(account) = data.record(ACCOUNTS, account_id)? else {
        return refused(format!("Error: Account '{account_id}' not found."));
    };
    if !is(&account, "class", "checking") {
        return refused(format!(
            "Error: Debit cards can only be ordered for checking accounts. Account '{account_id}' is a {} account.",
            shown(&account, "class")
        ));
    }
    if !is(&account, "status", "OPEN") {
        return refused(format!(
            "Error: Account must be OPEN. Account '{account_id}' has status: {}",
            shown(&account, "status")
        ));
    }
    if !is(&account, "user_id", order.user_id) {
        return refused(format!(
            "Error: Account '{account_id}' does not belong to user '{}'.",
            order.user_id
        ));
    }
    let balance = holdings(&account);
    if balance < 25.0 {
        return refused(format!(
            "Error: Account must have a minimum balance of $25. Current balance: ${}",
            fixed(balance, 2)
        ));
    }
    let pending = data
        .table("debit_card_orders")?
        .values()
        .any(|placed| is(placed, "account_id", account_id) && is(placed, "status", "PENDING"));
    if pending {
        return refused(format!(
            "Error: There is already a pending debit card order for account '{account_id}'."
        ));
    }
    let active = data
        .table(DEBIT_CARDS)?
        .values()
        .any(|card| is(card, "account_id", account_id) && is(card, "status", "ACTIVE"));
    if active {
        return refused(format!(
            "Error: Account '{account_id}' already has an active debit card. Maximum 1 active card per checking account."
        ));
    }
    let total = order.total_fee();
    if total > 0.0 && balance < total {
        return refused(format!(
            "Error: Insufficient funds for fees. Total fees: ${}. Current balance: ${}",
            fixed(total, 2),
            fixed(balance, 2)
        ));
    }
    Ok(Refusal::Allowed(balance))
}

/// Records the order, charges its fees and issues the PENDING card, in the
/// reference's order (a failure past the order keeps what was written).
fn place_order(data: &mut Data<'_>, order: &Order<'_>, balance: f64) -> Result<String, Raised> {
    let expected_delivery = match order.delivery_option.as_str() {
        "STANDARD" => "7-10 business days",
        "EXPEDITED" => "3-5 business days",
        _ => "1-2 business days",
    };
    let order_id = ids::debit_card_order(order.account_id, order.user_id, &order.delivery_option);
    let total = order.total_fee();
    let record = json!({
        "order_id": order_id,
        "account_id": order.account_id,
        "user_id": order.user_id,
        "delivery_option": order.delivery_option,
        "card_design": order.card_design,
        "shipping_address": order.shipping_address,
        "delivery_fee": order.delivery_fee,
        "design_fee": order.design_fee,
        "excess_replacement_fee": order.excess_fee.to_value(),
        "total_fee": total,
        "order_date": TODAY,
        "expected_delivery": expected_delivery,
        "status": "PENDING",
    });
    if !data.add("debit_card_orders", &order_id, record)? {
        return Ok("Error: Failed to create debit card order. Order may already exist.".to_owned());
    }
    if total > 0.0 {
        charge_fees(data, order, &order_id, balance)?;
    }
    let card_id = issue_pending_card(data, order)?;
    let mut lines = vec![
        "Debit Card Order Confirmed".to_owned(),
        format!("Order ID: {order_id}"),
        format!("Card ID: {card_id}"),
        format!("Linked Account: {}", order.account_id),
        format!("Delivery Option: {}", order.delivery_option),
        format!("Card Design: {}", order.card_design),
        format!("Shipping Address: {}", py_str(order.shipping_address)),
        format!("Expected Delivery: {expected_delivery}"),
        String::new(),
        "Note: Card will arrive with status PENDING. Customer must call to activate after receiving the card.".to_owned(),
    ];
    if total > 0.0 {
        lines.push(format!(
            "Total Fees: ${} ({}) - CHARGED to account {}",
            fixed(total, 2),
            order.fee_parts(": ").join(", "),
            order.account_id
        ));
        lines.push(format!(
            "New Account Balance: ${}",
            fixed(balance - total, 2)
        ));
    } else {
        lines.push("Total Fees: $0 (No additional charges)".to_owned());
    }
    Ok(lines.join("\n"))
}

/// Takes the order's fees off the account's holdings and logs them as one
/// `debit_card_fee` transaction.
fn charge_fees(
    data: &mut Data<'_>,
    order: &Order<'_>,
    order_id: &str,
    balance: f64,
) -> Result<(), String> {
    let total = order.total_fee();
    let new_balance = Value::String(fixed(balance - total, 2));
    data.update(
        ACCOUNTS,
        order.account_id,
        vec![("current_holdings", new_balance)],
    )?;
    let transaction_id = format!("btxn_dcfee_{}", last_chars(order_id, 8));
    let transaction = json!({
        "transaction_id": transaction_id,
        "account_id": order.account_id,
        "date": TODAY,
        "description": format!("DEBIT CARD ORDER FEE - {}", order.fee_parts(" ").join(", ")),
        "amount": -total,
        "type": "debit_card_fee",
        "status": "posted",
    });
    data.add(
        "bank_account_transaction_history",
        &transaction_id,
        transaction,
    )?;
    Ok(())
}

/// Adds the ordered card, PENDING, with its number's last digits and CVV
/// derived from its id; answers its id.
fn issue_pending_card(data: &mut Data<'_>, order: &Order<'_>) -> Result<String, String> {
    let card_id = ids::debit_card(order.account_id, order.user_id, TODAY);
    let seed = format!("card_details:{card_id}");
    let last_4_digits = leading_digits(&ids::deterministic_id(&format!("{seed}:last4"), 8), 4);
    let cvv = leading_digits(&ids::deterministic_id(&format!("{seed}:cvv"), 6), 3);
    let cardholder_name = match data.record("users", order.user_id)? {
        Some(user) => upper(user.get("name").unwrap_or(&json!("CARDHOLDER")))?,
        None => "CARDHOLDER".to_owned(),
    };
    let issue_reason = new_card_issue_reason(&data.table(DEBIT_CARDS)?, order.account_id);
    let record = json!({
        "card_id": card_id,
        "account_id": order.account_id,
        "user_id": order.user_id,
        "cardholder_name": cardholder_name,
        "last_4_digits": last_4_digits,
        "cvv": cvv,
        "status": "PENDING",
        "issue_date": TODAY,
        "expiration_date": expiration_date(TODAY),
        "card_design": order.card_design,
        "issue_reason": issue_reason,
    });
    data.add(DEBIT_CARDS, &card_id, record)?;
    Ok(card_id)
}

/// Why a new card for `account_id` is issued: replacing the account's first
/// closed card if that was lost, stolen or fraudulent, else a first card
/// (the account had cards) or a new account's.
fn new_card_issue_reason(cards: &Records, account_id: &str) -> &'static str {
    let mut existing = cards
        .values()
        .filter(|card| is(card, "account_id", account_id))
        .peekable();
    if existing.peek().is_none() {
        return "new_account";
    }
    let closed = existing.find(|card| is(card, "status", "CLOSED"));
    match closed
        .and_then(|card| card.get("closure_reason"))
        .and_then(Value::as_str)
    {
        Some("lost") => "lost",
        Some("stolen") => "stolen",
        Some("fraud" | "fraud_suspected") => "fraud",
        _ => "first_card",
    }
}

/// Four years after `order_date` (`MM/DD/YYYY`), on the last day of its
/// month (February always the 28th).
fn expiration_date(order_date: &str) -> String {
    let parts: Vec<&str> = order_date.split('/').collect();
    let year = parts.get(2).and_then(|year| year.parse::<i64>().ok());
    match (parts.first(), year) {
        (Some(month), Some(year)) => {
            let day = match *month {
                "01" | "03" | "05" | "07" | "08" | "10" | "12" => "31",
                "02" => "28",
                _ => "30",
            };
            format!("{month}/{day}/{}", year + 4)
        }
        _ => "12/31/2029".to_owned(),
    }
}

/// `float(fee) if fee is not None else None`; `Err` where `float()` raises.
fn fee(value: &Value) -> Result<Option<f64>, ()> {
    match value {
        Value::Null => Ok(None),
        other => float(other).map(Some).map_err(drop),
    }
}

/// `float(excess_replacement_fee or 0)`, an int 0 where `float()` raises.
fn excess_replacement_fee(value: Option<&Value>) -> Num {
    match value.filter(|value| truthy(value)) {
        None => Num::Float(0.0),
        Some(value) => float(value).map_or(Num::Int(0), Num::Float),
    }
}

/// `float(str(account.get("current_holdings", "0")).replace(",", ""))`, 0
/// where that raises.
fn holdings(account: &Value) -> f64 {
    let text = account
        .get("current_holdings")
        .map_or_else(|| "0".to_owned(), py_str);
    float_from_str(&text.replace(',', "")).unwrap_or(0.0)
}

// ---------------------------------------------------------------------------
// Activation
// ---------------------------------------------------------------------------

/// `activate_debit_card_8291`: activates a first card of a checking
/// account; the account's other active cards are deactivated.
fn activate_new_card(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    let variant = Variant {
        tool: "activate_debit_card_8291",
        issue_reasons: &["new_account", "first_card"],
        retired_status: "DEACTIVATED",
        retired_date_field: "deactivated_date",
        retired_reason: |_| "New card activated".to_owned(),
    };
    let (card_id, _, retired) = match activate(data, kwargs, &variant)? {
        Ok(activated) => activated,
        Err(message) => return Ok(message),
    };
    let mut lines = vec![
        "New Debit Card Activation Successful".to_owned(),
        format!("Card ID: {card_id}"),
        "Status: ACTIVE".to_owned(),
        format!("Activation Date: {TODAY}"),
        String::new(),
        "Your card is now ready to use at any ATM or point of sale terminal.".to_owned(),
        "For security, please sign the back of your card.".to_owned(),
    ];
    if !retired.is_empty() {
        lines.push(format!(
            "\nNote: Previous card(s) have been deactivated: {}",
            retired.join(", ")
        ));
    }
    Ok(lines.join("\n"))
}

/// `activate_debit_card_8292`: activates a card replacing a lost, stolen or
/// fraudulent one; the account's other active cards are deactivated.
fn activate_replacement_card(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    let variant = Variant {
        tool: "activate_debit_card_8292",
        issue_reasons: &["lost", "stolen", "fraud"],
        retired_status: "DEACTIVATED",
        retired_date_field: "deactivated_date",
        retired_reason: |reason| format!("Replacement card activated ({reason})"),
    };
    let (card_id, issue_reason, retired) = match activate(data, kwargs, &variant)? {
        Ok(activated) => activated,
        Err(message) => return Ok(message),
    };
    let mut lines = vec![
        "Replacement Debit Card Activation Successful".to_owned(),
        format!("Card ID: {card_id}"),
        format!("Replacement Reason: {}", title_words(&issue_reason)),
        "Status: ACTIVE".to_owned(),
        format!("Activation Date: {TODAY}"),
        String::new(),
        "Your replacement card is now ready to use.".to_owned(),
        String::new(),
        "IMPORTANT SECURITY REMINDERS:".to_owned(),
        "- Please review your recent transactions for any unauthorized charges".to_owned(),
        "- Report any suspicious activity immediately".to_owned(),
    ];
    if issue_reason == "fraud" {
        lines.push(
            "- Since fraud was suspected, we recommend changing your online banking password"
                .to_owned(),
        );
    }
    if !retired.is_empty() {
        lines.push(format!(
            "\nPrevious card(s) have been deactivated for security: {}",
            retired.join(", ")
        ));
    }
    Ok(lines.join("\n"))
}

/// `activate_debit_card_8293`: activates a card reissued on expiry, damage,
/// an upgrade or the bank's initiative; the account's other active cards
/// stay usable for a 24-hour grace period.
fn activate_reissued_card(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    let variant = Variant {
        tool: "activate_debit_card_8293",
        issue_reasons: &["expired", "damaged", "upgrade", "bank_reissue"],
        retired_status: "GRACE_PERIOD",
        retired_date_field: "grace_period_ends",
        retired_reason: |reason| format!("Reissued card activated ({reason})"),
    };
    let (card_id, issue_reason, retired) = match activate(data, kwargs, &variant)? {
        Ok(activated) => activated,
        Err(message) => return Ok(message),
    };
    let mut lines = vec![
        "Reissued Debit Card Activation Successful".to_owned(),
        format!("Card ID: {card_id}"),
        format!("Reissue Reason: {}", title_words(&issue_reason)),
        "Status: ACTIVE".to_owned(),
        format!("Activation Date: {TODAY}"),
        String::new(),
        "Your reissued card is now ready to use.".to_owned(),
    ];
    if !retired.is_empty() {
        lines.push(format!(
            "\nNote: Your previous card(s) ({}) will remain active for 24 hours as a grace period.",
            retired.join(", ")
        ));
        lines.push("After 24 hours, the old card(s) will be automatically deactivated.".to_owned());
    }
    if ["expired", "bank_reissue"].contains(&issue_reason.as_str()) {
        lines.push(
            "\nReminder: If your card number changed, please update any recurring payments with your new card details."
                .to_owned(),
        );
    }
    Ok(lines.join("\n"))
}

/// What tells the three activation tools apart.
struct Variant {
    tool: &'static str,
    /// The `issue_reason`s of the cards this variant activates.
    issue_reasons: &'static [&'static str],
    /// What the account's other ACTIVE cards become, the field dated today,
    /// and their `deactivation_reason` given the new card's issue reason.
    retired_status: &'static str,
    retired_date_field: &'static str,
    retired_reason: fn(&str) -> String,
}

/// An activated card: its id, its issue reason, and the account's other
/// cards it retired.
type Activated = (String, String, Vec<String>);

/// Checks the activation (`_validate_activation_common`), then activates the
/// card and retires the account's other ACTIVE cards as `variant` says.
/// The inner `Err` is the reference's refusal.
fn activate(
    data: &mut Data<'_>,
    kwargs: &Kwargs,
    variant: &Variant,
) -> Result<Result<Activated, String>, String> {
    let (card_id, issue_reason, mut cards) = match validate_activation(data, kwargs, variant)? {
        Ok(valid) => valid,
        Err(message) => return Ok(Err(message)),
    };
    let Some(card) = cards.get_mut(&card_id) else {
        return Err(format!("debit card '{card_id}' vanished"));
    };
    set(card, "status", json!("ACTIVE"));
    set(card, "activated_date", json!(TODAY));
    let account_id = field(card, "account_id").clone();
    let reason = (variant.retired_reason)(&issue_reason);
    let mut retired = Vec::new();
    for (other_id, other) in &mut cards {
        if *other_id != card_id
            && py_eq(field(other, "account_id"), &account_id)
            && is(other, "status", "ACTIVE")
        {
            set(other, "status", json!(variant.retired_status));
            set(other, variant.retired_date_field, json!(TODAY));
            set(other, "deactivation_reason", json!(reason));
            retired.push(other_id.clone());
        }
    }
    data.save(DEBIT_CARDS, cards)?;
    Ok(Ok((card_id, issue_reason, retired)))
}

/// `_validate_activation_common`: the arguments, then the card. Answers the
/// card's id, its issue reason and the cards table, or the refusal.
fn validate_activation(
    data: &Data<'_>,
    kwargs: &Kwargs,
    variant: &Variant,
) -> Result<Result<(String, String, Records), String>, String> {
    if let Some(problem) = activation_argument_problem(kwargs)? {
        return Ok(Err(problem));
    }
    let card_id = kwargs.str("card_id")?;
    let cards = data.table(DEBIT_CARDS)?;
    let Some(card) = cards.get(card_id) else {
        return Ok(Err(not_found(card_id)));
    };
    let last_4_digits = kwargs.str("last_4_digits")?;
    Ok(
        card_activation_problem(data, card_id, card, last_4_digits, variant)?
            .map(|issue_reason| (card_id.to_owned(), issue_reason, cards)),
    )
}

/// What is wrong with an activation's arguments: one missing, or a PIN,
/// CVV or last digits of the wrong shape.
fn activation_argument_problem(kwargs: &Kwargs) -> Result<Option<String>, String> {
    let given = [
        kwargs.get("card_id")?,
        kwargs.get("last_4_digits")?,
        kwargs.get("expiration_date")?,
        kwargs.get("cvv")?,
        kwargs.get("pin")?,
    ];
    if !given.iter().all(|value| truthy(value)) {
        return Ok(Some(
            "Error: Missing required parameters. Required: card_id, last_4_digits, expiration_date, cvv, pin.".to_owned(),
        ));
    }
    if let Some(problem) = pin_problem(kwargs.str("pin")?) {
        return Ok(Some(format!("Error: {problem}")));
    }
    if !is_digits(kwargs.str("cvv")?, 3) {
        return Ok(Some("Error: CVV must be exactly 3 digits.".to_owned()));
    }
    if !is_digits(kwargs.str("last_4_digits")?, 4) {
        return Ok(Some(
            "Error: Last 4 digits must be exactly 4 digits.".to_owned(),
        ));
    }
    Ok(None)
}

/// Whether `variant` may activate `card`: issued for one of its reasons,
/// PENDING, its last digits given, its linked account (if any) open.
/// Answers the card's issue reason, or the refusal.
fn card_activation_problem(
    data: &Data<'_>,
    card_id: &str,
    card: &Value,
    last_4_digits: &str,
    variant: &Variant,
) -> Result<Result<String, String>, String> {
    let issue_reason = card
        .get("issue_reason")
        .cloned()
        .unwrap_or_else(|| json!("new_account"));
    let Some(issue_reason) = issue_reason
        .as_str()
        .filter(|reason| variant.issue_reasons.contains(reason))
    else {
        return Ok(Err(format!(
            "Error: Wrong activation tool. This card has issue_reason='{}'. Please use {} instead of {}.",
            py_str(&issue_reason),
            activation_tool_for(&issue_reason),
            variant.tool
        )));
    };
    if is(card, "status", "ACTIVE") {
        return Ok(Err(format!(
            "Error: Debit card '{card_id}' is already active."
        )));
    }
    if !is(card, "status", "PENDING") {
        return Ok(Err(format!(
            "Error: Debit card '{card_id}' cannot be activated. Current status: {}. Only PENDING cards can be activated.",
            shown(card, "status")
        )));
    }
    if !is(card, "last_4_digits", last_4_digits) {
        return Ok(Err(
            "Error: Card verification failed. The last 4 digits do not match our records."
                .to_owned(),
        ));
    }
    if let Some(account_id) = closed_linked_account(data, card)? {
        return Ok(Err(format!(
            "Error: The linked checking account '{account_id}' is no longer open. Card cannot be activated."
        )));
    }
    Ok(Ok(issue_reason.to_owned()))
}

/// The activation tool for a card issued for `issue_reason`, or "unknown".
fn activation_tool_for(issue_reason: &Value) -> &'static str {
    match issue_reason.as_str() {
        Some("new_account" | "first_card") => "activate_debit_card_8291",
        Some("lost" | "stolen" | "fraud") => "activate_debit_card_8292",
        Some("expired" | "damaged" | "upgrade" | "bank_reissue") => "activate_debit_card_8293",
        _ => "unknown",
    }
}

/// `_validate_pin`: why `pin` will not do (four digits, neither a run nor
/// one digit repeated), if it will not.
fn pin_problem(pin: &str) -> Option<&'static str> {
    const SEQUENTIAL: &[&str] = &[
        "0123", "1234", "2345", "3456", "4567", "5678", "6789", "9876", "8765", "7654", "6543",
        "5432", "4321", "3210",
    ];
    if !is_digits(pin, 4) {
        return Some("PIN must be exactly 4 digits.");
    }
    if SEQUENTIAL.contains(&pin) {
        return Some("PIN cannot be sequential (e.g., 1234). Please choose a more secure PIN.");
    }
    if pin.bytes().all(|digit| digit == pin.as_bytes()[0]) {
        return Some(
            "PIN cannot be all the same digit (e.g., 1111). Please choose a more secure PIN.",
        );
    }
    None
}

/// The card's linked account (`account_id`) when it exists and is not OPEN.
fn closed_linked_account(data: &Data<'_>, card: &Value) -> Result<Option<String>, String> {
    let Some(account_id) = card
        .get("account_id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
    else {
        return Ok(None);
    };
    Ok(data
        .record(ACCOUNTS, account_id)?
        .filter(|account| !is(account, "status", "OPEN"))
        .map(|_| account_id.to_owned()))
}

// ---------------------------------------------------------------------------
// Closing, freezing, alerts
// ---------------------------------------------------------------------------

/// `close_debit_card_4721`: closes an ACTIVE or PENDING card for good, with
/// the reason why.
fn close_debit_card(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    const REASONS: &[&str] = &[
        "lost",
        "stolen",
        "fraud_suspected",
        "damaged",
        "no_longer_needed",
        "account_closing",
    ];
    let (card_id, reason) = (kwargs.get("card_id")?, kwargs.get("reason")?);
    if !truthy(card_id) || !truthy(reason) {
        return Ok("Error: Missing required parameters. Required: card_id, reason.".to_owned());
    }
    let reason = kwargs.str("reason")?.to_lowercase();
    if !REASONS.contains(&reason.as_str()) {
        return Ok(invalid_choice("reason", REASONS));
    }
    let card_id = kwargs.str("card_id")?;
    let mut cards = data.table(DEBIT_CARDS)?;
    let Some(card) = cards.get_mut(card_id) else {
        return Ok(not_found(card_id));
    };
    if !is(card, "status", "ACTIVE") && !is(card, "status", "PENDING") {
        return Ok(format!(
            "Error: Debit card '{card_id}' cannot be closed. Current status: {}. Only ACTIVE or PENDING cards can be closed.",
            shown(card, "status")
        ));
    }
    let previous_status = shown(card, "status");
    set(card, "status", json!("CLOSED"));
    set(card, "closed_date", json!(TODAY));
    set(card, "closure_reason", json!(reason));
    data.save(DEBIT_CARDS, cards)?;
    let mut lines = vec![
        "Debit Card Closed Successfully".to_owned(),
        format!("Card ID: {card_id}"),
        format!("Previous Status: {previous_status}"),
        "New Status: CLOSED".to_owned(),
        format!("Closure Reason: {}", title_words(&reason)),
        format!("Closure Date: {TODAY}"),
        String::new(),
    ];
    if ["lost", "stolen", "fraud_suspected"].contains(&reason.as_str()) {
        lines
            .push("IMPORTANT: This card has been immediately deactivated for security.".to_owned());
        lines.push("Any pending transactions may still be processed.".to_owned());
        if reason == "fraud_suspected" {
            lines.push("Please advise the customer to review recent transactions and file disputes for any unauthorized charges.".to_owned());
            lines.push("Also recommend changing their online banking password.".to_owned());
        }
    }
    lines.push(String::new());
    lines.push("Note: This card cannot be reactivated. If the customer needs a new card, they can order one through the standard ordering process.".to_owned());
    lines.push("Any recurring payments linked to this card will need to be updated with new payment information.".to_owned());
    Ok(lines.join("\n"))
}

/// `freeze_debit_card_3892`: freezes an ACTIVE card until it is unfrozen.
fn freeze_debit_card(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    let Some(card_id) = card_id_argument(kwargs)? else {
        return Ok(MISSING_CARD_ID.to_owned());
    };
    let mut cards = data.table(DEBIT_CARDS)?;
    let Some(card) = cards.get_mut(card_id) else {
        return Ok(not_found(card_id));
    };
    if is(card, "status", "FROZEN") {
        return Ok(format!("Error: Debit card '{card_id}' is already frozen."));
    }
    if !is(card, "status", "ACTIVE") {
        return Ok(format!(
            "Error: Debit card '{card_id}' cannot be frozen. Current status: {}. Only ACTIVE cards can be frozen.",
            shown(card, "status")
        ));
    }
    set(card, "status", json!("FROZEN"));
    set(card, "frozen_date", json!(TODAY));
    data.save(DEBIT_CARDS, cards)?;
    Ok([
        "Debit Card Frozen Successfully",
        &format!("Card ID: {card_id}"),
        "Status: FROZEN",
        &format!("Frozen Date: {TODAY}"),
        "",
        "While frozen:",
        "- All new purchase transactions will be declined",
        "- Recurring payments and subscriptions will be declined",
        "- Pending transactions already authorized may still process",
        "",
        "To unfreeze, the customer can call customer service or use the mobile app.",
        "If the card is confirmed lost or stolen, recommend closing the card permanently instead.",
    ]
    .join("\n"))
}

/// `unfreeze_debit_card_3893`: makes a FROZEN card ACTIVE again, unless its
/// linked account is no longer open.
fn unfreeze_debit_card(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    let Some(card_id) = card_id_argument(kwargs)? else {
        return Ok(MISSING_CARD_ID.to_owned());
    };
    let mut cards = data.table(DEBIT_CARDS)?;
    let Some(card) = cards.get_mut(card_id) else {
        return Ok(not_found(card_id));
    };
    if is(card, "status", "ACTIVE") {
        return Ok(format!("Error: Debit card '{card_id}' is already active."));
    }
    if !is(card, "status", "FROZEN") {
        return Ok(format!(
            "Error: Debit card '{card_id}' cannot be unfrozen. Current status: {}. Only FROZEN cards can be unfrozen.",
            shown(card, "status")
        ));
    }
    if let Some(account_id) = closed_linked_account(data, card)? {
        return Ok(format!(
            "Error: The linked checking account '{account_id}' is no longer open. Card cannot be unfrozen."
        ));
    }
    set(card, "status", json!("ACTIVE"));
    set(card, "unfrozen_date", json!(TODAY));
    data.save(DEBIT_CARDS, cards)?;
    Ok([
        "Debit Card Unfrozen Successfully",
        &format!("Card ID: {card_id}"),
        "Status: ACTIVE",
        &format!("Unfrozen Date: {TODAY}"),
        "",
        "The card is now active and ready to use immediately.",
        "All transactions will process normally.",
    ]
    .join("\n"))
}

/// What `clear_debit_card_fraud_alert_4892` clears.
#[derive(Clone, Copy, PartialEq)]
enum Alert {
    /// `velocity_clear`: a velocity block.
    Velocity,
    /// `customer_verified`: a fraud alert the customer's verification lifts.
    Fraud,
}

/// `clear_debit_card_fraud_alert_4892`: lifts a card's velocity block, or a
/// fraud alert unless the bank raised it (that one goes to security).
fn clear_debit_card_fraud_alert(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    let Some(card_id) = card_id_argument(kwargs)? else {
        return Ok(MISSING_CARD_ID.to_owned());
    };
    let reason = kwargs.get("reason")?;
    if !truthy(reason) {
        return Ok("Error: Missing required parameter: reason.".to_owned());
    }
    let alert = match reason.as_str() {
        Some("velocity_clear") => Alert::Velocity,
        Some("customer_verified") => Alert::Fraud,
        _ => {
            return Ok(format!(
                "Error: Invalid reason '{}'. Must be one of: customer_verified, velocity_clear",
                py_str(reason)
            ));
        }
    };
    let mut cards = data.table(DEBIT_CARDS)?;
    let Some(card) = cards.get_mut(card_id) else {
        return Ok(not_found(card_id));
    };
    let lines = match alert {
        Alert::Velocity => {
            if !card.get("velocity_blocked").is_some_and(truthy) {
                return Ok(format!(
                    "Error: Debit card '{card_id}' does not have an active velocity block."
                ));
            }
            set(card, "velocity_blocked", json!(false));
            set(card, "velocity_cleared_date", json!(TODAY));
            vec![
                "Velocity Block Cleared Successfully".to_owned(),
                format!("Card ID: {card_id}"),
                format!("Cleared Date: {TODAY}"),
                String::new(),
                "The card is now unblocked and ready for normal use.".to_owned(),
                "The velocity monitoring will continue - if the same unusual patterns recur,"
                    .to_owned(),
                "the card may be blocked again automatically.".to_owned(),
            ]
        }
        Alert::Fraud => {
            if !card.get("fraud_alert_active").is_some_and(truthy) {
                return Ok(format!(
                    "Error: Debit card '{card_id}' does not have an active fraud alert."
                ));
            }
            if is(card, "alert_source", "bank_initiated") {
                return Ok("Error: BANK_INITIATED_ALERT - This fraud alert was initiated by the bank's fraud detection system and cannot be cleared by customer service agents. Please transfer the customer to the security team using transfer_to_human_agents.".to_owned());
            }
            set(card, "fraud_alert_active", json!(false));
            set(card, "alert_source", Value::Null);
            set(card, "fraud_alert_cleared_date", json!(TODAY));
            vec![
                "Fraud Alert Cleared Successfully".to_owned(),
                format!("Card ID: {card_id}"),
                format!("Cleared Date: {TODAY}"),
                String::new(),
                "The fraud alert has been removed from the card.".to_owned(),
                "All transactions will process normally.".to_owned(),
                String::new(),
                "Remind the customer to review recent transactions and report any unauthorized charges.".to_owned(),
            ]
        }
    };
    data.save(DEBIT_CARDS, cards)?;
    Ok(lines.join("\n"))
}

// ---------------------------------------------------------------------------
// PINs
// ---------------------------------------------------------------------------

/// `reset_debit_card_pin_6284`: sets a forgotten PIN anew on an ACTIVE card
/// whose last digits the customer gave, and unlocks it.
fn reset_debit_card_pin(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    let given = [
        kwargs.get("card_id")?,
        kwargs.get("last_4_digits")?,
        kwargs.get("new_pin")?,
    ];
    if !given.iter().all(|value| truthy(value)) {
        return Ok(
            "Error: Missing required parameters. Required: card_id, last_4_digits, new_pin."
                .to_owned(),
        );
    }
    let last_4_digits = kwargs.str("last_4_digits")?;
    if !is_digits(last_4_digits, 4) {
        return Ok("Error: Last 4 digits must be exactly 4 digits.".to_owned());
    }
    if let Some(problem) = pin_problem(kwargs.str("new_pin")?) {
        return Ok(format!("Error: {problem}"));
    }
    let card_id = kwargs.str("card_id")?;
    let mut cards = data.table(DEBIT_CARDS)?;
    let Some(card) = cards.get_mut(card_id) else {
        return Ok(not_found(card_id));
    };
    if !is(card, "last_4_digits", last_4_digits) {
        return Ok(
            "Error: Card verification failed. The last 4 digits do not match our records."
                .to_owned(),
        );
    }
    if !is(card, "status", "ACTIVE") {
        return Ok(format!(
            "Error: Cannot reset PIN. Card status is {}. Only ACTIVE cards can have their PIN reset.",
            shown(card, "status")
        ));
    }
    set(card, "pin_last_changed", json!(TODAY));
    set(card, "pin_locked", json!(false));
    set(card, "pin_attempts_remaining", json!(3));
    data.save(DEBIT_CARDS, cards)?;
    Ok([
        "Debit Card PIN Reset Successfully",
        &format!("Card ID: {card_id}"),
        &format!("PIN Changed: {TODAY}"),
        "",
        "The new PIN is effective immediately.",
        "Your card has been unlocked and is ready to use.",
        "Customer can use the new PIN for ATM withdrawals and point-of-sale transactions.",
        "",
        "Security reminder: Never share your PIN with anyone.",
    ]
    .join("\n"))
}

/// `change_debit_card_pin_6285`: changes the PIN of an ACTIVE card to a
/// different, acceptable one.
fn change_debit_card_pin(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    let given = [
        kwargs.get("card_id")?,
        kwargs.get("current_pin")?,
        kwargs.get("new_pin")?,
    ];
    if !given.iter().all(|value| truthy(value)) {
        return Ok(
            "Error: Missing required parameters. Required: card_id, current_pin, new_pin."
                .to_owned(),
        );
    }
    let current_pin = kwargs.str("current_pin")?;
    if !is_digits(current_pin, 4) {
        return Ok("Error: Current PIN must be exactly 4 digits.".to_owned());
    }
    let new_pin = kwargs.str("new_pin")?;
    if let Some(problem) = pin_problem(new_pin) {
        return Ok(format!("Error: {problem}"));
    }
    if current_pin == new_pin {
        return Ok("Error: New PIN must be different from current PIN.".to_owned());
    }
    let card_id = kwargs.str("card_id")?;
    let mut cards = data.table(DEBIT_CARDS)?;
    let Some(card) = cards.get_mut(card_id) else {
        return Ok(not_found(card_id));
    };
    if !is(card, "status", "ACTIVE") {
        return Ok(format!(
            "Error: Cannot change PIN. Card status is {}. Only ACTIVE cards can have their PIN changed.",
            shown(card, "status")
        ));
    }
    set(card, "pin_last_changed", json!(TODAY));
    data.save(DEBIT_CARDS, cards)?;
    Ok([
        "Debit Card PIN Changed Successfully",
        &format!("Card ID: {card_id}"),
        &format!("PIN Changed: {TODAY}"),
        "",
        "The new PIN is effective immediately.",
        "Customer can use the new PIN for ATM withdrawals and point-of-sale transactions.",
        "",
        "Security reminder: Never share your PIN with anyone.",
    ]
    .join("\n"))
}

// ---------------------------------------------------------------------------
// Listing and limits
// ---------------------------------------------------------------------------

/// `get_debit_cards_by_account_id_7823`: a checking account's cards as
/// indented JSON, most recently issued first, the last digits and issue
/// date under the names `card_number_last_4` and `date_issued`.
fn get_debit_cards_by_account_id(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    if !truthy(kwargs.get("account_id")?) {
        return Ok("Error: Missing required parameter 'account_id'.".to_owned());
    }
    let account_id = kwargs.str("account_id")?;
    let Some(account) = data.record(ACCOUNTS, account_id)? else {
        return Ok(format!("Error: Account '{account_id}' not found."));
    };
    let class = lower(account.get("class").unwrap_or(&json!("")))?;
    if class != "checking" && class != "business_checking" {
        return Ok(format!(
            "Error: Account '{account_id}' is not a checking account. Debit cards are only available for checking accounts."
        ));
    }
    let mut listed: Vec<Value> = data
        .table(DEBIT_CARDS)?
        .iter()
        .filter(|(_, card)| is(card, "account_id", account_id))
        .map(|(card_id, card)| listing(card_id, card))
        .collect();
    if listed.is_empty() {
        return Ok(format!("No debit cards found for account '{account_id}'."));
    }
    listed.sort_by(|a, b| issued(b, a));
    Ok(dumps_indent(&Value::Array(listed), 2))
}

/// A card as the listing shows it: `{"card_id": id, **card}`, its last
/// digits renamed `card_number_last_4` and its `issue_date` (else
/// `created_date`) renamed `date_issued`, each moved to the end.
fn listing(card_id: &str, card: &Value) -> Value {
    let mut shown = Map::new();
    shown.insert("card_id".to_owned(), json!(card_id));
    if let Value::Object(fields) = card {
        shown.extend(fields.clone());
    }
    rename(&mut shown, "last_4_digits", "card_number_last_4");
    if shown.contains_key("issue_date") {
        rename(&mut shown, "issue_date", "date_issued");
    } else {
        rename(&mut shown, "created_date", "date_issued");
    }
    Value::Object(shown)
}

/// Moves field `from` to the end as `to`, unless `to` is there already.
fn rename(fields: &mut Map<String, Value>, from: &str, to: &str) {
    if fields.contains_key(to) {
        return;
    }
    if let Some(value) = fields.shift_remove(from) {
        fields.insert(to.to_owned(), value);
    }
}

/// Orders two listed cards by `date_issued or ""` (values Python cannot
/// compare count as equal).
fn issued(a: &Value, b: &Value) -> Ordering {
    let key = |card: &Value| {
        card.get("date_issued")
            .filter(|date| truthy(date))
            .cloned()
            .unwrap_or_else(|| json!(""))
    };
    py_cmp(&key(a), &key(b)).unwrap_or(Ordering::Equal)
}

/// `request_temporary_debit_card_limit_increase_8374`: raises an ACTIVE
/// card's daily ATM or purchase limit for 24 hours, to at most 150% of it,
/// for an open account at least 60 days old.
fn request_temporary_limit_increase(
    data: &mut Data<'_>,
    kwargs: &Kwargs,
) -> Result<String, Raised> {
    let Some(card_id) = card_id_argument(kwargs)? else {
        return Ok(MISSING_CARD_ID.to_owned());
    };
    let (kind, new_limit) = match limit_request(kwargs)? {
        Ok(request) => request,
        Err(message) => return Ok(message),
    };
    let mut cards = data.table(DEBIT_CARDS)?;
    let Some(card) = cards.get_mut(card_id) else {
        return Ok(not_found(card_id));
    };
    if !is(card, "status", "ACTIVE") {
        return Ok(format!(
            "Error: Debit card '{card_id}' is not active. Current status: {}. Only ACTIVE cards can have limit increases.",
            shown(card, "status")
        ));
    }
    let account = match eligible_account(data, card_id, card)? {
        Ok(account) => account,
        Err(message) => return Ok(message),
    };
    let current = match current_limit(card, &account, kind)? {
        Ok(current) => current,
        Err(message) => return Ok(message),
    };
    let max_allowed = (current.as_f64() * 1.5).trunc() as i64;
    let current_text = current.to_python_string();
    let requested = fixed(new_limit, 0);
    if new_limit > max_allowed as f64 {
        return Ok(format!(
            "Error: Requested limit ${requested} exceeds the maximum allowed temporary increase. Maximum temporary limit is ${max_allowed} (150% of current ${current_text} limit)."
        ));
    }
    if new_limit <= current.as_f64() {
        return Ok(format!(
            "Error: Requested limit ${requested} is not higher than the current limit of ${current_text}."
        ));
    }
    // At most 150% of the current limit: an `i64`.
    let new_limit = new_limit as i64;
    let tag = kind.tag();
    set(card, kind.field(), json!(new_limit));
    set(
        card,
        &format!("temporary_{tag}_limit_increase"),
        json!(true),
    );
    set(card, &format!("original_{tag}_limit"), current.to_value());
    set(
        card,
        &format!("temporary_{tag}_limit_expires"),
        json!(TODAY),
    );
    data.save(DEBIT_CARDS, cards)?;
    Ok(limit_granted(kind, card_id, current, new_limit))
}

/// The limit a request raises and the whole amount it asks for, or the
/// refusal of a missing or bad `limit_type` or `new_limit`.
fn limit_request(kwargs: &Kwargs) -> Result<Result<(LimitKind, f64), String>, String> {
    let limit_type = kwargs.get("limit_type")?;
    if !truthy(limit_type) {
        return Ok(Err(
            "Error: Missing required parameter: limit_type.".to_owned()
        ));
    }
    let kind = match limit_type.as_str() {
        Some("atm") => LimitKind::Atm,
        Some("purchase") => LimitKind::Purchase,
        _ => {
            return Ok(Err(format!(
                "Error: Invalid limit_type '{}'. Must be 'atm' or 'purchase'.",
                py_str(limit_type)
            )));
        }
    };
    Ok(whole_amount(kwargs.get("new_limit")?).and_then(|amount| {
        if amount <= 0.0 {
            Err("Error: new_limit must be a positive amount.".to_owned())
        } else {
            Ok((kind, amount))
        }
    }))
}

/// The card's linked account when it is open and at least 60 days old, or
/// the refusal.
fn eligible_account(
    data: &Data<'_>,
    card_id: &str,
    card: &Value,
) -> Result<Result<Value, String>, Raised> {
    let linked = match card
        .get("account_id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
    {
        Some(account_id) => data
            .record(ACCOUNTS, account_id)?
            .map(|account| (account_id, account)),
        None => None,
    };
    let Some((account_id, account)) = linked else {
        return Ok(Err(format!(
            "Error: Could not find linked account for debit card '{card_id}'."
        )));
    };
    if !is(&account, "status", "OPEN") {
        return Ok(Err(format!(
            "Error: The linked account '{account_id}' is not in good standing. Account status: {}.",
            shown(&account, "status")
        )));
    }
    Ok(too_young(&account)?.map_or(Ok(account), Err))
}

/// The answer to a granted increase of `kind` from `current` to `new_limit`.
fn limit_granted(kind: LimitKind, card_id: &str, current: Num, new_limit: i64) -> String {
    let previous = current.to_python_string();
    let increase = match current {
        Num::Int(int) => Num::Int(new_limit - int),
        Num::Float(float) => Num::Float(new_limit as f64 - float),
    };
    [
        &format!("Temporary {} Increase Granted Successfully", kind.name()),
        &format!("Card ID: {card_id}"),
        &format!("Previous Limit: ${previous}"),
        &format!("New Temporary Limit: ${new_limit}"),
        &format!("Increase Amount: ${}", increase.to_python_string()),
        "",
        "Important Information:",
        "- This temporary increase expires in 24 hours",
        &format!("- After expiration, the limit will revert to ${previous}"),
        "- Only one temporary increase is allowed per 24-hour period",
        "",
        "Note: If the customer is at a third-party (non-Rho-Bank) ATM, that ATM may have its own",
        "per-transaction or daily limits that Rho-Bank cannot override. The customer may need to",
        "use a Rho-Bank ATM or make multiple smaller withdrawals at third-party ATMs.",
    ]
    .join("\n")
}

/// Which daily limit a temporary increase raises.
#[derive(Clone, Copy)]
enum LimitKind {
    Atm,
    Purchase,
}

impl LimitKind {
    /// The `limit_type` argument naming it.
    fn tag(self) -> &'static str {
        match self {
            Self::Atm => "atm",
            Self::Purchase => "purchase",
        }
    }

    /// The card's field holding it.
    fn field(self) -> &'static str {
        match self {
            Self::Atm => "daily_atm_limit",
            Self::Purchase => "daily_purchase_limit",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Atm => "Daily ATM Withdrawal Limit",
            Self::Purchase => "Daily Purchase Limit",
        }
    }
}

/// `float(new_limit)` when it is a whole number (Python then takes its
/// `int`), or the refusal.
fn whole_amount(value: &Value) -> Result<f64, String> {
    if value.is_null() {
        return Err("Error: Missing required parameter: new_limit.".to_owned());
    }
    let Ok(amount) = float(value) else {
        return Err(format!(
            "Error: new_limit must be an integer, got '{}'.",
            py_str(value)
        ));
    };
    if amount.fract() != 0.0 || !amount.is_finite() {
        return Err(format!(
            "Error: new_limit must be an integer, got '{}'.",
            float_str(amount)
        ));
    }
    Ok(amount)
}

/// The refusal for an account opened (`date_opened`, `MM/DD/YYYY`) less
/// than 60 days ago; an unreadable date is no refusal, a date that is no
/// string Python's `TypeError`.
fn too_young(account: &Value) -> Result<Option<String>, Raised> {
    let Some(opened) = account.get("date_opened").filter(|date| truthy(date)) else {
        return Ok(None);
    };
    let Some(opened) = strptime_mdy(opened)? else {
        return Ok(None);
    };
    let age = today() - opened;
    Ok((age < 60).then(|| {
        format!(
            "Error: Account must be at least 60 days old for a temporary limit increase. Account age: {age} days."
        )
    }))
}

/// The card's current limit of `kind`; a missing ATM limit is the account
/// level's default (a teen account's is fixed). The inner `Err` is the
/// reference's refusal; a limit that is no number is Python's `TypeError`
/// at `current * 1.5`.
fn current_limit(
    card: &Value,
    account: &Value,
    kind: LimitKind,
) -> Result<Result<Num, String>, Raised> {
    let current = field(card, kind.field());
    if !current.is_null() {
        return Num::from_value(current)
            .map(Ok)
            .ok_or_else(|| Raised::Type(multiply_error(current)));
    }
    let LimitKind::Atm = kind else {
        return Ok(Err(format!(
            "Error: The card does not have a {} configured. This may be a restricted account type where limits are set by account policy and cannot be modified.",
            kind.name().to_lowercase()
        )));
    };
    let level = lower(account.get("level").unwrap_or(&json!("")))?;
    if level.contains("light green") {
        return Ok(Err("Error: Light Green Account (teen checking) cards have policy-based limits that cannot be modified. The daily ATM withdrawal limit of $150 is fixed by account policy for safety reasons. The customer may request the parent/guardian to withdraw cash from their own account if needed.".to_owned()));
    }
    let default = match level.as_str() {
        "blue account" | "green fee-free account" => 500,
        "green account" | "gold years account" => 600,
        "light blue account" => 400,
        "evergreen account" => 750,
        "bluest account" => 1500,
        "dark green account" => 300,
        "purple account" => 1000,
        _ => {
            return Ok(Err(format!(
                "Error: Could not determine the default ATM limit for account type '{}'. Please verify the account type.",
                shown(account, "level")
            )));
        }
    };
    Ok(Ok(Num::Int(default)))
}

/// Python's `TypeError` for `value * 1.5` with a non-number `value`.
fn multiply_error(value: &Value) -> String {
    match value {
        Value::String(_) | Value::Array(_) => {
            "can't multiply sequence by non-int of type 'float'".to_owned()
        }
        other => format!(
            "unsupported operand type(s) for *: '{}' and 'float'",
            type_name(other)
        ),
    }
}

// ---------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------

const MISSING_CARD_ID: &str = "Error: Missing required parameter: card_id.";

/// The `card_id` argument, `None` when it is falsy.
fn card_id_argument(kwargs: &Kwargs) -> Result<Option<&str>, String> {
    if !truthy(kwargs.get("card_id")?) {
        return Ok(None);
    }
    kwargs.str("card_id").map(Some)
}

fn not_found(card_id: &str) -> String {
    format!("Error: Debit card '{card_id}' not found.")
}

/// `record.get(key) == text`.
fn is(record: &Value, key: &str, text: &str) -> bool {
    record.get(key).and_then(Value::as_str) == Some(text)
}

/// `f"{record.get(key)}"`.
fn shown(record: &Value, key: &str) -> String {
    py_str(field(record, key))
}

/// `text.isdigit() and len(text) == count` (ASCII digits).
fn is_digits(text: &str, count: usize) -> bool {
    text.len() == count && text.bytes().all(|byte| byte.is_ascii_digit())
}

/// The first `count` decimal digits of `text`, zero-padded on the left.
fn leading_digits(text: &str, count: usize) -> String {
    let digits: String = text
        .chars()
        .filter(char::is_ascii_digit)
        .take(count)
        .collect();
    format!("{digits:0>count$}")
}

/// The last `count` characters of `text` (`text[-count:]`).
fn last_chars(text: &str, count: usize) -> &str {
    let start = text
        .char_indices()
        .rev()
        .nth(count - 1)
        .map_or(0, |(index, _)| index);
    &text[start..]
}

#[cfg(test)]
mod tests {
    //! Expected answers and records from the Python reference run on the
    //! same data (`reference_bank()`, changed where a test says so).
    use super::*;
    use crate::discoverable::reference_bank;
    use forge_guest::MemoryStore;

    /// Calls `tool` with `args` (numbers as floats, as the reference reads them).
    fn call(store: &mut MemoryStore, tool: &str, args: Value) -> String {
        let args = crate::py::floats(args).to_string();
        let kwargs = Kwargs::parse(&args, tool.to_owned()).expect("arguments");
        let body = TOOLS.iter().find(|body| body.name == tool).expect("a tool");
        (body.run)(&mut Data::new(store), &kwargs).expect("an answer")
    }

    fn record(store: &mut MemoryStore, table: &str, id: &str) -> Value {
        Data::new(store)
            .record(table, id)
            .unwrap()
            .expect("a record")
    }

    fn put_card(store: &mut MemoryStore, id: &str, card: Value) {
        let mut data = Data::new(store);
        let mut cards = data.table(DEBIT_CARDS).unwrap();
        cards.insert(id.to_owned(), card);
        data.save(DEBIT_CARDS, cards).unwrap();
    }

    fn order(account_id: &str, user_id: &str, delivery_fee: i64, design_fee: i64) -> Value {
        json!({"account_id": account_id, "user_id": user_id, "delivery_option": "STANDARD",
            "delivery_fee": delivery_fee, "card_design": "CLASSIC", "design_fee": design_fee,
            "shipping_address": "9 Elm St"})
    }

    fn activation(card_id: &str, last_4_digits: &str, cvv: &str, pin: &str) -> Value {
        json!({"card_id": card_id, "last_4_digits": last_4_digits,
            "expiration_date": "11/29", "cvv": cvv, "pin": pin})
    }

    #[test]
    fn an_order_charges_its_fees_and_issues_a_pending_card() {
        let mut store = reference_bank();
        let args = json!({"account_id": "06", "user_id": "c7d8e9f0a1", "delivery_option": "rush",
            "delivery_fee": 35, "card_design": "premium", "design_fee": 10,
            "shipping_address": "9 Elm St", "excess_replacement_fee": 25});
        assert_eq!(
            call(&mut store, "order_debit_card_5739", args),
            "Debit Card Order Confirmed\nOrder ID: dcord_0111fa6c8027\nCard ID: dbc_b7cb5c28740d\n\
             Linked Account: 06\nDelivery Option: RUSH\nCard Design: PREMIUM\n\
             Shipping Address: 9 Elm St\nExpected Delivery: 1-2 business days\n\n\
             Note: Card will arrive with status PENDING. Customer must call to activate after receiving the card.\n\
             Total Fees: $70.00 (Delivery: $35.0, Design: $10.0, Excess Replacement: $25) - CHARGED to account 06\n\
             New Account Balance: $4180.00"
        );
        assert_eq!(
            record(&mut store, "debit_card_orders", "dcord_0111fa6c8027").to_string(),
            json!({"order_id": "dcord_0111fa6c8027", "account_id": "06", "user_id": "c7d8e9f0a1",
                "delivery_option": "RUSH", "card_design": "PREMIUM", "shipping_address": "9 Elm St",
                "delivery_fee": 35.0, "design_fee": 10.0, "excess_replacement_fee": 25.0,
                "total_fee": 70.0, "order_date": "11/14/2025",
                "expected_delivery": "1-2 business days", "status": "PENDING"})
            .to_string()
        );
        assert_eq!(
            record(&mut store, DEBIT_CARDS, "dbc_b7cb5c28740d").to_string(),
            json!({"card_id": "dbc_b7cb5c28740d", "account_id": "06", "user_id": "c7d8e9f0a1",
                "cardholder_name": "MARGOT BELLAMY", "last_4_digits": "7343", "cvv": "171",
                "status": "PENDING", "issue_date": "11/14/2025", "expiration_date": "11/30/2029",
                "card_design": "PREMIUM", "issue_reason": "first_card"})
            .to_string()
        );
        assert_eq!(
            record(&mut store, ACCOUNTS, "06")["current_holdings"],
            "4180.00"
        );
        assert_eq!(
            record(&mut store, "bank_account_transaction_history", "btxn_dcfee_fa6c8027").to_string(),
            json!({"transaction_id": "btxn_dcfee_fa6c8027", "account_id": "06", "date": "11/14/2025",
                "description": "DEBIT CARD ORDER FEE - Delivery $35.0, Design $10.0, Excess Replacement $25",
                "amount": -70.0, "type": "debit_card_fee", "status": "posted"})
            .to_string()
        );
        assert_eq!(
            call(
                &mut store,
                "order_debit_card_5739",
                order("06", "c7d8e9f0a1", 0, 0)
            ),
            "Error: There is already a pending debit card order for account '06'."
        );
    }

    #[test]
    fn orders_are_refused_as_the_reference_refuses_them() {
        let mut store = reference_bank();
        let with = |field: &str, value: Value| {
            let mut args = order("03", "125", 0, 0);
            set(&mut args, field, value);
            args
        };
        let cases = [
            (
                order("02", "123", 0, 0),
                "Error: Debit cards can only be ordered for checking accounts. Account '02' is a saving account.",
            ),
            (
                order("03", "999", 0, 0),
                "Error: Account '03' does not belong to user '999'.",
            ),
            (
                order("01", "123", 0, 0),
                "Error: Account must have a minimum balance of $25. Current balance: $0.00",
            ),
            (
                order("chk_lj82d4f1a9", "lj82d4f1a9", 0, 0),
                "Error: Account 'chk_lj82d4f1a9' already has an active debit card. Maximum 1 active card per checking account.",
            ),
            (
                order("08", "h1i2j3k4l5", 35, 20),
                "Error: Insufficient funds for fees. Total fees: $55.00. Current balance: $50.00",
            ),
            (
                order("nope", "125", 0, 0),
                "Error: Account 'nope' not found.",
            ),
            (
                with("delivery_option", json!("FAST")),
                "Error: Invalid delivery_option. Must be one of: ['STANDARD', 'EXPEDITED', 'RUSH']",
            ),
            (
                with("card_design", json!("gold")),
                "Error: Invalid card_design. Must be one of: ['CLASSIC', 'PREMIUM', 'CUSTOM']",
            ),
            (
                with("delivery_fee", json!("abc")),
                "Error: delivery_fee must be a number.",
            ),
            (
                with("delivery_fee", Value::Null),
                "Error: Missing required parameters. Required: account_id, user_id, delivery_option, delivery_fee, card_design, design_fee, shipping_address.",
            ),
        ];
        for (args, expected) in cases {
            assert_eq!(call(&mut store, "order_debit_card_5739", args), expected);
        }
    }

    #[test]
    fn a_card_replacing_a_lost_one_activates_as_a_replacement() {
        let mut store = reference_bank();
        let lost = json!({"card_id": "dbc_kj93a7b2e1_blue", "reason": "lost"});
        assert!(
            call(&mut store, "close_debit_card_4721", lost)
                .starts_with("Debit Card Closed Successfully\n")
        );
        let ordered = call(
            &mut store,
            "order_debit_card_5739",
            order("chk_kj93a7b2e1_1", "kj93a7b2e1", 0, 0),
        );
        assert!(ordered.contains("\nCard ID: dbc_c432e7de977e\n"));
        let args = activation("dbc_c432e7de977e", "0329", "830", "2580");
        assert_eq!(
            call(&mut store, "activate_debit_card_8291", args.clone()),
            "Error: Wrong activation tool. This card has issue_reason='lost'. Please use activate_debit_card_8292 instead of activate_debit_card_8291."
        );
        assert_eq!(
            call(&mut store, "activate_debit_card_8292", args),
            "Replacement Debit Card Activation Successful\nCard ID: dbc_c432e7de977e\n\
             Replacement Reason: Lost\nStatus: ACTIVE\nActivation Date: 11/14/2025\n\n\
             Your replacement card is now ready to use.\n\nIMPORTANT SECURITY REMINDERS:\n\
             - Please review your recent transactions for any unauthorized charges\n\
             - Report any suspicious activity immediately"
        );
        let card = record(&mut store, DEBIT_CARDS, "dbc_c432e7de977e");
        assert_eq!(
            (&card["status"], &card["activated_date"]),
            (&json!("ACTIVE"), &json!("11/14/2025"))
        );
        assert_eq!(
            call(
                &mut store,
                "activate_debit_card_8292",
                activation("dbc_c432e7de977e", "1234", "123", "2580")
            ),
            "Error: Debit card 'dbc_c432e7de977e' is already active."
        );
    }

    #[test]
    fn activations_are_refused_as_the_reference_refuses_them() {
        let mut store = reference_bank();
        let cases = [
            (
                activation("dbc_4e8d2a6f9c", "1", "1", ""),
                "Error: Missing required parameters. Required: card_id, last_4_digits, expiration_date, cvv, pin.",
            ),
            (
                activation("dbc_4e8d2a6f9c", "1", "1", "1234"),
                "Error: PIN cannot be sequential (e.g., 1234). Please choose a more secure PIN.",
            ),
            (
                activation("dbc_4e8d2a6f9c", "1", "1", "7777"),
                "Error: PIN cannot be all the same digit (e.g., 1111). Please choose a more secure PIN.",
            ),
            (
                activation("dbc_4e8d2a6f9c", "1", "1", "25a0"),
                "Error: PIN must be exactly 4 digits.",
            ),
            (
                activation("dbc_4e8d2a6f9c", "1", "12", "2580"),
                "Error: CVV must be exactly 3 digits.",
            ),
            (
                activation("dbc_4e8d2a6f9c", "12345", "123", "2580"),
                "Error: Last 4 digits must be exactly 4 digits.",
            ),
            (
                activation("nope", "1234", "123", "2580"),
                "Error: Debit card 'nope' not found.",
            ),
            (
                activation("dbc_4e8d2a6f9c", "0000", "123", "2580"),
                "Error: Card verification failed. The last 4 digits do not match our records.",
            ),
            (
                activation("dbc_kj93a7b2e1_blue", "3847", "123", "2580"),
                "Error: Wrong activation tool. This card has issue_reason='new_account'. Please use activate_debit_card_8291 instead of activate_debit_card_8292.",
            ),
        ];
        for (args, expected) in cases {
            assert_eq!(call(&mut store, "activate_debit_card_8292", args), expected);
        }
        let mut data = Data::new(&mut store);
        data.update(ACCOUNTS, "03", vec![("status", json!("CLOSED"))])
            .unwrap();
        assert_eq!(
            call(
                &mut store,
                "activate_debit_card_8291",
                activation("dbc_7a3f9c2b1e", "2847", "123", "2580")
            ),
            "Error: The linked checking account '03' is no longer open. Card cannot be activated."
        );
    }

    #[test]
    fn new_and_reissued_cards_retire_the_accounts_active_cards() {
        let mut store = reference_bank();
        for account_id in ["03", "06"] {
            let id = format!("dbc_old_{account_id}");
            put_card(
                &mut store,
                &id,
                json!({"card_id": id, "account_id": account_id, "status": "ACTIVE"}),
            );
        }
        assert_eq!(
            call(
                &mut store,
                "activate_debit_card_8291",
                activation("dbc_7a3f9c2b1e", "2847", "123", "2580")
            ),
            "New Debit Card Activation Successful\nCard ID: dbc_7a3f9c2b1e\nStatus: ACTIVE\n\
             Activation Date: 11/14/2025\n\n\
             Your card is now ready to use at any ATM or point of sale terminal.\n\
             For security, please sign the back of your card.\n\n\
             Note: Previous card(s) have been deactivated: dbc_old_03"
        );
        assert_eq!(
            call(
                &mut store,
                "activate_debit_card_8293",
                activation("dbc_9b1c5d7e3a", "5291", "123", "2580")
            ),
            "Reissued Debit Card Activation Successful\nCard ID: dbc_9b1c5d7e3a\n\
             Reissue Reason: Expired\nStatus: ACTIVE\nActivation Date: 11/14/2025\n\n\
             Your reissued card is now ready to use.\n\n\
             Note: Your previous card(s) (dbc_old_06) will remain active for 24 hours as a grace period.\n\
             After 24 hours, the old card(s) will be automatically deactivated.\n\n\
             Reminder: If your card number changed, please update any recurring payments with your new card details."
        );
        assert_eq!(
            record(&mut store, DEBIT_CARDS, "dbc_old_03"),
            json!({"card_id": "dbc_old_03", "account_id": "03", "status": "DEACTIVATED",
                "deactivated_date": "11/14/2025", "deactivation_reason": "New card activated"})
        );
        assert_eq!(
            record(&mut store, DEBIT_CARDS, "dbc_old_06"),
            json!({"card_id": "dbc_old_06", "account_id": "06", "status": "GRACE_PERIOD",
                "grace_period_ends": "11/14/2025",
                "deactivation_reason": "Reissued card activated (expired)"})
        );
    }

    #[test]
    fn cards_freeze_unfreeze_and_close() {
        let mut store = reference_bank();
        let blue = json!({"card_id": "dbc_kj93a7b2e1_blue"});
        let pending = json!({"card_id": "dbc_7a3f9c2b1e"});
        let frozen = "Debit Card Frozen Successfully\nCard ID: dbc_kj93a7b2e1_blue\nStatus: FROZEN\n\
             Frozen Date: 11/14/2025\n\nWhile frozen:\n\
             - All new purchase transactions will be declined\n\
             - Recurring payments and subscriptions will be declined\n\
             - Pending transactions already authorized may still process\n\n\
             To unfreeze, the customer can call customer service or use the mobile app.\n\
             If the card is confirmed lost or stolen, recommend closing the card permanently instead.";
        let unfrozen = "Debit Card Unfrozen Successfully\nCard ID: dbc_kj93a7b2e1_blue\nStatus: ACTIVE\n\
             Unfrozen Date: 11/14/2025\n\nThe card is now active and ready to use immediately.\n\
             All transactions will process normally.";
        let fraud_closed = "Debit Card Closed Successfully\nCard ID: dbc_kj93a7b2e1_blue\n\
             Previous Status: ACTIVE\nNew Status: CLOSED\nClosure Reason: Fraud Suspected\n\
             Closure Date: 11/14/2025\n\n\
             IMPORTANT: This card has been immediately deactivated for security.\n\
             Any pending transactions may still be processed.\n\
             Please advise the customer to review recent transactions and file disputes for any unauthorized charges.\n\
             Also recommend changing their online banking password.\n\n\
             Note: This card cannot be reactivated. If the customer needs a new card, they can order one through the standard ordering process.\n\
             Any recurring payments linked to this card will need to be updated with new payment information.";
        let pending_closed = "Debit Card Closed Successfully\nCard ID: dbc_7a3f9c2b1e\n\
             Previous Status: PENDING\nNew Status: CLOSED\nClosure Reason: No Longer Needed\n\
             Closure Date: 11/14/2025\n\n\n\
             Note: This card cannot be reactivated. If the customer needs a new card, they can order one through the standard ordering process.\n\
             Any recurring payments linked to this card will need to be updated with new payment information.";
        let steps = [
            ("freeze_debit_card_3892", blue.clone(), frozen),
            (
                "freeze_debit_card_3892",
                blue.clone(),
                "Error: Debit card 'dbc_kj93a7b2e1_blue' is already frozen.",
            ),
            ("unfreeze_debit_card_3893", blue.clone(), unfrozen),
            (
                "unfreeze_debit_card_3893",
                blue,
                "Error: Debit card 'dbc_kj93a7b2e1_blue' is already active.",
            ),
            (
                "freeze_debit_card_3892",
                pending.clone(),
                "Error: Debit card 'dbc_7a3f9c2b1e' cannot be frozen. Current status: PENDING. Only ACTIVE cards can be frozen.",
            ),
            (
                "unfreeze_debit_card_3893",
                pending,
                "Error: Debit card 'dbc_7a3f9c2b1e' cannot be unfrozen. Current status: PENDING. Only FROZEN cards can be unfrozen.",
            ),
            (
                "freeze_debit_card_3892",
                json!({"card_id": ""}),
                "Error: Missing required parameter: card_id.",
            ),
            (
                "unfreeze_debit_card_3893",
                json!({"card_id": "nope"}),
                "Error: Debit card 'nope' not found.",
            ),
            (
                "close_debit_card_4721",
                json!({"card_id": "dbc_kj93a7b2e1_blue", "reason": "Fraud_Suspected"}),
                fraud_closed,
            ),
            (
                "close_debit_card_4721",
                json!({"card_id": "dbc_kj93a7b2e1_blue", "reason": "lost"}),
                "Error: Debit card 'dbc_kj93a7b2e1_blue' cannot be closed. Current status: CLOSED. Only ACTIVE or PENDING cards can be closed.",
            ),
            (
                "close_debit_card_4721",
                json!({"card_id": "dbc_7a3f9c2b1e", "reason": "no_longer_needed"}),
                pending_closed,
            ),
            (
                "close_debit_card_4721",
                json!({"card_id": "dbc_7a3f9c2b1e", "reason": "broken"}),
                "Error: Invalid reason. Must be one of: ['lost', 'stolen', 'fraud_suspected', 'damaged', 'no_longer_needed', 'account_closing']",
            ),
            (
                "close_debit_card_4721",
                json!({"card_id": "", "reason": "lost"}),
                "Error: Missing required parameters. Required: card_id, reason.",
            ),
        ];
        for (tool, args, expected) in steps {
            assert_eq!(call(&mut store, tool, args), expected);
        }
        assert_eq!(
            record(&mut store, DEBIT_CARDS, "dbc_kj93a7b2e1_blue").to_string(),
            json!({"card_id": "dbc_kj93a7b2e1_blue", "account_id": "chk_kj93a7b2e1_1",
                "user_id": "kj93a7b2e1", "cardholder_name": "KIM JUNHO", "last_4_digits": "3847",
                "cvv": "628", "status": "CLOSED", "issue_date": "01/20/2025",
                "expiration_date": "01/31/2029", "issue_reason": "new_account",
                "frozen_date": "11/14/2025", "unfrozen_date": "11/14/2025",
                "closed_date": "11/14/2025", "closure_reason": "fraud_suspected"})
            .to_string()
        );
    }

    #[test]
    fn velocity_blocks_and_fraud_alerts_clear() {
        let mut store = reference_bank();
        let mut data = Data::new(&mut store);
        let blocked = [
            ("velocity_blocked", json!(true)),
            ("fraud_alert_active", json!(true)),
            ("alert_source", json!("velocity_monitor")),
        ];
        data.update(DEBIT_CARDS, "dbc_lj82d4f1a9_bluest", blocked.to_vec())
            .unwrap();
        let by_bank = [
            ("fraud_alert_active", json!(true)),
            ("alert_source", json!("bank_initiated")),
        ];
        data.update(DEBIT_CARDS, "dbc_538bfb9cba", by_bank.to_vec())
            .unwrap();
        let steps = [
            (
                "dbc_lj82d4f1a9_bluest",
                "velocity_clear",
                "Velocity Block Cleared Successfully\nCard ID: dbc_lj82d4f1a9_bluest\n\
                 Cleared Date: 11/14/2025\n\nThe card is now unblocked and ready for normal use.\n\
                 The velocity monitoring will continue - if the same unusual patterns recur,\n\
                 the card may be blocked again automatically.",
            ),
            (
                "dbc_lj82d4f1a9_bluest",
                "velocity_clear",
                "Error: Debit card 'dbc_lj82d4f1a9_bluest' does not have an active velocity block.",
            ),
            (
                "dbc_lj82d4f1a9_bluest",
                "customer_verified",
                "Fraud Alert Cleared Successfully\nCard ID: dbc_lj82d4f1a9_bluest\n\
                 Cleared Date: 11/14/2025\n\nThe fraud alert has been removed from the card.\n\
                 All transactions will process normally.\n\n\
                 Remind the customer to review recent transactions and report any unauthorized charges.",
            ),
            (
                "dbc_lj82d4f1a9_bluest",
                "customer_verified",
                "Error: Debit card 'dbc_lj82d4f1a9_bluest' does not have an active fraud alert.",
            ),
            (
                "dbc_538bfb9cba",
                "customer_verified",
                "Error: BANK_INITIATED_ALERT - This fraud alert was initiated by the bank's fraud detection system and cannot be cleared by customer service agents. Please transfer the customer to the security team using transfer_to_human_agents.",
            ),
            (
                "dbc_538bfb9cba",
                "unblock",
                "Error: Invalid reason 'unblock'. Must be one of: customer_verified, velocity_clear",
            ),
            (
                "dbc_538bfb9cba",
                "",
                "Error: Missing required parameter: reason.",
            ),
            (
                "nope",
                "velocity_clear",
                "Error: Debit card 'nope' not found.",
            ),
        ];
        for (card_id, reason, expected) in steps {
            let args = json!({"card_id": card_id, "reason": reason});
            assert_eq!(
                call(&mut store, "clear_debit_card_fraud_alert_4892", args),
                expected
            );
        }
        assert_eq!(
            record(&mut store, DEBIT_CARDS, "dbc_lj82d4f1a9_bluest").to_string(),
            json!({"card_id": "dbc_lj82d4f1a9_bluest", "account_id": "chk_lj82d4f1a9",
                "user_id": "lj82d4f1a9", "cardholder_name": "LIANG JINHAI", "last_4_digits": "4821",
                "cvv": "739", "status": "ACTIVE", "issue_date": "03/20/2024",
                "expiration_date": "03/31/2028", "issue_reason": "new_account",
                "velocity_blocked": false, "fraud_alert_active": false, "alert_source": null,
                "velocity_cleared_date": "11/14/2025", "fraud_alert_cleared_date": "11/14/2025"})
            .to_string()
        );
    }

    #[test]
    fn pins_reset_and_change() {
        let mut store = reference_bank();
        let reset = |card_id: &str, last_4_digits: &str, new_pin: &str| {
            (
                "reset_debit_card_pin_6284",
                json!({"card_id": card_id, "last_4_digits": last_4_digits, "new_pin": new_pin}),
            )
        };
        let change = |card_id: &str, current_pin: &str, new_pin: &str| {
            (
                "change_debit_card_pin_6285",
                json!({"card_id": card_id, "current_pin": current_pin, "new_pin": new_pin}),
            )
        };
        let steps = [
            (
                reset("dbc_lj82d4f1a9_bluest", "4821", "8127"),
                "Debit Card PIN Reset Successfully\nCard ID: dbc_lj82d4f1a9_bluest\nPIN Changed: 11/14/2025\n\n\
                 The new PIN is effective immediately.\nYour card has been unlocked and is ready to use.\n\
                 Customer can use the new PIN for ATM withdrawals and point-of-sale transactions.\n\n\
                 Security reminder: Never share your PIN with anyone.",
            ),
            (
                reset("dbc_lj82d4f1a9_bluest", "4822", "8127"),
                "Error: Card verification failed. The last 4 digits do not match our records.",
            ),
            (
                reset("dbc_7a3f9c2b1e", "2847", "8127"),
                "Error: Cannot reset PIN. Card status is PENDING. Only ACTIVE cards can have their PIN reset.",
            ),
            (
                reset("dbc_7a3f9c2b1e", "284", "8127"),
                "Error: Last 4 digits must be exactly 4 digits.",
            ),
            (
                reset("dbc_7a3f9c2b1e", "2847", "4321"),
                "Error: PIN cannot be sequential (e.g., 1234). Please choose a more secure PIN.",
            ),
            (
                reset("", "2847", "8127"),
                "Error: Missing required parameters. Required: card_id, last_4_digits, new_pin.",
            ),
            (
                change("dbc_538bfb9cba", "1357", "8127"),
                "Debit Card PIN Changed Successfully\nCard ID: dbc_538bfb9cba\nPIN Changed: 11/14/2025\n\n\
                 The new PIN is effective immediately.\n\
                 Customer can use the new PIN for ATM withdrawals and point-of-sale transactions.\n\n\
                 Security reminder: Never share your PIN with anyone.",
            ),
            (
                change("dbc_538bfb9cba", "8127", "8127"),
                "Error: New PIN must be different from current PIN.",
            ),
            (
                change("dbc_538bfb9cba", "135", "8127"),
                "Error: Current PIN must be exactly 4 digits.",
            ),
            (
                change("dbc_538bfb9cba", "1357", "0000"),
                "Error: PIN cannot be all the same digit (e.g., 1111). Please choose a more secure PIN.",
            ),
            (
                change("dbc_9b1c5d7e3a", "1357", "8127"),
                "Error: Cannot change PIN. Card status is PENDING. Only ACTIVE cards can have their PIN changed.",
            ),
            (
                change("nope", "1357", "8127"),
                "Error: Debit card 'nope' not found.",
            ),
        ];
        for ((tool, args), expected) in steps {
            assert_eq!(call(&mut store, tool, args), expected);
        }
        let reset_card = record(&mut store, DEBIT_CARDS, "dbc_lj82d4f1a9_bluest");
        assert_eq!(
            [
                &reset_card["pin_last_changed"],
                &reset_card["pin_locked"],
                &reset_card["pin_attempts_remaining"]
            ],
            [&json!("11/14/2025"), &json!(false), &json!(3)]
        );
        assert_eq!(
            record(&mut store, DEBIT_CARDS, "dbc_538bfb9cba")["pin_last_changed"],
            "11/14/2025"
        );
    }

    #[test]
    fn an_accounts_cards_list_latest_first() {
        let mut store = reference_bank();
        let created = json!({"card_id": "dbc_new_03", "account_id": "03", "last_4_digits": "1111",
            "created_date": "01/02/2025"});
        put_card(&mut store, "dbc_new_03", created);
        let mut list = |account_id: &str| {
            call(
                &mut store,
                "get_debit_cards_by_account_id_7823",
                json!({"account_id": account_id}),
            )
        };
        assert_eq!(
            list("03"),
            r#"[
  {
    "card_id": "dbc_7a3f9c2b1e",
    "account_id": "03",
    "user_id": "125",
    "cardholder_name": "AYAN WANG",
    "cvv": "516",
    "status": "PENDING",
    "expiration_date": "01/31/2030",
    "issue_reason": "new_account",
    "card_number_last_4": "2847",
    "date_issued": "01/05/2026"
  },
  {
    "card_id": "dbc_new_03",
    "account_id": "03",
    "card_number_last_4": "1111",
    "date_issued": "01/02/2025"
  }
]"#
        );
        assert_eq!(
            list("02"),
            "Error: Account '02' is not a checking account. Debit cards are only available for checking accounts."
        );
        assert_eq!(list("nope"), "Error: Account 'nope' not found.");
        assert_eq!(list("07"), "No debit cards found for account '07'.");
        assert_eq!(list(""), "Error: Missing required parameter 'account_id'.");
    }

    #[test]
    fn daily_limits_rise_for_a_day() {
        let mut store = reference_bank();
        let mut data = Data::new(&mut store);
        let purchase_limit = vec![("daily_purchase_limit", json!(2500.0))];
        data.update(DEBIT_CARDS, "dbc_kj93a7b2e1_green", purchase_limit)
            .unwrap();
        let granted = |kind: &str, card_id: &str, previous: &str, new: &str, increase: &str| {
            format!(
                "Temporary {kind} Increase Granted Successfully\nCard ID: {card_id}\n\
                 Previous Limit: ${previous}\nNew Temporary Limit: ${new}\nIncrease Amount: ${increase}\n\n\
                 Important Information:\n- This temporary increase expires in 24 hours\n\
                 - After expiration, the limit will revert to ${previous}\n\
                 - Only one temporary increase is allowed per 24-hour period\n\n\
                 Note: If the customer is at a third-party (non-Rho-Bank) ATM, that ATM may have its own\n\
                 per-transaction or daily limits that Rho-Bank cannot override. The customer may need to\n\
                 use a Rho-Bank ATM or make multiple smaller withdrawals at third-party ATMs."
            )
        };
        let teen = "Error: Light Green Account (teen checking) cards have policy-based limits that cannot be modified. The daily ATM withdrawal limit of $150 is fixed by account policy for safety reasons. The customer may request the parent/guardian to withdraw cash from their own account if needed.";
        let steps = [
            ("dbc_kj93a7b2e1_blue", "atm", json!(700),
                granted("Daily ATM Withdrawal Limit", "dbc_kj93a7b2e1_blue", "500", "700", "200")),
            ("dbc_kj93a7b2e1_green", "purchase", json!(3000),
                granted("Daily Purchase Limit", "dbc_kj93a7b2e1_green", "2500.0", "3000", "500.0")),
            ("dbc_kj93a7b2e1_blue", "atm", json!(1051),
                "Error: Requested limit $1051 exceeds the maximum allowed temporary increase. Maximum temporary limit is $1050 (150% of current $700 limit).".to_owned()),
            ("dbc_kj93a7b2e1_green", "purchase", json!(2500),
                "Error: Requested limit $2500 is not higher than the current limit of $3000.".to_owned()),
            ("dbc_kj93a7b2e1_blue", "purchase", json!(700),
                "Error: The card does not have a daily purchase limit configured. This may be a restricted account type where limits are set by account policy and cannot be modified.".to_owned()),
            ("dbc_kj93a7b2e1_lightgreen", "atm", json!(200), teen.to_owned()),
            ("dbc_7a3f9c2b1e", "atm", json!(200),
                "Error: Debit card 'dbc_7a3f9c2b1e' is not active. Current status: PENDING. Only ACTIVE cards can have limit increases.".to_owned()),
            ("dbc_kj93a7b2e1_blue", "atm", json!("700.5"), "Error: new_limit must be an integer, got '700.5'.".to_owned()),
            ("dbc_kj93a7b2e1_blue", "atm", json!("lots"), "Error: new_limit must be an integer, got 'lots'.".to_owned()),
            ("dbc_kj93a7b2e1_blue", "atm", json!(0), "Error: new_limit must be a positive amount.".to_owned()),
            ("dbc_kj93a7b2e1_blue", "ATM", json!(800), "Error: Invalid limit_type 'ATM'. Must be 'atm' or 'purchase'.".to_owned()),
            ("dbc_kj93a7b2e1_blue", "atm", Value::Null, "Error: Missing required parameter: new_limit.".to_owned()),
            ("nope", "atm", json!(800), "Error: Debit card 'nope' not found.".to_owned()),
        ];
        for (card_id, limit_type, new_limit, expected) in steps {
            let args =
                json!({"card_id": card_id, "limit_type": limit_type, "new_limit": new_limit});
            assert_eq!(
                call(
                    &mut store,
                    "request_temporary_debit_card_limit_increase_8374",
                    args
                ),
                expected
            );
        }
        let green = record(&mut store, DEBIT_CARDS, "dbc_kj93a7b2e1_green");
        assert_eq!(
            [
                &green["daily_purchase_limit"],
                &green["temporary_purchase_limit_increase"],
                &green["original_purchase_limit"],
                &green["temporary_purchase_limit_expires"]
            ],
            [
                &json!(3000),
                &json!(true),
                &json!(2500.0),
                &json!("11/14/2025")
            ]
        );
        assert!(green["daily_purchase_limit"].is_i64());
    }
}
