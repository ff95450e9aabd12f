//! τ²-bench `retail`: an online retailer's customer service, as a Forge
//! component.
//!
//! The database has three tables — `products`, `users`, `orders` — whose
//! records the host holds as the reference's pydantic models dump them
//! (model field order, the order's optional exchange and return fields as
//! `null`, prices as floats). Every tool reproduces the reference tool's
//! output (`json.dumps(model.model_dump())`, or `"Error: {exception}"`) and
//! database change exactly, quirks included: modifying several items gives
//! each of them the price and options of the last new item. Records the tools
//! create are written in their model's field order. The tool schemas the
//! agent sees are the reference's (`tools.json`, from τ²-bench, MIT licence,
//! © 2025 Sierra).

use forge_tau_guest::retail::{
    self, address, adjust_balance, is_gift_card, item_ids_of, missing_item, sorted,
};
use forge_tau_guest::{
    Data, Kwargs, Num, Tool, calculate_tau2, dumps, field, list_mut, num, num_field, set,
    str_field, transfer_to_human_agents,
};
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// The schemas the agent sees, in the reference's order.
pub const SCHEMAS: &str = include_str!("../tools.json");

/// The toolkit class, as Python's `TypeError`s name its methods.
const CLASS: &str = "RetailTools";

/// The arguments of the address tools, in `UserAddress`'s field order.
const ADDRESS: &[&str] = &["address1", "address2", "city", "country", "state", "zip"];

pub static TOOLS: &[Tool] = &[
    Tool {
        name: "calculate",
        parameters: &["expression"],
        run: calculate_tau2,
    },
    Tool {
        name: "cancel_pending_order",
        parameters: &["order_id", "reason"],
        run: cancel_pending_order,
    },
    Tool {
        name: "exchange_delivered_order_items",
        parameters: &["order_id", "item_ids", "new_item_ids", "payment_method_id"],
        run: exchange_delivered_order_items,
    },
    Tool {
        name: "find_user_id_by_name_zip",
        parameters: &["first_name", "last_name", "zip"],
        run: find_user_id_by_name_zip,
    },
    Tool {
        name: "find_user_id_by_email",
        parameters: &["email"],
        run: find_user_id_by_email,
    },
    Tool {
        name: "get_order_details",
        parameters: &["order_id"],
        run: get_order_details,
    },
    Tool {
        name: "get_product_details",
        parameters: &["product_id"],
        run: get_product_details,
    },
    Tool {
        name: "get_item_details",
        parameters: &["item_id"],
        run: get_item_details,
    },
    Tool {
        name: "get_user_details",
        parameters: &["user_id"],
        run: get_user_details,
    },
    Tool {
        name: "list_all_product_types",
        parameters: &[],
        run: list_all_product_types,
    },
    Tool {
        name: "modify_pending_order_address",
        parameters: &[
            "order_id", "address1", "address2", "city", "state", "country", "zip",
        ],
        run: modify_pending_order_address,
    },
    Tool {
        name: "modify_pending_order_items",
        parameters: &["order_id", "item_ids", "new_item_ids", "payment_method_id"],
        run: modify_pending_order_items,
    },
    Tool {
        name: "modify_pending_order_payment",
        parameters: &["order_id", "payment_method_id"],
        run: modify_pending_order_payment,
    },
    Tool {
        name: "modify_user_address",
        parameters: &[
            "user_id", "address1", "address2", "city", "state", "country", "zip",
        ],
        run: modify_user_address,
    },
    Tool {
        name: "return_delivered_order_items",
        parameters: &["order_id", "item_ids", "payment_method_id"],
        run: return_delivered_order_items,
    },
    Tool {
        name: "transfer_to_human_agents",
        parameters: &["summary"],
        run: transfer_to_human_agents,
    },
];

/// The tool schemas (the component's `describe`).
pub fn describe() -> String {
    SCHEMAS.to_owned()
}

/// Runs a tool (the component's `call`).
pub fn call(store: &mut dyn forge_guest::Store, name: &str, args: &str) -> Result<String, String> {
    forge_tau_guest::call_method(CLASS, TOOLS, store, name, args)
}

forge_guest::export_component!(describe, call);

/// A record of `table`, or the reference's "<Noun> not found".
fn record(data: &Data<'_>, table: &str, key: &str, noun: &str) -> Result<Value, String> {
    data.get(table, key)?
        .ok_or_else(|| format!("{noun} not found"))
}

/// `_get_order`.
fn order(data: &Data<'_>, order_id: &str) -> Result<Value, String> {
    record(data, "orders", order_id, "Order")
}

/// `_get_user`.
fn user(data: &Data<'_>, user_id: &str) -> Result<Value, String> {
    record(data, "users", user_id, "User")
}

/// `_get_variant`: variant `item_id` of product `product_id`.
fn variant(data: &Data<'_>, product_id: &str, item_id: &str) -> Result<Value, String> {
    let product = record(data, "products", product_id, "Product")?;
    field(&product, "variants")?
        .get(item_id)
        .cloned()
        .ok_or_else(|| "Variant not found".to_owned())
}

/// The user who placed `order` and the id of their payment method
/// `payment_method_id` (`_get_payment_method`).
fn order_user(
    data: &Data<'_>,
    order: &Value,
    payment_method_id: &str,
) -> Result<(String, Value), String> {
    let user_id = str_field(order, "user_id")?.to_owned();
    let user = user(data, &user_id)?;
    method(&user, payment_method_id)?;
    Ok((user_id, user))
}

/// The user's payment method `payment_method_id`.
fn method<'u>(user: &'u Value, payment_method_id: &str) -> Result<&'u Value, String> {
    field(user, "payment_methods")?
        .get(payment_method_id)
        .ok_or_else(|| "Payment method not found".to_owned())
}

/// An `OrderPayment`, in its model's field order (its amount a float).
fn order_payment(kind: &str, amount: Num, payment_method_id: &str) -> Value {
    json!({
        "transaction_type": kind,
        "amount": Num::Float(amount.as_f64()).to_value(),
        "payment_method_id": payment_method_id,
    })
}

fn items(order: &Value) -> Result<&Vec<Value>, String> {
    field(order, "items")?
        .as_array()
        .ok_or_else(|| "order items are not a list".to_owned())
}

/// The index of the order's first item with id `item_id`, or the reference's error.
fn item_index(order: &Value, item_id: &str) -> Result<usize, String> {
    items(order)?
        .iter()
        .position(|item| item.get("item_id").and_then(Value::as_str) == Some(item_id))
        .ok_or_else(|| format!("Item {item_id} not found"))
}

/// The summed price difference of swapping each of `item_ids` for the new
/// item at the same position (a variant of the same product, available),
/// and the last new variant; `same_item` is the error for swapping an item
/// for itself, where the tool refuses that.
fn price_difference(
    data: &Data<'_>,
    order: &Value,
    item_ids: &[String],
    new_item_ids: &[String],
    same_item: Option<&str>,
) -> Result<(Num, Option<Value>), String> {
    let mut difference = Num::Int(0);
    let mut last = None;
    for (item_id, new_item_id) in item_ids.iter().zip(new_item_ids) {
        if let Some(error) = same_item
            && item_id == new_item_id
        {
            return Err(error.to_owned());
        }
        let item = &items(order)?[item_index(order, item_id)?];
        let variant = variant(data, str_field(item, "product_id")?, new_item_id)?;
        if field(&variant, "available")? != &Value::Bool(true) {
            return Err(format!("New item {new_item_id} not found or available"));
        }
        difference = difference + (num_field(&variant, "price")? - num_field(item, "price")?);
        last = Some(variant);
    }
    Ok((difference, last))
}

fn cancel_pending_order(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let order_id = kwargs.str("order_id")?;
    let reason = kwargs.str("reason")?;
    let mut order = order(data, order_id)?;
    if str_field(&order, "status")? != "pending" {
        return Err("Non-pending order cannot be cancelled".to_owned());
    }
    if !["no longer needed", "ordered by mistake"].contains(&reason) {
        return Err("Invalid reason".to_owned());
    }
    let user_id = str_field(&order, "user_id")?.to_owned();
    let mut refunded: Option<Value> = None;
    let mut refunds = Vec::new();
    for payment in field(&order, "payment_history")?
        .as_array()
        .ok_or("payment history is not a list")?
    {
        let payment_id = str_field(payment, "payment_method_id")?;
        let amount = field(payment, "amount")?;
        refunds.push(json!({"transaction_type": "refund", "amount": amount, "payment_method_id": payment_id}));
        let user = match &mut refunded {
            Some(user) => user,
            None => refunded.insert(user(data, &user_id)?),
        };
        if is_gift_card(method(user, payment_id)?)? {
            adjust_balance(user, payment_id, num(amount)?)?;
        }
    }
    set(&mut order, "status", json!("cancelled"));
    set(&mut order, "cancel_reason", json!(reason));
    list_mut(&mut order, "payment_history")?.extend(refunds);
    if let Some(user) = refunded {
        data.put("users", &user_id, &user)?;
    }
    data.put("orders", order_id, &order)?;
    Ok(dumps(&order))
}

fn exchange_delivered_order_items(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let order_id = kwargs.str("order_id")?;
    let item_ids = kwargs.str_list("item_ids")?;
    let new_item_ids = kwargs.str_list("new_item_ids")?;
    let payment_method_id = kwargs.str("payment_method_id")?;
    let mut order = order(data, order_id)?;
    if str_field(&order, "status")? != "delivered" {
        return Err("Non-delivered order cannot be exchanged".to_owned());
    }
    if let Some(missing) = missing_item(&item_ids, &item_ids_of(&order)?) {
        return Err(format!("Number of {missing} not found."));
    }
    if item_ids.len() != new_item_ids.len() {
        return Err("The number of items to be exchanged should match.".to_owned());
    }
    let (difference, _) = price_difference(data, &order, &item_ids, &new_item_ids, None)?;
    let difference = difference.round(2);
    let (_, user) = order_user(data, &order, payment_method_id)?;
    let method = method(&user, payment_method_id)?;
    if is_gift_card(method)? && num_field(method, "balance")? < difference {
        return Err("Insufficient gift card balance to pay for the price difference".to_owned());
    }
    set(&mut order, "status", json!("exchange requested"));
    set(&mut order, "exchange_items", json!(sorted(item_ids)));
    set(
        &mut order,
        "exchange_new_items",
        json!(sorted(new_item_ids)),
    );
    set(
        &mut order,
        "exchange_payment_method_id",
        json!(payment_method_id),
    );
    set(
        &mut order,
        "exchange_price_difference",
        difference.to_value(),
    );
    data.put("orders", order_id, &order)?;
    Ok(dumps(&order))
}

fn find_user_id_by_name_zip(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let (first_name, last_name) = (kwargs.str("first_name")?, kwargs.str("last_name")?);
    retail::find_user_by_name_zip(data, first_name, last_name, kwargs.str("zip")?)?
        .ok_or_else(|| "User not found".to_owned())
}

fn find_user_id_by_email(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    retail::find_user_by_email(data, kwargs.str("email")?)?
        .ok_or_else(|| "User not found".to_owned())
}

fn get_order_details(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    Ok(dumps(&order(data, kwargs.str("order_id")?)?))
}

fn get_product_details(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    Ok(dumps(&record(
        data,
        "products",
        kwargs.str("product_id")?,
        "Product",
    )?))
}

/// The variants of a product, for finding an item among all products.
#[derive(Deserialize)]
struct Variants {
    variants: Map<String, Value>,
}

fn get_item_details(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let item_id = kwargs.str("item_id")?;
    data.scan::<Variants>("products")?
        .into_iter()
        .find_map(|(_, product)| product.variants.get(item_id).map(dumps))
        .ok_or_else(|| "Item not found".to_owned())
}

fn get_user_details(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    Ok(dumps(&user(data, kwargs.str("user_id")?)?))
}

fn list_all_product_types(data: &mut Data<'_>, _: &Kwargs) -> Result<String, String> {
    retail::product_types(data)
}

fn modify_pending_order_address(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let order_id = kwargs.str("order_id")?;
    let mut order = order(data, order_id)?;
    if !str_field(&order, "status")?.contains("pending") {
        return Err("Non-pending order cannot be modified".to_owned());
    }
    set(&mut order, "address", address(kwargs, ADDRESS)?);
    data.put("orders", order_id, &order)?;
    Ok(dumps(&order))
}

fn modify_pending_order_items(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let order_id = kwargs.str("order_id")?;
    let item_ids = kwargs.str_list("item_ids")?;
    let new_item_ids = kwargs.str_list("new_item_ids")?;
    let payment_method_id = kwargs.str("payment_method_id")?;
    let mut order = order(data, order_id)?;
    if str_field(&order, "status")? != "pending" {
        return Err("Non-pending order cannot be modified".to_owned());
    }
    if let Some(missing) = missing_item(&item_ids, &item_ids_of(&order)?) {
        return Err(format!("{missing} not found"));
    }
    if item_ids.len() != new_item_ids.len() {
        return Err("The number of items to be exchanged should match".to_owned());
    }
    let (difference, last_variant) = price_difference(
        data,
        &order,
        &item_ids,
        &new_item_ids,
        Some("The new item id should be different from the old item id"),
    )?;
    let (user_id, mut user) = order_user(data, &order, payment_method_id)?;
    let gift_card = is_gift_card(method(&user, payment_method_id)?)?;
    if gift_card && num_field(method(&user, payment_method_id)?, "balance")? < difference {
        return Err("Insufficient gift card balance to pay for the new item".to_owned());
    }
    let kind = if difference > Num::Int(0) {
        "payment"
    } else {
        "refund"
    };
    list_mut(&mut order, "payment_history")?.push(order_payment(
        kind,
        difference.abs(),
        payment_method_id,
    ));
    if gift_card {
        adjust_balance(&mut user, payment_method_id, -difference)?;
        data.put("users", &user_id, &user)?;
    }
    // The reference gives every modified item the last new variant's price
    // and options (its loop variable outlives the loop that set it).
    if let Some(variant) = last_variant {
        for (item_id, new_item_id) in item_ids.iter().zip(&new_item_ids) {
            let index = item_index(&order, item_id)?;
            let item = &mut list_mut(&mut order, "items")?[index];
            set(item, "item_id", json!(new_item_id));
            set(item, "price", field(&variant, "price")?.clone());
            set(item, "options", field(&variant, "options")?.clone());
        }
    }
    set(&mut order, "status", json!("pending (item modified)"));
    data.put("orders", order_id, &order)?;
    Ok(dumps(&order))
}

fn modify_pending_order_payment(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let order_id = kwargs.str("order_id")?;
    let payment_method_id = kwargs.str("payment_method_id")?;
    let mut order = order(data, order_id)?;
    if !str_field(&order, "status")?.contains("pending") {
        return Err("Non-pending order cannot be modified".to_owned());
    }
    let (user_id, mut user) = order_user(data, &order, payment_method_id)?;
    let history = field(&order, "payment_history")?
        .as_array()
        .ok_or("payment history is not a list")?;
    let Some(first) = history.first().filter(|first| {
        history.len() == 1 && first.get("transaction_type") == Some(&json!("payment"))
    }) else {
        return Err("There should be exactly one payment for a pending order".to_owned());
    };
    let old_method_id = str_field(first, "payment_method_id")?.to_owned();
    if old_method_id == payment_method_id {
        return Err("The new payment method should be different from the current one".to_owned());
    }
    let amount = num_field(first, "amount")?;
    let gift_card = is_gift_card(method(&user, payment_method_id)?)?;
    if gift_card && num_field(method(&user, payment_method_id)?, "balance")? < amount {
        return Err("Insufficient gift card balance to pay for the order".to_owned());
    }
    list_mut(&mut order, "payment_history")?.extend([
        order_payment("payment", amount, payment_method_id),
        order_payment("refund", amount, &old_method_id),
    ]);
    if gift_card {
        adjust_balance(&mut user, payment_method_id, -amount)?;
    }
    if is_gift_card(method(&user, &old_method_id)?)? {
        adjust_balance(&mut user, &old_method_id, amount)?;
    }
    data.put("users", &user_id, &user)?;
    data.put("orders", order_id, &order)?;
    Ok(dumps(&order))
}

fn modify_user_address(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let user_id = kwargs.str("user_id")?;
    let mut user = user(data, user_id)?;
    set(&mut user, "address", address(kwargs, ADDRESS)?);
    data.put("users", user_id, &user)?;
    Ok(dumps(&user))
}

fn return_delivered_order_items(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let order_id = kwargs.str("order_id")?;
    let item_ids = kwargs.str_list("item_ids")?;
    let payment_method_id = kwargs.str("payment_method_id")?;
    let mut order = order(data, order_id)?;
    if str_field(&order, "status")? != "delivered" {
        return Err("Non-delivered order cannot be returned".to_owned());
    }
    let (_, user) = order_user(data, &order, payment_method_id)?;
    if !is_gift_card(method(&user, payment_method_id)?)? {
        let original = field(&order, "payment_history")?
            .get(0)
            .ok_or("list index out of range")?;
        if payment_method_id != str_field(original, "payment_method_id")? {
            return Err("Payment method should be the original payment method".to_owned());
        }
    }
    if missing_item(&item_ids, &item_ids_of(&order)?).is_some() {
        return Err("Some item not found".to_owned());
    }
    set(&mut order, "status", json!("return requested"));
    set(&mut order, "return_items", json!(sorted(item_ids)));
    set(
        &mut order,
        "return_payment_method_id",
        json!(payment_method_id),
    );
    data.put("orders", order_id, &order)?;
    Ok(dumps(&order))
}
