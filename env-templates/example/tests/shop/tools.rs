//! The initial state and the tools' behaviour on it.

use std::collections::BTreeSet;

use forge_guest::{Store, Value, json};

use crate::store::{MemStore, bundle_json, call};

fn cents(amount: f64) -> i64 {
    (amount * 100.0).round() as i64
}

fn money(value: &Value) -> i64 {
    cents(value.as_f64().expect("an amount of money"))
}

/// Every record is stored under its own id, every order's user and products
/// exist, and every order's total is the sum of what its items cost.
#[test]
fn initial_state_is_consistent() {
    let store = MemStore::initial();
    let state = store.snapshot();
    let (users, products, orders) = (&state["users"], &state["products"], &state["orders"]);
    assert_eq!((users.len(), products.len(), orders.len()), (8, 15, 14));
    for (collection, id_field) in [
        ("users", "user_id"),
        ("products", "product_id"),
        ("orders", "order_id"),
    ] {
        for (key, record) in &state[collection] {
            assert_eq!(
                record[id_field],
                key.as_str(),
                "{collection}/{key} is stored under another id"
            );
        }
    }

    let emails: BTreeSet<&str> = users
        .values()
        .map(|user| user["email"].as_str().unwrap())
        .collect();
    assert_eq!(emails.len(), users.len(), "emails must be unique");
    for user in users.values() {
        assert!(money(&user["balance"]) >= 0);
        assert!(["basic", "gold"].contains(&user["membership"].as_str().unwrap()));
    }

    let categories: BTreeSet<&str> = products
        .values()
        .map(|product| product["category"].as_str().unwrap())
        .collect();
    assert_eq!(categories.len(), 4);
    for product in products.values() {
        assert!(money(&product["price"]) > 0 && product["stock"].as_i64().unwrap() >= 0);
    }

    let mut statuses = BTreeSet::new();
    for (key, order) in orders {
        assert!(
            users.contains_key(order["user_id"].as_str().unwrap()),
            "{key}: unknown user"
        );
        let items = order["items"].as_array().unwrap();
        assert!(!items.is_empty(), "{key}: no items");
        let mut sum = 0;
        for item in items {
            assert!(
                products.contains_key(item["product_id"].as_str().unwrap()),
                "{key}: unknown product"
            );
            let quantity = item["quantity"].as_i64().unwrap();
            assert!(quantity >= 1, "{key}: bad quantity");
            sum += money(&item["unit_price"]) * quantity;
        }
        assert_eq!(
            money(&order["total"]),
            sum,
            "{key}: total is not the sum of its items"
        );
        let status = order["status"].as_str().unwrap();
        statuses.insert(status);
        assert_eq!(
            order.get("cancel_reason").is_some(),
            status == "cancelled",
            "{key}: cancel_reason"
        );
        assert_eq!(
            order.get("returned_items").is_some(),
            status == "returned",
            "{key}: returned_items"
        );
        for returned in order
            .get("returned_items")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            assert!(
                items.iter().any(|item| item["product_id"] == *returned),
                "{key}: returned a stranger"
            );
        }
    }
    let all = BTreeSet::from(["pending", "shipped", "delivered", "cancelled", "returned"]);
    assert_eq!(statuses, all, "orders must cover every status");
}

#[test]
fn manifest_names_the_shop() {
    let environment = bundle_json("manifest.json");
    assert_eq!(environment["name"], "shop");
    assert!(!environment["description"].as_str().unwrap().is_empty());
    assert_eq!(
        environment["verify"]["unordered_lists"],
        json!(["orders.returned_items"])
    );
}

/// Failed preconditions are answered with a precise message and change nothing.
#[test]
fn failed_preconditions_change_nothing() {
    let cases = [
        (
            "cancel_order",
            json!({ "order_id": "o1", "reason": "no longer needed" }),
            "order o1 is delivered; only pending orders can be cancelled",
        ),
        (
            "cancel_order",
            json!({ "order_id": "o2", "reason": "too expensive" }),
            "reason must be one of: no longer needed, ordered by mistake",
        ),
        (
            "place_order",
            json!({ "user_id": "u1", "items": [{ "product_id": "p6", "quantity": 3 }] }),
            "only 2 of p6 (Cast Iron Skillet) in stock; 3 requested",
        ),
        (
            "place_order",
            json!({ "user_id": "u4", "items": [{ "product_id": "p13", "quantity": 1 }] }),
            "balance 0.00 of user u4 is below the order total 16.49",
        ),
        (
            "place_order",
            json!({ "user_id": "u1", "items": [
                { "product_id": "p8", "quantity": 1 },
                { "product_id": "p99", "quantity": 1 },
            ] }),
            "product p99 not found",
        ),
        (
            "place_order",
            json!({ "user_id": "u1", "items": [
                { "product_id": "p8", "quantity": 1 },
                { "product_id": "p8", "quantity": 1 },
            ] }),
            "product p8 is listed twice; give its total quantity once",
        ),
        (
            "place_order",
            json!({ "user_id": "u99", "items": [{ "product_id": "p8", "quantity": 1 }] }),
            "user u99 not found",
        ),
        (
            "get_user",
            json!({ "user_id": "u99" }),
            "user u99 not found",
        ),
        (
            "find_user_by_email",
            json!({ "email": "nobody@example.com" }),
            "no user with email nobody@example.com",
        ),
        (
            "return_items",
            json!({ "order_id": "o2", "product_ids": ["p7"] }),
            "order o2 is pending; only delivered orders can be returned",
        ),
        (
            "return_items",
            json!({ "order_id": "o1", "product_ids": ["p8", "p7"] }),
            "product p7 is not an item of order o1",
        ),
        (
            "update_order_address",
            json!({ "order_id": "o3", "street": "1 Main St", "city": "Portland", "zip": "97201" }),
            "order o3 is shipped; only pending orders can be redirected",
        ),
    ];
    let initial = MemStore::initial();
    for (tool, args, expected) in cases {
        let mut store = initial.clone();
        assert_eq!(
            call(&mut store, tool, &args),
            Err(expected.to_owned()),
            "{tool} {args}"
        );
        assert!(
            store.snapshot() == initial.snapshot(),
            "{tool} {args} changed the state"
        );
    }
}

#[test]
fn place_order_charges_the_user_and_takes_stock() {
    let mut store = MemStore::initial();
    let items =
        json!([{ "product_id": "p5", "quantity": 2 }, { "product_id": "p6", "quantity": 1 }]);
    let order = call(
        &mut store,
        "place_order",
        &json!({ "user_id": "u7", "items": items }),
    )
    .unwrap();
    assert_eq!(order["order_id"], "o15");
    assert_eq!(order["status"], "pending");
    assert_eq!(money(&order["total"]), 12489);
    assert_eq!(
        order["items"][0],
        json!({ "product_id": "p5", "quantity": 2, "unit_price": 44.95 })
    );
    assert_eq!(order["address"], store.record("users", "u7")["address"]);
    assert_eq!(store.record("orders", "o15"), order);
    assert_eq!(money(&store.record("users", "u7")["balance"]), 37511);
    assert_eq!(store.record("products", "p5")["stock"], 6);
    assert_eq!(store.record("products", "p6")["stock"], 1);
}

#[test]
fn cancel_order_restocks_and_refunds() {
    let mut store = MemStore::initial();
    let answer = call(
        &mut store,
        "cancel_order",
        &json!({ "order_id": "o6", "reason": "no longer needed" }),
    )
    .unwrap();
    assert_eq!(money(&answer["refund"]), 16898);
    assert_eq!(money(&answer["balance"]), 57923);
    let order = store.record("orders", "o6");
    assert_eq!(
        (&order["status"], &order["cancel_reason"]),
        (&json!("cancelled"), &json!("no longer needed"))
    );
    assert_eq!(money(&store.record("users", "u3")["balance"]), 57923);
    assert_eq!(store.record("products", "p4")["stock"], 5);
    assert_eq!(store.record("products", "p2")["stock"], 32);
}

#[test]
fn return_items_refunds_the_price_paid() {
    let mut store = MemStore::initial();
    // o1 paid 64.99 for the earbuds, which cost 59.99 now.
    let answer = call(
        &mut store,
        "return_items",
        &json!({ "order_id": "o1", "product_ids": ["p1"] }),
    )
    .unwrap();
    assert_eq!(money(&answer["refund"]), 6499);
    let order = store.record("orders", "o1");
    assert_eq!(
        (&order["status"], &order["returned_items"]),
        (&json!("returned"), &json!(["p1"]))
    );
    assert_eq!(money(&store.record("users", "u1")["balance"]), 31499);
    let again = call(
        &mut store,
        "return_items",
        &json!({ "order_id": "o1", "product_ids": ["p8"] }),
    );
    assert_eq!(
        again,
        Err("order o1 is returned; only delivered orders can be returned".to_owned())
    );
}

#[test]
fn address_changes_touch_only_their_record() {
    let mut store = MemStore::initial();
    let address = json!({ "street": "77 Alder St", "city": "Portland", "zip": "97209" });
    let mut args = address.clone();
    args["order_id"] = json!("o2");
    call(&mut store, "update_order_address", &args).unwrap();
    assert_eq!(store.record("orders", "o2")["address"], address);
    assert_ne!(store.record("users", "u1")["address"], address);

    let mut args = address.clone();
    args["user_id"] = json!("u1");
    call(&mut store, "update_user_address", &args).unwrap();
    assert_eq!(store.record("users", "u1")["address"], address);
    assert_ne!(store.record("orders", "o3")["address"], address);
}

#[test]
fn searches_filter_in_key_order() {
    let mut store = MemStore::initial();
    let found = call(
        &mut store,
        "search_products",
        &json!({ "category": "books", "max_price": 18.99 }),
    )
    .unwrap();
    let ids: Vec<&str> = found
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["product_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["p11", "p12", "p9"]);
    let all = call(&mut store, "search_products", &json!({})).unwrap();
    assert_eq!(all.as_array().unwrap().len(), 15);
    let orders = call(&mut store, "list_user_orders", &json!({ "user_id": "u3" })).unwrap();
    assert_eq!(
        orders[0],
        json!({ "order_id": "o6", "status": "pending", "total": 168.98 })
    );
}

#[test]
fn fresh_keys_follow_the_wit_contract() {
    let mut store = MemStore::default();
    assert_eq!(store.fresh_key("orders", "o"), "o1");
    for key in ["o1", "o3"] {
        store.put("orders", key, "{}").unwrap();
    }
    // Two records: the first candidate is o3, which is taken.
    assert_eq!(store.fresh_key("orders", "o"), "o4");
}
