//! `shop`: a hand-written example Forge environment — customer service for an
//! online shop.
//!
//! The state holds three collections of JSON records: `users` (account, address,
//! store-credit balance), `products` (price, stock) and `orders` (items at the
//! price paid, total, status, shipping address). The tools below let an agent
//! look these up and act for a customer: place orders paid from store credit,
//! cancel pending orders, change addresses, and return delivered items.
//!
//! `bundle/` holds the environment's data: its description, initial state and
//! tasks with gold action sequences.

mod records;
mod tools;

use forge_guest::{Tool, Value, json};

/// The shop's tools, in the order the agent sees them.
pub static TOOLS: &[Tool] = &[
    Tool {
        name: "find_user_by_email",
        description: "Find a customer's user id from their email address.",
        parameters: || {
            object(
                json!({ "email": string("The customer's email address.") }),
                &["email"],
            )
        },
        run: tools::find_user_by_email,
    },
    Tool {
        name: "get_user",
        description: "Get a customer's account: name, email, address, store-credit balance \
                      in dollars and membership tier.",
        parameters: || object(json!({ "user_id": user_id() }), &["user_id"]),
        run: tools::get_user,
    },
    Tool {
        name: "search_products",
        description: "List products (id, name, price, stock), optionally only those of one \
                      category and/or at most a given price. Products with stock 0 are \
                      listed but cannot be ordered.",
        parameters: || {
            object(
                json!({
                    "category": string(
                        "Only products of this category: electronics, kitchen, books or outdoor."
                    ),
                    "max_price": number("Only products costing at most this many dollars."),
                }),
                &[],
            )
        },
        run: tools::search_products,
    },
    Tool {
        name: "get_product",
        description: "Get a product's details: name, category, price in dollars and stock.",
        parameters: || object(json!({ "product_id": product_id() }), &["product_id"]),
        run: tools::get_product,
    },
    Tool {
        name: "get_order",
        description: "Get an order's details: customer, items with the unit price paid, \
                      total, status and shipping address.",
        parameters: || object(json!({ "order_id": order_id() }), &["order_id"]),
        run: tools::get_order,
    },
    Tool {
        name: "list_user_orders",
        description: "List a customer's orders with their status and total.",
        parameters: || object(json!({ "user_id": user_id() }), &["user_id"]),
        run: tools::list_user_orders,
    },
    Tool {
        name: "place_order",
        description: "Place an order for a customer at current prices, paid from their store \
                      credit and shipped to their account address. Fails, changing nothing, if \
                      a product is unknown or short of stock or the balance does not cover the \
                      total. Returns the new pending order.",
        parameters: || {
            let item = object(
                json!({
                    "product_id": product_id(),
                    "quantity": integer("How many to order, at least 1."),
                }),
                &["product_id", "quantity"],
            );
            object(
                json!({
                    "user_id": user_id(),
                    "items": array("The products to order, each product at most once.", item),
                }),
                &["user_id", "items"],
            )
        },
        run: tools::place_order,
    },
    Tool {
        name: "cancel_order",
        description: "Cancel a pending order: its items go back to stock and its total is \
                      refunded to the customer's store credit. Orders that are not pending \
                      cannot be cancelled.",
        parameters: || {
            object(
                json!({
                    "order_id": order_id(),
                    "reason": {
                        "type": "string",
                        "description": "Why the customer cancels.",
                        "enum": tools::CANCEL_REASONS,
                    },
                }),
                &["order_id", "reason"],
            )
        },
        run: tools::cancel_order,
    },
    Tool {
        name: "update_user_address",
        description: "Change a customer's account address, where their future orders are \
                      shipped. Existing orders keep their address.",
        parameters: || address_parameters("user_id", user_id()),
        run: tools::update_user_address,
    },
    Tool {
        name: "update_order_address",
        description: "Change the shipping address of a pending order. Orders that are not \
                      pending cannot be redirected.",
        parameters: || address_parameters("order_id", order_id()),
        run: tools::update_order_address,
    },
    Tool {
        name: "return_items",
        description: "Return items of a delivered order: for each named product, its unit \
                      price paid times its quantity is refunded to the customer's store \
                      credit, and the order becomes returned (an order can be returned once). \
                      Only delivered orders can be returned.",
        parameters: || {
            let ids = array(
                "The ids of the order's products to return, each with all its quantity.",
                product_id(),
            );
            object(
                json!({ "order_id": order_id(), "product_ids": ids }),
                &["order_id", "product_ids"],
            )
        },
        run: tools::return_items,
    },
];

forge_guest::export_environment!(TOOLS);

/// An object schema with exactly `properties`, in the form OpenAI function
/// calling expects.
fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

fn string(description: &str) -> Value {
    json!({ "type": "string", "description": description })
}

fn integer(description: &str) -> Value {
    json!({ "type": "integer", "description": description })
}

fn number(description: &str) -> Value {
    json!({ "type": "number", "description": description })
}

fn array(description: &str, items: Value) -> Value {
    json!({ "type": "array", "description": description, "items": items })
}

fn user_id() -> Value {
    string("The customer's user id, such as \"u1\".")
}

fn product_id() -> Value {
    string("A product id, such as \"p1\".")
}

fn order_id() -> Value {
    string("An order id, such as \"o1\".")
}

/// The parameters of an address change: the record to change (`id`) and the
/// new address.
fn address_parameters(id: &str, id_schema: Value) -> Value {
    object(
        json!({
            id: id_schema,
            "street": string("Street and house number, such as \"12 Maple St\"."),
            "city": string("City."),
            "zip": string("ZIP code."),
        }),
        &[id, "street", "city", "zip"],
    )
}
