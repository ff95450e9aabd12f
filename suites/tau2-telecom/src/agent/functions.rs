//! The methods of `TelecomTools` that are no tools: what tasks'
//! `initialization_actions` use to break the customer's account, and the
//! `env_assertions` that check it was mended.

use super::db::{ACTIVE, OVERDUE, PAID, SUSPENDED, TODAY, TelecomDb, has_status, ids};
use crate::python::operand;
use forge_tau_guest::model::{Kind, build};
use forge_tau_guest::toolkit::{Answer, Method, function};
use forge_tau_guest::{
    Data, Kwargs, Num, field, list_mut, num_field, py_str, set, truthy, type_name,
};
use serde_json::{Value, json};

pub const GET_AVAILABLE_PLAN_IDS: Method =
    function("get_available_plan_ids", &[], get_available_plan_ids);
pub const SET_DATA_USAGE: Method = function(
    "set_data_usage",
    &[
        ("customer_id", true),
        ("line_id", true),
        ("data_used_gb", true),
    ],
    set_data_usage,
);
pub const SUSPEND_LINE_FOR_OVERDUE_BILL: Method = function(
    "suspend_line_for_overdue_bill",
    &[
        ("customer_id", true),
        ("line_id", true),
        ("new_bill_id", true),
        ("contract_ended", true),
    ],
    suspend_line_for_overdue_bill,
);
pub const ASSERT_DATA_REFUELING_AMOUNT: Method = function(
    "assert_data_refueling_amount",
    &[
        ("customer_id", true),
        ("line_id", true),
        ("expected_amount", true),
    ],
    assert_data_refueling_amount,
);
pub const ASSERT_LINE_STATUS: Method = function(
    "assert_line_status",
    &[
        ("customer_id", true),
        ("line_id", true),
        ("expected_status", true),
    ],
    assert_line_status,
);
pub const ASSERT_OVERDUE_BILL_EXISTS: Method = function(
    "assert_overdue_bill_exists",
    &[("customer_id", true), ("overdue_bill_id", true)],
    assert_overdue_bill_exists,
);
pub const ASSERT_NO_OVERDUE_BILL: Method = function(
    "assert_no_overdue_bill",
    &[("overdue_bill_id", true)],
    assert_no_overdue_bill,
);

fn get_available_plan_ids(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    let db = TelecomDb::load(data)?;
    let ids = db
        .plans
        .iter()
        .map(|plan| field(plan, "plan_id").cloned())
        .collect::<Result<_, _>>()?;
    Ok(Answer::Plain(Value::Array(ids)))
}

/// Stores `data_used_gb` as given: the reference assigns it to the model
/// without validation, so an int stays an int.
fn set_data_usage(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let line_id = kwargs.get("line_id")?;
    let data_used_gb = kwargs.get("data_used_gb")?;
    let mut db = TelecomDb::load(data)?;
    let line = db.target_line(kwargs.get("customer_id")?, line_id)?;
    set(&mut db.lines[line], "data_used_gb", data_used_gb.clone());
    db.save(data)?;
    Ok(Answer::Text(format!(
        "Data usage set to {} GB for line {}",
        py_str(data_used_gb),
        py_str(line_id)
    )))
}

/// Suspends line `line_id` for an overdue bill `new_bill_id` of last
/// month's plan price (January 2025: issued on the 1st, due 14 days later),
/// optionally ending the line's contract on the last day of that month.
fn suspend_line_for_overdue_bill(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let customer_id = kwargs.get("customer_id")?;
    let line_id = kwargs.get("line_id")?;
    let new_bill_id = kwargs.get("new_bill_id")?;
    let contract_ended = kwargs.get("contract_ended")?;
    let mut db = TelecomDb::load(data)?;
    let line = db.line(line_id)?;
    if !has_status(&db.lines[line], ACTIVE) {
        return Err("Line must be active to suspend for unpaid bill".to_owned());
    }
    let amount = num_field(db.plan_of(line)?, "price_per_month")?;
    let description = format!(
        "Charge for line {}",
        py_str(field(&db.lines[line], "line_id")?)
    );
    if amount <= Num::Int(0) {
        return Err("Amount must be positive for overdue bill".to_owned());
    }
    let customer = db.customer(customer_id)?;
    let bills = db.bills_of(customer)?;
    if bills
        .iter()
        .any(|bill| has_status(&db.bills[*bill], OVERDUE))
    {
        return Err("Customer already has an overdue bill".to_owned());
    }
    // `Bill(bill_id=new_bill_id, ...)`: the one field an argument fills
    // unchecked (the customer id matched a stored one).
    build(
        "Bill",
        &[("bill_id", Kind::Str)],
        &json!({"bill_id": new_bill_id}),
    )?;
    db.bills.push(json!({
        "bill_id": new_bill_id,
        "customer_id": customer_id,
        "period_start": "2025-01-01",
        "period_end": "2025-01-31",
        "issue_date": "2025-01-01",
        "total_due": (Num::Float(0.0) + amount).to_value(),
        "due_date": "2025-01-15",
        "line_items": [{
            "description": description,
            "amount": Num::Float(amount.as_f64()).to_value(),
            "date": TODAY,
            "item_type": "Charge",
        }],
        "status": OVERDUE,
    }));
    list_mut(&mut db.customers[customer], "bill_ids")?.push(new_bill_id.clone());
    let record = &mut db.lines[line];
    set(record, "status", json!(SUSPENDED));
    set(record, "suspension_start_date", json!(TODAY));
    if truthy(contract_ended) {
        set(record, "contract_end_date", json!("2025-01-31"));
    }
    db.save(data)?;
    Ok(Answer::Text(format!(
        "Line {} suspended for unpaid bill {}. Contract ended: {}",
        py_str(line_id),
        py_str(new_bill_id),
        py_str(contract_ended)
    )))
}

/// Whether the line's refuelled data is `expected_amount` (within 1e-6).
fn assert_data_refueling_amount(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let expected = kwargs.get("expected_amount")?;
    let db = TelecomDb::load(data)?;
    let line = db.target_line(kwargs.get("customer_id")?, kwargs.get("line_id")?)?;
    let refuelled = field(&db.lines[line], "data_refueling_gb")?;
    let (Some(refuelled), Some(expected_amount)) = (operand(refuelled), operand(expected)) else {
        return Err(format!(
            "unsupported operand type(s) for -: '{}' and '{}'",
            type_name(refuelled),
            type_name(expected)
        ));
    };
    Ok(Answer::Bool(
        (refuelled - expected_amount).as_f64().abs() < 1e-6,
    ))
}

fn assert_line_status(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let expected = kwargs.get("expected_status")?;
    let db = TelecomDb::load(data)?;
    let line = db.target_line(kwargs.get("customer_id")?, kwargs.get("line_id")?)?;
    Ok(Answer::Bool(field(&db.lines[line], "status")? == expected))
}

/// True if the customer has bill `overdue_bill_id` and it is overdue; an
/// error otherwise.
fn assert_overdue_bill_exists(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let bill_id = kwargs.get("overdue_bill_id")?;
    let db = TelecomDb::load(data)?;
    let customer = db.customer(kwargs.get("customer_id")?)?;
    if !ids(&db.customers[customer], "bill_ids")?.contains(bill_id) {
        return Err(format!("Overdue bill {} not found", py_str(bill_id)));
    }
    if !has_status(&db.bills[db.bill(bill_id)?], OVERDUE) {
        return Err(format!("Overdue bill {} is not overdue", py_str(bill_id)));
    }
    Ok(Answer::Bool(true))
}

/// True if bill `overdue_bill_id` is gone or paid.
fn assert_no_overdue_bill(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let bill_id = kwargs.get("overdue_bill_id")?;
    let db = TelecomDb::load(data)?;
    Ok(Answer::Bool(
        db.bill(bill_id)
            .map_or(true, |bill| has_status(&db.bills[bill], PAID)),
    ))
}
