//! The built-in example environment, embedded in the binary so that `forge`
//! works with no files at all.

use forge_runtime::bundle::{Bundle, Manifest, parse_tasks};

const COMPONENT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/example-shop.wasm"));
const MANIFEST: &str = include_str!("../env-templates/example/bundle/manifest.json");
const INITIAL_STATE: &str = include_str!("../env-templates/example/bundle/initial_state.json");
const TASKS: &str = include_str!("../env-templates/example/bundle/tasks.jsonl");

/// The example "shop" environment.
pub fn example_bundle() -> Bundle {
    let manifest: Manifest =
        serde_json::from_str(MANIFEST).expect("the embedded manifest is valid");
    let initial_state =
        serde_json::from_str(INITIAL_STATE).expect("the embedded initial state is valid");
    let tasks = parse_tasks(TASKS.as_bytes()).expect("the embedded tasks are valid");
    Bundle {
        manifest,
        wasm: COMPONENT.into(),
        initial_state,
        tasks,
    }
}
