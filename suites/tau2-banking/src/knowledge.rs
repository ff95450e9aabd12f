//! The knowledge base the agent searches: the "grep_only" retrieval
//! variant's `grep` tool (`GrepMixin.grep` over a `GrepRetriever`).
//!
//! The documents are collection `documents` of the state, `{title,
//! content}` keyed by id, which the host loads from the data directory.

use forge_tau_guest::toolkit::Answer;
use forge_tau_guest::{Data, Kwargs, type_name};
use regex::{Regex, RegexBuilder};
use serde::Deserialize;

/// The collection of the documents.
const DOCUMENTS: &str = "documents";

/// How many documents a search shows (`GrepSpec.top_k`).
const TOP_K: usize = 10;

#[derive(Deserialize)]
struct Document {
    title: String,
    content: String,
}

/// `grep(pattern)`: the documents whose content matches `pattern` (a
/// case-insensitive regex; one that does not compile is searched as plain
/// text, `re.escape`d), the ten with the most matches first (ties in the
/// store's id order), each shown whole.
pub fn grep(data: &mut Data<'_>, kwargs: &Kwargs) -> Result<Answer, String> {
    let pattern = kwargs.get("pattern")?;
    let Some(pattern) = pattern.as_str() else {
        return Err(format!(
            "'{}' object has no attribute 'strip'",
            type_name(pattern)
        ));
    };
    let hits = search(data, pattern)?;
    if hits.is_empty() {
        return Ok(Answer::Text(format!(
            "No matches found for pattern: {pattern}"
        )));
    }
    let shown: Vec<String> = hits
        .iter()
        .enumerate()
        .map(|(index, (id, document, matches))| {
            format!(
                "{}. {}\n   ID: {id}\n   Score: {matches}.0000\n   Content: {}\n",
                index + 1,
                document.title,
                document.content
            )
        })
        .collect();
    Ok(Answer::Text(shown.join("\n")))
}

/// `GrepRetriever.retrieve`: the best [`TOP_K`] documents by number of
/// matches, a stable sort keeping equal ones in store order; none for a
/// blank pattern.
fn search(data: &Data<'_>, pattern: &str) -> Result<Vec<(String, Document, usize)>, String> {
    if pattern.trim().is_empty() {
        return Ok(Vec::new());
    }
    let regex = compile(pattern);
    let mut hits: Vec<(String, Document, usize)> = data
        .scan::<Document>(DOCUMENTS)?
        .into_iter()
        .filter_map(|(id, document)| {
            let matches = regex.find_iter(&document.content).count();
            (matches > 0).then_some((id, document, matches))
        })
        .collect();
    hits.sort_by_key(|hit| std::cmp::Reverse(hit.2));
    hits.truncate(TOP_K);
    Ok(hits)
}

/// `re.compile(pattern, re.IGNORECASE)`, or the escaped pattern when it
/// does not compile.
fn compile(pattern: &str) -> Regex {
    let build = |pattern: &str| RegexBuilder::new(pattern).case_insensitive(true).build();
    build(pattern)
        .or_else(|_| build(&regex::escape(pattern)))
        .expect("an escaped pattern always compiles")
}

#[cfg(test)]
mod tests {
    use super::*;
    use forge_guest::{MemoryStore, Store};
    use serde_json::json;

    fn library() -> MemoryStore {
        let mut store = MemoryStore::default();
        for (id, title, content) in [
            ("doc_a", "Fees", "A fee, another FEE, and a fee (waived)."),
            ("doc_b", "Cards", "Card fee: one."),
            ("doc_c", "Other", "Nothing here."),
        ] {
            let record = json!({"title": title, "content": content});
            store.put(DOCUMENTS, id, &record.to_string()).unwrap();
        }
        store
    }

    fn run(store: &mut MemoryStore, pattern: serde_json::Value) -> Result<String, String> {
        let kwargs = Kwargs::parse(
            &json!({ "pattern": pattern }).to_string(),
            "KnowledgeTools.grep".to_owned(),
        )
        .unwrap();
        grep(&mut Data::new(store), &kwargs).map(|answer| answer.to_json_str())
    }

    /// Formats and ranking as the reference's `GrepMixin.grep` writes them.
    #[test]
    fn documents_are_ranked_by_matches() {
        let store = &mut library();
        assert_eq!(
            run(store, json!("fee")).unwrap(),
            "1. Fees\n   ID: doc_a\n   Score: 3.0000\n   Content: A fee, another FEE, and a fee (waived).\n\n\
             2. Cards\n   ID: doc_b\n   Score: 1.0000\n   Content: Card fee: one.\n"
        );
        // An unbalanced parenthesis is searched as text.
        assert!(
            run(store, json!("(waived"))
                .unwrap()
                .starts_with("1. Fees\n")
        );
        assert_eq!(
            run(store, json!("   ")).unwrap(),
            "No matches found for pattern:    "
        );
        assert_eq!(
            run(store, json!("zebra")).unwrap(),
            "No matches found for pattern: zebra"
        );
        assert_eq!(
            run(store, json!(5)).unwrap_err(),
            "'int' object has no attribute 'strip'"
        );
    }
}
