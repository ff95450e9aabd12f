//! Stage 4: the tool graph. An edge u → v means an output field of u can feed
//! an argument of v (offline: by field name, which the doc format ties to
//! meaning — reference fields are named after the key they hold).

use crate::codegen;
use crate::doc::{DomainDoc, ToolKind};
use serde::Serialize;
use std::collections::BTreeSet;

#[derive(Debug, Clone, Serialize)]
pub struct ToolGraph {
    pub nodes: Vec<String>,
    /// (from, to, the fields that connect them).
    pub edges: Vec<(String, String, Vec<String>)>,
}

/// The fields a tool's result carries.
pub fn outputs(doc: &DomainDoc, tool: &crate::doc::ToolDoc) -> BTreeSet<String> {
    let collection = &doc.collections[&tool.collection];
    match tool.kind {
        ToolKind::Find | ToolKind::Delete => BTreeSet::from([collection.key_field.clone()]),
        _ => std::iter::once(collection.key_field.clone())
            .chain(collection.fields.keys().cloned())
            .collect(),
    }
}

/// The arguments a tool takes.
pub fn inputs(doc: &DomainDoc, tool: &crate::doc::ToolDoc) -> BTreeSet<String> {
    codegen::parameters(doc, tool)["properties"]
        .as_object()
        .map(|properties| properties.keys().cloned().collect())
        .unwrap_or_default()
}

pub fn build(doc: &DomainDoc) -> ToolGraph {
    let mut edges = Vec::new();
    for from in &doc.tools {
        let produced = outputs(doc, from);
        for to in &doc.tools {
            let shared: Vec<String> = inputs(doc, to).intersection(&produced).cloned().collect();
            if from.name != to.name && !shared.is_empty() {
                edges.push((from.name.clone(), to.name.clone(), shared));
            }
        }
    }
    ToolGraph {
        nodes: doc.tools.iter().map(|tool| tool.name.clone()).collect(),
        edges,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_feed_inputs_by_field() {
        let doc: DomainDoc =
            toml::from_str(include_str!("../../env-templates/domains/library.toml")).unwrap();
        let graph = build(&doc);
        let edge = |from: &str, to: &str| {
            graph
                .edges
                .iter()
                .find(|(a, b, _)| a == from && b == to)
                .map(|(_, _, fields)| fields.clone())
        };
        assert_eq!(
            edge("find_member_by_email", "get_member"),
            Some(vec!["member_id".to_owned()])
        );
        assert_eq!(
            edge("list_member_loans", "return_book"),
            Some(vec!["loan_id".to_owned()])
        );
        assert!(edge("get_book", "find_member_by_email").is_none());
    }
}
