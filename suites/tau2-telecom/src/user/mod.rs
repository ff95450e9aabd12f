//! `TelecomUserTools`: the user's toolkit over their phone.

mod apn;
mod apps;
mod functions;
mod model;
mod phone;

use crate::python::no_attribute;
use apn::{check_apn_settings, reset_apn_settings, set_apn_settings};
use apps::{check_app_permissions, check_app_status, check_installed_apps, grant_app_permission};
use forge_tau_guest::toolkit::{Answer, Toolkit, tool};
use forge_tau_guest::{Data, Kwargs, Num};
use model::{NetworkModePreference, parse_enum};
pub use model::{PaymentRequest, Phone};
use serde_json::Value;

/// The user's tools in the reference's order, then its other methods.
pub static USER: Toolkit = Toolkit {
    class: "TelecomUserTools",
    schemas: include_str!("../../user_tools.json"),
    methods: &[
        tool("check_status_bar", &[], check_status_bar),
        tool("check_network_status", &[], check_network_status),
        tool(
            "check_network_mode_preference",
            &[],
            check_network_mode_preference,
        ),
        tool(
            "set_network_mode_preference",
            &[("mode", true)],
            set_network_mode_preference,
        ),
        tool("run_speed_test", &[], run_speed_test),
        tool("toggle_airplane_mode", &[], toggle_airplane_mode),
        tool("check_sim_status", &[], check_sim_status),
        tool("reseat_sim_card", &[], reseat_sim_card),
        tool("toggle_data", &[], toggle_data),
        tool("toggle_roaming", &[], toggle_roaming),
        tool(
            "check_data_restriction_status",
            &[],
            check_data_restriction_status,
        ),
        tool("toggle_data_saver_mode", &[], toggle_data_saver_mode),
        tool("check_apn_settings", &[], check_apn_settings),
        tool(
            "set_apn_settings",
            &[("apn_settings", true)],
            set_apn_settings,
        ),
        tool("reset_apn_settings", &[], reset_apn_settings),
        tool("check_wifi_status", &[], check_wifi_status),
        tool("toggle_wifi", &[], toggle_wifi),
        tool("check_wifi_calling_status", &[], check_wifi_calling_status),
        tool("toggle_wifi_calling", &[], toggle_wifi_calling),
        tool("check_vpn_status", &[], check_vpn_status),
        tool("connect_vpn", &[], connect_vpn),
        tool("disconnect_vpn", &[], disconnect_vpn),
        tool("check_installed_apps", &[], check_installed_apps),
        tool("check_app_status", &[("app_name", true)], check_app_status),
        tool(
            "check_app_permissions",
            &[("app_name", true)],
            check_app_permissions,
        ),
        tool(
            "grant_app_permission",
            &[("app_name", true), ("permission", true)],
            grant_app_permission,
        ),
        tool("can_send_mms", &[], can_send_mms),
        tool("reboot_device", &[], reboot_device),
        tool("check_payment_request", &[], check_payment_request),
        tool("make_payment", &[], make_payment),
        functions::SET_USER_INFO,
        functions::SET_USER_LOCATION,
        functions::TURN_AIRPLANE_MODE_ON,
        functions::TURN_AIRPLANE_MODE_OFF,
        functions::UNSEAT_SIM_CARD,
        functions::LOCK_SIM_CARD,
        functions::TURN_DATA_ON,
        functions::TURN_DATA_OFF,
        functions::TURN_ROAMING_ON,
        functions::TURN_ROAMING_OFF,
        functions::TURN_DATA_SAVER_MODE_ON,
        functions::TURN_DATA_SAVER_MODE_OFF,
        functions::BREAK_APN_SETTINGS,
        functions::BREAK_APN_MMS_SETTING,
        functions::SET_WIFI_CALLING,
        functions::BREAK_VPN,
        functions::REMOVE_APP_PERMISSION,
        functions::SIMULATE_NETWORK_SEARCH,
        functions::ASSERT_AIRPLANE_MODE_STATUS,
        functions::ASSERT_SERVICE_STATUS,
        functions::ASSERT_MOBILE_DATA_STATUS,
        functions::ASSERT_MOBILE_ROAMING_STATUS,
        functions::ASSERT_MOBILE_DATA_SAVER_MODE_STATUS,
        functions::ASSERT_INTERNET_SPEED,
        functions::ASSERT_INTERNET_NOT_EXCELLENT,
        functions::ASSERT_CAN_SEND_MMS,
        functions::ASSERT_MOBILE_DATA_USAGE_EXCEEDED,
    ],
    attributes: &[
        "default_vpn_details",
        "device",
        "network_mode_preference",
        "surroundings",
        "_can_send_mms",
        "_check_apn_settings",
        "_check_app_permissions",
        "_check_app_status",
        "_check_data_restriction_status",
        "_check_installed_apps",
        "_check_network_mode_preference",
        "_check_network_status",
        "_check_payment_request",
        "_check_sim_status",
        "_check_status_bar",
        "_check_vpn_status",
        "_check_wifi_calling_status",
        "_check_wifi_status",
        "_connect_vpn",
        "_disconnect_vpn",
        "_get_mobile_data_working",
        "_grant_app_permission",
        "_make_payment",
        "_reboot_device",
        "_reseat_sim_card",
        "_reset_apn_settings",
        "_run_speed_test",
        "_set_apn_settings",
        "_set_network_mode_preference",
        "_toggle_airplane_mode",
        "_toggle_data",
        "_toggle_data_saver_mode",
        "_toggle_roaming",
        "_toggle_wifi",
        "_toggle_wifi_calling",
    ],
};

/// Runs `change` on the phone and writes back what it changed, unless it fails.
fn update<A: Into<Answer>>(
    data: &mut Data<'_>,
    change: impl FnOnce(&mut Phone) -> Result<A, String>,
) -> Result<Answer, String> {
    let mut phone = Phone::load(data)?;
    let answer = change(&mut phone)?;
    phone.save(data)?;
    Ok(answer.into())
}

/// Answers what `read` makes of the phone.
fn inspect(data: &Data<'_>, read: impl FnOnce(&Phone) -> String) -> Result<Answer, String> {
    Ok(Answer::Text(read(&Phone::load(data)?)))
}

/// "ON" or "OFF".
fn on_off(flag: bool) -> &'static str {
    if flag { "ON" } else { "OFF" }
}

/// "Yes" or "No".
fn yes_no(flag: bool) -> &'static str {
    if flag { "Yes" } else { "No" }
}

fn check_status_bar(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    inspect(data, |phone| format!("Status Bar: {}", phone.status_bar()))
}

fn check_network_status(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    inspect(data, |phone| {
        let device = &phone.device;
        let mut lines = vec![
            format!("Airplane Mode: {}", on_off(device.airplane_mode)),
            format!("SIM Card Status: {}", phone.sim_status().value()),
            format!(
                "Cellular Connection: {}",
                device.network_connection_status.value()
            ),
            format!(
                "Cellular Signal: {}",
                device.network_signal_strength.value()
            ),
            format!(
                "Cellular Network Type: {}",
                device.network_technology_connected.value()
            ),
            format!("Mobile Data Enabled: {}", yes_no(device.data_enabled)),
            format!("Data Roaming Enabled: {}", yes_no(device.roaming_enabled)),
            format!("Wi-Fi Radio: {}", on_off(device.wifi_enabled)),
            format!("Wi-Fi Connected: {}", yes_no(device.wifi_connected)),
        ];
        if device.wifi_connected {
            lines.push(format!(
                "Connected Wi-Fi Network: {}",
                device.wifi_ssid.as_deref().unwrap_or("None")
            ));
        }
        lines.join("\n")
    })
}

fn check_network_mode_preference(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    let phone = Phone::load(data)?;
    let mode = phone
        .device
        .network_mode_preference
        .ok_or_else(|| no_attribute(&Value::Null, "value"))?;
    Ok(Answer::Text(format!(
        "Network Mode Preference: {}",
        mode.value()
    )))
}

/// Sets the preferred network mode and searches again. A string that is no
/// mode changes nothing; anything else the reference stores unchecked and
/// searches with (as the default, 4G), then answers `None` as no valid
/// mode and fails on any other value reading its `.value` (after the
/// search, which the host then discards).
fn set_network_mode_preference(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let mode = kwargs.get("mode")?;
    update(data, |phone| match mode {
        Value::String(text) => match parse_enum::<NetworkModePreference>(text) {
            Some(preference) => {
                phone.device.network_mode_preference = Some(preference);
                phone.simulate_network_search();
                Ok(phone.with_status_bar(&format!(
                    "Preferred Network Mode set to: {}",
                    preference.value()
                )))
            }
            None => Ok(invalid_mode(phone, text)),
        },
        Value::Null => {
            phone.device.network_mode_preference = None;
            phone.simulate_network_search();
            Ok(invalid_mode(phone, "None"))
        }
        other => Err(no_attribute(other, "value")),
    })
}

/// The answer to a mode that is none of `NetworkModePreference`'s.
fn invalid_mode(phone: &Phone, mode: &str) -> String {
    phone.with_status_bar(&format!(
        "Failed to set network mode: '{mode}' is not a valid option. Please use one of: 4g_5g_preferred, 4g_only, 3g_only, 2g_only"
    ))
}

fn run_speed_test(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    inspect(data, |phone| match phone.speed_test() {
        None => "Speed test failed: No Connection.".to_owned(),
        Some((speed, description)) => {
            let advice = match description {
                "Very Poor" => "Connection is very slow. Basic web browsing might be difficult.",
                "Poor" => "Connection is slow. Web browsing may be sluggish, streaming difficult.",
                "Fair" => {
                    "Connection is okay for web browsing and some standard definition streaming."
                }
                "Good" => "Connection is good for most activities, including HD streaming.",
                _ => "Connection is very fast.",
            };
            format!("Speed Test Result: {speed:.2} Mbps ({description}). {advice}")
        }
    })
}

fn toggle_airplane_mode(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    update(data, |phone| {
        let on = phone.toggle_airplane_mode();
        Ok(phone.with_status_bar(&format!("Airplane Mode is now {}.", on_off(on))))
    })
}

fn check_sim_status(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    inspect(data, |phone| {
        match phone.sim_status() {
            model::SimStatus::Active => "Your SIM card is active and working.",
            model::SimStatus::Missing => "No SIM card detected in the phone.",
            model::SimStatus::LockedPin => "The SIM card is locked with a PIN code.",
            model::SimStatus::LockedPuk => "The SIM card is locked with a PUK code.",
        }
        .to_owned()
    })
}

fn reseat_sim_card(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    update(data, |phone| {
        phone.device.sim_card_missing = false;
        phone.simulate_network_search();
        Ok(phone.with_status_bar("SIM card re-seated successfully."))
    })
}

fn toggle_data(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    update(data, |phone| {
        let on = phone.toggle_data();
        Ok(phone.with_status_bar(&format!("Mobile Data is now {}.", on_off(on))))
    })
}

fn toggle_roaming(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    update(data, |phone| {
        let on = phone.toggle_roaming();
        Ok(phone.with_status_bar(&format!("Data Roaming is now {}.", on_off(on))))
    })
}

fn check_data_restriction_status(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    inspect(data, |phone| {
        if phone.device.data_saver_mode {
            "Data Saver mode is ON (limits data usage).".to_owned()
        } else {
            "Data Saver mode is OFF.".to_owned()
        }
    })
}

fn toggle_data_saver_mode(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    update(data, |phone| {
        let on = phone.toggle_data_saver_mode();
        Ok(phone.with_status_bar(&format!("Data Saver Mode is now {}.", on_off(on))))
    })
}

fn check_wifi_status(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    inspect(data, |phone| {
        let device = &phone.device;
        if !device.wifi_enabled {
            "Wi-Fi is turned OFF.".to_owned()
        } else if device.wifi_connected {
            format!(
                "Wi-Fi is ON and connected to '{}'. Signal strength: {}.",
                device.wifi_ssid.as_deref().unwrap_or("None"),
                device.wifi_signal_strength.value()
            )
        } else {
            "Wi-Fi is ON but not connected to any network.".to_owned()
        }
    })
}

/// Turns the Wi-Fi radio on or off; not while in airplane mode.
fn toggle_wifi(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    update(data, |phone| {
        if phone.device.airplane_mode {
            return Ok(
                phone.with_status_bar("Cannot change Wi-Fi settings while Airplane Mode is ON.")
            );
        }
        let device = &mut phone.device;
        device.wifi_enabled = !device.wifi_enabled;
        if !device.wifi_enabled {
            device.wifi_connected = false;
            device.wifi_ssid = None;
            device.wifi_signal_strength = model::SignalStrength::None;
        }
        let on = device.wifi_enabled;
        Ok(phone.with_status_bar(&format!("Wi-Fi is now {}.", on_off(on))))
    })
}

fn check_wifi_calling_status(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    inspect(data, |phone| {
        format!(
            "Wi-Fi Calling is currently turned {}.",
            on_off(phone.device.wifi_calling_enabled)
        )
    })
}

fn toggle_wifi_calling(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    update(data, |phone| {
        let on = phone.toggle_wifi_calling();
        Ok(phone.with_status_bar(&format!("Wi-Fi Calling is now {}.", on_off(on))))
    })
}

/// Whether a VPN is connected, with the connection's details as Python
/// shows the `model_dump()` dict (its enum member included).
fn check_vpn_status(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    inspect(data, |phone| {
        let device = &phone.device;
        if device.vpn_connected {
            match &device.vpn_details {
                Some(details) => {
                    let optional = |value: &Option<String>| {
                        value
                            .as_deref()
                            .map_or("None".to_owned(), forge_tau_guest::repr)
                    };
                    let performance = details.server_performance.value();
                    format!(
                        "VPN is ON and connected. Details: {{'server_address': {}, 'protocol': {}, 'server_performance': <PerformanceLevel.{}: '{performance}'>}}",
                        optional(&details.server_address),
                        optional(&details.protocol),
                        performance.to_ascii_uppercase()
                    )
                }
                None => "VPN is ON and connected (no specific details available).".to_owned(),
            }
        } else if device.vpn_enabled_setting {
            "VPN is turned ON in settings, but currently not connected.".to_owned()
        } else {
            "VPN is turned OFF.".to_owned()
        }
    })
}

fn connect_vpn(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    update(data, |phone| {
        if phone.connect_vpn() {
            Ok(phone.with_status_bar("VPN connected successfully."))
        } else {
            Ok("VPN already connected.".to_owned())
        }
    })
}

fn disconnect_vpn(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    update(data, |phone| {
        let text = if phone.disconnect_vpn() {
            "VPN disconnected successfully."
        } else {
            "No active VPN connection to disconnect."
        };
        Ok(phone.with_status_bar(text))
    })
}

fn can_send_mms(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    inspect(data, |phone| {
        if phone.can_send_mms() {
            "Your messaging app can send MMS messages.".to_owned()
        } else {
            "Your messaging app cannot send MMS messages.".to_owned()
        }
    })
}

fn reboot_device(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    update(data, |phone| {
        let lines = phone.reboot();
        Ok(phone.with_status_bar(&lines))
    })
}

/// `str(amount)` of a payment request's float amount.
fn amount(request: &PaymentRequest) -> String {
    Num::Float(request.amount_due).to_python_string()
}

fn check_payment_request(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    inspect(data, |phone| match &phone.surroundings.payment_request {
        None => "No payment request has been made.".to_owned(),
        Some(request) => format!(
            "You have a payment request for bill {} of {} USD.",
            request.bill_id,
            amount(request)
        ),
    })
}

/// Marks the payment request paid; `sync` then settles the bill.
fn make_payment(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    update(data, |phone| {
        match &mut phone.surroundings.payment_request {
            None => Ok("You do not have a payment request.".to_owned()),
            Some(request) => {
                request.paid = true;
                Ok(format!(
                    "Payment of {} USD has been made for bill {}.",
                    amount(request),
                    request.bill_id
                ))
            }
        }
    })
}
