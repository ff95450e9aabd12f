//! How the simulated phone behaves: the reference's `TelecomUserTools`
//! helpers (`_check_status_bar`, `simulate_network_search`,
//! `_get_mobile_data_working`, `_run_speed_test`, `_can_send_mms`, the
//! toggles), on the loaded [`Phone`].

use super::model::{
    ApnName, ApnSettings, NetworkModePreference, NetworkStatus, NetworkTechnology,
    PerformanceLevel, Phone, SignalStrength, SimStatus, VpnDetails,
};
use forge_tau_guest::Num;

impl Phone {
    /// `_check_status_bar`: the icons at the top of the screen.
    pub fn status_bar(&self) -> String {
        let device = &self.device;
        let mut indicators = Vec::new();
        if device.airplane_mode {
            indicators.push("\u{2708}\u{fe0f} Airplane Mode".to_owned());
        } else {
            let signal = match device.network_signal_strength {
                SignalStrength::None => "\u{1f4f5} No Signal",
                SignalStrength::Poor => "\u{1f4f6}\u{b9} Poor",
                SignalStrength::Fair => "\u{1f4f6}\u{b2} Fair",
                SignalStrength::Good => "\u{1f4f6}\u{b3} Good",
                SignalStrength::Excellent => "\u{1f4f6}\u{2074} Excellent",
            };
            indicators.push(signal.to_owned());
            let technology = device.network_technology_connected;
            if technology != NetworkTechnology::None {
                indicators.push(technology.value().to_owned());
            }
            if device.data_enabled && technology != NetworkTechnology::None {
                indicators.push("\u{1f4f1} Data Enabled".to_owned());
                if device.data_saver_mode {
                    indicators.push("\u{1f53d} Data Saver".to_owned());
                }
            } else {
                indicators.push("\u{1f4f5} Data Disabled".to_owned());
            }
        }
        if device.wifi_enabled && device.wifi_connected {
            match device.wifi_ssid.as_deref() {
                Some(ssid) if !ssid.is_empty() => {
                    indicators.push(format!("\u{1f4e1} Connected to {ssid}"));
                }
                _ => indicators.push("\u{1f4e1} Enabled".to_owned()),
            }
        }
        if device.vpn_connected {
            indicators.push("\u{1f512} VPN Connected".to_owned());
        }
        indicators.push(format!("\u{1f50b} {}%", device.battery_level));
        indicators.join(" | ")
    }

    /// `text`, then the status bar on a line of its own, as most tools answer.
    pub fn with_status_bar(&self, text: &str) -> String {
        format!("{text}\nStatus Bar: {}", self.status_bar())
    }

    /// `_check_sim_status`.
    pub fn sim_status(&self) -> SimStatus {
        if self.device.sim_card_missing {
            SimStatus::Missing
        } else {
            self.device.sim_card_status
        }
    }

    /// `simulate_network_search`: what the phone connects to, given its SIM,
    /// its preferred network mode and the signal where the user is.
    pub fn simulate_network_search(&mut self) {
        if self.sim_status() == SimStatus::Active {
            let (technology, signal) = match self.device.network_mode_preference {
                Some(NetworkModePreference::FourG5GPreferred) => {
                    match self.signal(NetworkTechnology::FiveG) {
                        SignalStrength::None => (
                            NetworkTechnology::FourG,
                            self.signal(NetworkTechnology::FourG),
                        ),
                        five_g => (NetworkTechnology::FiveG, five_g),
                    }
                }
                Some(NetworkModePreference::ThreeGOnly) => (
                    NetworkTechnology::ThreeG,
                    self.signal(NetworkTechnology::ThreeG),
                ),
                Some(NetworkModePreference::TwoGOnly) => (
                    NetworkTechnology::TwoG,
                    self.signal(NetworkTechnology::TwoG),
                ),
                Some(NetworkModePreference::FourGOnly) | None => (
                    NetworkTechnology::FourG,
                    self.signal(NetworkTechnology::FourG),
                ),
            };
            self.device.network_connection_status = NetworkStatus::Connected;
            self.device.network_technology_connected = technology;
            self.device.network_signal_strength = signal;
        } else {
            self.lose_service();
        }
        if self.device.airplane_mode
            || self.device.active_apn_settings.apn_name == ApnName::Broken
            || !self.surroundings.line_active
        {
            self.lose_service();
        }
    }

    /// No service, no technology, no signal.
    fn lose_service(&mut self) {
        self.device.network_connection_status = NetworkStatus::NoService;
        self.device.network_technology_connected = NetworkTechnology::None;
        self.device.network_signal_strength = SignalStrength::None;
    }

    /// The signal of `technology` where the user is (none if unlisted).
    fn signal(&self, technology: NetworkTechnology) -> SignalStrength {
        self.surroundings
            .signal_strength
            .get(technology.value())
            .copied()
            .unwrap_or(SignalStrength::None)
    }

    /// `_get_mobile_data_working`.
    pub fn mobile_data_working(&self) -> bool {
        let device = &self.device;
        let surroundings = &self.surroundings;
        !(device.airplane_mode
            || device.network_signal_strength == SignalStrength::None
            || device.network_connection_status == NetworkStatus::NoService
            || (surroundings.is_abroad
                && (!device.roaming_enabled || !surroundings.roaming_allowed))
            || !device.data_enabled
            || surroundings.mobile_data_usage_exceeded)
    }

    /// `_run_speed_test`: the download speed in Mbps (rounded to 2 places)
    /// and its description, or `None` without a data connection.
    pub fn speed_test(&self) -> Option<(f64, &'static str)> {
        if !self.mobile_data_working() {
            return None;
        }
        let device = &self.device;
        let slow_vpn = device.vpn_connected
            && device
                .vpn_details
                .as_ref()
                .is_some_and(|details| details.server_performance == PerformanceLevel::Poor);
        let mut factor = if slow_vpn { 0.1 } else { 1.0 };
        if device.data_saver_mode {
            factor *= 0.2;
        }
        let (min, max) = match device.network_technology_connected {
            NetworkTechnology::TwoG => (0.1, 0.4),
            NetworkTechnology::ThreeG => (1.0, 5.0),
            NetworkTechnology::FourG => (10.0, 100.0),
            NetworkTechnology::FiveG => (50.0, 500.0),
            NetworkTechnology::None => (0.0, 0.0),
        };
        let signal = match device.network_signal_strength {
            SignalStrength::Poor => 0.2,
            SignalStrength::Fair => 0.5,
            SignalStrength::Good => 0.8,
            SignalStrength::Excellent => 1.0,
            SignalStrength::None => 0.0,
        };
        let speed = Num::Float((min + max) / 2.0 * signal * factor)
            .round(2)
            .as_f64();
        let description = match speed {
            speed if speed < 1.0 => "Very Poor",
            speed if speed < 5.0 => "Poor",
            speed if speed < 25.0 => "Fair",
            speed if speed < 100.0 => "Good",
            _ => "Excellent",
        };
        Some((speed, description))
    }

    /// `_can_send_mms`.
    pub fn can_send_mms(&self) -> bool {
        let device = &self.device;
        self.mobile_data_working()
            && device.network_technology_connected != NetworkTechnology::TwoG
            && !(device.wifi_calling_enabled && device.wifi_calling_mms_over_wifi)
            && device.active_apn_settings.mmsc_url.is_some()
            && device
                .app_statuses
                .get("messaging")
                .is_some_and(|app| app.permissions.storage && app.permissions.sms)
    }

    /// `_toggle_airplane_mode`: the new state.
    pub fn toggle_airplane_mode(&mut self) -> bool {
        let was_on = self.device.airplane_mode;
        self.device.airplane_mode = !was_on;
        if was_on {
            self.device.network_connection_status = NetworkStatus::Searching;
        }
        if !was_on || self.device.wifi_enabled {
            self.device.wifi_connected = false;
            self.device.wifi_ssid = None;
            self.device.wifi_signal_strength = SignalStrength::None;
        }
        if !was_on {
            self.disconnect_vpn();
        }
        self.simulate_network_search();
        self.device.airplane_mode
    }

    /// `_toggle_data`: the new state.
    pub fn toggle_data(&mut self) -> bool {
        self.device.data_enabled = !self.device.data_enabled;
        self.simulate_network_search();
        self.device.data_enabled
    }

    /// `_toggle_roaming`: the new state.
    pub fn toggle_roaming(&mut self) -> bool {
        self.device.roaming_enabled = !self.device.roaming_enabled;
        self.simulate_network_search();
        self.device.roaming_enabled
    }

    /// `_toggle_data_saver_mode`: the new state (no network search).
    pub fn toggle_data_saver_mode(&mut self) -> bool {
        self.device.data_saver_mode = !self.device.data_saver_mode;
        self.device.data_saver_mode
    }

    /// `_toggle_wifi_calling`: the new state.
    pub fn toggle_wifi_calling(&mut self) -> bool {
        self.device.wifi_calling_enabled = !self.device.wifi_calling_enabled;
        self.device.wifi_calling_enabled
    }

    /// `_connect_vpn` to the default server; false if already connected.
    ///
    /// The reference hands every connection its one class-level
    /// `default_vpn_details` object, which `break_vpn` then degrades in
    /// place, so in a Python process that has run `break_vpn` once, later
    /// connections report a poor server. A component has no such memory:
    /// a connection here always gets the default, excellent one.
    pub fn connect_vpn(&mut self) -> bool {
        if self.device.vpn_connected {
            return false;
        }
        self.device.vpn_connected = true;
        self.device.vpn_details = Some(VpnDetails {
            server_address: Some("192.168.1.1".to_owned()),
            protocol: Some("OpenVPN".to_owned()),
            server_performance: PerformanceLevel::Excellent,
        });
        true
    }

    /// `_disconnect_vpn`: false if there was no connection.
    pub fn disconnect_vpn(&mut self) -> bool {
        if !self.device.vpn_connected {
            return false;
        }
        self.device.vpn_connected = false;
        self.device.vpn_details = None;
        true
    }

    /// `_reboot_device`: resets the APN settings if they are due to be,
    /// restarts the network services; the lines it reports.
    pub fn reboot(&mut self) -> String {
        let mut lines = Vec::new();
        if self.device.active_apn_settings.reset_at_reboot {
            lines.push("Resetting APN settings...");
            self.device.active_apn_settings = ApnSettings::default();
        }
        lines.push("Restarting network services...");
        self.device.network_connection_status = NetworkStatus::Searching;
        self.simulate_network_search();
        lines.join("\n")
    }
}
