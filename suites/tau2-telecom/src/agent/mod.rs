//! `TelecomTools`: the agent's toolkit over the carrier's database.

mod db;
mod functions;

use crate::python::{no_attribute, not_comparable, operand};
pub use db::{ACTIVE, PAID, TelecomDb};
use db::{DRAFT, PENDING_ACTIVATION, SUSPENDED, TODAY, has_status, ids};
use forge_tau_guest::toolkit::{Answer, Toolkit, tool};
use forge_tau_guest::{
    Data, Kwargs, Num, field, list_mut, num_field, py_str, set, str_field, truthy,
};
use serde_json::{Value, json};

/// The agent's tools in the reference's order, then its other methods.
pub static AGENT: Toolkit = Toolkit {
    class: "TelecomTools",
    schemas: include_str!("../../tools.json"),
    methods: &[
        tool(
            "get_customer_by_phone",
            &[("phone_number", true)],
            get_customer_by_phone,
        ),
        tool(
            "get_customer_by_id",
            &[("customer_id", true)],
            get_customer_by_id,
        ),
        tool(
            "get_customer_by_name",
            &[("full_name", true), ("dob", true)],
            get_customer_by_name,
        ),
        tool("get_details_by_id", &[("id", true)], get_details_by_id),
        tool(
            "suspend_line",
            &[("customer_id", true), ("line_id", true), ("reason", true)],
            suspend_line,
        ),
        tool("resume_line", CUSTOMER_LINE, resume_line),
        tool(
            "get_bills_for_customer",
            &[("customer_id", true), ("limit", false)],
            get_bills_for_customer,
        ),
        tool(
            "send_payment_request",
            &[("customer_id", true), ("bill_id", true)],
            send_payment_request,
        ),
        tool("get_data_usage", CUSTOMER_LINE, get_data_usage),
        tool("enable_roaming", CUSTOMER_LINE, enable_roaming),
        tool("disable_roaming", CUSTOMER_LINE, disable_roaming),
        tool(
            "transfer_to_human_agents",
            &[("summary", true)],
            transfer_to_human_agents,
        ),
        tool(
            "refuel_data",
            &[
                ("customer_id", true),
                ("line_id", true),
                ("gb_amount", true),
            ],
            refuel_data,
        ),
        functions::GET_AVAILABLE_PLAN_IDS,
        functions::SET_DATA_USAGE,
        functions::SUSPEND_LINE_FOR_OVERDUE_BILL,
        functions::ASSERT_DATA_REFUELING_AMOUNT,
        functions::ASSERT_LINE_STATUS,
        functions::ASSERT_OVERDUE_BILL_EXISTS,
        functions::ASSERT_NO_OVERDUE_BILL,
    ],
    attributes: &[
        "id_generator",
        "_apply_one_time_charge",
        "_get_bill_by_id",
        "_get_bills_awaiting_payment",
        "_get_device_by_id",
        "_get_line_by_id",
        "_get_line_by_phone",
        "_get_plan_by_id",
        "_get_target_line",
        "_set_bill_to_paid",
    ],
};

const CUSTOMER_LINE: &[(&str, bool)] = &[("customer_id", true), ("line_id", true)];

fn get_customer_by_phone(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let db = TelecomDb::load(data)?;
    let customer = db.customer_by_phone(kwargs.get("phone_number")?)?;
    Ok(Answer::Model(db.customers[customer].clone()))
}

fn get_customer_by_id(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let db = TelecomDb::load(data)?;
    let customer = db.customer(kwargs.get("customer_id")?)?;
    Ok(Answer::Model(db.customers[customer].clone()))
}

/// Customers whose name matches case-insensitively and whose date of birth
/// is `dob`; `full_name.lower()` fails on a name that is no string once
/// there is a customer to compare with.
fn get_customer_by_name(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let full_name = kwargs.get("full_name")?;
    let dob = kwargs.get("dob")?;
    let db = TelecomDb::load(data)?;
    let mut matches = Vec::new();
    for customer in &db.customers {
        let name = full_name
            .as_str()
            .ok_or_else(|| no_attribute(full_name, "lower"))?;
        if str_field(customer, "full_name")?.to_lowercase() == name.to_lowercase()
            && customer.get("date_of_birth") == Some(dob)
        {
            matches.push(customer.clone());
        }
    }
    Ok(Answer::Model(Value::Array(matches)))
}

/// The record an id names, by its first letter.
fn get_details_by_id(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let id = kwargs.get("id")?;
    let text = id.as_str().ok_or_else(|| no_attribute(id, "startswith"))?;
    let db = TelecomDb::load(data)?;
    let record = match text.chars().next() {
        Some('L') => &db.lines[db.line(id)?],
        Some('D') => db.device(id)?,
        Some('B') => &db.bills[db.bill(id)?],
        Some('C') => &db.customers[db.customer(id)?],
        Some('P') => db.plan(id)?,
        _ => return Err(format!("Unknown ID format or type: {text}")),
    };
    Ok(Answer::Model(record.clone()))
}

fn suspend_line(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let mut db = TelecomDb::load(data)?;
    let line = db.target_line(kwargs.get("customer_id")?, kwargs.get("line_id")?)?;
    let record = &mut db.lines[line];
    if !has_status(record, ACTIVE) {
        return Err("Line must be active to suspend".to_owned());
    }
    set(record, "status", json!(SUSPENDED));
    set(record, "suspension_start_date", json!(TODAY));
    let answer = json!({
        "message": "Line suspended successfully. $5/month holding fee will apply.",
        "line": record,
    });
    db.save(data)?;
    Ok(Answer::Model(answer))
}

fn resume_line(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let mut db = TelecomDb::load(data)?;
    let line = db.target_line(kwargs.get("customer_id")?, kwargs.get("line_id")?)?;
    let record = &mut db.lines[line];
    if !has_status(record, SUSPENDED) && !has_status(record, PENDING_ACTIVATION) {
        return Err("Line must be suspended to resume".to_owned());
    }
    set(record, "status", json!(ACTIVE));
    set(record, "suspension_start_date", Value::Null);
    let answer = json!({"message": "Line resumed successfully", "line": record});
    db.save(data)?;
    Ok(Answer::Model(answer))
}

/// The customer's bills, newest issue date first (a stable sort, as
/// Python's `sorted(..., reverse=True)`), cut to `limit` as `[:limit]` cuts.
fn get_bills_for_customer(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let db = TelecomDb::load(data)?;
    let customer = db.customer(kwargs.get("customer_id")?)?;
    let mut bills = Vec::new();
    for bill in db.bills_of(customer)? {
        let record = &db.bills[bill];
        bills.push((str_field(record, "issue_date")?, record));
    }
    bills.sort_by(|a, b| b.0.cmp(a.0));
    let end = slice_end(kwargs.optional("limit").unwrap_or(&json!(12)), bills.len())?;
    let bills = bills[..end]
        .iter()
        .map(|(_, record)| (*record).clone())
        .collect();
    Ok(Answer::Model(Value::Array(bills)))
}

/// Where `items[:limit]` ends for a list of `len` items.
fn slice_end(limit: &Value, len: usize) -> Result<usize, String> {
    let limit = match limit {
        Value::Null => return Ok(len),
        Value::Bool(flag) => i64::from(*flag),
        Value::Number(number) if number.is_i64() || number.is_u64() => {
            number.as_i64().unwrap_or(i64::MAX)
        }
        _ => {
            return Err(
                "slice indices must be integers or None or have an __index__ method".to_owned(),
            );
        }
    };
    let len = len as i64;
    let end = if limit < 0 { len + limit } else { limit };
    Ok(end.clamp(0, len) as usize)
}

fn send_payment_request(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let customer_id = kwargs.get("customer_id")?;
    let bill_id = kwargs.get("bill_id")?;
    let mut db = TelecomDb::load(data)?;
    let customer = db.customer(customer_id)?;
    if !db.bills_awaiting_payment(customer)?.is_empty() {
        return Err("A bill is already awaiting payment for this customer".to_owned());
    }
    if !ids(&db.customers[customer], "bill_ids")?.contains(bill_id) {
        return Err(format!(
            "Bill {} not found for customer {}",
            py_str(bill_id),
            py_str(customer_id)
        ));
    }
    let bill = db.bill(bill_id)?;
    set(&mut db.bills[bill], "status", json!(db::AWAITING_PAYMENT));
    db.save(data)?;
    Ok(Answer::Text(format!(
        "Payment request sent to the customer for bill {}",
        py_str(bill_id)
    )))
}

/// The day before the first of next month: the end of the billing cycle.
const CYCLE_END: &str = "2025-02-28";

fn get_data_usage(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let line_id = kwargs.get("line_id")?;
    let db = TelecomDb::load(data)?;
    let line = db.target_line(kwargs.get("customer_id")?, line_id)?;
    let plan = db.plan_of(line)?;
    let record = &db.lines[line];
    Ok(Answer::Plain(json!({
        "line_id": line_id,
        "data_used_gb": field(record, "data_used_gb")?,
        "data_limit_gb": field(plan, "data_limit_gb")?,
        "data_refueling_gb": field(record, "data_refueling_gb")?,
        "cycle_end_date": CYCLE_END,
    })))
}

fn enable_roaming(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    set_roaming(data, kwargs, true)
}

fn disable_roaming(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    set_roaming(data, kwargs, false)
}

/// `enable_roaming` / `disable_roaming`.
fn set_roaming(data: &mut Data<'_>, kwargs: &Kwargs, enable: bool) -> Result<Answer, String> {
    let mut db = TelecomDb::load(data)?;
    let line = db.target_line(kwargs.get("customer_id")?, kwargs.get("line_id")?)?;
    let (done, already) = if enable {
        (
            "Roaming enabled successfully",
            "Roaming was already enabled",
        )
    } else {
        (
            "Roaming disabled successfully",
            "Roaming was already disabled",
        )
    };
    let record = &mut db.lines[line];
    if truthy(field(record, "roaming_enabled")?) == enable {
        return Ok(Answer::Text(already.to_owned()));
    }
    set(record, "roaming_enabled", json!(enable));
    db.save(data)?;
    Ok(Answer::Text(done.to_owned()))
}

fn transfer_to_human_agents(_: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    Ok(Answer::Text("Transfer successful".to_owned()))
}

/// Adds `gb_amount` to the line's refuelled data and charges it to the
/// customer's draft bill at the plan's refuelling price.
fn refuel_data(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let customer_id = kwargs.get("customer_id")?;
    let line_id = kwargs.get("line_id")?;
    let gb_amount = kwargs.get("gb_amount")?;
    let mut db = TelecomDb::load(data)?;
    let line = db.target_line(customer_id, line_id)?;
    let amount = operand(gb_amount).ok_or_else(|| not_comparable("<=", gb_amount, &json!(0)))?;
    if amount <= Num::Int(0) {
        return Err("Refuel amount must be positive".to_owned());
    }
    let price = num_field(db.plan_of(line)?, "data_refueling_price_per_gb")?;
    let charge = amount * price;
    let record = &mut db.lines[line];
    let refuelled = num_field(record, "data_refueling_gb")? + amount;
    set(record, "data_refueling_gb", refuelled.to_value());
    let description = format!(
        "Data refueling: {} GB at ${}/GB",
        py_str(gb_amount),
        price.to_python_string()
    );
    apply_one_time_charge(&mut db, customer_id, charge, description)?;
    db.save(data)?;
    Ok(Answer::Plain(json!({
        "message": format!(
            "Successfully added {} GB of data for line {} for ${:.2}",
            py_str(gb_amount),
            py_str(line_id),
            charge.as_f64()
        ),
        "new_data_refueling_gb": refuelled.to_value(),
        "charge": charge.to_value(),
    })))
}

/// `_apply_one_time_charge`: adds a line item for `amount` to the
/// customer's first draft bill, opening one for next month if there is none.
fn apply_one_time_charge(
    db: &mut TelecomDb,
    customer_id: &Value,
    amount: Num,
    description: String,
) -> Result<(), String> {
    let customer = db.customer(customer_id)?;
    let draft = db
        .bills_of(customer)?
        .into_iter()
        .find(|bill| has_status(&db.bills[*bill], DRAFT));
    let draft = match draft {
        Some(bill) => bill,
        None => {
            let bill_id = fresh_bill_id(db);
            db.bills.push(next_month_draft(&bill_id, customer_id));
            list_mut(&mut db.customers[customer], "bill_ids")?.push(json!(bill_id));
            db.bills.len() - 1
        }
    };
    let item_type = if amount < Num::Int(0) {
        "Credit"
    } else {
        "Charge"
    };
    let bill = &mut db.bills[draft];
    list_mut(bill, "line_items")?.push(json!({
        "description": description,
        "amount": Num::Float(amount.as_f64()).to_value(),
        "date": TODAY,
        "item_type": item_type,
    }));
    let total = num_field(bill, "total_due")? + amount;
    set(bill, "total_due", total.to_value());
    Ok(())
}

/// The id of a new draft bill. The reference draws `B` and eight hex digits
/// of a random `uuid4`; the sandbox has no randomness, so this takes the
/// first of `B00000001`, `B00000002`, … that no bill has.
fn fresh_bill_id(db: &TelecomDb) -> String {
    (1u32..)
        .map(|n| format!("B{n:08x}"))
        .find(|id| db.bill(&json!(id)).is_err())
        .unwrap_or_default()
}

/// A `Bill` for the month after `TODAY` (March 2025: issued on the 1st,
/// due 14 days later), empty and in `Draft`, in the model's field order.
fn next_month_draft(bill_id: &str, customer_id: &Value) -> Value {
    json!({
        "bill_id": bill_id,
        "customer_id": customer_id,
        "period_start": "2025-03-01",
        "period_end": "2025-03-31",
        "issue_date": "2025-03-01",
        "total_due": 0.0,
        "due_date": "2025-03-15",
        "line_items": [],
        "status": DRAFT,
    })
}
