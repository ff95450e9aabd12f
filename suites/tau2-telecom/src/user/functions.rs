//! The methods of `TelecomUserTools` that are no tools: what tasks'
//! `initialization_actions` use to put the phone in trouble, and the
//! `env_assertions` that check the trouble is gone.

use super::apps::{Permission, set_permission};
use super::model::{ApnName, NetworkStatus, PerformanceLevel, Phone, SimStatus, parse_enum};
use super::update;
use crate::python::{no_attribute, not_a_member, not_comparable, operand};
use forge_tau_guest::toolkit::{Answer, Method, function};
use forge_tau_guest::{Data, Kwargs, Num, py_eq, py_str, truthy, type_name};
use serde_json::{Value, json};

const EXPECTED_STATUS: &[(&str, bool)] = &[("expected_status", true)];
const APP_PERMISSION: &[(&str, bool)] = &[("app_name", true), ("permission", true)];

pub const SET_USER_INFO: Method = function(
    "set_user_info",
    &[("name", true), ("phone_number", true)],
    set_user_info,
);
pub const SET_USER_LOCATION: Method =
    function("set_user_location", &[("abroad", true)], set_user_location);
pub const TURN_AIRPLANE_MODE_ON: Method =
    function("turn_airplane_mode_on", &[], turn_airplane_mode_on);
pub const TURN_AIRPLANE_MODE_OFF: Method =
    function("turn_airplane_mode_off", &[], turn_airplane_mode_off);
pub const UNSEAT_SIM_CARD: Method = function("unseat_sim_card", &[], unseat_sim_card);
pub const LOCK_SIM_CARD: Method = function("lock_sim_card", &[("mode", true)], lock_sim_card);
pub const TURN_DATA_ON: Method = function("turn_data_on", &[], turn_data_on);
pub const TURN_DATA_OFF: Method = function("turn_data_off", &[], turn_data_off);
pub const TURN_ROAMING_ON: Method = function("turn_roaming_on", &[], turn_roaming_on);
pub const TURN_ROAMING_OFF: Method = function("turn_roaming_off", &[], turn_roaming_off);
pub const TURN_DATA_SAVER_MODE_ON: Method =
    function("turn_data_saver_mode_on", &[], turn_data_saver_mode_on);
pub const TURN_DATA_SAVER_MODE_OFF: Method =
    function("turn_data_saver_mode_off", &[], turn_data_saver_mode_off);
pub const BREAK_APN_SETTINGS: Method = function("break_apn_settings", &[], break_apn_settings);
pub const BREAK_APN_MMS_SETTING: Method =
    function("break_apn_mms_setting", &[], break_apn_mms_setting);
pub const SET_WIFI_CALLING: Method = function(
    "set_wifi_calling",
    &[("enabled", true), ("mms_over_wifi", false)],
    set_wifi_calling,
);
pub const BREAK_VPN: Method = function("break_vpn", &[], break_vpn);
pub const REMOVE_APP_PERMISSION: Method = function(
    "remove_app_permission",
    APP_PERMISSION,
    remove_app_permission,
);
pub const SIMULATE_NETWORK_SEARCH: Method =
    function("simulate_network_search", &[], simulate_network_search);
pub const ASSERT_AIRPLANE_MODE_STATUS: Method = function(
    "assert_airplane_mode_status",
    EXPECTED_STATUS,
    assert_airplane_mode_status,
);
pub const ASSERT_SERVICE_STATUS: Method = function(
    "assert_service_status",
    EXPECTED_STATUS,
    assert_service_status,
);
pub const ASSERT_MOBILE_DATA_STATUS: Method = function(
    "assert_mobile_data_status",
    EXPECTED_STATUS,
    assert_mobile_data_status,
);
pub const ASSERT_MOBILE_ROAMING_STATUS: Method = function(
    "assert_mobile_roaming_status",
    EXPECTED_STATUS,
    assert_mobile_roaming_status,
);
pub const ASSERT_MOBILE_DATA_SAVER_MODE_STATUS: Method = function(
    "assert_mobile_data_saver_mode_status",
    EXPECTED_STATUS,
    assert_mobile_data_saver_mode_status,
);
pub const ASSERT_INTERNET_SPEED: Method = function(
    "assert_internet_speed",
    &[("expected_speed", true), ("expected_desc", false)],
    assert_internet_speed,
);
pub const ASSERT_INTERNET_NOT_EXCELLENT: Method = function(
    "assert_internet_not_excellent",
    &[],
    assert_internet_not_excellent,
);
pub const ASSERT_CAN_SEND_MMS: Method =
    function("assert_can_send_mms", EXPECTED_STATUS, assert_can_send_mms);
pub const ASSERT_MOBILE_DATA_USAGE_EXCEEDED: Method = function(
    "assert_mobile_data_usage_exceeded",
    EXPECTED_STATUS,
    assert_mobile_data_usage_exceeded,
);

fn text(text: &str) -> Result<Answer, String> {
    Ok(Answer::Text(text.to_owned()))
}

/// A value the reference assigns to a `bool` field without validation; the
/// tasks give booleans, and the typed record holds nothing else.
fn flag(kwargs: &Kwargs, name: &str) -> Result<bool, String> {
    let value = kwargs.get(name)?;
    value
        .as_bool()
        .ok_or_else(|| format!("{name} must be a bool, not {}", type_name(value)))
}

/// A value the reference assigns to an `Optional[str]` field without validation.
fn optional_text(kwargs: &Kwargs, name: &str) -> Result<Option<String>, String> {
    match kwargs.get(name)? {
        Value::Null => Ok(None),
        Value::String(text) => Ok(Some(text.clone())),
        other => Err(format!("{name} must be a str, not {}", type_name(other))),
    }
}

fn set_user_info(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let name = optional_text(kwargs, "name")?;
    let phone_number = optional_text(kwargs, "phone_number")?;
    update(data, |phone| {
        phone.surroundings.name = name;
        phone.surroundings.phone_number = phone_number;
        Ok(Answer::Nothing)
    })
}

fn set_user_location(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let abroad = flag(kwargs, "abroad")?;
    update(data, |phone| {
        phone.surroundings.is_abroad = abroad;
        Ok(Answer::Nothing)
    })
}

/// Toggles airplane mode until it is `on`.
fn airplane_mode(data: &mut Data<'_>, on: bool) -> Result<Answer, String> {
    update(data, |phone| {
        if phone.toggle_airplane_mode() != on {
            phone.toggle_airplane_mode();
        }
        text(if on {
            "Airplane Mode is now ON."
        } else {
            "Airplane Mode is now OFF."
        })
    })
}

fn turn_airplane_mode_on(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    airplane_mode(data, true)
}

fn turn_airplane_mode_off(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    airplane_mode(data, false)
}

fn unseat_sim_card(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    update(data, |phone| {
        phone.device.sim_card_missing = true;
        phone.simulate_network_search();
        text("SIM card un-seated successfully.")
    })
}

/// Locks the SIM with a PIN or a PUK (any other mode locks nothing, as in
/// the reference, which does not check its `Literal`).
fn lock_sim_card(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let mode = kwargs.get("mode")?;
    update(data, |phone| {
        match mode.as_str() {
            Some("pin") => phone.device.sim_card_status = SimStatus::LockedPin,
            Some("puk") => phone.device.sim_card_status = SimStatus::LockedPuk,
            _ => {}
        }
        phone.simulate_network_search();
        Ok(Answer::Text(format!(
            "SIM card locked successfully in {} mode.",
            py_str(mode)
        )))
    })
}

/// Sets mobile data on without a network search, as the reference does.
fn turn_data_on(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    update(data, |phone| {
        phone.device.data_enabled = true;
        text("Data connection restored.")
    })
}

/// Toggles mobile data until it is off.
fn turn_data_off(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    update(data, |phone| {
        if phone.toggle_data() {
            phone.toggle_data();
        }
        text("Data connection broken.")
    })
}

/// Toggles data roaming until it is `on`.
fn roaming(data: &mut Data<'_>, on: bool) -> Result<Answer, String> {
    update(data, |phone| {
        if phone.toggle_roaming() != on {
            phone.toggle_roaming();
        }
        text(if on {
            "Data Roaming is now ON."
        } else {
            "Data Roaming is now OFF."
        })
    })
}

fn turn_roaming_on(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    roaming(data, true)
}

fn turn_roaming_off(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    roaming(data, false)
}

/// Toggles data saver mode until it is `on`.
fn data_saver_mode(data: &mut Data<'_>, on: bool) -> Result<Answer, String> {
    update(data, |phone| {
        if phone.toggle_data_saver_mode() != on {
            phone.toggle_data_saver_mode();
        }
        text(if on {
            "Data Saver Mode is now ON."
        } else {
            "Data Saver Mode is now OFF."
        })
    })
}

fn turn_data_saver_mode_on(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    data_saver_mode(data, true)
}

fn turn_data_saver_mode_off(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    data_saver_mode(data, false)
}

/// Breaks the APN (no service until the settings are reset and the phone
/// rebooted). The reference then asserts there is no service, which the
/// broken APN guarantees.
fn break_apn_settings(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    update(data, |phone| {
        phone.device.active_apn_settings.apn_name = ApnName::Broken;
        phone.simulate_network_search();
        text("APN settings broken. Please call reset_apn_settings() to fix.")
    })
}

/// Removes the MMSC URL (no MMS until the settings are reset and the phone
/// rebooted). The reference's assertion that MMS now fails always holds.
fn break_apn_mms_setting(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    update(data, |phone| {
        phone.device.active_apn_settings.mmsc_url = None;
        text("APN MMS setting broken. Please call reset_apn_settings() to fix.")
    })
}

/// Sets Wi-Fi calling to `enabled` (compared with `!=` as Python compares)
/// and, if given, MMS over Wi-Fi.
fn set_wifi_calling(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let enabled = kwargs.get("enabled")?;
    let mms_over_wifi = match kwargs.optional("mms_over_wifi") {
        None | Some(Value::Null) => None,
        Some(_) => Some(flag(kwargs, "mms_over_wifi")?),
    };
    update(data, |phone| {
        if !py_eq(&Value::Bool(phone.device.wifi_calling_enabled), enabled) {
            phone.toggle_wifi_calling();
        }
        let on_off = |on: bool| if on { "ON" } else { "OFF" };
        let mut message = format!("Wi-Fi Calling is now {}.", on_off(truthy(enabled)));
        if let Some(mms) = mms_over_wifi {
            phone.device.wifi_calling_mms_over_wifi = mms;
            message.push_str(&format!("\nMMS over Wi-Fi is now {}.", on_off(mms)));
        }
        Ok(Answer::Text(message))
    })
}

/// Connects the VPN if it is not, then degrades its server to poor
/// performance (slow mobile data until it is disconnected).
fn break_vpn(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    update(data, |phone| {
        phone.connect_vpn();
        let details = phone
            .device
            .vpn_details
            .as_mut()
            .ok_or_else(|| no_attribute(&Value::Null, "server_performance"))?;
        details.server_performance = PerformanceLevel::Poor;
        text("VPN connection broken.")
    })
}

/// Takes permission `permission` from app `app_name`; answers the
/// reference's `(success, message)` tuple.
fn remove_app_permission(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let app_name = kwargs.get("app_name")?;
    let permission = kwargs.get("permission")?;
    update(data, |phone| {
        let name = py_str(app_name);
        let (removed, message) = match set_permission(phone, app_name, permission, false)? {
            Permission::NoApp => (
                false,
                format!("App '{name}' not found. Cannot remove permission."),
            ),
            Permission::Untracked(permission) => (
                false,
                format!("Permission '{permission}' not tracked for app '{name}'."),
            ),
            Permission::Set(permission) => (
                true,
                format!("Permission '{permission}' removed from app '{name}'."),
            ),
        };
        Ok(Answer::Plain(json!([removed, message])))
    })
}

fn simulate_network_search(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    update(data, |phone| {
        phone.simulate_network_search();
        Ok(Answer::Nothing)
    })
}

/// An assertion that `actual == expected_status`.
fn assert_flag(kwargs: &Kwargs, actual: bool) -> Result<Answer, String> {
    Ok(Answer::Bool(py_eq(
        &Value::Bool(actual),
        kwargs.get("expected_status")?,
    )))
}

fn assert_airplane_mode_status(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    assert_flag(kwargs, Phone::load(data)?.device.airplane_mode)
}

fn assert_service_status(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let expected = kwargs.get("expected_status")?;
    let status = expected
        .as_str()
        .and_then(parse_enum::<NetworkStatus>)
        .ok_or_else(|| not_a_member(expected, "NetworkStatus"))?;
    let phone = Phone::load(data)?;
    Ok(Answer::Bool(
        phone.device.network_connection_status == status,
    ))
}

fn assert_mobile_data_status(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    assert_flag(kwargs, Phone::load(data)?.mobile_data_working())
}

fn assert_mobile_roaming_status(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    assert_flag(kwargs, Phone::load(data)?.device.roaming_enabled)
}

fn assert_mobile_data_saver_mode_status(
    data: &mut Data<'_>,
    kwargs: &Kwargs,
) -> Result<Answer, String> {
    assert_flag(kwargs, Phone::load(data)?.device.data_saver_mode)
}

/// Whether the speed test reaches `expected_speed` (no connection counts
/// as 0.0) and, if given, has description `expected_desc` (any case).
fn assert_internet_speed(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let expected_speed = kwargs.get("expected_speed")?;
    let phone = Phone::load(data)?;
    let (speed, description) = phone.speed_test().unwrap_or((0.0, "No Connection"));
    let speed_value = Num::Float(speed).to_value();
    let expected = operand(expected_speed)
        .ok_or_else(|| not_comparable(">=", &speed_value, expected_speed))?;
    let fast_enough = Num::Float(speed) >= expected;
    let holds = match kwargs.optional("expected_desc") {
        None | Some(Value::Null) => fast_enough,
        Some(expected_desc) => {
            fast_enough && {
                let expected_desc = expected_desc
                    .as_str()
                    .ok_or_else(|| no_attribute(expected_desc, "lower"))?;
                description.to_lowercase() == expected_desc.to_lowercase()
            }
        }
    };
    Ok(Answer::Bool(holds))
}

fn assert_internet_not_excellent(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    let phone = Phone::load(data)?;
    let description = phone.speed_test().map_or("No Connection", |(_, text)| text);
    Ok(Answer::Bool(description.to_lowercase() != "excellent"))
}

fn assert_can_send_mms(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    assert_flag(kwargs, Phone::load(data)?.can_send_mms())
}

fn assert_mobile_data_usage_exceeded(
    data: &mut Data<'_>,
    kwargs: &Kwargs,
) -> Result<Answer, String> {
    assert_flag(
        kwargs,
        Phone::load(data)?.surroundings.mobile_data_usage_exceeded,
    )
}
