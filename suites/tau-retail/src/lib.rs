//! τ-bench `retail`: an online retailer's customer service, as a Forge
//! component.
//!
//! The database has three tables — `orders`, `products`, `users` — whose
//! records are the reference's JSON objects. Every tool reproduces the
//! reference tool's output string and database change exactly, including its
//! quirks (unrounded price differences, `0` staying an integer when no item
//! changes, error texts). The tool schemas the agent sees are the reference's
//! (`tools.json`, from τ-bench, MIT licence, © 2024 Sierra).

use forge_tau_guest::retail::{
    self, address, adjust_balance, is_gift_card, item_ids_of, missing_item, sorted,
};
use forge_tau_guest::{
    Data, Kwargs, Num, Tool, calculate, dumps, field, list_mut, num_field, set, str_field, think,
    transfer_to_human_agents, truthy,
};
use serde_json::{Value, json};

/// The schemas the agent sees, in the reference's order.
pub const SCHEMAS: &str = include_str!("../tools.json");

const ADDRESS: &[&str] = &["address1", "address2", "city", "state", "country", "zip"];

pub static TOOLS: &[Tool] = &[
    Tool {
        name: "calculate",
        parameters: &["expression"],
        run: calculate,
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
        name: "find_user_id_by_email",
        parameters: &["email"],
        run: find_user_id_by_email,
    },
    Tool {
        name: "find_user_id_by_name_zip",
        parameters: &["first_name", "last_name", "zip"],
        run: find_user_id_by_name_zip,
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
        name: "think",
        parameters: &["thought"],
        run: think,
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
    forge_tau_guest::call(TOOLS, store, name, args)
}

forge_guest::export_component!(describe, call);

/// The order `order_id` with the status the tool needs, or its error.
fn order_with_status(
    data: &Data<'_>,
    order_id: &str,
    status: &str,
    refusal: &str,
) -> Result<Value, String> {
    let order = data.get("orders", order_id)?.ok_or("order not found")?;
    if str_field(&order, "status")? != status {
        return Err(refusal.to_owned());
    }
    Ok(order)
}

/// The first item of `order` with id `item_id` (the reference's `[...][0]`).
fn item_index(order: &Value, item_id: &str) -> Result<usize, String> {
    field(order, "items")?
        .as_array()
        .and_then(|items| {
            items
                .iter()
                .position(|item| item.get("item_id").and_then(Value::as_str) == Some(item_id))
        })
        .ok_or_else(|| "list index out of range".to_owned())
}

/// The price difference of swapping `item_ids` for `new_item_ids` (each new
/// item a variant of the old one's product, and available), unrounded.
fn price_difference(
    data: &Data<'_>,
    order: &Value,
    item_ids: &[String],
    new_item_ids: &[String],
) -> Result<Num, String> {
    let mut difference = Num::Int(0);
    for (item_id, new_item_id) in item_ids.iter().zip(new_item_ids) {
        let item = &field(order, "items")?[item_index(order, item_id)?];
        let product_id = str_field(item, "product_id")?;
        let product = data.require("products", product_id)?;
        let variant = field(&product, "variants")?.get(new_item_id.as_str());
        let available = variant
            .and_then(|variant| variant.get("available"))
            .is_some_and(truthy);
        let Some(variant) = variant.filter(|_| available) else {
            return Err(format!("new item {new_item_id} not found or available"));
        };
        difference = difference + (num_field(variant, "price")? - num_field(item, "price")?);
    }
    Ok(difference)
}

/// The user who placed `order`, and their payment method `payment_method_id`
/// (or the reference's "payment method not found").
fn payment_method(
    data: &Data<'_>,
    order: &Value,
    payment_method_id: &str,
) -> Result<(String, Value), String> {
    let user_id = str_field(order, "user_id")?.to_owned();
    let user = data.require("users", &user_id)?;
    if field(&user, "payment_methods")?
        .get(payment_method_id)
        .is_none()
    {
        return Err("payment method not found".to_owned());
    }
    Ok((user_id, user))
}

fn cancel_pending_order(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let order_id = kwargs.str("order_id")?;
    let reason = kwargs.str("reason")?;
    let mut order = order_with_status(
        data,
        order_id,
        "pending",
        "non-pending order cannot be cancelled",
    )?;
    if !["no longer needed", "ordered by mistake"].contains(&reason) {
        return Err("invalid reason".to_owned());
    }
    let user_id = str_field(&order, "user_id")?.to_owned();
    let mut user: Option<Value> = None;
    let mut refunds = Vec::new();
    for payment in field(&order, "payment_history")?
        .as_array()
        .ok_or("payment history is not a list")?
    {
        let payment_id = str_field(payment, "payment_method_id")?;
        let amount = field(payment, "amount")?;
        refunds.push(json!({"transaction_type": "refund", "amount": amount, "payment_method_id": payment_id}));
        if payment_id.contains("gift_card") {
            let user = match &mut user {
                Some(user) => user,
                None => user.insert(data.require("users", &user_id)?),
            };
            adjust_balance(user, payment_id, forge_tau_guest::num(amount)?)?;
        }
    }
    set(&mut order, "status", json!("cancelled"));
    set(&mut order, "cancel_reason", json!(reason));
    list_mut(&mut order, "payment_history")?.extend(refunds);
    if let Some(user) = user {
        data.put("users", &user_id, &user)?;
    }
    data.put("orders", order_id, &order)?;
    Ok(dumps(&order))
}

/// A request to swap some of an order's items for other variants of their
/// products (an exchange or a modification): the arguments, and the order,
/// checked to be in `status` and to hold every item to swap, with one new
/// item for each.
struct ItemSwap<'k> {
    order_id: &'k str,
    order: Value,
    item_ids: Vec<String>,
    new_item_ids: Vec<String>,
    payment_method_id: &'k str,
}

fn item_swap<'k>(
    data: &Data<'_>,
    kwargs: &'k Kwargs,
    status: &str,
    refusal: &str,
) -> Result<ItemSwap<'k>, String> {
    let order_id = kwargs.str("order_id")?;
    let item_ids = kwargs.str_list("item_ids")?;
    let new_item_ids = kwargs.str_list("new_item_ids")?;
    let payment_method_id = kwargs.str("payment_method_id")?;
    let order = order_with_status(data, order_id, status, refusal)?;
    if let Some(missing) = missing_item(&item_ids, &item_ids_of(&order)?) {
        return Err(format!("{missing} not found"));
    }
    if item_ids.len() != new_item_ids.len() {
        return Err("the number of items to be exchanged should match".to_owned());
    }
    Ok(ItemSwap {
        order_id,
        order,
        item_ids,
        new_item_ids,
        payment_method_id,
    })
}

fn exchange_delivered_order_items(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let ItemSwap {
        order_id,
        mut order,
        item_ids,
        new_item_ids,
        payment_method_id,
    } = item_swap(
        data,
        kwargs,
        "delivered",
        "non-delivered order cannot be exchanged",
    )?;
    let difference = price_difference(data, &order, &item_ids, &new_item_ids)?.round(2);
    let (_, user) = payment_method(data, &order, payment_method_id)?;
    let method = &user["payment_methods"][payment_method_id];
    if is_gift_card(method)? && num_field(method, "balance")? < difference {
        return Err("insufficient gift card balance to pay for the price difference".to_owned());
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

fn find_user_id_by_email(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    retail::find_user_by_email(data, kwargs.str("email")?)?
        .ok_or_else(|| "user not found".to_owned())
}

fn find_user_id_by_name_zip(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let (first_name, last_name) = (kwargs.str("first_name")?, kwargs.str("last_name")?);
    retail::find_user_by_name_zip(data, first_name, last_name, kwargs.str("zip")?)?
        .ok_or_else(|| "user not found".to_owned())
}

/// A `get_*_details` tool: the record as JSON, or "<noun> not found".
fn details(data: &Data<'_>, table: &str, key: &str, noun: &str) -> Result<String, String> {
    match data.get(table, key)? {
        Some(record) => Ok(dumps(&record)),
        None => Err(format!("{noun} not found")),
    }
}

fn get_order_details(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    details(data, "orders", kwargs.str("order_id")?, "order")
}

fn get_product_details(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    details(data, "products", kwargs.str("product_id")?, "product")
}

fn get_user_details(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    details(data, "users", kwargs.str("user_id")?, "user")
}

fn list_all_product_types(data: &mut Data<'_>, _: &Kwargs) -> Result<String, String> {
    retail::product_types(data)
}

fn modify_pending_order_address(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let order_id = kwargs.str("order_id")?;
    let new_address = address(kwargs, ADDRESS)?;
    let mut order = order_with_status(
        data,
        order_id,
        "pending",
        "non-pending order cannot be modified",
    )?;
    set(&mut order, "address", new_address);
    data.put("orders", order_id, &order)?;
    Ok(dumps(&order))
}

fn modify_pending_order_items(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let ItemSwap {
        order_id,
        mut order,
        item_ids,
        new_item_ids,
        payment_method_id,
    } = item_swap(
        data,
        kwargs,
        "pending",
        "non-pending order cannot be modified",
    )?;
    let difference = price_difference(data, &order, &item_ids, &new_item_ids)?;
    let (user_id, mut user) = payment_method(data, &order, payment_method_id)?;
    let gift_card = is_gift_card(&user["payment_methods"][payment_method_id])?;
    if gift_card && num_field(&user["payment_methods"][payment_method_id], "balance")? < difference
    {
        return Err("insufficient gift card balance to pay for the new item".to_owned());
    }
    let kind = if difference > Num::Int(0) {
        "payment"
    } else {
        "refund"
    };
    list_mut(&mut order, "payment_history")?.push(json!({
        "transaction_type": kind,
        "amount": difference.abs().to_value(),
        "payment_method_id": payment_method_id,
    }));
    if gift_card {
        adjust_balance(&mut user, payment_method_id, -difference)?;
        data.put("users", &user_id, &user)?;
    }
    for (item_id, new_item_id) in item_ids.iter().zip(&new_item_ids) {
        let index = item_index(&order, item_id)?;
        let item = &mut list_mut(&mut order, "items")?[index];
        let product = data.require("products", str_field(item, "product_id")?)?;
        let variant = field(field(&product, "variants")?, new_item_id)?;
        set(item, "item_id", json!(new_item_id));
        set(item, "price", field(variant, "price")?.clone());
        set(item, "options", field(variant, "options")?.clone());
    }
    set(&mut order, "status", json!("pending (item modified)"));
    data.put("orders", order_id, &order)?;
    Ok(dumps(&order))
}

fn modify_pending_order_payment(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let order_id = kwargs.str("order_id")?;
    let payment_method_id = kwargs.str("payment_method_id")?;
    let mut order = order_with_status(
        data,
        order_id,
        "pending",
        "non-pending order cannot be modified",
    )?;
    let (user_id, mut user) = payment_method(data, &order, payment_method_id)?;
    let history = field(&order, "payment_history")?
        .as_array()
        .ok_or("payment history is not a list")?;
    let first = history.first().ok_or("list index out of range")?;
    if history.len() > 1 || str_field(first, "transaction_type")? != "payment" {
        return Err("there should be exactly one payment for a pending order".to_owned());
    }
    let old_method_id = str_field(first, "payment_method_id")?.to_owned();
    if old_method_id == payment_method_id {
        return Err("the new payment method should be different from the current one".to_owned());
    }
    let amount_value = field(first, "amount")?.clone();
    let amount = forge_tau_guest::num(&amount_value)?;
    let gift_card = is_gift_card(&user["payment_methods"][payment_method_id])?;
    if gift_card && num_field(&user["payment_methods"][payment_method_id], "balance")? < amount {
        return Err("insufficient gift card balance to pay for the order".to_owned());
    }
    list_mut(&mut order, "payment_history")?.extend([
        json!({"transaction_type": "payment", "amount": amount_value, "payment_method_id": payment_method_id}),
        json!({"transaction_type": "refund", "amount": amount_value, "payment_method_id": old_method_id}),
    ]);
    if gift_card {
        adjust_balance(&mut user, payment_method_id, -amount)?;
    }
    if old_method_id.contains("gift_card") {
        adjust_balance(&mut user, &old_method_id, amount)?;
    }
    data.put("users", &user_id, &user)?;
    data.put("orders", order_id, &order)?;
    Ok(dumps(&order))
}

fn modify_user_address(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let user_id = kwargs.str("user_id")?;
    let new_address = address(kwargs, ADDRESS)?;
    let mut user = data.get("users", user_id)?.ok_or("user not found")?;
    set(&mut user, "address", new_address);
    data.put("users", user_id, &user)?;
    Ok(dumps(&user))
}

fn return_delivered_order_items(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let order_id = kwargs.str("order_id")?;
    let item_ids = kwargs.str_list("item_ids")?;
    let payment_method_id = kwargs.str("payment_method_id")?;
    let mut order = order_with_status(
        data,
        order_id,
        "delivered",
        "non-delivered order cannot be returned",
    )?;
    payment_method(data, &order, payment_method_id)?;
    let original = field(&order, "payment_history")?
        .get(0)
        .ok_or("list index out of range")?;
    if !payment_method_id.contains("gift_card")
        && payment_method_id != str_field(original, "payment_method_id")?
    {
        return Err(
            "payment method should be either the original payment method or a gift card".to_owned(),
        );
    }
    if missing_item(&item_ids, &item_ids_of(&order)?).is_some() {
        return Err("some item not found".to_owned());
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
