//! The user's database, `TelecomUserDB`: the phone (`device`) and the
//! world around it (`surroundings`), each one record of collection
//! `user_db` as `model_dump()` gives it. The types below declare the
//! models' fields in the models' order, so that a record written back reads
//! as the reference dumps it.

use forge_tau_guest::Data;
use serde::de::{DeserializeOwned, Deserializer, MapAccess, Visitor};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;
use std::marker::PhantomData;

/// The collection that holds the user's database.
const COLLECTION: &str = "user_db";

/// A `str` `Enum` of the reference: its members and their values.
macro_rules! str_enum {
    ($(#[$doc:meta])* $name:ident { $($member:ident = $value:literal,)+ }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
        pub enum $name {
            $(#[serde(rename = $value)] $member,)+
        }

        impl $name {
            /// `member.value`.
            pub fn value(self) -> &'static str {
                match self {
                    $(Self::$member => $value,)+
                }
            }
        }
    };
}

str_enum!(SimStatus {
    Active = "active",
    Missing = "missing",
    LockedPin = "locked_pin",
    LockedPuk = "locked_puk",
});

str_enum!(NetworkTechnology {
    None = "none",
    TwoG = "2G",
    ThreeG = "3G",
    FourG = "4G",
    FiveG = "5G",
});

str_enum!(NetworkModePreference {
    FourG5GPreferred = "4g_5g_preferred",
    FourGOnly = "4g_only",
    ThreeGOnly = "3g_only",
    TwoGOnly = "2g_only",
});

str_enum!(SignalStrength {
    None = "none",
    Poor = "poor",
    Fair = "fair",
    Good = "good",
    Excellent = "excellent",
});

str_enum!(PerformanceLevel {
    Unknown = "unknown",
    Poor = "poor",
    Fair = "fair",
    Good = "good",
    Excellent = "excellent",
});

str_enum!(NetworkStatus {
    Connected = "connected",
    Searching = "searching",
    NoService = "no_service",
    EmergencyOnly = "emergency_only",
});

str_enum!(ApnName {
    Internet = "internet",
    Broken = "broken",
});

/// `APNSettings`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApnSettings {
    pub apn_name: ApnName,
    pub reset_at_reboot: bool,
    pub mms_apn: Option<String>,
    pub mmsc_url: Option<String>,
    pub mms_proxy: Option<String>,
    pub mms_port: Option<i64>,
}

impl Default for ApnSettings {
    /// `APNSettings()`.
    fn default() -> Self {
        Self {
            apn_name: ApnName::Internet,
            reset_at_reboot: false,
            mms_apn: Some("mms".to_owned()),
            mmsc_url: Some("http://mms.carrier.com/mms/wapenc".to_owned()),
            mms_proxy: None,
            mms_port: None,
        }
    }
}

/// `VpnDetails`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VpnDetails {
    pub server_address: Option<String>,
    pub protocol: Option<String>,
    pub server_performance: PerformanceLevel,
}

/// `AppPermissions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppPermissions {
    pub sms: bool,
    pub storage: bool,
    pub phone: bool,
    pub network: bool,
}

impl AppPermissions {
    /// The fields, in `model_dump()` order.
    pub const NAMES: [&'static str; 4] = ["sms", "storage", "phone", "network"];

    /// The permission field `name`.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut bool> {
        match name {
            "sms" => Some(&mut self.sms),
            "storage" => Some(&mut self.storage),
            "phone" => Some(&mut self.phone),
            "network" => Some(&mut self.network),
            _ => None,
        }
    }

    /// The names of the granted permissions, in field order.
    pub fn granted(&self) -> Vec<&'static str> {
        let flags = [self.sms, self.storage, self.phone, self.network];
        Self::NAMES
            .into_iter()
            .zip(flags)
            .filter_map(|(name, granted)| granted.then_some(name))
            .collect()
    }
}

/// `AppStatus`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppStatus {
    pub app_name: String,
    pub permissions: AppPermissions,
}

/// `MockPhoneAttributes`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Device {
    pub sim_card_status: SimStatus,
    pub sim_card_missing: bool,
    pub airplane_mode: bool,
    pub network_signal_strength: SignalStrength,
    pub network_technology_connected: NetworkTechnology,
    pub network_connection_status: NetworkStatus,
    pub battery_level: i64,
    pub data_enabled: bool,
    pub roaming_enabled: bool,
    /// `None` only after `set_network_mode_preference(None)`, which the
    /// reference stores unvalidated.
    pub network_mode_preference: Option<NetworkModePreference>,
    pub active_apn_settings: ApnSettings,
    pub wifi_enabled: bool,
    pub wifi_connected: bool,
    pub wifi_ssid: Option<String>,
    pub wifi_signal_strength: SignalStrength,
    pub wifi_calling_enabled: bool,
    pub wifi_calling_mms_over_wifi: bool,
    pub data_saver_mode: bool,
    pub vpn_enabled_setting: bool,
    pub vpn_connected: bool,
    pub vpn_details: Option<VpnDetails>,
    pub app_statuses: OrderedMap<AppStatus>,
}

/// `PaymentRequest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PaymentRequest {
    pub bill_id: String,
    pub amount_due: f64,
    pub paid: bool,
}

/// `UserSurroundings`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Surroundings {
    pub name: Option<String>,
    pub phone_number: Option<String>,
    pub is_abroad: bool,
    pub roaming_allowed: bool,
    /// The signal each network technology has where the user is.
    pub signal_strength: OrderedMap<SignalStrength>,
    pub mobile_data_usage_exceeded: bool,
    pub line_active: bool,
    pub payment_request: Option<PaymentRequest>,
}

/// The user's database, loaded: what the user's methods work on.
pub struct Phone {
    pub device: Device,
    pub surroundings: Surroundings,
    /// The records as loaded, to write back only those that changed.
    loaded: [Value; 2],
}

impl Phone {
    pub fn load(data: &Data<'_>) -> Result<Self, String> {
        let device = data.require(COLLECTION, "device")?;
        let surroundings = data.require(COLLECTION, "surroundings")?;
        Ok(Self {
            device: read("device", &device)?,
            surroundings: read("surroundings", &surroundings)?,
            loaded: [device, surroundings],
        })
    }

    /// Writes back the records that changed.
    pub fn save(&self, data: &mut Data<'_>) -> Result<(), String> {
        let records = [
            ("device", to_value(&self.device)?),
            ("surroundings", to_value(&self.surroundings)?),
        ];
        for ((key, record), loaded) in records.iter().zip(&self.loaded) {
            if record != loaded {
                data.put(COLLECTION, key, record)?;
            }
        }
        Ok(())
    }
}

/// `Enum(value)` for one of the enums above.
pub fn parse_enum<T: DeserializeOwned>(value: &str) -> Option<T> {
    T::deserialize(&Value::String(value.to_owned())).ok()
}

fn read<T: DeserializeOwned>(key: &str, record: &Value) -> Result<T, String> {
    T::deserialize(record).map_err(|err| format!("{COLLECTION}/{key}: {err}"))
}

fn to_value<T: Serialize>(record: &T) -> Result<Value, String> {
    serde_json::to_value(record).map_err(|err| err.to_string())
}

/// A `dict[str, V]` in insertion order, as Python keeps it (the listing of
/// installed apps shows that order).
#[derive(Debug, Clone, PartialEq)]
pub struct OrderedMap<V>(pub Vec<(String, V)>);

impl<V> OrderedMap<V> {
    /// `dict.get(key)`.
    pub fn get(&self, key: &str) -> Option<&V> {
        self.0
            .iter()
            .find_map(|(name, value)| (name == key).then_some(value))
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        self.0
            .iter_mut()
            .find_map(|(name, value)| (name == key).then_some(value))
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(name, _)| name.as_str())
    }
}

impl<V: Serialize> Serialize for OrderedMap<V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(key, value)| (key, value)))
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for OrderedMap<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries<V>(PhantomData<V>);

        impl<'de, V: Deserialize<'de>> Visitor<'de> for Entries<V> {
            type Value = OrderedMap<V>;

            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a map")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(OrderedMap(entries))
            }
        }

        deserializer.deserialize_map(Entries(PhantomData))
    }
}
