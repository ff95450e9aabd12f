//! The reference's deterministic ids (`banking_knowledge/utils.py`): a
//! prefix and the first bytes of the sha256 of a seed built from the
//! record's defining fields. Arguments that Python formats with `str()` are
//! taken here already formatted (see [`forge_tau_guest::py_str`]); amounts
//! formatted `:.2f` are taken as numbers.

use crate::py::fixed;
use forge_pycompat::Dumps;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// `_deterministic_id(seed, length)`: `length` hex digits of sha256(seed).
pub fn deterministic_id(seed: &str, length: usize) -> String {
    let digest = Sha256::digest(seed.as_bytes());
    digest[..length / 2]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// `json.dumps(arguments, sort_keys=True)`.
fn sorted_json(arguments: &Value) -> String {
    Dumps {
        sort_keys: true,
        ..Dumps::PYTHON_DEFAULT
    }
    .to_string(arguments)
}

/// `generate_transaction_id`.
pub fn transaction(
    user_id: &str,
    credit_card_type: &str,
    merchant_name: &str,
    amount: f64,
    category: &str,
    date: Option<&str>,
) -> String {
    let amount = fixed(amount, 2);
    let mut parts = vec![
        "transaction",
        user_id,
        credit_card_type,
        merchant_name,
        &amount,
        category,
    ];
    parts.extend(date.filter(|date| !date.is_empty()));
    format!("txn_{}", deterministic_id(&parts.join(":"), 12))
}

/// `generate_referral_id`.
pub fn referral(referrer_id: &str, referred_account_type: &str, date: Option<&str>) -> String {
    let mut parts = vec!["referral", referrer_id, referred_account_type];
    parts.extend(date.filter(|date| !date.is_empty()));
    deterministic_id(&parts.join(":"), 16)
}

/// `generate_application_id`; `annual_income` and `rho_bank_subscription` as
/// `str()` shows them.
pub fn application(
    card_type: &str,
    customer_name: &str,
    annual_income: &str,
    rho_bank_subscription: &str,
) -> String {
    deterministic_id(
        &format!("credit_card:{card_type}:{customer_name}:{annual_income}:{rho_bank_subscription}"),
        16,
    )
}

/// `generate_verification_id`: `{user_id}_{time without spaces, colons, dashes}`.
pub fn verification(user_id: &str, time_verified: &str) -> String {
    let suffix = time_verified.replace(' ', "_").replace([':', '-'], "");
    format!("{user_id}_{suffix}")
}

/// `generate_user_discoverable_tool_id`.
pub fn user_discoverable_tool(tool_name: &str) -> String {
    deterministic_id(&format!("user_discoverable_tool:{tool_name}"), 16)
}

/// `generate_user_discoverable_tool_call_id`.
pub fn user_discoverable_tool_call(tool_name: &str, arguments: &Value) -> String {
    deterministic_id(
        &format!(
            "user_discoverable_tool_call:{tool_name}:{}",
            sorted_json(arguments)
        ),
        16,
    )
}

/// `generate_dispute_id`.
pub fn dispute(user_id: &str, transaction_id: &str) -> String {
    format!(
        "dsp_{}",
        deterministic_id(&format!("dispute:{user_id}:{transaction_id}"), 12)
    )
}

/// `generate_referral_link_id`.
pub fn referral_link(user_id: &str, card_name: &str) -> String {
    deterministic_id(&format!("referral_link:{user_id}:{card_name}"), 16)
}

/// `generate_agent_discoverable_tool_id`.
pub fn agent_discoverable_tool(tool_name: &str) -> String {
    deterministic_id(&format!("agent_discoverable_tool:{tool_name}"), 16)
}

/// `generate_credit_card_order_id`.
pub fn credit_card_order(credit_card_account_id: &str, user_id: &str, reason: &str) -> String {
    format!(
        "ccord_{}",
        deterministic_id(
            &format!("credit_card_order:{credit_card_account_id}:{user_id}:{reason}"),
            12
        )
    )
}

/// `generate_closure_reason_id`.
pub fn closure_reason(credit_card_account_id: &str, user_id: &str) -> String {
    format!(
        "clsr_{}",
        deterministic_id(
            &format!("closure_reason:{credit_card_account_id}:{user_id}"),
            12
        )
    )
}

/// `generate_account_flag_id`.
pub fn account_flag(
    credit_card_account_id: &str,
    flag_type: &str,
    expiration_date: &str,
) -> String {
    format!(
        "ccflag_{}",
        deterministic_id(
            &format!("account_flag:{credit_card_account_id}:{flag_type}:{expiration_date}"),
            12
        )
    )
}

/// `generate_credit_limit_increase_request_id`.
pub fn credit_limit_increase_request(
    credit_card_account_id: &str,
    user_id: &str,
    requested_increase_amount: f64,
) -> String {
    format!(
        "cli_{}",
        deterministic_id(
            &format!(
                "cli_request:{credit_card_account_id}:{user_id}:{}",
                fixed(requested_increase_amount, 2)
            ),
            12
        )
    )
}

/// `generate_debit_card_order_id`.
pub fn debit_card_order(account_id: &str, user_id: &str, delivery_option: &str) -> String {
    format!(
        "dcord_{}",
        deterministic_id(
            &format!("debit_card_order:{account_id}:{user_id}:{delivery_option}"),
            12
        )
    )
}

/// `generate_debit_card_id`.
pub fn debit_card(account_id: &str, user_id: &str, issue_date: &str) -> String {
    format!(
        "dbc_{}",
        deterministic_id(
            &format!("debit_card:{account_id}:{user_id}:{issue_date}"),
            12
        )
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Values computed with the reference's `utils.py`.
    #[test]
    fn ids_match_the_reference() {
        assert_eq!(deterministic_id("abc", 16), "ba7816bf8f01cfea");
        assert_eq!(
            verification("u1", "2025-11-14 03:40:00 EST"),
            "u1_20251114_034000_EST"
        );
        assert_eq!(
            user_discoverable_tool_call("t", &json!({"b": 1.0, "a": "x"})),
            deterministic_id(r#"user_discoverable_tool_call:t:{"a": "x", "b": 1.0}"#, 16)
        );
    }
}
