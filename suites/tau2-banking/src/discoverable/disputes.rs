//! Discoverable tools: disputes. The agent's tools for filing credit and
//! debit card transaction disputes and looking them up, correcting a
//! transaction's rewards, blocking a debit card's recurring payments and
//! retrieving ATM deposit images, with the placeholder and transfer-protocol
//! tools that only answer their fixed text.

use super::{Body, DEBIT_CARDS, find, invalid_choice, one_of, query_by, shows_records};
use crate::dates::TODAY;
use crate::db::Tables;
use crate::ids;
use crate::py::{Raised, compared_with_zero, dumps_indent, fixed, number, title_words, upper};
use forge_tau_guest::{Data, Kwargs, dict_key, py_str, truthy, type_name};
use serde_json::{Value, json};

pub const TOOLS: &[Body] = &[
    Body {
        name: "example_agent_tool_0000",
        run: example_agent_tool,
    },
    Body {
        name: "update_transaction_rewards_3847",
        run: update_transaction_rewards,
    },
    Body {
        name: "initial_transfer_to_human_agent_0218",
        run: initial_transfer_lines_busy,
    },
    Body {
        name: "initial_transfer_to_human_agent_1822",
        run: initial_transfer_too_early,
    },
    Body {
        name: "emergency_credit_bureau_incident_transfer_1114",
        run: emergency_credit_bureau_transfer,
    },
    Body {
        name: "file_credit_card_transaction_dispute_4829",
        run: file_credit_card_dispute,
    },
    Body {
        name: "file_debit_card_transaction_dispute_6281",
        run: file_debit_card_dispute,
    },
    Body {
        name: "set_debit_card_recurring_block_7382",
        run: set_recurring_block,
    },
    Body {
        name: "get_debit_dispute_status_7483",
        run: debit_dispute_status,
    },
    Body {
        name: "get_atm_deposit_images_8473",
        run: atm_deposit_images,
    },
];

const CREDIT_CARD_TRANSACTIONS: &str = "credit_card_transaction_history";
const CREDIT_CARD_DISPUTES: &str = "transaction_disputes";
const DEBIT_CARD_DISPUTES: &str = "debit_card_disputes";
const BANK_TRANSACTIONS: &str = "bank_account_transaction_history";

const MISSING_PARAMETERS: &str = "Error: Missing required parameters.";
const ALREADY_FILED: &str = "Error: Dispute may have already been filed for this transaction.";

/// `f"{value:.2f}"`.
fn two_decimals(value: &Value) -> Result<String, Raised> {
    match (number(value), value) {
        (Some(x), _) => Ok(fixed(x, 2)),
        (None, Value::String(_)) => Err(Raised::Other(
            "Unknown format code 'f' for object of type 'str'".to_owned(),
        )),
        (None, other) => Err(Raised::Type(format!(
            "unsupported format string passed to {}.__format__",
            type_name(other)
        ))),
    }
}

/// A tool that answers a fixed message and names itself, as the
/// transfer-protocol tools do.
fn executed_without_arguments(message: &str, tool: &str) -> String {
    format!("{message}\n\nExecuted: {tool}\nArguments: (no arguments)")
}

/// `example_agent_tool_0000`: the placeholder tool.
fn example_agent_tool(_: &mut Data<'_>, _: &Kwargs) -> Result<String, Raised> {
    Ok("Example tool executed successfully.".to_owned())
}

/// `update_transaction_rewards_3847`: corrects `rewards_earned` on a credit
/// card transaction.
fn update_transaction_rewards(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    let transaction_id = kwargs.get("transaction_id")?;
    let new_rewards = kwargs.get("new_rewards_earned")?;
    if !truthy(transaction_id) || !truthy(new_rewards) {
        return Ok(MISSING_PARAMETERS.to_owned());
    }
    let updated = match dict_key(transaction_id) {
        Ok(Some(id)) => data.update(
            CREDIT_CARD_TRANSACTIONS,
            id,
            vec![("rewards_earned", new_rewards.clone())],
        )?,
        Ok(None) => None,
        Err(type_error) => return Err(Raised::Type(type_error)),
    };
    let id_text = py_str(transaction_id);
    if updated.is_none() {
        return Ok(format!("Error: Transaction '{id_text}' not found."));
    }
    let arguments = json!({
        "transaction_id": transaction_id,
        "new_rewards_earned": new_rewards,
    });
    Ok(format!(
        "Transaction rewards updated successfully.\n\n\
         Executed: update_transaction_rewards_3847\n\
         Arguments: {}\n\
         Transaction updated:\n  \
         - Transaction ID: {id_text}\n  \
         - New Rewards: {}",
        dumps_indent(&arguments, 2),
        py_str(new_rewards)
    ))
}

/// `initial_transfer_to_human_agent_0218`: the transfer protocol's first
/// step, telling the agent the lines are busy.
fn initial_transfer_lines_busy(_: &mut Data<'_>, _: &Kwargs) -> Result<String, Raised> {
    Ok(executed_without_arguments(
        "Initial Transfer Initiated, Inform the user that the lines are busy.",
        "initial_transfer_to_human_agent_0218",
    ))
}

/// `initial_transfer_to_human_agent_1822`: the transfer protocol's answer
/// that the conversation is not ready for a human yet.
fn initial_transfer_too_early(_: &mut Data<'_>, _: &Kwargs) -> Result<String, Raised> {
    Ok(executed_without_arguments(
        "Do not explicitly tell the user, but the conversation has not reached the necessary \
         stages to transfer to a real human yet. Try to help them by asking them about basic \
         scenarios that could fulfill their issue.",
        "initial_transfer_to_human_agent_1822",
    ))
}

/// `emergency_credit_bureau_incident_transfer_1114`: logs (in words only)
/// the 11/14 credit bureau incident's escalation.
fn emergency_credit_bureau_transfer(_: &mut Data<'_>, _: &Kwargs) -> Result<String, Raised> {
    Ok(executed_without_arguments(
        "Emergency escalation logged. Case has been flagged for priority handling by the credit \
         bureau correction team. Proceed immediately with transfer_to_human_agents to complete \
         the transfer.",
        "emergency_credit_bureau_incident_transfer_1114",
    ))
}

const CREDIT_CARD_ACTIONS: &[&str] = &["keep_active", "cancel_and_reissue"];
const CREDIT_DISPUTE_REASONS: &[&str] = &[
    "unauthorized_fraudulent_charge",
    "duplicate_charge",
    "incorrect_amount",
    "goods_services_not_received",
    "goods_services_not_as_described",
    "canceled_subscription_still_charging",
    "refund_never_processed",
];
const RESOLUTIONS: &[&str] = &["full_refund", "partial_refund"];

/// `file_credit_card_transaction_dispute_4829`: files a credit card
/// transaction dispute in `transaction_disputes` (once per user and
/// transaction).
fn file_credit_card_dispute(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    let transaction_id = kwargs.get("transaction_id")?;
    let user_id = kwargs.get("user_id")?;
    if !truthy(transaction_id) || !truthy(user_id) {
        return Ok(MISSING_PARAMETERS.to_owned());
    }
    let Some(card_action) = one_of(kwargs.get("card_action")?, CREDIT_CARD_ACTIONS) else {
        return Ok(invalid_choice("card_action", CREDIT_CARD_ACTIONS));
    };
    let Some(reason) = one_of(kwargs.get("dispute_reason")?, CREDIT_DISPUTE_REASONS) else {
        return Ok(invalid_choice("dispute_reason", CREDIT_DISPUTE_REASONS));
    };
    let Some(resolution) = one_of(kwargs.get("resolution_requested")?, RESOLUTIONS) else {
        return Ok(invalid_choice("resolution_requested", RESOLUTIONS));
    };
    let partial_amount = kwargs
        .optional("partial_refund_amount")
        .unwrap_or(&Value::Null);
    if resolution == "partial_refund" && partial_amount.is_null() {
        return Ok(
            "Error: partial_refund_amount is required when resolution_requested is \
                   'partial_refund'."
                .to_owned(),
        );
    }
    let dispute_id = ids::dispute(&py_str(user_id), &py_str(transaction_id));
    let eligible = kwargs.get("eligible_for_provisional_credit")?;
    let record = json!({
        "dispute_id": dispute_id,
        "transaction_id": transaction_id,
        "user_id": user_id,
        "card_action": card_action,
        "card_last_4_digits": kwargs.get("card_last_4_digits")?,
        "full_name": kwargs.get("full_name")?,
        "phone": kwargs.get("phone")?,
        "email": kwargs.get("email")?,
        "address": kwargs.get("address")?,
        "contacted_merchant": kwargs.get("contacted_merchant")?,
        "purchase_date": kwargs.get("purchase_date")?,
        "issue_noticed_date": kwargs.get("issue_noticed_date")?,
        "dispute_reason": reason,
        "resolution_requested": resolution,
        "partial_refund_amount": partial_amount,
        "eligible_for_provisional_credit": eligible,
        "provisional_credit_given": eligible,
        "submitted_at": TODAY,
        "status": "SUBMITTED",
    });
    if !data.add(CREDIT_CARD_DISPUTES, &dispute_id, record)? {
        return Ok(ALREADY_FILED.to_owned());
    }
    let mut lines = vec![
        "Credit card transaction dispute filed successfully. A case has been opened and will be \
         reviewed within 10 business days."
            .to_owned(),
        String::new(),
        "Executed: file_credit_card_transaction_dispute_4829".to_owned(),
        format!("Dispute ID: {dispute_id}"),
        format!("Transaction: {}", py_str(transaction_id)),
        format!("Reason: {}", title_words(reason)),
        format!("Resolution Requested: {}", title_words(resolution)),
    ];
    if truthy(partial_amount) {
        // The dispute is on file even when the amount cannot be shown.
        let amount = two_decimals(partial_amount)?;
        lines.push(format!("Partial Refund Amount: ${amount}"));
    }
    lines.push(if truthy(eligible) {
        "Provisional Credit: ELIGIBLE - Credit will be applied within 2 business days.".to_owned()
    } else {
        "Provisional Credit: Not eligible at this time.".to_owned()
    });
    Ok(lines.join("\n"))
}

/// The arguments a debit card dispute must have truthy.
const DEBIT_DISPUTE_REQUIRED: &[&str] = &[
    "transaction_id",
    "account_id",
    "card_id",
    "user_id",
    "dispute_category",
    "transaction_date",
    "discovery_date",
    "disputed_amount",
    "transaction_type",
    "pin_compromised",
    "card_action",
];
/// The yes/no answers a debit card dispute must have (not `None`).
const DEBIT_DISPUTE_FLAGS: &[&str] = &[
    "card_in_possession",
    "contacted_merchant",
    "police_report_filed",
    "written_statement_provided",
];
const DEBIT_DISPUTE_CATEGORIES: &[&str] = &[
    "unauthorized_transaction",
    "atm_cash_discrepancy",
    "atm_deposit_not_credited",
    "duplicate_charge",
    "incorrect_amount",
    "goods_services_not_received",
    "recurring_charge_after_cancellation",
    "card_present_fraud",
    "card_not_present_fraud",
];
const FRAUD_CATEGORIES: &[&str] = &[
    "unauthorized_transaction",
    "card_present_fraud",
    "card_not_present_fraud",
];
const DEBIT_TRANSACTION_TYPES: &[&str] = &[
    "pin_purchase",
    "signature_purchase",
    "online_purchase",
    "atm_withdrawal",
    "atm_deposit",
    "recurring_payment",
    "person_to_person",
];
const PIN_STATUSES: &[&str] = &["yes_shared", "yes_observed", "no", "unknown"];
const DEBIT_CARD_ACTIONS: &[&str] = &[
    "keep_active",
    "freeze_pending_investigation",
    "close_and_reissue",
];

/// `file_debit_card_transaction_dispute_6281`: files a Regulation E debit
/// card dispute in `debit_card_disputes` (once per user and transaction),
/// recording the provisional credit decision.
fn file_debit_card_dispute(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    for name in DEBIT_DISPUTE_REQUIRED {
        if !truthy(kwargs.get(name)?) {
            return Ok(MISSING_PARAMETERS.to_owned());
        }
    }
    if kwargs.get("customer_max_liability_amount")?.is_null() {
        return Ok("Error: customer_max_liability_amount is required.".to_owned());
    }
    for name in DEBIT_DISPUTE_FLAGS {
        if kwargs.get(name)?.is_null() {
            return Ok(
                "Error: card_in_possession, contacted_merchant, police_report_filed, and \
                       written_statement_provided are required boolean fields."
                    .to_owned(),
            );
        }
    }
    let Some(category) = one_of(kwargs.get("dispute_category")?, DEBIT_DISPUTE_CATEGORIES) else {
        return Ok(invalid_choice("dispute_category", DEBIT_DISPUTE_CATEGORIES));
    };
    let Some(transaction_type) = one_of(kwargs.get("transaction_type")?, DEBIT_TRANSACTION_TYPES)
    else {
        return Ok(invalid_choice("transaction_type", DEBIT_TRANSACTION_TYPES));
    };
    let Some(pin_compromised) = one_of(kwargs.get("pin_compromised")?, PIN_STATUSES) else {
        return Ok(invalid_choice("pin_compromised", PIN_STATUSES));
    };
    let Some(card_action) = one_of(kwargs.get("card_action")?, DEBIT_CARD_ACTIONS) else {
        return Ok(invalid_choice("card_action", DEBIT_CARD_ACTIONS));
    };
    let disputed = kwargs.get("disputed_amount")?;
    let amount = match compared_with_zero(disputed, "<=") {
        Ok(amount) => amount,
        Err(type_error) => return Err(Raised::Type(type_error)),
    };
    if amount <= 0.0 {
        return Ok("Error: disputed_amount must be a positive number.".to_owned());
    }
    let transaction_id = kwargs.get("transaction_id")?;
    let account_id = kwargs.get("account_id")?;
    let dispute_id = ids::dispute(&py_str(kwargs.get("user_id")?), &py_str(transaction_id));
    let is_fraud = FRAUD_CATEGORIES.contains(&category);
    let pin_shared = pin_compromised == "yes_shared";
    let eligible = kwargs.get("provisional_credit_eligible")?;
    let police_report_filed = kwargs.get("police_report_filed")?;
    let record = json!({
        "dispute_id": dispute_id,
        "transaction_id": transaction_id,
        "account_id": account_id,
        "card_id": kwargs.get("card_id")?,
        "user_id": kwargs.get("user_id")?,
        "dispute_category": category,
        "transaction_date": kwargs.get("transaction_date")?,
        "discovery_date": kwargs.get("discovery_date")?,
        "disputed_amount": disputed,
        "transaction_type": transaction_type,
        "card_in_possession": kwargs.get("card_in_possession")?,
        "pin_compromised": pin_compromised,
        "contacted_merchant": kwargs.get("contacted_merchant")?,
        "police_report_filed": police_report_filed,
        "written_statement_provided": kwargs.get("written_statement_provided")?,
        "provisional_credit_eligible": eligible,
        "provisional_credit_issued": eligible,
        "provisional_credit_amount": if truthy(eligible) { disputed.clone() } else { Value::Null },
        "customer_max_liability_amount": kwargs.get("customer_max_liability_amount")?,
        "card_action": card_action,
        "is_fraud_category": is_fraud,
        "pin_shared_voluntarily": pin_shared,
        "submitted_at": TODAY,
        "status": "OPEN",
    });
    if !data.add(DEBIT_CARD_DISPUTES, &dispute_id, record)? {
        return Ok(ALREADY_FILED.to_owned());
    }
    let amount_text = fixed(amount, 2);
    let mut lines = vec![
        format!("Dispute ID: {dispute_id}"),
        format!("Transaction: {}", py_str(transaction_id)),
        format!("Account: {}", py_str(account_id)),
        format!("Category: {}", title_words(category)),
        format!("Disputed Amount: ${amount_text}"),
        format!("Card Action: {}", title_words(card_action)),
    ];
    lines.push(if truthy(eligible) {
        format!(
            "Provisional Credit: ISSUED - ${amount_text} credited within 10 business days per \
             Regulation E."
        )
    } else {
        "Provisional Credit: Not eligible - see Debit Card Provisional Credit Guidelines for \
         details."
            .to_owned()
    });
    if pin_shared {
        lines.push(
            "WARNING: Customer indicated PIN was shared voluntarily. This may affect liability \
             determination."
                .to_owned(),
        );
    }
    if is_fraud && !truthy(police_report_filed) && amount > 500.0 {
        lines.push(
            "RECOMMENDATION: For fraud disputes over $500, filing a police report is recommended."
                .to_owned(),
        );
    }
    Ok(lines.join("\n"))
}

/// `set_debit_card_recurring_block_7382`: sets `recurring_blocked` on an
/// active debit card.
fn set_recurring_block(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    let card_id = kwargs.get("card_id")?;
    let block = kwargs.get("block_recurring")?;
    if !truthy(card_id) {
        return Ok("Error: Missing required parameter: card_id".to_owned());
    }
    let cards = data.table(DEBIT_CARDS)?;
    let card = match find(&cards, card_id)? {
        Some((_, card)) if truthy(card) => card,
        _ => {
            return Ok(format!(
                "Error: Debit card '{}' not found.",
                py_str(card_id)
            ));
        }
    };
    let status = card
        .get("status")
        .map_or_else(|| Ok(String::new()), upper)?;
    if status != "ACTIVE" {
        return Ok(format!(
            "Error: Cannot update recurring block settings for a card with status '{status}'. \
             Card must be ACTIVE."
        ));
    }
    let card_id = py_str(card_id);
    data.update(
        DEBIT_CARDS,
        &card_id,
        vec![("recurring_blocked", block.clone())],
    )?;
    Ok(if truthy(block) {
        format!(
            "Recurring payments BLOCKED for debit card {card_id}.\n\
             All recurring/subscription charges will be declined.\n\
             One-time purchases are not affected.\n\
             This change takes effect within 24 hours."
        )
    } else {
        format!(
            "Recurring payments UNBLOCKED for debit card {card_id}.\n\
             Recurring/subscription charges will now be allowed.\n\
             This change takes effect within 24 hours."
        )
    })
}

/// `get_debit_dispute_status_7483`: lists a user's debit card disputes.
fn debit_dispute_status(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    let user_id = kwargs.get("user_id")?;
    if !truthy(user_id) {
        return Ok("Error: Missing required parameter: user_id".to_owned());
    }
    let user_id = py_str(user_id);
    let disputes = query_by(data, DEBIT_CARD_DISPUTES, "user_id", &user_id);
    let listing = if shows_records(&disputes) {
        disputes
    } else {
        "\nNo debit card disputes found for this user.".to_owned()
    };
    Ok([
        "Debit card dispute history retrieved successfully.",
        "",
        "Executed: get_debit_dispute_status_7483",
        &format!("Debit card dispute history for user {user_id}:"),
        &listing,
    ]
    .join("\n"))
}

/// The scanned images the reference holds for an ATM deposit.
struct DepositImages {
    transaction_id: &'static str,
    atm_id: &'static str,
    envelope_contents: &'static str,
    verification_notes: &'static str,
}

const DISCREPANCY_CONFIRMED: &str = "Images clearly show deposit contents totaling $1,135.00. \
     ATM machine recorded only $385.00. Discrepancy of $750.00 confirmed via image review.";

/// The deposits whose images the reference has, by transaction.
const DEPOSIT_IMAGES: &[DepositImages] = &[
    DepositImages {
        transaction_id: "btxn_834027370c20",
        atm_id: "ATM #3921",
        envelope_contents: ENVELOPE_834027370C20,
        verification_notes: DISCREPANCY_CONFIRMED,
    },
    DepositImages {
        transaction_id: "btxn_test_deposit_001",
        atm_id: "ATM #3921",
        envelope_contents: ENVELOPE_TEST_DEPOSIT_001,
        verification_notes: DISCREPANCY_CONFIRMED,
    },
    DepositImages {
        transaction_id: "btxn_test_atm_dep_partial",
        atm_id: "ATM #5847",
        envelope_contents: ENVELOPE_TEST_ATM_DEP_PARTIAL,
        verification_notes: "Images confirm deposit matches recorded amount. No discrepancy found.",
    },
];

const IMAGES_HEADER: &str = "ATM Deposit Image Retrieval Results\n\
                             =====================================";

/// `get_atm_deposit_images_8473`: the envelope and check images of a
/// Rho-Bank ATM deposit, or why there are none.
fn atm_deposit_images(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, Raised> {
    let transaction_id = kwargs.get("transaction_id")?;
    if !truthy(transaction_id) {
        return Ok("Error: Missing required parameter: transaction_id".to_owned());
    }
    let transaction_id_text = py_str(transaction_id);
    let transactions = data.table(BANK_TRANSACTIONS)?;
    let Some((_, transaction)) = find(&transactions, transaction_id)? else {
        return Ok(format!(
            "Error: Transaction '{transaction_id_text}' not found."
        ));
    };
    let transaction_id = transaction_id_text;
    if transaction.get("type").and_then(Value::as_str) != Some("atm_deposit") {
        return Ok(format!(
            "Error: Transaction '{transaction_id}' is not an ATM deposit. This tool only works \
             for ATM deposit transactions."
        ));
    }
    let atm = transaction
        .get("description")
        .map_or_else(|| Ok(String::new()), upper)?;
    if !atm.contains("RHO-BANK") && !atm.contains("RHOBANK") {
        return Ok(format!(
            "Error: Transaction '{transaction_id}' is from a third-party ATM. Deposit images are \
             only available for Rho-Bank ATM deposits. For third-party ATM disputes, a chargeback \
             request must be submitted to the ATM network."
        ));
    }
    let date = transaction
        .get("date")
        .map_or_else(|| "Unknown".to_owned(), py_str);
    let images = DEPOSIT_IMAGES
        .iter()
        .find(|images| images.transaction_id == transaction_id);
    if let Some(images) = images {
        return Ok(format!(
            "{IMAGES_HEADER}\nTransaction ID: {transaction_id}\nATM: {}\nDeposit Date: {date}\n\n\
             {}\n\n--- VERIFICATION NOTES ---\n{}\n",
            images.atm_id, images.envelope_contents, images.verification_notes
        ));
    }
    let amount = match transaction.get("amount").map_or(Some(0.0), number) {
        Some(amount) => fixed(amount.abs(), 2),
        None => {
            let amount = transaction.get("amount").unwrap_or(&Value::Null);
            return Err(Raised::Type(format!(
                "bad operand type for abs(): '{}'",
                type_name(amount)
            )));
        }
    };
    let description = transaction
        .get("description")
        .map_or_else(String::new, py_str);
    Ok(format!(
        "{IMAGES_HEADER}\nTransaction ID: {transaction_id}\nATM: {description}\n\
         Deposit Date: {date}\nAmount Recorded: ${amount}\n\n\
         --- IMAGE STATUS ---\n\
         Status: IMAGES NOT AVAILABLE\n\
         Reason: Deposit images for this transaction have either expired (older than 90 days) or \
         were not captured by the ATM system.\n\n\
         For deposits without available images, the dispute will proceed based on customer \
         statement and ATM journal records only. Investigation timeline may be extended.\n"
    ))
}

/// The envelope scan of `btxn_834027370c20`.
const ENVELOPE_834027370C20: &str = r#"
=== ATM DEPOSIT ENVELOPE SCAN ===
Envelope ID: ENV-2025-3921-00923
Deposit Time: 3:47 PM CST
ATM Location: Rho-Bank ATM #3921, Cedar Lane Branch, Austin, TX

--- ENVELOPE CONTENTS ---
Item 1: Personal Check
  - Check Number: 7284
  - Drawn On: First Texas Bank
  - Payee: Derek Yamamoto
  - Amount: $875.00
  - Memo: "October rent refund"
  - Signature: Present and legible
  - Date on Check: 11/03/2025

Item 2: Cash
  - Denomination breakdown:
    * 2 x $100 bills = $200.00
    * 3 x $20 bills = $60.00
  - Total Cash: $260.00

--- DEPOSIT SUMMARY ---
Check Total: $875.00
Cash Total: $260.00
GRAND TOTAL: $1,135.00

--- MACHINE RECORD ---
Amount Recorded by ATM: $385.00
DISCREPANCY DETECTED: $750.00 difference

--- IMAGE QUALITY ---
Envelope scan: CLEAR
Check front: CLEAR
Check back (endorsement): CLEAR - endorsed "For Deposit Only - Derek Yamamoto"
Cash image: CLEAR - bills visible and countable
"#;

/// The envelope scan of `btxn_test_deposit_001`.
const ENVELOPE_TEST_DEPOSIT_001: &str = r#"
=== ATM DEPOSIT ENVELOPE SCAN ===
Envelope ID: ENV-2025-3921-00847
Deposit Time: 2:34 PM EST
ATM Location: Rho-Bank ATM #3921, 742 Oak Avenue, Portland, OR

--- ENVELOPE CONTENTS ---
Item 1: Personal Check
  - Check Number: 4821
  - Drawn On: First National Bank
  - Payee: Linda Patterson
  - Amount: $875.00
  - Memo: "October rent refund"
  - Signature: Present and legible
  - Date on Check: 11/05/2025

Item 2: Cash
  - Denomination breakdown:
    * 2 x $100 bills = $200.00
    * 3 x $20 bills = $60.00
  - Total Cash: $260.00

--- DEPOSIT SUMMARY ---
Check Total: $875.00
Cash Total: $260.00
GRAND TOTAL: $1,135.00

--- MACHINE RECORD ---
Amount Recorded by ATM: $385.00
DISCREPANCY DETECTED: $750.00 difference

--- IMAGE QUALITY ---
Envelope scan: CLEAR
Check front: CLEAR
Check back (endorsement): CLEAR - endorsed "For Deposit Only - Linda Patterson"
Cash image: CLEAR - bills visible and countable
"#;

/// The envelope scan of `btxn_test_atm_dep_partial`.
const ENVELOPE_TEST_ATM_DEP_PARTIAL: &str = r#"
=== ATM DEPOSIT ENVELOPE SCAN ===
Envelope ID: ENV-2025-5847-00293
Deposit Time: 10:15 AM EST

--- ENVELOPE CONTENTS ---
Item 1: Personal Check
  - Check Number: 7392
  - Amount: $500.00

--- DEPOSIT SUMMARY ---
Check Total: $500.00
Cash Total: $0.00
GRAND TOTAL: $500.00

--- MACHINE RECORD ---
Amount Recorded by ATM: $500.00
No discrepancy detected.
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discoverable::{as_agent_answers, reference_bank};
    use crate::py::floats;
    use forge_guest::MemoryStore;

    /// Calls `tool` as `call_discoverable_agent_tool` does: numbers as floats.
    fn call(store: &mut MemoryStore, tool: &str, arguments: &Value) -> Result<String, String> {
        let body = TOOLS.iter().find(|body| body.name == tool).expect("a tool");
        let text = floats(arguments.clone()).to_string();
        let kwargs = Kwargs::parse(&text, tool.to_owned()).expect("arguments");
        as_agent_answers((body.run)(&mut Data::new(store), &kwargs))
    }

    /// `call`'s answer, which must be no exception.
    fn answer(store: &mut MemoryStore, tool: &str, arguments: &Value) -> String {
        call(store, tool, arguments).expect("an answer")
    }

    /// `base` with the fields of `changes` set.
    fn with(base: &Value, changes: &Value) -> Value {
        let mut changed = base.clone();
        for (field, value) in changes.as_object().expect("changes") {
            changed[field] = value.clone();
        }
        changed
    }

    fn record(store: &mut MemoryStore, table: &str, id: &str) -> Value {
        Data::new(store)
            .record(table, id)
            .unwrap()
            .expect("a record")
    }

    #[test]
    fn fixed_texts() {
        let mut store = reference_bank();
        let none = json!({});
        assert_eq!(
            answer(&mut store, "example_agent_tool_0000", &none),
            "Example tool executed successfully."
        );
        assert_eq!(
            answer(&mut store, "initial_transfer_to_human_agent_0218", &none),
            "Initial Transfer Initiated, Inform the user that the lines are busy.\n\n\
             Executed: initial_transfer_to_human_agent_0218\nArguments: (no arguments)"
        );
        assert_eq!(
            answer(&mut store, "initial_transfer_to_human_agent_1822", &none),
            "Do not explicitly tell the user, but the conversation has not reached the necessary \
             stages to transfer to a real human yet. Try to help them by asking them about basic \
             scenarios that could fulfill their issue.\n\n\
             Executed: initial_transfer_to_human_agent_1822\nArguments: (no arguments)"
        );
        assert_eq!(
            answer(
                &mut store,
                "emergency_credit_bureau_incident_transfer_1114",
                &none
            ),
            "Emergency escalation logged. Case has been flagged for priority handling by the \
             credit bureau correction team. Proceed immediately with transfer_to_human_agents to \
             complete the transfer.\n\n\
             Executed: emergency_credit_bureau_incident_transfer_1114\nArguments: (no arguments)"
        );
    }

    #[test]
    fn updates_transaction_rewards() {
        let mut store = reference_bank();
        let tool = "update_transaction_rewards_3847";
        let args =
            json!({"transaction_id": "txn_a8f1c2d3e403", "new_rewards_earned": "6300 points"});
        assert_eq!(
            answer(&mut store, tool, &args),
            "Transaction rewards updated successfully.\n\n\
             Executed: update_transaction_rewards_3847\n\
             Arguments: {\n  \"transaction_id\": \"txn_a8f1c2d3e403\",\n  \
             \"new_rewards_earned\": \"6300 points\"\n}\n\
             Transaction updated:\n  - Transaction ID: txn_a8f1c2d3e403\n  - New Rewards: 6300 points"
        );
        let transaction = record(&mut store, CREDIT_CARD_TRANSACTIONS, "txn_a8f1c2d3e403");
        assert_eq!(transaction["rewards_earned"], "6300 points");
        assert_eq!(
            transaction.as_object().unwrap().keys().next_back().unwrap(),
            "rewards_earned"
        );
        for (changes, expected) in [
            (
                json!({"transaction_id": "txn_nope"}),
                "Error: Transaction 'txn_nope' not found.",
            ),
            (
                json!({"new_rewards_earned": ""}),
                "Error: Missing required parameters.",
            ),
            (
                json!({"transaction_id": ["x"]}),
                "Error: Invalid arguments: unhashable type: 'list'",
            ),
        ] {
            assert_eq!(answer(&mut store, tool, &with(&args, &changes)), expected);
        }
    }

    fn credit_dispute() -> Value {
        json!({
            "transaction_id": "txn_adea68821a1d", "card_action": "keep_active",
            "card_last_4_digits": "5320", "full_name": "Fatima Al-Hassan",
            "user_id": "890389b165", "phone": "313-555-0246",
            "email": "coffeelover_fati@protonmail.com",
            "address": "1923 Oak Park Boulevard, Detroit, MI 48226",
            "contacted_merchant": true, "purchase_date": "11/07/2025",
            "issue_noticed_date": "11/14/2025",
            "dispute_reason": "goods_services_not_as_described",
            "resolution_requested": "full_refund", "partial_refund_amount": null,
            "eligible_for_provisional_credit": false
        })
    }

    const CREDIT_FILED: &str = "Credit card transaction dispute filed successfully. A case has \
        been opened and will be reviewed within 10 business days.\n\n\
        Executed: file_credit_card_transaction_dispute_4829\n";

    #[test]
    fn files_credit_card_disputes() {
        let mut store = reference_bank();
        let tool = "file_credit_card_transaction_dispute_4829";
        let args = credit_dispute();
        assert_eq!(
            answer(&mut store, tool, &args),
            format!(
                "{CREDIT_FILED}Dispute ID: dsp_e3462a840774\nTransaction: txn_adea68821a1d\n\
                 Reason: Goods Services Not As Described\nResolution Requested: Full Refund\n\
                 Provisional Credit: Not eligible at this time."
            )
        );
        assert_eq!(
            record(&mut store, CREDIT_CARD_DISPUTES, "dsp_e3462a840774"),
            json!({
                "dispute_id": "dsp_e3462a840774", "transaction_id": "txn_adea68821a1d",
                "user_id": "890389b165", "card_action": "keep_active",
                "card_last_4_digits": "5320", "full_name": "Fatima Al-Hassan",
                "phone": "313-555-0246", "email": "coffeelover_fati@protonmail.com",
                "address": "1923 Oak Park Boulevard, Detroit, MI 48226",
                "contacted_merchant": true, "purchase_date": "11/07/2025",
                "issue_noticed_date": "11/14/2025",
                "dispute_reason": "goods_services_not_as_described",
                "resolution_requested": "full_refund", "partial_refund_amount": null,
                "eligible_for_provisional_credit": false, "provisional_credit_given": false,
                "submitted_at": "11/14/2025", "status": "SUBMITTED"
            })
        );
        let partial = with(
            &args,
            &json!({"transaction_id": "txn_partial", "resolution_requested": "partial_refund",
                    "partial_refund_amount": 25, "eligible_for_provisional_credit": true,
                    "dispute_reason": "incorrect_amount"}),
        );
        assert_eq!(
            answer(&mut store, tool, &partial),
            format!(
                "{CREDIT_FILED}Dispute ID: dsp_e2d6e5f9aa30\nTransaction: txn_partial\n\
                 Reason: Incorrect Amount\nResolution Requested: Partial Refund\n\
                 Partial Refund Amount: $25.00\n\
                 Provisional Credit: ELIGIBLE - Credit will be applied within 2 business days."
            )
        );
        for (changes, expected) in [
            (json!({}), ALREADY_FILED),
            (
                json!({"card_action": "freeze"}),
                "Error: Invalid card_action. Must be one of: ['keep_active', 'cancel_and_reissue']",
            ),
            (
                json!({"dispute_reason": "other"}),
                "Error: Invalid dispute_reason. Must be one of: ['unauthorized_fraudulent_charge', \
                 'duplicate_charge', 'incorrect_amount', 'goods_services_not_received', \
                 'goods_services_not_as_described', 'canceled_subscription_still_charging', \
                 'refund_never_processed']",
            ),
            (
                json!({"resolution_requested": "store_credit"}),
                "Error: Invalid resolution_requested. Must be one of: ['full_refund', 'partial_refund']",
            ),
            (json!({"user_id": ""}), MISSING_PARAMETERS),
        ] {
            assert_eq!(answer(&mut store, tool, &with(&args, &changes)), expected);
        }
        let no_amount = with(
            &partial,
            &json!({"transaction_id": "txn_other", "partial_refund_amount": null}),
        );
        assert_eq!(
            answer(&mut store, tool, &no_amount),
            "Error: partial_refund_amount is required when resolution_requested is 'partial_refund'."
        );
        // A text amount cannot be formatted, after the dispute is on file.
        let text_amount = with(
            &partial,
            &json!({"transaction_id": "txn_str", "partial_refund_amount": "25"}),
        );
        assert_eq!(
            call(&mut store, tool, &text_amount),
            Err("Unknown format code 'f' for object of type 'str'".to_owned())
        );
        assert_eq!(
            record(&mut store, CREDIT_CARD_DISPUTES, "dsp_65f1f6236a06")["partial_refund_amount"],
            "25"
        );
    }

    fn debit_dispute() -> Value {
        json!({
            "transaction_id": "btxn_b17aa1648835", "account_id": "chk_mc47a2b9e1_blue",
            "card_id": "dbc_mc47a2b9e1_blue", "user_id": "mc47a2b9e1",
            "dispute_category": "card_present_fraud", "transaction_date": "11/07/2025",
            "discovery_date": "11/14/2025", "disputed_amount": 347.5,
            "transaction_type": "pin_purchase", "card_in_possession": false,
            "pin_compromised": "yes_shared", "contacted_merchant": false,
            "police_report_filed": false, "written_statement_provided": true,
            "provisional_credit_eligible": false, "card_action": "close_and_reissue",
            "customer_max_liability_amount": 50
        })
    }

    #[test]
    fn files_debit_card_disputes() {
        let mut store = reference_bank();
        let tool = "file_debit_card_transaction_dispute_6281";
        let args = debit_dispute();
        assert_eq!(
            answer(&mut store, tool, &args),
            "Dispute ID: dsp_10e20efddf60\nTransaction: btxn_b17aa1648835\n\
             Account: chk_mc47a2b9e1_blue\nCategory: Card Present Fraud\n\
             Disputed Amount: $347.50\nCard Action: Close And Reissue\n\
             Provisional Credit: Not eligible - see Debit Card Provisional Credit Guidelines for details.\n\
             WARNING: Customer indicated PIN was shared voluntarily. This may affect liability determination."
        );
        assert_eq!(
            record(&mut store, DEBIT_CARD_DISPUTES, "dsp_10e20efddf60"),
            json!({
                "dispute_id": "dsp_10e20efddf60", "transaction_id": "btxn_b17aa1648835",
                "account_id": "chk_mc47a2b9e1_blue", "card_id": "dbc_mc47a2b9e1_blue",
                "user_id": "mc47a2b9e1", "dispute_category": "card_present_fraud",
                "transaction_date": "11/07/2025", "discovery_date": "11/14/2025",
                "disputed_amount": 347.5, "transaction_type": "pin_purchase",
                "card_in_possession": false, "pin_compromised": "yes_shared",
                "contacted_merchant": false, "police_report_filed": false,
                "written_statement_provided": true, "provisional_credit_eligible": false,
                "provisional_credit_issued": false, "provisional_credit_amount": null,
                "customer_max_liability_amount": 50.0, "card_action": "close_and_reissue",
                "is_fraud_category": true, "pin_shared_voluntarily": true,
                "submitted_at": "11/14/2025", "status": "OPEN"
            })
        );
        let large_fraud = with(
            &args,
            &json!({"transaction_id": "btxn_big", "disputed_amount": 1200, "pin_compromised": "no",
                    "provisional_credit_eligible": true,
                    "dispute_category": "unauthorized_transaction",
                    "customer_max_liability_amount": -1}),
        );
        assert_eq!(
            answer(&mut store, tool, &large_fraud),
            "Dispute ID: dsp_3c403084defe\nTransaction: btxn_big\nAccount: chk_mc47a2b9e1_blue\n\
             Category: Unauthorized Transaction\nDisputed Amount: $1200.00\n\
             Card Action: Close And Reissue\n\
             Provisional Credit: ISSUED - $1200.00 credited within 10 business days per Regulation E.\n\
             RECOMMENDATION: For fraud disputes over $500, filing a police report is recommended."
        );
        assert_eq!(
            record(&mut store, DEBIT_CARD_DISPUTES, "dsp_3c403084defe")["provisional_credit_amount"],
            1200.0
        );
        for (changes, expected) in [
            (json!({}), ALREADY_FILED),
            (json!({"disputed_amount": 0}), MISSING_PARAMETERS),
            (
                json!({"disputed_amount": -5}),
                "Error: disputed_amount must be a positive number.",
            ),
            (
                json!({"disputed_amount": "12"}),
                "Error: Invalid arguments: '<=' not supported between instances of 'str' and 'int'",
            ),
            (
                json!({"customer_max_liability_amount": null}),
                "Error: customer_max_liability_amount is required.",
            ),
            (
                json!({"dispute_category": "x"}),
                "Error: Invalid dispute_category. Must be one of: ['unauthorized_transaction', \
                 'atm_cash_discrepancy', 'atm_deposit_not_credited', 'duplicate_charge', \
                 'incorrect_amount', 'goods_services_not_received', \
                 'recurring_charge_after_cancellation', 'card_present_fraud', \
                 'card_not_present_fraud']",
            ),
            (
                json!({"transaction_type": "x"}),
                "Error: Invalid transaction_type. Must be one of: ['pin_purchase', \
                 'signature_purchase', 'online_purchase', 'atm_withdrawal', 'atm_deposit', \
                 'recurring_payment', 'person_to_person']",
            ),
            (
                json!({"pin_compromised": "x"}),
                "Error: Invalid pin_compromised. Must be one of: ['yes_shared', 'yes_observed', 'no', 'unknown']",
            ),
            (
                json!({"card_action": "x"}),
                "Error: Invalid card_action. Must be one of: ['keep_active', \
                 'freeze_pending_investigation', 'close_and_reissue']",
            ),
            (
                json!({"police_report_filed": null}),
                "Error: card_in_possession, contacted_merchant, police_report_filed, and \
                 written_statement_provided are required boolean fields.",
            ),
        ] {
            assert_eq!(answer(&mut store, tool, &with(&args, &changes)), expected);
        }
    }

    #[test]
    fn lists_debit_card_disputes() {
        let mut store = reference_bank();
        let tool = "get_debit_dispute_status_7483";
        let user = json!({"user_id": "mc47a2b9e1"});
        let heading = "Debit card dispute history retrieved successfully.\n\n\
                       Executed: get_debit_dispute_status_7483\n\
                       Debit card dispute history for user mc47a2b9e1:\n";
        assert_eq!(
            answer(&mut store, tool, &user),
            format!("{heading}\nNo debit card disputes found for this user.")
        );
        answer(
            &mut store,
            "file_debit_card_transaction_dispute_6281",
            &debit_dispute(),
        );
        assert_eq!(
            answer(&mut store, tool, &user),
            format!(
                "{heading}{}",
                r"Found 1 record(s) in 'debit_card_disputes':

1. Record ID: dsp_10e20efddf60
   dispute_id: dsp_10e20efddf60
   transaction_id: btxn_b17aa1648835
   account_id: chk_mc47a2b9e1_blue
   card_id: dbc_mc47a2b9e1_blue
   user_id: mc47a2b9e1
   dispute_category: card_present_fraud
   transaction_date: 11/07/2025
   discovery_date: 11/14/2025
   disputed_amount: 347.5
   transaction_type: pin_purchase
   card_in_possession: False
   pin_compromised: yes_shared
   contacted_merchant: False
   police_report_filed: False
   written_statement_provided: True
   provisional_credit_eligible: False
   provisional_credit_issued: False
   provisional_credit_amount: None
   customer_max_liability_amount: 50.0
   card_action: close_and_reissue
   is_fraud_category: True
   pin_shared_voluntarily: True
   submitted_at: 11/14/2025
   status: OPEN
"
            )
        );
        assert_eq!(
            answer(&mut store, tool, &json!({"user_id": ""})),
            "Error: Missing required parameter: user_id"
        );
    }

    #[test]
    fn blocks_recurring_payments() {
        let mut store = reference_bank();
        let tool = "set_debit_card_recurring_block_7382";
        let card = "dbc_lj82d4f1a9_bluest";
        assert_eq!(
            answer(
                &mut store,
                tool,
                &json!({"card_id": card, "block_recurring": true})
            ),
            "Recurring payments BLOCKED for debit card dbc_lj82d4f1a9_bluest.\n\
             All recurring/subscription charges will be declined.\n\
             One-time purchases are not affected.\n\
             This change takes effect within 24 hours."
        );
        assert_eq!(
            record(&mut store, DEBIT_CARDS, card)["recurring_blocked"],
            true
        );
        assert_eq!(
            answer(
                &mut store,
                tool,
                &json!({"card_id": card, "block_recurring": false})
            ),
            "Recurring payments UNBLOCKED for debit card dbc_lj82d4f1a9_bluest.\n\
             Recurring/subscription charges will now be allowed.\n\
             This change takes effect within 24 hours."
        );
        let updated = record(&mut store, DEBIT_CARDS, card);
        assert_eq!(updated["recurring_blocked"], false);
        assert_eq!(updated.as_object().unwrap().len(), 11);
        for (card_id, expected) in [
            (
                "dbc_7a3f9c2b1e",
                "Error: Cannot update recurring block settings for a card with status 'PENDING'. \
                 Card must be ACTIVE.",
            ),
            ("dbc_nope", "Error: Debit card 'dbc_nope' not found."),
            ("", "Error: Missing required parameter: card_id"),
        ] {
            let args = json!({"card_id": card_id, "block_recurring": true});
            assert_eq!(answer(&mut store, tool, &args), expected);
        }
    }

    /// The reference bank with ATM deposits (it has none) added.
    fn bank_with_deposits() -> MemoryStore {
        let mut store = reference_bank();
        let mut data = Data::new(&mut store);
        for (id, description, amount) in [
            (
                "btxn_test_atm_dep_partial",
                "RHO-BANK ATM DEPOSIT",
                json!(500.0),
            ),
            (
                "btxn_dep_generic",
                "ATM DEPOSIT - RHOBANK #12",
                json!(-42.5),
            ),
            ("btxn_dep_third", "ATM DEPOSIT - CHASE", json!(42.5)),
            ("btxn_dep_text", "Rho-Bank", json!("x")),
        ] {
            let mut deposit = json!({"transaction_id": id, "date": "11/06/2025",
                                     "description": description, "amount": amount,
                                     "type": "atm_deposit"});
            if id == "btxn_test_atm_dep_partial" {
                deposit.as_object_mut().unwrap().shift_remove("date");
            }
            data.add(BANK_TRANSACTIONS, id, deposit).unwrap();
        }
        store
    }

    #[test]
    fn retrieves_atm_deposit_images() {
        let mut store = bank_with_deposits();
        let tool = "get_atm_deposit_images_8473";
        let mut images = |id: &str| answer(&mut store, tool, &json!({"transaction_id": id}));
        assert_eq!(
            images("btxn_test_atm_dep_partial"),
            r"ATM Deposit Image Retrieval Results
=====================================
Transaction ID: btxn_test_atm_dep_partial
ATM: ATM #5847
Deposit Date: Unknown


=== ATM DEPOSIT ENVELOPE SCAN ===
Envelope ID: ENV-2025-5847-00293
Deposit Time: 10:15 AM EST

--- ENVELOPE CONTENTS ---
Item 1: Personal Check
  - Check Number: 7392
  - Amount: $500.00

--- DEPOSIT SUMMARY ---
Check Total: $500.00
Cash Total: $0.00
GRAND TOTAL: $500.00

--- MACHINE RECORD ---
Amount Recorded by ATM: $500.00
No discrepancy detected.


--- VERIFICATION NOTES ---
Images confirm deposit matches recorded amount. No discrepancy found.
"
        );
        assert_eq!(
            images("btxn_dep_generic"),
            "ATM Deposit Image Retrieval Results\n=====================================\n\
             Transaction ID: btxn_dep_generic\nATM: ATM DEPOSIT - RHOBANK #12\n\
             Deposit Date: 11/06/2025\nAmount Recorded: $42.50\n\n\
             --- IMAGE STATUS ---\nStatus: IMAGES NOT AVAILABLE\n\
             Reason: Deposit images for this transaction have either expired (older than 90 days) \
             or were not captured by the ATM system.\n\n\
             For deposits without available images, the dispute will proceed based on customer \
             statement and ATM journal records only. Investigation timeline may be extended.\n"
        );
        for (id, expected) in [
            (
                "btxn_dep_third",
                "Error: Transaction 'btxn_dep_third' is from a third-party ATM. Deposit images are \
                 only available for Rho-Bank ATM deposits. For third-party ATM disputes, a \
                 chargeback request must be submitted to the ATM network.",
            ),
            (
                "btxn_bd30d42f67a2",
                "Error: Transaction 'btxn_bd30d42f67a2' is not an ATM deposit. This tool only \
                 works for ATM deposit transactions.",
            ),
            ("btxn_nope", "Error: Transaction 'btxn_nope' not found."),
            ("", "Error: Missing required parameter: transaction_id"),
            (
                "btxn_dep_text",
                "Error: Invalid arguments: bad operand type for abs(): 'str'",
            ),
        ] {
            assert_eq!(images(id), expected);
        }
    }
}
