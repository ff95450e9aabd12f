//! The shop's records, as stored in the host's collections.
//!
//! Tools go through these types rather than raw JSON so that a malformed record
//! is reported instead of silently misread, and so that every record a tool
//! writes has the same shape as the ones in the initial state.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Collection of [`User`]s, keyed by user id ("u1", …).
pub const USERS: &str = "users";
/// Collection of [`Product`]s, keyed by product id ("p1", …).
pub const PRODUCTS: &str = "products";
/// Collection of [`Order`]s, keyed by order id ("o1", …).
pub const ORDERS: &str = "orders";

/// Rounds a dollar amount to cents. Sums of binary floats drift (0.1 + 0.2), and
/// the drift would otherwise leak into stored balances and the agent's answers.
pub fn cents(amount: f64) -> f64 {
    (amount * 100.0).round() / 100.0
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Address {
    pub street: String,
    pub city: String,
    pub zip: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct User {
    pub user_id: String,
    pub name: String,
    pub email: String,
    /// Where new orders are shipped.
    pub address: Address,
    /// Store credit in dollars: orders are paid from it, refunds go back to it.
    pub balance: f64,
    pub membership: Membership,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Membership {
    Basic,
    Gold,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Product {
    pub product_id: String,
    pub name: String,
    pub category: String,
    pub price: f64,
    pub stock: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Order {
    pub order_id: String,
    pub user_id: String,
    pub items: Vec<OrderItem>,
    pub total: f64,
    pub status: Status,
    pub address: Address,
    /// Why the customer cancelled; set only on cancelled orders.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_reason: Option<String>,
    /// The products sent back; set only on returned orders.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub returned_items: Vec<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OrderItem {
    pub product_id: String,
    pub quantity: i64,
    /// The price when the order was placed, which refunds use even if the
    /// product's price changed since.
    pub unit_price: f64,
}

impl OrderItem {
    pub fn subtotal(&self) -> f64 {
        self.unit_price * self.quantity as f64
    }
}

/// An order's life cycle: pending → shipped → delivered, with cancellation
/// possible while pending and a return once delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pending,
    Shipped,
    Delivered,
    Cancelled,
    Returned,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Self::Pending => "pending",
            Self::Shipped => "shipped",
            Self::Delivered => "delivered",
            Self::Cancelled => "cancelled",
            Self::Returned => "returned",
        };
        f.write_str(name)
    }
}
