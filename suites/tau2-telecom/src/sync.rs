//! `TelecomEnvironment.sync_tools`: carries the carrier's view of the
//! user's line over to the user's surroundings (is the line active, may it
//! roam, is its data used up), settles a bill the user has paid, and
//! passes on the next bill awaiting payment as a payment request.

use crate::agent::{ACTIVE, PAID, TelecomDb};
use crate::user::{PaymentRequest, Phone};
use forge_tau_guest::{Data, field, num_field, set, str_field, truthy};
use serde_json::{Value, json};

/// Does nothing until the user has a phone number (`set_user_info`). An
/// error leaves the state as it was; the reference raises at the same
/// points but keeps what it had already set on the surroundings.
pub fn sync_tools(data: &mut Data<'_>) -> Result<(), String> {
    let mut phone = Phone::load(data)?;
    let Some(phone_number) = phone.surroundings.phone_number.clone() else {
        return Ok(());
    };
    let phone_number = Value::String(phone_number);
    let mut db = TelecomDb::load(data)?;
    let line = &db.lines[db.line_by_phone(&phone_number)?];
    let surroundings = &mut phone.surroundings;
    surroundings.line_active = str_field(line, "status")? == ACTIVE;
    surroundings.roaming_allowed = truthy(field(line, "roaming_enabled")?);
    let plan = db.plan(field(line, "plan_id")?)?;
    surroundings.mobile_data_usage_exceeded = num_field(line, "data_used_gb")?
        >= num_field(plan, "data_limit_gb")? + num_field(line, "data_refueling_gb")?;
    if let Some(request) = &surroundings.payment_request
        && request.paid
    {
        let bill = db.bill(&json!(request.bill_id))?;
        set(&mut db.bills[bill], "status", json!(PAID));
        surroundings.payment_request = None;
    }
    if surroundings.payment_request.is_none() {
        let customer = db.customer_by_phone(&phone_number)?;
        if let Some(bill) = db.bills_awaiting_payment(customer)?.first() {
            let bill = &db.bills[*bill];
            surroundings.payment_request = Some(PaymentRequest {
                bill_id: str_field(bill, "bill_id")?.to_owned(),
                amount_due: num_field(bill, "total_due")?.as_f64(),
                paid: false,
            });
        }
    }
    db.save(data)?;
    phone.save(data)
}
