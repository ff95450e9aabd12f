//! Native checks against the reference: answers and state changes that
//! τ²-bench's telecom environment gives (`tau2.domains.telecom`, pydantic
//! 2.12), on a store holding part of `db.toml` (customer C1001: its lines,
//! bills and plans; `testdata/db.json`) and the whole `user_db.toml`
//! (`testdata/user_db.json`), as the reference's models dump them. The gold
//! outputs are those `scripts/bench/tau_reference.py` records for the tasks.

use super::*;
use forge_guest::Actor;
use forge_guest::MemoryStore;
use forge_tau_guest::dumps;
use serde_json::Value;

/// What the tests do with a store.
trait Fixture {
    fn initial() -> Self;
    fn with_user() -> Self;
    fn invoke(&mut self, actor: Actor, name: &str, args: &str) -> String;
    fn call(&mut self, actor: Actor, name: &str, args: &str) -> String;
    fn record(&self, collection: &str, key: &str) -> Value;
}

impl Fixture for MemoryStore {
    /// The databases as the host loads them: one record per top-level field.
    fn initial() -> Self {
        let mut store = Self::default();
        for (collection, text) in [
            ("db", include_str!("../testdata/db.json")),
            ("user_db", include_str!("../testdata/user_db.json")),
        ] {
            let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(text) else {
                panic!("testdata/{collection}.json is an object");
            };
            for (key, record) in fields {
                store.put(collection, &key, &record.to_string()).unwrap();
            }
        }
        store
    }

    /// The tasks' first set-up step, then `run_env_function_call`'s sync.
    fn with_user() -> Self {
        let mut store = Self::initial();
        store.invoke(
            Actor::User,
            "set_user_info",
            r#"{"name": "John Smith", "phone_number": "555-123-2002"}"#,
        );
        store
    }

    /// A set-up step or assertion: its JSON answer; a sync follows, as in
    /// `run_env_function_call`.
    fn invoke(&mut self, actor: Actor, name: &str, args: &str) -> String {
        let answer = invoke(self, actor, name, args).unwrap();
        sync(self).unwrap();
        answer
    }

    /// A tool call as the agent or user sees it.
    fn call(&mut self, actor: Actor, name: &str, args: &str) -> String {
        call(self, actor, name, args).unwrap_or_else(|err| format!("Error: {err}"))
    }

    fn record(&self, collection: &str, key: &str) -> Value {
        serde_json::from_str(&self.get(collection, key).unwrap()).unwrap()
    }
}

/// `[mobile_data_issue]data_usage_exceeded`: the user has used up the plan's
/// data; the agent refuels 2 GB onto the draft bill, the data works again.
#[test]
fn refuelling_data_charges_the_draft_bill_and_lifts_the_limit() {
    let mut store = MemoryStore::with_user();
    store.invoke(
        Actor::Agent,
        "set_data_usage",
        r#"{"customer_id": "C1001", "line_id": "L1002", "data_used_gb": 15.1}"#,
    );
    assert_eq!(
        store.invoke(
            Actor::User,
            "assert_mobile_data_status",
            r#"{"expected_status": true}"#
        ),
        "false"
    );
    assert_eq!(
        store.call(
            Actor::Agent,
            "refuel_data",
            r#"{"customer_id": "C1001", "line_id": "L1002", "gb_amount": 2.0}"#
        ),
        r#"{"message": "Successfully added 2.0 GB of data for line L1002 for $4.00", "new_data_refueling_gb": "2.0", "charge": "4.0"}"#
    );
    let draft = &store.record("db", "bills")[2];
    assert_eq!(
        dumps(draft),
        r#"{"bill_id": "B1003", "customer_id": "C1001", "period_start": "2025-03-01", "period_end": "2025-03-31", "issue_date": "2025-03-01", "total_due": 4.0, "due_date": "2025-03-15", "line_items": [{"description": "Data refueling: 2.0 GB at $2.0/GB", "amount": 4.0, "date": "2025-02-25", "item_type": "Charge"}], "status": "Draft"}"#
    );
    sync(&mut store).unwrap();
    assert_eq!(
        store.invoke(
            Actor::User,
            "assert_mobile_data_status",
            r#"{"expected_status": true}"#
        ),
        "true"
    );
    assert_eq!(
        store.invoke(
            Actor::Agent,
            "assert_data_refueling_amount",
            r#"{"customer_id": "C1001", "line_id": "L1002", "expected_amount": 2.0}"#
        ),
        "true"
    );
}

/// `[mobile_data_issue]data_mode_off`: the user's tools answer with the
/// status bar.
#[test]
fn user_tools_show_the_status_bar() {
    let mut store = MemoryStore::with_user();
    assert_eq!(
        store.call(Actor::User, "check_status_bar", "{}"),
        "Status Bar: \u{1f4f6}\u{b3} Good | 5G | \u{1f4f1} Data Enabled | \u{1f50b} 80%"
    );
    store.invoke(Actor::User, "turn_data_off", "{}");
    assert_eq!(
        store.call(Actor::User, "toggle_data", "{}"),
        "Mobile Data is now ON.\nStatus Bar: \u{1f4f6}\u{2074} Excellent | 5G | \u{1f4f1} Data Enabled | \u{1f50b} 80%"
    );
    store.invoke(Actor::User, "break_vpn", "{}");
    assert_eq!(
        store.call(Actor::User, "check_vpn_status", "{}"),
        "VPN is ON and connected. Details: {'server_address': '192.168.1.1', 'protocol': 'OpenVPN', 'server_performance': <PerformanceLevel.POOR: 'poor'>}"
    );
}

/// `[service_issue]overdue_bill_suspension`, played out: the line is suspended for an
/// overdue bill; the agent sends a payment request, `sync` passes it to the
/// user, the user pays, `sync` settles the bill, the agent resumes the line.
#[test]
fn sync_carries_payment_requests_and_payments_between_the_databases() {
    let mut store = MemoryStore::with_user();
    assert_eq!(
        store.invoke(
            Actor::Agent,
            "suspend_line_for_overdue_bill",
            r#"{"customer_id": "C1001", "line_id": "L1002", "new_bill_id": "B1234321", "contract_ended": false}"#
        ),
        r#""Line L1002 suspended for unpaid bill B1234321. Contract ended: False""#
    );
    assert_eq!(
        store.record("user_db", "surroundings")["line_active"],
        false
    );
    assert_eq!(
        store.call(
            Actor::Agent,
            "send_payment_request",
            r#"{"customer_id": "C1001", "bill_id": "B1234321"}"#
        ),
        "Payment request sent to the customer for bill B1234321"
    );
    assert_eq!(
        store.call(Actor::User, "make_payment", "{}"),
        "You do not have a payment request."
    );
    sync(&mut store).unwrap();
    assert_eq!(
        store.call(Actor::User, "check_payment_request", "{}"),
        "You have a payment request for bill B1234321 of 65.0 USD."
    );
    assert_eq!(
        store.call(Actor::User, "make_payment", "{}"),
        "Payment of 65.0 USD has been made for bill B1234321."
    );
    sync(&mut store).unwrap();
    assert_eq!(
        dumps(&store.record("db", "bills")[3]),
        r#"{"bill_id": "B1234321", "customer_id": "C1001", "period_start": "2025-01-01", "period_end": "2025-01-31", "issue_date": "2025-01-01", "total_due": 65.0, "due_date": "2025-01-15", "line_items": [{"description": "Charge for line L1002", "amount": 65.0, "date": "2025-02-25", "item_type": "Charge"}], "status": "Paid"}"#
    );
    assert_eq!(
        store.record("user_db", "surroundings")["payment_request"],
        Value::Null
    );
    assert_eq!(
        store.invoke(
            Actor::Agent,
            "assert_no_overdue_bill",
            r#"{"overdue_bill_id": "B1234321"}"#
        ),
        "true"
    );
    assert_eq!(
        store.call(
            Actor::Agent,
            "resume_line",
            r#"{"customer_id": "C1001", "line_id": "L1002"}"#
        ),
        r#"{"message": "Line resumed successfully", "line": {"line_id": "L1002", "phone_number": "555-123-2002", "status": "Active", "plan_id": "P1002", "device_id": "D1002", "data_used_gb": 8.7, "data_refueling_gb": 0.0, "roaming_enabled": true, "contract_end_date": "2026-12-31", "last_plan_change_date": "2024-12-15", "last_sim_replacement_date": "2025-01-20", "suspension_start_date": null}}"#
    );
}

/// Before `set_user_info` the user has no number, and `sync` does nothing.
#[test]
fn sync_waits_for_the_users_number() {
    let mut store = MemoryStore::initial();
    let before = store.clone();
    sync(&mut store).unwrap();
    assert_eq!(store, before);
}

#[test]
fn agent_tools_answer_as_to_json_str_renders() {
    let mut store = MemoryStore::with_user();
    assert_eq!(
        store.call(
            Actor::Agent,
            "get_data_usage",
            r#"{"customer_id": "C1001", "line_id": "L1002"}"#
        ),
        r#"{"line_id": "L1002", "data_used_gb": "8.7", "data_limit_gb": "15.0", "data_refueling_gb": "0.0", "cycle_end_date": "2025-02-28"}"#
    );
    let bills = store.call(
        Actor::Agent,
        "get_bills_for_customer",
        r#"{"customer_id": "C1001", "limit": 2}"#,
    );
    assert!(bills.starts_with(r#"[{"bill_id": "B1003", "#), "{bills}");
    assert!(bills.contains(r#"}, {"bill_id": "B1002", "#), "{bills}");
    assert!(!bills.contains("B1001"), "{bills}");
}

/// What `Environment.get_response` makes of malformed calls.
#[test]
fn malformed_calls_get_pythons_errors() {
    let mut store = MemoryStore::with_user();
    let cases = [
        (
            Actor::Agent,
            "refuel_data",
            r#"{"customer_id": "C1001"}"#,
            "Error: TelecomTools.refuel_data() missing 2 required positional arguments: 'line_id' and 'gb_amount'",
        ),
        (
            Actor::User,
            "toggle_data",
            r#"{"on": true}"#,
            "Error: TelecomUserTools.toggle_data() got an unexpected keyword argument 'on'",
        ),
        (
            Actor::User,
            "refuel_data",
            "{}",
            "Error: Tool 'refuel_data' not found.",
        ),
        (
            Actor::Agent,
            "refuel_data",
            r#"{"customer_id": "C1001", "line_id": "L1002", "gb_amount": "2"}"#,
            "Error: '<=' not supported between instances of 'str' and 'int'",
        ),
        (
            Actor::User,
            "set_apn_settings",
            r#"{"apn_settings": {"apn_name": "5g", "mms_port": "x"}}"#,
            "Error: 2 validation errors for APNSettings\napn_name\n  Input should be 'internet' or 'broken' [type=enum, input_value='5g', input_type=str]\n    For further information visit https://errors.pydantic.dev/2.12/v/enum\nmms_port\n  Input should be a valid integer, unable to parse string as an integer [type=int_parsing, input_value='x', input_type=str]\n    For further information visit https://errors.pydantic.dev/2.12/v/int_parsing",
        ),
    ];
    for (actor, name, args, expected) in cases {
        assert_eq!(store.call(actor, name, args), expected, "{name} {args}");
    }
    assert_eq!(
        invoke(&mut store, Actor::User, "fix_everything", "{}").unwrap_err(),
        "'TelecomUserTools' object has no attribute 'fix_everything'"
    );
    // Attributes `getattr` finds, from `ToolKitBase` or the class itself.
    for (actor, name, class) in [
        (Actor::Agent, "update_db", "TelecomTools"),
        (Actor::Agent, "_get_line_by_id", "TelecomTools"),
        (Actor::User, "device", "TelecomUserTools"),
    ] {
        assert_eq!(
            invoke(&mut store, actor, name, "{}").unwrap_err(),
            format!("{class}.{name} is not a function this component runs")
        );
    }
}
