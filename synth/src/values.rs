//! Seeded value generators for initial states and for the new values users
//! ask for (a new phone number, a new address).

use rand::RngExt;
use rand_chacha::ChaCha8Rng;

/// The generator names a doc may use.
pub const GENERATORS: &[&str] = &[
    "person_name",
    "email",
    "phone",
    "title",
    "word",
    "company",
    "city",
    "street",
    "date",
    "birth_date",
    "time",
    "code",
];

pub fn is_generator(name: &str) -> bool {
    GENERATORS.contains(&name)
}

const FIRST_NAMES: &[&str] = &[
    "Ava", "Ben", "Carla", "Dev", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Kemi",
    "Liam", "Maya", "Noah", "Olga", "Pablo", "Quinn", "Rosa", "Sami", "Tara", "Umar", "Vera",
    "Wen", "Xavier", "Yara", "Zane", "Amara", "Bruno", "Chloe", "Diego", "Emeka", "Freya",
];
const LAST_NAMES: &[&str] = &[
    "Chen",
    "Okafor",
    "Mendes",
    "Patel",
    "Rossi",
    "Haddad",
    "Kim",
    "Tanaka",
    "Silva",
    "Berg",
    "Adeyemi",
    "Walsh",
    "Novak",
    "Garcia",
    "Ivanova",
    "Moreau",
    "Nguyen",
    "Schmidt",
    "Costa",
    "Lindqvist",
    "Mensah",
    "Park",
    "Dubois",
    "Kowalski",
    "Reyes",
    "Sato",
    "Fischer",
    "Ali",
];
const WORDS: &[&str] = &[
    "amber", "birch", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper",
    "kestrel", "lagoon", "meadow", "nimbus", "orchard", "prairie", "quartz", "river", "summit",
    "tundra", "umber", "valley", "willow", "zephyr", "aurora", "beacon", "canyon", "dune",
];
const TITLE_ADJECTIVES: &[&str] = &[
    "Silent", "Hidden", "Last", "Golden", "Broken", "Distant", "Crimson", "Quiet", "Endless",
    "Northern", "Paper", "Glass", "Wild", "Secret",
];
const TITLE_NOUNS: &[&str] = &[
    "Garden", "River", "Atlas", "Lantern", "Orchard", "Harbor", "Machine", "Island", "Empire",
    "Compass", "Winter", "Mirror", "Forest", "Signal",
];
const COMPANIES: &[&str] = &[
    "Acme",
    "Globex",
    "Initech",
    "Umbrella",
    "Stark",
    "Wayne",
    "Hooli",
    "Vandelay",
    "Soylent",
    "Cyberdyne",
    "Tyrell",
    "Wonka",
];
const CITIES: &[&str] = &[
    "Springfield",
    "Riverton",
    "Lakeside",
    "Fairview",
    "Brookfield",
    "Greenville",
    "Maplewood",
    "Oakridge",
    "Hillcrest",
    "Westport",
    "Eastbourne",
    "Northgate",
];
const STREETS: &[&str] = &[
    "Main St", "Oak Ave", "Maple Rd", "Cedar Ln", "Elm St", "Pine Ave", "Lake Rd", "Hill St",
    "Park Ave", "River Rd",
];

/// A string from generator `name`. `context` is the record built so far, for
/// generators that derive from other fields (an email from the name).
pub fn generate(
    name: &str,
    rng: &mut ChaCha8Rng,
    context: &serde_json::Map<String, serde_json::Value>,
) -> String {
    match name {
        "person_name" => format!("{} {}", pick(rng, FIRST_NAMES), pick(rng, LAST_NAMES)),
        "email" => {
            let local = match context.get("name").and_then(|name| name.as_str()) {
                Some(full) => full.to_lowercase().replace(' ', "."),
                None => format!(
                    "{}.{}",
                    pick(rng, FIRST_NAMES).to_lowercase(),
                    pick(rng, LAST_NAMES).to_lowercase()
                ),
            };
            format!("{local}{}@example.com", rng.random_range(1..100))
        }
        "phone" => format!("555-{:04}", rng.random_range(0..10_000)),
        "title" => format!(
            "The {} {}",
            pick(rng, TITLE_ADJECTIVES),
            pick(rng, TITLE_NOUNS)
        ),
        "company" => format!(
            "{} {}",
            pick(rng, COMPANIES),
            pick(rng, &["Ltd", "Inc", "Group", "Labs", "Co"])
        ),
        "city" => pick(rng, CITIES).to_owned(),
        "street" => format!("{} {}", rng.random_range(1..999), pick(rng, STREETS)),
        "date" => format!(
            "2026-{:02}-{:02}",
            rng.random_range(1..=12),
            rng.random_range(1..=28)
        ),
        // Of an adult: no patient born this year.
        "birth_date" => format!(
            "{}-{:02}-{:02}",
            rng.random_range(1940..=2007),
            rng.random_range(1..=12),
            rng.random_range(1..=28)
        ),
        "time" => format!(
            "{:02}:{}",
            rng.random_range(8..=18),
            pick(rng, &["00", "15", "30", "45"])
        ),
        "code" => format!(
            "{}{}-{:04}",
            char::from(b'A' + rng.random_range(0..26u8)),
            char::from(b'A' + rng.random_range(0..26u8)),
            rng.random_range(0..10_000)
        ),
        _ => pick(rng, WORDS).to_owned(),
    }
}

fn pick<'a>(rng: &mut ChaCha8Rng, items: &[&'a str]) -> &'a str {
    items[rng.random_range(0..items.len())]
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn dates_of_birth_are_an_adults_and_other_dates_this_years() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let record = serde_json::Map::new();
        for _ in 0..200 {
            let born = generate("birth_date", &mut rng, &record);
            let year: u32 = born[..4].parse().unwrap();
            assert!((1940..=2007).contains(&year), "{born}");
            assert!(generate("date", &mut rng, &record).starts_with("2026-"));
        }
    }
}
