//! The agent's database, `TelecomDB`, and the reference's lookups over it.
//!
//! The database is five lists (`plans`, `devices`, `lines`, `customers`,
//! `bills`), each one record of collection `db` holding the whole list.
//! A method loads the lists, works on them as the reference works on its
//! models, and writes back the lists it changed. Lookups scan a list in
//! order and compare ids with Python's `==`, so an id argument of another
//! type is simply not found, and errors show it as an f-string would.

use forge_tau_guest::{Data, field, py_str, str_field};
use serde_json::Value;

/// The collection that holds the agent's database.
const COLLECTION: &str = "db";

/// The tables, in `TelecomDB`'s field order.
const TABLES: [&str; 5] = ["plans", "customers", "lines", "bills", "devices"];

/// `get_today()`: the reference's fixed clock.
pub const TODAY: &str = "2025-02-25";

/// `LineStatus` and `BillStatus` values the tools test and set.
pub const ACTIVE: &str = "Active";
pub const SUSPENDED: &str = "Suspended";
pub const PENDING_ACTIVATION: &str = "Pending Activation";
pub const DRAFT: &str = "Draft";
pub const AWAITING_PAYMENT: &str = "Awaiting Payment";
pub const PAID: &str = "Paid";
pub const OVERDUE: &str = "Overdue";

/// `TelecomDB`, its lists as `model_dump()` gives them.
pub struct TelecomDb {
    pub plans: Vec<Value>,
    pub customers: Vec<Value>,
    pub lines: Vec<Value>,
    pub bills: Vec<Value>,
    pub devices: Vec<Value>,
    /// The lists as loaded, to write back only those that changed.
    loaded: [Vec<Value>; 5],
}

impl TelecomDb {
    pub fn load(data: &Data<'_>) -> Result<Self, String> {
        let read = |name: &str| match data.require(COLLECTION, name)? {
            Value::Array(items) => Ok(items),
            _ => Err(format!("{COLLECTION}/{name} is not a list")),
        };
        let [plans, customers, lines, bills, devices] = [
            read(TABLES[0])?,
            read(TABLES[1])?,
            read(TABLES[2])?,
            read(TABLES[3])?,
            read(TABLES[4])?,
        ];
        Ok(Self {
            loaded: [
                plans.clone(),
                customers.clone(),
                lines.clone(),
                bills.clone(),
                devices.clone(),
            ],
            plans,
            customers,
            lines,
            bills,
            devices,
        })
    }

    /// Writes back the lists that changed.
    pub fn save(&self, data: &mut Data<'_>) -> Result<(), String> {
        let tables = [
            &self.plans,
            &self.customers,
            &self.lines,
            &self.bills,
            &self.devices,
        ];
        for ((name, table), loaded) in TABLES.iter().zip(tables).zip(&self.loaded) {
            if table != loaded {
                data.put(COLLECTION, name, &Value::Array(table.clone()))?;
            }
        }
        Ok(())
    }

    /// `get_customer_by_id`: the customer's index.
    pub fn customer(&self, customer_id: &Value) -> Result<usize, String> {
        position(&self.customers, "customer_id", customer_id)
            .ok_or_else(|| format!("Customer with ID {} not found", py_str(customer_id)))
    }

    /// `_get_line_by_id`.
    pub fn line(&self, line_id: &Value) -> Result<usize, String> {
        position(&self.lines, "line_id", line_id)
            .ok_or_else(|| format!("Line with ID {} not found", py_str(line_id)))
    }

    /// `_get_line_by_phone`.
    pub fn line_by_phone(&self, phone_number: &Value) -> Result<usize, String> {
        position(&self.lines, "phone_number", phone_number)
            .ok_or_else(|| format!("Line with phone number {} not found", py_str(phone_number)))
    }

    /// `_get_plan_by_id`.
    pub fn plan(&self, plan_id: &Value) -> Result<&Value, String> {
        position(&self.plans, "plan_id", plan_id)
            .map(|index| &self.plans[index])
            .ok_or_else(|| format!("Plan with ID {} not found", py_str(plan_id)))
    }

    /// `_get_device_by_id`.
    pub fn device(&self, device_id: &Value) -> Result<&Value, String> {
        position(&self.devices, "device_id", device_id)
            .map(|index| &self.devices[index])
            .ok_or_else(|| format!("Device with ID {} not found", py_str(device_id)))
    }

    /// `_get_bill_by_id`.
    pub fn bill(&self, bill_id: &Value) -> Result<usize, String> {
        position(&self.bills, "bill_id", bill_id)
            .ok_or_else(|| format!("Bill with ID {} not found", py_str(bill_id)))
    }

    /// The plan of line `line`.
    pub fn plan_of(&self, line: usize) -> Result<&Value, String> {
        self.plan(field(&self.lines[line], "plan_id")?)
    }

    /// `_get_target_line`: line `line_id`, which customer `customer_id` must own.
    pub fn target_line(&self, customer_id: &Value, line_id: &Value) -> Result<usize, String> {
        let customer = &self.customers[self.customer(customer_id)?];
        if !ids(customer, "line_ids")?.contains(line_id) {
            return Err(format!(
                "Line {} not found for customer {}",
                py_str(line_id),
                py_str(customer_id)
            ));
        }
        self.line(line_id)
    }

    /// `get_customer_by_phone`: the first customer whose contact number, or
    /// the number of one of whose lines, is `phone_number`.
    pub fn customer_by_phone(&self, phone_number: &Value) -> Result<usize, String> {
        for (index, customer) in self.customers.iter().enumerate() {
            if customer.get("phone_number") == Some(phone_number) {
                return Ok(index);
            }
            for line_id in ids(customer, "line_ids")? {
                if self.lines[self.line(line_id)?].get("phone_number") == Some(phone_number) {
                    return Ok(index);
                }
            }
        }
        Err(format!(
            "Customer with phone number {} not found",
            py_str(phone_number)
        ))
    }

    /// The customer's bills in `bill_ids` order, each looked up as the
    /// reference does (a dangling id is an error).
    pub fn bills_of(&self, customer: usize) -> Result<Vec<usize>, String> {
        ids(&self.customers[customer], "bill_ids")?
            .iter()
            .map(|bill_id| self.bill(bill_id))
            .collect()
    }

    /// `_get_bills_awaiting_payment`.
    pub fn bills_awaiting_payment(&self, customer: usize) -> Result<Vec<usize>, String> {
        let bills = self.bills_of(customer)?;
        Ok(bills
            .into_iter()
            .filter(|bill| has_status(&self.bills[*bill], AWAITING_PAYMENT))
            .collect())
    }
}

/// The index of the first record whose `key` equals `id`.
fn position(table: &[Value], key: &str, id: &Value) -> Option<usize> {
    table.iter().position(|record| record.get(key) == Some(id))
}

/// A list-of-ids field (`line_ids`, `bill_ids`).
pub fn ids<'r>(record: &'r Value, key: &str) -> Result<&'r Vec<Value>, String> {
    field(record, key)?
        .as_array()
        .ok_or_else(|| format!("field '{key}' is not a list"))
}

/// Whether a line's or a bill's `status` is `status`.
pub fn has_status(record: &Value, status: &str) -> bool {
    str_field(record, "status").is_ok_and(|current| current == status)
}
