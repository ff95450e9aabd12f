//! τ²-bench `airline`: an airline's reservations desk, as a Forge component.
//!
//! The database has three tables — `flights`, `users`, `reservations` — whose
//! records the host holds as the reference's pydantic models dump them
//! (model field order, optional fields as `null`). Every tool reproduces the
//! reference tool's output (`json.dumps(model.model_dump())`, or
//! `"Error: {exception}"`) and database change exactly, including how it
//! differs from τ-bench: booking takes the booked seats off the flight,
//! changing flights also sets the new cabin, errors are capitalised, and a
//! one-stop search puts each leg's own date in its result. Records the tools
//! create are written in their model's field order. The tool schemas the
//! agent sees are the reference's (`tools.json`, from τ²-bench, MIT licence,
//! © 2025 Sierra).

use forge_tau_guest::airline::{AIRPORTS, NOW};
use forge_tau_guest::model::{Kind, build_all};
use forge_tau_guest::{
    Data, Kwargs, Num, Tool, calculate_tau2, dumps, field, field_mut, key_error, list_mut,
    next_day, num_field, set, str_field, transfer_to_human_agents,
};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// The schemas the agent sees, in the reference's order.
pub const SCHEMAS: &str = include_str!("../tools.json");

/// The toolkit class, as Python's `TypeError`s name its methods.
const CLASS: &str = "AirlineTools";

const FLIGHT_INFO: &[(&str, Kind)] = &[("flight_number", Kind::Str), ("date", Kind::Str)];
const PASSENGER: &[(&str, Kind)] = &[
    ("first_name", Kind::Str),
    ("last_name", Kind::Str),
    ("dob", Kind::Str),
];
const PAYMENT: &[(&str, Kind)] = &[("payment_id", Kind::Str), ("amount", Kind::Int)];

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
        run: calculate_tau2,
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
    Tool {
        name: "get_flight_status",
        parameters: &["flight_number", "date"],
        run: get_flight_status,
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

/// `_get_user`.
fn user(data: &Data<'_>, user_id: &str) -> Result<Value, String> {
    data.get("users", user_id)?
        .ok_or_else(|| format!("User {user_id} not found"))
}

/// `_get_reservation`.
fn reservation(data: &Data<'_>, reservation_id: &str) -> Result<Value, String> {
    data.get("reservations", reservation_id)?
        .ok_or_else(|| format!("Reservation {reservation_id} not found"))
}

/// `_get_flight`.
fn flight(data: &Data<'_>, flight_number: &str) -> Result<Value, String> {
    data.get("flights", flight_number)?
        .ok_or_else(|| format!("Flight {flight_number} not found"))
}

/// `_get_flight_instance`: the flight's status on `date`.
fn flight_instance<'f>(
    flight: &'f Value,
    flight_number: &str,
    date: &str,
) -> Result<&'f Value, String> {
    field(flight, "dates")?
        .get(date)
        .ok_or_else(|| format!("Flight {flight_number} not found on date {date}"))
}

/// The price per passenger of `flight_number` on `date` in `cabin`, after
/// the reference's checks that it can be sold to `travellers` passengers.
fn sellable_price(
    flight: &Value,
    flight_number: &str,
    date: &str,
    cabin: &str,
    travellers: usize,
) -> Result<Num, String> {
    let instance = flight_instance(flight, flight_number, date)?;
    if str_field(instance, "status")? != "available" {
        return Err(format!(
            "Flight {flight_number} not available on date {date}"
        ));
    }
    if num_field(field(instance, "available_seats")?, cabin)? < Num::Int(travellers as i64) {
        return Err(format!("Not enough seats on flight {flight_number}"));
    }
    num_field(field(instance, "prices")?, cabin)
}

/// A `ReservationFlight`, in its model's field order.
fn reservation_flight(
    flight: &Value,
    flight_number: &str,
    date: &str,
    price: Num,
) -> Result<Value, String> {
    Ok(json!({
        "flight_number": flight_number,
        "origin": field(flight, "origin")?,
        "destination": field(flight, "destination")?,
        "date": date,
        "price": price.to_value(),
    }))
}

/// A `Payment`, in its model's field order.
fn payment(payment_id: &str, amount: Num) -> Value {
    json!({"payment_id": payment_id, "amount": amount.to_value()})
}

/// `len(reservation.passengers)`.
fn passenger_count(reservation: &Value) -> Result<usize, String> {
    field(reservation, "passengers")?
        .as_array()
        .map(Vec::len)
        .ok_or_else(|| "passengers are not a list".to_owned())
}

fn book_reservation(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let flights = build_all("FlightInfo", FLIGHT_INFO, kwargs.list("flights")?)?;
    let passengers = build_all("Passenger", PASSENGER, kwargs.list("passengers")?)?;
    let payments = build_all("Payment", PAYMENT, kwargs.list("payment_methods")?)?;
    let user_id = kwargs.str("user_id")?;
    let cabin = kwargs.str("cabin")?;
    let insurance = kwargs.str("insurance")?;
    let nonfree_baggages = kwargs.num("nonfree_baggages")?;
    let mut user = user(data, user_id)?;
    let reservation_id = ["HATHAT", "HATHAU", "HATHAV"]
        .into_iter()
        .find(|id| !data.contains("reservations", id))
        .ok_or("Too many reservations")?;
    let travellers = passengers.len();
    let mut total = Num::Int(0);
    let mut booked = Vec::with_capacity(flights.len());
    let mut flight_records: BTreeMap<String, Value> = BTreeMap::new();
    for info in &flights {
        let flight_number = str_field(info, "flight_number")?;
        let date = str_field(info, "date")?;
        if !flight_records.contains_key(flight_number) {
            flight_records.insert(flight_number.to_owned(), flight(data, flight_number)?);
        }
        let record = &flight_records[flight_number];
        let price = sellable_price(record, flight_number, date, cabin, travellers)?;
        booked.push(reservation_flight(record, flight_number, date, price)?);
        total = total + price * Num::Int(travellers as i64);
    }
    if insurance == "yes" {
        total = total + Num::Int(30 * travellers as i64);
    }
    total = total + Num::Int(50) * nonfree_baggages;
    let methods = field(&user, "payment_methods")?;
    for payment in &payments {
        let payment_id = str_field(payment, "payment_id")?;
        let Some(method) = methods.get(payment_id) else {
            return Err(format!("Payment method {payment_id} not found"));
        };
        if ["gift_card", "certificate"].contains(&str_field(method, "source")?)
            && num_field(method, "amount")? < num_field(payment, "amount")?
        {
            return Err(format!("Not enough balance in payment method {payment_id}"));
        }
    }
    let paid = payments.iter().try_fold(Num::Int(0), |sum, payment| {
        Ok::<_, String>(sum + num_field(payment, "amount")?)
    })?;
    if paid != total {
        return Err(format!(
            "Payment amount does not add up, total price is {}, but paid {}",
            total.to_python_string(),
            paid.to_python_string()
        ));
    }
    for payment in &payments {
        pay(
            &mut user,
            str_field(payment, "payment_id")?,
            num_field(payment, "amount")?,
        )?;
    }
    for info in &flights {
        let record = flight_records
            .get_mut(str_field(info, "flight_number")?)
            .ok_or("flight not loaded")?;
        let seats = field_mut(
            field_mut(field_mut(record, "dates")?, str_field(info, "date")?)?,
            "available_seats",
        )?;
        let left = num_field(seats, cabin)? - Num::Int(travellers as i64);
        set(seats, cabin, left.to_value());
    }
    let reservation = json!({
        "reservation_id": reservation_id,
        "user_id": user_id,
        "origin": kwargs.get("origin")?,
        "destination": kwargs.get("destination")?,
        "flight_type": kwargs.get("flight_type")?,
        "cabin": cabin,
        "flights": booked,
        "passengers": passengers,
        "payment_history": payments,
        "created_at": NOW,
        "total_baggages": kwargs.get("total_baggages")?,
        "nonfree_baggages": nonfree_baggages.to_value(),
        "insurance": insurance,
        "status": null,
    });
    list_mut(&mut user, "reservations")?.push(json!(reservation_id));
    for (flight_number, record) in &flight_records {
        data.put("flights", flight_number, record)?;
    }
    data.put("reservations", reservation_id, &reservation)?;
    data.put("users", user_id, &user)?;
    Ok(dumps(&reservation))
}

/// Takes `amount` from the user's payment method `payment_id` at booking: a
/// gift card's balance goes down, a certificate is used up.
fn pay(user: &mut Value, payment_id: &str, amount: Num) -> Result<(), String> {
    let methods = field_mut(user, "payment_methods")?;
    match str_field(field(methods, payment_id)?, "source")? {
        "gift_card" => {
            let method = field_mut(methods, payment_id)?;
            let balance = num_field(method, "amount")? - amount;
            set(method, "amount", balance.to_value());
        }
        "certificate" => {
            let Value::Object(map) = methods else {
                return Err("payment methods are not a dict".to_owned());
            };
            map.shift_remove(payment_id)
                .ok_or_else(|| key_error(payment_id))?;
        }
        _ => {}
    }
    Ok(())
}

fn cancel_reservation(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let reservation_id = kwargs.str("reservation_id")?;
    let mut reservation = reservation(data, reservation_id)?;
    let refunds: Vec<Value> = field(&reservation, "payment_history")?
        .as_array()
        .ok_or("payment history is not a list")?
        .iter()
        .map(|paid| {
            Ok(payment(
                str_field(paid, "payment_id")?,
                -num_field(paid, "amount")?,
            ))
        })
        .collect::<Result<_, String>>()?;
    list_mut(&mut reservation, "payment_history")?.extend(refunds);
    set(&mut reservation, "status", json!("cancelled"));
    data.put("reservations", reservation_id, &reservation)?;
    Ok(dumps(&reservation))
}

fn get_reservation_details(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    Ok(dumps(&reservation(data, kwargs.str("reservation_id")?)?))
}

fn get_user_details(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    Ok(dumps(&user(data, kwargs.str("user_id")?)?))
}

/// A list of `AirportCode` models.
fn list_all_airports(_: &mut Data<'_>, _: &Kwargs) -> Result<String, String> {
    let airports: Vec<Value> = AIRPORTS
        .iter()
        .map(|(iata, city)| json!({"iata": iata, "city": city}))
        .collect();
    Ok(dumps(&Value::Array(airports)))
}

/// The fields of a flight that the searches compare; the rest of a flight
/// (its calendar of dates) is read only for the flights that match.
#[derive(Deserialize)]
struct Route {
    origin: String,
    destination: String,
    scheduled_departure_time_est: String,
}

/// The flights, as the searches read them: every route up front, a flight's
/// calendar of dates only once a route matches (and then only once).
struct Timetable<'d, 'a> {
    data: &'d Data<'a>,
    routes: Vec<(String, Route)>,
    calendars: BTreeMap<String, Value>,
}

impl<'d, 'a> Timetable<'d, 'a> {
    fn new(data: &'d Data<'a>) -> Result<Self, String> {
        Ok(Self {
            data,
            routes: data.scan::<Route>("flights")?,
            calendars: BTreeMap::new(),
        })
    }

    /// The reference's `_search_direct_flight`: `DirectFlight` models of
    /// the flights available on `date`, each filter applied when given.
    /// (Flights are scanned in key order, the order of the reference's file.)
    fn direct(
        &mut self,
        date: &str,
        origin: Option<&str>,
        destination: Option<&str>,
        leave_after: Option<&str>,
    ) -> Result<Vec<Map<String, Value>>, String> {
        let mut results = Vec::new();
        for (flight_number, route) in &self.routes {
            if origin.is_some_and(|origin| route.origin != origin)
                || destination.is_some_and(|destination| route.destination != destination)
                || leave_after
                    .is_some_and(|time| route.scheduled_departure_time_est.as_str() < time)
            {
                continue;
            }
            if !self.calendars.contains_key(flight_number) {
                let record = flight(self.data, flight_number)?;
                self.calendars.insert(flight_number.clone(), record);
            }
            let flight = &self.calendars[flight_number];
            let Some(instance) = field(flight, "dates")?.get(date) else {
                continue;
            };
            if str_field(instance, "status")? == "available" {
                results.push(direct_flight(flight, instance)?);
            }
        }
        Ok(results)
    }
}

/// A `DirectFlight`, in its model's field order (its `date` unset).
fn direct_flight(flight: &Value, instance: &Value) -> Result<Map<String, Value>, String> {
    let mut direct = Map::new();
    for name in ["flight_number", "origin", "destination"] {
        direct.insert(name.to_owned(), field(flight, name)?.clone());
    }
    direct.insert("status".to_owned(), json!("available"));
    for name in ["scheduled_departure_time_est", "scheduled_arrival_time_est"] {
        direct.insert(name.to_owned(), field(flight, name)?.clone());
    }
    direct.insert("date".to_owned(), Value::Null);
    for name in ["available_seats", "prices"] {
        direct.insert(name.to_owned(), field(instance, name)?.clone());
    }
    Ok(direct)
}

fn search_direct_flight(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let flights = Timetable::new(data)?.direct(
        kwargs.str("date")?,
        Some(kwargs.str("origin")?),
        Some(kwargs.str("destination")?),
        None,
    )?;
    Ok(dumps(&Value::Array(
        flights.into_iter().map(Value::Object).collect(),
    )))
}

fn search_onestop_flight(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let origin = kwargs.str("origin")?;
    let destination = kwargs.str("destination")?;
    let date = kwargs.str("date")?;
    let mut timetable = Timetable::new(data)?;
    let mut results = Vec::new();
    for mut first in timetable.direct(date, Some(origin), None, None)? {
        first.insert("date".to_owned(), json!(date));
        let arrival = str_field_of(&first, "scheduled_arrival_time_est")?;
        let second_date = if arrival.contains("+1") {
            next_day(date)?
        } else {
            date.to_owned()
        };
        let stop = str_field_of(&first, "destination")?;
        for mut second in
            timetable.direct(&second_date, Some(&stop), Some(destination), Some(&arrival))?
        {
            second.insert("date".to_owned(), json!(second_date));
            results.push(json!([first, second]));
        }
    }
    Ok(dumps(&Value::Array(results)))
}

/// A string field of a result being built.
fn str_field_of(map: &Map<String, Value>, key: &str) -> Result<String, String> {
    map.get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| key_error(key))
}

fn send_certificate(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let user_id = kwargs.str("user_id")?;
    let amount = kwargs.num("amount")?;
    let mut user = user(data, user_id)?;
    for id in [3221322, 3221323, 3221324] {
        let payment_id = format!("certificate_{id}");
        let methods = field_mut(&mut user, "payment_methods")?;
        if methods.get(&payment_id).is_none() {
            let certificate = json!({
                "source": "certificate",
                "id": payment_id,
                "amount": Num::Float(amount.as_f64()).to_value(),
            });
            set(methods, &payment_id, certificate);
            data.put("users", user_id, &user)?;
            return Ok(format!(
                "Certificate {payment_id} added to user {user_id} with amount {}.",
                amount.to_python_string()
            ));
        }
    }
    Err("Too many certificates".to_owned())
}

/// `_payment_for_update`: checks and charges the user's payment method
/// `payment_id` for `total`, and adds a non-zero charge to the
/// reservation's payment history.
fn charge(
    user: &mut Value,
    reservation: &mut Value,
    payment_id: &str,
    total: Num,
) -> Result<(), String> {
    let Some(method) = field_mut(user, "payment_methods")?.get_mut(payment_id) else {
        return Err("Payment method not found".to_owned());
    };
    match str_field(method, "source")? {
        "certificate" => return Err("Certificate cannot be used to update reservation".to_owned()),
        "gift_card" => {
            let balance = num_field(method, "amount")?;
            if balance < total {
                return Err("Gift card balance is not enough".to_owned());
            }
            set(method, "amount", (balance - total).to_value());
        }
        _ => {}
    }
    if total != Num::Int(0) {
        list_mut(reservation, "payment_history")?.push(payment(payment_id, total));
    }
    Ok(())
}

/// The reservation `reservation_id` and the user who holds it.
fn reservation_and_user(
    data: &Data<'_>,
    reservation_id: &str,
) -> Result<(Value, String, Value), String> {
    let reservation = reservation(data, reservation_id)?;
    let user_id = str_field(&reservation, "user_id")?.to_owned();
    let user = user(data, &user_id)?;
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
    charge(
        &mut user,
        &mut reservation,
        payment_id,
        Num::Int(50) * extra,
    )?;
    set(&mut reservation, "total_baggages", total_baggages.clone());
    set(
        &mut reservation,
        "nonfree_baggages",
        nonfree_baggages.to_value(),
    );
    data.put("users", &user_id, &user)?;
    data.put("reservations", reservation_id, &reservation)?;
    Ok(dumps(&reservation))
}

fn update_reservation_flights(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let flights = build_all("FlightInfo", FLIGHT_INFO, kwargs.list("flights")?)?;
    let reservation_id = kwargs.str("reservation_id")?;
    let cabin = kwargs.str("cabin")?;
    let payment_id = kwargs.str("payment_id")?;
    let (mut reservation, user_id, mut user) = reservation_and_user(data, reservation_id)?;
    let travellers = passenger_count(&reservation)?;
    let same_cabin = str_field(&reservation, "cabin")? == cabin;
    let booked = field(&reservation, "flights")?
        .as_array()
        .ok_or("flights are not a list")?
        .clone();
    let mut total = Num::Int(0);
    let mut new_flights = Vec::with_capacity(flights.len());
    for info in &flights {
        let flight_number = str_field(info, "flight_number")?;
        let date = str_field(info, "date")?;
        let kept = booked.iter().find(|booked| {
            booked.get("flight_number") == info.get("flight_number")
                && booked.get("date") == info.get("date")
                && same_cabin
        });
        let chosen = match kept {
            Some(kept) => kept.clone(),
            None => {
                let record = flight(data, flight_number)?;
                let price = sellable_price(&record, flight_number, date, cabin, travellers)?;
                reservation_flight(&record, flight_number, date, price)?
            }
        };
        total = total + num_field(&chosen, "price")? * Num::Int(travellers as i64);
        new_flights.push(chosen);
    }
    let old = booked.iter().try_fold(Num::Int(0), |sum, flight| {
        Ok::<_, String>(sum + num_field(flight, "price")?)
    })?;
    total = total - old * Num::Int(travellers as i64);
    charge(&mut user, &mut reservation, payment_id, total)?;
    set(&mut reservation, "flights", Value::Array(new_flights));
    set(&mut reservation, "cabin", json!(cabin));
    data.put("users", &user_id, &user)?;
    data.put("reservations", reservation_id, &reservation)?;
    Ok(dumps(&reservation))
}

fn update_reservation_passengers(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let passengers = build_all("Passenger", PASSENGER, kwargs.list("passengers")?)?;
    let reservation_id = kwargs.str("reservation_id")?;
    let mut reservation = reservation(data, reservation_id)?;
    if passengers.len() != passenger_count(&reservation)? {
        return Err("Number of passengers does not match".to_owned());
    }
    set(&mut reservation, "passengers", Value::Array(passengers));
    data.put("reservations", reservation_id, &reservation)?;
    Ok(dumps(&reservation))
}

fn get_flight_status(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<String, String> {
    let flight_number = kwargs.str("flight_number")?;
    let date = kwargs.str("date")?;
    let record = flight(data, flight_number)?;
    Ok(str_field(flight_instance(&record, flight_number, date)?, "status")?.to_owned())
}
