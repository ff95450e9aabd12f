//! The user's apps and their permissions (`check_installed_apps`,
//! `check_app_status`, `check_app_permissions`, `grant_app_permission`, and
//! the set-up's `remove_app_permission`).

use super::model::{AppPermissions, AppStatus, Phone};
use super::{inspect, update};
use crate::python::no_attribute;
use forge_tau_guest::toolkit::Answer;
use forge_tau_guest::{Data, Kwargs, dict_key, py_str, repr};
use serde_json::Value;

/// `app_statuses.get(app_name)`.
fn app<'p>(phone: &'p Phone, app_name: &Value) -> Result<Option<&'p AppStatus>, String> {
    Ok(dict_key(app_name)?.and_then(|name| phone.device.app_statuses.get(name)))
}

pub fn check_installed_apps(data: &mut Data<'_>, _: &Kwargs) -> Result<Answer, String> {
    inspect(data, |phone| {
        let names: Vec<&str> = phone.device.app_statuses.keys().collect();
        format!(
            "The following apps are installed on the phone: {}",
            names.join(", ")
        )
    })
}

pub fn check_app_status(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let app_name = kwargs.get("app_name")?;
    let phone = Phone::load(data)?;
    let name = py_str(app_name);
    let Some(app) = app(&phone, app_name)? else {
        return Ok(Answer::Text(format!(
            "App '{name}' not found on this phone."
        )));
    };
    let mut lines = vec![format!("Status for App: {name}")];
    let granted = app.permissions.granted();
    if granted.is_empty() {
        lines.push(" - Permissions: None granted.".to_owned());
    } else {
        lines.push(" - Permissions Granted:".to_owned());
        lines.extend(
            granted
                .iter()
                .map(|permission| format!("   - {permission}")),
        );
    }
    Ok(Answer::Text(lines.join("\n")))
}

pub fn check_app_permissions(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let app_name = kwargs.get("app_name")?;
    let phone = Phone::load(data)?;
    let name = py_str(app_name);
    let text = match app(&phone, app_name)? {
        None => format!("App '{name}' not found on this phone."),
        Some(app) => match app.permissions.granted().as_slice() {
            [] => format!("App '{name}' currently has no permissions granted."),
            granted => format!("App '{name}' has permission for: {}.", granted.join(", ")),
        },
    };
    Ok(Answer::Text(text))
}

/// What setting a permission of an app came to.
pub enum Permission {
    /// The phone has no such app.
    NoApp,
    /// The app tracks no such permission (its name, lower-cased).
    Untracked(String),
    /// The permission (its name, lower-cased) is set.
    Set(String),
}

/// Sets permission `permission` (lower-cased) of app `app_name` to
/// `granted`. The app is looked up before the name is lower-cased, as the
/// reference does, which decides the error a call with both wrong gets.
/// (The reference's `remove_app_permission` tests the name with `hasattr`,
/// which also finds the model's methods, and then fails setting one; such
/// names are untracked here.)
pub fn set_permission(
    phone: &mut Phone,
    app_name: &Value,
    permission: &Value,
    granted: bool,
) -> Result<Permission, String> {
    let key = dict_key(app_name)?;
    let permission = permission
        .as_str()
        .map(str::to_lowercase)
        .ok_or_else(|| no_attribute(permission, "lower"))?;
    let Some(app) = key.and_then(|key| phone.device.app_statuses.get_mut(key)) else {
        return Ok(Permission::NoApp);
    };
    Ok(match app.permissions.get_mut(&permission) {
        None => Permission::Untracked(permission),
        Some(flag) => {
            *flag = granted;
            Permission::Set(permission)
        }
    })
}

/// Grants app `app_name` permission `permission`.
pub fn grant_app_permission(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let app_name = kwargs.get("app_name")?;
    let permission = kwargs.get("permission")?;
    update(data, |phone| {
        let name = py_str(app_name);
        let message = match set_permission(phone, app_name, permission, true)? {
            Permission::NoApp => format!("Error. App '{name}' not found. Cannot grant permission."),
            Permission::Untracked(permission) => {
                let available: Vec<String> = AppPermissions::NAMES
                    .iter()
                    .map(|name| repr(name))
                    .collect();
                format!(
                    "Error. Permission '{permission}' not tracked for app '{name}', available permissions: [{}]",
                    available.join(", ")
                )
            }
            Permission::Set(permission) => {
                format!("Success. Permission '{permission}' granted to app '{name}'.")
            }
        };
        Ok(phone.with_status_bar(&message))
    })
}
