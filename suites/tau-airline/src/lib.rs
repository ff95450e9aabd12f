//! τ-bench `airline`: an airline's reservations desk, as a Forge component.
//!
//! The database has three tables — `flights`, `reservations`, `users` — whose
//! records are the reference's JSON objects. Every tool reproduces the
//! reference tool's output string and database change exactly, quirks
//! included: new reservations are `HATHAT`, `HATHAU`, `HATHAV`; booking does
//! not touch seat counts; a one-stop search names the next day `2024-05-{d+1}`
//! without zero padding and merges the second leg with the first leg's date.
//! The tool schemas the agent sees are the reference's (`tools.json`, from
//! τ-bench, MIT licence, © 2024 Sierra).

use forge_tau_guest::airline::{AIRPORTS, NOW};
use forge_tau_guest::{
    Data, Kwargs, Num, Tool, calculate, dumps, field, field_mut, list_mut, next_day, num,
    num_field, py_str, set, str_field, think, transfer_to_human_agents, type_name,
};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// The schemas the agent sees, in the reference's order.
pub const SCHEMAS: &str = include_str!("../tools.json");

pub static TOOLS: &[Tool] = &[
    Tool {
        name: "book_reservation",
        parameters: &[
            "user_id",
            "origin",
            "destination",
            "flight_type",
            "cabin",
            "flights",
            "passengers",
            "payment_methods",
            "total_baggages",
            "nonfree_baggages",
            "insurance",
        ],
        run: book_reservation,
    },
    Tool {
        name: "calculate",
        parameters: &["expression"],
        run: calculate,
    },
    Tool {
        name: "cancel_reservation",
        parameters: &["reservation_id"],
        run: cancel_reservation,
    },
    Tool {
        name: "get_reservation_details",
        parameters: &["reservation_id"],
        run: get_reservation_details,
    },
    Tool {
        name: "get_user_details",
        parameters: &["user_id"],
        run: get_user_details,
    },
    Tool {
        name: "list_all_airports",
        parameters: &[],
        run: list_all_airports,
    },
    Tool {
        name: "search_direct_flight",
        parameters: &["origin", "destination", "date"],
        run: search_direct_flight,
    },
    Tool {
        name: "search_onestop_flight",
        parameters: &["origin", "destination", "date"],
        run: search_onestop_flight,
    },
    Tool {
        name: "send_certificate",
        parameters: &["user_id", "amount"],
        run: send_certificate,
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
    Tool {
        name: "update_reservation_baggages",
        parameters: &[
            "reservation_id",
            "total_baggages",
            "nonfree_baggages",
            "payment_id",
        ],
        run: update_reservation_baggages,
    },
    Tool {
        name: "update_reservation_flights",
        parameters: &["reservation_id", "cabin", "flights", "payment_id"],
        run: update_reservation_flights,
    },
    Tool {
        name: "update_reservation_passengers",
        parameters: &["reservation_id", "passengers"],
        run: update_reservation_passengers,
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

/// `len(x)` of a list field or argument.
fn len(value: &Value) -> Result<i64, String> {
    value
        .as_array()
        .map(|items| items.len() as i64)
        .ok_or_else(|| format!("object of type {} has no len()", type_name(value)))
}

/// Looks up flight `flight` (`{flight_number, date}`) for `passengers`
/// travellers in `cabin`, checks it can be sold, and fills in its price,
/// origin and destination as the reference does.
fn price_flight(
    data: &Data<'_>,
    flight: &mut Value,
    cabin: &str,
    passengers: i64,
) -> Result<Num, String> {
    let flight_number = str_field(flight, "flight_number")?.to_owned();
    let date = str_field(flight, "date")?.to_owned();
    let flight_data = data
        .get("flights", &flight_number)?
        .ok_or_else(|| format!("flight {flight_number} not found"))?;
    let Some(on_date) = field(&flight_data, "dates")?.get(&date) else {
        return Err(format!("flight {flight_number} not found on date {date}"));
    };
    if str_field(on_date, "status")? != "available" {
        return Err(format!(
            "flight {flight_number} not available on date {date}"
        ));
    }
    if num_field(field(on_date, "available_seats")?, cabin)? < Num::Int(passengers) {
        return Err(format!("not enough seats on flight {flight_number}"));
    }
    let price = field(field(on_date, "prices")?, cabin)?.clone();
    set(flight, "price", price.clone());
    set(flight, "origin", field(&flight_data, "origin")?.clone());
    set(
        flight,
        "destination",
        field(&flight_data, "destination")?.clone(),
    );
    Ok(num(&price)? * Num::Int(passengers))
}

fn book_reservation(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let user_id = kwargs.str("user_id")?;
    let cabin = kwargs.str("cabin")?;
    let passengers = kwargs.get("passengers")?;
    let payment_methods = kwargs.list("payment_methods")?;
    let nonfree_baggages = kwargs.num("nonfree_baggages")?;
    let insurance = kwargs.get("insurance")?;
    let mut user = data.get("users", user_id)?.ok_or("user not found")?;
    let reservation_id = ["HATHAT", "HATHAU"]
        .into_iter()
        .find(|id| !data.contains("reservations", id))
        .unwrap_or("HATHAV");
    let mut reservation = json!({
        "reservation_id": reservation_id,
        "user_id": user_id,
        "origin": kwargs.get("origin")?,
        "destination": kwargs.get("destination")?,
        "flight_type": kwargs.get("flight_type")?,
        "cabin": cabin,
        "flights": kwargs.get("flights")?,
        "passengers": passengers,
        "payment_history": payment_methods,
        "created_at": NOW,
        "total_baggages": kwargs.get("total_baggages")?,
        "nonfree_baggages": nonfree_baggages.to_value(),
        "insurance": insurance,
    });
    let travellers = len(passengers)?;
    let mut total = Num::Int(0);
    for flight in list_mut(&mut reservation, "flights")? {
        total = total + price_flight(data, flight, cabin, travellers)?;
    }
    if insurance.as_str() == Some("yes") {
        total = total + Num::Int(30 * travellers);
    }
    total = total + Num::Int(50) * nonfree_baggages;
    let methods = field(&user, "payment_methods")?;
    for payment in payment_methods {
        let payment_id = str_field(payment, "payment_id")?;
        let amount = num_field(payment, "amount")?;
        let Some(method) = methods.get(payment_id) else {
            return Err(format!("payment method {payment_id} not found"));
        };
        if ["gift_card", "certificate"].contains(&str_field(method, "source")?)
            && num_field(method, "amount")? < amount
        {
            return Err(format!("not enough balance in payment method {payment_id}"));
        }
    }
    let paid = payment_methods
        .iter()
        .try_fold(Num::Int(0), |sum, payment| {
            Ok::<_, String>(sum + num_field(payment, "amount")?)
        })?;
    if paid != total {
        return Err(format!(
            "payment amount does not add up, total price is {}, but paid {}",
            total.to_python_string(),
            paid.to_python_string()
        ));
    }
    for payment in payment_methods {
        let payment_id = str_field(payment, "payment_id")?;
        let amount = num_field(payment, "amount")?;
        let methods = field_mut(&mut user, "payment_methods")?;
        match str_field(field(methods, payment_id)?, "source")? {
            "gift_card" => {
                let method = field_mut(methods, payment_id)?;
                let balance = num_field(method, "amount")? - amount;
                set(method, "amount", balance.to_value());
            }
            "certificate" => {
                if let Value::Object(map) = methods {
                    map.shift_remove(payment_id);
                }
            }
            _ => {}
        }
    }
    list_mut(&mut user, "reservations")?.push(json!(reservation_id));
    data.put("reservations", reservation_id, &reservation)?;
    data.put("users", user_id, &user)?;
    Ok(dumps(&reservation))
}

fn cancel_reservation(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let reservation_id = kwargs.str("reservation_id")?;
    let mut reservation = data
        .get("reservations", reservation_id)?
        .ok_or("reservation not found")?;
    let refunds: Vec<Value> = field(&reservation, "payment_history")?
        .as_array()
        .ok_or("payment history is not a list")?
        .iter()
        .map(|payment| {
            Ok(json!({
                "payment_id": field(payment, "payment_id")?,
                "amount": (-num_field(payment, "amount")?).to_value(),
            }))
        })
        .collect::<Result<_, String>>()?;
    list_mut(&mut reservation, "payment_history")?.extend(refunds);
    set(&mut reservation, "status", json!("cancelled"));
    data.put("reservations", reservation_id, &reservation)?;
    Ok(dumps(&reservation))
}

fn get_reservation_details(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    // The reference says "user not found" here too.
    match data.get("reservations", kwargs.str("reservation_id")?)? {
        Some(reservation) => Ok(dumps(&reservation)),
        None => Err("user not found".to_owned()),
    }
}

fn get_user_details(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    match data.get("users", kwargs.str("user_id")?)? {
        Some(user) => Ok(dumps(&user)),
        None => Err("user not found".to_owned()),
    }
}

fn list_all_airports(_: &mut Data<'_>, _: &Kwargs) -> Result<String, String> {
    let map: Map<String, Value> = AIRPORTS
        .iter()
        .map(|(code, city)| ((*code).to_owned(), json!(city)))
        .collect();
    Ok(dumps(&Value::Object(map)))
}

/// A flight without its `dates`, merged with the record of one date (the
/// reference's `{k: v for k, v in flight.items() if k != "dates"}` + `update`).
fn flight_on(flight: &Value, on_date: &Value) -> Value {
    let mut result: Map<String, Value> = flight
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(key, _)| *key != "dates")
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    if let Some(on_date) = on_date.as_object() {
        for (key, value) in on_date {
            result.insert(key.clone(), value.clone());
        }
    }
    Value::Object(result)
}

/// `flight["dates"][date]` when the flight flies that day and it is available.
fn available_on<'f>(flight: &'f Value, date: &str) -> Result<Option<&'f Value>, String> {
    let Some(on_date) = field(flight, "dates")?.get(date) else {
        return Ok(None);
    };
    Ok((str_field(on_date, "status")? == "available").then_some(on_date))
}

/// The fields of a flight that the searches compare; the rest of a flight
/// (its calendar of dates) is read only for the flights that match.
#[derive(Deserialize)]
struct Route {
    origin: String,
    destination: String,
    scheduled_departure_time_est: String,
    scheduled_arrival_time_est: String,
}

fn search_direct_flight(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let origin = kwargs.str("origin")?;
    let destination = kwargs.str("destination")?;
    let date = kwargs.str("date")?;
    let mut results = Vec::new();
    for (number, route) in data.scan::<Route>("flights")? {
        if route.origin != origin || route.destination != destination {
            continue;
        }
        let flight = data.require("flights", &number)?;
        if let Some(on_date) = available_on(&flight, date)? {
            results.push(flight_on(&flight, on_date));
        }
    }
    Ok(dumps(&Value::Array(results)))
}

fn search_onestop_flight(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let origin = kwargs.str("origin")?;
    let destination = kwargs.str("destination")?;
    let date = kwargs.str("date")?;
    let routes = data.scan::<Route>("flights")?;
    let mut full: BTreeMap<&str, Value> = BTreeMap::new();
    let mut results = Vec::new();
    for (first_number, first) in &routes {
        if first.origin != origin {
            continue;
        }
        for (second_number, second) in &routes {
            if second.destination != destination || first.destination != second.origin {
                continue;
            }
            let arrival = &first.scheduled_arrival_time_est;
            let second_date = if arrival.contains("+1") {
                next_day(date)?
            } else {
                date.to_owned()
            };
            if *arrival > second.scheduled_departure_time_est {
                continue;
            }
            for number in [first_number, second_number] {
                if !full.contains_key(number.as_str()) {
                    full.insert(number, data.require("flights", number)?);
                }
            }
            let (first, second) = (&full[first_number.as_str()], &full[second_number.as_str()]);
            let first_dates = field(first, "dates")?;
            let second_dates = field(second, "dates")?;
            if first_dates.get(date).is_none() || second_dates.get(&second_date).is_none() {
                continue;
            }
            if str_field(&first_dates[date], "status")? == "available"
                && str_field(&second_dates[&second_date], "status")? == "available"
            {
                let mut leg1 = flight_on(first, &first_dates[date]);
                set(&mut leg1, "date", json!(date));
                // The reference merges the second leg with the first leg's date.
                let mut leg2 = flight_on(second, field(second_dates, date)?);
                set(&mut leg2, "date", json!(second_date));
                results.push(json!([leg1, leg2]));
            }
        }
    }
    Ok(dumps(&Value::Array(results)))
}

fn send_certificate(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let user_id = kwargs.str("user_id")?;
    let amount = kwargs.get("amount")?;
    let mut user = data.get("users", user_id)?.ok_or("user not found")?;
    for id in [3221322, 3221323, 3221324] {
        let payment_id = format!("certificate_{id}");
        let methods = field_mut(&mut user, "payment_methods")?;
        if methods.get(&payment_id).is_none() {
            set(
                methods,
                &payment_id,
                json!({"source": "certificate", "amount": amount, "id": payment_id}),
            );
            data.put("users", user_id, &user)?;
            // As the reference's f-string shows it: a string without quotes.
            let amount = num(amount).map_or_else(|_| py_str(amount), Num::to_python_string);
            return Ok(format!(
                "Certificate {payment_id} added to user {user_id} with amount {amount}."
            ));
        }
    }
    // The reference returns None here, which its episode loop cannot represent.
    Err("the user already has three certificates".to_owned())
}

/// The user's payment method `payment_id` for changing `reservation`, checked
/// as the reference checks it for a charge of `total`.
fn charge_method(user: &Value, payment_id: &str, total: Num) -> Result<(), String> {
    let Some(method) = field(user, "payment_methods")?.get(payment_id) else {
        return Err("payment method not found".to_owned());
    };
    match str_field(method, "source")? {
        "certificate" => Err("certificate cannot be used to update reservation".to_owned()),
        "gift_card" if num_field(method, "amount")? < total => {
            Err("gift card balance is not enough".to_owned())
        }
        _ => Ok(()),
    }
}

/// Charges `total` to the user's payment method `payment_id`: a gift card's
/// balance goes down, and a non-zero charge is added to the reservation's
/// payment history.
fn charge(
    user: &mut Value,
    reservation: &mut Value,
    payment_id: &str,
    total: Num,
) -> Result<(), String> {
    let method = field_mut(field_mut(user, "payment_methods")?, payment_id)?;
    if str_field(method, "source")? == "gift_card" {
        let balance = num_field(method, "amount")? - total;
        set(method, "amount", balance.to_value());
    }
    if total != Num::Int(0) {
        list_mut(reservation, "payment_history")?
            .push(json!({"payment_id": payment_id, "amount": total.to_value()}));
    }
    Ok(())
}

/// The reservation `reservation_id` and the user who holds it.
fn reservation_and_user(
    data: &Data<'_>,
    reservation_id: &str,
) -> Result<(Value, String, Value), String> {
    let reservation = data
        .get("reservations", reservation_id)?
        .ok_or("reservation not found")?;
    let user_id = str_field(&reservation, "user_id")?.to_owned();
    let user = data.require("users", &user_id)?;
    Ok((reservation, user_id, user))
}

fn update_reservation_baggages(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let reservation_id = kwargs.str("reservation_id")?;
    let total_baggages = kwargs.get("total_baggages")?;
    let nonfree_baggages = kwargs.num("nonfree_baggages")?;
    let payment_id = kwargs.str("payment_id")?;
    let (mut reservation, user_id, mut user) = reservation_and_user(data, reservation_id)?;
    let extra = nonfree_baggages - num_field(&reservation, "nonfree_baggages")?;
    let extra = if extra > Num::Int(0) {
        extra
    } else {
        Num::Int(0)
    };
    let total = Num::Int(50) * extra;
    charge_method(&user, payment_id, total)?;
    set(&mut reservation, "total_baggages", total_baggages.clone());
    set(
        &mut reservation,
        "nonfree_baggages",
        nonfree_baggages.to_value(),
    );
    charge(&mut user, &mut reservation, payment_id, total)?;
    data.put("users", &user_id, &user)?;
    data.put("reservations", reservation_id, &reservation)?;
    Ok(dumps(&reservation))
}

fn update_reservation_flights(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let reservation_id = kwargs.str("reservation_id")?;
    let cabin = kwargs.str("cabin")?;
    let mut flights = kwargs.list("flights")?.clone();
    let payment_id = kwargs.str("payment_id")?;
    let (mut reservation, user_id, mut user) = reservation_and_user(data, reservation_id)?;
    let travellers = len(field(&reservation, "passengers")?)?;
    let same_cabin = str_field(&reservation, "cabin")? == cabin;
    let booked = field(&reservation, "flights")?
        .as_array()
        .ok_or("flights are not a list")?
        .clone();
    let mut total = Num::Int(0);
    for flight in &mut flights {
        let kept = booked.iter().find(|booked| {
            same_cabin
                && booked.get("flight_number") == flight.get("flight_number")
                && booked.get("date") == flight.get("date")
        });
        if let Some(kept) = kept {
            let price = field(kept, "price")?.clone();
            total = total + num(&price)? * Num::Int(travellers);
            set(flight, "price", price);
            set(flight, "origin", field(kept, "origin")?.clone());
            set(flight, "destination", field(kept, "destination")?.clone());
            continue;
        }
        total = total + price_flight(data, flight, cabin, travellers)?;
    }
    let old = booked.iter().try_fold(Num::Int(0), |sum, flight| {
        Ok::<_, String>(sum + num_field(flight, "price")?)
    })?;
    total = total - old * Num::Int(travellers);
    charge_method(&user, payment_id, total)?;
    set(&mut reservation, "flights", Value::Array(flights));
    charge(&mut user, &mut reservation, payment_id, total)?;
    data.put("users", &user_id, &user)?;
    data.put("reservations", reservation_id, &reservation)?;
    Ok(dumps(&reservation))
}

fn update_reservation_passengers(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let reservation_id = kwargs.str("reservation_id")?;
    let passengers = kwargs.get("passengers")?;
    let mut reservation = data
        .get("reservations", reservation_id)?
        .ok_or("reservation not found")?;
    if len(passengers)? != len(field(&reservation, "passengers")?)? {
        return Err("number of passengers does not match".to_owned());
    }
    set(&mut reservation, "passengers", passengers.clone());
    data.put("reservations", reservation_id, &reservation)?;
    Ok(dumps(&reservation))
}
