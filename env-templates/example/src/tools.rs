//! The tool implementations.
//!
//! Every write tool checks all its preconditions before its first write. The
//! host makes calls atomic anyway, but this way a failed call also leaves an
//! in-memory store (native tests, benchmarks) exactly as it was.

use std::collections::BTreeSet;

use forge_guest::{Args, Db, ToolResult, Value, json};
use serde::{Deserialize, Serialize};

use crate::records::{
    Address, ORDERS, Order, OrderItem, PRODUCTS, Product, Status, USERS, User, cents,
};

/// The reasons `cancel_order` accepts, also listed in its schema.
pub const CANCEL_REASONS: &[&str] = &["no longer needed", "ordered by mistake"];

/// One requested line of `place_order`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    product_id: String,
    quantity: i64,
}

pub fn find_user_by_email(db: &mut Db<'_>, args: &Args) -> ToolResult {
    let email = args.str("email")?.trim();
    db.all::<User>(USERS)?
        .into_iter()
        .find(|(_, user)| user.email.eq_ignore_ascii_case(email))
        .map(|(_, user)| json!({ "user_id": user.user_id }))
        .ok_or_else(|| format!("no user with email {email}"))
}

pub fn get_user(db: &mut Db<'_>, args: &Args) -> ToolResult {
    to_json(&user(db, args.str("user_id")?)?)
}

pub fn search_products(db: &mut Db<'_>, args: &Args) -> ToolResult {
    let category = args.opt_str("category");
    let max_price = args
        .get("max_price")
        .map(|_| args.f64("max_price"))
        .transpose()?;
    let matches = db
        .all::<Product>(PRODUCTS)?
        .into_iter()
        .map(|(_, product)| product)
        .filter(|product| {
            category.is_none_or(|category| product.category.eq_ignore_ascii_case(category))
        })
        .filter(|product| max_price.is_none_or(|max_price| product.price <= max_price))
        .map(|product| {
            json!({
                "product_id": product.product_id,
                "name": product.name,
                "price": product.price,
                "stock": product.stock,
            })
        })
        .collect();
    Ok(Value::Array(matches))
}

pub fn get_product(db: &mut Db<'_>, args: &Args) -> ToolResult {
    to_json(&product(db, args.str("product_id")?)?)
}

pub fn get_order(db: &mut Db<'_>, args: &Args) -> ToolResult {
    to_json(&order(db, args.str("order_id")?)?)
}

pub fn list_user_orders(db: &mut Db<'_>, args: &Args) -> ToolResult {
    // Looked up first so that an unknown user is an error, not an empty list.
    let user = user(db, args.str("user_id")?)?;
    let orders = db
        .all::<Order>(ORDERS)?
        .into_iter()
        .map(|(_, order)| order)
        .filter(|order| order.user_id == user.user_id)
        .map(|order| {
            json!({ "order_id": order.order_id, "status": order.status, "total": order.total })
        })
        .collect();
    Ok(Value::Array(orders))
}

pub fn place_order(db: &mut Db<'_>, args: &Args) -> ToolResult {
    let mut user = user(db, args.str("user_id")?)?;
    let (items, products) = take_stock(db, args.parse_field("items")?)?;
    let total = cents(items.iter().map(OrderItem::subtotal).sum());
    if user.balance < total {
        return Err(format!(
            "balance {:.2} of user {} is below the order total {total:.2}",
            user.balance, user.user_id
        ));
    }
    user.balance = cents(user.balance - total);
    let order = Order {
        order_id: db.fresh_key(ORDERS, "o"),
        user_id: user.user_id.clone(),
        items,
        total,
        status: Status::Pending,
        address: user.address.clone(),
        cancel_reason: None,
        returned_items: Vec::new(),
    };
    for product in &products {
        db.put(PRODUCTS, &product.product_id, product)?;
    }
    db.put(USERS, &user.user_id, &user)?;
    db.put(ORDERS, &order.order_id, &order)?;
    to_json(&order)
}

/// The order items for `lines` at current prices, and their products with the
/// stock already taken (not yet written).
fn take_stock(db: &Db<'_>, lines: Vec<Line>) -> Result<(Vec<OrderItem>, Vec<Product>), String> {
    if lines.is_empty() {
        return Err("an order needs at least one item".to_owned());
    }
    let mut items = Vec::with_capacity(lines.len());
    let mut products: Vec<Product> = Vec::with_capacity(lines.len());
    for line in lines {
        let id = line.product_id;
        if line.quantity < 1 {
            return Err(format!("quantity of {id} must be at least 1"));
        }
        // Two lines for one product would each pass the stock check alone.
        if products.iter().any(|product| product.product_id == id) {
            return Err(format!(
                "product {id} is listed twice; give its total quantity once"
            ));
        }
        let mut product = product(db, &id)?;
        if product.stock < line.quantity {
            return Err(format!(
                "only {} of {id} ({}) in stock; {} requested",
                product.stock, product.name, line.quantity
            ));
        }
        product.stock -= line.quantity;
        items.push(OrderItem {
            product_id: id,
            quantity: line.quantity,
            unit_price: product.price,
        });
        products.push(product);
    }
    Ok((items, products))
}

pub fn cancel_order(db: &mut Db<'_>, args: &Args) -> ToolResult {
    let reason = args.str("reason")?;
    if !CANCEL_REASONS.contains(&reason) {
        return Err(format!(
            "reason must be one of: {}",
            CANCEL_REASONS.join(", ")
        ));
    }
    let order_id = args.str("order_id")?;
    let mut order = order_in(db, order_id, Status::Pending, "can be cancelled")?;
    let restocked = order
        .items
        .iter()
        .map(|item| {
            let mut product = product(db, &item.product_id)?;
            product.stock += item.quantity;
            Ok(product)
        })
        .collect::<Result<Vec<_>, String>>()?;
    let mut user = user(db, &order.user_id)?;
    user.balance = cents(user.balance + order.total);
    order.status = Status::Cancelled;
    order.cancel_reason = Some(reason.to_owned());
    for product in &restocked {
        db.put(PRODUCTS, &product.product_id, product)?;
    }
    db.put(USERS, &user.user_id, &user)?;
    db.put(ORDERS, &order.order_id, &order)?;
    Ok(json!({ "order": order, "refund": order.total, "balance": user.balance }))
}

pub fn update_user_address(db: &mut Db<'_>, args: &Args) -> ToolResult {
    let mut user = user(db, args.str("user_id")?)?;
    user.address = address(args)?;
    db.put(USERS, &user.user_id, &user)?;
    to_json(&user)
}

pub fn update_order_address(db: &mut Db<'_>, args: &Args) -> ToolResult {
    let order_id = args.str("order_id")?;
    let mut order = order_in(db, order_id, Status::Pending, "can be redirected")?;
    order.address = address(args)?;
    db.put(ORDERS, &order.order_id, &order)?;
    to_json(&order)
}

pub fn return_items(db: &mut Db<'_>, args: &Args) -> ToolResult {
    let order_id = args.str("order_id")?;
    let mut order = order_in(db, order_id, Status::Delivered, "can be returned")?;
    let requested: BTreeSet<String> = args
        .parse_field::<Vec<String>>("product_ids")?
        .into_iter()
        .collect();
    if requested.is_empty() {
        return Err("name at least one product to return".to_owned());
    }
    let ordered = |id: &String| order.items.iter().any(|item| item.product_id == *id);
    if let Some(stranger) = requested.iter().find(|id| !ordered(id)) {
        return Err(format!(
            "product {stranger} is not an item of order {order_id}"
        ));
    }
    let returned = order
        .items
        .iter()
        .filter(|item| requested.contains(&item.product_id));
    let refund = cents(returned.clone().map(OrderItem::subtotal).sum());
    order.returned_items = returned.map(|item| item.product_id.clone()).collect();
    order.status = Status::Returned;
    let mut user = user(db, &order.user_id)?;
    user.balance = cents(user.balance + refund);
    db.put(USERS, &user.user_id, &user)?;
    db.put(ORDERS, &order.order_id, &order)?;
    Ok(json!({ "order": order, "refund": refund, "balance": user.balance }))
}

fn user(db: &Db<'_>, user_id: &str) -> Result<User, String> {
    db.require(USERS, user_id, "user")
}

fn product(db: &Db<'_>, product_id: &str) -> Result<Product, String> {
    db.require(PRODUCTS, product_id, "product")
}

fn order(db: &Db<'_>, order_id: &str) -> Result<Order, String> {
    db.require(ORDERS, order_id, "order")
}

/// The order, if it has the status that `action` (e.g. "can be cancelled")
/// requires; otherwise an error naming the status it has.
fn order_in(db: &Db<'_>, order_id: &str, required: Status, action: &str) -> Result<Order, String> {
    let order = order(db, order_id)?;
    if order.status == required {
        Ok(order)
    } else {
        Err(format!(
            "order {order_id} is {}; only {required} orders {action}",
            order.status
        ))
    }
}

/// The new address given as `street`, `city` and `zip`.
fn address(args: &Args) -> Result<Address, String> {
    let field = |name: &str| match args.str(name)?.trim() {
        "" => Err(format!("argument `{name}` must not be empty")),
        value => Ok(value.to_owned()),
    };
    Ok(Address {
        street: field("street")?,
        city: field("city")?,
        zip: field("zip")?,
    })
}

fn to_json<T: Serialize>(record: &T) -> ToolResult {
    serde_json::to_value(record).map_err(|err| err.to_string())
}
