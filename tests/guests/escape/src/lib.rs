//! A component that reaches for authority the sandbox never grants: files,
//! clocks and sockets. The host must refuse to load it and name the imports.

use forge_guest::{Args, Db, Tool, ToolResult, json};

fn no_params() -> forge_guest::Value {
    json!({"type": "object", "properties": {}, "additionalProperties": false})
}

fn read_file(_: &mut Db<'_>, _: &Args) -> ToolResult {
    std::fs::read_to_string("/etc/passwd")
        .map(|text| json!(text))
        .map_err(|err| err.to_string())
}

fn now(_: &mut Db<'_>, _: &Args) -> ToolResult {
    let elapsed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|err| err.to_string())?;
    Ok(json!(elapsed.as_secs()))
}

fn connect(_: &mut Db<'_>, _: &Args) -> ToolResult {
    std::net::TcpStream::connect("127.0.0.1:9")
        .map(|_| json!("connected"))
        .map_err(|err| err.to_string())
}

pub static TOOLS: &[Tool] = &[
    Tool {
        name: "read_file",
        description: "escape",
        parameters: no_params,
        run: read_file,
    },
    Tool {
        name: "now",
        description: "escape",
        parameters: no_params,
        run: now,
    },
    Tool {
        name: "connect",
        description: "escape",
        parameters: no_params,
        run: connect,
    },
];

forge_guest::export_environment!(TOOLS);
