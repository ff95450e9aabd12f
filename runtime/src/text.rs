//! Text that messages quote: an argument, a record, an endpoint's answer —
//! any of them as long as whoever sent it made it, cut so that the message
//! stays readable.

/// The first `most` characters of `text`, where it has more.
pub fn prefix(text: &str, most: usize) -> Option<&str> {
    text.char_indices().nth(most).map(|(cut, _)| &text[..cut])
}

/// `text` cut to `most` characters, an ellipsis marking the cut.
pub fn shortened(text: &str, most: usize) -> String {
    match prefix(text, most) {
        Some(kept) => format!("{kept}…"),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_at_a_character_not_a_byte() {
        assert_eq!(shortened("ééé", 2), "éé…");
        assert_eq!(shortened("éé", 2), "éé");
        assert_eq!(prefix("abc", 3), None);
    }
}
