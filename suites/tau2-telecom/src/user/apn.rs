//! The phone's APN settings (`check_apn_settings`, `set_apn_settings`,
//! `reset_apn_settings`).

use super::model::ApnSettings;
use super::{inspect, update};
use crate::python::no_attribute;
use forge_tau_guest::model::{Kind, build_forbidding_extra};
use forge_tau_guest::toolkit::Answer;
use forge_tau_guest::{Data, Kwargs};
use serde_json::{Map, Value};

pub fn check_apn_settings(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    inspect(data, |phone| {
        let settings = &phone.device.active_apn_settings;
        let mmsc_url = match settings.mmsc_url.as_deref() {
            Some(url) if !url.is_empty() => url,
            _ => "Not Set",
        };
        format!(
            "Current APN Name: {}\nMMSC URL (for picture messages): {mmsc_url}\n(These are technical settings, usually best left unchanged.)",
            settings.apn_name.value()
        )
    })
}

/// `APNSettings`' fields, for `APNSettings(**apn_settings)`.
const APN_SETTINGS: &[(&str, Kind)] = &[
    ("apn_name", Kind::Enum(&["internet", "broken"])),
    ("reset_at_reboot", Kind::Bool),
    ("mms_apn", Kind::Optional(&Kind::Str)),
    ("mmsc_url", Kind::Optional(&Kind::Str)),
    ("mms_proxy", Kind::Optional(&Kind::Str)),
    ("mms_port", Kind::Optional(&Kind::Int)),
];

/// Replaces the APN settings with `APNSettings(**apn_settings)` (defaults
/// for what is not given, pydantic's errors for what does not validate),
/// then searches again. Anything but a dict the reference stores as it is
/// and then fails reading its `.apn_name` (a write the host discards).
pub fn set_apn_settings(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let given = kwargs.get("apn_settings")?;
    let Value::Object(given) = given else {
        return Err(no_attribute(given, "apn_name"));
    };
    let mut input = match serde_json::to_value(ApnSettings::default()) {
        Ok(Value::Object(defaults)) => defaults,
        _ => Map::new(),
    };
    input.extend(
        given
            .iter()
            .map(|(key, value)| (key.clone(), value.clone())),
    );
    let settings = build_forbidding_extra("APNSettings", APN_SETTINGS, &Value::Object(input))?;
    let settings: ApnSettings = serde_json::from_value(settings).map_err(|err| err.to_string())?;
    update(data, |phone| {
        let name = settings.apn_name;
        phone.device.active_apn_settings = settings;
        phone.simulate_network_search();
        Ok(phone.with_status_bar(&format!("APN settings set to: {}", name.value())))
    })
}

/// Marks the settings for a reset at the next reboot.
pub fn reset_apn_settings(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    update(data, |phone| {
        phone.device.active_apn_settings.reset_at_reboot = true;
        phone.simulate_network_search();
        Ok(phone.with_status_bar("APN settings will reset at reboot."))
    })
}
