//! What the τ-bench and τ²-bench `retail` tools share: the same database
//! (orders, products, users) and the same lookups, which differ between the
//! two only in their error texts.

use crate::{Data, Kwargs, Num, dumps, field, field_mut, num_field, set, str_field};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The ids of an order's items, with repeats.
pub fn item_ids_of(order: &Value) -> Result<Vec<String>, String> {
    field(order, "items")?
        .as_array()
        .ok_or("order items are not a list")?
        .iter()
        .map(|item| str_field(item, "item_id").map(str::to_owned))
        .collect()
}

/// The first requested item that the order holds fewer times than requested
/// (the references' `list.count` check).
pub fn missing_item<'a>(requested: &'a [String], present: &[String]) -> Option<&'a str> {
    requested
        .iter()
        .find(|id| {
            requested.iter().filter(|other| other == id).count()
                > present.iter().filter(|other| other == id).count()
        })
        .map(String::as_str)
}

/// Item ids in Python's `sorted` order, as the order records them.
pub fn sorted(mut ids: Vec<String>) -> Vec<String> {
    ids.sort();
    ids
}

/// Whether a payment method is a gift card (the only kind with a balance).
pub fn is_gift_card(method: &Value) -> Result<bool, String> {
    Ok(str_field(method, "source")? == "gift_card")
}

/// `balance += delta` then `balance = round(balance, 2)` on a user's payment method.
pub fn adjust_balance(user: &mut Value, payment_method_id: &str, delta: Num) -> Result<(), String> {
    let method = field_mut(field_mut(user, "payment_methods")?, payment_method_id)?;
    let balance = (num_field(method, "balance")? + delta).round(2);
    set(method, "balance", balance.to_value());
    Ok(())
}

/// The fields of a user that the lookups compare.
#[derive(Deserialize)]
struct UserKeys {
    email: String,
    name: Name,
    address: Zip,
}

#[derive(Deserialize)]
struct Name {
    first_name: String,
    last_name: String,
}

#[derive(Deserialize)]
struct Zip {
    zip: String,
}

/// The first user whose e-mail matches, ignoring case.
pub fn find_user_by_email(data: &Data<'_>, email: &str) -> Result<Option<String>, String> {
    let email = email.to_lowercase();
    Ok(data
        .scan::<UserKeys>("users")?
        .into_iter()
        .find(|(_, user)| user.email.to_lowercase() == email)
        .map(|(user_id, _)| user_id))
}

/// The first user with these names (ignoring case) and this zip code.
pub fn find_user_by_name_zip(
    data: &Data<'_>,
    first_name: &str,
    last_name: &str,
    zip: &str,
) -> Result<Option<String>, String> {
    let (first_name, last_name) = (first_name.to_lowercase(), last_name.to_lowercase());
    Ok(data
        .scan::<UserKeys>("users")?
        .into_iter()
        .find(|(_, user)| {
            user.name.first_name.to_lowercase() == first_name
                && user.name.last_name.to_lowercase() == last_name
                && user.address.zip == zip
        })
        .map(|(user_id, _)| user_id))
}

/// The fields of a product that the catalogue lists.
#[derive(Deserialize)]
struct ProductName {
    name: String,
    product_id: Value,
}

/// `list_all_product_types`: `{name: product_id}` sorted by name (a later
/// product with the same name replaces the id, as in a Python dict).
pub fn product_types(data: &Data<'_>) -> Result<String, String> {
    let by_name: BTreeMap<String, Value> = data
        .scan::<ProductName>("products")?
        .into_iter()
        .map(|(_, product)| (product.name, product.product_id))
        .collect();
    Ok(dumps(&Value::Object(by_name.into_iter().collect())))
}

/// An address object from the address arguments, its keys in `order`.
pub fn address(kwargs: &Kwargs, order: &[&str]) -> Result<Value, String> {
    let mut map = Map::new();
    for name in order {
        map.insert((*name).to_owned(), kwargs.get(name)?.clone());
    }
    Ok(Value::Object(map))
}
